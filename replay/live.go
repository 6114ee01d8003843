package replay

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tandemdb/tandem/compare"
	"github.com/tandemdb/tandem/sqlinfo"
	"github.com/tandemdb/tandem/store"
)

// Shadow is what a live replay (RunLive) follows and how.
type Shadow struct {
	// Reader is a live reader of the capture being written
	// (store.Writer.Live); From is the first record to replay.
	Reader *store.Reader
	From   uint64
	// Drain, once closed, makes the shadow replay every record committed
	// by then and end; cancelling RunLive's context ends it at once.
	Drain <-chan struct{}
	// MaxLag: a shadow further behind the capture than this skips ahead,
	// at transaction boundaries, until it is within half of it (0: never).
	MaxLag time.Duration
	// ReadOnly sends no writes (for a shadow not cloned from the primary);
	// reads of tables written since the start are then ambiguous.
	ReadOnly bool
	// Observe, if set, gets each compared statement's class and its
	// latency on the primary (as captured) and on the shadow.
	Observe func(class string, primary, shadow time.Duration)
}

// LiveStats is a shadow's state, for its status line and metrics.
type LiveStats struct {
	Up bool
	// Down says why the shadow is down ("" while up).
	Down string
	// Seq is the last record dispatched; LagRecords how many committed
	// records are not finished yet (held by workers, or not dispatched);
	// LagSeconds how far behind the capture the oldest unfinished record
	// is.
	Seq        uint64
	LagRecords uint64
	LagSeconds float64
	Lagging    bool
	// Skipped counts the records not replayed because the shadow was
	// behind (--shadow-max-lag) or in read-only mode; SkippedWrites those
	// of them that wrote (their tables are ambiguous afterwards).
	Skipped, SkippedWrites uint64
	// Compared with the primary's captured responses. Unavailable:
	// statements the shadow could not run for a reason of its own (down,
	// connection lost), counted apart, their writes marked as skipped.
	Compared, Nondeterministic, Unavailable int64
	Divergent                               map[string]int64 // by class
	Ambiguous                               map[string]int64 // by reason
}

// live is a live replay's state, shared by its runner and workers.
type live struct {
	sh   Shadow
	sc   *scanner
	from uint64

	rn          atomic.Pointer[runner]
	seq         atomic.Uint64 // last dispatched
	skipped     atomic.Uint64
	skipWrites  atomic.Uint64
	unavailable atomic.Int64
	lagging     atomic.Bool
	// trx follows each session's transactions as captured, and skipTrx
	// the sessions whose transaction is left out; follow's own (skip).
	trx     map[uint64]*sqlinfo.Trx
	skipTrx map[uint64]bool

	// flight holds the records dispatched and not finished, in dispatch
	// order, with their captured end: the oldest is how far behind the
	// shadow is.
	flight struct {
		sync.Mutex
		q    []inflight
		done map[uint64]bool
	}

	mu struct {
		sync.Mutex
		tally *compare.Tally
		src   *histories
		// classOf remembers the recent records' verdicts, so that a
		// retried or rerun record's final outcome replaces its first.
		classOf map[uint64]verdict
		fifo    []uint64
	}
}

type verdict struct {
	class  string // "" equal
	reason string // ambiguous for this reason
	nondet bool
}

const liveMemory = 1 << 16 // verdicts remembered for replacement

type inflight struct {
	seq uint64
	end int64 // captured end, ns
}

// dispatched notes a record handed to a worker.
func (l *live) dispatched(rec *store.Record) {
	l.flight.Lock()
	end := rec.Start.UnixNano() + int64(rec.Duration)
	l.flight.q = append(l.flight.q, inflight{rec.Seq, end})
	l.flight.Unlock()
}

// finished notes a record a worker is done with.
func (l *live) finished(seq uint64) {
	l.flight.Lock()
	if len(l.flight.q) > 0 && l.flight.q[0].seq == seq {
		l.flight.q = l.flight.q[1:]
	} else {
		l.flight.done[seq] = true
	}
	l.popDone()
	l.flight.Unlock()
}

func (l *live) popDone() {
	for len(l.flight.q) > 0 && l.flight.done[l.flight.q[0].seq] {
		delete(l.flight.done, l.flight.q[0].seq)
		l.flight.q = l.flight.q[1:]
	}
}

