package replay

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/tandemdb/tandem/capture"
	"github.com/tandemdb/tandem/internal/blockio"
	"github.com/tandemdb/tandem/internal/rawio"
	"github.com/tandemdb/tandem/store"
	"github.com/tandemdb/tandem/wire"
)

// Error codes the replayer itself reports for a statement it could not send.
const (
	codeCannotConnect = 2003 // CR_CONN_HOST_ERROR
	codeLost          = 2013 // CR_SERVER_LOST
)

// worker owns one connection to a target and runs records on it. In
// session-fidelity mode it serves one captured session; with --concurrency
// it serves whole transactions of any session, re-applying the session
// state each needs.
type worker struct {
	rn   *runner
	conn *client.Conn
	// wc frames prepared-statement commands on conn's socket (stmt.go);
	// buf is the command being sent, params an execute's parameters.
	wc     *wire.Conn
	buf    []byte
	params []wire.Param
	// stmts caches this connection's prepared statements by schema and
	// SQL (a statement's tables are bound in the schema it was prepared
	// in), for --concurrency.
	stmts map[string]*stmt
	// Session-fidelity mode: captured statement id → its SQL, and the
	// statement prepared for it here (one per captured prepare, as captured).
	sqlOf map[uint32]string
	byID  map[uint32]*stmt
	// out buffers this worker's outcomes, committed every outBatch.
	out      *store.OutcomeBatch
	outBatch int
	// schema in use on conn; session whose SET statements conn carries
	schema   string
	session  uint64
	sets     int
	inTrx    bool
	nextDial time.Time
	backoff  time.Duration
}

func newWorker(rn *runner, outBatch int) *worker {
	return &worker{rn: rn, stmts: map[string]*stmt{}, sqlOf: map[uint32]string{}, byID: map[uint32]*stmt{},
		out: rn.run.NewOutcomeBatch(rn.idx), outBatch: outBatch}
}

// connect (re)opens the connection, with backoff after failures.
func (w *worker) connect(ctx context.Context, schema string) error {
	if w.conn != nil {
		return nil
	}
	if time.Now().Before(w.nextDial) {
		return errDialBackoff
	}
	db := w.rn.schemaFor(schema)
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := client.ConnectWithDialer(dctx, "", w.rn.addr, w.rn.user, w.rn.pass, db, w.rn.dial, func(c *client.Conn) error {
		c.SetCapability(mysql.CLIENT_MULTI_STATEMENTS)
		c.SetCapability(mysql.CLIENT_MULTI_RESULTS)
		c.SetCapability(mysql.CLIENT_PS_MULTI_RESULTS) // a CALL's result sets, executed
		// The classic COM_STMT_EXECUTE layout, which stmt.go writes.
		c.UnsetCapability(mysql.CLIENT_QUERY_ATTRIBUTES)
		return nil
	})
	if err != nil {
		w.backoff = min(max(2*w.backoff, 50*time.Millisecond), 5*time.Second)
		w.nextDial = time.Now().Add(w.backoff)
		w.rn.stats.mu.Lock()
		w.rn.stats.connectFailures++
		w.rn.stats.mu.Unlock()
		return err
	}
	w.backoff, w.conn, w.wc, w.schema, w.session, w.sets = 0, c, wire.NewConn(c.Conn.Conn), db, 0, 0
	w.forgetStatements()
	w.rn.stats.mu.Lock()
	w.rn.stats.connections++
	w.rn.stats.mu.Unlock()
	return nil
}

// resetState sends COM_RESET_CONNECTION: the session variables, user
// variables, temporary tables and prepared statements of the session the
// connection served before are gone; the schema stays.
func (w *worker) resetState() error {
	w.forgetStatements()
	w.conn.ResetSequence()
	if err := w.conn.WritePacket([]byte{1, 0, 0, 0, mysql.COM_RESET_CONNECTION}); err != nil {
		return err
	}
	_, err := w.conn.ReadOKPacket()
	return err
}

