package replay

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/tandemdb/tandem/sandbox/sandboxtest"
	"github.com/tandemdb/tandem/store"
)

// A statement the capture's server answered with a lock wait timeout had
// no effect there (the transaction went on without it): replay never
// sends it, also not when the transaction runs again after a lock error
// of a target's own. Session 1 updates row 1, its UPDATE of row 2 timed
// out in the capture, it updates row 3 and commits. On target a only, a
// connection outside the capture holds row 3 until session 1's UPDATE of
// it has timed out once (1 s): replay retries the transaction there. The
// retry used to send the UPDATE of row 2, a write the capture never made:
// a's row 2 ended 1002, b's and the capture's 2.
func TestACapturedLockTimeoutIsNotSentOnARetry(t *testing.T) {
	srv := sandboxtest.Server(t, "innodb")
	dba, a := tableU(t, srv)
	dbb, b := tableU(t, srv)
	at, q := session1()
	ok, upd := store.Response{Kind: store.RespOK}, store.Response{Kind: store.RespOK, AffectedRows: 1}
	timedOut := q(3, "UPDATE u SET v = v + 1000 WHERE id = 2", store.Response{Kind: store.RespError, ErrCode: 1205, SQLState: "HY000",
		Message: "Lock wait timeout exceeded; try restarting transaction"})
	timedOut.Duration = 50 * time.Millisecond
	capDir := writeRecords(t, []store.Record{
		{Session: 1, Start: at(0), Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
		q(0.5, "SET SESSION innodb_lock_wait_timeout = 1", ok),
		q(1, "BEGIN", ok),
		q(2, "UPDATE u SET v = v + 1 WHERE id = 1", upd),
		timedOut,
		q(60, "UPDATE u SET v = v + 100 WHERE id = 3", upd),
		q(61, "COMMIT", ok),
		{Session: 1, Start: at(70), Kind: store.KindQuit},
	})

	// The outside lock on a's row 3, let go once session 1's UPDATE of it
	// has timed out.
	released := holdRow3UntilTimedOut(t, dba, "UPDATE u SET v = v + 100 WHERE id = 3")
	rep := replayRun(t, capDir, func(cfg *Config) {
		cfg.Order = OrderCapture
		cfg.OrderTimeout = 30 * time.Second
		cfg.Retries = 3
	}, tgt(t, "a", a, ""), tgt(t, "b", b, ""))
	if why := <-released; why != "" {
		t.Fatal(why)
	}

	ra, rb := rep.Targets[0], rep.Targets[1]
	if ra.ErrorCodes["1205"] != 1 || ra.Errors != 1 || ra.Retries != 1 || ra.RetriesSucceeded != 1 || ra.FailedTransactions != 0 {
		t.Errorf("a: %d errors %v, %d retries (%d succeeded), %d failed transactions; want one 1205, retried once with success, 0 failed",
			ra.Errors, ra.ErrorCodes, ra.Retries, ra.RetriesSucceeded, ra.FailedTransactions)
	}
	if rb.Errors != 0 || rb.Retries != 0 {
		t.Errorf("b: %d errors %v, %d retries; want none", rb.Errors, rb.ErrorCodes, rb.Retries)
	}
	for i, db := range []*sql.DB{dba, dbb} {
		got := rowsOfU(t, db)
		if got != "2,2,103" {
			t.Errorf("target %s: rows hold %s; want 2,2,103, as the capture left them (its UPDATE of row 2 timed out)", rep.Targets[i].Name, got)
		}
	}
	for i, c := range rep.VsCapture {
		if c.Total() != 0 || c.Ambiguous != 0 {
			t.Errorf("%s vs capture: divergent %v, counted apart %v; want all as captured", rep.Targets[i].Name, c.ByClass, c.AmbiguousBy)
		}
	}
}

// A transaction that failed for good on a target ends where the capture's
// ended, also when that end is implicit: a BEGIN in the middle of a
// transaction commits it. The transaction the BEGIN opens runs. On target
// a, a connection outside the capture holds row 3 throughout, so session
// 1's first transaction fails for good there (1205 on the first try and
// on its retry); its second, opened by a BEGIN without a COMMIT before
// it, used to be skipped as part of the failed one: a's row 1 stayed 1.
func TestABeginAfterAFailedTransactionRunsTheNextOne(t *testing.T) {
	srv := sandboxtest.Server(t, "innodb")
	dba, a := tableU(t, srv)
	dbb, b := tableU(t, srv)
	at, q := session1()
	ok, upd := store.Response{Kind: store.RespOK}, store.Response{Kind: store.RespOK, AffectedRows: 1}
	capDir := writeRecords(t, []store.Record{
		{Session: 1, Start: at(0), Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
		q(0.5, "SET SESSION innodb_lock_wait_timeout = 1", ok),
		q(1, "BEGIN", ok),
		q(2, "UPDATE u SET v = v + 100 WHERE id = 3", upd),
		q(3, "BEGIN", ok),
		q(4, "UPDATE u SET v = v + 10 WHERE id = 1", upd),
		q(5, "COMMIT", ok),
		{Session: 1, Start: at(10), Kind: store.KindQuit},
	})
	ctx := context.Background()
	holder := holdRow3(t, dba)
	rep := replayRun(t, capDir, func(cfg *Config) {
		cfg.Order = OrderCapture
		cfg.Retries = 1
	}, tgt(t, "a", a, ""), tgt(t, "b", b, ""))
	if _, err := holder.ExecContext(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}

	ra, rb := rep.Targets[0], rep.Targets[1]
	if ra.FailedTransactions != 1 || ra.ErrorCodes["1205"] != 2 || ra.Errors != 2 || ra.Skipped != 0 {
		t.Errorf("a: %d failed transactions, %d errors %v, %d skipped %v; want 1 failed, two 1205 (the try and its retry), 0 skipped",
			ra.FailedTransactions, ra.Errors, ra.ErrorCodes, ra.Skipped, ra.SkippedBy)
	}
	if rb.Errors != 0 || rb.FailedTransactions != 0 {
		t.Errorf("b: %d errors %v, %d failed transactions; want none", rb.Errors, rb.ErrorCodes, rb.FailedTransactions)
	}
	for i, c := range []struct {
		db   *sql.DB
		want string
	}{{dba, "11,2,3"}, {dbb, "11,2,103"}} {
		got := rowsOfU(t, c.db)
		if got != c.want {
			t.Errorf("target %s: rows hold %s; want %s", rep.Targets[i].Name, got, c.want)
		}
	}
}

// An XA transaction that fails for good on a target is rolled back by its
// xid there (XA END, XA ROLLBACK): a plain ROLLBACK inside one is refused
// (1399), which left it open — its locks held, and the session's next
// statement run inside it and lost at the session's end. On target a, a
// connection outside the capture holds row 3 throughout: the XA
// transaction's UPDATE of it times out on every try. The session's later
// UPDATE of row 1 (autocommit) used to be lost there.
func TestAFailedXATransactionIsRolledBackByItsXid(t *testing.T) {
	// One target: xids are the server's, and the test's targets would
	// share one.
	dba, a := tableU(t, sandboxtest.Server(t, "innodb"))
	at, q := session1()
	ok, upd := store.Response{Kind: store.RespOK}, store.Response{Kind: store.RespOK, AffectedRows: 1}
	capDir := writeRecords(t, []store.Record{
		{Session: 1, Start: at(0), Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
		q(0.5, "SET SESSION innodb_lock_wait_timeout = 1", ok),
		q(1, "XA START 'pay-7', 'b1'", ok),
		q(2, "UPDATE u SET v = v + 100 WHERE id = 3", upd),
		q(3, "XA END 'pay-7', 'b1'", ok),
		q(4, "XA PREPARE 'pay-7', 'b1'", ok),
		q(5, "XA COMMIT 'pay-7', 'b1'", ok),
		q(6, "UPDATE u SET v = v + 10 WHERE id = 1", upd),
		{Session: 1, Start: at(10), Kind: store.KindQuit},
	})
	ctx := context.Background()
	holder := holdRow3(t, dba)
	rep := replayRun(t, capDir, func(cfg *Config) {
		cfg.Order = OrderCapture
		cfg.Retries = 1
	}, tgt(t, "a", a, ""))
	if _, err := holder.ExecContext(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	ra := rep.Targets[0]
	if ra.FailedTransactions != 1 || ra.ErrorCodes["1205"] != 2 || ra.Errors != 2 {
		t.Errorf("a: %d failed transactions, %d errors %v; want 1 failed, two 1205 (the try and its retry)", ra.FailedTransactions, ra.Errors, ra.ErrorCodes)
	}
	got := rowsOfU(t, dba)
	if got != "11,2,3" {
		t.Errorf("rows hold %s; want 11,2,3: the XA transaction rolled back, the later UPDATE of row 1 committed", got)
	}
	var open int
	if err := dba.QueryRow("SELECT COUNT(*) FROM information_schema.innodb_trx").Scan(&open); err != nil {
		t.Fatal(err)
	}
	if open != 0 {
		t.Errorf("%d transactions left open on the server; want 0", open)
	}
}

// A server's xids are its own, not a database's. Two targets that are
// databases of one server took the same xid: the second XA START was
// refused (1440, XAER_DUPID), its transaction's writes ran outside any
// transaction and the captured XA COMMIT of session 2 committed the other
// target's prepared transaction. Each target after a server's first now
// gives its xids a branch qualifier of its own, and so does every --loop
// pass after the first. Session 1 rolls back 'pay-8', then prepares
// 'pay-7' and quits; session 2 commits 'pay-7', as a transaction
// manager's recovery does (in hexadecimal, as XA RECOVER FORMAT='SQL'
// gives it). Session 3 prepares 'pay-9' and quits: its commit is not in
// the capture.
//
// The server keeps a prepared XA transaction when its client goes away.
// Replay rolled it back at the session's end, in both modes, so the
// commit of session 2 failed (1397, XAER_NOTA) and its write was lost on
// every target: a session that leaves one prepared now lets the server
// keep it (worker.detachXA), and its end waits until the server has let
// it go, for the XA COMMIT to find it (asked at once, a third fail). One
// the capture never ends is rolled back at its session's end, so that the
// next pass, and the target's later users, find no locks held. XA
// RECOVER, which lists the other target's xids too, is not compared.
func TestTargetsOnOneServerHaveXidsOfTheirOwn(t *testing.T) {
	srv := sandboxtest.Server(t, "innodb")
	at, q := session1()
	ok, upd := store.Response{Kind: store.RespOK}, store.Response{Kind: store.RespOK, AffectedRows: 1}
	of := func(session uint64, ms float64, sql string) store.Record {
		r := q(ms, sql, ok)
		r.Session = session
		return r
	}
	capDir := writeRecords(t, []store.Record{
		{Session: 1, Start: at(0), Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
		{Session: 2, Start: at(1), Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
		{Session: 3, Start: at(2), Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
		q(100, "XA START 'pay-8'", ok),
		q(150, "UPDATE u SET v = v + 100 WHERE id = 2", upd),
		q(200, "XA END 'pay-8'", ok),
		q(250, "XA ROLLBACK 'pay-8'", ok),
		q(300, "XA START 'pay-7', 'b1'", ok),
		q(350, "UPDATE u SET v = v + 10 WHERE id = 1", upd),
		q(400, "XA END 'pay-7', 'b1'", ok),
		q(450, "XA PREPARE 'pay-7', 'b1'", ok),
		{Session: 1, Start: at(500), Kind: store.KindQuit},
		{Session: 2, Start: at(550), Duration: 500 * time.Microsecond, Kind: store.KindQuery, Schema: "shop", SQL: "XA RECOVER",
			Resp: store.Response{Kind: store.RespResultSet, Columns: 4, Rows: 1}},
		of(2, 600, "XA COMMIT X'7061792d37', X'6231', 1"), // as XA RECOVER FORMAT='SQL' writes it
		{Session: 2, Start: at(700), Kind: store.KindQuit},
		of(3, 710, "XA START 'pay-9'"),
		{Session: 3, Start: at(720), Duration: 500 * time.Microsecond, Kind: store.KindQuery, Schema: "shop", SQL: "UPDATE u SET v = v + 1000 WHERE id = 3", Resp: upd},
		of(3, 730, "XA END 'pay-9'"),
		of(3, 740, "XA PREPARE 'pay-9'"),
		{Session: 3, Start: at(750), Kind: store.KindQuit},
	})
	for _, mode := range bothModes {
		for _, run := range []struct {
			speed float64
			loop  int
			rows  string
		}{{0, 1, "11,2,3"}, {1, 2, "21,2,3"}} {
			name := fmt.Sprintf("%s, --speed %g --loop %d", mode.name, run.speed, run.loop)
			dba, a := tableU(t, srv)
			dbb, b := tableU(t, srv)
			rep := replayRun(t, capDir, func(cfg *Config) {
				cfg.Speed, cfg.Loop = run.speed, run.loop
				if mode.mod != nil {
					mode.mod(cfg)
				}
			}, tgt(t, "a", a+"?innodb_lock_wait_timeout=2", ""), tgt(t, "b", b+"?innodb_lock_wait_timeout=2", ""))
			for i, db := range []*sql.DB{dba, dbb} {
				tr := rep.Targets[i]
				if tr.Errors != 0 || tr.FailedTransactions != 0 {
					t.Errorf("%s: target %s: %d errors %v, %d failed transactions; want none", name, tr.Name, tr.Errors, tr.ErrorCodes, tr.FailedTransactions)
				}
				if got := rowsOfU(t, db); got != run.rows {
					t.Errorf("%s: target %s: rows hold %s; want %s ('pay-8' rolled back, 'pay-7' committed by session 2, 'pay-9' rolled back at the end)", name, tr.Name, got, run.rows)
				}
			}
			if d := rep.Divergences[0]; d.Total() != 0 || d.Missing != 0 {
				t.Errorf("%s: b against a: divergent %v, missing %d; want none", name, d.ByClass, d.Missing)
			}
			// XA RECOVER lists the other target's xids too: not compared.
			for i, c := range rep.VsCapture {
				if c.Total() != 0 || c.Nondeterministic != 1 {
					t.Errorf("%s: target %s against the capture: divergent %v, %d nondeterministic; want none, and XA RECOVER not compared", name, rep.Targets[i].Name, c.ByClass, c.Nondeterministic)
				}
			}
			var left int
			if err := dba.QueryRow("SELECT COUNT(*) FROM information_schema.innodb_trx").Scan(&left); err != nil {
				t.Fatal(err)
			}
			if n := xaRecovered(t, dba); left != 0 || n != 0 {
				t.Errorf("%s: %d transactions left on the server, %d prepared; want none", name, left, n)
			}
		}
	}
}

// xaRecovered counts the server's prepared XA transactions (XA RECOVER).
func xaRecovered(t *testing.T, db *sql.DB) int {
	t.Helper()
	rows, err := db.Query("XA RECOVER")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		n++
	}
	return n
}

// DDL commits the open transaction before it runs: when the captured
// server then answered the DDL with a lock wait timeout (a metadata lock
// another session held), the transaction before it was committed there.
// Replay does not send the DDL (it had no effect) and commits the
// transaction; it used to forget it open, and the target rolled it back
// at the session's end.
func TestAnImplicitCommitStandsWhenItsDDLTimedOut(t *testing.T) {
	srv := sandboxtest.Server(t, "innodb")
	at, q := session1()
	ok := store.Response{Kind: store.RespOK}
	capDir := writeRecords(t, []store.Record{
		{Session: 1, Start: at(0), Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
		q(1, "BEGIN", ok),
		q(2, "UPDATE u SET v = v + 10 WHERE id = 1", store.Response{Kind: store.RespOK, AffectedRows: 1}),
		q(3, "ALTER TABLE u ADD COLUMN c INT", store.Response{Kind: store.RespError, ErrCode: 1205, SQLState: "HY000",
			Message: "Lock wait timeout exceeded; try restarting transaction"}),
		q(60, "SELECT v FROM u WHERE id = 1", store.Response{Kind: store.RespResultSet, Columns: 1, Rows: 1}),
		{Session: 1, Start: at(70), Kind: store.KindQuit},
	})
	for _, mode := range bothModes {
		db, dsn := tableU(t, srv)
		rep := replayRun(t, capDir, mode.mod, tgt(t, "a", dsn, ""))
		if tr := rep.Targets[0]; tr.Errors != 0 || tr.FailedTransactions != 0 {
			t.Errorf("%s: %d errors %v, %d failed transactions; want none", mode.name, tr.Errors, tr.ErrorCodes, tr.FailedTransactions)
		}
		v, cols := uState(t, db)
		if v != 11 || cols != 2 {
			t.Errorf("%s: row 1 holds %d, the table has %d columns; want 11 (committed before the ALTER) and 2 (the ALTER not sent)", mode.name, v, cols)
		}
	}
}

// A DDL that a target answers with a lock wait timeout (a metadata lock
// held outside the capture) is retried alone: it had committed the
// transaction before it when it ran. With --concurrency, the retry used
// to run the transaction's UPDATE again and commit it a second time
// (row 1 ended 21, the capture's 11).
func TestARetriedDDLDoesNotRunItsTransactionAgain(t *testing.T) {
	srv := sandboxtest.Server(t, "innodb")
	at, q := session1()
	ok := store.Response{Kind: store.RespOK}
	capDir := writeRecords(t, []store.Record{
		{Session: 1, Start: at(0), Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
		q(1, "BEGIN", ok),
		q(2, "UPDATE u SET v = v + 10 WHERE id = 1", store.Response{Kind: store.RespOK, AffectedRows: 1}),
		q(3, "ALTER TABLE u ADD COLUMN c INT", ok),
		{Session: 1, Start: at(70), Kind: store.KindQuit},
	})
	for _, mode := range bothModes {
		db, dsn := tableU(t, srv)
		// A transaction outside the capture that read u holds its
		// metadata lock until the ALTER has timed out once.
		ctx := context.Background()
		holder, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{"BEGIN", "SELECT COUNT(*) FROM u"} {
			if _, err := holder.ExecContext(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
		t.Cleanup(func() { holder.Close() })
		released := releaseAfterTimeouts(holder, watchWait(t, db, "ALTER TABLE u ADD COLUMN c INT"), 1)
		rep := replayRun(t, capDir, func(c *Config) {
			c.Retries = 3
			if mode.mod != nil {
				mode.mod(c)
			}
		}, tgt(t, "a", dsn+"?lock_wait_timeout=1", ""))
		if why := <-released; why != "" {
			t.Fatalf("%s: %s", mode.name, why)
		}
		if tr := rep.Targets[0]; tr.ErrorCodes["1205"] != 1 || tr.Errors != 1 || tr.RetriesSucceeded != 1 || tr.FailedTransactions != 0 {
			t.Errorf("%s: %d errors %v, %d retries (%d succeeded), %d failed transactions; want one 1205, a retry that succeeded",
				mode.name, tr.Errors, tr.ErrorCodes, tr.Retries, tr.RetriesSucceeded, tr.FailedTransactions)
		}
		v, cols := uState(t, db)
		if v != 11 || cols != 3 {
			t.Errorf("%s: row 1 holds %d, the table has %d columns; want 11 (the UPDATE once) and 3 (the ALTER ran)", mode.name, v, cols)
		}
	}
}

// A retry that loses its connection (killed here, from outside, while it
// waits for a lock) was rolled back by the server: replay runs the whole
// transaction again on a new connection, as a client does. It used to
// take the lost statement as done, and run the rest of the transaction on
// its own on the new connection: the rows ended as neither the capture
// nor any order of it left them. Target a: a connection outside the
// capture holds row 3; session 1's UPDATE of it times out (1 s), the
// retry waits for it again and its connection is killed; then the lock
// is let go, and the second retry commits.
func TestARetryThatLosesItsConnectionRunsTheTransactionAgain(t *testing.T) {
	dba, a := tableU(t, sandboxtest.Server(t, "innodb"))
	exec(t, dba, "CREATE TABLE r (id INT PRIMARY KEY)")
	at, q := session1()
	ok, upd := store.Response{Kind: store.RespOK}, store.Response{Kind: store.RespOK, AffectedRows: 1}
	capDir := writeRecords(t, []store.Record{
		{Session: 1, Start: at(0), Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
		q(0.5, "SET SESSION innodb_lock_wait_timeout = 1", ok),
		// For the next transaction only: each try runs under it, the last
		// on a new connection (it crashed replay when the retry found
		// its connection gone, before that was fixed).
		q(0.8, "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE", ok),
		q(1, "BEGIN", ok),
		q(2, "UPDATE u SET v = v + 1 WHERE id = 1", upd),
		q(3, "UPDATE u SET v = v + 100 WHERE id = 3", upd),
		q(4, "UPDATE u SET v = v + 10 WHERE id = 2", upd),
		q(4.5, "INSERT INTO r SELECT 7 FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = CONNECTION_ID() AND trx_isolation_level = 'SERIALIZABLE'", upd),
		q(5, "COMMIT", ok),
		{Session: 1, Start: at(10), Kind: store.KindQuit},
	})
	ctx := context.Background()
	holder := holdRow3(t, dba)
	w := watchWait(t, dba, "UPDATE u SET v = v + 100 WHERE id = 3")
	released := make(chan string, 1)
	go func() {
		var why string
		switch {
		case w.until(true) == 0:
			why = "session 1's UPDATE of row 3 never waited for the outside lock"
		case w.until(false) == 0:
			why = "session 1's UPDATE of row 3 waited on past the lock wait timeout"
		default:
			id := w.until(true)
			if id == 0 {
				why = "the retry's UPDATE of row 3 never waited for the outside lock"
			} else if _, err := dba.Exec(fmt.Sprintf("KILL CONNECTION %d", id)); err != nil {
				why = "kill the retry's connection: " + err.Error()
			}
		}
		holder.ExecContext(ctx, "COMMIT")
		released <- why
	}()
	rep := replayRun(t, capDir, func(cfg *Config) {
		cfg.Order = OrderCapture
		cfg.OrderTimeout = 30 * time.Second
		cfg.Retries = 3
	}, tgt(t, "a", a, ""))
	if why := <-released; why != "" {
		t.Fatal(why)
	}
	ra := rep.Targets[0]
	if ra.FailedTransactions != 0 || ra.ErrorCodes["1205"] != 1 || ra.ErrorCodes["2013 connection reset"] != 1 || len(ra.ErrorCodes) != 2 || ra.Retries != 2 || ra.RetriesSucceeded != 1 {
		t.Errorf("a: %d failed transactions, errors %v, %d retries (%d succeeded); want 0 failed, one 1205 and the lost connection, 2 retries (the second succeeded)",
			ra.FailedTransactions, ra.ErrorCodes, ra.Retries, ra.RetriesSucceeded)
	}
	got := rowsOfU(t, dba)
	if got != "2,12,103" {
		t.Errorf("rows hold %s; want 2,12,103, the whole transaction once", got)
	}
	if r := rowsOf(t, dba, "r"); r != "7" {
		t.Errorf("r holds %q; want 7: the last try ran SERIALIZABLE", r)
	}
}

// tableU makes table u, rows (1, 1), (2, 2), (3, 3), in a fresh database
// on srv.
func tableU(t *testing.T, srv *sandboxtest.Handle) (*sql.DB, string) {
	t.Helper()
	db, dsn := srv.FreshDB(t)
	exec(t, db, "CREATE TABLE u (id INT PRIMARY KEY, v INT)", "INSERT INTO u VALUES (1, 1), (2, 2), (3, 3)")
	return db, dsn
}

// session1 gives the times of a capture made now (at: ms after its start)
// and session 1's queries in schema shop at them.
func session1() (at func(ms float64) time.Time, q func(ms float64, sql string, resp store.Response) store.Record) {
	start := time.Now().Truncate(time.Millisecond)
	at = func(ms float64) time.Time { return start.Add(time.Duration(ms * float64(time.Millisecond))) }
	q = func(ms float64, sql string, resp store.Response) store.Record {
		return store.Record{Session: 1, Start: at(ms), Duration: 500 * time.Microsecond, Kind: store.KindQuery, Schema: "shop", SQL: sql, Resp: resp}
	}
	return at, q
}

// holdRow3UntilTimedOut holds row 3 of u on db (holdRow3) until the
// statement text has waited for it and timed out once, then lets it go;
// the channel says why not, if it did not come to that.
func holdRow3UntilTimedOut(t *testing.T, db *sql.DB, text string) <-chan string {
	t.Helper()
	return releaseAfterTimeouts(holdRow3(t, db), watchWait(t, db, text), 1)
}

// releaseAfterTimeouts commits holder's transaction once the statement w
// watches has waited for its lock and timed out n times; the channel says
// why not, if it did not come to that.
func releaseAfterTimeouts(holder *sql.Conn, w waitWatch, n int) <-chan string {
	released := make(chan string, 1)
	go func() {
		why := ""
		for try := range n {
			switch {
			case w.until(true) == 0:
				why = fmt.Sprintf("try %d of %s never waited for the outside lock", try+1, w.text)
			case w.until(false) == 0:
				why = fmt.Sprintf("try %d of %s waited on past its lock wait timeout", try+1, w.text)
			}
			if why != "" {
				break
			}
		}
		holder.ExecContext(context.Background(), "COMMIT")
		released <- why
	}()
	return released
}

// holdRow3 locks row 3 of u on db from a connection outside the capture,
// until the caller commits on it (closed at the test's end).
func holdRow3(t *testing.T, db *sql.DB) *sql.Conn {
	t.Helper()
	holder, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Close() })
	for _, s := range []string{"BEGIN", "SELECT v FROM u WHERE id = 3 FOR UPDATE"} {
		if _, err := holder.ExecContext(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}
	return holder
}

// waitWatch watches db's database for a statement of a text running for
// over 100 ms: one waiting for a lock.
type waitWatch struct {
	db           *sql.DB
	dbName, text string
}

func watchWait(t *testing.T, db *sql.DB, text string) waitWatch {
	t.Helper()
	return waitWatch{db: db, text: text, dbName: databaseOf(t, db)}
}

// until polls, for up to 30 s, until the statement waits (want) or no
// longer does: the waiting connection's id (1 once none waits), 0 when it
// never came to that. A wait that began again (a retry: its time is less
// than the last seen) counts as the end of the one before: under load a
// poll can miss the 100 ms between a timeout and the retry's wait.
func (w waitWatch) until(want bool) int64 {
	last := -1.0
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		var id int64
		var ms float64
		err := w.db.QueryRow("SELECT id, time_ms FROM information_schema.processlist WHERE db = ? AND info = ? AND time_ms > 100 ORDER BY time_ms LIMIT 1", w.dbName, w.text).Scan(&id, &ms)
		waiting := err == nil
		if !want && waiting && ms < last {
			return 1
		}
		if waiting == want {
			return max(id, 1)
		}
		last = ms
	}
	return 0
}

// A DDL after a transaction that failed for good ends it implicitly, and
// runs: the captured server ran it. With --concurrency it was skipped as
// part of the failed transaction, and the target's table lacked the
// column from then on. On the target, a connection outside the capture
// holds row 3 until the UPDATE of it has timed out on its try and its
// retry.
func TestADDLAfterAFailedTransactionRuns(t *testing.T) {
	srv := sandboxtest.Server(t, "innodb")
	at, q := session1()
	ok, upd := store.Response{Kind: store.RespOK}, store.Response{Kind: store.RespOK, AffectedRows: 1}
	capDir := writeRecords(t, []store.Record{
		{Session: 1, Start: at(0), Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
		q(0.5, "SET SESSION innodb_lock_wait_timeout = 1", ok),
		q(1, "BEGIN", ok),
		q(2, "UPDATE u SET v = v + 100 WHERE id = 3", upd),
		q(3, "ALTER TABLE u ADD COLUMN c INT", ok),
		{Session: 1, Start: at(10), Kind: store.KindQuit},
	})
	for _, mode := range bothModes {
		db, dsn := tableU(t, srv)
		// The outside lock, let go once the try and the retry of the
		// UPDATE have timed out (the ALTER waits for it: it holds the
		// table's metadata lock too).
		released := releaseAfterTimeouts(holdRow3(t, db), watchWait(t, db, "UPDATE u SET v = v + 100 WHERE id = 3"), 2)
		rep := replayRun(t, capDir, func(c *Config) {
			c.Retries = 1
			if mode.mod != nil {
				mode.mod(c)
			}
		}, tgt(t, "a", dsn, ""))
		if why := <-released; why != "" {
			t.Fatalf("%s: %s", mode.name, why)
		}
		if tr := rep.Targets[0]; tr.FailedTransactions != 1 || tr.ErrorCodes["1205"] != 2 || tr.Errors != 2 || tr.Skipped != 0 {
			t.Errorf("%s: %d failed transactions, %d errors %v, %d skipped %v; want 1 failed, two 1205, 0 skipped",
				mode.name, tr.FailedTransactions, tr.Errors, tr.ErrorCodes, tr.Skipped, tr.SkippedBy)
		}
		_, cols := uState(t, db)
		if cols != 3 {
			t.Errorf("%s: the table has %d columns; want 3 (the ALTER ran)", mode.name, cols)
		}
	}
}

// A DDL replay does not send (cut at --max-record-bytes here; masked, or
// not rewritable for the target) still committed, on the captured server,
// the transaction open before it: replay commits it. It used to leave it
// open on the target, to be rolled back at the session's end (sessions)
// or when its connection was reset for another session (--concurrency).
func TestAnUnsentDDLStillCommitsTheTransactionBeforeIt(t *testing.T) {
	srv := sandboxtest.Server(t, "innodb")
	at, q := session1()
	ok := store.Response{Kind: store.RespOK}
	ddl := q(3, "ALTER TABLE u ADD COLUMN c INT", ok)
	ddl.Flags |= store.FlagTruncated
	capDir := writeRecords(t, []store.Record{
		{Session: 1, Start: at(0), Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
		q(1, "BEGIN", ok),
		q(2, "UPDATE u SET v = v + 10 WHERE id = 1", store.Response{Kind: store.RespOK, AffectedRows: 1}),
		ddl,
		{Session: 1, Start: at(10), Kind: store.KindQuit},
	})
	for _, mode := range bothModes {
		db, dsn := tableU(t, srv)
		rep := replayRun(t, capDir, mode.mod, tgt(t, "a", dsn, ""))
		if tr := rep.Targets[0]; tr.Errors != 0 || tr.SkippedBy[store.SkipReasonText(store.SkipTruncated)] != 1 {
			t.Errorf("%s: %d errors %v, skipped %v; want none, the ALTER skipped as truncated", mode.name, tr.Errors, tr.ErrorCodes, tr.SkippedBy)
		}
		if v, _ := uState(t, db); v != 11 {
			t.Errorf("%s: row 1 holds %d; want 11 (committed before the ALTER)", mode.name, v)
		}
	}
}

// bothModes are replay's two ways to run sessions: each on a connection of
// its own, and regrouped onto two (--concurrency).
var bothModes = []struct {
	name string
	mod  func(*Config)
}{{"sessions", nil}, {"--concurrency 2", func(c *Config) { c.Concurrency = 2 }}}

// rowsOfU is u's v values in id order, comma-separated.
func rowsOfU(t *testing.T, db *sql.DB) string {
	t.Helper()
	var got string
	if err := db.QueryRow("SELECT GROUP_CONCAT(v ORDER BY id) FROM u").Scan(&got); err != nil {
		t.Fatal(err)
	}
	return got
}

// uState is u's row 1 value and its number of columns.
func uState(t *testing.T, db *sql.DB) (v, cols int) {
	t.Helper()
	if err := db.QueryRow("SELECT v, (SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = 'u') FROM u WHERE id = 1").Scan(&v, &cols); err != nil {
		t.Fatal(err)
	}
	return v, cols
}