// lag is how far behind the capture the shadow is: from the captured end
// of the oldest record it has not finished to now (0 with none), and how
// many records it holds unfinished.
func (l *live) lag(now time.Time) (time.Duration, int) {
	l.flight.Lock()
	defer l.flight.Unlock()
	l.popDone()
	if len(l.flight.q) == 0 {
		return 0, 0
	}
	return max(now.Sub(time.Unix(0, l.flight.q[0].end)), 0), len(l.flight.q) - len(l.flight.done)
}

// Live is a running live replay: a shadow.
type Live struct {
	Name string
	l    *live
	done chan struct{}
	res  Result
	err  error
}

// RunLive starts replaying a capture while it is written, against one
// target (cfg.Targets[0]): every record as it is committed, with the
// replay engine (sessions, prepared statements, the capture's order,
// client error handling), each outcome compared at once with the
// primary's captured response. Wait returns the run's report once
// sh.Drain or ctx ends it. The run directory cfg.RunDir holds what a
// replay's does.
func RunLive(ctx context.Context, cfg Config, sh Shadow) (*Live, error) {
	if sh.Reader == nil {
		return nil, errors.New("replay: a shadow needs a live reader of the capture")
	}
	if len(cfg.Targets) != 1 {
		return nil, fmt.Errorf("replay: a shadow replays onto one target, not %d", len(cfg.Targets))
	}
	// As fast as the order allows: records arrive as they happen. Go's
	// poller, so that shadows take no threads from the proxy.
	cfg.Speed, cfg.Concurrency, cfg.Loop, cfg.Duration, cfg.IO = 0, 0, 1, 0, IOPoller
	if cfg.Order == "" {
		cfg.Order = OrderCapture
	}
	an := sqlinfo.NewAnalyzer()
	l := &live{sh: sh, sc: newScanner(an), from: max(sh.From, 1), skipTrx: map[uint64]bool{}, trx: map[uint64]*sqlinfo.Trx{}}
	l.flight.done = map[uint64]bool{}
	l.mu.classOf = map[uint64]verdict{}
	lv := &Live{Name: cfg.Targets[0].Name, l: l, done: make(chan struct{})}
	go func() {
		defer close(lv.done)
		lv.res, lv.err = run(ctx, cfg, nil, &runState{src: l, obs: l}, nil)
	}()
	return lv, nil
}

// Wait waits for the shadow to end and returns its result.
func (lv *Live) Wait() (Result, error) {
	<-lv.done
	return lv.res, lv.err
}

// Done is closed when the shadow has ended.
func (lv *Live) Done() <-chan struct{} { return lv.done }

// Stats returns the shadow's state now.
func (lv *Live) Stats() LiveStats {
	l := lv.l
	lag, held := l.lag(time.Now())
	st := LiveStats{Seq: l.seq.Load(), LagSeconds: lag.Seconds(), Lagging: l.lagging.Load(),
		Skipped: l.skipped.Load(), SkippedWrites: l.skipWrites.Load(), Unavailable: l.unavailable.Load(), Up: true}
	st.LagRecords = uint64(held)
	if d := l.sh.Reader.DurableSeq(); d > st.Seq {
		st.LagRecords += d - st.Seq
	}
	if rn := l.rn.Load(); rn != nil {
		if why := rn.failed(); why != "" {
			st.Up, st.Down = false, why
		} else if why := rn.downReason(); why != "" {
			st.Up, st.Down = false, why
		}
	}
	l.mu.Lock()
	if t := l.mu.tally; t != nil {
		st.Compared, st.Nondeterministic = t.D.Compared, t.D.Nondeterministic
		st.Divergent = maps.Clone(t.D.ByClass)
		st.Ambiguous = maps.Clone(t.D.AmbiguousBy)
	}
	l.mu.Unlock()
	return st
}

