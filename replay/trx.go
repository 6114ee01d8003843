package replay

import (
	"cmp"
	"context"
	"math"
	"slices"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/tandemdb/tandem/internal/pace"
	"github.com/tandemdb/tandem/replay/conn"
	"github.com/tandemdb/tandem/replay/order"
	"github.com/tandemdb/tandem/sqlinfo"
	"github.com/tandemdb/tandem/store"
)

// Transactions on a target.
//
// A captured transaction runs on every target whole or not at all. Its
// records go out one by one, in the capture's order; the worker keeps
// those that ran (trx) until the transaction ends, as the captured
// session's server saw it (sqlinfo.Trx, fed the captured responses).
// When a statement meets a deadlock or lock wait timeout the capture did
// not have, the client's behaviour is replayed: the transaction is rolled
// back and run again from its first record, then the statement, up to
// --retries times (retry). When every attempt fails — or the connection
// is lost in the middle — the transaction has failed for good on this
// target: it is rolled back, its records already run are flagged, its
// remaining records are skipped up to its end (never run in autocommit,
// never committed), and it is listed (store.FailedTrx) so that later
// differences on the tables it wrote are counted apart and the end state
// names it. A transaction rolled back to let a statement stuck behind its
// locks go first (see gate) runs again the same way; if that run meets a
// lock error, it is retried as above.

// trxStep moves a session's transaction t past rec, whose statement's
// analysis is info (nil: not a statement replay runs), and says what rec
// did to it: the one rule for the worker (handle) and for dispatch
// (recordAccess), which follow the same session's records.
func trxStep(t *sqlinfo.Trx, rec *store.Record, info *sqlinfo.Info) sqlinfo.Step {
	var step sqlinfo.Step
	switch {
	case info != nil:
		step = t.Apply(info, capturedError(rec))
	case rec.Kind == store.KindConnect || rec.Kind == store.KindChangeUser || rec.Kind == store.KindResetConnection || rec.Kind == store.KindQuit:
		// The server rolls back what is open and starts over.
		step.CommitBefore = t.Open()
		t.Reset()
	case rec.CommandsLost():
		// Where the capture lost commands, the transaction may have ended
		// (sqlinfo.Trx.Lost): it is committed here.
		step = t.Lost()
	default:
		step.In = t.Open() && (rec.Kind == store.KindLongData || rec.Kind == store.KindFetch)
	}
	return step
}

// handle runs one record of a captured session (session mode).
func (w *worker) handle(ctx context.Context, j *job) {
	rn := w.rn
	stmt := w.resolve(j)
	next := w.ctrx
	var info *sqlinfo.Info
	if stmt {
		info = j.info
	}
	step := trxStep(&next, j.rec, info)
	// The transaction before j ended, by j or before it. The target ends
	// it only when j runs: until then it holds its locks, so a statement
	// that ends it implicitly (a BEGIN after a client's deadlock the
	// capture did not record, DDL) waits for its turn with the transaction
	// held (its locks published, rolled back if it blocks an earlier
	// record, see waitTurn), and forgets it once it ran. A connect, change
	// of user, reset or quit ends it by a rollback (the server's): that is
	// done now, before j waits, so that its locks hold back no statement
	// the gate cannot see waiting for them (a session open at the
	// capture's stop, whose synthetic quit waits for everything before
	// it). Commands a packet capture lost end it by a commit, done now
	// too: the capture's session may have committed as soon as its last
	// statement seen ended, and a transaction held through the wait
	// would block what the capture ran after that (records it waits for:
	// a deadlock no order resolves). What others read from its first
	// change on is counted apart (the scan's lostCmds).
	endsTrx := step.CommitBefore || stmt && !step.In
	if endsTrx && (!stmt || w.failing >= 0) {
		switch {
		case j.rec.CommandsLost() && w.failing < 0 && w.c != nil:
			w.commitLost(ctx)
		case !stmt && len(w.trx) > 0 && j.rec.Flags&store.FlagOpenAtStop == 0 && w.detachXA():
			// Kept prepared (the capture's server did): the quit waits
			// until the server has let it go (its KILL, if another
			// session's ended it, does that).
			w.awaitQuit = j.rec.Kind == store.KindQuit
		case !stmt && len(w.trx) > 0:
			w.rollback(ctx)
		}
		w.endTrx()
		endsTrx = false
	}
	if w.failing >= 0 {
		switch {
		case step.CommitBefore:
			// j ended the failed transaction implicitly (a BEGIN, DDL)
			// and runs: a BEGIN opens the next one.
			w.failing = -1
		case step.In:
			w.ctrx = next
			w.skipFailed(j, step)
			return
		case stmt:
			w.failing = -1 // the failed transaction ended before j
		}
		// Other records (a prepare, a close, a ping) are the session's,
		// not the transaction's: they run.
	}
	rerun := false
	if rn.failed() == "" {
		pace.SleepUntil(ctx, j.intended)
		// Stuck behind its own locks: the transaction runs again (its
		// records waiting their turns), then j waits again.
		for attempt := 0; j.t != nil && rn.failed() == ""; attempt++ {
			if !rn.waitTurn(w, j.t, j.t.Start, w.patience(attempt), j, nil) {
				break
			}
			rerun = true
			if !w.rerunTrx(rn.ctx, store.OutcomeOrderRerun, attempt+2) && !w.retryTrx(rn.ctx, j.rec.Session) {
				if endsTrx {
					// j is not part of the transaction that failed: it
					// runs, once its turn comes, with nothing held.
					w.giveUpHeld()
					endsTrx = false
					continue
				}
				w.ctrx = next
				w.giveUp(j, nil, step)
				return
			}
		}
	}
	if endsTrx && isLockError(capturedError(j.rec)) {
		w.commitUnsent(rn.ctx, step) // j is not sent (rolledBack)
		w.endTrx()
	}
	if stmt && w.rolledBack(rn.ctx, j, step) {
		w.ctrx = next
		return
	}
	var o store.Outcome
	kind := w.exec(rn.ctx, j, &o)
	if rerun {
		o.Flags |= store.OutcomeOrderRerun
	}
	w.ctrx = next
	if endsTrx {
		if kind == skipped {
			w.commitUnsent(rn.ctx, step)
		}
		w.endTrx() // j ran: the target ended it
	}
	if kind == statement {
		w.afterStatement(rn.ctx, j, &o, step)
		return
	}
	if step.In && kind != skipped {
		w.keep(j, &o, step)
	}
	w.finish(j, &o, kind)
}

