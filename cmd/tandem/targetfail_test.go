package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	driver "github.com/go-sql-driver/mysql"
	"github.com/tandemdb/tandem/sandbox/sandboxtest"
)

// captureSleeps records, through tandem proxy, sessions of the mariadb
// CLI that each run n statements 20 ms apart; it returns the capture.
func captureSleeps(t *testing.T, srv *sandboxtest.Handle, sessions, n int) string {
	t.Helper()
	capDir := filepath.Join(t.TempDir(), "capture")
	listen := freeAddr(t)
	p, _ := startProc(t, tandemBin, "proxy", "--listen", listen, "--backend", srv.Addr(), "--capture", capDir, "--metrics-addr", "off")
	waitTCP(t, listen)
	host, port, _ := net.SplitHostPort(listen)
	var script strings.Builder
	for i := range n {
		fmt.Fprintf(&script, "SELECT %d, SLEEP(0.02);\n", i)
	}
	errs := make(chan error, sessions)
	for range sessions {
		go func() {
			cmd := exec.Command("mariadb", "--protocol=tcp", "-h", host, "-P", port, "-u", "root", "--skip-ssl", "-N")
			cmd.Stdin = strings.NewReader(script.String())
			out, err := cmd.CombinedOutput()
			if err != nil {
				err = fmt.Errorf("%v: %s", err, out)
			}
			errs <- err
		}()
	}
	for range sessions {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	p.Process.Signal(os.Interrupt)
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	return capDir
}

// A target that stops answering (its server SIGSTOPped mid-replay) is
// marked failed after --target-timeout with a reason that says so; the
// other target replays every statement, and the run ends, with its end
// state checked on the live target only, and exit status 2. Before, nothing tested that a
// hung target cannot hang the run.
func TestHungTargetTimesOutAndTheOthersFinish(t *testing.T) {
	if testing.Short() {
		t.Skip("stops a MariaDB server; skipped with -short")
	}
	t.Parallel()
	srv := sandboxtest.Server(t, "innodb")
	capDir := captureSleeps(t, srv, 2, 150) // about 3.5 s of traffic

	hung, _ := ownServer(t)
	t.Cleanup(func() { syscall.Kill(hung.PID, syscall.SIGCONT) }) // before it is stopped for good
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		time.Sleep(1200 * time.Millisecond)
		syscall.Kill(hung.PID, syscall.SIGSTOP)
	}()
	begin := time.Now()
	rep, stderr := replayJSONExit(t, 2, filepath.Join(t.TempDir(), "run"), capDir, "--speed", "1", "--target-timeout", "2s", "--target", "live="+srv.DSN(""), "--target", "hung="+hung.DSN(""))
	took := time.Since(begin)
	// Exit status 2 says the comparison is not complete (it was 0).
	if !strings.Contains(stderr, "tandem: target hung failed during the run") {
		t.Errorf("stderr does not name the failed target:\n%s", stderr)
	}
	<-stopped
	live, h := rep.Points[0].Targets[0], rep.Points[0].Targets[1]
	if live.Failed != "" || live.Errors != 0 || live.Reads != 300 {
		t.Errorf("live target: failed %q, %d errors, %d reads (want 300)", live.Failed, live.Errors, live.Reads)
	}
	if !strings.Contains(h.Failed, "timeout") && !strings.Contains(h.Failed, "did not answer") {
		t.Errorf("hung target: failed %q, want a timeout named", h.Failed)
	}
	if h.Reads >= 300 || h.SkippedBy["target had failed"] == 0 {
		t.Errorf("hung target: %d reads, skipped %v", h.Reads, h.SkippedBy)
	}
	text, _, _ := run(t, nil, "report", rep.RunDirs[0])
	if !strings.Contains(text, "got no answer") {
		t.Errorf("the report does not say the hung target failed:\n%s", text)
	}
	t.Logf("replay took %v; hung target: %q, %d reads, errors %v, skipped %v", took.Round(time.Millisecond), h.Failed, h.Reads, h.ErrorCodes, h.SkippedBy)
}

