package replay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/tandemdb/tandem/replay/conn"
	"github.com/tandemdb/tandem/sqlinfo"
	"github.com/tandemdb/tandem/store"
)

// Error codes for failures that are not the server's (the client library
// codes a C client reports for them).
const (
	codeCannotConnect = 2003 // CR_CONN_HOST_ERROR
	codeLost          = 2013 // CR_SERVER_LOST
	codeMalformed     = 2027 // CR_MALFORMED_PACKET
	codeTooMany       = 1040 // ER_CON_COUNT_ERROR
)

// worker owns one connection to a target and runs records on it. In
// session mode it serves one captured session; with --concurrency it serves
// whole transactions of any session, carrying the session state each needs.
type worker struct {
	rn  *runner
	c   *conn.Conn
	st  *wstats
	out *store.OutcomeBatch
	// outBatch: outcomes buffered before a commit.
	outBatch int
	res      conn.Result

	// Session mode: the captured statement id's SQL and the statement
	// prepared for it here; statements whose long data was lost.
	sqlOf map[uint32]string
	byID  map[uint32]*conn.Stmt
	lost  map[uint32]bool
	// --concurrency: this connection's statements by schema and SQL.
	stmts     map[string]*conn.Stmt
	regrouped bool
	slot      int // its connection's slot on the runner's board

	schema  string // in use on the connection
	client  clientFlags
	session uint64 // whose state the connection carries (--concurrency)
	version int
	carried int // variables that session's state set on the connection
	// trx holds the records of the open transaction, for a retry; inTrx
	// and autocommit follow the session as the server sees it.
	trx        []*job
	inTrx      bool
	autocommit bool
	statsTrx   bool // sysbench's transaction count: inside BEGIN … COMMIT
	released   bool // the current record went before all it waits for

	nextDial time.Time
	backoff  time.Duration
	dialErr  error // why the last connect failed, for the records that wait it out
	// cur is the ticket the worker runs records for: every statement it
	// sends marks it executing (for the gate's stall detection).
	cur *ticket
}

func newWorker(rn *runner, outBatch int) *worker {
	w := &worker{rn: rn, st: newWStats(), out: rn.run.NewOutcomeBatch(rn.point, rn.idx), outBatch: outBatch,
		sqlOf: map[uint32]string{}, byID: map[uint32]*conn.Stmt{}, lost: map[uint32]bool{}, stmts: map[string]*conn.Stmt{},
		autocommit: true, client: defaultClient}
	rn.addWorker(w)
	return w
}

var errDialBackoff = errors.New("replay: waiting to reconnect")

// connect (re)opens the connection, with backoff after failures.
func (w *worker) connect(ctx context.Context, schema string) error {
	if w.c != nil {
		return nil
	}
	if time.Now().Before(w.nextDial) {
		// The records that wait out the backoff fail for the reason the
		// connect did (1040 too many connections, refused …).
		return fmt.Errorf("%w: %w", errDialBackoff, w.dialErr)
	}
	cfg := w.rn.connCfg
	cfg.DB = w.rn.schemaFor(schema)
	cfg.Caps, cfg.Interactive, cfg.Collation = w.client.caps, w.client.interactive, w.client.collation
	c, err := conn.Dial(ctx, cfg)
	if err != nil {
		w.backoff = min(max(2*w.backoff, 50*time.Millisecond), 5*time.Second)
		w.nextDial = time.Now().Add(w.backoff)
		w.dialErr = err
		w.st.count(func(c *counters) { c.connectFailures++ })
		w.rn.setDown(err)
		return err
	}
	w.rn.setDown(nil)
	w.rn.track(c)
	w.backoff, w.c, w.schema, w.session, w.version, w.carried, w.inTrx, w.autocommit = 0, c, cfg.DB, 0, 0, 0, false, true
	w.forgetStatements()
	w.st.count(func(c *counters) { c.connections++ })
	return nil
}

// drop forgets a broken connection.
func (w *worker) drop() {
	if w.c != nil {
		w.rn.untrack(w.c)
		w.c.Close()
	}
	w.c, w.inTrx = nil, false
	w.forgetStatements()
}

