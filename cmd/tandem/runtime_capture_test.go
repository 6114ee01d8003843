package main

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tandemdb/tandem/sandbox/sandboxtest"
	"github.com/tandemdb/tandem/store"
)

// lines collects a process's output lines for waitLine.
func lines(r io.Reader) chan string {
	ch := make(chan string, 256)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			ch <- sc.Text()
		}
		close(ch)
	}()
	return ch
}

// waitLine returns the first line holding what, within d.
func waitLine(t *testing.T, ch chan string, what string, d time.Duration) string {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case l, ok := <-ch:
			if !ok {
				t.Fatalf("the output ended before %q", what)
			}
			if strings.Contains(l, what) {
				return l
			}
		case <-deadline:
			t.Fatalf("no %q within %v", what, d)
		}
	}
}

// A capture started on a proxy that was relaying already: a
// go-sql-driver session with autocommit=0 (the driver's SET at connect),
// two statements prepared and a read-only transaction open before the
// capture, joins it with its state; its executes replay (none skipped as
// prepared before the capture), and its transaction left open at the
// stop is rolled back on the target. Before runtime captures, none of
// this was possible: a capture began only with the proxy.
func TestCaptureStartedOnARunningProxyReplaysOpenSessions(t *testing.T) {
	srv := sandboxtest.Server(t, "innodb")
	db, dsn := srv.FreshDB(t)
	target, tdsn := srv.FreshDB(t) // the copy a replica at the start point would be
	for _, d := range []*sql.DB{db, target} {
		mustExec(t, d, "CREATE TABLE t (id INT PRIMARY KEY, k INT NOT NULL)")
		for i := 1; i <= 20; i++ {
			mustExec(t, d, fmt.Sprintf("INSERT INTO t VALUES (%d, 0)", i))
		}
	}
	listen, maddr := freeAddr(t), freeAddr(t)
	capDir := filepath.Join(t.TempDir(), "cap")
	_, out := startProc(t, tandemBin, "proxy", "--listen", listen, "--backend", srv.Addr(), "--metrics-addr", maddr)
	ls := lines(out)
	waitLine(t, ls, "listening on", 30*time.Second)

	ctx := context.Background()
	client, err := sql.Open("mysql", strings.Replace(dsn, srv.Addr(), listen, 1)+"?autocommit=0")
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	conn, err := client.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	upd, err := conn.PrepareContext(ctx, "UPDATE t SET k = k + 1 WHERE id = ?")
	if err != nil {
		t.Fatal(err)
	}
	sel, err := conn.PrepareContext(ctx, "SELECT k FROM t WHERE id = ?")
	if err != nil {
		t.Fatal(err)
	}
	var k int
	if err := sel.QueryRowContext(ctx, 1).Scan(&k); err != nil || k != 0 { // opens a transaction (autocommit=0)
		t.Fatalf("before the capture: k %d, %v", k, err)
	}

	text, stderr, code := run(t, nil, "capture", "start", capDir, "--proxy", maddr)
	if code != 0 || !strings.Contains(text, "capturing into "+capDir) {
		t.Fatalf("capture start: exit %d\n%s%s", code, text, stderr)
	}
	for i := 1; i <= 15; i++ {
		if _, err := upd.ExecContext(ctx, i); err != nil {
			t.Fatal(err)
		}
	}
	mustExecConn(t, conn, "COMMIT")
	if err := sel.QueryRowContext(ctx, 3).Scan(&k); err != nil || k != 1 {
		t.Fatalf("in the capture: k %d, %v", k, err)
	}
	if _, err := upd.ExecContext(ctx, 16); err != nil { // open at the stop
		t.Fatal(err)
	}
	text, stderr, code = run(t, nil, "capture", "stop", "--proxy", maddr)
	if code != 0 || !strings.Contains(text, "1 open at its start") {
		t.Fatalf("capture stop: exit %d\n%s%s", code, text, stderr)
	}
	mustExecConn(t, conn, "COMMIT") // after the stop: not in the capture

	// The capture: the session's rebuilt state, then what it did.
	r, err := store.Open(capDir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rec, err := range r.Records() {
		if err != nil {
			t.Fatal(err)
		}
		s := rec.Kind.String()
		if rec.SQL != "" {
			s += " " + rec.SQL
		}
		if rec.Flags&store.FlagOpenAtStart != 0 {
			s += " [open at start]"
		}
		if rec.Flags&store.FlagBeforeStart != 0 {
			s += " [before start]"
		}
		if rec.Flags&store.FlagOpenAtStop != 0 {
			s += " [open at stop]"
		}
		got = append(got, s)
	}
	r.Close()
	want := []string{"connect [open at start]", "query SET autocommit = 0 [open at start]", "query SET autocommit=0 [open at start]",
		"query START TRANSACTION [open at start] [before start]",
		"prepare UPDATE t SET k = k + 1 WHERE id = ? [open at start]", "prepare SELECT k FROM t WHERE id = ? [open at start]"}
	for range 15 {
		want = append(want, "execute [before start]")
	}
	want = append(want, "query COMMIT [before start]", "execute", "execute", "quit [open at stop]")
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("capture:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	rep := replayJSON(t, capDir, "--target", "copy="+tdsn)
	tg := rep.Points[0].Targets[0]
	if vc := tg.VsCapture; vc == nil || vc.Compared != 18 || vc.Total() != 0 || vc.Ambiguous != 0 || vc.OpenAtStart != 6 {
		t.Errorf("vs the capture: %+v; want 18 compared (15 updates, COMMIT, SELECT, the update open at the stop), 0 differing, 6 synthetic", vc)
	}
	if tg.Skipped != 0 || tg.Errors != 0 {
		t.Errorf("skipped %d %v, errors %d %v; want none", tg.Skipped, tg.SkippedBy, tg.Errors, tg.ErrorCodes)
	}
	var sum, changed int
	if err := target.QueryRow("SELECT SUM(k), SUM(k > 0) FROM t").Scan(&sum, &changed); err != nil || sum != 15 || changed != 15 {
		t.Errorf("target after replay: sum %d over %d rows, %v; want 15 over 15 (id 16's update was open at the stop: rolled back)", sum, changed, err)
	}
}

func mustExecConn(t *testing.T, c *sql.Conn, q string) {
	t.Helper()
	if _, err := c.ExecContext(context.Background(), q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}
