package shadow

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tandemdb/tandem/replay"
	"github.com/tandemdb/tandem/sqlinfo"
	"github.com/tandemdb/tandem/store"
)

// A shadow is a replay run that follows the capture while it is written
// (replay.Follow): its follower is the run's Source (what of the capture
// is replayed: everything, unless the shadow is behind or read-only) and
// its Observer (how far behind it is, and each outcome compared at once
// with the primary's, replay.Verdicts).

// follow is what a shadow follows and how.
type follow struct {
	// reader is a live reader of the capture being written
	// (store.Writer.Live); from the first record to replay.
	reader *store.Reader
	from   uint64
	// drain, once closed, makes the shadow replay every record committed
	// by then and end; cancelling the run's context ends it at once.
	drain <-chan struct{}
	// maxLag: a shadow further behind the capture than this skips ahead,
	// at transaction boundaries, until it is within half of it (0: never).
	maxLag time.Duration
	// readOnly sends no writes (for a shadow not cloned from the primary);
	// reads of tables written since the start are then ambiguous.
	readOnly bool
	// observe, if set, gets each compared statement's class and its
	// latency on the primary (as captured) and on the shadow.
	observe func(class string, primary, shadow time.Duration)
	// keepCommits: how long before the oldest record not yet finished
	// (or the newest seen) the capture's commits are kept for the
	// verdicts (0: defaultKeepCommits).
	keepCommits time.Duration
}

// defaultKeepCommits is how long before what it replays a shadow keeps
// the capture's commits: a difference in a statement whose transaction
// began further back is counted order-ambiguous rather than judged
// without them. A shadow runs as long as its proxy, and kept every commit
// it saw, 32 bytes per commit and table: 5 GB a day at 1,000 transactions
// a second on two tables each. Ten minutes of that is 38 MB.
const defaultKeepCommits = 10 * time.Minute

// forgetEvery is how many records a shadow indexes between two lettings
// go of old commits.
const forgetEvery = 4096

// stats is a shadow's state, for its status line and metrics.
type stats struct {
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
	replay.VerdictCounts
}

// follower is a running shadow: replay.Follow's source and observer.
type follower struct {
	name string
	opt  follow
	feed atomic.Pointer[replay.Feed]
	vs   atomic.Pointer[replay.Verdicts]
	done chan struct{}
	res  replay.Result
	err  error

	seq        atomic.Uint64 // last dispatched
	skipped    atomic.Uint64
	skipWrites atomic.Uint64
	lagging    atomic.Bool
	// trx follows each session's transactions as captured, and skipTrx
	// the sessions whose transaction is left out (skip's own).
	trx     map[uint64]*sqlinfo.Trx
	skipTrx map[uint64]bool
	// cursorLeftOut: per session, the prepared statements whose last
	// execute was left out: their fetches are left out with it (the
	// target has no such cursor open).
	cursorLeftOut map[uint64]map[uint32]bool
	// longData: per session, the long data (COM_STMT_SEND_LONG_DATA,
	// clones, in order) whose execute has not come yet: sent with it, or
	// left out with it (admit). Sent at once, the long data of an execute
	// left out stayed on the target's statement and went with its next
	// execute, whose parameter then held both.
	longData map[uint64][]*store.Record
	out      []*store.Record // admit's result, reused

	// flight holds the records dispatched and not finished, in dispatch
	// order, with their captured end: the oldest is how far behind the
	// shadow is.
	flight struct {
		sync.Mutex
		q    []inflight
		done map[uint64]bool
	}
}

type inflight struct {
	seq        uint64
	start, end int64 // captured start and end, ns
}

func newFollower(name string, opt follow) *follower {
	fl := &follower{name: name, opt: opt, done: make(chan struct{}), trx: map[uint64]*sqlinfo.Trx{}, skipTrx: map[uint64]bool{}, cursorLeftOut: map[uint64]map[uint32]bool{},
		longData: map[uint64][]*store.Record{}}
	fl.opt.from = max(fl.opt.from, 1)
	fl.flight.done = map[uint64]bool{}
	return fl
}

