package replay

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tandemdb/tandem/capture/synth"
	"github.com/tandemdb/tandem/compare"
	"github.com/tandemdb/tandem/sandbox"
	"github.com/tandemdb/tandem/sandbox/sandboxtest"
	"github.com/tandemdb/tandem/store"
	"github.com/tandemdb/tandem/targets"
)

// failureTables makes t1..t4, one row each, on db.
func failureTables(t *testing.T, db *sql.DB) {
	t.Helper()
	for i := 1; i <= 4; i++ {
		for _, q := range []string{fmt.Sprintf("DROP TABLE IF EXISTS t%d", i), fmt.Sprintf("CREATE TABLE t%d (id INT PRIMARY KEY, v INT NOT NULL)", i),
			fmt.Sprintf("INSERT INTO t%d VALUES (1, 0)", i)} {
			if _, err := db.Exec(q); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// captureStatements runs each session's statements, one session after the
// other, on connections of their own through a capturing proxy in front
// of dsn's database on srv.
func captureStatements(t *testing.T, srv *sandboxtest.Handle, dsn string, sessions ...[]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "capture")
	captureVia(t, srv, dir, "failed-transaction test", func(addr string) {
		ctx := context.Background()
		db, err := sql.Open("mysql", "root@tcp("+addr+")/"+dsn[strings.LastIndex(dsn, "/")+1:])
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		for _, stmts := range sessions {
			c, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, q := range stmts {
				rows, err := c.QueryContext(ctx, q)
				if err != nil {
					t.Fatalf("%s: %v", q, err)
				}
				rows.Close()
			}
			c.Close()
		}
	})
	return dir
}

// A transaction that a target's engine fails on every retry is rolled back
// there and never committed in part: the statements after the one that
// failed are not run (in autocommit, they would each commit), the
// transaction is listed with its error and tables, the later reads of its
// tables are counted apart as following it, and the end state names it
// for each table it wrote. (Before, the rest of the transaction ran and
// committed without the failed statement: t1 and t3 ended at 1 on b.) A
// trigger on b makes every UPDATE of t2 fail with 1213, as MyRocks does
// with a snapshot conflict on every retry. Both an explicit transaction
// and an autocommit=0 one (JDBC's), in every mode.
func TestTransactionThatFailsForGoodIsNeverCommittedInPart(t *testing.T) {
	srv := sandboxtest.Server(t, "innodb")
	origin, originDSN := srv.FreshDB(t)
	failureTables(t, origin)
	work := []string{"UPDATE t1 SET v = v + 1 WHERE id = 1", "UPDATE t2 SET v = v + 1 WHERE id = 1", "UPDATE t3 SET v = v + 1 WHERE id = 1"}
	reads := []string{"SELECT v FROM t1 WHERE id = 1", "SELECT v FROM t3 WHERE id = 1", "SELECT v FROM t2 WHERE id = 1", "SELECT v FROM t4 WHERE id = 1"}
	explicit := append(append([]string{"BEGIN"}, work...), "COMMIT")
	manual := append(append([]string{"SET autocommit = 0"}, work...), "COMMIT")
	capDir := captureStatements(t, srv, originDSN, append(explicit, reads...), append(manual, reads...))

	dba, a := srv.FreshDB(t)
	dbb, b := srv.FreshDB(t)
	ta, tb := tgt(t, "a", a, ""), tgt(t, "b", b, "")
	for _, mode := range []struct {
		name string
		mod  func(*Config)
	}{{"speed=0", func(c *Config) { c.Speed = 0 }}, {"concurrency=2", func(c *Config) { c.Speed, c.Concurrency = 0, 2 }}} {
		t.Run(mode.name, func(t *testing.T) {
			failureTables(t, dba)
			failureTables(t, dbb)
			if _, err := dbb.Exec("CREATE TRIGGER t2_conflict BEFORE UPDATE ON t2 FOR EACH ROW SIGNAL SQLSTATE '40001' SET MYSQL_ERRNO = 1213, MESSAGE_TEXT = 'conflict'"); err != nil {
				t.Fatal(err)
			}
			rep := replayRun(t, capDir, func(c *Config) { mode.mod(c); c.Samples = 100 }, ta, tb)
			ra, rb, d := rep.Targets[0], rep.Targets[1], rep.Divergences[0]
			values := func(db *sql.DB) []int {
				var out []int
				for i := 1; i <= 4; i++ {
					var v int
					if err := db.QueryRow(fmt.Sprintf("SELECT v FROM t%d", i)).Scan(&v); err != nil {
						t.Fatal(err)
					}
					out = append(out, v)
				}
				return out
			}
			if got := values(dba); !slices.Equal(got, []int{2, 2, 2, 0}) {
				t.Errorf("a: t1..t4 = %v, want [2 2 2 0]", got)
			}
			if got := values(dbb); !slices.Equal(got, []int{0, 0, 0, 0}) {
				t.Errorf("b: t1..t4 = %v, want [0 0 0 0]: a transaction that failed was committed in part", got)
			}
			if ra.FailedTransactions != 0 || rb.FailedTransactions != 2 || rb.FailedByCode["1213"] != 2 || len(rb.Failures) != 2 {
				t.Fatalf("failed transactions: a %d, b %d %v %+v; want b 2, by 1213", ra.FailedTransactions, rb.FailedTransactions, rb.FailedByCode, rb.Failures)
			}
			var want []string
			for _, tbl := range []string{"t1", "t2", "t3"} {
				want = append(want, originDSN[strings.LastIndex(originDSN, "/")+1:]+"."+tbl)
			}
			// BEGIN, 3 UPDATEs and COMMIT; then the 3 UPDATEs and COMMIT of
			// the autocommit=0 session (its SET opens nothing).
			for i, f := range rb.Failures {
				n := 5 - i
				if f.Code != 1213 || f.Cause != 0 || f.Attempts != 4 || f.Statements != n || !slices.Equal(f.Tables, want) || f.LastSeq-f.FirstSeq < uint64(n-1) {
					t.Errorf("failure %d: %+v; want 1213 after 4 attempts, %d statements, tables %v", i, f, n, want)
				}
			}
			// Every run of the failing UPDATE counted: the first and 3
			// retries, twice.
			if rb.ErrorCodes["1213"] != 8 || rb.Retries != 6 || rb.RetriesSucceeded != 0 {
				t.Errorf("b: errors %v, retries %d (%d ok); want 1213 ×8, 6 retries, none ok", rb.ErrorCodes, rb.Retries, rb.RetriesSucceeded)
			}
			if n := rb.SkippedBy[store.SkipReasonText(store.SkipTrxFailed)]; n != 4 {
				t.Errorf("b: skipped %v; want the UPDATE of t3 and the COMMIT of each, 4", rb.SkippedBy)
			}
			// The failed UPDATE is the engine's verdict; the reads of t1, t2
			// and t3 follow the failure; t4's agree.
			if d.Total() != 2 || d.ByClass[compare.ErrorVsOK] != 2 || d.AmbiguousBy[compare.ReasonFailedTrx] != 6 || d.Missing != 0 || d.Extra != 0 {
				t.Errorf("b vs a: divergent %v, ambiguous %v, missing %d, extra %d; want error-vs-ok 2 and 6 after the failed transactions",
					d.ByClass, d.AmbiguousBy, d.Missing, d.Extra)
				for _, s := range d.Samples {
					t.Logf("  [%s] seq %d %s: %s vs %s (%s)", s.Class, s.Seq, s.Statement, s.Baseline, s.Target, s.Why)
				}
			}
			for _, s := range d.Samples {
				if s.Class == compare.ReasonFailedTrx && !strings.Contains(s.Why, "failed for good on b (1213 after 4 attempts)") {
					t.Errorf("sample seq %d: why %q", s.Seq, s.Why)
				}
			}
			es := rb.EndState
			if es == nil || es.Same {
				t.Fatalf("b's end state %+v", es)
			}
			for _, ts := range es.Tables {
				wantDiff := !strings.HasSuffix(ts.Table, ".t4")
				if ts.Differs != wantDiff || wantDiff != strings.Contains(ts.Because, "failed for good on b") {
					t.Errorf("end state of %s: differs %v because %q", ts.Table, ts.Differs, ts.Because)
				}
			}
		})
	}
}

// A target that fails (here at a table DDL its engine cannot be set in)
// skips the rest, and counts as statements only what the baseline counts
// as statements: a session's connect and prepare skipped after the
// failure are no statements (run, they are not counted; skipped, they
// were, and a target killed early had more statements than the capture),
// and an execute of that prepare is skipped as its target's failure, not
// as a statement prepared before the capture began.
func TestFailedTargetCountsOnlyStatements(t *testing.T) {
	_, tb, _, _ := twoInnoDB(t)
	at := msClock()
	capDir := writeRecords(t, []store.Record{
		{Session: 1, Start: at(0), Kind: store.KindConnect, User: "app"},
		{Session: 1, Start: at(1), Kind: store.KindQuery, SQL: "CREATE TABLE t (a INT"}, // b cannot set its engine: b fails
		{Session: 1, Start: at(2), Kind: store.KindQuit},
		{Session: 2, Start: at(10), Kind: store.KindConnect, User: "app"},
		{Session: 2, Start: at(11), Kind: store.KindPrepare, StmtID: 1, SQL: "SELECT 1"},
		{Session: 2, Start: at(12), Kind: store.KindExecute, StmtID: 1},
		{Session: 2, Start: at(13), Kind: store.KindQuery, SQL: "SELECT 2"},
		{Session: 2, Start: at(14), Kind: store.KindQuit},
	})
	rep := replayRun(t, capDir, func(c *Config) { c.Speed = 1 }, tb)
	rb := rep.Targets[0]
	if !strings.Contains(rb.Failed, "cannot set engine") {
		t.Fatalf("b: failed %q, want the unrewritable DDL", rb.Failed)
	}
	want := map[string]int64{store.SkipReasonText(store.SkipUnrewritable): 1, store.SkipReasonText(store.SkipTargetFailed): 2}
	got := map[string]int64{}
	for k, v := range rb.SkippedBy {
		got[k] = int64(v)
	}
	if !maps.Equal(got, want) || rb.Reads+rb.Writes+rb.Other+rb.Errors != 0 {
		t.Errorf("b skipped %v, ran %d, want %v and none run (the execute and SELECT 2 after the failure; not the connect or the prepare)", got, rb.Reads+rb.Writes+rb.Other+rb.Errors, want)
	}
	// Not failed (--on-unrewritable skip), the same 3 statements: the DDL
	// skipped, the execute and SELECT 2 answered.
	rep = replayRun(t, capDir, func(c *Config) { c.Speed, c.OnUnrewritable = 1, UnrewritableSkip }, tb)
	rb = rep.Targets[0]
	if rb.Failed != "" || rb.Reads != 2 || rb.Errors != 0 || rb.Skipped != 1 {
		t.Errorf("b with --on-unrewritable skip: failed %q, %d reads, %d errors, %d skipped; want 2 reads and the DDL skipped", rb.Failed, rb.Reads, rb.Errors, rb.Skipped)
	}
}

// A session whose connect (and so its prepare) fails on a target that
// goes on — here the account may hold one connection, which another
// session holds — runs its executes of that prepare as failures of its
// own: they were skipped as "statement prepared before the capture
// began", which it was not.
func TestExecuteAfterAFailedPrepareIsTheTargetsFailure(t *testing.T) {
	srv := sandboxtest.Server(t, "innodb")
	dba, dsn := srv.FreshDB(t)
	db := databaseOf(t, dba)
	user := "one_" + db
	exec(t, dba, "CREATE USER "+user+"@'127.0.0.1' WITH MAX_USER_CONNECTIONS 1", "GRANT ALL ON "+db+".* TO "+user+"@'127.0.0.1'")
	t.Cleanup(func() { dba.Exec("DROP USER " + user + "@'127.0.0.1'") })
	one := tgt(t, "one", strings.Replace(dsn, "root@", user+"@", 1), "")
	at := msClock()
	capDir := writeRecords(t, []store.Record{
		{Session: 1, Start: at(0), Kind: store.KindConnect, User: "app"},
		{Session: 1, Start: at(1), Kind: store.KindQuery, SQL: "SELECT 1"},
		// Session 1 holds the one connection; the margins are wide, for
		// a loaded machine (session 1 connected first, not yet gone).
		{Session: 2, Start: at(500), Kind: store.KindConnect, User: "app"},
		{Session: 2, Start: at(501), Kind: store.KindPrepare, StmtID: 1, SQL: "SELECT 2"},
		{Session: 2, Start: at(502), Kind: store.KindExecute, StmtID: 1},
		{Session: 2, Start: at(503), Kind: store.KindQuit},
		{Session: 1, Start: at(1500), Kind: store.KindQuery, SQL: "SELECT 3"},
		{Session: 1, Start: at(1501), Kind: store.KindQuit},
	})
	rep := replayRun(t, capDir, func(c *Config) { c.Speed = 1 }, one)
	r := rep.Targets[0]
	// Reads counts the execute too (run, failed).
	if r.Failed != "" || r.Reads != 3 || r.Errors != 3 || fmt.Sprint(r.ErrorCodes) != "map[1226:3]" || r.Skipped != 0 || len(r.SkippedBy) != 0 {
		t.Errorf("one: failed %q, %d reads, %d errors %v, skipped %v; want 3 reads (SELECT 1 and 3, the execute), the connect, prepare and execute of session 2 failed (1226), nothing skipped",
			r.Failed, r.Reads, r.Errors, r.ErrorCodes, r.SkippedBy)
	}
}

// A target whose server is read-only for the replay's account (a replica
// stopped by tandem align keeps read_only) is refused when the capture
// changes something: each write failed there with 1290, fast, and was
// timed and compared as the engine's answer (200 of 200 writes, exit 0).
// A read-only capture replays there, and so does an account the server
// lets write (root: READ ONLY ADMIN).
func TestReadOnlyTargetIsRefusedForWrites(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	srvs, err := sandbox.Up(ctx, sandbox.Config{Dir: dir, Profiles: []string{"innodb"}}) // its own: read_only is global
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sandbox.Down(context.Background(), dir, nil, true) })
	root, err := sql.Open("mysql", srvs[0].DSN(""))
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	exec(t, root, "CREATE DATABASE app", "CREATE USER app@'127.0.0.1'", "GRANT ALL ON app.* TO app@'127.0.0.1'")
	asRoot := tgt(t, "root", srvs[0].DSN("app"), "")
	prepared(t, 1, 100, asRoot)
	writes := synthCapture(t, "oltp_read_write", func(c *synth.Config) { c.Tables, c.TableSize, c.Events = 1, 100, 20 })
	// A read-only session (the DSN's tx_read_only), on a server that is
	// not: its writes would fail with 1792.
	roSession := tgt(t, "rosession", srvs[0].DSN("app")+"?tx_read_only=1", "")
	_, err = Run(ctx, Config{Capture: writes, RunDir: filepath.Join(t.TempDir(), "run"), Targets: []targets.Target{roSession}}, nil)
	if want := "replay: target rosession refuses writes: its session is read-only (tx_read_only=1, "; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("writes in a read-only session: %v; want %q…", err, want)
	}
	exec(t, root, "SET GLOBAL read_only = ON")
	asApp := tgt(t, "app", strings.Replace(srvs[0].DSN("app"), "root@", "app@", 1), "")

	_, err = Run(ctx, Config{Capture: writes, RunDir: filepath.Join(t.TempDir(), "run"), Targets: []targets.Target{asApp}}, nil)
	if want := "replay: target app refuses this account's writes: the server is read-only ("; err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "SET GLOBAL read_only = OFF") {
		t.Errorf("writes onto a read-only target: %v; want %q…", err, want)
	}
	reads := synthCapture(t, "oltp_read_only", func(c *synth.Config) { c.Tables, c.TableSize, c.Events = 1, 100, 20 })
	if r := replayRun(t, reads, nil, asApp).Targets[0]; r.Errors != 0 || r.Reads != 20*14 {
		t.Errorf("reads onto a read-only target: %d errors, %d reads; want 0 and %d", r.Errors, r.Reads, 20*14)
	}
	// Temporary tables, named locks, transactions of reads: a read-only
	// server lets any account have them (the old check refused the
	// capture).
	at := msClock()
	ok := store.Response{Kind: store.RespOK}
	session := func(sqls ...string) string {
		recs := []store.Record{{Session: 1, Start: at(0), Kind: store.KindConnect, User: "app", Schema: "app", Resp: ok}}
		for i, sql := range sqls {
			recs = append(recs, store.Record{Session: 1, Start: at(1 + i), Kind: store.KindQuery, SQL: sql, Resp: ok})
		}
		return writeRecords(t, append(recs, store.Record{Session: 1, Start: at(1 + len(sqls)), Kind: store.KindQuit}))
	}
	noWrites := session(
		"CREATE TEMPORARY TABLE scratch (id INT PRIMARY KEY, k INT)",
		"INSERT INTO scratch SELECT id, k FROM sbtest1 WHERE id <= 10",
		"UPDATE scratch SET k = k + 1",
		"SELECT SUM(k) FROM scratch",
		"BEGIN",
		"SELECT k FROM sbtest1 WHERE id = 1",
		"COMMIT",
		"SELECT GET_LOCK('tandem_ro', 0)",
		"SELECT RELEASE_LOCK('tandem_ro')",
		"DROP TEMPORARY TABLE scratch")
	if r := replayRun(t, noWrites, nil, asApp).Targets[0]; r.Errors != 0 || r.Reads+r.Writes+r.Other != 10 {
		t.Errorf("temporary tables, named locks, a transaction of reads onto a read-only target: %d errors %v, %d statements; want 0 and 10", r.Errors, r.ErrorCodes, r.Reads+r.Writes+r.Other)
	}
	for what, capDir := range map[string]string{
		// The server refuses these (1290).
		"a locking read": session("SELECT k FROM sbtest1 WHERE id = 1 FOR UPDATE"),
		"LOCK TABLES":    session("LOCK TABLES sbtest1 WRITE", "UNLOCK TABLES"),
		"ANALYZE TABLE":  session("ANALYZE TABLE sbtest1"),
		// The table of that name, once its temporary one is dropped, is
		// the permanent one.
		"a write after its temporary table": session(
			"CREATE TEMPORARY TABLE sbtest1 (id INT PRIMARY KEY, k INT)",
			"INSERT INTO sbtest1 VALUES (1, 1)",
			"DROP TEMPORARY TABLE sbtest1",
			"UPDATE sbtest1 SET k = k + 1 WHERE id = 1"),
	} {
		_, err = Run(ctx, Config{Capture: capDir, RunDir: filepath.Join(t.TempDir(), "run"), Targets: []targets.Target{asApp}}, nil)
		if want := "replay: target app refuses this account's writes: the server is read-only ("; err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s onto a read-only target: %v; want %q…", what, err, want)
		}
	}
	if r := replayRun(t, writes, nil, asRoot).Targets[0]; r.Errors != 0 || r.Writes != 20*4 {
		t.Errorf("writes as root onto a read-only server: %d errors, %d writes; want 0 and %d", r.Errors, r.Writes, 20*4)
	}

	// Started with innodb_read_only, the server fails every write to an
	// InnoDB table (1036), root's too, and the probe does not see it.
	if _, err := sandbox.Down(ctx, dir, nil, false); err != nil {
		t.Fatal(err)
	}
	if srvs, err = sandbox.Up(ctx, sandbox.Config{Dir: dir, Profiles: []string{"innodb"}, ServerOptions: []string{"innodb-read-only"}}); err != nil {
		t.Fatal(err)
	}
	asRoot = tgt(t, "root", srvs[0].DSN("app"), "")
	_, err = Run(ctx, Config{Capture: writes, RunDir: filepath.Join(t.TempDir(), "run"), Targets: []targets.Target{asRoot}}, nil)
	if want := "replay: target root refuses writes to InnoDB tables: its server was started with innodb_read_only"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("writes onto a server started with innodb_read_only: %v; want %q…", err, want)
	}
	if r := replayRun(t, reads, nil, asRoot).Targets[0]; r.Errors != 0 || r.Reads != 20*14 {
		t.Errorf("reads onto a server started with innodb_read_only: %d errors, %d reads; want 0 and %d", r.Errors, r.Reads, 20*14)
	}
}

