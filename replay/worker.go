package replay

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/tandemdb/tandem/capture"
	"github.com/tandemdb/tandem/replay/conn"
	"github.com/tandemdb/tandem/replay/order"
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
	st  *wstats // its shard of the target's statistics (shared with other workers)
	out *store.OutcomeBatch
	// outBatch: outcomes buffered before a commit.
	outBatch int
	res      conn.Result
	// prelude: before's buffer for the SET sent with a statement.
	prelude []byte
	// ownTime: the session set its timestamp to a value of its own
	// (timestampSet): before sends none.
	ownTime bool

	// Session mode: the captured statement id's SQL and the statement
	// prepared for it here; statements whose long data was lost.
	sqlOf map[uint32]string
	// schemaOf: the schema each was prepared in (the captured session's).
	schemaOf map[uint32]string
	byID     map[uint32]*conn.Stmt
	lost     map[stmtRef]bool // by session too: regrouped, a worker serves many
	// longSent: the target's statements that hold long data sent for a
	// captured execute still to come (by session and captured id): an
	// execute not sent resets its statement (see finish).
	longSent map[stmtRef]*conn.Stmt
	// unrunnable: statements whose prepare's text cannot run, with why
	// (store.Skip*): their executes are skipped for that reason.
	unrunnable map[uint32]byte
	// --concurrency: this connection's statements by schema and SQL.
	stmts     map[stmtKey]*conn.Stmt
	regrouped bool
	slot      int // its connection's slot on the runner's board

	schema  string // in use on the connection
	client  clientFlags
	connOf  uint32 // the captured session's connection id (session mode; 0 unknown)
	session uint64 // whose state the connection carries (--concurrency)
	version int
	carried int // variables that session's state set on the connection
	// sets: in session mode, the captured session's variables as its SETs
	// left them on this target (the latest of each): a connection made
	// again within the session (the target closed it: wait_timeout, a
	// restart, a network error) gets them back, as the captured session
	// kept them. Cleared where the session starts over (connect, change
	// of user, reset).
	sets []setVar
	// xa is the xid of the XA transaction open on the connection (as its
	// XA START wrote it), "" for none: rollback ends it by name.
	// xaPrepared: XA PREPARE ran for it, so the server keeps it, prepared,
	// when the session ends (detachXA); awaitQuit: the session's quit left
	// one, so its quit waits until the server has detached it.
	xa                    string
	xaPrepared, awaitQuit bool
	// xaCaptured is xa's key as the capture names it, xaKey as sent
	// (sqlinfo.XidKey).
	xaCaptured, xaKey string

	// ctrx follows the captured session's transaction (session mode), as
	// its server saw it: where each captured transaction begins and ends.
	ctrx sqlinfo.Trx
	// trx holds the records of the open transaction that ran on the
	// target, in order, and trxOut their latest outcomes: what a retry or
	// a rerun runs again, and what a transaction that fails for good
	// flags. The target holds their locks while trx is not empty.
	trx    []*job
	trxOut []store.Outcome
	// failures are the transactions that failed for good here; failing
	// is the index of the one whose remaining records are being skipped
	// (-1: none).
	failures []store.FailedTrx
	failing  int
	// reorders are the changes this worker sent out of the capture's
	// order (the first MaxFailures; counters.reordered counts them all).
	reorders []store.Reorder
	// lastFail is the last lock error a retry met, or the connection it
	// lost (lastCause): it goes into a failure that ran out of retries.
	lastFail  uint16
	lastCause byte

	statsTrx bool // sysbench's transaction count: inside BEGIN … COMMIT
	released bool // the current record went before all it waits for
	// trxFlags are the ordering flags (released, rerun, retried) a record
	// of the open transaction had: the rest of it has them too (see
	// record); cleared when it ends.
	trxFlags uint32
	// nextChars: the SET TRANSACTION statements (no scope) the session
	// ran since its last statement, for its next transaction only;
	// trxChars: those the open transaction began under. A rerun of the
	// transaction, or of the statement they were for, sends them first:
	// the first try used them up (see charsForRerun).
	nextChars, trxChars []string
	// resendChars: those a rerun sends before its first statement (exec,
	// once connected).
	resendChars []string

	nextDial time.Time
	backoff  time.Duration
	dialErr  error // why the last connect failed, for the records that wait it out
	// cur is the ticket the worker runs records for: every statement it
	// sends marks it executing (for the gate's stall detection). cursor
	// is where the worker stands in the order, and what it publishes of
	// its transaction's locks (publishLocks).
	cur    *order.Ticket
	cursor *order.Cursor
	// locks is the set last published to lockedAt, of the open
	// transaction's first lockedN records: the next one appends to it.
	locks    *order.LockSet
	lockedAt *order.Cursor
	lockedN  int
}

