package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tandemdb/tandem/report"
	"github.com/tandemdb/tandem/sandbox"
	"github.com/tandemdb/tandem/sandbox/sandboxtest"
)

// A server that refuses connections in clear (require_secure_transport):
// every command reaches it over TLS as the target's DSN asks — tls=
// skip-verify, or verified against a CA given as ca=FILE — and the report
// says which cipher each target ran. (Before, replay checked the target
// over TLS with go-sql-driver, then replayed in clear: every session
// failed with 3159 or 1045, and replay exited 0 having run nothing.)
func TestTLSOnlyTargetsAreReplayedOverTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("needs MariaDB; skipped with -short")
	}
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	srvs, err := sandbox.Up(ctx, sandbox.Config{Dir: dir, Profiles: []string{"innodb"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sandbox.Down(context.Background(), dir, nil, true) })
	srv := srvs[0]
	root, err := sql.Open("mysql", srv.DSN("")+"?tls=skip-verify")
	if err != nil {
		t.Fatal(err)
	}
	root.SetMaxOpenConns(1)
	for _, q := range []string{"SET GLOBAL require_secure_transport = ON", "CREATE DATABASE a", "CREATE DATABASE b", "CREATE DATABASE shadowed"} {
		if _, err := root.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	root.Close()
	// In clear, the server refuses: the premise of the test.
	host, port, _ := net.SplitHostPort(srv.Addr())
	if out, err := exec.Command("mariadb", "--protocol=tcp", "-h", host, "-P", port, "-uroot", "--skip-ssl", "-e", "SELECT 1").CombinedOutput(); err == nil {
		t.Fatalf("the server took a connection in clear: %s", out)
	}
	skip := "a=" + srv.DSN("a") + "?tls=skip-verify"
	verified := "b=" + srv.DSN("b") + ",ca=" + srv.CAFile()

	if _, stderr, code := run(t, nil, "prepare", "--tables", "2", "--table-size", "500", "--target", skip, "--target", verified); code != 0 {
		t.Fatalf("prepare: %s", stderr)
	}
	// One thread: what this test checks is the transport, and two
	// synthetic sessions on 500 rows can deadlock in replay (make test
	// met a 1213 once), which the count of errors below would blame on TLS.
	capDir := filepath.Join(t.TempDir(), "synth")
	if _, stderr, code := run(t, nil, "synth", "oltp_read_write", "--out", capDir, "--tables", "2", "--table-size", "500", "--threads", "1", "--events", "40"); code != 0 {
		t.Fatalf("synth: %s", stderr)
	}
	runDir := filepath.Join(t.TempDir(), "run")
	out, stderr, code := run(t, nil, "replay", capDir, "--run", runDir, "--json", "--metrics-addr", "off", "--target", skip, "--target", verified)
	if code != 0 {
		t.Fatalf("replay: %s", stderr)
	}
	var rep report.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	for _, x := range rep.Points[0].Targets {
		if x.Errors != 0 || x.Transactions != 40 || x.ConnectFailures != 0 || x.TLS == "" {
			t.Errorf("%s: %d transactions, errors %v, %d failed connects, TLS %q; want 40, none, none, a cipher", x.Name, x.Transactions, x.ErrorCodes, x.ConnectFailures, x.TLS)
		}
	}
	text, _, _ := run(t, nil, "report", runDir)
	if !strings.Contains(text, "connection") || !strings.Contains(text, "TLS ") {
		t.Errorf("the report does not say the targets ran TLS:\n%s", text)
	}
	if _, stderr, code := run(t, nil, "footprint", "--target", skip, "--target", verified, "--tables", "sbtest1"); code != 0 {
		t.Errorf("footprint: %s", stderr)
	}
	if _, stderr, code := run(t, nil, "sweep", capDir, "--threads", "1", "--duration", "1s", "--run", filepath.Join(t.TempDir(), "sweep"),
		"--metrics-addr", "off", "--target", skip); code != 0 {
		t.Errorf("sweep: %s", stderr)
	}

	// A shadow on the TLS-only server, behind a proxy in front of an
	// ordinary one.
	inno := sandboxtest.Server(t, "innodb")
	pdb, primary := inno.FreshDB(t)
	for _, q := range []string{"CREATE TABLE t (id INT PRIMARY KEY, v INT)", "INSERT INTO t VALUES (1, 0)"} {
		if _, err := pdb.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	sdb, err := sql.Open("mysql", srv.DSN("shadowed")+"?tls=skip-verify")
	if err != nil {
		t.Fatal(err)
	}
	defer sdb.Close()
	for _, q := range []string{"CREATE TABLE t (id INT PRIMARY KEY, v INT)", "INSERT INTO t VALUES (1, 0)"} {
		if _, err := sdb.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	r := startShadowProxy(t, inno.Addr(), primary, "--shadow", "copy="+srv.DSN("shadowed")+",ca="+srv.CAFile())
	_, lport, _ := net.SplitHostPort(r.listen)
	if out, err := exec.Command("mariadb", "--protocol=tcp", "-h", "127.0.0.1", "-P", lport, "-u", "root", "--skip-ssl", r.db,
		"-e", "UPDATE t SET v = v + 1 WHERE id = 1; SELECT v FROM t WHERE id = 1; SELECT COUNT(*) FROM t").CombinedOutput(); err != nil {
		t.Fatalf("through the proxy: %v: %s", err, out)
	}
	sh := r.stop("copy")["copy"]
	if sh.Errors != 0 || sh.VsCapture == nil || sh.VsCapture.Compared < 3 || sh.VsCapture.Total() != 0 || sh.TLS == "" {
		t.Errorf("shadow: errors %v, compared %+v, TLS %q", sh.ErrorCodes, sh.VsCapture, sh.TLS)
	}
	var v int
	if err := sdb.QueryRow("SELECT v FROM t WHERE id = 1").Scan(&v); err != nil || v != 1 {
		t.Errorf("the shadow's row: %d (%v), want 1", v, err)
	}
}