// rolledBack handles a statement the capture's server answered with a
// deadlock or lock wait timeout: it had no effect there (the statement,
// or with a deadlock the whole transaction, was rolled back), so it is not
// sent — run again, it could meet the same deadlock, and the server could
// pick another victim this time — and the target's transaction is rolled
// back where the capture's was. Its outcome is not compared. It reports
// false for any other statement.
func (w *worker) rolledBack(ctx context.Context, j *job, step sqlinfo.Step) bool {
	if !isLockError(capturedError(j.rec)) || w.rn.failed() != "" {
		return false
	}
	if step.End == sqlinfo.EndRollback {
		w.rollback(ctx)
	}
	var o store.Outcome
	o.Flags |= store.OutcomeCaptureRollback
	kind := skip(&o, store.SkipCaptureRolledBack)
	w.st.count(func(c *counters) { c.captureRollbacks++ })
	w.keep(j, &o, step)
	w.finish(j, &o, kind)
	return true
}

// afterStatement decides what a statement's outcome asks of its
// transaction (session mode and --concurrency alike), then counts and
// records it.
func (w *worker) afterStatement(ctx context.Context, j *job, o *store.Outcome, step sqlinfo.Step) {
	if o.Flags&(store.OutcomeError|store.OutcomeClientError) == 0 {
		if !w.regrouped && j.info.Set {
			w.noteSet(j.sql)
		}
		if j.info.SetNext && !step.In {
			w.nextChars = append(w.nextChars, j.sql)
		}
		w.noteXA(j.info, j.sql, j.loop)
	}
	switch {
	case interrupted(o):
		// The replay was stopped while the statement was on the server:
		// no error of the target's, no answer to compare; the server rolls
		// back what the connection left open.
		*o = store.Outcome{Seq: o.Seq, Session: o.Session, Flags: o.Flags &^ (store.OutcomeError | store.OutcomeClientError)}
		skip(o, store.SkipInterrupted)
		w.endTrx()
		w.finish(j, o, skipped)
		return
	case retryable(o) && w.retries(j.rec.Session) > 0:
		// A deadlock or lock wait timeout the capture did not have: the
		// engine's behaviour, counted; then the client's: roll back, run
		// the transaction again.
		w.finish(j, o, statement)
		final, ok := w.retry(ctx, j, *o)
		if !ok {
			w.giveUp(j, &final, step)
			return
		}
		w.keep(j, &final, step)
		w.record(j, &final)
		return
	case retryable(o):
		// --retries 0: the client gives up at once.
		w.finish(j, o, statement)
		w.failedWith(o)
		final := *o
		w.giveUp(j, &final, step)
		return
	case o.Flags&store.OutcomeClientError != 0 && step.In && step.End == sqlinfo.EndNone:
		// The connection was lost inside the transaction: the server rolled
		// it back; the rest of it must not run on its own.
		w.finish(j, o, statement)
		final := *o
		w.giveUp(j, &final, step)
		return
	}
	if o.Flags&(store.OutcomeError|store.OutcomeClientError) == store.OutcomeError && j.rec.Resp.Kind != store.RespError && j.info.Changes() {
		w.noteLacking(j, store.ReorderFailed) // the target's difference; what follows on its tables, from it
	}
	w.keep(j, o, step)
	w.finish(j, o, statement)
}