// startFollower starts a shadow onto cfg.Targets[0]; wait returns its
// result once opt.drain or ctx ends it.
func startFollower(ctx context.Context, cfg replay.Config, opt follow) *follower {
	fl := newFollower(cfg.Targets[0].Name, opt)
	go func() {
		defer close(fl.done)
		fl.res, fl.err = replay.Follow(ctx, cfg, fl, fl)
		if fl.err != nil && ctx.Err() == nil && cfg.Logger != nil {
			// Said now, not only when the capture stops.
			cfg.Logger.Error("shadow stopped", "shadow", fl.name, "err", fl.err)
		}
	}()
	return fl
}

// wait waits for the shadow to end and returns its result.
func (fl *follower) wait() (replay.Result, error) {
	<-fl.done
	return fl.res, fl.err
}

// Reader is the capture followed (replay.Source).
func (fl *follower) Reader() *store.Reader { return fl.opt.reader }

// Started (replay.Observer).
func (fl *follower) Started(f *replay.Feed) {
	fl.feed.Store(f)
	fl.vs.Store(replay.NewVerdicts(f))
}

// Finished notes a record a worker is done with (replay.Observer).
func (fl *follower) Finished(seq uint64) {
	fl.flight.Lock()
	if len(fl.flight.q) > 0 && fl.flight.q[0].seq == seq {
		fl.flight.q = fl.flight.q[1:]
	} else {
		fl.flight.done[seq] = true
	}
	fl.popDone()
	fl.flight.Unlock()
}

// Outcome compares one final outcome with the captured response at once
// (replay.Observer).
func (fl *follower) Outcome(d replay.Done) {
	if fl.vs.Load().Note(d) && fl.opt.observe != nil && d.Info != nil && d.Rec.Kind != store.KindFetch {
		fl.opt.observe(d.Info.Class.String(), d.Rec.Duration, d.Outcome.Service)
	}
}

// forgetCommits lets go of the commits that ended keepCommits before the
// oldest record dispatched and not finished, or before rec (the newest
// indexed) when none is: the verdicts of what is still to finish need
// what came shortly before it, not the whole capture. It returns how many
// entries went.
func (fl *follower) forgetCommits(f *replay.Feed, rec *store.Record) int {
	keep := fl.opt.keepCommits
	if keep <= 0 {
		keep = defaultKeepCommits
	}
	oldest := rec.Start.UnixNano()
	fl.flight.Lock()
	for _, r := range fl.flight.q { // in dispatch order, not by start
		oldest = min(oldest, r.start)
	}
	fl.flight.Unlock()
	n := f.ForgetCommits(oldest - int64(keep))
	if n > 0 {
		f.Logger().Debug("shadow let go of old commits", "shadow", f.Target(), "entries", n, "before", time.Unix(0, oldest-int64(keep)).UTC())
	}
	return n
}

// dispatched notes a record handed to a worker.
func (fl *follower) dispatched(rec *store.Record) {
	fl.flight.Lock()
	start := rec.Start.UnixNano()
	fl.flight.q = append(fl.flight.q, inflight{rec.Seq, start, start + int64(rec.Duration)})
	fl.flight.Unlock()
}

func (fl *follower) popDone() {
	for len(fl.flight.q) > 0 && fl.flight.done[fl.flight.q[0].seq] {
		delete(fl.flight.done, fl.flight.q[0].seq)
		fl.flight.q = fl.flight.q[1:]
	}
}

// lag is how far behind the capture the shadow is: from the captured end
// of the oldest record it has not finished to now (0 with none), and how
// many records it holds unfinished.
func (fl *follower) lag(now time.Time) (time.Duration, int) {
	fl.flight.Lock()
	defer fl.flight.Unlock()
	fl.popDone()
	if len(fl.flight.q) == 0 {
		return 0, 0
	}
	return max(now.Sub(time.Unix(0, fl.flight.q[0].end)), 0), len(fl.flight.q) - len(fl.flight.done)
}

