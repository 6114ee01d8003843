package replay

import (
	"testing"
	"time"

	"github.com/tandemdb/tandem/sandbox/sandboxtest"
	"github.com/tandemdb/tandem/store"
)

// With --order none each session runs as fast as the target lets it,
// and the reader hands each session its records. Session B's UPDATE
// waits on the server for the row lock of A's open transaction, and B
// has many records after it before A's COMMIT comes in the capture.
// Before, each session's queue held 1,024 records and the reader waited
// for B's to have room: A's COMMIT was never read, and B's UPDATE failed
// at the target's lock wait timeout (1205), an error production never
// had. Now the reader waits only for the backlog of all sessions, so A's
// COMMIT goes, and B's UPDATE runs once A has committed.
func TestReaderNeverWaitsForOneStuckSession(t *testing.T) {
	db, dsn := sandboxtest.Server(t, "innodb").FreshDB(t)
	if _, err := db.Exec("CREATE TABLE t (id INT PRIMARY KEY, v INT)"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("INSERT INTO t VALUES (1, 0)"); err != nil {
		t.Fatal(err)
	}
	at := time.Now().Truncate(time.Millisecond)
	us := func(n int) time.Time { return at.Add(time.Duration(n) * time.Microsecond) }
	ok := store.Response{Kind: store.RespOK}
	one := store.Response{Kind: store.RespOK, AffectedRows: 1}
	recs := []store.Record{
		{Session: 1, Start: us(0), Duration: time.Microsecond, Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
		{Session: 2, Start: us(1), Duration: time.Microsecond, Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
		{Session: 1, Start: us(2), Duration: time.Microsecond, Kind: store.KindQuery, Schema: "shop", SQL: "BEGIN", Resp: ok},
		{Session: 1, Start: us(3), Duration: time.Microsecond, Kind: store.KindQuery, Schema: "shop", SQL: "UPDATE t SET v = v + 1 WHERE id = 1", Resp: one},
		{Session: 2, Start: us(4), Duration: time.Microsecond, Kind: store.KindQuery, Schema: "shop", SQL: "UPDATE t SET v = v + 10 WHERE id = 1", Resp: one},
	}
	const after = 1100 // more than a session's queue held before
	for i := range after {
		recs = append(recs, store.Record{Session: 2, Start: us(10 + i), Duration: time.Microsecond, Kind: store.KindQuery, Schema: "shop",
			SQL: "SELECT v FROM t WHERE id = 2", Resp: store.Response{Kind: store.RespResultSet}})
	}
	recs = append(recs,
		store.Record{Session: 1, Start: us(2000), Duration: time.Microsecond, Kind: store.KindQuery, Schema: "shop", SQL: "COMMIT", Resp: ok},
		store.Record{Session: 1, Start: us(2001), Kind: store.KindQuit},
		store.Record{Session: 2, Start: us(2002), Kind: store.KindQuit},
	)
	capDir := writeRecords(t, recs)
	rep := replayRun(t, capDir, func(c *Config) { c.Order = OrderNone }, tgt(t, "a", dsn+"?innodb_lock_wait_timeout=2", ""))
	ra := rep.Targets[0]
	var v int
	if err := db.QueryRow("SELECT v FROM t WHERE id = 1").Scan(&v); err != nil {
		t.Fatal(err)
	}
	if ra.Errors != 0 || v != 11 {
		t.Fatalf("%d errors %v, v = %d; want no error and both UPDATEs (v = 11)", ra.Errors, ra.ErrorCodes, v)
	}
	if got := ra.Reads + ra.Writes + ra.Other; got != after+4 {
		t.Errorf("%d statements replayed, want %d", got, after+4)
	}
}