// interrupted: the replay was stopped (its context cancelled) while o's
// statement ran.
func interrupted(o *store.Outcome) bool {
	return o.Flags&store.OutcomeClientError != 0 && o.Cause == store.CauseCancelled
}

func isLockError(code uint16) bool {
	return code == sqlinfo.ErrDeadlock || code == sqlinfo.ErrLockWaitTimeout
}

// keep notes that j ran as part of its transaction (step), or that the
// transaction ended with it.
func (w *worker) keep(j *job, o *store.Outcome, step sqlinfo.Step) {
	if !step.In || step.End != sqlinfo.EndNone {
		w.endTrx()
		if o.Flags&store.OutcomeSkipped == 0 && (j.info == nil || !j.info.SetNext && !j.info.Set && !j.info.Use) {
			w.nextChars = w.nextChars[:0] // used by j (one not sent leaves them: finish)
		}
		return
	}
	if len(w.trx) == 0 {
		w.trxChars = append(w.trxChars[:0], w.nextChars...)
		w.nextChars = w.nextChars[:0]
	}
	w.trx = append(w.trx, j)
	w.trxOut = append(w.trxOut, *o)
	w.publishLocks(len(w.trx))
}

// commitUnsent commits the open transaction before a statement that
// commits implicitly (step.CommitBefore: DDL, LOCK TABLES) and that the
// target is not sent (the capture's server answered it with a lock error;
// or it was skipped: truncated, masked, not rewritable): the captured
// server committed the transaction there, and the target would keep it
// open.
func (w *worker) commitUnsent(ctx context.Context, step sqlinfo.Step) {
	if step.CommitBefore && len(w.trx) > 0 && w.c != nil && w.failing < 0 {
		w.commitLost(ctx)
	}
}

// commitLost commits the open transaction where a packet capture lost
// its session's commands (see handle; the scan counts them, the same on
// every target), or where the captured server committed it implicitly
// before a statement that then failed with a lock error. A COMMIT the
// server refuses rolls the transaction back: it failed for good there,
// and is listed as such (failTrx).
func (w *worker) commitLost(ctx context.Context) {
	var r conn.Result
	err := w.c.Query(ctx, "COMMIT", &r)
	if err == nil || len(w.trx) == 0 {
		return
	}
	var o store.Outcome
	w.fill(&o, &r, err, nil) // a connection lost is dropped: the server rolled back
	w.failedWith(&o)
	w.failTrx(w.trx[len(w.trx)-1], &o, sqlinfo.Step{}, true)
}

// endTrx forgets the transaction the target ran: it ended.
func (w *worker) endTrx() {
	clear(w.trx)
	w.trx, w.trxOut = w.trx[:0], w.trxOut[:0]
	w.trxChars, w.resendChars = w.trxChars[:0], w.resendChars[:0]
	w.trxFlags = 0
	w.publishLocks(0)
}

// replicaRetries is how often the writes that bypassed the proxy are
// tried again after a deadlock or lock wait timeout: they are applied as
// a replica applies them, and a MariaDB replica tries a transaction
// slave_transaction_retries times (10 by default), not as often as the
// application's clients (--retries). Replay's order can hold a lock they
// need a while (a transaction waiting for its turn, yielding only past
// its in-flight bound), and MyRocks gives up on a lock after 1 s.
const replicaRetries = 10

// retries is how often a transaction of session is tried again.
func (w *worker) retries(session uint64) int {
	if session >= store.BypassedSessionBase && w.rn.cfg.Retries > 0 {
		return max(w.rn.cfg.Retries, replicaRetries)
	}
	return w.rn.cfg.Retries
}

