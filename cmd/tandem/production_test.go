package main

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tandemdb/tandem/report"
	"github.com/tandemdb/tandem/sandbox/sandboxtest"
)

// The production path, run as a user would: an InnoDB primary with a
// binary log and GTIDs, replicas on InnoDB and MyRocks and a reference
// replica (tandem sandbox up --topology replication; sandbox replicate);
// replicas held before the capture; sysbench writing to the primary
// directly (bypassing the proxy) the whole time and through a proxy that
// captures with --binlog-user; then align, replay and the verdicts.
//
// Exact: every captured commit has its GTID (the proxied sysbench's
// transactions), the bypassed ones are exactly the rest of the binary
// log between the points, the replicas land exactly on the start point,
// a replica one transaction short is refused with both positions, a dump
// is placed exactly, the replay has 0 divergences between InnoDB and
// MyRocks, both end states equal the baseline's, and against
// production's end state every table that differs is one the bypassed
// writes changed.
func TestProductionPathWithStartAndEndPoints(t *testing.T) {
	if testing.Short() {
		t.Skip("needs MariaDB servers; skipped with -short")
	}
	t.Parallel()
	sandboxtest.Server(t, "innodb") // fails the test (not skips) when MariaDB is not installed
	sbx := filepath.Join(t.TempDir(), "sandbox")
	tandem := func(args ...string) string {
		t.Helper()
		out, stderr, code := run(t, nil, args...)
		if code != 0 {
			t.Fatalf("tandem %s: exit %d\n%s%s", strings.Join(args, " "), code, out, stderr)
		}
		return out
	}
	tandem("sandbox", "--dir", sbx, "up", "--topology", "replication")
	t.Cleanup(func() { run(t, nil, "sandbox", "--dir", sbx, "down", "--purge") })
	env := map[string]string{}
	for _, l := range strings.Split(tandem("sandbox", "--dir", sbx, "env"), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			env[k] = strings.Trim(v, "'")
		}
	}
	dsn := func(p string) string { return env["TANDEM_"+p+"_DSN"] + "sbtest" }
	port := func(p string) string { return env["TANDEM_"+p+"_PORT"] }
	// 10,000 rows a table: the writers through and around the proxy often
	// meet on a row. One run in four once met 887 releases, 297 s of
	// replay and a table differing unlabelled here, and the size went up
	// to 40,000 to step around it. Since the order gate reads the
	// bypassed writes' rows and place right (their row keys, unclocked
	// locks, the start point's stamp, the analyzer's literals), 8 runs of
	// 8 passed at 10,000.
	tandem("prepare", "--tables", "4", "--table-size", "10000", "--target", "primary="+dsn("PRIMARY"))
	tandem("sandbox", "--dir", sbx, "replicate", "--databases", "sbtest")
	replicas := []string{"innodb=" + dsn("REPLICA_INNODB"), "rocks=" + dsn("REPLICA_ROCKSDB"), "zstd=" + dsn("REPLICA_ZSTD"), "production=" + dsn("REFERENCE")}
	// A replica that applies the primary's changes is refused as a
	// target, even for a capture without a start point: its rows would
	// change under the replay. (It was replayed onto, writes mixed.)
	synthCap := filepath.Join(t.TempDir(), "synth")
	tandem("synth", "oltp_point_select", "--out", synthCap, "--tables", "4", "--table-size", "10000", "--events", "10")
	_, stderr, code := run(t, nil, "replay", synthCap, "--metrics-addr", "off", "--run", filepath.Join(t.TempDir(), "live"), "--target", replicas[0], "--target", "rocks="+dsn("REPLICA_ROCKSDB")+",engine=rocksdb")
	if want := "replay: target innodb is a replica applying the changes of 127.0.0.1:" + port("PRIMARY") + " as they come (its SQL thread runs)"; code != 1 || !strings.Contains(stderr, want) || !strings.Contains(stderr, "tandem align --capture DIR innodb=DSN") {
		t.Errorf("replay onto a replica that applies its primary's changes: exit %d, %q; want 1 and %q", code, stderr, want)
	}
	tandem(append([]string{"align", "--hold"}, replicas...)...)

	sysbench := func(port string, threads, seconds int) *exec.Cmd {
		c := exec.Command("sysbench", "oltp_read_write", "--db-driver=mysql", "--mysql-host=127.0.0.1", "--mysql-port="+port, "--mysql-user=root",
			"--mysql-db=sbtest", "--tables=4", "--table-size=10000", fmt.Sprintf("--threads=%d", threads), fmt.Sprintf("--time=%d", seconds), "--report-interval=0",
			"--mysql-ignore-errors=1213,1205", "run")
		return c
	}
	// The writer that bypasses the proxy runs before, during and after the capture.
	bypass := sysbench(port("PRIMARY"), 2, 7)
	var bypassOut strings.Builder
	bypass.Stdout = &bypassOut
	if err := bypass.Start(); err != nil {
		t.Fatal(err)
	}
	defer bypass.Wait()
	time.Sleep(time.Second)
	capDir := filepath.Join(t.TempDir(), "cap")
	listen := freeAddr(t)
	proxy := exec.Command(tandemBin, "proxy", "--listen", listen, "--backend", "127.0.0.1:"+port("PRIMARY"), "--capture", capDir, "--binlog-user", "root", "--metrics-addr", "off")
	var proxyOut strings.Builder
	proxy.Stdout, proxy.Stderr = &proxyOut, &proxyOut
	if err := proxy.Start(); err != nil {
		t.Fatal(err)
	}
	waitTCP(t, listen)
	_, lport, _ := strings.Cut(listen, ":")
	through := sysbench(lport, 8, 3)
	out, err := through.CombinedOutput()
	if err != nil {
		t.Fatalf("sysbench through the proxy: %v\n%s", err, out)
	}
	trx := regexp.MustCompile(`transactions:\s+(\d+)`).FindSubmatch(out)
	if trx == nil {
		t.Fatalf("no transaction count in sysbench's output:\n%s", out)
	}
	proxied, _ := strconv.Atoi(string(trx[1]))
	proxy.Process.Signal(syscall.SIGINT)
	if err := proxy.Wait(); err != nil {
		t.Fatalf("proxy: %v\n%s", err, proxyOut.String())
	}
	if err := bypass.Wait(); err != nil {
		t.Fatalf("bypassing sysbench: %v\n%s", err, bypassOut.String())
	}

	var rep report.CaptureReport
	if err := json.Unmarshal([]byte(tandem("inspect", capDir, "--json")), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Start == nil || rep.End == nil || rep.Bypassed == nil {
		t.Fatalf("capture points missing: start %v end %v bypassed %v\n%s", rep.Start, rep.End, rep.Bypassed, proxyOut.String())
	}
	seq := func(pos string) int {
		n, err := strconv.Atoi(pos[strings.LastIndex(pos, "-")+1:])
		if err != nil || !strings.HasPrefix(pos, "0-1-") {
			t.Fatalf("position %q: want 0-1-N", pos)
		}
		return n
	}
	start, end := seq(rep.Start.GTID), seq(rep.End.GTID)
	if int(rep.Commits) != proxied {
		t.Errorf("captured commits with a GTID: %d, want sysbench's %d transactions through the proxy", rep.Commits, proxied)
	}
	if got, want := rep.Bypassed.Transactions, end-start-proxied; got != want || want <= 0 || rep.Bypassed.Error != "" {
		t.Errorf("bypassed transactions %d, want %d (end %d - start %d - proxied %d); error %q", got, want, end, start, proxied, rep.Bypassed.Error)
	}
	if names := func() (n []string) {
		for _, b := range rep.Bypassed.Tables {
			n = append(n, b.Table)
		}
		return n
	}(); strings.Join(names, ",") != "sbtest.sbtest1,sbtest.sbtest2,sbtest.sbtest3,sbtest.sbtest4" {
		t.Errorf("bypassed tables %v, want sbtest.sbtest1 to 4", names)
	}

	// A dump taken now is past the start by exactly the transactions since.
	dump := filepath.Join(t.TempDir(), "dump.sql")
	dout, err := exec.Command("mariadb-dump", "--no-defaults", "-h127.0.0.1", "-P"+port("PRIMARY"), "-uroot", "--single-transaction", "--gtid", "--master-data=2", "--databases", "sbtest").Output()
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(dump, dout, 0o644)
	now := primaryPos(t, dsn("PRIMARY"))
	_, stderr, code = run(t, nil, "align", "--capture", capDir, "--dump", dump)
	if want := fmt.Sprintf("was taken at %s, %d transactions ahead of the capture's start point %s", now, seq(now)-start, rep.Start.GTID); code != 1 || !strings.Contains(stderr, want) {
		t.Errorf("align --dump: exit %d, %q; want 1 and %q", code, stderr, want)
	}

	// One replica one transaction short of the start is refused by replay
	// with both positions.
	short := fmt.Sprintf("0-1-%d", start-1)
	shortDB, _ := sql.Open("mysql", dsn("REPLICA_INNODB"))
	defer shortDB.Close()
	if _, err := shortDB.Exec("STOP SLAVE"); err != nil {
		t.Fatal(err)
	}
	if _, err := shortDB.Exec("START SLAVE UNTIL master_gtid_pos='" + short + "'"); err != nil {
		t.Fatal(err)
	}
	var waited int
	if err := shortDB.QueryRow("SELECT MASTER_GTID_WAIT(?, 60)", short).Scan(&waited); err != nil || waited != 0 {
		t.Fatalf("innodb replica to %s: %d %v", short, waited, err)
	}
	out2 := tandem("align", "--capture", capDir, replicas[1], replicas[2])
	for _, name := range []string{"rocks", "zstd"} {
		if want := fmt.Sprintf("%s: at the capture's start point %s", name, rep.Start.GTID); !strings.Contains(out2, want) {
			t.Errorf("align: %q lacks %q", out2, want)
		}
	}
	if out := tandem("align", "--capture", capDir, "--end", replicas[3]); !strings.Contains(out, "production: at the capture's end point "+rep.End.GTID) {
		t.Errorf("align --end: %q", out)
	}
	runDir := filepath.Join(t.TempDir(), "run")
	_, stderr, code = run(t, nil, "replay", capDir, "--speed", "0", "--metrics-addr", "off", "--run", runDir,
		"--target", "rocks="+dsn("REPLICA_ROCKSDB")+",engine=rocksdb", "--target", replicas[0])
	if want := fmt.Sprintf("innodb is at %s, 1 transaction behind the capture's start %s", short, rep.Start.GTID); code != 1 || !strings.Contains(stderr, want) || !strings.Contains(stderr, "tandem align --capture") {
		t.Errorf("replay onto a replica one transaction short: exit %d, %q; want 1 and %q", code, stderr, want)
	}

	tandem("replay", capDir, "--speed", "0", "--metrics-addr", "off", "--run", runDir,
		"--target", "rocks="+dsn("REPLICA_ROCKSDB")+",engine=rocksdb", "--target", "zstd="+dsn("REPLICA_ZSTD")+",engine=rocksdb", "--reference", replicas[3])
	r, err := report.Load(runDir)
	if err != nil {
		t.Fatal(err)
	}
	ts := r.Points[0].Targets
	for _, tg := range ts {
		if !tg.Aligned || tg.Position != rep.Start.GTID {
			t.Errorf("%s: aligned %v at %q, want at %s", tg.Name, tg.Aligned, tg.Position, rep.Start.GTID)
		}
		es := tg.EndState
		if es == nil || es.Reference != "production" || es.ReferenceError != "" {
			t.Fatalf("%s: end state %+v", tg.Name, es)
		}
		for _, tab := range es.Tables {
			if tab.VsReference && tab.Bypassed == "" {
				t.Errorf("%s: %s differs from production with no bypassed write to explain it", tg.Name, tab.Table)
			}
		}
	}
	if d := ts[1].VsBaseline; d == nil || d.Total() != 0 || d.Compared == 0 {
		t.Errorf("zstd vs rocks: %+v, want 0 divergent of many compared", d)
	}
	if es := ts[1].EndState; !es.Same {
		t.Errorf("zstd end state differs from rocks': %+v", es.Tables)
	}
	if d := ts[0].VsCapture; d == nil || d.Total() != 0 {
		t.Errorf("rocks vs the capture: %+v, want 0 divergent", d)
	}
	// A target replayed onto once is no start state any more, though its
	// GTID position has not moved: a second replay and align refuse it.
	_, stderr, code = run(t, nil, "replay", capDir, "--speed", "0", "--metrics-addr", "off", "--run", filepath.Join(t.TempDir(), "again"),
		"--target", "rocks="+dsn("REPLICA_ROCKSDB")+",engine=rocksdb")
	if code != 1 || !strings.Contains(stderr, "rocks was replayed onto before (run ") || !strings.Contains(stderr, "seed it again") {
		t.Errorf("a second replay onto rocks: exit %d, %q; want 1, 'was replayed onto before'", code, stderr)
	}
	if _, stderr, code := run(t, nil, "align", "--capture", capDir, "rocks="+dsn("REPLICA_ROCKSDB")); code != 1 || !strings.Contains(stderr, "replayed "+capDir+" (start point "+rep.Start.GTID+") onto it") {
		t.Errorf("align of a replayed target: exit %d, %q", code, stderr)
	}

	// The replica one transaction short, aligned now, replayed with the
	// bypassed writes applied where the server ran them: its end state is
	// production's, and nothing differs from the capture.
	if out := tandem("align", "--capture", capDir, replicas[0]); !strings.Contains(out, "applied 1 transactions") {
		t.Errorf("align innodb from one short: %q", out)
	}
	applied := filepath.Join(t.TempDir(), "applied")
	tandem("replay", capDir, "--speed", "0", "--metrics-addr", "off", "--run", applied, "--apply-bypassed",
		"--target", replicas[0], "--reference", replicas[3])
	ra, err := report.Load(applied)
	if err != nil {
		t.Fatal(err)
	}
	za := ra.Points[0].Targets[0]
	if za.EndState == nil || !za.EndState.SameAsReference {
		t.Errorf("innodb with --apply-bypassed: end state %+v, want same as production\n%s", za.EndState, tandem("report", applied))
	}
	if d := za.VsCapture; d == nil || d.Total() != 0 || d.AmbiguousBy["bypassed-write"] != 0 {
		t.Errorf("innodb with --apply-bypassed vs the capture: %+v, want 0 divergent and none after a bypassed write", d)
	}
	if !slices.ContainsFunc(ra.Notes, func(n string) bool {
		return strings.Contains(n, fmt.Sprintf("applied the %d transactions", rep.Bypassed.Transactions))
	}) {
		t.Errorf("notes %q lack the applied bypassed transactions", ra.Notes)
	}
	// A replica as a shadow: seeded again, held and aligned by the proxy
	// itself before the first client, then fed as any shadow.
	tandem("sandbox", "--dir", sbx, "replicate", "--databases", "sbtest", "replica-innodb")
	shadowCap := filepath.Join(t.TempDir(), "shadowcap")
	// Without --shadow-replicas, the live replica is refused as a shadow
	// before the capture is made: it would apply the primary's changes
	// and the shadow's replay of them too.
	_, stderr, code = runRefused(t, "proxy", "--listen", freeAddr(t), "--backend", "127.0.0.1:"+port("PRIMARY"), "--capture", shadowCap, "--metrics-addr", "off", "--shadow", replicas[0])
	if want := "shadow innodb is a replica applying the changes of 127.0.0.1:" + port("PRIMARY") + " as they come"; code != 1 || !strings.Contains(stderr, want) || !strings.Contains(stderr, "give --shadow-replicas") {
		t.Errorf("proxy --shadow on a live replica: exit %d, %q; want 1 and %q", code, stderr, want)
	}
	if _, err := os.Stat(shadowCap); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused proxy left %s: %v", shadowCap, err)
	}
	listen2 := freeAddr(t)
	sp := exec.Command(tandemBin, "proxy", "--listen", listen2, "--backend", "127.0.0.1:"+port("PRIMARY"), "--capture", shadowCap, "--binlog-user", "root",
		"--metrics-addr", "off", "--shadow-replicas", "--shadow", replicas[0], "--log-level", "warn")
	var spOut strings.Builder
	sp.Stdout, sp.Stderr = &spOut, &spOut
	if err := sp.Start(); err != nil {
		t.Fatal(err)
	}
	waitTCP(t, listen2)
	_, lport2, _ := strings.Cut(listen2, ":")
	sb := sysbench(lport2, 4, 2)
	sb.Args = append(sb.Args[:len(sb.Args)-1], "--rate=50", "run")
	var sbOut bytes.Buffer
	sb.Stdout, sb.Stderr = &sbOut, &sbOut
	if err := sb.Start(); err != nil {
		t.Fatal(err)
	}
	// A write around the proxy while the shadow runs: one row in every
	// hundred of sbtest1 (100 rows), so that every later range read of it
	// through the proxy (100 rows) sees one the shadow never got. Those answers
	// differ on the shadow; its final comparison counts them apart.
	time.Sleep(700 * time.Millisecond)
	primary, err := sql.Open("mysql", dsn("PRIMARY"))
	if err != nil {
		t.Fatal(err)
	}
	defer primary.Close()
	if _, err := primary.Exec("UPDATE sbtest1 SET c = 'written around the proxy' WHERE id % 100 = 0"); err != nil {
		t.Fatal(err)
	}
	if err := sb.Wait(); err != nil {
		t.Fatalf("sysbench through the shadowing proxy: %v\n%s", err, sbOut.String())
	}
	sp.Process.Signal(syscall.SIGINT)
	if err := sp.Wait(); err != nil {
		t.Fatalf("shadowing proxy: %v\n%s", err, spOut.String())
	}
	for _, want := range []string{"tandem proxy: shadow innodb at the capture's start point 0-1-", "shadow innodb: ", "divergent none",
		"1 transactions (100 rows) bypassed the proxy on sbtest.sbtest1"} {
		if !strings.Contains(spOut.String(), want) {
			t.Errorf("shadowing proxy's output lacks %q:\n%s", want, spOut.String())
		}
	}
	shadowRun, err := report.Load(shadowCap + ".shadows/innodb")
	if err != nil {
		t.Fatal(err)
	}
	if vc := shadowRun.Points[0].Targets[0].VsCapture; vc == nil || vc.Total() != 0 || vc.AmbiguousBy["bypassed-write"] == 0 {
		t.Errorf("the shadow vs the primary: %+v; want 0 divergent, and the range reads of sbtest1 after the write around the proxy counted apart (bypassed-write)", vc)
	} else if m := regexp.MustCompile(`shadow innodb: \d+ compared with the primary, divergent none, counted apart [^;]*bypassed-write=(\d+)`).FindStringSubmatch(spOut.String()); m == nil || m[1] != strconv.FormatInt(vc.AmbiguousBy["bypassed-write"], 10) {
		t.Errorf("the shadow's last line says %v bypassed-write, its report %d:\n%s", m, vc.AmbiguousBy["bypassed-write"], spOut.String())
	}
	text := tandem("report", runDir)
	for _, want := range []string{"at capture start", "4 of 4 differ (4 by bypassed writes)", "transactions that bypassed the proxy changed"} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q:\n%s", want, text)
		}
	}
}

func primaryPos(t *testing.T, dsn string) string {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var pos string
	if err := db.QueryRow("SELECT @@gtid_binlog_pos").Scan(&pos); err != nil {
		t.Fatal(err)
	}
	return pos
}
