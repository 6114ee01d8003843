package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tandemdb/tandem/report"
	"github.com/tandemdb/tandem/store"
)

// go-sql-driver/mysql's own test suite (the version in go.mod, from the
// module cache) is a client nobody here wrote. Through `tandem proxy`,
// capturing with checksums and with TLS on both sides, it gives the same
// result per test as directly against the same server, TLS tests
// included. Its capture, replayed at --speed 1 onto two fresh identical
// servers, has no divergence between them, no error the capture did not
// have, and no difference from the captured responses except those the
// replay labels itself: statements after a write it could not run (LOAD
// DATA LOCAL, statements cut to the capture's size limit), which are
// counted apart.
//
// TestConnectorReturnsTimeout dials 1.1.1.1; it is always skipped: only
// loopback is ever a target.
func TestGoSQLDriverSuiteThroughProxyAndReplay(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go-sql-driver's test suite twice and replays it; skipped with -short")
	}
	t.Parallel()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/go-sql-driver/mysql").Output()
	src := strings.TrimSpace(string(out))
	if err != nil || src == "" {
		t.Fatalf("go-sql-driver's source is not in the module cache (go mod download): %v", err)
	}
	// The suite is built once and run on two servers at once: directly
	// on one, through the proxy on the other (the suite's TestConcurrent
	// opens as many connections as its server allows, so the two runs
	// cannot share one). Two more fresh servers take the replay. All
	// four start while the suite builds.
	suiteBin := filepath.Join(t.TempDir(), "mysql.test")
	build := exec.Command("go", "test", "-c", "-o", suiteBin, ".")
	build.Dir = src
	build.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	built := make(chan error, 1)
	go func() {
		if out, err := build.CombinedOutput(); err != nil {
			built <- fmt.Errorf("building go-sql-driver's suite: %v\n%s", err, out)
			return
		}
		built <- nil
	}()
	// The suite's TestConcurrent opens as many connections as the
	// sandbox server allows (151); replayed, a connection's close can
	// reach a target after the next one's open, so the replay's targets
	// allow more (a 1040 there was the replay's, not the engine's: seen
	// under load).
	servers := ownServers(t, [][]string{nil, nil, {"--max-connections=1000"}, {"--max-connections=1000"}})
	direct, srv := servers[0], servers[1]
	if err := <-built; err != nil {
		t.Fatal(err)
	}

	type result struct{ pass, fail, skip []string }
	suite := func(addr, dbname string) (result, error) {
		cmd := exec.Command("go", "tool", "test2json", suiteBin, "-test.v=test2json", "-test.count=1", "-test.skip", "^TestConnectorReturnsTimeout$")
		cmd.Dir = src
		cmd.Env = append(os.Environ(), "MYSQL_TEST_USER=root", "MYSQL_TEST_PASS=", "MYSQL_TEST_PROT=tcp",
			"MYSQL_TEST_ADDR="+addr, "MYSQL_TEST_DBNAME="+dbname)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		_ = cmd.Run() // a failing test is a result; the events say which
		var r result
		sc := bufio.NewScanner(&stdout)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			var ev struct{ Action, Test string }
			if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Test == "" {
				continue
			}
			switch ev.Action {
			case "pass":
				r.pass = append(r.pass, ev.Test)
			case "fail":
				r.fail = append(r.fail, ev.Test)
			case "skip":
				r.skip = append(r.skip, ev.Test)
			}
		}
		if len(r.pass) == 0 {
			return r, fmt.Errorf("go-sql-driver's suite against %s ran no test: %s", addr, stderr.String())
		}
		for _, s := range [][]string{r.pass, r.fail, r.skip} {
			slices.Sort(s)
		}
		return r, nil
	}
	const db = "driversuite"
	for _, s := range servers {
		rootSQL(t, s.Port, "CREATE DATABASE "+db)
	}

	dir := t.TempDir()
	capDir := filepath.Join(dir, "capture")
	listen := freeAddr(t)
	p, _ := startProc(t, tandemBin, "proxy", "--listen", listen, "--backend", srv.Addr(), "--capture", capDir, "--capture-results", "checksum",
		"--tls-cert", srv.CertFile(), "--tls-key", srv.KeyFile(), "--backend-tls", "--backend-ca", srv.CAFile(), "--metrics-addr", "off")
	waitTCP(t, listen)
	var want result
	var wantErr error
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		want, wantErr = suite(direct.Addr(), db)
	}()
	got, gotErr := suite(listen, db)
	<-ran
	if err := errors.Join(wantErr, gotErr); err != nil {
		t.Fatal(err)
	}
	p.Process.Signal(os.Interrupt)
	if err := p.Wait(); err != nil {
		t.Fatalf("proxy: %v", err)
	}
	if len(want.fail) != 0 {
		t.Errorf("directly, go-sql-driver's suite failed %v (the sandbox should pass it all)", want.fail)
	}
	for _, c := range []struct {
		what      string
		got, want []string
	}{{"passed", got.pass, want.pass}, {"failed", got.fail, want.fail}, {"skipped", got.skip, want.skip}} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("through the proxy %d tests %s, directly %d: only through the proxy %v, only directly %v", len(c.got), c.what, len(c.want),
				minus(c.got, c.want), minus(c.want, c.got))
		}
	}
	if !slices.Contains(got.pass, "TestTLS") {
		t.Errorf("TestTLS did not pass through the proxy")
	}
	t.Logf("go-sql-driver suite: %d passed, %d failed, %d skipped, directly and through the proxy alike", len(got.pass), len(got.fail), len(got.skip))

	// The capture, replayed onto two fresh identical servers, each with
	// the (empty) database the suite used.
	targets := []string{"--speed", "1"}
	for i, name := range []string{"a", "b"} {
		targets = append(targets, "--target", name+"="+servers[2+i].DSN(db))
	}
	rep := replayJSON(t, capDir, targets...)
	a, b := rep.Points[0].Targets[0], rep.Points[0].Targets[1]
	if b.VsBaseline.Total() != 0 || b.VsBaseline.Ambiguous != 0 || b.VsBaseline.Missing != 0 || b.VsBaseline.Extra != 0 {
		t.Errorf("b differs from a: %v, %d ambiguous, %d missing, %d extra; samples %+v", b.VsBaseline.ByClass, b.VsBaseline.Ambiguous,
			b.VsBaseline.Missing, b.VsBaseline.Extra, b.VsBaseline.Samples)
	}
	if !maps.Equal(a.ErrorCodes, b.ErrorCodes) {
		t.Errorf("errors: a %v, b %v", a.ErrorCodes, b.ErrorCodes)
	}
	for _, tg := range []report.Target{a, b} {
		vc := tg.VsCapture
		if tg.ConnectFailures != 0 {
			t.Errorf("%s: %d connections failed", tg.Name, tg.ConnectFailures)
		}
		// Every error the targets gave, the capture had on the same
		// statement: no error-vs-ok or error-code divergence.
		if vc == nil || vc.Total() != 0 || vc.Ambiguous != vc.AmbiguousBy["not-replayed"] {
			t.Errorf("%s differs from the capture: %+v", tg.Name, vc)
			continue
		}
		for reason := range tg.SkippedBy {
			if reason != store.SkipReasonText(store.SkipNotReplayable) && reason != store.SkipReasonText(store.SkipTruncated) {
				t.Errorf("%s: skipped for %q (%v)", tg.Name, reason, tg.SkippedBy)
			}
		}
		t.Logf("%s: %d compared with the capture, %d nondeterministic, %d after a skipped write; errors %v (all as captured); skipped %v",
			tg.Name, vc.Compared, vc.Nondeterministic, vc.Ambiguous, tg.ErrorCodes, tg.SkippedBy)
	}
}

// minus is what a holds that b does not.
func minus(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}
