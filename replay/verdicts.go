package replay

import (
	"maps"
	"sync"

	"github.com/tandemdb/tandem/compare"
	"github.com/tandemdb/tandem/sqlinfo"
	"github.com/tandemdb/tandem/store"
)

// Verdicts compares a followed run's outcomes with the primary's captured
// responses as they come (a shadow's live counts; the run's report
// compares again, whole, at its end). It is safe for concurrent use.
type Verdicts struct {
	f  *Feed
	mu sync.Mutex
	// tally is made at the first comparison (the run's index exists by
	// then); src reads the sessions' histories from the capture.
	tally       *compare.Tally
	src         *histories
	unavailable int64
	// classOf remembers the recent records' verdicts, so that a retried
	// or rerun record's final outcome replaces its first.
	classOf map[uint64]verdict
	fifo    []uint64
}

type verdict struct {
	class  string // "" equal
	reason string // ambiguous for this reason
	nondet bool
	// unanswered: not the engine's answer (the target down, the
	// connection lost), counted apart.
	unanswered bool
}

const verdictMemory = 1 << 16 // verdicts remembered for replacement

// VerdictCounts is what Verdicts has counted.
type VerdictCounts struct {
	// Compared with the primary's captured responses. Unavailable:
	// statements the target could not run for a reason of its own (down,
	// connection lost), counted apart, their writes marked as not
	// replayed.
	Compared, Nondeterministic, Unavailable int64
	Divergent                               map[string]int64 // by class
	Ambiguous                               map[string]int64 // by reason
}

// NewVerdicts compares the outcomes of the run f feeds.
func NewVerdicts(f *Feed) *Verdicts {
	return &Verdicts{f: f, classOf: map[uint64]verdict{}}
}

// Note compares one outcome with its captured response. A record noted
// again (its transaction retried or rerun) replaces its earlier verdict.
// It reports whether the outcome was compared: false for records without
// a captured response, records not run, and outcomes that are not the
// engine's answer (the target down, the connection lost).
func (v *Verdicts) Note(d Done) bool {
	rec, o, f := d.Rec, d.Outcome, v.f
	if o.Flags&store.OutcomeTrxFailed != 0 && d.Info != nil {
		// A write of a transaction that failed for good here (run and
		// rolled back, or not run): the target's tables lack it from now on.
		f.Lacks(rec, d.Info)
	}
	switch vsCapture(rec, o) {
	case capturedNone, capturedSkipped, capturedOpenAtStart:
		return false
	case capturedUnanswered:
		// Not the engine's answer: the target was down or lost the
		// connection. A write may not have run: its tables are ambiguous
		// from here on.
		v.mu.Lock()
		v.set(o.Seq, verdict{unanswered: true})
		v.mu.Unlock()
		if info := f.sc.an.Info(d.SQL); isWrite(info) {
			f.LeftOut(rec, info)
		}
		return false
	}
	class, nondet := compare.ClassifyCaptured(&rec.Resp, o)
	// After judging it: a write the target's engine failed (and the
	// primary did not) leaves the target's tables unlike the primary's;
	// later differences there follow from it and are counted apart.
	defer v.trackWrites(d)
	vd := verdict{class: class, nondet: nondet}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.tally == nil {
		v.src = newHistories(f.r, f.sc.an)
		if rn := f.rn.Load(); rn != nil {
			// The target's keys, as the final comparison has them
			// (results.go): an ORDER BY of one leaves no ties.
			v.src.live = rn.live
		}
		v.tally = compare.NewTally(0, f.sc.x.commits, v.src)
		v.tally.Gaps, v.tally.BeforeStart, v.tally.Chosen = f.sc.x.gaps, true, f.sc.x.chosen
	}
	if class != "" {
		v.src.forget(rec.Session) // the session has grown since it was read
		st, ok := v.src.Statement(o.Seq)
		if _, reason := v.tally.JudgeDiff(o.Seq, class, st, ok, compare.OrderOf(o)); reason != "" {
			vd.reason = reason
		}
	}
	v.set(o.Seq, vd)
	return true
}

// set counts the verdict on the outcome seq, in place of the one it had
// (a transaction retried or run again): a record is counted once,
// compared or unanswered. v.mu is held.
func (v *Verdicts) set(seq uint64, vd verdict) {
	if old, seen := v.classOf[seq]; seen {
		v.count(old, -1)
	} else {
		v.fifo = append(v.fifo, seq)
		if len(v.fifo) > verdictMemory {
			delete(v.classOf, v.fifo[0])
			v.fifo = v.fifo[1:]
		}
	}
	v.classOf[seq] = vd
	v.count(vd, 1)
}

func isWrite(info *sqlinfo.Info) bool { return info.Class == sqlinfo.ClassWrite || info.TableDDL }

// trackWrites marks the tables of a write the target's engine failed
// where the primary's succeeded: the target lacks it from then on. (A
// transaction that failed for good comes flagged, each of its writes
// marked in Note.)
func (v *Verdicts) trackWrites(d Done) {
	rec, o := d.Rec, d.Outcome
	if rec.Kind == store.KindFetch || o.ErrCode == 0 || rec.Resp.Kind == store.RespError || o.Flags&store.OutcomeTrxFailed != 0 {
		return
	}
	if info := v.f.sc.an.Info(d.SQL); isWrite(info) {
		v.f.Lacks(rec, info)
	}
}

func (v *Verdicts) count(vd verdict, d int64) {
	if vd.unanswered {
		v.unavailable += d
		return
	}
	t := v.tally
	t.D.Compared += d
	if vd.nondet {
		t.D.Nondeterministic += d
	}
	switch {
	case vd.class == "":
	case vd.reason != "":
		t.D.Ambiguous += d
		if t.D.AmbiguousBy == nil {
			t.D.AmbiguousBy = map[string]int64{}
		}
		t.D.AmbiguousBy[vd.reason] += d
	default:
		t.D.ByClass[vd.class] += d
	}
}

// Counts returns what has been counted so far.
func (v *Verdicts) Counts() VerdictCounts {
	v.mu.Lock()
	defer v.mu.Unlock()
	c := VerdictCounts{Unavailable: v.unavailable}
	if t := v.tally; t != nil {
		c.Compared, c.Nondeterministic = t.D.Compared, t.D.Nondeterministic
		c.Divergent = maps.Clone(t.D.ByClass)
		c.Ambiguous = maps.Clone(t.D.AmbiguousBy)
	}
	return c
}