// Sessions the target cannot take (max_connections) fail with the
// server's own 1040 named as such, counted as connection failures; the
// other statements are compared as usual. Before, every error not from a
// statement read as 2013 "lost connection".
func TestTooManyConnectionsIsSaidPlainly(t *testing.T) {
	if testing.Short() {
		t.Skip("needs MariaDB; skipped with -short")
	}
	t.Parallel()
	srv := sandboxtest.Server(t, "innodb")
	capDir := captureSleeps(t, srv, 16, 20)

	// 10 connections (MariaDB's least) for an application's user; root
	// would get one more.
	small, _ := ownServer(t, "max-connections=10")
	rootSQL(t, small.Port, "CREATE USER app@'%'; GRANT SELECT ON *.* TO app@'%'")
	c, _ := driver.ParseDSN(small.DSN(""))
	c.User = "app"
	rep := replayJSON(t, capDir, "--speed", "0", "--target", "small="+c.FormatDSN())
	tg := rep.Points[0].Targets[0]
	if tg.ConnectFailures == 0 || tg.ErrorCodes["1040"] == 0 {
		t.Fatalf("small target: %d connect failures, errors %v; want 1040s", tg.ConnectFailures, tg.ErrorCodes)
	}
	for code := range tg.ErrorCodes {
		if code != "1040" {
			t.Errorf("error %s besides 1040 (all %v)", code, tg.ErrorCodes)
		}
	}
	text, _, _ := run(t, nil, "report", rep.RunDirs[0])
	if !strings.Contains(text, "1040 too many connections ×") {
		t.Errorf("the report does not name too many connections:\n%s", text)
	}
	t.Logf("%d sessions could not connect: errors %v, %d statements run", tg.ConnectFailures, tg.ErrorCodes, tg.Reads)
}

// mariadb-slap drops and re-creates its schema every iteration, and its
// next session selects it again with the same name: replay sends every
// captured schema change (go-mysql's client skipped a USE of the name it
// had cached, and the second iteration failed with 1046 on 930 of 962
// statements). Captured through the proxy, replayed onto a fresh server:
// 0 errors, and every statement as captured.
func TestMariaDBSlapIterationsReplay(t *testing.T) {
	if testing.Short() {
		t.Skip("needs MariaDB; skipped with -short")
	}
	t.Parallel()
	srv := sandboxtest.Server(t, "innodb")
	capDir := filepath.Join(t.TempDir(), "capture")
	listen := freeAddr(t)
	p, _ := startProc(t, tandemBin, "proxy", "--listen", listen, "--backend", srv.Addr(), "--capture", capDir, "--capture-results", "checksum", "--metrics-addr", "off")
	waitTCP(t, listen)
	host, port, _ := net.SplitHostPort(listen)
	schema := fmt.Sprintf("tandem_slap_%d", os.Getpid())
	out, err := exec.Command("mariadb-slap", "--protocol=tcp", "-h", host, "-P", port, "-u", "root", "--skip-ssl", "--iterations=3", "--concurrency=2",
		"--number-of-queries=100", "--auto-generate-sql", "--auto-generate-sql-load-type=mixed", "--create-schema="+schema).CombinedOutput()
	if err != nil {
		t.Fatalf("mariadb-slap through the proxy: %v\n%s", err, out)
	}
	p.Process.Signal(os.Interrupt)
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	fresh, _ := ownServer(t)
	rep := replayJSON(t, capDir, "--speed", "0", "--target", "fresh="+fresh.DSN(""))
	tg := rep.Points[0].Targets[0]
	vc := tg.VsCapture
	if tg.Errors != 0 || tg.Skipped != 0 || vc == nil || vc.Compared < 300 || vc.ByClass["error-vs-ok"] != 0 || vc.ByClass["error-code"] != 0 {
		t.Fatalf("slap replayed with %d errors %v, %d skipped; vs capture %+v", tg.Errors, tg.ErrorCodes, tg.Skipped, vc)
	}
	t.Logf("%d statements compared with the capture, 0 errors; differences %v (slap's generated rows are random: nondeterministic %d)", vc.Compared, vc.ByClass, vc.Nondeterministic)
}
