package replay

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tandemdb/tandem/compare"
	"github.com/tandemdb/tandem/internal/invariant"
	"github.com/tandemdb/tandem/report"
	"github.com/tandemdb/tandem/sandbox"
	"github.com/tandemdb/tandem/sandbox/sandboxtest"
	"github.com/tandemdb/tandem/store"
)

// captureWorkload runs w from threads connections for d through a
// capturing proxy (row checksums on) in front of the origin database dsn
// on srv, and returns the capture.
func captureWorkload(t testing.TB, w invariant.Workload, srv *sandboxtest.Handle, dsn string, threads int, d time.Duration) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "capture-"+w.Name())
	db := dsn[strings.LastIndex(dsn, "/")+1:]
	var stats invariant.Stats
	var runErr error
	captureVia(t, srv, dir, "invariant test", func(addr string) {
		stats, runErr = invariant.Run(context.Background(), "root@tcp("+addr+")/"+db, w, threads, d, 7)
	})
	if runErr != nil {
		t.Fatal(runErr)
	}
	t.Logf("captured %s: %+v", w.Name(), stats)
	return dir
}

// rowsDigest is every table's rows, as text, sorted: equal across engines
// for equal rows (CHECKSUM TABLE is not).
func rowsDigest(t testing.TB, db *sql.DB, tables []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, tbl := range tables {
		rs, err := db.Query("SELECT * FROM " + tbl)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rs.Columns()
		var lines []string
		for rs.Next() {
			vals := make([]sql.NullString, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rs.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			for _, v := range vals {
				fmt.Fprintf(&b, "%q ", v.String)
			}
			lines = append(lines, b.String())
		}
		rs.Close()
		slices.Sort(lines)
		out[tbl] = strings.Join(lines, "\n")
	}
	return out
}

// lockCounters reads a server's own counts of deadlocks and lock wait
// timeouts: InnoDB's, or MyRocks' (deadlocks and snapshot conflicts both
// answer 1213).
func lockCounters(t *testing.T, db *sql.DB, engine string) (deadlocks, timeouts int64) {
	t.Helper()
	get := func(q string) int64 {
		var name string
		var v int64
		if err := db.QueryRow(q).Scan(&name, &v); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return v
	}
	if engine == "ROCKSDB" {
		return get("SHOW GLOBAL STATUS LIKE 'Rocksdb_row_lock_deadlocks'") + get("SHOW GLOBAL STATUS LIKE 'Rocksdb_snapshot_conflict_errors'"),
			get("SHOW GLOBAL STATUS LIKE 'Rocksdb_row_lock_wait_timeouts'")
	}
	return get("SHOW GLOBAL STATUS LIKE 'Innodb_deadlocks'"),
		get("SELECT name, count FROM information_schema.INNODB_METRICS WHERE name = 'lock_timeouts'")
}

// The invariant workloads captured through the proxy from eight
// connections, replayed in every mode onto InnoDB (the baseline), a
// second InnoDB copy whose lock waits time out after a second, and
// MyRocks (whose own lock wait timeout is a second, and which answers
// snapshot conflicts with 1213). Each transaction is all or nothing on
// every target, so the invariants hold wherever no transaction failed
// for good; every copy (the InnoDB ones always, unless replay sent a change
// ahead of a conflicting one there, labelled) ends exactly as the origin
// did (captured AUTO_INCREMENT ids included); every error a server counted is in the
// report; the ordering gate resolves its stalls without its timeout.
//
// The servers are the test's own, not the package's shared ones: the lock
// counters it checks the report against are the whole server's, so no
// other test may run statements there meanwhile; with servers to itself
// it runs beside the other parallel tests, each workload on servers of
// its own.
func TestInvariantsHoldAfterReplay(t *testing.T) {
	if testing.Short() {
		t.Skip("needs MariaDB servers; skipped with -short")
	}
	t.Parallel()
	ctx := context.Background()
	for _, w := range []invariant.Workload{invariant.Bank{}, invariant.Orders{}} {
		t.Run(w.Name(), func(t *testing.T) {
			// Each workload has servers of its own, so the two run at once.
			t.Parallel()
			inno, rocks := ownServers(t)
			innoRoot, err := sql.Open("mysql", inno.DSN(""))
			if err != nil {
				t.Fatal(err)
			}
			defer innoRoot.Close()
			rocksRoot, err := sql.Open("mysql", rocks.DSN(""))
			if err != nil {
				t.Fatal(err)
			}
			defer rocksRoot.Close()
			origin, originDSN := inno.FreshDB(t)
			if err := w.Setup(ctx, origin, "InnoDB"); err != nil {
				t.Fatal(err)
			}
			capDir := captureWorkload(t, w, inno, originDSN, 8, 3*time.Second)
			if bad, err := w.Check(ctx, origin); err != nil || len(bad) > 0 {
				t.Fatalf("the origin itself breaks %q (%v)", bad, err)
			}
			want := rowsDigest(t, origin, w.Tables())
			dba, a := inno.FreshDB(t)
			dbb, b := inno.FreshDB(t)
			dbr, r := rocks.FreshDB(t)
			ta, tb, tr := tgt(t, "innodb", a, ""), tgt(t, "innodb-1s", b+"?innodb_lock_wait_timeout=1", ""), tgt(t, "myrocks", r, ",engine=rocksdb")
			for _, mode := range truthModes {
				t.Run(mode.name, func(t *testing.T) {
					for _, x := range []struct {
						db     *sql.DB
						engine string
					}{{dba, "InnoDB"}, {dbb, "InnoDB"}, {dbr, "ROCKSDB"}} {
						if err := w.Setup(ctx, x.db, x.engine); err != nil {
							t.Fatal(err)
						}
					}
					idl0, ito0 := lockCounters(t, innoRoot, "InnoDB")
					rdl0, rto0 := lockCounters(t, rocksRoot, "ROCKSDB")
					rep := replayRun(t, capDir, mode.mod, ta, tb, tr)
					idl1, ito1 := lockCounters(t, innoRoot, "InnoDB")
					rdl1, rto1 := lockCounters(t, rocksRoot, "ROCKSDB")
					ra, rb, rr := rep.Targets[0], rep.Targets[1], rep.Targets[2]
					db1s, drk := rep.Divergences[0], rep.Divergences[1]
					var records int64
					for _, n := range captureKinds(t, capDir) {
						records += n
					}
					t.Logf("%d records, %.1fs; innodb-1s vs innodb: compared %d, divergent %d %v, ambiguous %d %v; myrocks vs innodb: compared %d, divergent %d %v, ambiguous %d %v",
						records, rep.Elapsed, db1s.Compared, db1s.Total(), db1s.ByClass, db1s.Ambiguous, db1s.AmbiguousBy, drk.Compared, drk.Total(), drk.ByClass, drk.Ambiguous, drk.AmbiguousBy)
					for _, x := range rep.Targets {
						t.Logf("  %s: errors %v, retries %d (%d ok), order waits %d reruns %d released %d", x.Name, x.ErrorCodes, x.Retries, x.RetriesSucceeded,
							x.OrderWaits, x.OrderReruns, x.OrderReleased)
					}

					// Every error a server counted is in the report, exactly.
					errs := func(x ...*store.TargetResult) (dl, to int64) {
						for _, tr := range x {
							dl += tr.ErrorCodes["1213"]
							to += tr.ErrorCodes["1205"]
						}
						return dl, to
					}
					if dl, to := errs(&ra.TargetResult, &rb.TargetResult); dl != idl1-idl0 || to != ito1-ito0 {
						t.Errorf("InnoDB targets report 1213 ×%d, 1205 ×%d; the server counted %d deadlocks, %d lock wait timeouts", dl, to, idl1-idl0, ito1-ito0)
					}
					if dl, to := errs(&rr.TargetResult); dl != rdl1-rdl0 || to != rto1-rto0 {
						t.Errorf("MyRocks reports 1213 ×%d, 1205 ×%d; the server counted %d deadlocks and snapshot conflicts, %d lock wait timeouts", dl, to, rdl1-rdl0, rto1-rto0)
					}

					// Every copy: where no transaction failed for good and
					// replay kept the capture's order, the invariants hold and
					// the end state is the origin's (ids as captured). Otherwise
					// every invariant broken and every table unlike the
					// origin's is one that a transaction that failed for good
					// wrote, or one that a change replay sent ahead of a
					// conflicting one (released at --order-timeout) wrote: the
					// capture's literal writes in another order need not keep
					// the application's invariants (seen in CI on MyRocks: a
					// released delivery read another order to deliver, then
					// wrote the captured one's ids: 0 rows deleted, the
					// district's pointer moved on). The report names the cause
					// for each such table. A yield (a transaction run again to
					// let a stuck statement through) is not taken as a cause
					// here: it reorders only a change waiting on the server at
					// that instant, and order entry's literal writes have
					// converged in every run; the report labels it all the
					// same. Releases are bounded below.
					for i, x := range []struct {
						db  *sql.DB
						res report.Target
					}{{dba, ra}, {dbb, rb}, {dbr, rr}} {
						checkAgainstOrigin(t, ctx, w, x.db, x.res, i > 0, want)
					}
					if db1s.Total() != 0 || db1s.Missing != 0 || db1s.Extra != 0 {
						t.Errorf("innodb-1s: %d divergent %v, missing %d, extra %d", db1s.Total(), db1s.ByClass, db1s.Missing, db1s.Extra)
						for _, s := range db1s.Samples {
							if !s.Ambiguous {
								t.Logf("  [%s] seq %d session %d: %s %v (%s vs %s)", s.Class, s.Seq, s.Session, s.Statement, s.Params, s.Baseline, s.Target)
							}
						}
					}

					// Identical copies: no transaction fails for good.
					if ra.FailedTransactions != 0 || rb.FailedTransactions != 0 {
						t.Errorf("transactions failed for good on identical copies: innodb %d %v, innodb-1s %d %v", ra.FailedTransactions, ra.FailedByCode, rb.FailedTransactions, rb.FailedByCode)
					}

					// Releases at the gate's timeout are rare faults: at most 1
					// in 10,000 records in a session replay, and at least one
					// is allowed: on a loaded machine (CI runs three test
					// packages on two cores) a statement can outlast
					// innodb-1s's 1 s lock wait, and the retry that follows
					// can hold a waiter past the 2 s bound (seen once in CI:
					// 1205 ×2 and 1 release of 3,463 records). A release is
					// labelled, so it costs time, not truth: the divergence
					// and end-state checks above stay exact. Regrouped
					// (--concurrency), which may request locks in another
					// order than the capture's, at most 0.5 %.
					bound := int64(10000)
					if strings.HasPrefix(mode.name, "concurrency") {
						bound = 200
					}
					for _, x := range rep.Targets {
						if allowed := max(1, records/bound); x.OrderReleased > allowed {
							t.Errorf("%s: %d records released at --order-timeout, want at most %d (1 in %d of %d)", x.Name, x.OrderReleased, allowed, bound, records)
						}
					}
					// Every insert got its captured id on the InnoDB copies.
					for _, vc := range rep.VsCapture[:2] {
						if vc.ByClass[compare.InsertID] != 0 {
							t.Errorf("insert-id divergences from the capture: %d", vc.ByClass[compare.InsertID])
						}
					}
				})
			}
		})
	}
}

// ownServers starts an InnoDB and a MyRocks server (the profiles the
// shared ones have) for the test alone; they are stopped and purged when
// it ends.
func ownServers(t *testing.T) (inno, rocks *sandboxtest.Handle) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "sandbox")
	t.Cleanup(func() { sandbox.Down(context.Background(), dir, nil, true) })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srvs, err := sandbox.Up(ctx, sandbox.Config{Dir: dir, Profiles: []string{"innodb", "rocksdb"}})
	if err != nil {
		t.Fatal(err)
	}
	return &sandboxtest.Handle{Server: srvs[0]}, &sandboxtest.Handle{Server: srvs[1]}
}

