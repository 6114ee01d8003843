package replay

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/tandemdb/tandem/sandbox/sandboxtest"
	"github.com/tandemdb/tandem/store"
)

// A capture holds an admin session's SET GLOBAL (the statements that turn
// a server's logs on are the usual ones). Replayed by default, it is not
// run: the target server keeps its setting, and the record is counted as
// skipped for that reason; the session's own SET and its write run.
// With RunGlobalSets it runs. (Before, every replay changed each target
// server's settings for everyone on it.)
func TestReplaySkipsServerWideSETs(t *testing.T) {
	srv := sandboxtest.Server(t, "innodb")
	root, err := sql.Open("mysql", srv.DSN(""))
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	var was int64
	if err := root.QueryRow("SELECT @@global.max_connect_errors").Scan(&was); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Exec("SET GLOBAL max_connect_errors = ?", was) })
	db, dsn := srv.FreshDB(t)
	if _, err := db.Exec("CREATE TABLE t (id INT PRIMARY KEY, v INT)"); err != nil {
		t.Fatal(err)
	}
	at := time.Now().Truncate(time.Millisecond)
	ms := func(n int) time.Time { return at.Add(time.Duration(n) * time.Millisecond) }
	ok := store.Response{Kind: store.RespOK}
	capDir := writeRecords(t, []store.Record{
		{Session: 1, Start: at, Duration: time.Millisecond, Kind: store.KindConnect, User: "admin", Schema: "shop", Resp: ok},
		{Session: 1, Start: ms(2), Duration: time.Millisecond, Kind: store.KindQuery, Schema: "shop", SQL: "SET GLOBAL max_connect_errors = 4242", Resp: ok},
		{Session: 1, Start: ms(4), Duration: time.Millisecond, Kind: store.KindQuery, Schema: "shop", SQL: "SET SESSION sql_mode = 'ANSI_QUOTES'", Resp: ok},
		{Session: 1, Start: ms(6), Duration: time.Millisecond, Kind: store.KindQuery, Schema: "shop", SQL: `INSERT INTO "t" VALUES (1, 1)`,
			Resp: store.Response{Kind: store.RespOK, AffectedRows: 1}},
		{Session: 1, Start: ms(8), Kind: store.KindQuit},
	})
	for _, run := range []bool{false, true} {
		if _, err := db.Exec("DELETE FROM t"); err != nil {
			t.Fatal(err)
		}
		rep := replayRun(t, capDir, func(c *Config) { c.RunGlobalSets = run }, tgt(t, "a", dsn, ""))
		ra := rep.Targets[0]
		var now, rows int64
		if err := root.QueryRow("SELECT @@global.max_connect_errors").Scan(&now); err != nil {
			t.Fatal(err)
		}
		if err := db.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM t").Scan(&rows); err != nil {
			t.Fatal(err)
		}
		skipped := ra.SkippedBy[store.SkipReasonText(store.SkipGlobalSet)]
		switch {
		case !run && (now != was || skipped != 1 || ra.Skipped != 1):
			t.Errorf("by default: max_connect_errors %d (was %d), skipped %d %v; want it unchanged and the SET GLOBAL skipped once", now, was, ra.Skipped, ra.SkippedBy)
		case run && (now != 4242 || ra.Skipped != 0):
			t.Errorf("with RunGlobalSets: max_connect_errors %d, skipped %d %v; want 4242 and nothing skipped", now, ra.Skipped, ra.SkippedBy)
		}
		if rows != 1 || ra.Errors != 0 {
			t.Errorf("run global sets %v: %d rows, %d errors %v; want the session's INSERT (in its ANSI_QUOTES mode) to run", run, rows, ra.Errors, ra.ErrorCodes)
		}
	}
}