// forgetStatements drops the statements of a connection that is gone or
// reset (the server has freed them).
func (w *worker) forgetStatements() {
	clear(w.stmts)
	clear(w.byID)
}

// quit ends the connection as the client did.
func (w *worker) quit() {
	if w.c != nil {
		w.rn.untrack(w.c)
		w.c.Quit()
	}
	w.c = nil
	w.forgetStatements()
}

// close ends the connection and writes the outcomes still buffered.
func (w *worker) close() {
	w.quit()
	w.rn.commit(w)
}

// execKind says what running a record produced.
type execKind uint8

const (
	notCompared execKind = iota // quit, close, long data: nothing to compare
	lifecycle                   // connect, prepare, init-db, ping …: compared, not a statement
	statement                   // query, execute: compared and counted
	skipped                     // not run: the outcome says why
)

func skip(o *store.Outcome, reason byte) execKind {
	o.Flags |= store.OutcomeSkipped
	o.SkipReason = reason
	return skipped
}

// exec runs one record once and fills o.
func (w *worker) exec(ctx context.Context, j *job, o *store.Outcome) execKind {
	rec := j.rec
	*o = store.Outcome{Seq: store.OutcomeSeq(rec.Seq, j.loop), Session: rec.Session}
	switch {
	case rec.Kind == store.KindQuit:
		w.quit()
		return notCompared
	case rec.Flags&store.FlagMasked != 0:
		return skip(o, store.SkipMasked)
	case rec.Flags&store.FlagTruncated != 0 && rec.Kind == store.KindLongData:
		w.lost[rec.StmtID] = true
		return skip(o, store.SkipLongData)
	case rec.Flags&store.FlagTruncated != 0:
		return skip(o, store.SkipTruncated)
	case rec.Flags&store.FlagNotReplayable != 0:
		return skip(o, store.SkipNotReplayable)
	case w.rn.failed() != "":
		if rec.Kind == store.KindLongData || rec.Kind == store.KindClose {
			return notCompared
		}
		return skip(o, store.SkipTargetFailed)
	}
	switch rec.Kind {
	case store.KindOther:
		return skip(o, store.SkipKind)
	case store.KindClose:
		if st := w.byID[rec.StmtID]; st != nil && w.c != nil {
			w.c.CloseStmt(st)
		}
		delete(w.byID, rec.StmtID)
		delete(w.sqlOf, rec.StmtID)
		delete(w.lost, rec.StmtID)
		return notCompared
	case store.KindConnect:
		w.client = clientOf(rec)
		if w.c != nil { // a session reconnected (or a pass begins again)
			w.quit()
		}
	case store.KindQuery:
		j.sql = rec.SQL
	case store.KindExecute:
		if j.sql == "" {
			j.sql = w.sqlOf[rec.StmtID]
		}
		if j.sql == "" {
			return skip(o, store.SkipUnknownStatement) // prepared before the capture began
		}
		if w.lost[rec.StmtID] {
			delete(w.lost, rec.StmtID)
			return skip(o, store.SkipLongData)
		}
	}
	kind := lifecycle
	if rec.Kind == store.KindQuery || rec.Kind == store.KindExecute {
		kind = statement
		if j.info == nil {
			j.info = w.rn.an.Info(j.sql)
		}
	}
	if rec.Kind == store.KindLongData {
		kind = notCompared
	}
	if err := w.connect(ctx, rec.Schema); err != nil {
		if kind == notCompared {
			return kind
		}
		w.fill(o, nil, err, j.info)
		return kind
	}
	sql := j.sql
	if rec.Kind == store.KindPrepare {
		sql = rec.SQL
	}
	if kind == statement && j.info.TableDDL || rec.Kind == store.KindPrepare && w.rn.an.Info(sql).TableDDL {
		var err error
		if sql, err = w.rn.rewrite(sql); err != nil {
			return skip(o, store.SkipUnrewritable)
		}
	}
	w.res = conn.Result{}
	w.rn.gate.markSent(w.cur, max(rec.Duration, 1))
	start := time.Now()
	var err error
	switch rec.Kind {
	case store.KindConnect:
		// Connected above, in the session's schema.
	case store.KindInitDB:
		db := w.rn.schemaFor(rec.Schema)
		if err = w.c.InitDB(ctx, db); err == nil {
			w.schema = db
		}
	case store.KindChangeUser, store.KindResetConnection:
		// A change of user is replayed as a reset (the target's own
		// credentials are the only ones replay has) and its schema.
		err = w.c.ResetConnection(ctx)
		w.forgetStatements()
		clear(w.sqlOf)
		w.inTrx, w.autocommit = false, true
		if err == nil && rec.Kind == store.KindChangeUser && rec.Schema != "" {
			db := w.rn.schemaFor(rec.Schema)
			if err = w.c.InitDB(ctx, db); err == nil {
				w.schema = db
			}
		}
	case store.KindPing:
		err = w.c.Ping(ctx)
	case store.KindPrepare:
		w.sqlOf[rec.StmtID] = rec.SQL
		if old := w.byID[rec.StmtID]; old != nil {
			w.c.CloseStmt(old)
		}
		var st *conn.Stmt
		if st, err = w.c.Prepare(ctx, sql); err == nil {
			w.byID[rec.StmtID] = st
		} else {
			delete(w.byID, rec.StmtID)
		}
	case store.KindReset:
		if st := w.byID[rec.StmtID]; st != nil {
			err = w.c.ResetStmt(ctx, st)
		} else {
			return skip(o, store.SkipUnknownStatement)
		}
	case store.KindLongData:
		sql := j.sql
		if sql == "" {
			sql = w.sqlOf[rec.StmtID]
		}
		st, perr := w.statement(ctx, rec.StmtID, sql, w.regrouped)
		if perr == nil {
			w.c.SendLongData(ctx, st, rec.ParamIndex, rec.Data)
		}
		return notCompared
	case store.KindFetch:
		st := w.byID[rec.StmtID]
		if st == nil {
			return skip(o, store.SkipUnknownStatement)
		}
		err = w.c.Fetch(ctx, st, rec.FetchRows, &w.res)
	case store.KindQuery:
		err = w.c.Query(ctx, sql, &w.res)
	case store.KindExecute:
		var st *conn.Stmt
		if st, err = w.statement(ctx, rec.StmtID, sql, w.regrouped); err == nil {
			err = w.c.Execute(ctx, st, rec.Params, rec.CursorType, &w.res)
		}
	}
	o.Service = time.Since(start)
	info := j.info
	if kind != statement {
		info = &lifecycleInfo
	}
	w.fill(o, &w.res, err, info)
	return kind
}

