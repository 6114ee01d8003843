package replay

import (
	"database/sql"
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
func TestImplicitlyEndedTransactionYieldsWhileItsEndWaits(t *testing.T) {
	at := time.Now().Truncate(time.Millisecond)
	ms := func(n float64) time.Time { return at.Add(time.Duration(n * float64(time.Millisecond))) }
	ok := store.Response{Kind: store.RespOK}
	upd := store.Response{Kind: store.RespOK, AffectedRows: 1}
	row := store.Response{Kind: store.RespResultSet, Columns: 1, Rows: 1}
	d := 500 * time.Microsecond
	q := func(s uint64, start float64, sql string, r store.Response) store.Record {
		return store.Record{Session: s, Start: ms(start), Duration: d, Kind: store.KindQuery, Schema: "shop", SQL: sql, Resp: r}
	}
	recs := []store.Record{
		{Session: 1, Start: ms(0), Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
		{Session: 2, Start: ms(0.5), Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
		q(1, 1, "BEGIN", ok),
		q(1, 2, "UPDATE t SET v = v + 1 WHERE id = 1", upd),
		q(2, 5, "UPDATE t SET v = v + 10 WHERE id = 1", upd),
		q(1, 10, "BEGIN", ok),
		q(1, 11, "SELECT v FROM t WHERE id = 2", row),
		q(1, 12, "COMMIT", ok),
		{Session: 2, Start: ms(13), Kind: store.KindQuit},
		{Session: 1, Start: ms(14), Kind: store.KindQuit},
	}
	capDir := writeRecords(t, recs)
	ta, tb, dba, dbb := twoInnoDB(t)
	for _, db := range []*sql.DB{dba, dbb} {
		exec(t, db, "CREATE TABLE t (id INT PRIMARY KEY, v INT)", "INSERT INTO t VALUES (1, 1), (2, 2)")
	}
	rep := replayRun(t, capDir, func(cfg *Config) {
		cfg.Order = OrderCapture
		cfg.OrderTimeout = 30 * time.Second // a release would take this long: none is expected
	}, ta, tb)
	for _, tr := range rep.Targets {
		if tr.OrderReleased != 0 || tr.OrderReruns != 1 || tr.FailedTransactions != 0 || tr.Errors != 0 {
			t.Errorf("%s: %d released, %d reruns, %d failed transactions, %d errors; want 0 released, 1 rerun (session 1's transaction yields to session 2's UPDATE), 0, 0",
				tr.Name, tr.OrderReleased, tr.OrderReruns, tr.FailedTransactions, tr.Errors)
		}
	}
	for _, db := range []*sql.DB{dba, dbb} {
		if v := valueOf(t, db, 1); v != 12 {
			t.Errorf("row 1 holds %d, want 12 (both UPDATEs committed)", v)
		}
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
	at := time.Now().Truncate(time.Millisecond)
	ms := func(n float64) time.Time { return at.Add(time.Duration(n * float64(time.Millisecond))) }
	ok := store.Response{Kind: store.RespOK}
	upd := store.Response{Kind: store.RespOK, AffectedRows: 1}
	d := 500 * time.Microsecond
	q := func(s uint64, start float64, sql string, r store.Response) store.Record {
		return store.Record{Session: s, Start: ms(start), Duration: d, Kind: store.KindQuery, Schema: "shop", SQL: sql, Resp: r}
	}
	recs := []store.Record{
		{Session: 1, Start: ms(0), Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
		{Session: 2, Start: ms(0.5), Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
		q(1, 1, "BEGIN", ok),
		q(1, 2, "UPDATE t SET v = v + 1 WHERE id = 1", upd),
		q(2, 5, "UPDATE t SET v = v + 10 WHERE id = 1", upd),
		{Session: 2, Start: ms(8), Kind: store.KindQuit},
		{Session: 1, Start: ms(10), Kind: store.KindQuit, Flags: store.FlagOpenAtStop},
	}
	capDir := writeRecords(t, recs)
	ta, tb, dba, dbb := twoInnoDB(t)
	for _, db := range []*sql.DB{dba, dbb} {
		exec(t, db, "CREATE TABLE t (id INT PRIMARY KEY, v INT)", "INSERT INTO t VALUES (1, 1), (2, 2)")
	}
	rep := replayRun(t, capDir, func(cfg *Config) {
		cfg.Order = OrderCapture
		cfg.OrderTimeout = 30 * time.Second // a release would take this long: none is expected
	}, ta, tb)
	for i, tr := range rep.Targets {
		if tr.OrderReleased != 0 || tr.FailedTransactions != 0 || tr.Errors != 0 {
			t.Errorf("%s: %d released, %d failed transactions, %d errors; want 0, 0, 0", tr.Name, tr.OrderReleased, tr.FailedTransactions, tr.Errors)
		}
		if c := rep.VsCapture[i]; c.Total() != 0 || c.Compared != 3 {
			t.Errorf("%s vs capture: %d compared, divergent %v; want 3 compared (BEGIN and both UPDATEs), 0 divergent", tr.Name, c.Compared, c.ByClass)
		}
	}
	for _, db := range []*sql.DB{dba, dbb} {
		if v := valueOf(t, db, 1); v != 11 {
			t.Errorf("row 1 holds %d, want 11 (session 1's UPDATE rolled back at its quit)", v)
		}
	}
}