// note compares one final outcome with the captured response at once.
// A record noted again (its transaction retried or rerun) replaces its
// earlier verdict.
func (l *live) note(rn *runner, j *job, o *store.Outcome) {
	rec := j.rec
	if o.Flags&store.OutcomeTrxFailed != 0 && j.info != nil {
		// A write of a transaction that failed for good here (run and
		// rolled back, or not run): the shadow's tables lack it from now on.
		l.sc.x.gaps.AddFailed(rec.Session, rec.Start.UnixNano()+int64(rec.Duration), qualify(j.info.Writes, rec.Schema, nil))
	}
	switch vsCapture(rec, o) {
	case capturedNone, capturedSkipped:
		return
	case capturedUnanswered:
		// Not the engine's answer: the shadow was down or lost the
		// connection. A write may not have run: its tables are ambiguous
		// from here on.
		l.unavailable.Add(1)
		if info := rn.an.Info(j.sql); info.Class == sqlinfo.ClassWrite || info.TableDDL {
			l.sc.x.gaps.Add(rec.Session, rec.Start.UnixNano(), qualify(info.Writes, rec.Schema, nil))
		}
		return
	}
	class, nondet := compare.ClassifyCaptured(&rec.Resp, o)
	// After judging it: a write the shadow's engine failed (and the
	// primary did not) leaves the shadow's tables unlike the primary's;
	// later differences there follow from it and are counted apart.
	defer l.trackWrites(rn, j, o)
	v := verdict{class: class, nondet: nondet}
	if l.sh.Observe != nil && j.info != nil && rec.Kind != store.KindFetch {
		l.sh.Observe(j.info.Class.String(), rec.Duration, o.Service)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.tally == nil {
		l.mu.src = newHistories(l.sh.Reader, rn.an)
		l.mu.tally = compare.NewTally(0, l.sc.x.commits, l.mu.src)
		l.mu.tally.Gaps = l.sc.x.gaps
	}
	t := l.mu.tally
	if class != "" {
		l.mu.src.forget(rec.Session) // the session has grown since it was read
		st, ok := l.mu.src.Statement(o.Seq)
		if _, reason := t.Judge(o.Seq, st, ok, compare.OrderOf(o)); reason != "" {
			v.reason = reason
		}
	}
	if old, seen := l.mu.classOf[o.Seq]; seen {
		l.count(old, -1)
	} else {
		l.mu.fifo = append(l.mu.fifo, o.Seq)
		if len(l.mu.fifo) > liveMemory {
			delete(l.mu.classOf, l.mu.fifo[0])
			l.mu.fifo = l.mu.fifo[1:]
		}
	}
	l.mu.classOf[o.Seq] = v
	l.count(v, 1)
}

// trackWrites marks the tables of a write the shadow's engine failed
// where the primary's succeeded: the shadow lacks it from then on. (A
// transaction that failed for good comes flagged, each of its writes
// marked in note.)
func (l *live) trackWrites(rn *runner, j *job, o *store.Outcome) {
	rec := j.rec
	if rec.Kind == store.KindFetch || o.ErrCode == 0 || rec.Resp.Kind == store.RespError || o.Flags&store.OutcomeTrxFailed != 0 {
		return
	}
	if info := rn.an.Info(j.sql); info.Class == sqlinfo.ClassWrite || info.TableDDL {
		l.sc.x.gaps.AddFailed(rec.Session, rec.Start.UnixNano()+int64(rec.Duration), qualify(info.Writes, rec.Schema, nil))
	}
}

func (l *live) count(v verdict, d int64) {
	t := l.mu.tally
	t.D.Compared += d
	if v.nondet {
		t.D.Nondeterministic += d
	}
	switch {
	case v.class == "":
	case v.reason != "":
		t.D.Ambiguous += d
		if t.D.AmbiguousBy == nil {
			t.D.AmbiguousBy = map[string]int64{}
		}
		t.D.AmbiguousBy[v.reason] += d
	default:
		t.D.ByClass[v.class] += d
	}
}

// A shadow is its run's source and observer (see source): the capture it
// follows, and each outcome compared at once with the primary's.

func (l *live) reader(*Config) (*store.Reader, func(), error) {
	return l.sh.Reader, func() {}, nil // the capture being written; its writer closes it
}

func (l *live) index(context.Context, *store.Reader) (*captureIndex, *sqlinfo.Analyzer, error) {
	return l.sc.x, l.sc.an, nil // indexed as it is followed
}

func (l *live) records(ctx context.Context, rn *runner, body func(rec *store.Record, loop int) bool) error {
	err := l.follow(ctx, rn, body)
	l.sc.finish()
	return err
}

func (l *live) followed() bool { return true }

func (l *live) started(rn *runner) { l.rn.Store(rn) }

func (l *live) outcome(rn *runner, j *job, o *store.Outcome) { l.note(rn, j, o) }

// follow feeds the live capture's records to body, indexing each first,
// until the shadow is drained or ctx ends. Behind by more than MaxLag, it
// skips what it can at transaction boundaries (keeping every session's
// connects, schema changes and prepared statements), counts it, and marks
// the tables of skipped writes, so later differences there are ambiguous.
func (l *live) follow(ctx context.Context, rn *runner, body func(rec *store.Record, loop int) bool) error {
	r := l.sh.Reader
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if l.sh.Drain != nil {
		// Replay what is committed then, and stop.
		r.EndOnDrain(fctx, l.sh.Drain, func(target uint64) bool { return l.seq.Load() >= target || rn.failed() != "" }, cancel)
	}
	for rec, err := range r.Follow(fctx, l.from) {
		if err != nil {
			return err
		}
		l.sc.add(rec)
		// A shadow that is down waits, retrying with backoff, and then
		// catches up from the log: the primary never notices.
		l.waitUp(fctx, rn)
		lag, _ := l.lag(time.Now())
		if lag == 0 {
			lag = max(time.Since(rec.Start.Add(rec.Duration)), 0)
		}
		if l.sh.MaxLag > 0 {
			switch {
			case lag > l.sh.MaxLag && !l.lagging.Load():
				l.lagging.Store(true)
				rn.cfg.Logger.Warn("shadow is behind; skipping ahead at transaction boundaries", "shadow", rn.t.Name, "lag", lag.Round(time.Millisecond), "max_lag", l.sh.MaxLag)
			case lag < l.sh.MaxLag/2 && l.lagging.Load():
				l.lagging.Store(false)
				rn.cfg.Logger.Info("shadow caught up", "shadow", rn.t.Name, "skipped", l.skipped.Load())
			}
		}
		if l.skip(rn, rec) {
			l.seq.Store(rec.Seq)
			continue
		}
		l.dispatched(rec)
		if !body(rec, 0) {
			return nil
		}
		l.seq.Store(rec.Seq)
	}
	return nil
}

// skip decides whether a record is left out: when lagging, statements
// on their own and whole transactions that begin while lagging (as the
// session's server saw them: BEGIN … COMMIT, or autocommit=0's implicit
// ones, sqlinfo.Trx); in read-only mode, every write. Session state always
// replays.
func (l *live) skip(rn *runner, rec *store.Record) bool {
	tx := l.trx[rec.Session]
	if tx == nil {
		tx = &sqlinfo.Trx{}
		l.trx[rec.Session] = tx
	}
	var sql string
	switch rec.Kind {
	case store.KindQuit:
		delete(l.trx, rec.Session)
		delete(l.skipTrx, rec.Session)
		return false
	case store.KindConnect, store.KindChangeUser, store.KindResetConnection:
		tx.Reset()
		l.skipTrx[rec.Session] = false
		return false
	case store.KindQuery:
		sql = rec.SQL
	case store.KindExecute:
		sql = l.sc.preparedSQL(rec.Session, rec.StmtID) // the scan indexed its prepare
	default:
		return false
	}
	info := rn.an.Info(sql)
	step := tx.Apply(info, capturedError(rec))
	if info.Set || info.Use {
		return false // session state (SET autocommit=1 left out would leave the session's work uncommitted)
	}
	writes := info.Class == sqlinfo.ClassWrite || info.TableDDL || info.WritesUnknown
	drop := l.sh.ReadOnly && writes
	if !drop {
		// A transaction open before the lag began runs to its end; one
		// that begins while lagging is left out whole, its end included.
		if step.Opened || !step.In {
			l.skipTrx[rec.Session] = l.lagging.Load()
		}
		drop = l.skipTrx[rec.Session]
		if !step.In || step.End != sqlinfo.EndNone {
			l.skipTrx[rec.Session] = false
		}
	}
	if !drop {
		return false
	}
	l.skipped.Add(1)
	if writes {
		l.skipWrites.Add(1)
		l.sc.x.gaps.Add(rec.Session, rec.Start.UnixNano(), qualify(info.Writes, rec.Schema, nil))
	}
	return true
}

// waitUp holds the feed while the shadow's target is down (its last
// connection attempt failed), probing it with backoff.
func (l *live) waitUp(ctx context.Context, rn *runner) {
	backoff := 100 * time.Millisecond
	for rn.downReason() != "" && ctx.Err() == nil && rn.failed() == "" {
		sleepUntil(ctx, time.Now().Add(backoff))
		backoff = min(2*backoff, 5*time.Second)
		rn.probe(ctx)
	}
}