var lifecycleInfo sqlinfo.Info

// statement returns the connection's statement for a captured statement
// id (session mode) or for its SQL in the current schema (--concurrency),
// preparing it if needed.
func (w *worker) statement(ctx context.Context, id uint32, sql string, bySQL bool) (*conn.Stmt, error) {
	if !bySQL {
		if st := w.byID[id]; st != nil {
			return st, nil
		}
	}
	key := w.schema + "\x00" + sql
	if st := w.stmts[key]; st != nil {
		return st, nil
	}
	st, err := w.c.Prepare(ctx, sql)
	if err != nil {
		return nil, err
	}
	if bySQL {
		w.stmts[key] = st
	} else {
		w.byID[id] = st // prepared again (after a reconnect, or a failed prepare)
	}
	return st, nil
}

// fill sets o from a response or an error; a broken connection is dropped.
func (w *worker) fill(o *store.Outcome, r *conn.Result, err error, info *sqlinfo.Info) {
	if info != nil && info.Nondeterministic {
		o.Flags |= store.OutcomeNondeterministic
	}
	if info != nil && info.Ordered {
		o.Flags |= store.OutcomeOrdered
	}
	if r != nil {
		o.Results = uint16(min(r.Results, 0xffff))
	}
	if err != nil {
		o.Flags |= store.OutcomeError
		var se *conn.ServerError
		var ce *conn.Error
		switch {
		case errors.As(err, &se):
			o.ErrCode = se.Code
			if se.Code == mysql.ER_WRONG_ARGUMENTS && r != nil && r.Results == 0 {
				o.Results = 1
			}
		case errors.As(err, &ce):
			o.Flags |= store.OutcomeClientError
			o.Cause = ce.Cause
			switch ce.Cause {
			case store.CauseRefused:
				o.ErrCode = codeCannotConnect
			case store.CauseTooMany:
				o.ErrCode = codeTooMany
			case store.CauseProtocol:
				o.ErrCode = codeMalformed
			default:
				o.ErrCode = codeLost
			}
			if ce.Op != "connect" {
				w.drop()
			}
		case errors.Is(err, errDialBackoff):
			o.Flags |= store.OutcomeClientError
			o.ErrCode, o.Cause = codeCannotConnect, store.CauseRefused
		default:
			o.Flags |= store.OutcomeClientError
			o.ErrCode, o.Cause = codeLost, store.CauseReset
			w.drop()
		}
		return
	}
	if r == nil {
		return
	}
	o.Affected, o.InsertID, o.Warnings = r.Affected, r.InsertID, r.Warnings
	if r.Sets > 0 {
		// One result set: its rows and columns. Several (a CALL): the rows
		// of all, as the capture counts them.
		if r.Results == 1 || r.Rows > 0 {
			o.Flags |= store.OutcomeRows
		}
		o.Rows, o.Ordered, o.Unordered = r.Rows, r.Sums.Ordered, r.Sums.Unordered
		if r.Results == 1 {
			o.Columns = r.Columns
		}
	}
}