// retry rolls back and runs the open transaction's records again, then j,
// up to --retries times, as a client does after a deadlock or lock wait
// timeout. It returns j's last outcome, and false when every attempt met
// one (first is j's failed first outcome).
func (w *worker) retry(ctx context.Context, j *job, first store.Outcome) (store.Outcome, bool) {
	last := first
	w.failedWith(&first)
	if w.retries(j.rec.Session) > 0 {
		w.noteRunAgain(store.ReorderRetried, w.trx, j)
	}
	for range w.retries(j.rec.Session) {
		w.st.count(func(c *counters) { c.retries++ })
		if !w.rerunTrx(ctx, store.OutcomeRetried, 1) {
			continue
		}
		var o store.Outcome
		w.exec(ctx, j, &o)
		o.Flags |= store.OutcomeRetried
		w.st.count(func(c *counters) { c.reexecuted++ })
		last = o
		if retryable(&o) || lostConnection(&o) {
			w.failedWith(&o)
			continue
		}
		if o.Flags&store.OutcomeError == 0 {
			w.st.count(func(c *counters) { c.retriesOK++ })
		}
		return o, true
	}
	return last, false
}

// retryTrx runs the open transaction again, up to --retries times, after
// a rerun of it met a deadlock or lock wait timeout: false when every
// attempt did.
func (w *worker) retryTrx(ctx context.Context, session uint64) bool {
	if w.retries(session) > 0 {
		w.noteRunAgain(store.ReorderRetried, w.trx, nil)
	}
	for range w.retries(session) {
		w.st.count(func(c *counters) { c.retries++ })
		if w.rerunTrx(ctx, store.OutcomeRetried, 1) {
			w.st.count(func(c *counters) { c.retriesOK++ })
			return true
		}
	}
	return false
}

// giveUp ends a transaction that failed for good on the target at j: it
// is rolled back, the outcomes of its records that ran are flagged, and
// j's (final, or j skipped when nil) is recorded. In session mode the
// rest of the captured transaction is then skipped (skipFailed).
func (w *worker) giveUp(j *job, final *store.Outcome, step sqlinfo.Step) {
	w.failTrx(j, final, step, false)
}

// giveUpHeld ends the open transaction, failed for good on the target
// while the record that ends it (implicitly: see handle) waited for its
// turn: as giveUp, at the transaction's last record that ran, which was
// recorded already. The record that ends it then runs on its own.
func (w *worker) giveUpHeld() {
	if len(w.trx) == 0 {
		w.rollback(w.rn.ctx) // nothing of it ran here: nothing to list
		return
	}
	w.failTrx(w.trx[len(w.trx)-1], nil, sqlinfo.Step{}, true)
}

// failTrx is giveUp; held: j is the open transaction's last record (in
// trx), not one more.
func (w *worker) failTrx(j *job, final *store.Outcome, step sqlinfo.Step, held bool) {
	w.rollback(w.rn.ctx)
	first := j
	if len(w.trx) > 0 {
		first = w.trx[0]
	}
	f := store.FailedTrx{Session: j.rec.Session, Loop: j.loop, FirstSeq: first.rec.Seq, FailedSeq: j.rec.Seq, LastSeq: j.rec.Seq,
		Code: w.lastFail, Cause: w.lastCause, Attempts: 1 + w.retries(j.rec.Session), Statements: len(w.trx) + 1, At: w.rn.offset(first.rec, first.loop)}
	if held {
		f.Statements--
	}
	if final != nil && (!retryable(final) || final.Flags&store.OutcomeClientError != 0) {
		f.Code, f.Cause, f.Attempts = final.ErrCode, final.Cause, 1
	}
	if f.Code == 0 && f.Cause == 0 {
		f.Code = mysql.ER_LOCK_DEADLOCK
	}
	for i, p := range w.trx {
		f.Tables = writesOf(p, f.Tables)
		o := w.trxOut[i]
		o.Flags |= store.OutcomeTrxFailed
		w.record(p, &o)
		w.rn.gate.Finish(p.t) // what is not run again must not hold others back
	}
	switch {
	case held:
	case final != nil:
		f.Tables = writesOf(j, f.Tables)
		final.Flags |= store.OutcomeTrxFailed
		w.record(j, final)
	default:
		f.Tables = writesOf(j, f.Tables)
		var o store.Outcome
		o.Seq, o.Session = store.OutcomeSeq(j.rec.Seq, j.loop), j.rec.Session
		kind := skip(&o, store.SkipTrxFailed)
		o.Flags |= store.OutcomeTrxFailed
		w.finish(j, &o, kind)
	}
	key := errorKey(&store.Outcome{ErrCode: f.Code, Cause: f.Cause, Flags: clientFlag(f.Cause)})
	w.st.failedTrx(key)
	w.endTrx()
	w.nextChars = w.nextChars[:0] // the failed statement's
	w.failures = append(w.failures, f)
	w.failing = -1
	if step.In && step.End == sqlinfo.EndNone {
		w.failing = len(w.failures) - 1
	}
}

