package main

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tandemdb/tandem/sandbox/sandboxtest"
)

// Ctrl-C on a proxy with a client still connected says what it waits for;
// a second Ctrl-C closes the client at once, and the capture is closed
// cleanly. (Before: nothing was printed, and a second Ctrl-C waited the
// whole drain out.)
func TestSecondCtrlCStopsTheProxyAtOnce(t *testing.T) {
	srv := sandboxtest.Server(t, "innodb")
	_, dsn := srv.FreshDB(t)
	capDir := filepath.Join(t.TempDir(), "cap")
	listen := freeAddr(t)
	p, out := startProc(t, tandemBin, "proxy", "--listen", listen, "--backend", srv.Addr(), "--capture", capDir, "--metrics-addr", "off", "--drain-timeout", "60s")
	ls := lines(out)
	waitFor := func(what string, within time.Duration) string {
		t.Helper()
		return waitLine(t, ls, what, within)
	}
	waitFor("listening on", 30*time.Second)
	db, err := sql.Open("mysql", strings.Replace(dsn, srv.Addr(), listen, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(context.Background(), "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	p.Process.Signal(os.Interrupt)
	if l := waitFor("stopping", 10*time.Second); !strings.Contains(l, "waiting up to 1m0s for 1 open client sessions to end (Ctrl-C again closes them now)") {
		t.Errorf("first Ctrl-C: %q", l)
	}
	start := time.Now()
	p.Process.Signal(os.Interrupt)
	waitFor("records captured into", 15*time.Second)
	done := make(chan error, 1)
	go func() { done <- p.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("proxy exit: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the proxy did not exit after a second Ctrl-C")
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("the second Ctrl-C took %v (the drain timeout is 60 s)", took)
	}
	text, stderr, code := run(t, nil, "inspect", capDir)
	if code != 0 || !strings.Contains(text, "closed cleanly") {
		t.Errorf("capture after a forced stop: exit %d %s\n%s", code, stderr, text)
	}
	conn.Close()
}