// retryable: a deadlock or a lock wait timeout, which a client rolls back
// and retries.
func retryable(o *store.Outcome) bool {
	return o.Flags&store.OutcomeClientError == 0 && (o.ErrCode == mysql.ER_LOCK_DEADLOCK || o.ErrCode == mysql.ER_LOCK_WAIT_TIMEOUT) &&
		o.Flags&store.OutcomeError != 0
}

// capturedError is the error code the capture holds for rec (0 for none).
func capturedError(rec *store.Record) uint16 {
	p := &rec.Resp
	if n := len(p.More); n > 0 {
		p = &p.More[n-1]
	}
	if p.Kind == store.RespError {
		return p.ErrCode
	}
	return 0
}

// run executes a record in session mode: once, and again as the client
// would have after a deadlock the capture did not have. rerun: its
// transaction was just run again to keep the capture's order (the
// outcome is flagged).
func (w *worker) run(ctx context.Context, j *job, rerun bool) {
	var o store.Outcome
	kind := w.exec(ctx, j, &o)
	if rerun {
		o.Flags |= store.OutcomeOrderRerun
	}
	if kind == statement {
		switch {
		case retryable(&o) && capturedError(j.rec) != o.ErrCode && w.rn.cfg.Retries > 0:
			w.finish(j, &o, kind) // the first failure is the engine's behaviour: counted
			o = w.retry(ctx, j)
			w.track(j)
			w.record(j, &o)
			return
		case o.Flags&store.OutcomeError == 0 && capturedError(j.rec) == mysql.ER_LOCK_DEADLOCK:
			// The client's transaction was rolled back here in the capture:
			// roll the target back too, so both go on from the same state.
			w.rollback(ctx)
			o.Flags |= store.OutcomeCaptureRollback
			w.st.count(func(c *counters) { c.captureRollbacks++ })
		}
		w.track(j)
	}
	w.finish(j, &o, kind)
}

// track follows the session's transaction (for retries) after a statement.
func (w *worker) track(j *job) {
	info := j.info
	if info.Set && info.SetAutocommit != 0 {
		w.autocommit = info.SetAutocommit == '1'
	}
	switch {
	case info.Begin:
		w.trx, w.inTrx = append(w.trx[:0], j), true
	case info.End || info.ImplicitCommit:
		w.trx, w.inTrx = w.trx[:0], false
	case w.inTrx || !w.autocommit:
		w.trx = append(w.trx, j)
		w.inTrx = true
	}
}

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
	trx := append([]*job(nil), w.trx...)
	cur := w.cur
	defer func() {
		w.cur = cur
		if cur != nil {
			cur.current()
		}
	}()
	for attempt := 0; ; attempt++ {
		w.rollbackReopen(ctx, trx)
		p := patience + attempt
		if attempt >= maxRestarts {
			p = 0
		}
		ok, restart := w.replayTrx(ctx, trx, flag, p)
		if restart {
			w.st.count(func(c *counters) { c.orderReruns++ })
			continue
		}
		if !ok {
			// Given up: the records not run again must not hold others back.
			for _, p := range trx {
				w.rn.gate.finish(p.t)
			}
			return false
		}
		w.trx, w.inTrx = trx, len(trx) > 0
		return true
	}
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
	if !w.inTrx || w.c == nil || len(w.trx) == 0 || attempt >= maxRestarts {
		return 0
	}
	return attempt + 1
}