func clientFlag(cause byte) uint32 {
	if cause != 0 {
		return store.OutcomeClientError
	}
	return 0
}

// skipFailed skips a record of a transaction that failed for good here
// (session mode); the transaction's end ends the skipping.
func (w *worker) skipFailed(j *job, step sqlinfo.Step) {
	w.notePrepare(j.rec)
	f := &w.failures[w.failing]
	var o store.Outcome
	o.Seq, o.Session = store.OutcomeSeq(j.rec.Seq, j.loop), j.rec.Session
	kind := skip(&o, store.SkipTrxFailed)
	o.Flags |= store.OutcomeTrxFailed
	if j.info == nil {
		kind = notCompared // long data, a fetch: part of a statement not run
	} else {
		f.Statements++
		f.Tables = writesOf(j, f.Tables)
	}
	f.LastSeq = j.rec.Seq
	w.finish(j, &o, kind)
	if step.End != sqlinfo.EndNone {
		w.failing = -1
		w.statsTrx = false
	}
}

// writesOf adds the tables j's statement writes (schema-qualified, with
// the record's schema) to dst.
func writesOf(j *job, dst []string) []string {
	if j.info == nil {
		return dst
	}
	for _, t := range qualify(j.info.Writes, j.rec.Schema, nil) {
		if !slices.Contains(dst, t) {
			dst = append(dst, t)
		}
	}
	if j.info.WritesUnknown && !slices.Contains(dst, anyTable) {
		dst = append(dst, anyTable)
	}
	return dst
}

// anyTable stands for every table in a failed transaction's list: it ran
// a statement whose writes the analysis cannot name (a CALL).
const anyTable = "*"

// rerunTrx rolls back the open transaction and runs its records again,
// their outcomes flagged with flag (replacing the first ones). It reports
// false when one of them hit a deadlock or lock wait timeout again.
//
// In a session replay each record has a ticket: the rollback reopens them
// (what came after them in the capture waits again), and each record
// waits its turn again before it runs. A record that finds the order stuck
// behind the transaction's locks while it waits starts the transaction
// over, with patience (see gate.wait) one step longer each time: a
// statement that is merely slow gets the time it needs, and no
// transaction ever waits holding locks without watching for what it
// blocks (until maxRestarts, far beyond the hard bound).
func (w *worker) rerunTrx(ctx context.Context, flag uint32, patience int) bool {
	cur := w.cur
	defer func() {
		w.cur = cur
		if cur != nil {
			cur.Current()
		}
	}()
	for attempt := 0; ; attempt++ {
		w.rollbackReopen(ctx, w.trx)
		p := patience + attempt
		if attempt >= maxRestarts {
			p = 0
		}
		ok, restart := w.replayTrx(ctx, flag, p)
		if restart {
			w.st.count(func(c *counters) { c.orderReruns++ })
			w.noteRunAgain(store.ReorderYielded, w.trx, nil)
			continue
		}
		if !ok {
			// Given up: the records not run again must not hold others back.
			for _, p := range w.trx {
				w.rn.gate.Finish(p.t)
			}
			return false
		}
		return true
	}
}

// charsForRerun are the SET TRANSACTION statements a rerun sends first:
// those the open transaction began under, or, when nothing of it is kept
// (the statement that failed is its first, or runs on its own), those
// that statement was to run under.
func (w *worker) charsForRerun() []string {
	if len(w.trx) > 0 {
		return w.trxChars
	}
	return w.nextChars
}

// maxRestarts bounds how often a transaction starts over for order; by
// then the in-flight bound (doubled per restart) is far past the hard
// bound, so in practice the hard bound ends the wait first.
const maxRestarts = 16

// patience is how long a record about to run waits for a stuck statement
// before it rolls back its session's open transaction (see gate.wait): 0,
// no stall detection, when the session holds no transaction (nothing of
// its own can be in the way); else one step more per earlier attempt.
func (w *worker) patience(attempt int) int {
	if w.c == nil || len(w.trx) == 0 || attempt >= maxRestarts {
		return 0
	}
	return attempt + 1
}