// stats returns the shadow's state now.
func (fl *follower) stats() stats {
	lag, held := fl.lag(time.Now())
	st := stats{Seq: fl.seq.Load(), LagSeconds: lag.Seconds(), Lagging: fl.lagging.Load(),
		Skipped: fl.skipped.Load(), SkippedWrites: fl.skipWrites.Load(), Up: true}
	st.LagRecords = uint64(held)
	if d := fl.opt.reader.DurableSeq(); d > st.Seq {
		st.LagRecords += d - st.Seq
	}
	select {
	case <-fl.done:
		// The run ended on its own: an error before it could replay
		// anything (its run directory) or after. Not up, whatever the
		// feed says.
		if fl.err != nil {
			st.Up, st.Down = false, "stopped: "+fl.err.Error()
			return st
		}
	default:
	}
	if f := fl.feed.Load(); f != nil {
		if why := f.Failed(); why != "" {
			st.Up, st.Down = false, why
		} else if why := f.Down(); why != "" {
			st.Up, st.Down = false, why
		}
	}
	if vs := fl.vs.Load(); vs != nil {
		st.VerdictCounts = vs.Counts()
	}
	return st
}

// Feed feeds the live capture's records to the run, indexing each first,
// until the shadow is drained or ctx ends (replay.Source). Behind by more
// than maxLag, it skips what it can at transaction boundaries (keeping
// every session's connects, schema changes and prepared statements),
// counts it, and marks the tables of skipped writes, so later differences
// there are ambiguous.
func (fl *follower) Feed(ctx context.Context, f *replay.Feed) error {
	r := fl.opt.reader
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if fl.opt.drain != nil {
		// Replay what is committed then, and stop.
		r.EndOnDrain(fctx, fl.opt.drain, func(target uint64) bool { return fl.seq.Load() >= target || f.Failed() != "" }, cancel)
	}
	indexed := 0
	for rec, err := range r.Follow(fctx, fl.opt.from) {
		if err != nil {
			return err
		}
		f.Index(rec)
		if indexed++; indexed%forgetEvery == 0 {
			fl.forgetCommits(f, rec)
		}
		// A shadow that is down waits, retrying with backoff, and then
		// catches up from the log: the primary never notices.
		waitUp(fctx, f)
		lag, _ := fl.lag(time.Now())
		if lag == 0 {
			lag = max(time.Since(rec.Start.Add(rec.Duration)), 0)
		}
		if fl.opt.maxLag > 0 {
			switch {
			case lag > fl.opt.maxLag && !fl.lagging.Load():
				fl.lagging.Store(true)
				f.Logger().Warn("shadow is behind; skipping ahead at transaction boundaries", "shadow", f.Target(), "lag", lag.Round(time.Millisecond), "max_lag", fl.opt.maxLag)
			case lag < fl.opt.maxLag/2 && fl.lagging.Load():
				fl.lagging.Store(false)
				f.Logger().Info("shadow caught up", "shadow", f.Target(), "skipped", fl.skipped.Load())
			}
		}
		for _, r := range fl.admit(f, rec) {
			fl.dispatched(r)
			if !f.Send(r) {
				return nil
			}
		}
		fl.seq.Store(rec.Seq)
	}
	return nil
}

// admit returns the records to send now for rec, in order (valid until
// the next call): none when rec is left out (skip) or is long data, held
// until its execute comes; else the session's long data held for rec's
// statement, if rec is its execute (or its reset or close, or the
// session's end), then rec. The long data of an execute left out is left
// out with it.
func (fl *follower) admit(f *replay.Feed, rec *store.Record) []*store.Record {
	clear(fl.out)
	fl.out = fl.out[:0]
	if held := fl.longData[rec.Session]; rec.CommandsLost() && len(held) > 0 {
		// Commands lost before rec: what is held goes first, in the
		// order captured, and rec is not held behind it.
		fl.out = append(fl.out, held...)
		delete(fl.longData, rec.Session)
	}
	if rec.Kind == store.KindLongData && !rec.CommandsLost() { // lost commands before it: skip moves the transaction past them
		fl.longData[rec.Session] = append(fl.longData[rec.Session], rec.Clone())
		return nil
	}
	left := fl.skip(f, rec)
	if held := fl.longData[rec.Session]; len(held) > 0 {
		var mine []*store.Record
		switch rec.Kind {
		case store.KindExecute, store.KindReset, store.KindClose:
			rest := held[:0]
			for _, h := range held {
				if h.StmtID == rec.StmtID {
					mine = append(mine, h)
				} else {
					rest = append(rest, h)
				}
			}
			clear(held[len(rest):])
			fl.longData[rec.Session] = rest
		case store.KindQuit, store.KindConnect, store.KindChangeUser, store.KindResetConnection:
			mine = held // what the server discards: as captured
			delete(fl.longData, rec.Session)
		}
		if left {
			fl.skipped.Add(uint64(len(mine)))
		} else {
			fl.out = append(fl.out, mine...)
		}
	}
	if !left {
		fl.out = append(fl.out, rec)
	}
	return fl.out
}

