package replay

import (
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tandemdb/tandem/store"
)

// A transaction ended by the next BEGIN, with no COMMIT between (a log
// capture of a client whose statement was a deadlock victim: the log does
// not say so, and the client began again), holds its locks on the target
// until that BEGIN runs. Session 1's UPDATE of row 1 ran in such a
// transaction; session 2's UPDATE of row 1 ended, in the capture, before
// session 1's second BEGIN started, so that BEGIN waits for it — while
// it waits on the server for session 1's lock. The waiting BEGIN must
// hold its session's transaction (its locks published, patience on), so
// that the stall makes it roll back and run its transaction again after
// session 2's UPDATE. Before, the transaction was forgotten before the
// wait: nothing was seen to be in the way, and the BEGIN went only when
// --order-timeout released it, unordered.
//
// Under load the transaction run again can meet session 2's UPDATE still
// waiting and yield once more (CI saw 2 reruns on each target, every
// other figure as wanted): that run is true to the capture too, and is
// taken again, up to 3 attempts, for the one this test is about.
func TestImplicitlyEndedTransactionYieldsWhileItsEndWaits(t *testing.T) {
	for attempt := 1; ; attempt++ {
		rep, dbs := lockStep(t, func(q func(uint64, float64, string) store.Record, at func(float64) time.Time) []store.Record {
			return append(rowOneHeld(q, at),
				q(1, 10, "BEGIN"),
				q(1, 11, "SELECT v FROM t WHERE id = 2"),
				q(1, 12, "COMMIT"),
				store.Record{Session: 2, Start: at(13), Kind: store.KindQuit},
				store.Record{Session: 1, Start: at(14), Kind: store.KindQuit})
		})
		again := ""
		for _, tr := range rep.Targets {
			if tr.OrderReleased != 0 || tr.OrderReruns < 1 || tr.FailedTransactions != 0 || tr.Errors != 0 {
				t.Errorf("%s: %d released, %d reruns, %d failed transactions, %d errors; want 0 released, 1 rerun (session 1's transaction yields to session 2's UPDATE), 0, 0",
					tr.Name, tr.OrderReleased, tr.OrderReruns, tr.FailedTransactions, tr.Errors)
			} else if tr.OrderReruns != 1 {
				again += fmt.Sprintf(" %s: %d reruns", tr.Name, tr.OrderReruns)
			}
		}
		for _, db := range dbs {
			if v := valueOf(t, db, 1); v != 12 {
				t.Errorf("row 1 holds %d, want 12 (both UPDATEs committed)", v)
			}
		}
		if again == "" || t.Failed() {
			return
		}
		if attempt == 3 {
			t.Fatalf("3 attempts, none with exactly 1 rerun; the last:%s", again)
		}
		t.Logf("attempt %d yielded more than once (%s): again", attempt, again)
	}
}

// A session's quit ends its open transaction by a rollback (the server's,
// as the connection closes); a session open at the capture's stop ends so
// too, by its synthetic quit, which waits for every record before it.
// Session 1's UPDATE of row 1 ran in a transaction its quit ends; session
// 2's UPDATE of row 1 ended before that quit in the capture, so the quit
// waits for it while it waits on the server for session 1's lock. The
// transaction is rolled back before the quit waits: session 2's UPDATE
// goes on, nothing is released. Before, the quit waited with the lock
// held until --order-timeout released it (MyRocks, which gives up on a
// lock after 1 s, failed session 2's UPDATE meanwhile).
func TestQuitRollsBackBeforeItWaits(t *testing.T) {
	rep, dbs := lockStep(t, func(q func(uint64, float64, string) store.Record, at func(float64) time.Time) []store.Record {
		return append(rowOneHeld(q, at),
			store.Record{Session: 2, Start: at(8), Kind: store.KindQuit},
			store.Record{Session: 1, Start: at(10), Kind: store.KindQuit, Flags: store.FlagOpenAtStop})
	})
	for i, tr := range rep.Targets {
		if tr.OrderReleased != 0 || tr.FailedTransactions != 0 || tr.Errors != 0 {
			t.Errorf("%s: %d released, %d failed transactions, %d errors; want 0, 0, 0", tr.Name, tr.OrderReleased, tr.FailedTransactions, tr.Errors)
		}
		if c := rep.VsCapture[i]; c.Total() != 0 || c.Compared != 3 {
			t.Errorf("%s vs capture: %d compared, divergent %v; want 3 compared (BEGIN and both UPDATEs), 0 divergent", tr.Name, c.Compared, c.ByClass)
		}
	}
	for _, db := range dbs {
		if v := valueOf(t, db, 1); v != 11 {
			t.Errorf("row 1 holds %d, want 11 (session 1's UPDATE rolled back at its quit)", v)
		}
	}
}

