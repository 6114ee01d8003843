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
	at := time.Now().Truncate(time.Millisecond)
	ok := store.Response{Kind: store.RespOK}
	recs := []store.Record{
		{Session: 1, Start: at, Duration: time.Microsecond, Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
		{Session: 1, Start: at.Add(time.Millisecond), Duration: time.Millisecond, Kind: store.KindQuery, Schema: "shop",
			SQL: "UPDATE t SET v = v + 10 WHERE id = 1", Resp: store.Response{Kind: store.RespOK, AffectedRows: 1}},
		{Session: 1, Start: at.Add(3 * time.Millisecond), Kind: store.KindQuit},
	}
	var logged strings.Builder
	rep := replayRun(t, writeRecords(t, recs), func(cfg *Config) {
		cfg.Order, cfg.TargetTimeout = OrderNone, time.Second
		cfg.Logger = slog.New(slog.NewTextHandler(&logged, nil))
	}, tgt(t, "a", dsn, ""))
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
}