// forgetCursors forgets the statements of session whose execute was left
// out: its statements are gone (a reconnect, a reset, its end).
func (fl *follower) forgetCursors(session uint64) { delete(fl.cursorLeftOut, session) }

// skip decides whether a record is left out: when lagging, statements
// on their own and whole transactions that begin while lagging (as the
// session's server saw them: BEGIN … COMMIT, or autocommit=0's implicit
// ones, sqlinfo.Trx); in read-only mode, every write. Session state always
// replays.
func (fl *follower) skip(f *replay.Feed, rec *store.Record) bool {
	tx := fl.trx[rec.Session]
	if tx == nil {
		tx = &sqlinfo.Trx{}
		fl.trx[rec.Session] = tx
	}
	switch rec.Kind {
	case store.KindQuit:
		delete(fl.trx, rec.Session)
		delete(fl.skipTrx, rec.Session)
		fl.forgetCursors(rec.Session)
		return false
	case store.KindConnect, store.KindChangeUser, store.KindResetConnection:
		tx.Reset()
		fl.skipTrx[rec.Session] = false
		fl.forgetCursors(rec.Session)
		return false
	case store.KindFetch:
		if fl.cursorLeftOut[rec.Session][rec.StmtID] {
			fl.skipped.Add(1)
			return true // of an execute left out: no cursor to fetch from
		}
		return false
	case store.KindClose:
		delete(fl.cursorLeftOut[rec.Session], rec.StmtID)
		return false
	}
	if rec.CommandsLost() { // replay commits what was open there (sqlinfo.Trx.Lost)
		tx.Lost()
		fl.skipTrx[rec.Session] = false
		return false
	}
	_, info, ok := f.Statement(rec)
	if !ok {
		return false
	}
	step := tx.Apply(info, f.CapturedError(rec))
	if info.Set || info.Use || info.UserVarAssign {
		// Session state: SET autocommit=1 left out would leave the
		// session's work uncommitted; a variable a SELECT … INTO left out
		// did not assign would hold its old value when a statement after
		// the lag reads it (the scan took it as assigned as captured).
		return false
	}
	writes := info.Class == sqlinfo.ClassWrite || info.TableDDL || info.WritesUnknown
	drop := fl.opt.readOnly && writes
	if !drop {
		// A transaction open before the lag began runs to its end; one
		// that begins while lagging is left out whole, its end included.
		if step.Opened || !step.In {
			fl.skipTrx[rec.Session] = fl.lagging.Load()
		}
		drop = fl.skipTrx[rec.Session]
		if !step.In || step.End != sqlinfo.EndNone {
			fl.skipTrx[rec.Session] = false
		}
	}
	if rec.Kind == store.KindExecute {
		left := fl.cursorLeftOut[rec.Session]
		switch {
		case drop && left == nil:
			fl.cursorLeftOut[rec.Session] = map[uint32]bool{rec.StmtID: true}
		case drop:
			left[rec.StmtID] = true
		default:
			delete(left, rec.StmtID)
		}
	}
	if !drop {
		return false
	}
	fl.skipped.Add(1)
	if writes {
		fl.skipWrites.Add(1)
		f.LeftOut(rec, info)
	}
	return true
}

// waitUp holds the feed while the shadow's target is down (its last
// connection attempt failed), probing it with backoff.
func waitUp(ctx context.Context, f *replay.Feed) {
	backoff := 100 * time.Millisecond
	for f.Down() != "" && ctx.Err() == nil && f.Failed() == "" {
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
		backoff = min(2*backoff, 5*time.Second)
		f.Probe(ctx)
	}
}
