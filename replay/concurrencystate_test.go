package replay

import (
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/tandemdb/tandem/sandbox/sandboxtest"
	"github.com/tandemdb/tandem/store"
)

// With --concurrency, a SET TRANSACTION for the session's next
// transaction runs with that transaction, on its connection. Here one
// connection serves two sessions (--concurrency 1), and the other
// session's INSERT comes between the SET and the transaction in the
// capture. The SET used to be a unit of its own, and the INSERT ran in
// the read-only transaction it set: error 1792, row 1 missing, and a
// divergence that was replay's, not the engine's.
func TestConcurrencyRunsSetTransactionWithItsTransaction(t *testing.T) {
	// SET @@tx_read_only = 1 without a scope sets the next transaction
	// only too (MariaDB keeps the session's value): it was taken for the
	// session's state, sent before each later unit of it.
	for _, set := range []string{"SET TRANSACTION READ ONLY", "SET @@tx_read_only = 1"} {
		t.Run(set, func(t *testing.T) { runsSetTransactionWithItsTransaction(t, set) })
	}
}

func runsSetTransactionWithItsTransaction(t *testing.T, set string) {
	db, dsn := tableR(t)
	at, q, q2 := sessions12()
	ok, ins := store.Response{Kind: store.RespOK}, store.Response{Kind: store.RespOK, AffectedRows: 1}
	readOnly := store.Response{Kind: store.RespError, ErrCode: 1792, SQLState: "25006", Message: "Cannot execute statement in a READ ONLY transaction"}
	capDir := writeRecords(t, []store.Record{
		{Session: 1, Start: at(0), Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
		{Session: 2, Start: at(0.5), Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
		q(1, set, ok),
		q2(2, "INSERT INTO r VALUES (1)", ins),
		q(3, "START TRANSACTION", ok),
		q(4, "INSERT INTO r VALUES (9)", readOnly),
		q(5, "COMMIT", ok),
		q2(6, "INSERT INTO r VALUES (2)", ins),
		q(6.5, "INSERT INTO r VALUES (3)", ins), // a later transaction: read-write
		{Session: 1, Start: at(7), Kind: store.KindQuit},
		{Session: 2, Start: at(7.5), Kind: store.KindQuit},
	})
	rep := replayRun(t, capDir, func(c *Config) { c.Concurrency = 1 }, tgt(t, "a", dsn, ""))
	if got := rowsOf(t, db, "r"); got != "1,2,3" {
		t.Errorf("rows %q; want 1,2,3: the INSERTs of session 2 and session 1's last in read-write transactions, row 9 refused", got)
	}
	if d := rep.VsCapture[0]; d.Total() != 0 || d.Compared != 7 {
		t.Errorf("vs capture: compared %d (want 7), divergent %v %+v", d.Compared, d.ByClass, d.Samples)
	}
}

// With --concurrency, a SET inside a transaction sets the session's state
// on its connection: before another session's unit runs there, the
// connection is reset. It was not (only state sent before a unit counted),
// and the other session's INSERT ran with the first one's ANSI_QUOTES: a
// "string" became a column, error 1054, row 2 missing.
func TestConcurrencyResetsASetOfATransactionForTheNextSession(t *testing.T) {
	db, dsn := tableR(t)
	at, q, q2 := sessions12()
	ok, ins := store.Response{Kind: store.RespOK}, store.Response{Kind: store.RespOK, AffectedRows: 1}
	capDir := writeRecords(t, []store.Record{
		{Session: 1, Start: at(0), Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
		{Session: 2, Start: at(0.5), Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
		q(1, "BEGIN", ok),
		q(2, "SET SESSION sql_mode = 'ANSI_QUOTES'", ok),
		q(3, "INSERT INTO r VALUES (1)", ins),
		q(4, "COMMIT", ok),
		q2(5, `INSERT INTO r SELECT 2 FROM DUAL WHERE "a" = 'a'`, ins),
		q(6, "INSERT INTO r SELECT 3 FROM DUAL WHERE @@sql_mode LIKE '%ANSI_QUOTES%'", ins),
		{Session: 1, Start: at(7), Kind: store.KindQuit},
		{Session: 2, Start: at(7.5), Kind: store.KindQuit},
	})
	rep := replayRun(t, capDir, func(c *Config) { c.Concurrency = 1 }, tgt(t, "a", dsn, ""))
	if got := rowsOf(t, db, "r"); got != "1,2,3" {
		t.Errorf("rows %q; want 1,2,3: session 2 without ANSI_QUOTES, session 1 still with it", got)
	}
	if d := rep.VsCapture[0]; d.Total() != 0 || d.Compared != 6 {
		t.Errorf("vs capture: compared %d (want 6), divergent %v %+v", d.Compared, d.ByClass, d.Samples)
	}
}

// With --concurrency, a session whose SET gives a variable a value of what
// it did (NEXTVAL) keeps a connection of its own: moved to another
// connection, its units were given the SET again there, which took a new
// value from the sequence each time (rows 1,12 and the sequence at 3).
func TestConcurrencyKeepsASessionWhoseSetDependsOnWhatItDid(t *testing.T) {
	db, dsn := tableR(t)
	exec(t, db, "CREATE SEQUENCE s")
	at, q, q2 := sessions12()
	ok, ins := store.Response{Kind: store.RespOK}, store.Response{Kind: store.RespOK, AffectedRows: 1}
	capDir := writeRecords(t, []store.Record{
		{Session: 1, Start: at(0), Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
		{Session: 2, Start: at(0.5), Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
		q(1, "SET @id = NEXTVAL(s)", ok),
		q(2, "INSERT INTO r VALUES (@id)", ins),
		q2(3, "INSERT INTO r VALUES (100)", ins),
		q(4, "INSERT INTO r VALUES (@id + 10)", ins),
		{Session: 1, Start: at(7), Kind: store.KindQuit},
		{Session: 2, Start: at(7.5), Kind: store.KindQuit},
	})
	rep := replayRun(t, capDir, func(c *Config) { c.Concurrency = 1 }, tgt(t, "a", dsn, ""))
	if got := rowsOf(t, db, "r"); got != "1,11,100" {
		t.Errorf("rows %q; want 1,11,100: NEXTVAL(s) taken once", got)
	}
	var next int
	if err := db.QueryRow("SELECT NEXTVAL(s)").Scan(&next); err != nil {
		t.Fatal(err)
	}
	if next != 2 {
		t.Errorf("the sequence's next value is %d; want 2", next)
	}
	if tr := rep.Targets[0]; tr.PinnedSessions != 1 {
		t.Errorf("%d sessions kept a connection of their own; want 1", tr.PinnedSessions)
	}
	if d := rep.VsCapture[0]; d.Total() != 0 {
		t.Errorf("vs capture: divergent %v %+v", d.ByClass, d.Samples)
	}
}

// With --concurrency, a session that ends a transaction AND CHAIN keeps
// a connection of its own. The chained transaction opened on the
// connection with the COMMIT, but its statements were the session's next
// unit: the other session's INSERT, run there in between, ran inside it,
// and the chained ROLLBACK undid it (rows 1 only; on two connections the
// chained INSERT would commit at once and the ROLLBACK undo nothing).
func TestConcurrencyKeepsAChainedTransactionWhole(t *testing.T) {
	db, dsn := tableR(t)
	at, q, q2 := sessions12()
	ok, ins := store.Response{Kind: store.RespOK}, store.Response{Kind: store.RespOK, AffectedRows: 1}
	capDir := writeRecords(t, []store.Record{
		{Session: 1, Start: at(0), Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
		{Session: 2, Start: at(0.5), Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
		q(1, "BEGIN", ok),
		q(2, "INSERT INTO r VALUES (1)", ins),
		q(3, "COMMIT AND CHAIN", ok),
		q2(4, "INSERT INTO r VALUES (100)", ins),
		q(5, "INSERT INTO r VALUES (2)", ins),
		q(6, "ROLLBACK", ok),
		{Session: 1, Start: at(7), Kind: store.KindQuit},
		{Session: 2, Start: at(7.5), Kind: store.KindQuit},
	})
	rep := replayRun(t, capDir, func(c *Config) { c.Concurrency = 1 }, tgt(t, "a", dsn, ""))
	if got := rowsOf(t, db, "r"); got != "1,100" {
		t.Errorf("rows %q; want 1,100: row 2 rolled back with its chained transaction", got)
	}
	if tr := rep.Targets[0]; tr.PinnedSessions != 1 {
		t.Errorf("%d sessions kept a connection of their own; want 1", tr.PinnedSessions)
	}
	if d := rep.VsCapture[0]; d.Total() != 0 {
		t.Errorf("vs capture: divergent %v %+v", d.ByClass, d.Samples)
	}
}

// A one-shot SET whose statement replay does not send (here the capture's
// server answered it with a lock wait timeout) is not left for another
// session's unit on the connection: it gets a clean one. It got the
// READ ONLY, and its INSERT failed with 1792.
func TestConcurrencyDoesNotLeaveAOneShotSetToAnotherSession(t *testing.T) {
	db, dsn := tableR(t)
	at, q, q2 := sessions12()
	ok, ins := store.Response{Kind: store.RespOK}, store.Response{Kind: store.RespOK, AffectedRows: 1}
	timedOut := store.Response{Kind: store.RespError, ErrCode: 1205, SQLState: "HY000", Message: "Lock wait timeout exceeded; try restarting transaction"}
	capDir := writeRecords(t, []store.Record{
		{Session: 1, Start: at(0), Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
		{Session: 2, Start: at(0.5), Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
		q(1, "SET TRANSACTION READ ONLY", ok),
		q(2, "UPDATE r SET id = id + 1 WHERE id = 0", timedOut),
		q2(3, "INSERT INTO r VALUES (5)", ins),
		{Session: 1, Start: at(7), Kind: store.KindQuit},
		{Session: 2, Start: at(7.5), Kind: store.KindQuit},
	})
	rep := replayRun(t, capDir, func(c *Config) { c.Concurrency = 1 }, tgt(t, "a", dsn, ""))
	if got := rowsOf(t, db, "r"); got != "5" {
		t.Errorf("rows %q; want 5: session 2's INSERT on a clean connection", got)
	}
	if d := rep.VsCapture[0]; d.Total() != 0 {
		t.Errorf("vs capture: divergent %v %+v", d.ByClass, d.Samples)
	}
}

// With --concurrency, a session's reset (COM_RESET_CONNECTION, or a
// change of user) gives its next unit a connection with the server's
// defaults. A connection that carried its state from before was given
// only the SETs after the reset (none), and kept ANSI_QUOTES: the INSERT
// failed with 1054.
func TestConcurrencyResetsTheConnectionAfterASessionsReset(t *testing.T) {
	db, dsn := tableR(t)
	at, q := session1()
	ok, ins := store.Response{Kind: store.RespOK}, store.Response{Kind: store.RespOK, AffectedRows: 1}
	capDir := writeRecords(t, []store.Record{
		{Session: 1, Start: at(0), Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
		q(1, "SET SESSION sql_mode = 'ANSI_QUOTES'", ok),
		q(2, `INSERT INTO r SELECT 1 FROM DUAL WHERE @@sql_mode LIKE '%ANSI_QUOTES%'`, ins),
		{Session: 1, Start: at(3), Kind: store.KindResetConnection, Resp: ok},
		q(4, `INSERT INTO r SELECT 2 FROM DUAL WHERE "a" = 'a'`, ins),
		{Session: 1, Start: at(5), Kind: store.KindQuit},
	})
	rep := replayRun(t, capDir, func(c *Config) { c.Concurrency = 1 }, tgt(t, "a", dsn, ""))
	if got := rowsOf(t, db, "r"); got != "1,2" {
		t.Errorf("rows %q; want 1,2: ANSI_QUOTES before the reset, not after it", got)
	}
	if d := rep.VsCapture[0]; d.Total() != 0 {
		t.Errorf("vs capture: divergent %v %+v", d.ByClass, d.Samples)
	}
}

// A one-shot SET whose statement replay does not send (here cut at the
// capture's size limit) does not reach the session's next statement
// either: MariaDB keeps such characteristics until a transaction ends,
// and the capture's statement had ended one. Replay ends them with a
// ROLLBACK. The INSERT after it used to run READ ONLY (1792), in both
// modes.
func TestAOneShotSetOfAStatementNotSentEnds(t *testing.T) {
	for _, m := range bothModes {
		t.Run(m.name, func(t *testing.T) {
			db, dsn := tableR(t)
			at, q := session1()
			ok, ins := store.Response{Kind: store.RespOK}, store.Response{Kind: store.RespOK, AffectedRows: 1}
			cut := q(2, "SELECT id FROM r WHERE id IN (1, 2, 3", store.Response{Kind: store.RespResultSet, Columns: 1})
			cut.Flags |= store.FlagTruncated
			capDir := writeRecords(t, []store.Record{
				{Session: 1, Start: at(0), Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
				q(1, "SET TRANSACTION READ ONLY", ok),
				cut,
				q(3, "INSERT INTO r VALUES (4)", ins),
				{Session: 1, Start: at(4), Kind: store.KindQuit},
			})
			rep := replayRun(t, capDir, m.mod, tgt(t, "a", dsn, ""))
			if got := rowsOf(t, db, "r"); got != "4" {
				t.Errorf("rows %q; want 4: the INSERT read-write", got)
			}
			if tr := rep.Targets[0]; tr.Skipped != 1 || tr.Errors != 0 {
				t.Errorf("skipped %d %v, %d errors %v; want the cut SELECT skipped, no error", tr.Skipped, tr.SkippedBy, tr.Errors, tr.ErrorCodes)
			}
		})
	}
}

// With --concurrency and --loop, a session's second pass starts from the
// server's defaults and its own SETs, not from where the first pass left
// the connection. Its state versions started over at each pass, so the
// worker, holding the first pass's last version, took the second pass's
// first unit for one it had the state of: it ran without ANSI_QUOTES.
func TestConcurrencyLoopStartsEachPassFromItsOwnState(t *testing.T) {
	srv := sandboxtest.Server(t, "innodb")
	db, dsn := srv.FreshDB(t)
	exec(t, db, "CREATE TABLE m (pass_mode VARCHAR(200))")
	at, q := session1()
	ok, ins := store.Response{Kind: store.RespOK}, store.Response{Kind: store.RespOK, AffectedRows: 1}
	capDir := writeRecords(t, []store.Record{
		{Session: 1, Start: at(0), Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
		q(1, "SET SESSION sql_mode = 'ANSI_QUOTES'", ok),
		q(2, "INSERT INTO m SELECT CONCAT('first ', @@sql_mode)", ins),
		q(3, "SET SESSION sql_mode = ''", ok),
		q(4, "INSERT INTO m SELECT CONCAT('second ', @@sql_mode)", ins),
		{Session: 1, Start: at(5), Kind: store.KindQuit},
	})
	replayRun(t, capDir, func(c *Config) { c.Concurrency, c.Loop = 1, 2 }, tgt(t, "a", dsn, ""))
	var got string
	if err := db.QueryRow("SELECT GROUP_CONCAT(pass_mode ORDER BY pass_mode SEPARATOR '|') FROM m").Scan(&got); err != nil {
		t.Fatal(err)
	}
	if want := "first ANSI_QUOTES|first ANSI_QUOTES|second |second "; got != want {
		t.Errorf("rows %q; want %q", got, want)
	}
}

// rowsOf is table's id values in order, comma-separated.
func rowsOf(t *testing.T, db *sql.DB, table string) string {
	t.Helper()
	var got string
	if err := db.QueryRow("SELECT IFNULL(GROUP_CONCAT(id ORDER BY id), '') FROM " + table).Scan(&got); err != nil {
		t.Fatal(err)
	}
	return got
}

// tableR makes table r (id INT PRIMARY KEY) in a fresh database on a
// sandboxed InnoDB server.
func tableR(t *testing.T) (*sql.DB, string) {
	t.Helper()
	db, dsn := sandboxtest.Server(t, "innodb").FreshDB(t)
	exec(t, db, "CREATE TABLE r (id INT PRIMARY KEY)")
	return db, dsn
}

// sessions12 are session1's clock and queries, and session 2's queries.
func sessions12() (at func(ms float64) time.Time, q, q2 func(ms float64, sql string, resp store.Response) store.Record) {
	at, q = session1()
	q2 = func(ms float64, sql string, resp store.Response) store.Record {
		r := q(ms, sql, resp)
		r.Session = 2
		return r
	}
	return at, q, q2
}

// With --concurrency, a connection's prepared statements are kept by the
// schema they were prepared in. After a USE inside a unit (a transaction)
// that schema was "" (not known) until the next unit: a session that USEs
// one schema and executes, then USEs another and executes the same
// statement (each in a transaction), ran the
// statement prepared in the first schema the second time too, and changed
// its table twice and the second's never.
func TestConcurrencyPreparesAfterUseInTheSchemaUsed(t *testing.T) {
	srv := sandboxtest.Server(t, "innodb")
	home, _ := srv.FreshDB(t)
	dbA, _ := srv.FreshDB(t)
	dbB, _ := srv.FreshDB(t)
	h, a, b := databaseOf(t, home), databaseOf(t, dbA), databaseOf(t, dbB)
	for _, db := range []*sql.DB{home, dbA, dbB} {
		exec(t, db, "CREATE TABLE u (id INT PRIMARY KEY, n INT NOT NULL)", "INSERT INTO u VALUES (1, 0)")
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ok := store.Response{Kind: store.RespOK}
	upd := store.Response{Kind: store.RespOK, AffectedRows: 1}
	q := func(ms int, kind store.Kind, schema, sql string, resp store.Response) store.Record {
		return store.Record{Session: 1, Start: at.Add(time.Duration(ms) * time.Millisecond), Kind: kind, StmtID: 1, Schema: schema, SQL: sql, Resp: resp}
	}
	recs := []store.Record{
		{Session: 1, Start: at, Kind: store.KindConnect, User: "app", Schema: h, Resp: ok},
		q(1, store.KindPrepare, h, "UPDATE u SET n = n + 1 WHERE id = 1", ok),
		// USE inside a transaction: a job of its unit (outside one, the
		// next unit's schema).
		q(9, store.KindQuery, h, "BEGIN", ok),
		q(10, store.KindQuery, h, "USE "+a, ok),
		q(11, store.KindExecute, a, "", upd),
		q(12, store.KindQuery, a, "COMMIT", ok),
		q(19, store.KindQuery, a, "BEGIN", ok),
		q(20, store.KindQuery, a, "USE "+b, ok),
		q(21, store.KindExecute, b, "", upd),
		q(22, store.KindQuery, b, "COMMIT", ok),
		{Session: 1, Start: at.Add(30 * time.Millisecond), Kind: store.KindQuit, Schema: b},
	}
	capDir := writeRecords(t, recs)
	// A DSN without a database: each session runs in the schemas it names.
	rep := replayRun(t, capDir, func(c *Config) { c.Concurrency = 1 }, tgt(t, "a", srv.DSN(""), ""))
	if r := rep.Targets[0]; r.Errors != 0 {
		t.Fatalf("%d errors %v", r.Errors, r.ErrorCodes)
	}
	var got string
	if err := home.QueryRow(fmt.Sprintf("SELECT CONCAT_WS(' ', (SELECT n FROM `%s`.u), (SELECT n FROM `%s`.u), (SELECT n FROM u))", a, b)).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != "1 1 0" {
		t.Errorf("u.n in the schema used first, the one used second, the session's first: %s; want 1 1 0 (each execute in the schema it used)", got)
	}
}