// adopt makes the connection carry u's session state: its schema, and the
// SET statements its session ran before u. A connection that carries
// another session's SETs is reset first.
func (w *worker) adopt(u *unit) {
	from := 0
	switch {
	case w.session == u.session:
		from = min(w.sets, len(u.sets))
	case w.sets > 0:
		if err := w.resetState(); err != nil {
			w.drop()
			return
		}
	}
	if db := w.rn.schemaFor(u.schema); db != "" && db != w.schema {
		if err := w.conn.UseDB(db); err == nil {
			w.schema = db
		}
	}
	for _, s := range u.sets[from:] {
		w.conn.Execute(s)
	}
	w.session, w.sets = u.session, len(u.sets)
}

// dial opens a connection on raw system calls. With IOBlocking a worker
// waits for each reply in the kernel, keeping its thread and P as a C
// client does (internal/blockio, WrapRaw); with IOPoller it parks on Go's
// poller (internal/rawio). Go's own socket calls cost a scheduler hand-off
// each. Figures: scripts/bench-replay.sh.
func (rn *runner) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if rn.blocking {
		return blockio.DialRaw(ctx, network, addr)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return rawio.Wrap(c), nil
}

var errDialBackoff = errors.New("replay: waiting to reconnect")

// drop forgets a broken connection.
func (w *worker) drop() {
	if w.conn != nil {
		w.conn.Close()
	}
	w.conn, w.wc, w.inTrx = nil, nil, false
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
	if w.conn != nil {
		w.conn.Quit()
	}
	w.conn, w.wc = nil, nil
}

// close ends the connection and writes the outcomes still buffered.
func (w *worker) close() {
	w.quit()
	w.rn.commit(w)
}

// prepared returns conn's statement for sql in the current schema,
// preparing it if needed.
func (w *worker) prepared(sql string) (*stmt, error) {
	key := w.schema + "\x00" + sql
	if st := w.stmts[key]; st != nil {
		return st, nil
	}
	st, err := w.prepare(sql)
	if err != nil {
		return nil, err
	}
	w.stmts[key] = st
	return st, nil
}

// run executes one record and returns its outcome. execSQL is the SQL of
// an execute's prepared statement and si the statement's analysis, when
// the caller has them already (--concurrency); nil and "" look them up.
func (w *worker) run(ctx context.Context, rec *store.Record, execSQL string, si *StmtInfo, o *store.Outcome) (*StmtInfo, bool) {
	o.Session = rec.Session
	if rec.Flags&(store.FlagNotReplayable|store.FlagTruncated|store.FlagMasked) != 0 {
		o.Flags |= store.OutcomeSkipped
		return nil, false
	}
	switch rec.Kind {
	case store.KindQuit:
		w.quit()
		return nil, false
	case store.KindChangeUser, store.KindResetConnection:
		// A change of user is replayed as a reset: the target's own
		// credentials are the only ones replay has.
		w.drop()
		return nil, false
	case store.KindLongData, store.KindFetch, store.KindReset, store.KindOther:
		o.Flags |= store.OutcomeSkipped
		return nil, false
	}
	statement := rec.Kind == store.KindQuery || rec.Kind == store.KindExecute
	if rec.Kind == store.KindExecute && execSQL == "" {
		execSQL = w.sqlOf[rec.StmtID] // known even when the connection is not
	}
	if statement && si == nil {
		si = w.rn.an.info(sqlOrKind(rec, execSQL))
	}
	schema := rec.Schema
	if err := w.connect(ctx, schema); err != nil {
		o.Flags |= store.OutcomeError
		o.ErrCode = codeCannotConnect
		return si, true
	}
	start := time.Now()
	var res *mysql.Result
	var err error
	switch rec.Kind {
	case store.KindConnect:
		if db := w.rn.schemaFor(schema); db != "" && db != w.schema {
			err = w.conn.UseDB(db)
			w.schema = db
		}
	case store.KindInitDB:
		db := w.rn.schemaFor(rec.Schema)
		if err = w.conn.UseDB(db); err == nil {
			w.schema = db
		}
	case store.KindPing:
		err = w.conn.Ping()
	case store.KindPrepare:
		w.sqlOf[rec.StmtID] = rec.SQL
		if old := w.byID[rec.StmtID]; old != nil {
			w.closeStmt(old)
		}
		var st *stmt
		if st, err = w.prepare(rec.SQL); err == nil {
			w.byID[rec.StmtID] = st
		} else {
			delete(w.byID, rec.StmtID)
		}
	case store.KindClose:
		if st := w.byID[rec.StmtID]; st != nil {
			w.closeStmt(st)
		}
		delete(w.byID, rec.StmtID)
		delete(w.sqlOf, rec.StmtID)
		return nil, false
	case store.KindQuery:
		sql := rec.SQL
		if si.TableDDL {
			sql = w.rn.rewrite(sql)
		}
		if len(rec.Resp.More) > 0 {
			res, err = w.multi(sql, o)
		} else {
			res, err = w.conn.Execute(sql)
		}
	case store.KindExecute:
		st := w.byID[rec.StmtID]
		if execSQL == "" {
			execSQL = w.sqlOf[rec.StmtID]
		} else {
			st = nil // --concurrency: this connection's statement for the SQL
		}
		if execSQL == "" {
			o.Flags |= store.OutcomeSkipped // prepared before the capture began
			return nil, false
		}
		if st == nil {
			// Not prepared here (--concurrency, or a prepare that failed
			// or was lost with a reconnect): prepare it now.
			st, err = w.prepared(execSQL)
		}
		if err == nil {
			err = w.execute(st, rec.Params, o)
		}
	}
	o.Service = time.Since(start)
	if !statement {
		// Connects, prepares, schema changes and pings are compared but are
		// not statements in the latency and throughput figures.
		w.outcome(res, err, &lifecycle, o)
		return nil, true
	}
	w.outcome(res, err, si, o)
	return si, true
}