func newWorker(rn *runner, outBatch int) *worker {
	w := &worker{rn: rn, st: rn.statsFor(), out: rn.run.NewOutcomeBatch(rn.point, rn.idx), outBatch: outBatch,
		sqlOf: map[uint32]string{}, schemaOf: map[uint32]string{}, byID: map[uint32]*conn.Stmt{}, lost: map[stmtRef]bool{}, unrunnable: map[uint32]byte{}, stmts: map[stmtKey]*conn.Stmt{},
		client: defaultClient, failing: -1}
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
	cfg.CacheMetadata = w.client.cacheMetadata
	c, err := conn.Dial(ctx, cfg)
	if err != nil {
		w.backoff = min(max(2*w.backoff, 50*time.Millisecond), 5*time.Second)
		w.nextDial = time.Now().Add(w.backoff)
		w.dialErr = err
		w.st.count(func(c *counters) { c.connectFailures++ })
		msg := err.Error()
		w.rn.dialErr.Store(&msg)
		w.rn.unreachable.CompareAndSwap(0, time.Now().UnixNano())
		w.rn.setDown(err)
		return err
	}
	w.rn.unreachable.Store(0)
	w.rn.setDown(nil)
	w.rn.track(c)
	c.Hold(w.regrouped) // see runConcurrent
	if !w.regrouped && w.connOf != 0 {
		w.rn.connIDs.Store(w.connOf, c.ID) // a KILL naming the session names this connection here
	}
	w.backoff, w.c, w.schema, w.session, w.version, w.carried = 0, c, cfg.DB, 0, 0, 0
	w.forgetStatements()
	w.st.count(func(c *counters) { c.connections++ })
	if !w.regrouped {
		for _, s := range w.sets { // a reconnect within the session
			var r conn.Result
			if err := c.Query(ctx, s.text, &r); err != nil {
				w.rn.cfg.Logger.Warn("a variable of the session could not be set again on its new connection", "target", w.rn.t.Name, "variable", s.name, "err", err)
			}
		}
	}
	return nil
}

// noteXA follows the XA transaction open on the connection (worker.xa,
// the xid as sent: runner.xid) from a statement that ran without error.
func (w *worker) noteXA(info *sqlinfo.Info, sql string, loop int) {
	if info.Verb != "XA" {
		return
	}
	moved := w.rn.xid(sql, loop)
	x, named := sqlinfo.XidText(moved)
	switch {
	case info.Begin:
		if named {
			w.xa, w.xaPrepared = x, false
			w.xaCaptured, _ = sqlinfo.XidKey(sql)
			w.xaKey, _ = sqlinfo.XidKey(moved)
		}
	case info.End:
		if key, ok := sqlinfo.XidKey(moved); ok {
			w.rn.settled(key)
		}
		w.xa, w.xaPrepared = "", false
	case info.XAPrepare:
		w.xaPrepared = w.xa != ""
	}
}

// noteSet keeps, in session mode, the variables of a SET the target took
// (worker.sets), in the order they were last set. Only values that give
// the same on a new connection are kept, to be sent again as they were
// (sqlinfo.Reevaluable: literals, CONCAT(@@sql_mode, …)); an expression
// of what the session did (NEXTVAL(s), @n + 1, LAST_INSERT_ID(), a
// prepared statement's ?) would be evaluated again, on other data: such a
// variable is forgotten (a new connection has the server's default for
// it). One-shot variables, which the next statement consumes, are never
// kept.
func (w *worker) noteSet(sql string) {
	as, ok := sqlinfo.SetAssignments(sql)
	if !ok {
		return
	}
	for _, a := range as {
		w.sets = slices.DeleteFunc(w.sets, func(s setVar) bool { return s.name == a.Name })
		if !sqlinfo.OneShot(a.Name) && (a.Name == "names" || strings.HasPrefix(a.Name, "transaction") || sqlinfo.Reevaluable(a.Value)) {
			w.sets = append(w.sets, setVar{name: a.Name, text: a.Text, value: a.Value})
		}
	}
}

// drop forgets a broken connection.
func (w *worker) drop() {
	if w.c != nil {
		w.rn.untrack(w.c)
		w.c.Close()
	}
	w.c = nil
	w.xa, w.xaPrepared = "", false // the server rolled back what the connection held (or keeps it prepared)
	w.forgetStatements()
}

