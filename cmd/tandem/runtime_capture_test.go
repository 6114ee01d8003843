package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	driver "github.com/go-sql-driver/mysql"

	"github.com/tandemdb/tandem/proxy"
	"github.com/tandemdb/tandem/report"
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

// The capture controls' guards, against a real proxy: on loopback they
// answer; bound to every interface without a token they are off (and the
// proxy says so); with --admin-token-file they need the token. A directory
// that already holds a capture is refused, and --duration ends a capture
// on its own, saying so.
func TestCaptureControlsGuards(t *testing.T) {
	srv := sandboxtest.Server(t, "innodb")
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("0123456789abcdef-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(freeAddr(t))
	_, out := startProc(t, tandemBin, "proxy", "--listen", freeAddr(t), "--backend", srv.Addr(), "--metrics-addr", "0.0.0.0:"+port)
	ls := lines(out)
	if l := waitLine(t, ls, "--admin-token-file", 30*time.Second); !strings.Contains(l, "are off: the metrics address 0.0.0.0:"+port+" is not loopback") {
		t.Errorf("no notice that the controls are off: %q", l)
	}
	if _, stderr, code := run(t, nil, "capture", "status", "--proxy", "127.0.0.1:"+port); code != 1 || !strings.Contains(stderr, "--admin") {
		t.Errorf("status on a proxy bound to every interface without a token: exit %d, %q; want 1 naming the admin flags", code, stderr)
	}

	_, port2, _ := net.SplitHostPort(freeAddr(t))
	_, out2 := startProc(t, tandemBin, "proxy", "--listen", freeAddr(t), "--backend", srv.Addr(), "--metrics-addr", "0.0.0.0:"+port2, "--admin-token-file", tokenFile)
	waitLine(t, lines(out2), "listening on", 30*time.Second)
	admin := "127.0.0.1:" + port2
	if _, stderr, code := run(t, nil, "capture", "status", "--proxy", admin); code != 1 || !strings.Contains(stderr, "--admin-token-file") {
		t.Errorf("status without the token: exit %d, %q; want 1 naming --admin-token-file", code, stderr)
	}
	capDir := filepath.Join(t.TempDir(), "cap")
	tok := []string{"--proxy", admin, "--admin-token-file", tokenFile}
	if text, stderr, code := run(t, nil, append([]string{"capture", "start", capDir, "--duration", "1s"}, tok...)...); code != 0 || !strings.Contains(text, "capturing into "+capDir) {
		t.Fatalf("start with the token: exit %d\n%s%s", code, text, stderr)
	}
	var st proxy.Status
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		text, _, _ := run(t, nil, append([]string{"capture", "status", "--json"}, tok...)...)
		if err := json.Unmarshal([]byte(text), &st); err == nil && !st.Capturing && st.Last != nil {
			break
		}
	}
	if st.Capturing || st.Last == nil || st.Last.Reason != proxy.StopDuration || st.Last.Dir != capDir {
		t.Fatalf("after its 1 s: %+v, last %+v; want stopped by its duration", st, st.Last)
	}
	_, stderr, code := run(t, nil, append([]string{"capture", "start", capDir}, tok...)...)
	if code != 1 || !strings.Contains(stderr, "already holds a capture") {
		t.Errorf("a second capture into the same directory: exit %d, %q; want 1 and 'already holds a capture'", code, stderr)
	}
	if _, stderr, code := run(t, nil, append([]string{"capture", "stop"}, tok...)...); code != 1 || !strings.Contains(stderr, "no capture is running") {
		t.Errorf("stop with none running: exit %d, %q", code, stderr)
	}
	// A budget smaller than an empty capture: it stops at once, and says
	// it was its budget, not the disk.
	small := filepath.Join(t.TempDir(), "small")
	if text, stderr, code := run(t, nil, append([]string{"capture", "start", small, "--max-bytes", "1"}, tok...)...); code != 0 {
		t.Fatalf("start with --max-bytes 1: exit %d\n%s%s", code, text, stderr)
	}
	st = proxy.Status{}
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		text, _, _ := run(t, nil, append([]string{"capture", "status", "--json"}, tok...)...)
		if err := json.Unmarshal([]byte(text), &st); err == nil && !st.Capturing && st.Last != nil && st.Last.Dir == small {
			break
		}
	}
	if st.Capturing || st.Last == nil || st.Last.Reason != proxy.StopMaxBytes || !strings.Contains(st.Last.Err, "budget") {
		t.Errorf("after --max-bytes 1: %+v, last %+v; want stopped by max-bytes", st, st.Last)
	}
}