// An execute of a statement whose prepare the capture holds truncated
// (past --max-record-bytes) is skipped as truncated, not as "prepared
// before the capture began"; regrouped (--concurrency), where the
// truncated text was prepared and run, it is not run either.
func TestExecuteOfATruncatedPrepareIsNotRun(t *testing.T) {
	_, tb, _, _ := twoInnoDB(t)
	at := msClock()
	capDir := writeRecords(t, []store.Record{
		{Session: 1, Start: at(0), Kind: store.KindConnect, User: "app"},
		{Session: 1, Start: at(1), Kind: store.KindPrepare, StmtID: 1, SQL: "SELECT 1 FROM DUAL WHERE 1 IN (1, 2, 3, 4", Flags: store.FlagTruncated},
		{Session: 1, Start: at(2), Kind: store.KindExecute, StmtID: 1},
		{Session: 1, Start: at(3), Kind: store.KindQuery, SQL: "SELECT 2"},
		{Session: 1, Start: at(4), Kind: store.KindQuit},
	})
	r := replayRun(t, capDir, nil, tb).Targets[0]
	if fmt.Sprint(r.SkippedBy) != fmt.Sprintf("map[%s:1]", store.SkipReasonText(store.SkipTruncated)) || r.Reads != 1 || r.Errors != 0 {
		t.Errorf("session replay: skipped %v, %d reads, %d errors; want the execute skipped as truncated (the prepare too, not a statement), SELECT 2 read", r.SkippedBy, r.Reads, r.Errors)
	}
	r = replayRun(t, capDir, func(c *Config) { c.Concurrency = 2 }, tb).Targets[0]
	if fmt.Sprint(r.SkippedBy) != fmt.Sprintf("map[%s:1]", store.SkipReasonText(store.SkipTruncated)) || r.Reads != 1 || r.Errors != 0 {
		t.Errorf("--concurrency 2: %d reads, %d errors, skipped %v; want the execute skipped as truncated (not as prepared before the capture), SELECT 2 read", r.Reads, r.Errors, r.SkippedBy)
	}
}

// msClock returns times a number of milliseconds from now, for records
// written by hand.
func msClock() func(ms int) time.Time {
	now := time.Now()
	return func(ms int) time.Time { return now.Add(time.Duration(ms) * time.Millisecond) }
}