// violationTables are the tables an invariant violation (Workload.Check's
// line) concerns.
func violationTables(v string) []string {
	subject, _, _ := strings.Cut(v, ":")
	switch word, _, _ := strings.Cut(subject, " "); word {
	case "accounts":
		return []string{"accounts"}
	case "transfers":
		return []string{"transfers", "accounts"}
	case "warehouse":
		return []string{"warehouse", "district"}
	case "history":
		return []string{"history", "district"}
	case "district":
		return []string{"district", "orders"}
	case "order":
		return []string{"orders", "order_line"}
	case "order_line":
		return []string{"order_line", "orders"}
	case "new_order":
		return []string{"new_order", "orders", "district"}
	case "stock":
		return []string{"stock", "order_line"}
	}
	return nil
}

func firstN(s []string, n int) []string { return s[:min(n, len(s))] }

// checkAgainstOrigin checks one copy after the replay against the origin's
// rows (want, by table) and the workload's invariants: exact where the
// report says no transaction failed for good there and no change was sent
// ahead of a conflicting one; otherwise each invariant broken and each
// table unlike the origin's must be one such a transaction or change
// wrote. vsBaseline: res is not the baseline, whose end state the report
// compares it with: a table the report says differs must name its cause.
func checkAgainstOrigin(t *testing.T, ctx context.Context, w invariant.Workload, db *sql.DB, res report.Target, vsBaseline bool, want map[string]string) {
	t.Helper()
	bad, err := w.Check(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	got := rowsDigest(t, db, w.Tables())
	var differ []string
	for _, tbl := range w.Tables() {
		if got[tbl] != want[tbl] {
			differ = append(differ, tbl)
		}
	}
	cause := map[string]bool{}
	unqualified := func(tb string) string { return tb[strings.Index(tb, ".")+1:] }
	for _, f := range res.Failures {
		for _, tb := range f.Tables {
			cause[unqualified(tb)] = true
		}
	}
	sentAhead := 0
	for _, r := range res.Reorders {
		if r.Kind == "" {
			sentAhead++
			for _, tb := range r.Tables {
				cause[unqualified(tb)] = true
			}
		}
	}
	t.Logf("  %s: %d transactions failed for good %v, %d changes sent ahead (tables %v); %d invariants broken %q, tables unlike the origin's %v",
		res.Name, res.FailedTransactions, res.FailedByCode, sentAhead, cause, len(bad), firstN(bad, 3), differ)
	if res.FailedTransactions == 0 && sentAhead == 0 && (len(bad) > 0 || len(differ) > 0) {
		t.Errorf("%s: no transaction failed for good and none was sent ahead, yet %d invariants broken %q, tables %v differ", res.Name, len(bad), firstN(bad, 5), differ)
	}
	for _, v := range bad {
		if !slices.ContainsFunc(violationTables(v), func(tb string) bool { return cause[tb] }) {
			t.Errorf("%s: %q follows no transaction that failed for good or was sent ahead (they wrote %v)", res.Name, v, cause)
		}
	}
	for _, tbl := range differ {
		if !cause[tbl] {
			t.Errorf("%s: %s differs from the origin's and no transaction that failed for good or was sent ahead wrote it", res.Name, tbl)
		}
	}
	if !vsBaseline {
		return
	}
	if res.EndState == nil {
		t.Errorf("%s: the report has no end state", res.Name)
		return
	}
	for _, ts := range res.EndState.Tables {
		if ts.Differs && ts.Because == "" {
			t.Errorf("%s: the report says %s differs from the baseline and names no cause", res.Name, ts.Table)
		}
	}
}