// forgetStatements drops the statements of a connection that is gone or
// reset (the server has freed them).
func (w *worker) forgetStatements() {
	clear(w.stmts)
	clear(w.byID)
	clear(w.longSent)
}

// dropChars ends the one-shot transaction characteristics the session
// set for a statement replay did not send (the capture's server ran it, or
// rolled it back: either way the session's next transaction did not get
// them). MariaDB keeps them through statements that fail or start no
// transaction, until a transaction ends: a ROLLBACK, with none open, ends
// them. Left, they went to the session's next transaction (1792 on a
// write after a READ ONLY).
func (w *worker) dropChars() {
	w.nextChars = w.nextChars[:0]
	if w.c != nil {
		if err := w.helper(w.rn.ctx, "ROLLBACK"); err != nil {
			w.rn.cfg.Logger.Debug("could not drop one-shot transaction characteristics", "target", w.rn.t.Name, "err", err)
		}
	}
}

// stmtRef names a captured prepared statement.
type stmtRef struct {
	session uint64
	id      uint32
}

// longDataUsed notes that a captured execute was sent (the server took
// its statement's long data) or not: then the long data sent for it is
// dropped on the target (COM_STMT_RESET), else it would go with the
// statement's next execute, whose parameter would hold both.
func (w *worker) longDataUsed(rec *store.Record, sent bool) {
	ref := stmtRef{rec.Session, rec.StmtID}
	st := w.longSent[ref]
	if st == nil {
		return
	}
	delete(w.longSent, ref)
	if !sent && w.c != nil {
		if err := w.c.ResetStmt(w.rn.ctx, st); err != nil {
			w.rn.cfg.Logger.Debug("could not drop the long data of an execute not sent", "target", w.rn.t.Name, "err", err)
		}
	}
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

// close ends the connection and writes the outcomes still buffered. A
// session cut before its end (--duration, a stop, a capture that ends
// without it) that holds a prepared XA transaction rolls it back, as a
// session open at the capture's stop does: the server would keep it
// after the run, its locks held.
func (w *worker) close() {
	if w.xaPrepared && w.c != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second) // also when the run was stopped
		w.rollback(ctx)
		cancel()
	}
	w.quit()
	w.rn.commit(w)
	w.rn.retireWorker(w)
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
	w.notePrepare(rec)
	switch {
	case rec.Kind == store.KindQuit:
		if w.rn.x.killedQuits[rec.Seq] && w.c != nil && !w.regrouped {
			// Another session's KILL ended it (the capture recorded the
			// end first): the connection is left for that KILL.
			w.rn.leaveForKill(w.connOf, j.loop, w.c)
			w.c, w.awaitQuit = nil, false
			w.forgetStatements()
			return notCompared
		}
		var id uint32
		if w.c != nil {
			id = w.c.ID
		}
		w.quit()
		if w.awaitQuit && id != 0 {
			w.rn.awaitGone(id)
		}
		w.awaitQuit = false
		return notCompared
	case rec.Flags&store.FlagMasked != 0:
		return skip(o, store.SkipMasked)
	case rec.Flags&store.FlagTruncated != 0 && rec.Kind == store.KindLongData:
		w.lost[stmtRef{rec.Session, rec.StmtID}] = true
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
		if on, ok := capture.MultiStatementsOption(rec); ok && rec.Resp.Kind != store.RespError {
			w.setMultiStatements(ctx, on)
			return notCompared
		}
		return skip(o, store.SkipKind)
	case store.KindQuery:
		if !w.rn.cfg.RunGlobalSets && sqlinfo.SetsGlobal(rec.SQL) {
			return skip(o, store.SkipGlobalSet)
		}
	case store.KindClose:
		if st := w.byID[rec.StmtID]; st != nil && w.c != nil {
			w.c.CloseStmt(st)
		}
		delete(w.byID, rec.StmtID)
		delete(w.sqlOf, rec.StmtID)
		delete(w.schemaOf, rec.StmtID)
		delete(w.lost, stmtRef{rec.Session, rec.StmtID})
		delete(w.longSent, stmtRef{rec.Session, rec.StmtID})
		delete(w.unrunnable, rec.StmtID)
		return notCompared
	case store.KindConnect:
		w.client, w.connOf, w.ownTime, w.sets, w.xa, w.xaPrepared = clientOf(rec), rec.ConnID, false, nil, "", false
		w.nextChars = w.nextChars[:0]
		if w.c != nil { // a session reconnected (or a pass begins again)
			w.quit()
		}
	case store.KindExecute:
		if !w.resolve(j) {
			why := j.unrunnable // regrouped: the worker never saw the prepare
			if why == 0 {
				why = w.unrunnable[rec.StmtID]
			}
			if why != 0 {
				return skip(o, why) // its prepare's text: masked, truncated, not replayable
			}
			return skip(o, store.SkipUnknownStatement) // prepared before the capture began
		}
		if ref := (stmtRef{rec.Session, rec.StmtID}); w.lost[ref] {
			delete(w.lost, ref)
			return skip(o, store.SkipLongData)
		}
	}
	kind := lifecycle
	if w.resolve(j) {
		kind = statement
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
	for _, q := range w.resendChars {
		if err := w.helper(ctx, q); err != nil {
			w.rn.cfg.Logger.Debug("could not set the rerun transaction's characteristics again", "target", w.rn.t.Name, "err", err)
		}
	}
	w.resendChars = w.resendChars[:0]
	sql := j.sql
	if rec.Kind == store.KindPrepare {
		sql = rec.SQL
	}
	if kind == statement && j.info.TableDDL || rec.Kind == store.KindPrepare && w.rn.an.Info(sql).TableDDL {
		var err error
		if sql, err = w.rn.rewrite(sql); err != nil {
			if kind == statement && capturedError(rec) == 0 {
				w.noteLacking(j, store.ReorderUnsent)
			}
			return skip(o, store.SkipUnrewritable)
		}
	}
	if kind == statement && j.info.Verb == "XA" || rec.Kind == store.KindPrepare && w.rn.an.Info(sql).Verb == "XA" {
		sql = w.rn.xid(sql, j.loop)
	}
	if kind == statement && j.info.Kill {
		var ok bool
		if sql, ok = w.rn.mapKill(sql); !ok || rec.Kind != store.KindQuery { // a prepared KILL runs its prepared text
			return skip(o, store.SkipKill)
		}
	}
	if kind == statement {
		if err := w.before(ctx, j); err != nil {
			w.fill(o, nil, err, j.info)
			return kind
		}
	}
	w.res = conn.Result{}
	w.rn.gate.Sent(w.cur, max(rec.Duration, 1))
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
		w.ownTime, w.sets, w.xa, w.xaPrepared = false, nil, "", false
		w.nextChars = w.nextChars[:0]
		w.forgetStatements()
		clear(w.sqlOf)
		clear(w.schemaOf)
		clear(w.unrunnable)
		if err == nil && rec.Kind == store.KindChangeUser && rec.Schema != "" {
			db := w.rn.schemaFor(rec.Schema)
			if err = w.c.InitDB(ctx, db); err == nil {
				w.schema = db
			}
		}
	case store.KindPing:
		err = w.c.Ping(ctx)
	case store.KindPrepare:
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
		delete(w.longSent, stmtRef{rec.Session, rec.StmtID}) // the server drops it
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
		st, _, perr := w.statement(ctx, rec.StmtID, sql, w.regrouped)
		if perr == nil && w.c.SendLongData(ctx, st, rec.ParamIndex, rec.Data) == nil {
			if w.longSent == nil {
				w.longSent = map[stmtRef]*conn.Stmt{}
			}
			w.longSent[stmtRef{rec.Session, rec.StmtID}] = st
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
		if j.info.Kill {
			w.rn.killRan(rec.SQL, j.loop)
		}
	case store.KindExecute:
		var st *conn.Stmt
		var prepared bool
		if st, prepared, err = w.statement(ctx, rec.StmtID, sql, w.regrouped); err != nil {
			break // the prepare's failure is the execute's
		}
		if prepared {
			// The prepare the target needed first (a regrouped
			// connection's first use of the text, a reconnect) is not the
			// execute's latency: the capture's execute had none.
			start = time.Now()
		}
		if rec.IsBulk() {
			err = w.c.BulkExecute(ctx, st, rec.Data, &w.res) // all its rows in one command, as captured
		} else {
			err = w.c.Execute(ctx, st, rec.Params, rec.CursorType, rec.Flags&store.FlagNewParamsBound != 0, &w.res)
		}
		if len(w.longSent) > 0 {
			delete(w.longSent, stmtRef{rec.Session, rec.StmtID}) // taken with it
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

// notePrepare keeps the SQL of a statement the capture's session
// prepared, whether or not the target prepares it now (its connection
// lost, the target failing, the prepare skipped with a failed
// transaction): the session's executes of it prepare it again
// (statement), and are not taken for executes of a statement prepared
// before the capture began. A prepare whose text is masked, truncated or
// not replayable is not kept: its executes are skipped for that reason.
func (w *worker) notePrepare(rec *store.Record) {
	if rec.Kind != store.KindPrepare {
		return
	}
	if why := unrunnablePrepare(rec); why != 0 {
		delete(w.sqlOf, rec.StmtID)
		delete(w.schemaOf, rec.StmtID)
		w.unrunnable[rec.StmtID] = why
		return
	}
	delete(w.unrunnable, rec.StmtID)
	w.sqlOf[rec.StmtID] = rec.SQL
	w.schemaOf[rec.StmtID] = rec.Schema
}

// unrunnablePrepare says why a prepare's captured text cannot be run (a
// store.Skip* reason, as for the prepare itself), 0 when it can.
func unrunnablePrepare(rec *store.Record) byte {
	switch {
	case rec.Flags&store.FlagMasked != 0:
		return store.SkipMasked
	case rec.Flags&store.FlagTruncated != 0:
		return store.SkipTruncated
	case rec.Flags&store.FlagNotReplayable != 0:
		return store.SkipNotReplayable
	}
	return 0
}

// resolve sets j's SQL and its analysis — a query's text, an execute's
// prepared SQL — and reports whether j is a statement the session can
// run (an execute of a statement prepared before the capture began is
// not).
func (w *worker) resolve(j *job) bool {
	rec := j.rec
	switch rec.Kind {
	case store.KindQuery:
		j.sql = rec.SQL
	case store.KindExecute:
		if j.sql == "" {
			j.sql = w.sqlOf[rec.StmtID]
		}
	default:
		return false
	}
	if j.sql == "" {
		return false
	}
	if j.info == nil {
		j.info = w.rn.an.Info(j.sql)
	}
	return true
}

// before sends what must precede a statement on the target: the
// AUTO_INCREMENT value its captured INSERT generated
// (SET insert_id, as statement-based replication's INSERT_ID event does,
// so that retries, reruns and inserts that overlapped in the capture give
// every target the captured ids); and the captured statement's time
// (SET timestamp, as replication's events carry it) for a statement that
// writes and can read the clock (runner.takesClock: its text, or its
// table's columns, triggers, views …), or assigns a variable from a
// function such as NOW(), or reads an answer that is compared and takes
// the clock from what its text does not show (stamps). NOW(),
// CURRENT_TIMESTAMP and the columns that default to it or are updated
// with it then hold the time the captured server gave them (to the
// second, or closer: the capture's clock is the proxy's) on every target
// alike. Run at replay's own time, they held each target's clock: every
// later read of such a row differed from the capture, and between two
// targets whenever they ran it in different seconds, each counted as the
// engine's difference. The timestamp stays set on the connection until
// the next: a later read of NOW() sees it (such reads are not compared).
// Only a broken connection is an error.
func (w *worker) before(ctx context.Context, j *job) error {
	b := w.prelude[:0]
	if id := capturedInsertID(j); id != 0 && w.rn.generates(j.info, j.rec) {
		b = strconv.AppendUint(append(b, "SET insert_id = "...), id, 10)
	}
	if j.info.Set {
		if own, set := timestampSet(j.sql); set {
			// The session's own clock from here on, left as it set it;
			// or, set back to DEFAULT, the server's: the captured time
			// again.
			w.ownTime = own
		}
	}
	if at := j.rec.Start; !w.ownTime && w.stamps(j) && at.Unix() > 0 && at.Unix() < 1<<31-1 {
		if len(b) == 0 {
			b = append(b, "SET "...)
		} else {
			b = append(b, ", "...)
		}
		b = strconv.AppendInt(append(b, "timestamp = "...), at.Unix(), 10)
		us := at.Nanosecond() / 1000
		b = append(b, '.', byte('0'+us/100000), byte('0'+us/10000%10), byte('0'+us/1000%10), byte('0'+us/100%10), byte('0'+us/10%10), byte('0'+us%10))
	}
	if len(b) > 0 {
		// Sent with the statement, in one write (its time is in the
		// statement's: a few microseconds of the server's).
		w.c.Prelude(string(b))
	}
	w.prelude = b
	return nil
}

// stamps reports whether j's statement is sent the captured time (see
// before): a write that can read the clock (stampsTime, takesClock), or
// a read whose answer takes it from what its text does not show
// (runner.readsClock) or from a TIME parameter's date.
func (w *worker) stamps(j *job) bool {
	if stampsTime(j.info, j.sql) {
		return w.takesClock(j)
	}
	if j.info.Class != sqlinfo.ClassRead || j.info.Nondeterministic {
		return false // an answer not compared
	}
	clock := timeParam(j.rec) || w.rn.readsClock(j.info, j.rec.Schema) || w.rn.clock != nil && w.otherSchema(j)
	return clock && !capture.ReadsDiagnosticsText(j.sql) // not one a SET sent first would change
}

// takesClock reports whether j's statement can read the session's clock
// (runner.takesClock), or binds a TIME parameter (timeParam).
func (w *worker) takesClock(j *job) bool {
	return w.otherSchema(j) || timeParam(j.rec) || w.rn.takesClock(j.info, j.rec.Schema)
}

// otherSchema: an execute in session mode of a statement prepared in
// another schema than the session's now. The server resolved its tables
// where it was prepared, which the clock's marks (by the record's
// schema) do not tell: it is taken to read the clock.
func (w *worker) otherSchema(j *job) bool {
	return j.rec.Kind == store.KindExecute && !w.regrouped && w.schemaOf[j.rec.StmtID] != j.rec.Schema
}

// timeParam: an execute that binds a TIME value (JDBC's setTime, a
// MYSQL_TIME of that type): stored into a DATETIME or DATE column, or
// compared with one, it takes the current date (MariaDB 10.3 and later,
// MySQL 8), which SET timestamp sets.
func timeParam(rec *store.Record) bool {
	if rec.Kind != store.KindExecute {
		return false
	}
	for i := range rec.Params {
		if rec.Params[i].Type == store.TypeTime && !rec.Params[i].Null {
			return true
		}
	}
	return false
}

// stampsTime reports whether a statement needs the captured time set
// (before): one that writes, or assigns a variable from a function such
// as NOW(). Not BEGIN or COMMIT, nor a plain read; nor one that reads
// what the statement before it left (ROW_COUNT(), FOUND_ROWS(), the
// warnings), which a SET sent first would change. The timestamp's range
// is checked by before (1970 to 2038: older servers take no more).
func stampsTime(info *sqlinfo.Info, sql string) bool {
	switch {
	case info.Begin, info.End:
		return false
	case info.Class == sqlinfo.ClassWrite, len(info.Writes) > 0, info.WritesUnknown, info.Unanalysable && info.Class != sqlinfo.ClassRead:
	case info.Nondeterministic && (info.Set || info.UserVarAssign):
	default:
		return false
	}
	return !capture.ReadsDiagnosticsText(sql)
}

// timestampSet reports whether a SET assigns the session's timestamp,
// and if it does, whether the session keeps a clock of its own from then
// on (a restore of mysqlbinlog's output, a test's fixed clock: replay
// leaves the session's clock to it) or has the server's back (ownsTime).
func timestampSet(sql string) (own, set bool) {
	as, _ := sqlinfo.SetAssignments(sql)
	for _, a := range as {
		if a.Name == "timestamp" {
			own, set = ownsTime(a.Value), true
		}
	}
	return own, set
}

// ownsTime reports whether a value assigned to the session's timestamp
// fixes its clock: DEFAULT and 0 give it the server's clock back, and
// replay the captured time to send before what reads it. (Left to the
// session's, its later NOW() writes held each target's clock.)
func ownsTime(value string) bool {
	v := strings.TrimSpace(value)
	if strings.EqualFold(v, "DEFAULT") {
		return false
	}
	f, err := strconv.ParseFloat(v, 64)
	return err != nil || f != 0
}

// helper runs one of replay's own statements on the connection; a
// server error is the statement's business (the capture shows what
// follows), a broken connection is returned.
func (w *worker) helper(ctx context.Context, q string) error {
	var r conn.Result
	if err := w.c.Query(ctx, q, &r); err != nil {
		var se *conn.ServerError
		if !errors.As(err, &se) {
			return err
		}
	}
	return nil
}

// capturedInsertID is the AUTO_INCREMENT value a captured INSERT or
// REPLACE generated (its OK packet's insert id; the first of a multi-row
// insert), 0 when there is none to give the target.
func capturedInsertID(j *job) uint64 {
	r := &j.rec.Resp
	if r.Kind != store.RespOK || r.InsertID == 0 || len(r.More) > 0 || j.info == nil || j.info.Statements != 1 {
		return 0
	}
	if j.info.Verb != "INSERT" && j.info.Verb != "REPLACE" {
		return 0
	}
	return r.InsertID
}

// stmtKey names a statement prepared on a regrouped connection.
type stmtKey struct{ schema, sql string }

// statement returns the connection's statement for a captured statement
// id (session mode) or for its SQL in the current schema (--concurrency),
// preparing it if needed; prepared says it asked the target to.
func (w *worker) statement(ctx context.Context, id uint32, sql string, bySQL bool) (st *conn.Stmt, prepared bool, err error) {
	if !bySQL {
		if st := w.byID[id]; st != nil {
			return st, false, nil
		}
	}
	key := stmtKey{w.schema, sql} // a struct: no string built per execute
	if st := w.stmts[key]; st != nil {
		return st, false, nil
	}
	if st, err = w.c.Prepare(ctx, sql); err != nil {
		return nil, true, err
	}
	if bySQL {
		w.stmts[key] = st
	} else {
		w.byID[id] = st // prepared again (after a reconnect, or a failed prepare)
	}
	return st, true, nil
}

// fill sets o from a response or an error; a broken connection is dropped.
func (w *worker) fill(o *store.Outcome, r *conn.Result, err error, info *sqlinfo.Info) {
	if info != nil && (info.Nondeterministic || info.XARecover && w.rn.movesXids()) {
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
		w.st.failedRun(o) // every failed run, first or again, where it happened
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
// failedWith notes o's error as the last one the transaction met.
func (w *worker) failedWith(o *store.Outcome) { w.lastFail, w.lastCause = o.ErrCode, o.Cause }

// lostConnection: o's statement lost its connection (not an interrupted
// replay): the server rolled back the open transaction, and a client runs
// it again from its start on a new connection, as after a deadlock.
func lostConnection(o *store.Outcome) bool {
	return o.Flags&store.OutcomeClientError != 0 && !interrupted(o)
}

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

// detachXA is the end of a session (its quit, reset or change of user;
// not the capture's stop) that left an XA transaction prepared: the
// server keeps it, prepared, for whoever commits or rolls it back by its
// xid (a transaction manager's recovery, another session of the
// capture), so it is not rolled back here. It reports whether there was
// one; the run rolls it back at its end if nothing did
// (runner.leftPrepared).
//
// A transaction the capture never ends (no XA COMMIT or ROLLBACK of its
// xid: a recovery that bypassed the proxy) is rolled back all the same
// (false): kept, its locks would hold back what the next --loop pass, or
// the target's next user, does on its rows; in the capture nothing after
// it did (a write that waited for them failed there, and is not sent). A
// shadow, whose capture is still being written, keeps it.
func (w *worker) detachXA() bool {
	if !w.xaPrepared || w.c == nil || !w.rn.src.followed() && !w.rn.x.xaEnded[w.xaCaptured] {
		return false
	}
	w.rn.leftPrepared(w.xaKey, w.xa)
	w.xa, w.xaPrepared = "", false
	return true
}

// rollback ends the connection's transaction.
//
// An XA transaction (XA START xid ran) is ended and rolled back by its xid:
// the server refuses a plain ROLLBACK inside one (1399), which left it
// open, its locks held and the session's later statements in it.
func (w *worker) rollback(ctx context.Context) {
	if xa := w.xa; w.c != nil && xa != "" {
		w.xa, w.xaPrepared = "", false
		var r conn.Result
		w.c.Query(ctx, "XA END "+xa, &r) // refused once it ended (XA END, XA PREPARE): then only the rollback
		err := w.c.Query(ctx, "XA ROLLBACK "+xa, &r)
		var se *conn.ServerError
		if err == nil {
			return
		}
		if !errors.As(err, &se) {
			w.drop()
			return
		}
		// Refused (no such XA transaction any more): a plain one below.
	}
	if w.c != nil {
		var r conn.Result
		if err := w.c.Query(ctx, "ROLLBACK", &r); err != nil {
			var se *conn.ServerError
			if !errors.As(err, &se) {
				w.drop()
			}
		}
	}
}

// finish counts an outcome and buffers it for the run store.
func (w *worker) finish(j *job, o *store.Outcome, kind execKind) {
	w.st.records.Add(1)
	if len(w.longSent) > 0 && j.rec.Kind == store.KindExecute {
		w.longDataUsed(j.rec, kind != skipped)
	}
	if kind == skipped && len(w.nextChars) > 0 && len(w.trx) == 0 && j.info != nil && !j.info.Set && !j.info.SetNext && !j.info.Use {
		w.dropChars()
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
	case skipped:
		if !countsAsStatement(j.rec.Kind) {
			break // a connect, prepare or fetch not run: recorded, not a statement
		}
		class := sqlinfo.ClassOther
		if j.info != nil {
			class = j.info.Class
		}
		w.st.skip(o.SkipReason, class)
	}
	w.record(j, o)
}

// countsAsStatement: a record of kind k is counted with the statements,
// run or skipped — a query, an execute, or a command replay never runs
// (counted skipped on every target alike). A connect, prepare, fetch …
// run is a lifecycle command, not counted as a statement; skipped (its
// target failed, its statement unknown) it was counted as one, so a
// target that failed early had more statements than it had records.
func countsAsStatement(k store.Kind) bool {
	return k == store.KindQuery || k == store.KindExecute || k == store.KindOther
}

// record buffers an outcome (a retry's replaces the first attempt's).
// Every outcome carries its record.
func (w *worker) record(j *job, o *store.Outcome) {
	o.Seq, o.Session = store.OutcomeSeq(j.rec.Seq, j.loop), j.rec.Session
	// Out of the capture's order: the record went ahead of what it waits
	// for, or a change went ahead of it. Either way what it saw is not
	// what it saw in the capture, nor — its transaction's snapshot taken
	// then — what the rest of its transaction sees (a unit's ticket is
	// the whole transaction already).
	if w.released || w.cur != nil && w.cur.Overtaken() {
		o.Flags |= store.OutcomeOrderReleased
	}
	// A transaction that ran out of order, or again (for order or after a
	// deadlock), took its snapshot at another point than in the capture:
	// the rest of it is flagged alike.
	o.Flags |= w.trxFlags
	if w.regrouped || w.ctrx.Open() {
		w.trxFlags |= o.Flags & (store.OutcomeOrderReleased | store.OutcomeOrderRerun | store.OutcomeRetried)
	}
	if obs := w.rn.obs; obs != nil {
		// A copy: an observer is an interface, and handing it o would
		// move every statement's outcome to the heap, followed or not.
		oc := *o
		obs.Outcome(Done{Rec: j.rec, SQL: j.sql, Info: j.info, Outcome: &oc})
	}
	w.out.Add(o)
	if w.out.Len() >= w.outBatch || w.out.Full() {
		w.rn.commit(w)
	}
}

// setMultiStatements turns the session's multi-statement texts on or off
// (a captured COM_SET_OPTION): on the connection, and for the next one.
// A connection the option cannot be set on is dropped (the next opens
// with it).
func (w *worker) setMultiStatements(ctx context.Context, on bool) {
	w.client.setMultiStatements(on)
	if w.c != nil && w.c.SetMultiStatements(ctx, on) != nil {
		w.drop()
	}
}

// adopt makes the connection carry u's session: its client flags, schema,
// and variables (the latest value of each). A connection that carries
// another session's state is reset first.
func (w *worker) adopt(ctx context.Context, u *unit) error {
	if other := w.client; w.c != nil && other != u.client {
		other.caps ^= mysql.CLIENT_MULTI_STATEMENTS
		if other == u.client { // only multi-statements differ: set, not reconnect
			w.setMultiStatements(ctx, u.client.caps&mysql.CLIENT_MULTI_STATEMENTS != 0)
		} else {
			w.quit() // other client flags: another connection
		}
	}
	w.client = u.client
	if err := w.connect(ctx, u.schema); err != nil {
		return err
	}
	from := 0
	switch {
	case w.session == u.session && w.version == u.version:
		from = -1
	case w.session == u.session && w.version >= u.resetAt:
		from = w.version
	case w.carried > 0:
		// Another session's variables, or this one's from before its
		// change of user or reset: a clean session first (its prepared
		// statements go too). A connection that carries none needs nothing.
		if err := w.c.ResetConnection(ctx); err != nil {
			w.drop()
			return err
		}
		w.forgetStatements()
		w.carried = 0
	}
	w.ownTime = slices.ContainsFunc(u.sets, func(s setVar) bool { return s.name == "timestamp" && ownsTime(s.value) })
	if db := w.rn.schemaFor(u.schema); db != "" && db != w.schema {
		if err := w.c.InitDB(ctx, db); err == nil {
			w.schema = db
		}
	}
	if from >= 0 {
		for _, s := range u.sets {
			if s.version > from {
				var r conn.Result
				if err := w.c.Query(ctx, s.text, &r); err != nil && s.ok {
					// The capture's server took it; this target did not,
					// and the session goes on in another state: the
					// target's error (one that failed in the capture too
					// is as captured).
					var o store.Outcome
					w.fill(&o, &r, err, nil) // counts it
				}
				w.carried++
			}
		}
	}
	w.session, w.version = u.session, u.version
	return nil
}