var lifecycle StmtInfo

// multi runs a multi-statement query, folding every result into o.
func (w *worker) multi(sql string, o *store.Outcome) (*mysql.Result, error) {
	var sums capture.RowSums
	var rows uint64
	res, err := w.conn.ExecuteMultiple(sql, func(r *mysql.Result, err error) {
		if r != nil && r.Resultset != nil {
			for _, row := range r.RowDatas {
				sums.AddRow(row)
				rows++
			}
		}
	})
	o.Rows, o.Ordered, o.Unordered = rows, sums.Ordered, sums.Unordered
	if rows > 0 {
		o.Flags |= store.OutcomeRows
	}
	if res != nil {
		res.Resultset = nil // already folded in
	}
	return res, err
}

// outcome fills o from a result or an error; a broken connection is dropped.
func (w *worker) outcome(res *mysql.Result, err error, si *StmtInfo, o *store.Outcome) {
	if si.Nondeterministic {
		o.Flags |= store.OutcomeNondeterministic
	}
	if si.Ordered {
		o.Flags |= store.OutcomeOrdered
	}
	if err != nil {
		o.Flags |= store.OutcomeError
		var me *mysql.MyError
		if errors.As(err, &me) {
			o.ErrCode = me.Code
		} else {
			o.ErrCode = codeLost
			w.drop()
		}
		return
	}
	if res == nil {
		return
	}
	o.Affected, o.InsertID, o.Warnings = res.AffectedRows, res.InsertId, res.Warnings
	if rs := res.Resultset; rs != nil && len(rs.Fields) > 0 { // an OK packet comes with an empty Resultset
		var sums capture.RowSums
		for _, row := range rs.RowDatas {
			sums.AddRow(row)
		}
		o.Flags |= store.OutcomeRows
		o.Rows, o.Columns, o.Ordered, o.Unordered = uint64(len(rs.RowDatas)), uint32(len(rs.Fields)), sums.Ordered, sums.Unordered
		res.Close()
	}
}

func sqlOrKind(rec *store.Record, execSQL string) string {
	if rec.SQL != "" {
		return rec.SQL
	}
	return execSQL
}
