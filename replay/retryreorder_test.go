package replay

import (
	"bytes"
	"context"
	"database/sql"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tandemdb/tandem/compare"
	"github.com/tandemdb/tandem/sandbox/sandboxtest"
	"github.com/tandemdb/tandem/store"
)

// A transaction retried after a lock error the capture did not have is
// rolled back first, and lets go of its row locks: a change of another
// session that waited on the server for one of them goes on at once,
// ahead of the transaction's writes that came before it in the capture.
// As after a yield (TestYieldingTransactionLabelsWhatOvertookItsLocks),
// a later difference on its tables is replay's doing, never the engine's.
//
// Session 1 updates row 1 (v = 1 → 2), then row 2. Session 2's UPDATE of
// row 1 (v × 10) waited in the capture for session 1's commit (v = 20).
// On target a only, a connection outside the capture holds row 2, and
// session 1's lock wait timeout is 1 s (session 2's the server's 50 s):
// session 1's UPDATE of row 2 fails with 1205, and replay retries the
// transaction. The rollback lets
// session 2's UPDATE, waiting on the server for row 1, go first (v = 10);
// the retry makes v = 11 once the outside lock is let go (when the
// retry's UPDATE of row 2 waits for it). Session 4 then reads row 1 where
// the capture and target b found v = 20. Before, that read was counted as
// a real divergence, from the capture and between the targets.
func TestRetriedTransactionLabelsWhatOvertookItsLocks(t *testing.T) {
	capDir := waitedForCapture(t, "SET SESSION innodb_lock_wait_timeout = 1")
	dba, dbb, a, b := twoCopiesOfT(t)
	ta, tb := tgt(t, "a", a, ""), tgt(t, "b", b, "")

	// The outside lock on a's row 2, let go once the retry waits for it.
	ctx := context.Background()
	holder, err := dba.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	for _, s := range []string{"BEGIN", "SELECT v FROM t WHERE id = 2 FOR UPDATE"} {
		if _, err := holder.ExecContext(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	// A wait for a row lock shows as a statement in the processlist for
	// longer than it takes.
	w := watchWait(t, dba, "UPDATE t SET v = v + 100 WHERE id = 2")
	released := make(chan string, 1)
	go func() {
		var why string
		switch {
		case w.until(true) == 0:
			why = "session 1's UPDATE of row 2 never waited for the outside lock"
		case w.until(false) == 0:
			why = "session 1's UPDATE of row 2 waited on past the lock wait timeout"
		case w.until(true) == 0:
			why = "the retry's UPDATE of row 2 never waited for the outside lock"
		}
		holder.ExecContext(ctx, "COMMIT")
		released <- why
	}()
	rep := replayRun(t, capDir, func(cfg *Config) {
		cfg.Order = OrderCapture
		cfg.OrderTimeout = 30 * time.Second
		cfg.Retries = 3
	}, ta, tb)
	if why := <-released; why != "" {
		t.Fatal(why)
	}

	ra, rb := rep.Targets[0], rep.Targets[1]
	if ra.ErrorCodes["1205"] != 1 || ra.Retries != 1 || ra.RetriesSucceeded != 1 || ra.FailedTransactions != 0 || ra.OrderReleased != 0 || ra.OrderReruns != 0 {
		t.Errorf("a: errors %v, %d retries (%d succeeded), %d failed transactions, %d released, %d reruns; want one 1205, retried once with success, 0, 0, 0",
			ra.ErrorCodes, ra.Retries, ra.RetriesSucceeded, ra.FailedTransactions, ra.OrderReleased, ra.OrderReruns)
	}
	if rb.Errors != 0 || rb.Retries != 0 || len(rb.Reorders) != 0 {
		t.Errorf("b: %d errors, %d retries, reorders %+v; want none", rb.Errors, rb.Retries, rb.Reorders)
	}
	retried := 0
	for _, r := range ra.Reorders {
		if r.Kind == store.ReorderRetried && r.Session == 1 && slices.Equal(r.Tables, []string{"shop.t"}) {
			retried++
		}
	}
	if retried != 1 || len(ra.Reorders) != 1 {
		t.Errorf("a: reorders %+v; want session 1's transaction listed once, as retried on shop.t", ra.Reorders)
	}
	if c := rep.VsCapture[0]; c.Total() != 0 || c.AmbiguousBy[compare.ReasonRetried] != 1 || c.Ambiguous != 1 {
		t.Errorf("a vs capture: divergent %v, counted apart %v; want 0 divergent, session 4's read counted apart (retried)", c.ByClass, c.AmbiguousBy)
	}
	if c := rep.VsCapture[1]; c.Total() != 0 || c.Ambiguous != 0 {
		t.Errorf("b vs capture: divergent %v, counted apart %v; want all as captured", c.ByClass, c.AmbiguousBy)
	}
	if d := rep.Divergences[0]; d.Total() != 0 || d.AmbiguousBy[compare.ReasonRetried] < 1 {
		t.Errorf("b vs a: divergent %v, counted apart %v; want 0 divergent, session 4's read counted apart (retried)", d.ByClass, d.AmbiguousBy)
	}
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "transactions holding locks that hit a deadlock or lock wait timeout on a the capture did not have, and were retried: 1; a change that waited on the server for those locks went on at the rollback, ahead of their writes, so shop.t may differ from then on") {
		t.Errorf("the report does not say which tables the retry left to replay's order:\n%s", text.String())
	}
	if va, vb := valueOf(t, dba, 1), valueOf(t, dbb, 1); va != 11 || vb != 20 {
		t.Errorf("row 1 holds %d on a and %d on b; want 11 (session 2's UPDATE went ahead of the retry) and 20", va, vb)
	}
}

// waitedForCapture is a capture where session 1 updates
// row 1 (v = 1 → 2) and row 2 in a transaction that commits at 11 ms;
// session 2's UPDATE of row 1 (v × 10), begun at 5 ms, waited for session
// 1's lock and ended at 12 ms (v = 20); session 4 reads row 1 at 20 ms
// (as captured: v = 20). set, when not "", is session 1's first
// statement.
func waitedForCapture(t *testing.T, set string) string {
	t.Helper()
	start := time.Now().Truncate(time.Millisecond)
	at := func(ms float64) time.Time { return start.Add(time.Duration(ms * float64(time.Millisecond))) }
	ok := store.Response{Kind: store.RespOK}
	q := func(s uint64, ms float64, sql string, resp store.Response) store.Record {
		return store.Record{Session: s, Start: at(ms), Duration: 500 * time.Microsecond, Kind: store.KindQuery, Schema: "shop", SQL: sql, Resp: resp}
	}
	upd := store.Response{Kind: store.RespOK, AffectedRows: 1}
	waits := q(2, 5, "UPDATE t SET v = v * 10 WHERE id = 1", upd)
	waits.Duration = 7 * time.Millisecond // until session 1's COMMIT
	recs := []store.Record{
		{Session: 1, Start: at(0), Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
		{Session: 2, Start: at(0.1), Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
		{Session: 4, Start: at(0.3), Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
	}
	if set != "" {
		recs = append(recs, q(1, 0.5, set, ok))
	}
	return writeRecords(t, append(recs,
		q(1, 1, "BEGIN", ok),
		q(1, 2, "UPDATE t SET v = v + 1 WHERE id = 1", upd),
		waits,
		q(1, 8, "UPDATE t SET v = v + 100 WHERE id = 2", upd),
		q(1, 11, "COMMIT", ok),
		q(4, 20, "SELECT v FROM t WHERE id = 1 AND v = 20", store.Response{Kind: store.RespResultSet, Columns: 1, Rows: 1}),
		store.Record{Session: 4, Start: at(21), Kind: store.KindQuit},
		store.Record{Session: 2, Start: at(23), Kind: store.KindQuit},
		store.Record{Session: 1, Start: at(24), Kind: store.KindQuit},
	))
}

// twoCopiesOfT gives two fresh databases on the shared InnoDB server with
// table t (rows 1 and 2, v = 1 and 2): their handles and DSNs.
func twoCopiesOfT(t *testing.T) (dba, dbb *sql.DB, a, b string) {
	t.Helper()
	srv := sandboxtest.Server(t, "innodb")
	dba, a = srv.FreshDB(t)
	dbb, b = srv.FreshDB(t)
	for _, db := range []*sql.DB{dba, dbb} {
		exec(t, db, "CREATE TABLE t (id INT PRIMARY KEY, v INT)", "INSERT INTO t VALUES (1, 1), (2, 2)")
	}
	return dba, dbb, a, b
}