// Shadows follow each capture taken at runtime: a proxy started with
// --shadow and no --capture feeds no shadow while it only relays; each
// of two captures started with 'tandem capture start' gets its own
// shadow run (CAPTURE.shadows/NAME), which compares what that capture
// holds with the primary's answers. Read-only traffic, so the copy stays
// a copy between the captures.
func TestShadowsFollowRuntimeCaptures(t *testing.T) {
	if testing.Short() {
		t.Skip("needs MariaDB; skipped with -short")
	}
	t.Parallel()
	inno, primary, cp := sbtestCopies(t, 2, 2000)
	listen, admin := freeAddr(t), freeAddr(t)
	_, out := startProc(t, tandemBin, "proxy", "--listen", listen, "--backend", inno.Addr(), "--metrics-addr", admin,
		"--shadow", "copy="+cp, "--shadow-drain-timeout", "30s")
	ls := lines(out)
	waitLine(t, ls, "listening on", 30*time.Second)
	c, _ := driverDSN(primary)
	// Clients that stay connected through both captures, each with its
	// prepared statements from before the first: they run until both
	// captures have their records, however slow the machine (a timed
	// sysbench run once ended before the second capture began).
	rc := startReadClients(t, fmt.Sprintf("root@tcp(%s)/%s", listen, c), 4)
	caps := []string{filepath.Join(t.TempDir(), "cap1"), filepath.Join(t.TempDir(), "cap2")}
	for _, capDir := range caps {
		rc.waitTransactions(t, 3)
		if text, stderr, code := run(t, nil, "capture", "start", capDir, "--proxy", admin); code != 0 {
			t.Fatalf("capture start: exit %d\n%s%s", code, text, stderr)
		}
		waitCaptureRecords(t, admin, 200)
		if text, stderr, code := run(t, nil, "capture", "stop", "--proxy", admin); code != 0 {
			t.Fatalf("capture stop: exit %d\n%s%s", code, text, stderr)
		}
		text, _, _ := run(t, nil, "capture", "status", "--json", "--proxy", admin)
		var st proxy.Status
		if err := json.Unmarshal([]byte(text), &st); err != nil || st.Last == nil || st.Last.OpenAtStart != 4 || st.Last.Connected != 0 || st.Last.Dropped != 0 {
			t.Fatalf("%s: status after the stop %s (%v); want the 4 open sessions taken in at the start, none connected during it, none dropped", capDir, text, err)
		}
	}
	rc.stop(t)
	for i, capDir := range caps {
		text, stderr, code := run(t, nil, "report", capDir+".shadows/copy", "--format", "json")
		if code != 0 {
			t.Fatalf("capture %d: the shadow's run: exit %d %s", i+1, code, stderr)
		}
		var rep report.Report
		if err := json.Unmarshal([]byte(text), &rep); err != nil {
			t.Fatal(err)
		}
		tg := rep.Points[0].Targets[0]
		if vc := tg.VsCapture; vc == nil || vc.Compared < 200 || vc.Total() != 0 || tg.Errors != 0 {
			t.Errorf("capture %d: shadow copy compared %+v, errors %d; want at least 200 compared, 0 divergent, no error", i+1, vc, tg.Errors)
		}
	}
}

// readClients are sessions that each hold one connection and run
// sysbench's read-only transaction shape (BEGIN, point selects and a range
// through statements prepared once, COMMIT) until stopped.
type readClients struct {
	cancel context.CancelFunc
	done   chan error
	n      int
	trx    []atomic.Int64
}