// replayTrx runs a rolled-back transaction's records again (see rerunTrx):
// ok false when one hit a deadlock or lock wait timeout; restart when one,
// waiting its turn, found the order stuck behind this transaction's locks.
func (w *worker) replayTrx(ctx context.Context, trx []*job, flag uint32, patience int) (ok, restart bool) {
	for i, p := range trx {
		if p.t != nil && w.rn.failed() == "" {
			w.cur = p.t
			p.t.current()
			w.rn.gate.markIdle(p.t)
			pt := patience
			if i == 0 {
				pt = 0 // rolled back: holds no locks yet
			}
			res, _ := w.rn.gate.wait(w.rn.ctx, p.t, p.t.start, pt, w.rn.cfg.OrderTimeout)
			switch res {
			case waitStalled:
				return false, true
			case waitTimeout, waitReleased:
				w.released = true
				w.st.count(func(c *counters) { c.orderReleased++ })
			}
		}
		var po store.Outcome
		kind := w.exec(ctx, p, &po)
		po.Flags |= flag
		if kind != notCompared {
			w.record(p, &po)
		}
		w.rn.gate.finish(p.t)
		if kind == statement && retryable(&po) {
			return false, false
		}
	}
	return true, false
}

// rollbackReopen rolls back the open transaction trx and reopens its
// records' tickets (session replays); it returns how many it reopened.
func (w *worker) rollbackReopen(ctx context.Context, trx []*job) int {
	w.rollback(ctx)
	ts := make([]*ticket, 0, len(trx))
	for _, p := range trx {
		if p.t != nil {
			ts = append(ts, p.t)
		}
	}
	if len(ts) > 0 {
		w.rn.gate.reopen(ts)
	}
	return len(ts)
}

// retry rolls back and runs the open transaction's records again, then j,
// up to --retries times; it returns j's last outcome.
func (w *worker) retry(ctx context.Context, j *job) store.Outcome {
	var o store.Outcome
	for attempt := 0; attempt < w.rn.cfg.Retries; attempt++ {
		w.st.count(func(c *counters) { c.retries++ })
		if !w.rerunTrx(ctx, store.OutcomeRetried, 1) {
			continue
		}
		w.exec(ctx, j, &o)
		o.Flags |= store.OutcomeRetried
		if retryable(&o) {
			continue
		}
		if o.Flags&store.OutcomeError == 0 {
			w.st.count(func(c *counters) { c.retriesOK++ })
		}
		return o
	}
	return o
}

// rollback ends the connection's transaction.
func (w *worker) rollback(ctx context.Context) {
	if w.c != nil {
		var r conn.Result
		if err := w.c.Query(ctx, "ROLLBACK", &r); err != nil {
			var se *conn.ServerError
			if !errors.As(err, &se) {
				w.drop()
			}
		}
	}
	w.inTrx = false
}

// finish counts an outcome and buffers it for the run store.
func (w *worker) finish(j *job, o *store.Outcome, kind execKind) {
	w.st.records.Add(1)
	if w.released {
		o.Flags |= store.OutcomeOrderReleased
	}
	switch kind {
	case notCompared:
		return
	case statement:
		paced := !j.intended.IsZero()
		if paced {
			o.Lag = time.Since(j.intended)
		}
		info := j.info
		trxEnd := info.End || !w.statsTrx && !info.Begin
		switch {
		case info.Begin:
			w.statsTrx = true
		case info.End:
			w.statsTrx = false
		}
		w.st.statement(w.rn.reg, info, o, paced, trxEnd)
	case lifecycle:
		if o.Flags&store.OutcomeError != 0 {
			w.st.lifecycleError(o)
		}
	case skipped:
		class := sqlinfo.ClassOther
		if j.info != nil {
			class = j.info.Class
		}
		w.st.skip(o.SkipReason, class)
	}
	w.record(j, o)
}