// A packet capture lost session 1's COMMIT (a store.FlagLost record
// stands for the bytes lost, after its UPDATE of row 1 and a slow read).
// Session 2's UPDATE of row 1, which in the capture ran after that commit
// and found v = 5, ended before session 1's next BEGIN started: that BEGIN
// waits for it. Replay commits session 1's transaction at the lost record,
// before anything waits (sqlinfo.Trx.Lost), so session 2's UPDATE finds
// v = 5 as in the capture. Before, the transaction stayed open through the
// wait: session 2's UPDATE waited on the server for its lock, and nothing
// the capture showed explained it, so session 1's transaction yielded only
// past --order-inflight, and its rerun set v = 5 after session 2's UPDATE
// had found v = 1 (row 1 ended at 5, not 7). A pcap with loss in the
// middle of transactions crawled that way, each such wait ending at the
// hard bound.
//
// The lost record stands for that commit, a change (trxChanges): session
// 3's read after it, in the capture, waits for it and finds v = 5. Before,
// it waited only for the UPDATE, ran while session 1 slept, found nothing
// (counted apart, but not what the capture saw). The same with
// --concurrency (units): the unit ends at the lost record, committed.
func TestLostCommandsEndTheTransactionBeforeAnythingWaits(t *testing.T) {
	for _, mode := range []struct {
		name     string
		mod      func(*Config)
		compared int64 // between targets: the statements, and each session's connect
	}{{"sessions", func(*Config) {}, 11}, {"concurrency", func(c *Config) { c.Concurrency = 2 }, 8}} {
		t.Run(mode.name, func(t *testing.T) {
			rep, dbs := lockStep(t, func(q func(uint64, float64, string) store.Record, at func(float64) time.Time) []store.Record {
				ok := store.Response{Kind: store.RespOK}
				return []store.Record{
					{Session: 1, Start: at(0), Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
					{Session: 2, Start: at(0.5), Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
					{Session: 3, Start: at(0.7), Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
					q(1, 1, "BEGIN"),
					q(1, 2, "UPDATE t SET v = 5 WHERE id = 1"),
					q(1, 3, "SELECT SLEEP(0.2)"),
					{Session: 1, Start: at(4), Kind: store.KindOther, Flags: store.FlagLost | store.FlagNotReplayable},
					q(3, 4.2, "SELECT v FROM t WHERE id = 1 AND v = 5"),
					q(2, 5, "UPDATE t SET v = 7 WHERE id = 1 AND v = 5"),
					q(1, 10, "BEGIN"),
					q(1, 11, "UPDATE t SET v = v + 1 WHERE id = 2"),
					q(1, 12, "COMMIT"),
					{Session: 3, Start: at(12.5), Kind: store.KindQuit},
					{Session: 2, Start: at(13), Kind: store.KindQuit},
					{Session: 1, Start: at(14), Kind: store.KindQuit},
				}
			}, mode.mod)
			for i, tr := range rep.Targets {
				if tr.OrderReleased != 0 || tr.OrderReruns != 0 || tr.FailedTransactions != 0 || tr.Errors != 0 {
					t.Errorf("%s: %d released, %d reruns, %d failed transactions, %d errors; want 0 of each",
						tr.Name, tr.OrderReleased, tr.OrderReruns, tr.FailedTransactions, tr.Errors)
				}
				if c := rep.VsCapture[i]; c.Total() != 0 || c.Ambiguous != 0 || c.Compared != 8 {
					t.Errorf("%s vs capture: %d compared, divergent %v, counted apart %v; want the 8 statements compared, all as captured", tr.Name, c.Compared, c.ByClass, c.AmbiguousBy)
				}
			}
			if d := rep.Divergences[0]; d.Total() != 0 || d.Compared != mode.compared {
				t.Errorf("b vs a: %d compared, divergent %v; want %d compared, 0 divergent", d.Compared, d.ByClass, mode.compared)
			}
			if n := strings.Join(rep.Notes, "\n"); !strings.Contains(n, "the packet capture lost commands inside 1 transaction (") {
				t.Errorf("notes say nothing of the transaction committed where commands were lost:\n%s", n)
			}
			for _, db := range dbs {
				if v1, v2 := valueOf(t, db, 1), valueOf(t, db, 2); v1 != 7 || v2 != 3 {
					t.Errorf("rows 1 and 2 hold %d and %d, want 7 (session 2's UPDATE found session 1's, committed) and 3", v1, v2)
				}
			}
		})
	}
}

// lockStep is a hand-made capture of two sessions over table t (rows 1 and
// 2, v = 1 and 2), replayed in the capture's order onto two fresh InnoDB
// copies with an --order-timeout of 30 s (a release would take that
// long): what recs returns from rec (a query of session s at start ms)
// and at (ms past the capture's start).
func lockStep(t *testing.T, recs func(rec func(s uint64, start float64, sql string) store.Record, at func(ms float64) time.Time) []store.Record, mods ...func(*Config)) (*testReport, []*sql.DB) {
	t.Helper()
	start := time.Now().Truncate(time.Millisecond)
	at := func(n float64) time.Time { return start.Add(time.Duration(n * float64(time.Millisecond))) }
	rec := func(s uint64, ms float64, sql string) store.Record {
		r := store.Record{Session: s, Start: at(ms), Duration: 500 * time.Microsecond, Kind: store.KindQuery, Schema: "shop", SQL: sql,
			Resp: store.Response{Kind: store.RespOK}}
		switch {
		case strings.HasPrefix(sql, "UPDATE"):
			r.Resp.AffectedRows = 1
		case strings.HasPrefix(sql, "SELECT"):
			r.Resp = store.Response{Kind: store.RespResultSet, Columns: 1, Rows: 1}
		}
		return r
	}
	capDir := writeRecords(t, recs(rec, at))
	ta, tb, dba, dbb := twoInnoDB(t)
	for _, db := range []*sql.DB{dba, dbb} {
		exec(t, db, "CREATE TABLE t (id INT PRIMARY KEY, v INT)", "INSERT INTO t VALUES (1, 1), (2, 2)")
	}
	rep := replayRun(t, capDir, func(cfg *Config) {
		cfg.Order = OrderCapture
		cfg.OrderTimeout = 30 * time.Second
		for _, m := range mods {
			m(cfg)
		}
	}, ta, tb)
	return rep, []*sql.DB{dba, dbb}
}

// rowOneHeld is how both tests begin: the two sessions connect, session 1
// updates row 1 in a transaction, and session 2's UPDATE of row 1 runs and
// ends (5 ms) while that transaction is open.
func rowOneHeld(q func(uint64, float64, string) store.Record, at func(float64) time.Time) []store.Record {
	ok := store.Response{Kind: store.RespOK}
	return []store.Record{
		{Session: 1, Start: at(0), Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
		{Session: 2, Start: at(0.5), Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
		q(1, 1, "BEGIN"),
		q(1, 2, "UPDATE t SET v = v + 1 WHERE id = 1"),
		q(2, 5, "UPDATE t SET v = v + 10 WHERE id = 1"),
	}
}
