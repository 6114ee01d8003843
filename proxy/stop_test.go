package proxy

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tandemdb/tandem/gtid"
	"github.com/tandemdb/tandem/sandbox/sandboxtest"
	"github.com/tandemdb/tandem/store"
)

// A session inside a transaction that wrote when a capture stops is held
// (its next command waits) until the capture's end point is read: its
// COMMIT, sent right after it left the capture, then comes after the end
// point. Before, the COMMIT went through at once and landed inside the
// capture's range without being in the capture, so it was listed as a
// transaction that bypassed the proxy, and --apply-bypassed ran it on top
// of its captured statements (seen as a MyRocks lock wait that failed
// for good in the runtime-capture e2e test and in make demo). A session
// whose transaction only read is not held, and a transaction that really
// bypassed the proxy is still listed.
func TestStopHoldsAWritingSessionUntilTheEndPoint(t *testing.T) {
	srv := sandboxtest.Server(t, "primary")
	db, dsn := srv.FreshDB(t)
	for _, q := range []string{"CREATE TABLE h (id INT PRIMARY KEY, v INT)", "INSERT INTO h VALUES (1, 0), (2, 0)"} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	tp := startProxy(t, srv.Addr(), false, func(c *Config) { c.Commits = true })
	ctx := context.Background()
	r := newRunner(ctx, tp.Proxy, RunConfig{Config: tp.cfg, Binlog: &gtid.Account{User: "root"}}, prometheus.NewRegistry(), io.Discard)
	via := dsnVia(t, dsn, tp.Addr().String(), nil)
	conn := func() *sql.Conn {
		c, err := openDB(t, via).Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	writer, reader := conn(), conn()
	dir := filepath.Join(t.TempDir(), "cap")
	if _, err := r.Start(ctx, CaptureOptions{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"BEGIN", "UPDATE h SET v = 1 WHERE id = 1"} {
		if _, err := writer.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := reader.ExecContext(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	var v int
	if err := reader.QueryRowContext(ctx, "SELECT v FROM h WHERE id = 2").Scan(&v); err != nil {
		t.Fatal(err)
	}
	// A write that bypasses the proxy, during the capture.
	if _, err := db.Exec("UPDATE h SET v = 5 WHERE id = 2"); err != nil {
		t.Fatal(err)
	}

	committed := make(chan time.Time, 2)
	var heldAt int
	r.afterLeave = func(held int) {
		heldAt = held
		// Both sessions have left; each commits now. The reader's COMMIT
		// goes through; the writer's waits for the end point.
		go func() {
			if _, err := reader.ExecContext(ctx, "COMMIT"); err != nil {
				t.Error(err)
			}
			committed <- time.Now()
		}()
		go func() {
			if _, err := writer.ExecContext(ctx, "COMMIT"); err != nil {
				t.Error(err)
			}
			committed <- time.Now()
		}()
		time.Sleep(300 * time.Millisecond) // ample for a COMMIT that is not held
	}
	if _, err := r.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	<-committed
	<-committed
	if err := db.QueryRow("SELECT v FROM h WHERE id = 1").Scan(&v); err != nil || v != 1 {
		t.Fatalf("the writer's UPDATE after its COMMIT: v = %d (%v), want 1", v, err)
	}
	rd, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	sum, ok := rd.Summary()
	if !ok || sum.End == nil || sum.Bypassed == nil {
		t.Fatalf("no end point or bypassed list: %+v", sum)
	}
	if b := sum.Bypassed; b.Transactions != 1 || b.Rows != 1 || len(b.Tables) != 1 {
		t.Fatalf("bypassed: %d transactions, %d rows, tables %+v; want the one direct UPDATE (the writer's COMMIT came after the end point)", b.Transactions, b.Rows, b.Tables)
	}
	if heldAt != 1 {
		t.Fatalf("%d sessions held at the stop, want 1 (the writer)", heldAt)
	}
}

// A session in a command when the capture stops, inside a transaction
// that wrote, leaves the capture by itself before its next command
// (syncCaptureLocked), not in the stop's round of idle sessions: it must
// be held all the same until the end point is read. Before, only the
// sessions the stop found idle were held; a busy one's COMMIT, sent the
// moment its statement returned, went through at once, landed inside
// the capture's range without being in it, and was listed as a
// transaction that bypassed the proxy. Replay --apply-bypassed then ran
// it whole beside its captured statements, each blocking the other on
// the same rows until --order-timeout released them, over and over:
// make demo's production replay once took 141 s instead of 20.
func TestStopHoldsAWritingSessionThatLeavesAtItsNextCommand(t *testing.T) {
	srv := sandboxtest.Server(t, "primary")
	db, dsn := srv.FreshDB(t)
	for _, q := range []string{"CREATE TABLE h (id INT PRIMARY KEY, v INT)", "INSERT INTO h VALUES (1, 0), (2, 0)"} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	tp := startProxy(t, srv.Addr(), false, func(c *Config) { c.Commits = true })
	ctx := context.Background()
	r := newRunner(ctx, tp.Proxy, RunConfig{Config: tp.cfg, Binlog: &gtid.Account{User: "root"}}, prometheus.NewRegistry(), io.Discard)
	writer, err := openDB(t, dsnVia(t, dsn, tp.Addr().String(), nil)).Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close()
	locker, err := db.Conn(ctx) // straight to the server
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close()
	dir := filepath.Join(t.TempDir(), "cap")
	if _, err := r.Start(ctx, CaptureOptions{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"BEGIN", "UPDATE h SET v = 1 WHERE id = 1"} {
		if _, err := writer.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	// The locker holds row 2 (a locking read writes nothing: no GTID).
	if _, err := locker.ExecContext(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	var v int
	if err := locker.QueryRowContext(ctx, "SELECT v FROM h WHERE id = 2 FOR UPDATE").Scan(&v); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		// Waits for the locker's row: in a command when the stop comes.
		if _, err := writer.ExecContext(ctx, "UPDATE h SET v = 2 WHERE id = 2"); err != nil {
			done <- err
			return
		}
		_, err := writer.ExecContext(ctx, "COMMIT") // at once: the session leaves here
		done <- err
	}()
	waitFor(t, "the writer's UPDATE to wait for the locker's row", func() bool {
		var n int
		return db.QueryRow("SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT'").Scan(&n) == nil && n == 1
	})
	stopped := make(chan error, 1)
	go func() {
		_, err := r.Stop(ctx)
		stopped <- err
	}()
	waitFor(t, "the stop to begin", func() bool { return tp.Proxy.live.Load() == nil })
	if _, err := locker.ExecContext(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow("SELECT SUM(v) FROM h").Scan(&v); err != nil || v != 3 {
		t.Fatalf("after the writer's COMMIT: SUM(v) = %d (%v), want 3", v, err)
	}
	rd, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	sum, ok := rd.Summary()
	if !ok || sum.End == nil || sum.Bypassed == nil {
		t.Fatalf("no end point or bypassed list: %+v", sum)
	}
	if b := sum.Bypassed; b.Transactions != 0 || b.Rows != 0 {
		t.Fatalf("bypassed: %d transactions, %d rows, tables %+v; want none (the writer's COMMIT came after the end point)", b.Transactions, b.Rows, b.Tables)
	}
	var got []string
	for rec, err := range rd.Records() {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s %q %#x", rec.Kind, rec.SQL, rec.Flags))
	}
	want := []string{
		`connect "" 0x10`, // the writer, open at the start
		`query "BEGIN" 0x0`,
		`query "UPDATE h SET v = 1 WHERE id = 1" 0x0`,
		`query "UPDATE h SET v = 2 WHERE id = 2" 0x0`,
		`quit "" 0x40`, // its synthetic end: the COMMIT is not in the capture
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// waitFor polls cond every 10 ms for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