func startReadClients(t *testing.T, dsn string, n int) *readClients {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	rc := &readClients{cancel: cancel, done: make(chan error, n), n: n, trx: make([]atomic.Int64, n)}
	t.Cleanup(cancel)
	for i := range n {
		go func() { rc.done <- rc.session(ctx, db, i) }()
	}
	return rc
}

func (rc *readClients) session(ctx context.Context, db *sql.DB, i int) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	point, err := conn.PrepareContext(ctx, "SELECT c FROM sbtest1 WHERE id=?")
	if err != nil {
		return err
	}
	rng, err := conn.PrepareContext(ctx, "SELECT c FROM sbtest2 WHERE id BETWEEN ? AND ? ORDER BY id")
	if err != nil {
		return err
	}
	var c string
	for k := 0; ctx.Err() == nil; k++ {
		// The context is not passed to the statements: a stop cancels
		// between transactions, never inside one.
		if _, err := conn.ExecContext(context.Background(), "BEGIN"); err != nil {
			return fmt.Errorf("session %d: %w", i, err)
		}
		for j := range 4 {
			if err := point.QueryRowContext(context.Background(), 1+(k*7+j*131+i*503)%2000).Scan(&c); err != nil {
				return fmt.Errorf("session %d: %w", i, err)
			}
		}
		from := 1 + (k*37+i*211)%1990
		rows, err := rng.QueryContext(context.Background(), from, from+9)
		if err != nil {
			return fmt.Errorf("session %d: %w", i, err)
		}
		n := 0
		for rows.Next() {
			n++
		}
		if err := rows.Err(); err != nil || n != 10 {
			return fmt.Errorf("session %d: range of 10 rows gave %d: %v", i, n, err)
		}
		if _, err := conn.ExecContext(context.Background(), "COMMIT"); err != nil {
			return fmt.Errorf("session %d: %w", i, err)
		}
		rc.trx[i].Add(1)
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// waitTransactions waits until every session has committed k more
// transactions than when it was called.
func (rc *readClients) waitTransactions(t *testing.T, k int64) {
	t.Helper()
	base := make([]int64, rc.n)
	for i := range base {
		base[i] = rc.trx[i].Load()
	}
	for end := time.Now().Add(60 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		ok := true
		for i := range base {
			ok = ok && rc.trx[i].Load() >= base[i]+k
		}
		if ok {
			return
		}
		select {
		case err := <-rc.done:
			t.Fatalf("a client session ended: %v", err)
		default:
		}
		if time.Now().After(end) {
			t.Fatalf("the client sessions did not run %d transactions each in 60 s", k)
		}
	}
}

// stop ends the sessions and fails the test if any of them failed.
func (rc *readClients) stop(t *testing.T) {
	t.Helper()
	rc.cancel()
	for range rc.n {
		if err := <-rc.done; err != nil {
			t.Errorf("client session through the proxy: %v", err)
		}
	}
}

// waitCaptureRecords waits until the proxy's running capture holds at
// least n records.
func waitCaptureRecords(t *testing.T, admin string, n uint64) {
	t.Helper()
	var st proxy.Status
	for end := time.Now().Add(60 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		text, stderr, code := run(t, nil, "capture", "status", "--json", "--proxy", admin)
		if code != 0 {
			t.Fatalf("capture status: exit %d\n%s%s", code, text, stderr)
		}
		if err := json.Unmarshal([]byte(text), &st); err != nil {
			t.Fatalf("capture status --json: %v\n%s", err, text)
		}
		if st.Current != nil && st.Current.Records >= n {
			return
		}
	}
	t.Fatalf("the capture did not reach %d records in 60 s: %+v", n, st.Current)
}

// driverDSN is the database a go-sql-driver DSN names.
func driverDSN(dsn string) (string, error) {
	c, err := driver.ParseDSN(dsn)
	if err != nil {
		return "", err
	}
	return c.DBName, nil
}