// record buffers an outcome (a retry's replaces the first attempt's).
func (w *worker) record(j *job, o *store.Outcome) {
	if w.released {
		o.Flags |= store.OutcomeOrderReleased
	}
	if l := w.rn.cfg.live; l != nil {
		l.note(w.rn, j, o)
	}
	w.out.Add(o)
	if w.out.Len() >= w.outBatch {
		w.rn.commit(w)
	}
}

// adopt makes the connection carry u's session: its client flags, schema,
// and variables (the latest value of each). A connection that carries
// another session's state is reset first.
func (w *worker) adopt(ctx context.Context, u *unit) error {
	if w.c != nil && w.client != u.client {
		w.quit() // other client flags: another connection
	}
	w.client = u.client
	if err := w.connect(ctx, u.schema); err != nil {
		return err
	}
	from := 0
	switch {
	case w.session == u.session && w.version == u.version:
		from = -1
	case w.session == u.session:
		from = w.version
	case w.carried > 0:
		// Another session's variables: a clean session first (its prepared
		// statements go too). A connection that carries none needs nothing.
		if err := w.c.ResetConnection(ctx); err != nil {
			w.drop()
			return err
		}
		w.forgetStatements()
		w.carried = 0
	}
	if db := w.rn.schemaFor(u.schema); db != "" && db != w.schema {
		if err := w.c.InitDB(ctx, db); err == nil {
			w.schema = db
		}
	}
	if from >= 0 {
		for _, s := range u.sets {
			if s.version > from {
				var r conn.Result
				w.c.Query(ctx, s.text, &r) // as the session did; a failing SET failed in the capture too
				w.carried++
			}
		}
	}
	w.session, w.version = u.session, u.version
	return nil
}

// runUnit runs a unit (--concurrency): its records in order; before its
// COMMIT, it waits for every unit that committed earlier in the capture
// (rolling back and running again if that one is stuck behind this unit's
// locks); and the whole transaction runs again after a deadlock the
// capture did not have.
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
	w.trx, w.inTrx = w.trx[:0], false
	rerun := false
	for i := range u.jobs {
		j := &u.jobs[i]
		if u.t != nil && i > 0 && j.info != nil && j.info.End && j.info.Verb == "COMMIT" && w.rn.failed() == "" {
			if w.rn.waitTurn(w, u.t, w.rn.offset(j.rec, j.loop), 1) {
				rerun = true
				w.trx, w.inTrx = append(w.trx[:0], jobPtrs(u.jobs[:i])...), true
				w.rerunTrx(ctx, store.OutcomeOrderRerun, 2)
			}
		}
		if b := w.rn.board; b != nil && u.t != nil {
			at := w.rn.offset(j.rec, j.loop)
			changes := j.info == nil || j.info.Changes()
			b.set(w.slot, at+int64(j.rec.Duration), changes)
			if i > 0 {
				b.wait(ctx, w.slot, at, changes)
			}
		}
		var o store.Outcome
		kind := w.exec(ctx, j, &o)
		if rerun {
			o.Flags |= store.OutcomeOrderRerun
		}
		if kind == statement && retryable(&o) && capturedError(j.rec) != o.ErrCode && w.rn.cfg.Retries > 0 {
			w.finish(j, &o, kind)
			o = w.retry(ctx, j)
			w.trx = append(w.trx, j)
			w.record(j, &o)
			continue
		}
		if kind == statement && o.Flags&store.OutcomeError == 0 && capturedError(j.rec) == mysql.ER_LOCK_DEADLOCK {
			w.rollback(ctx)
			o.Flags |= store.OutcomeCaptureRollback
			w.st.count(func(c *counters) { c.captureRollbacks++ })
		}
		if kind != notCompared || j.rec.Kind == store.KindLongData {
			w.trx = append(w.trx, j)
			w.inTrx = true
		}
		w.finish(j, &o, kind)
	}
	if u.open && w.c != nil {
		w.rollback(ctx) // the client left with the transaction open
	}
	w.inTrx = false
	if b := w.rn.board; b != nil {
		b.set(w.slot, -1, false)
	}
}

func jobPtrs(js []job) []*job {
	out := make([]*job, len(js))
	for i := range js {
		out[i] = &js[i]
	}
	return out
}
