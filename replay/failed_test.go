package replay

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tandemdb/tandem/compare"
	"github.com/tandemdb/tandem/sandbox/sandboxtest"
	"github.com/tandemdb/tandem/store"
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
