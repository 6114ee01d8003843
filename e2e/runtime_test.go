// Package e2e holds end-to-end tests of whole user journeys through the
// real tandem binary, real MariaDB servers (a GTID primary with
// replicas) and real clients (sysbench). They run beside cmd/tandem's own
// tests (go test -p 2), being the longest.
package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tandemdb/tandem/internal/clitest"
	"github.com/tandemdb/tandem/report"
	"github.com/tandemdb/tandem/sandbox/sandboxtest"
	"github.com/tandemdb/tandem/store"
)

var tandemBin string

// TestMain builds the real binary once.
func TestMain(m *testing.M) { os.Exit(clitest.Main(m, "../cmd/tandem", &tandemBin)) }

// tandem runs the binary and fails the test unless it exits 0.
func tandem(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(tandemBin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	began := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("tandem %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errb.String())
	}
	if d := time.Since(began); d > 15*time.Second {
		t.Logf("tandem %s took %v:\n%s%s", strings.Join(args, " "), d, out.String(), errb.String())
	}
	return out.String()
}

func freeAddr(t *testing.T) string { return clitest.FreeAddr(t) }

func waitTCP(t *testing.T, addr string) { clitest.WaitTCP(t, addr) }

// The runtime capture's journey (#26), as a user on a production primary
// takes it: a proxy in the path relays sysbench oltp_read_write from 8
// threads, started without --capture; two captures are taken from it
// while sysbench runs, with 'tandem capture start' and 'stop'. Neither
// drops a client connection, every session enters each capture with its
// state (schema, prepared statements), and each capture, replayed onto a
// replica brought to its start point, gives 0 divergences outside what is
// counted apart and ends as production did at its end point.
//
// The default timeline is 15 s (captures at 2.25-6 s and 8.25-12 s, each
// of well over 10,000 statements, where 1,000 compared are asked for);
// TANDEM_E2E_SECONDS=60 runs the (10-25 s and 35-50 s).
func TestRuntimeCapturesUnderSysbench(t *testing.T) {
	if testing.Short() {
		t.Skip("needs MariaDB servers; skipped with -short")
	}
	sandboxtest.Server(t, "innodb") // fails the test (not skips) when MariaDB is not installed
	total := 15
	if s := os.Getenv("TANDEM_E2E_SECONDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 15 {
			t.Fatalf("TANDEM_E2E_SECONDS=%q: want a whole number of seconds, 15 or more", s)
		}
		total = n
	}
	at := func(frac float64) time.Duration { return time.Duration(frac * float64(total) * float64(time.Second)) }
	windows := [][2]time.Duration{{at(0.15), at(0.40)}, {at(0.55), at(0.80)}}
	if total == 60 {
		windows = [][2]time.Duration{{10 * time.Second, 25 * time.Second}, {35 * time.Second, 50 * time.Second}}
	}

	sbx := filepath.Join(t.TempDir(), "sandbox")
	tandem(t, "sandbox", "--dir", sbx, "up", "--topology", "replication")
	t.Cleanup(func() { exec.Command(tandemBin, "sandbox", "--dir", sbx, "down", "--purge").Run() })
	env := map[string]string{}
	for _, l := range strings.Split(tandem(t, "sandbox", "--dir", sbx, "env"), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			env[k] = strings.Trim(v, "'")
		}
	}
	dsn := func(p string) string { return env["TANDEM_"+p+"_DSN"] + "sbtest" }
	tandem(t, "prepare", "--tables", "4", "--table-size", "20000", "--target", "primary="+dsn("PRIMARY"))
	tandem(t, "sandbox", "--dir", sbx, "replicate", "--databases", "sbtest")
	// A replica aligned to a point no longer replicates: each capture has
	// a target at its start and a reference at its end of its own.
	innodb, rocks := "innodb="+dsn("REPLICA_INNODB"), "rocks="+dsn("REPLICA_ROCKSDB")
	refs := []string{"production=" + dsn("REFERENCE"), "production=" + dsn("REPLICA_ZSTD")}
	tandem(t, "align", "--hold", innodb, rocks, refs[0], refs[1])

	listen, admin := freeAddr(t), freeAddr(t)
	proxy := exec.Command(tandemBin, "proxy", "--listen", listen, "--backend", "127.0.0.1:"+env["TANDEM_PRIMARY_PORT"],
		"--binlog-user", "root", "--metrics-addr", admin)
	var proxyOut bytes.Buffer
	proxy.Stdout, proxy.Stderr = &proxyOut, &proxyOut
	if err := proxy.Start(); err != nil {
		t.Fatal(err)
	}
	defer proxy.Process.Kill()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("proxy's output:\n%s", proxyOut.String()) // its stop says which sessions were held or left in a command
		}
	})
	waitTCP(t, listen)
	_, lport, _ := strings.Cut(listen, ":")
	sb := exec.Command("sysbench", "oltp_read_write", "--db-driver=mysql", "--mysql-host=127.0.0.1", "--mysql-port="+lport, "--mysql-user=root",
		"--mysql-db=sbtest", "--tables=4", "--table-size=20000", "--threads=8", fmt.Sprintf("--time=%d", total), "--report-interval=0",
		"--mysql-ignore-errors=1213,1205", "run")
	var sbOut bytes.Buffer
	sb.Stdout, sb.Stderr = &sbOut, &sbOut
	began := time.Now()
	if err := sb.Start(); err != nil {
		t.Fatal(err)
	}
	caps := make([]string, len(windows))
	for i, w := range windows {
		caps[i] = filepath.Join(t.TempDir(), fmt.Sprintf("cap%d", i+1))
		time.Sleep(time.Until(began.Add(w[0])))
		tandem(t, "capture", "start", caps[i], "--proxy", admin, "--capture-results", "checksum")
		time.Sleep(time.Until(began.Add(w[1])))
		tandem(t, "capture", "stop", "--proxy", admin)
	}
	if err := sb.Wait(); err != nil {
		t.Fatalf("sysbench through the proxy: %v\n%s", err, sbOut.String())
	}
	proxy.Process.Signal(syscall.SIGINT)
	if err := proxy.Wait(); err != nil {
		t.Fatalf("proxy: %v\n%s", err, proxyOut.String())
	}
	// sysbench lost no connection: it counts reconnects, and the only
	// errors it may ignore are the server's deadlocks and lock waits.
	if m := regexp.MustCompile(`reconnects:\s+(\d+)`).FindStringSubmatch(sbOut.String()); m == nil || m[1] != "0" {
		t.Errorf("sysbench reconnects: %v\n%s", m, sbOut.String())
	}

	for i, capDir := range caps {
		var rep report.CaptureReport
		if err := json.Unmarshal([]byte(tandem(t, "inspect", capDir, "--json")), &rep); err != nil {
			t.Fatal(err)
		}
		sb := rep.SessionsBy
		if sb.OpenAtStart != 8 || sb.Connected != 0 || sb.OpenAtStop != 8 || rep.Start == nil || rep.End == nil {
			t.Errorf("capture %d: sessions %+v, points %v %v; want all 8 open at its start and at its stop", i+1, sb, rep.Start, rep.End)
		}
		// Each session begins in sbtest, with the statements sysbench
		// prepared at its connect.
		r, err := store.Open(capDir)
		if err != nil {
			t.Fatal(err)
		}
		prepared := map[uint64]int{}
		schema := map[uint64]string{}
		for rec, err := range r.Records() {
			if err != nil {
				t.Fatal(err)
			}
			if rec.Flags&store.FlagOpenAtStart == 0 {
				continue
			}
			switch rec.Kind {
			case store.KindConnect:
				schema[rec.Session] = rec.Schema
			case store.KindPrepare:
				prepared[rec.Session]++
			}
		}
		r.Close()
		for s, db := range schema {
			if db != "sbtest" || prepared[s] < 11 {
				t.Errorf("capture %d: session %d began in %q with %d prepared statements; want sbtest and sysbench's (11 or more)", i+1, s, db, prepared[s])
			}
		}

		// Onto a replica at the capture's start, production's end as
		// the reference; the transactions that wrote before their session
		// joined commit outside the capture and are applied from the
		// binary log where the server ran them.
		target, engine := innodb, ""
		if i == 1 {
			target, engine = rocks, ",engine=rocksdb"
		}
		tandem(t, "align", "--capture", capDir, target)
		tandem(t, "align", "--capture", capDir, "--end", refs[i])
		runDir := filepath.Join(t.TempDir(), fmt.Sprintf("run%d", i+1))
		tandem(t, "replay", capDir, "--speed", "0", "--metrics-addr", "off", "--run", runDir, "--apply-bypassed",
			"--target", target+engine, "--reference", refs[i])
		rr, err := report.Load(runDir)
		if err != nil {
			t.Fatal(err)
		}
		tg := rr.Points[0].Targets[0]
		vc := tg.VsCapture
		if vc == nil || vc.Total() != 0 || vc.Compared < 1000 {
			t.Errorf("capture %d on %s vs the capture: %+v; want 0 divergent of many compared\n%s", i+1, tg.Name, vc, tandem(t, "report", runDir))
		}
		if es := tg.EndState; es == nil || !es.SameAsReference {
			t.Errorf("capture %d on %s: end state %+v, want production's\n%s", i+1, tg.Name, es, tandem(t, "report", runDir))
		}
		t.Logf("capture %d: %d records, sessions %+v; on %s: %d compared, %d counted apart %v, %d synthetic; end state same as production",
			i+1, rep.Records, rep.SessionsBy, tg.Name, vc.Compared, vc.Ambiguous, vc.AmbiguousBy, vc.OpenAtStart)
	}
}