// replayTrx runs the rolled-back transaction's records again (see
// rerunTrx): ok false when one hit a deadlock or lock wait timeout;
// restart when one, waiting its turn, found the order stuck behind this
// transaction's locks.
func (w *worker) replayTrx(ctx context.Context, flag uint32, patience int) (ok, restart bool) {
	// Sent by exec before the next statement, on the connection it runs
	// on (the rollback may have lost this one).
	w.resendChars = append(w.resendChars[:0], w.charsForRerun()...)
	for i, p := range w.trx {
		if p.t != nil && w.rn.failed() == "" {
			w.cur = p.t
			p.t.Current()
			w.rn.gate.Idle(p.t)
			pt := patience
			if i == 0 {
				pt = 0 // rolled back: holds no locks yet
			}
			h := w.held(i)
			res, _ := w.rn.gate.Wait(w.rn.ctx, p.t, p.t.Start, pt, w.rn.cfg.OrderTimeout, h)
			switch res {
			case order.Stalled:
				return false, true
			case order.TimedOut, order.Released:
				w.released = true
				w.st.count(func(c *counters) { c.orderReleased++ })
				var held []*job
				if h != nil {
					held = w.trx[:i]
				}
				w.noteReorder(p.t, p, nil, held)
			}
		}
		if isLockError(capturedError(p.rec)) {
			// The capture's server rolled it back (a lock wait timeout
			// leaves the transaction open): not sent the first time
			// (rolledBack), nor now, and its outcome stands.
			w.publishLocks(i + 1)
			w.rn.gate.Finish(p.t)
			continue
		}
		var po store.Outcome
		kind := w.exec(ctx, p, &po)
		po.Flags |= flag
		if kind == statement {
			w.st.count(func(c *counters) { c.reexecuted++ })
			if po.Flags&(store.OutcomeError|store.OutcomeClientError) == 0 {
				w.noteXA(p.info, p.sql, p.loop) // its XA START again
			}
		}
		if kind != notCompared {
			w.record(p, &po)
		}
		w.trxOut[i] = po
		w.publishLocks(i + 1)
		w.rn.gate.Finish(p.t)
		if kind == statement && (retryable(&po) || lostConnection(&po)) {
			// A lost connection rolled the transaction back on the
			// server: the rest of it must not run on its own, on a new one.
			w.failedWith(&po)
			return false, false
		}
	}
	return true, false
}

// rollbackReopen rolls back the open transaction trx and reopens its
// records' tickets (session replays); it returns how many it reopened.
func (w *worker) rollbackReopen(ctx context.Context, trx []*job) int {
	w.rollback(ctx)
	w.publishLocks(0)
	ts := make([]*order.Ticket, 0, len(trx))
	for _, p := range trx {
		if p.t != nil {
			ts = append(ts, p.t)
		}
	}
	if len(ts) > 0 {
		w.rn.gate.Reopen(ts)
	}
	return len(ts)
}

