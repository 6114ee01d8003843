package replay

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/tandemdb/tandem/sandbox/sandboxtest"
	"github.com/tandemdb/tandem/store"
)

// A call that waits past --target-timeout on a row lock another
// connection holds is the server at work, not a hung server: the target
// is not failed, the statement runs once the lock goes, and the wait is
// said in the log. The watchdog asks the server for a new connection
// first; a stopped server does not answer it (cmd/tandem's
// TestHungTargetTimesOutAndTheOthersFinish). Before, the target was failed
// as "hung, stopped or unreachable" after --target-timeout: make faults
// saw it for a healthy InnoDB target whose sessions waited on each other's
// locks on a loaded machine.
func TestLockWaitPastTargetTimeoutIsNotAHungServer(t *testing.T) {
	db, dsn := sandboxtest.Server(t, "innodb").FreshDB(t)
	exec(t, db, "CREATE TABLE t (id INT PRIMARY KEY, v INT)", "INSERT INTO t VALUES (1, 0)")
	status := func(name string) int {
		t.Helper()
		var n int
		if err := db.QueryRow("SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = ?", name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	at := time.Now().Truncate(time.Millisecond)
	ok := store.Response{Kind: store.RespOK}
	recs := []store.Record{
		{Session: 1, Start: at, Duration: time.Microsecond, Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
		{Session: 1, Start: at.Add(time.Millisecond), Duration: time.Millisecond, Kind: store.KindQuery, Schema: "shop",
			SQL: "UPDATE t SET v = v + 10 WHERE id = 1", Resp: store.Response{Kind: store.RespOK, AffectedRows: 1}},
		{Session: 1, Start: at.Add(3 * time.Millisecond), Kind: store.KindQuit},
	}
	capDir := writeRecords(t, recs)
	var logged strings.Builder
	replay := func() *testReport {
		return replayRun(t, capDir, func(cfg *Config) {
			cfg.Order, cfg.TargetTimeout = OrderNone, time.Second
			cfg.Logger = slog.New(slog.NewTextHandler(&logged, nil))
		}, tgt(t, "a", dsn, ""))
	}
	// The connections a replay makes without a wait (the target's checks,
	// the session's), to tell the watchdog's probes from them.
	conns0 := status("CONNECTIONS")
	replay()
	base := status("CONNECTIONS") - conns0
	exec(t, db, "UPDATE t SET v = 0 WHERE id = 1")

	holder, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	for _, q := range []string{"BEGIN", "UPDATE t SET v = 1 WHERE id = 1"} {
		if _, err := holder.ExecContext(context.Background(), q); err != nil {
			t.Fatal(err)
		}
	}
	released := make(chan struct{})
	go func() {
		defer close(released)
		time.Sleep(3 * time.Second) // three --target-timeouts
		holder.ExecContext(context.Background(), "COMMIT")
	}()
	conns0, aborted0 := status("CONNECTIONS"), status("ABORTED_CLIENTS")
	rep := replay()
	<-released
	ra := rep.Targets[0]
	if ra.Failed != "" || ra.Errors != 0 || ra.Writes != 1 {
		t.Fatalf("target failed %q, %d errors %v, %d writes; want not failed, 0 errors and 1 write", ra.Failed, ra.Errors, ra.ErrorCodes, ra.Writes)
	}
	var v int
	if err := db.QueryRow("SELECT v FROM t WHERE id = 1").Scan(&v); err != nil || v != 11 {
		t.Errorf("v = %d (%v), want 11: the replayed UPDATE after the holder's", v, err)
	}
	if !strings.Contains(logged.String(), "a lock wait or a long statement") {
		t.Errorf("log %q: want the wait said", logged.String())
	}
	// The server is asked once per --target-timeout of the wait (at about
	// 1 s and 2 s; at 3 s the lock goes), each probe ending with a word to
	// the server. Before, it was asked at every tick (every 250 ms: 7
	// times), and each probe counted as an aborted client.
	probes, aborted := status("CONNECTIONS")-conns0-base, status("ABORTED_CLIENTS")-aborted0
	if aborted != 0 {
		t.Errorf("%d aborted clients during the replay, want 0", aborted)
	}
	if probes < 1 || probes > 3 {
		t.Errorf("%d probes (%d connections, of them the replay's own %d), want 1 to 3: one per --target-timeout of a 2 s wait", probes, probes+base, base)
	}
}