// runUnit runs a unit (--concurrency): its records in order; before its
// COMMIT, it waits for every unit that committed earlier in the capture
// (rolling back and running again if that one is stuck behind this unit's
// locks); the whole transaction runs again after a deadlock the capture
// did not have, and one that fails for good is rolled back with the rest
// of its records skipped.
func (w *worker) runUnit(ctx context.Context, u *unit) {
	if err := w.adopt(ctx, u); err != nil && w.c == nil {
		// Every record fails as the connection did.
		for i := range u.jobs {
			j := &u.jobs[i]
			o := store.Outcome{Seq: store.OutcomeSeq(j.rec.Seq, j.loop), Session: j.rec.Session}
			kind := statement
			if j.info == nil {
				kind = notCompared
			}
			w.fill(&o, nil, err, j.info)
			w.finish(j, &o, kind)
		}
		return
	}
	w.endTrx()
	w.nextChars = w.nextChars[:0] // another session's, if any
	w.failing = -1
	if b := w.rn.board; b != nil {
		b.Running(w.slot, u.t)
		defer b.Running(w.slot, nil)
	}
	var tx sqlinfo.Trx
	if u.manual {
		tx.Apply(&manualInfo, 0)
	}
	rerun := false
	for i := range u.jobs {
		j := &u.jobs[i]
		var step sqlinfo.Step
		if j.info != nil {
			step = tx.Apply(j.info, capturedError(j.rec))
		} else {
			step.In = tx.Open()
		}
		if w.failing >= 0 && step.CommitBefore {
			// j (DDL) ended the failed transaction implicitly, and runs,
			// as in session mode.
			w.failing = -1
		}
		if w.failing >= 0 {
			w.skipFailed(j, step)
			continue
		}
		if u.t != nil && i > 0 && j.info != nil && j.info.End && j.info.Verb == "COMMIT" && w.rn.failed() == "" {
			if w.rn.waitTurn(w, u.t, w.rn.offset(j.rec, j.loop), 1, &u.jobs[0], u.jobs) {
				rerun = true
				if !w.rerunTrx(ctx, store.OutcomeOrderRerun, 2) && !w.retryTrx(ctx, j.rec.Session) {
					w.giveUp(j, nil, step)
					continue
				}
			}
		}
		if b := w.rn.board; b != nil && u.t != nil {
			at := w.rn.offset(j.rec, j.loop)
			end := at + int64(j.rec.Duration)
			changes := j.info == nil || j.info.Changes()
			var tables, keys []string // asked for only of a change (Board.behind)
			if changes && j.info != nil && !j.info.WritesUnknown && !j.info.Unanalysable {
				tables, _ = ticketTables([]string{}, j.info)
				keys = w.rn.jobKeys(j)
			}
			b.Set(w.slot, end, changes, tables, keys)
			if i > 0 {
				if k := b.Wait(ctx, w.slot, at, end, changes, tables, keys, w.cursor.Locks()); k.Slot >= 0 {
					// Stuck behind this unit's locks: roll back, let it go
					// first, run the unit's records so far again.
					rerun = true
					w.st.count(func(c *counters) { c.orderReruns++ })
					w.noteRunAgain(store.ReorderYielded, w.trx, nil)
					w.rollbackReopen(ctx, w.trx)
					b.Until(ctx, k, w.rn.cfg.OrderTimeout)
					if !w.rerunTrx(ctx, store.OutcomeOrderRerun, 2) && !w.retryTrx(ctx, j.rec.Session) {
						w.giveUp(j, nil, step)
						continue
					}
				}
			}
			b.Sent(w.slot)
		}
		if isLockError(capturedError(j.rec)) {
			w.commitUnsent(ctx, step) // j is not sent (rolledBack)
		}
		if j.info != nil && w.rolledBack(ctx, j, step) {
			continue
		}
		var o store.Outcome
		kind := w.exec(ctx, j, &o)
		if j.setVersion > 0 && kind != skipped && w.session == j.rec.Session {
			// The session's state the SET gave the connection: not sent
			// again before its next unit here (adopt), and reset before
			// another session's.
			w.version = max(w.version, j.setVersion)
			w.carried++
		}
		if j.info != nil && j.info.Use && kind != skipped {
			// The schema it chose, which names the statements prepared
			// from here on (worker.statement): left "", a statement
			// prepared after one unit's USE was taken for another unit's
			// after its USE of another schema, and changed the first
			// schema's table.
			w.schema = ""
			if db, ok := sqlinfo.UseSchema(j.sql); ok && o.Flags&store.OutcomeError == 0 {
				w.schema = db
			}
		}
		if rerun {
			o.Flags |= store.OutcomeOrderRerun
		}
		if step.CommitBefore {
			// j (DDL, LOCK TABLES) committed the transaction before it
			// ran: a retry of j runs j alone, not the transaction again.
			if kind == skipped {
				w.commitUnsent(ctx, step)
			}
			w.endTrx()
		}
		if kind == statement {
			w.afterStatement(ctx, j, &o, step)
			continue
		}
		if step.In && kind != skipped {
			w.keep(j, &o, step)
		}
		w.finish(j, &o, kind)
	}
	switch {
	case u.open && w.c != nil:
		if id := w.c.ID; !u.atStop && w.detachXA() {
			// An XA transaction the session left prepared: the server
			// keeps it once the connection has closed, before another
			// session's unit could run here.
			w.drop()
			w.rn.awaitGone(id)
		} else {
			w.rollback(ctx) // the client left with the transaction open
		}
	case u.commitAtEnd && w.c != nil && w.failing < 0:
		w.helper(ctx, "COMMIT") // as the capture's next BEGIN did
	}
	if len(w.nextChars) > 0 {
		// One-shot characteristics still set on the connection (no
		// statement of the session used them): another session's unit
		// here gets a clean connection, not them.
		w.carried++
		w.nextChars = w.nextChars[:0]
	}
	w.endTrx()
	w.failing = -1
	if b := w.rn.board; b != nil {
		b.Set(w.slot, -1, false, nil, nil)
	}
}

// publishLocks tells the gate what the first n records of the open
// transaction locked (see lockSet): after each record that runs, and
// empty once the transaction ends or is rolled back. The set grows by
// the records since the last one published (their statements appended
// to its array, which the last set, immutable, does not see); it is
// built anew when it shrinks or the cursor changed.
func (w *worker) publishLocks(n int) {
	c := w.cursor
	if c == nil {
		return
	}
	ls, from := w.locks, w.lockedN // nil: none of the first from changed anything
	if c != w.lockedAt || n < from {
		ls, from = nil, 0
	}
	var stmts []order.LockStmt
	if ls != nil {
		stmts = ls.Stmts
	}
	grown := false
	for _, p := range w.trx[from:n] {
		if p.info == nil || !p.info.Changes() {
			continue
		}
		end := w.rn.offset(p.rec, p.loop) + int64(p.rec.Duration)
		if p.t != nil {
			end = p.t.End
		}
		if p.rec.Session >= store.BypassedSessionBase {
			// A write that bypassed the proxy holds its locks from a
			// time the capture's clock does not give (order.Ticket.Unclocked):
			// none of them is ruled out by when it was taken.
			end = math.MaxInt64
		}
		tables, anyT := ticketTables(nil, p.info)
		stmts, grown = append(stmts, order.LockStmt{End: end, Tables: tables, Any: anyT, Keys: w.rn.jobKeys(p)}), true
	}
	if grown {
		ls = &order.LockSet{Stmts: stmts}
	}
	w.locks, w.lockedAt, w.lockedN = ls, c, n
	if grown || ls == nil {
		w.rn.gate.Publish(c, ls)
	}
}

// held returns the worker's cursor when the first n records of its open
// transaction ran (it may hold locks: see gate.wait), else nil.
func (w *worker) held(n int) *order.Cursor {
	if n == 0 || w.c == nil || len(w.trx) == 0 {
		return nil
	}
	return w.cursor
}

// ticketTables are the table names (unqualified: a schema mismatch can
// only make the gate more careful) that infos touch, and whether one may
// touch any.
func ticketTables(dst []string, infos ...*sqlinfo.Info) ([]string, bool) {
	anyT := false
	for _, info := range infos {
		if info == nil {
			continue
		}
		anyT = anyT || info.WritesUnknown || info.Unanalysable
		for _, ts := range [][]sqlinfo.Table{info.Reads, info.Writes} {
			for _, tb := range ts {
				if n := strings.ToLower(tb.Name); !slices.Contains(dst, n) {
					dst = append(dst, n)
				}
			}
		}
	}
	return dst, anyT
}

// manualInfo is SET autocommit=0, for a unit of a session that had
// autocommit off.
var manualInfo = sqlinfo.Info{Set: true, SetAutocommit: '0'}

// reorders lists the changes sent to the target out of the capture's
// order, in the capture's order (after its workers have stopped).
func (rn *runner) reorders() []store.Reorder {
	return inCaptureOrder(rn, &rn.mu.reorders, func(w *worker) []store.Reorder { return w.reorders }, reorderAt)
}

// failures lists the transactions that failed for good on the target, in
// the capture's order (after its workers have stopped).
func (rn *runner) failures() []store.FailedTrx {
	return inCaptureOrder(rn, &rn.mu.failures, func(w *worker) []store.FailedTrx { return w.failures }, failureAt)
}

// inCaptureOrder gathers what each worker listed, and retired (the closed
// workers'), ordered by when (and at which record) it began in the
// capture.
func inCaptureOrder[T any](rn *runner, retired *[]T, of func(*worker) []T, at func(T) (int64, uint64)) []T {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	out := slices.Clone(*retired)
	for _, w := range rn.mu.workers {
		out = append(out, of(w)...)
	}
	sortInCaptureOrder(out, at)
	return out
}

// sortInCaptureOrder sorts l by when (and at which record) each began in
// the capture.
func sortInCaptureOrder[T any](l []T, at func(T) (int64, uint64)) {
	slices.SortFunc(l, func(a, b T) int {
		ta, sa := at(a)
		tb, sb := at(b)
		return cmp.Or(cmp.Compare(ta, tb), cmp.Compare(sa, sb))
	})
}

func reorderAt(r store.Reorder) (int64, uint64)   { return r.At, r.Seq }
func failureAt(f store.FailedTrx) (int64, uint64) { return f.At, f.FirstSeq }
