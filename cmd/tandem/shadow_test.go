package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	driver "github.com/go-sql-driver/mysql"
	"github.com/tandemdb/tandem/report"
	"github.com/tandemdb/tandem/sandbox"
	"github.com/tandemdb/tandem/sandbox/sandboxtest"
)

// shadowRun is a tandem proxy with shadows, serving sysbench.
type shadowRun struct {
	t       *testing.T
	p       *exec.Cmd
	listen  string
	metrics string
	capDir  string
	out     *syncWriter
	logs    *syncWriter
	db      string // the primary's database
	common  []string
}

// loadSbtest loads the same sysbench tables into every DSN (tandem prepare).
func loadSbtest(t *testing.T, tables, size int, dsns ...string) {
	t.Helper()
	args := []string{"prepare", "--tables", fmt.Sprint(tables), "--table-size", fmt.Sprint(size)}
	for i, d := range dsns {
		args = append(args, "--target", fmt.Sprintf("t%d=%s", i, d))
	}
	if _, stderr, code := run(t, nil, args...); code != 0 {
		t.Fatalf("prepare: %s", stderr)
	}
}

// sbtestCopies makes two fresh databases on the InnoDB sandbox server, a
// primary and its copy, with the same sysbench tables, and returns the
// server and their DSNs.
func sbtestCopies(t *testing.T, tables, size int) (*sandboxtest.Handle, string, string) {
	t.Helper()
	inno := sandboxtest.Server(t, "innodb")
	_, primary := inno.FreshDB(t)
	_, cp := inno.FreshDB(t)
	loadSbtest(t, tables, size, primary, cp)
	return inno, primary, cp
}

func startShadowProxy(t *testing.T, backend, primaryDSN string, flags ...string) *shadowRun {
	t.Helper()
	c, _ := driver.ParseDSN(primaryDSN)
	r := &shadowRun{t: t, listen: freeAddr(t), metrics: freeAddr(t), capDir: filepath.Join(t.TempDir(), "capture"), db: c.DBName,
		out: &syncWriter{w: &strings.Builder{}}, logs: &syncWriter{w: &strings.Builder{}}}
	args := append([]string{"proxy", "--listen", r.listen, "--backend", backend, "--capture", r.capDir, "--metrics-addr", r.metrics, "--shadow-status-interval", "1s"}, flags...)
	r.p = exec.Command(tandemBin, args...)
	r.p.Stdout, r.p.Stderr = r.out, r.logs
	if err := r.p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r.p.Process.Kill()
		r.p.Wait()
		if t.Failed() {
			t.Logf("proxy stdout:\n%s\nproxy log:\n%s", r.out.w.(*strings.Builder).String(), r.logs.w.(*strings.Builder).String())
		}
	})
	waitTCP(t, r.listen)
	_, port, _ := net.SplitHostPort(r.listen)
	r.common = []string{"oltp_read_write", "--db-driver=mysql", "--mysql-host=127.0.0.1", "--mysql-port=" + port, "--mysql-user=root", "--mysql-db=" + r.db}
	return r
}

// sysbench runs through the proxy and returns its transactions, failing
// the test on any client error or reconnect.
func (r *shadowRun) sysbench(args ...string) int {
	r.t.Helper()
	out, err := exec.Command("sysbench", append(append(r.common, args...), "--report-interval=0", "run")...).CombinedOutput()
	if err != nil {
		r.t.Fatalf("sysbench through the proxy: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`transactions:\s+(\d+)`).FindSubmatch(out)
	rc := regexp.MustCompile(`reconnects:\s+(\d+)`).FindSubmatch(out)
	if m == nil || rc == nil || string(rc[1]) != "0" {
		r.t.Fatalf("sysbench: %s", out)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// metric reads one series of the proxy's /metrics ("" if absent).
func (r *shadowRun) metric(name string) string {
	resp, err := http.Get("http://" + r.metrics + "/metrics")
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return v
		}
	}
	return ""
}

func (r *shadowRun) metricFloat(name string) float64 {
	v, _ := strconv.ParseFloat(r.metric(name), 64)
	return v
}

// stop ends the proxy (the shadows replay what the capture holds first)
// and returns each shadow's report.
func (r *shadowRun) stop(names ...string) map[string]report.Target {
	r.t.Helper()
	r.p.Process.Signal(os.Interrupt)
	if err := r.p.Wait(); err != nil {
		r.t.Fatalf("proxy: %v", err)
	}
	reps := map[string]report.Target{}
	for _, n := range names {
		out, stderr, code := run(r.t, nil, "report", r.capDir+".shadows/"+n, "--format", "json")
		if code != 0 {
			r.t.Fatalf("report of shadow %s: %s", n, stderr)
		}
		var rep report.Report
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			r.t.Fatal(err)
		}
		reps[n] = rep.Points[0].Targets[0]
	}
	return reps
}

// primaryAndCopy makes two fresh databases on the InnoDB sandbox server,
// a primary and its shadow's copy, runs stmts on both, and returns the
// server and each one's handle and DSN.
func primaryAndCopy(t *testing.T, stmts ...string) (inno *sandboxtest.Handle, pconn, sconn *sql.DB, primary, cp string) {
	t.Helper()
	inno = sandboxtest.Server(t, "innodb")
	pconn, primary = inno.FreshDB(t)
	sconn, cp = inno.FreshDB(t)
	for _, db := range []*sql.DB{pconn, sconn} {
		for _, q := range stmts {
			if _, err := db.Exec(q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}
	return inno, pconn, sconn, primary, cp
}

// mariadb runs sql with the mariadb CLI through the proxy, in the
// primary's database.
func (r *shadowRun) mariadb(sql string) {
	r.t.Helper()
	_, port, _ := net.SplitHostPort(r.listen)
	if out, err := exec.Command("mariadb", "--protocol=tcp", "-h", "127.0.0.1", "-P", port, "-u", "root", "--skip-ssl", r.db, "-e", sql).CombinedOutput(); err != nil {
		r.t.Fatalf("through the proxy: %v: %s", err, out)
	}
}

// checksums is CHECKSUM TABLE of the sysbench tables of a DSN's database.
func checksums(t *testing.T, dsn string, tables int) string {
	t.Helper()
	c, _ := driver.ParseDSN(dsn)
	host, port, _ := net.SplitHostPort(c.Addr)
	var names []string
	for i := 1; i <= tables; i++ {
		names = append(names, fmt.Sprintf("%s.sbtest%d", c.DBName, i))
	}
	out, err := exec.Command("mariadb", "--protocol=tcp", "-h", host, "-P", port, "-u", "root", "--skip-ssl", "-N", "-e", "CHECKSUM TABLE "+strings.Join(names, ", ")).CombinedOutput()
	if err != nil {
		t.Fatalf("checksum: %v: %s", err, out)
	}
	var sums []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if f := strings.Fields(l); len(f) == 2 {
			sums = append(sums, f[1])
		}
	}
	return strings.Join(sums, " ")
}

// sysbench oltp_read_write, 8 threads, through the proxy with two
// shadows: an identical InnoDB copy and a MyRocks copy. The clients see
// nothing of them. The copy has 0 divergences outside those counted apart
// and ends in the primary's state; the MyRocks shadow's latency is
// measured per class, and its divergences are only where the engines
// differ.
func TestShadowsCompareLiveTraffic(t *testing.T) {
	if testing.Short() {
		t.Skip("needs MariaDB and sysbench; skipped with -short")
	}
	t.Parallel()
	inno, rocks := sandboxtest.Server(t, "innodb"), sandboxtest.Server(t, "rocksdb")
	_, primary := inno.FreshDB(t)
	_, cp := inno.FreshDB(t)
	_, rk := rocks.FreshDB(t)
	loadSbtest(t, 4, 10000, primary, cp, rk+",engine=rocksdb")
	r := startShadowProxy(t, inno.Addr(), primary, "--shadow", "copy="+cp, "--shadow", "rocks="+rk+",engine=rocksdb")
	// A steady rate the shadows keep up with on this machine's two CPUs,
	// which the two shadows' servers share with the primary.
	n := r.sysbench("--tables=4", "--table-size=10000", "--threads=8", "--time=15", "--rate=40")
	if up := r.metric(`tandem_shadow_up{shadow="copy"}`); up != "1" {
		t.Errorf("copy shadow up = %q", up)
	}
	if c := r.metricFloat(`tandem_shadow_compared_total{shadow="rocks"}`); c == 0 {
		t.Errorf("the MyRocks shadow compared nothing while sysbench ran")
	}
	reps := r.stop("copy", "rocks")
	cpRep, rkRep := reps["copy"], reps["rocks"]
	if d := cpRep.VsCapture; d == nil || d.Compared < int64(n)*18 || d.Total() != 0 || cpRep.Errors != 0 {
		t.Errorf("copy vs the primary: %+v, %d errors %v (sysbench: %d transactions)", d, cpRep.Errors, cpRep.ErrorCodes, n)
	}
	if a, b := checksums(t, primary, 4), checksums(t, cp, 4); a != b {
		t.Errorf("end states differ: primary %s, copy %s", a, b)
	}
	// A capture made with shadows is an ordinary capture: it replays.
	again := replayJSON(t, r.capDir, "--speed", "0", "--target", "again="+inno.DSN(r.db))
	if tg := again.Points[0].Targets[0]; tg.VsCapture == nil || tg.VsCapture.Compared != cpRep.VsCapture.Compared {
		t.Errorf("replaying the shadows' capture afterwards: %+v", tg.VsCapture)
	}
	for _, tg := range []report.Target{cpRep, rkRep} {
		for _, class := range []string{"read", "write", "other"} {
			if l, ok := tg.ByClass[class]; !ok || l.Count == 0 {
				t.Errorf("%s: no %s latency (%v)", tg.Name, class, tg.ByClass)
			}
		}
	}
	// MyRocks against InnoDB, on the same statements in the same order:
	// - errors: only 1213, MyRocks' snapshot conflict where InnoDB waits
	//   for the row lock; the client's handling is replayed (the
	//   transaction retried), so each is the engine's behaviour, counted;
	// - the retried transaction runs on later data: its outcomes and the
	//   reads that overlapped it are counted apart (retried, commit-overlap);
	// - a transaction whose retries all hit 1213 again is lost on the
	//   shadow: later differences on the tables it wrote are counted apart
	//   (not-replayed; TestShadowFailedWriteCountsLaterReadsApart);
	// - so row content, row counts and affected rows may differ only on
	//   statements touched by a retry: at most as many as the 1213s times
	//   a transaction's 18 statements; never error-vs-ok or error-code.
	rv := rkRep.VsCapture
	for code := range rkRep.ErrorCodes {
		if code != "1213" {
			t.Errorf("MyRocks shadow: error %s (all %v); only 1213 snapshot conflicts are the engine's", code, rkRep.ErrorCodes)
		}
	}
	for class, k := range rv.ByClass {
		if k != 0 && class != "row-content" && class != "row-count" && class != "affected-rows" {
			t.Errorf("MyRocks shadow: %d %s divergences (%v)", k, class, rv.ByClass)
		}
	}
	if rv.Total() > 18*rkRep.ErrorCodes["1213"] {
		t.Errorf("MyRocks shadow: %d divergences for %d snapshot conflicts: %+v", rv.Total(), rkRep.ErrorCodes["1213"], rv.Samples)
	}
	// Latency against the primary's, per class: in each status line (since
	// the last) and in each shadow's closing line (in all).
	logs, out := r.logs.w.(*strings.Builder).String(), r.out.w.(*strings.Builder).String()
	ratio := `read [0-9.]+[µm]?s/[0-9.]+[µm]?s=[0-9]+\.[0-9]{2}x, write [0-9.]+[µm]?s/[0-9.]+[µm]?s=[0-9]+\.[0-9]{2}x`
	for _, n := range []string{"copy", "rocks"} {
		if !regexp.MustCompile(`msg="shadow status" shadow=` + n + ` .* p95_vs_primary="other [^"]*` + ratio).MatchString(logs) {
			t.Errorf("no status line of %s gives its p95 latency against the primary's per class", n)
		}
		if !regexp.MustCompile(`tandem proxy: shadow ` + n + `: .*; p95 vs the primary other [^;]*` + ratio + `; tandem report`).MatchString(out) {
			t.Errorf("%s's closing line lacks its p95 latency against the primary's:\n%s", n, out)
		}
	}
	t.Logf("sysbench %d transactions; copy: %d compared, ambiguous %v; rocks: %d compared, divergent %v, ambiguous %v, errors %v; p95 ms read/write: copy %.2f/%.2f, rocks %.2f/%.2f",
		n, cpRep.VsCapture.Compared, cpRep.VsCapture.AmbiguousBy, rv.Compared, rv.ByClass, rv.AmbiguousBy, rkRep.ErrorCodes,
		cpRep.ByClass["read"].P95, cpRep.ByClass["write"].P95, rkRep.ByClass["read"].P95, rkRep.ByClass["write"].P95)
}

// A shadow whose server goes away mid-run — killed and restarted, or
// stopped (SIGSTOP: it answers nothing) and continued: the clients'
// sysbench finishes with 0 errors; the shadow shows down, waits, probing,
// and once its server answers again catches up from the capture (lag
// under a second). Before, a hung shadow was failed for good.
func TestShadowDownThenBackCatchesUp(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and stops MariaDB servers; skipped with -short")
	}
	t.Parallel()
	inno := sandboxtest.Server(t, "innodb")
	for _, c := range []struct {
		name       string
		down, back func(t *testing.T, srv sandbox.Server, restart sandbox.Config)
	}{
		{"killed", func(t *testing.T, srv sandbox.Server, _ sandbox.Config) {
			if err := syscall.Kill(srv.PID, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, _ sandbox.Server, restart sandbox.Config) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if _, err := sandbox.Up(ctx, restart); err != nil {
				t.Fatalf("restart the shadow's server: %v", err)
			}
		}},
		{"stopped", func(t *testing.T, srv sandbox.Server, _ sandbox.Config) {
			if err := syscall.Kill(srv.PID, syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { syscall.Kill(srv.PID, syscall.SIGCONT) })
		}, func(t *testing.T, srv sandbox.Server, _ sandbox.Config) {
			syscall.Kill(srv.PID, syscall.SIGCONT)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, primary := inno.FreshDB(t)
			shadowSrv, restart := ownServer(t)
			rootSQL(t, shadowSrv.Port, "CREATE DATABASE shop")
			copyDSN := shadowSrv.DSN("shop")
			loadSbtest(t, 2, 5000, primary, copyDSN)
			r := startShadowProxy(t, inno.Addr(), primary, "--shadow", "copy="+copyDSN, "--shadow-target-timeout", "2s")

			done := make(chan int)
			// Traffic before, during and after the outage; how long each
			// part lasts matters not (the waits below are bounded polls).
			go func() { done <- r.sysbench("--tables=2", "--table-size=5000", "--threads=8", "--time=10", "--rate=30") }()
			time.Sleep(2 * time.Second)
			// The server goes away with a captured statement under way on
			// it, so that one call surely ends unanswered: sysbench's calls
			// are short, and the one in flight at the signal can be replay's
			// own (the ROLLBACK of a transaction it runs again, no record's).
			r.inFlightOnShadow(shadowSrv.Port)
			c.down(t, shadowSrv, restart)
			sawDown := false
			for end := time.Now().Add(8 * time.Second); time.Now().Before(end) && !sawDown; time.Sleep(200 * time.Millisecond) {
				sawDown = r.metric(`tandem_shadow_up{shadow="copy"}`) == "0"
			}
			if !sawDown {
				t.Errorf("the shadow never showed down")
			}
			time.Sleep(time.Second)
			c.back(t, shadowSrv, restart)
			n := <-done
			var lag float64
			caughtUp := false
			for end := time.Now().Add(30 * time.Second); time.Now().Before(end) && !caughtUp; time.Sleep(250 * time.Millisecond) {
				lag = r.metricFloat(`tandem_shadow_lag_seconds{shadow="copy"}`)
				caughtUp = r.metric(`tandem_shadow_up{shadow="copy"}`) == "1" && lag < 1
			}
			if !caughtUp {
				t.Errorf("the shadow did not catch up after its server came back: up %s, lag %.1fs", r.metric(`tandem_shadow_up{shadow="copy"}`), lag)
			}
			reps := r.stop("copy")
			// What the shadow could not run while down is not a verdict:
			// counted apart as unanswered, and the tables of its writes are
			// ambiguous from then on; nothing else may differ.
			vc := reps["copy"].VsCapture
			if vc.Total() != 0 || vc.Unavailable == 0 || reps["copy"].Failed != "" {
				for _, smp := range vc.Samples {
					if !smp.Ambiguous {
						t.Logf("sample %s seq %d session %d: %s | %s | %s", smp.Class, smp.Seq, smp.Session, smp.Statement, smp.Baseline, smp.Target)
					}
				}
				t.Errorf("after the outage: divergent %v, %d unanswered, failed %q; errors %v", vc.ByClass, vc.Unavailable, reps["copy"].Failed, reps["copy"].ErrorCodes)
			}
			t.Logf("sysbench %d transactions, 0 errors; shadow: %d compared, %d unanswered while down, divergent %v, apart %v",
				n, vc.Compared, vc.Unavailable, vc.ByClass, vc.AmbiguousBy)
		})
	}
}

// inFlightOnShadow returns once a captured SELECT SLEEP(1.5) runs on the
// shadow's server at port: a client of the proxy sends one after another
// (each under the shadows' --shadow-target-timeout of 2 s, so that none
// is hung while the server answers) until the shadow runs one. The test
// must stop the proxy after its end: the last SLEEP is let finish.
func (r *shadowRun) inFlightOnShadow(port int) {
	r.t.Helper()
	client, err := sql.Open("mysql", "root@tcp("+r.listen+")/"+r.db)
	if err != nil {
		r.t.Fatal(err)
	}
	shadow, err := sql.Open("mysql", fmt.Sprintf("root@tcp(127.0.0.1:%d)/", port))
	if err != nil {
		r.t.Fatal(err)
	}
	defer shadow.Close()
	var stop atomic.Bool
	sent := make(chan error, 1)
	go func() {
		var err error
		for !stop.Load() && err == nil {
			_, err = client.Exec("SELECT SLEEP(1.5)") // to its end: a client gone mid-statement is not what this tests
		}
		client.Close() // its session ends before the proxy drains
		sent <- err
	}()
	// The client's last SLEEP ends after the shadow's: it is let finish
	// on its own, later.
	r.t.Cleanup(func() {
		if err := <-sent; err != nil {
			r.t.Errorf("the proxy's client of SLEEPs: %v", err)
		}
	})
	defer stop.Store(true)
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		var n int
		if err := shadow.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO = 'SELECT SLEEP(1.5)'").Scan(&n); err != nil {
			r.t.Fatalf("the shadow's processlist: %v", err)
		}
		if n > 0 {
			return
		}
	}
	r.t.Fatalf("in 30 s the shadow never ran the SLEEP its proxy's client sent")
}

// A shadow slowed artificially (a lock held on one of its tables) falls
// behind, shows its lag, skips ahead past --shadow-max-lag, and the
// clients see nothing of it.
func TestShadowSlowedFallsBehindAndSkips(t *testing.T) {
	if testing.Short() {
		t.Skip("needs MariaDB and sysbench; skipped with -short")
	}
	t.Parallel()
	inno, primary, cp := sbtestCopies(t, 2, 5000)
	r := startShadowProxy(t, inno.Addr(), primary, "--shadow", "copy="+cp, "--shadow-max-lag", "2s")
	done := make(chan int)
	go func() { done <- r.sysbench("--tables=2", "--table-size=5000", "--threads=8", "--time=20", "--rate=30") }()
	time.Sleep(3 * time.Second)
	c, _ := driver.ParseDSN(cp)
	host, port, _ := net.SplitHostPort(c.Addr)
	lock := exec.Command("mariadb", "--protocol=tcp", "-h", host, "-P", port, "-u", "root", "--skip-ssl", c.DBName,
		"-e", "LOCK TABLES sbtest1 WRITE; SELECT SLEEP(7); UNLOCK TABLES")
	if err := lock.Start(); err != nil {
		t.Fatal(err)
	}
	var maxLag float64
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		maxLag = max(maxLag, r.metricFloat(`tandem_shadow_lag_seconds{shadow="copy"}`))
	}
	lock.Wait()
	n := <-done
	skipped := r.metricFloat(`tandem_shadow_skipped_total{shadow="copy"}`)
	if maxLag <= 2 || skipped == 0 {
		t.Errorf("the slowed shadow: lag up to %.1fs, %v records skipped; want past 2s and some skipped", maxLag, skipped)
	}
	reps := r.stop("copy")
	t.Logf("sysbench %d transactions, 0 errors; shadow lag up to %.1fs, %v skipped; compared %d, divergent %v, apart %v",
		n, maxLag, skipped, reps["copy"].VsCapture.Compared, reps["copy"].VsCapture.ByClass, reps["copy"].VsCapture.AmbiguousBy)
}

// --shadow-mode read-only: a shadow whose data is not a clone gets no
// writes; reads of tables written since the start are counted apart
// (after a skipped write), reads of the others compared; its data is
// left as it was.
func TestShadowReadOnlySendsNoWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("needs MariaDB and sysbench; skipped with -short")
	}
	t.Parallel()
	inno, primary, ro := sbtestCopies(t, 2, 2000)
	before := checksums(t, ro, 2)
	r := startShadowProxy(t, inno.Addr(), primary, "--shadow", "ro="+ro, "--shadow-mode", "read-only")
	n := r.sysbench("--tables=2", "--table-size=2000", "--threads=4", "--time=6", "--rate=30")
	reps := r.stop("ro")
	vc := reps["ro"].VsCapture
	if after := checksums(t, ro, 2); after != before {
		t.Errorf("a read-only shadow's tables changed: %s, then %s", before, after)
	}
	if reps["ro"].Writes != 0 || vc.Total() != 0 || vc.AmbiguousBy["not-replayed"] == 0 {
		t.Errorf("read-only shadow: %d writes sent, divergent %v, apart %v", reps["ro"].Writes, vc.ByClass, vc.AmbiguousBy)
	}
	t.Logf("sysbench %d transactions; read-only shadow: %d compared, %d reads after a skipped write counted apart", n, vc.Compared, vc.AmbiguousBy["not-replayed"])
}

// childPIDs lists the processes whose parent is pid (from /proc).
func childPIDs(t *testing.T, pid int) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var kids []int
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …: comm may hold spaces, so split after ')'.
		if i := strings.LastIndexByte(string(b), ')'); i > 0 {
			if f := strings.Fields(string(b[i+1:])); len(f) > 1 && f[1] == strconv.Itoa(pid) {
				kids = append(kids, n)
			}
		}
	}
	return kids
}

// Each shadow runs in a worker process of its own. Killed mid-run, it
// takes nothing with it: sysbench goes on with 0 errors, the shadow shows
// down, the capture closes cleanly with every record, the proxy says
// what happened, and the worker's copy of the feed is removed. Its
// command line carries no DSN (a password would show in ps).
func TestShadowWorkerKilledLeavesClientsAlone(t *testing.T) {
	if testing.Short() {
		t.Skip("needs MariaDB and sysbench; skipped with -short")
	}
	t.Parallel()
	inno, primary, cp := sbtestCopies(t, 2, 2000)
	r := startShadowProxy(t, inno.Addr(), primary, "--shadow", "copy="+cp)
	done := make(chan int)
	go func() { done <- r.sysbench("--tables=2", "--table-size=2000", "--threads=8", "--time=10", "--rate=30") }()
	time.Sleep(3 * time.Second)
	kids := childPIDs(t, r.p.Process.Pid)
	if len(kids) != 1 {
		t.Fatalf("want 1 shadow worker process, the proxy has %d children: %v", len(kids), kids)
	}
	argv, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", kids[0]))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Split(strings.TrimRight(string(argv), "\x00"), "\x00"), []string{tandemBin, "shadow-worker", "--log-level", "info"}; !slices.Equal(got, want) {
		t.Errorf("worker command line %q, want %q", got, want)
	}
	feed := r.capDir + ".shadows/copy.feed"
	if _, err := os.Stat(feed); err != nil {
		t.Errorf("the worker's copy of the feed: %v", err)
	}
	if got := r.metricFloat(`tandem_shadow_compared_total{shadow="copy"}`); got == 0 {
		t.Errorf("before the kill: tandem_shadow_compared_total %v, want > 0 (the worker's metrics reach the proxy's /metrics)", got)
	}
	fed := r.metricFloat(`tandem_shadow_fed_seq{shadow="copy"}`)
	if fed == 0 {
		t.Errorf("before the kill: tandem_shadow_fed_seq 0, want the feed's progress")
	}
	if err := syscall.Kill(kids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	sawDown := false
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end) && !sawDown; time.Sleep(100 * time.Millisecond) {
		sawDown = r.metric(`tandem_shadow_up{shadow="copy"}`) == "0"
	}
	if !sawDown {
		t.Errorf("tandem_shadow_up{shadow=\"copy\"} is %q after its worker was killed, want 0", r.metric(`tandem_shadow_up{shadow="copy"}`))
	}
	n := <-done // fails the test on any client error
	// The proxy's own series stay: the feed stopped when the worker died.
	if after := r.metricFloat(`tandem_shadow_fed_seq{shadow="copy"}`); after < fed {
		t.Errorf("tandem_shadow_fed_seq went from %v to %v", fed, after)
	}
	r.p.Process.Signal(os.Interrupt)
	err = r.p.Wait()
	logs, out := r.logs.w.(*strings.Builder).String(), r.out.w.(*strings.Builder).String()
	if err == nil {
		t.Errorf("the proxy exited 0 although a shadow was lost")
	}
	for _, want := range []string{`msg="shadow worker ended; this shadow is gone (the clients and the capture are not affected)" shadow=copy err="signal: killed"`, "tandem: shadow copy: its worker ended: signal: killed"} {
		if !strings.Contains(logs, want) {
			t.Errorf("proxy log lacks %q", want)
		}
	}
	m := regexp.MustCompile(`(\d+) records captured into .*, 0 dropped`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("proxy output: %s", out)
	}
	insp, stderr, code := run(t, nil, "inspect", r.capDir)
	if code != 0 || !strings.Contains(insp, "closed cleanly") || !regexp.MustCompile(`records\s+`+m[1]+` in`).MatchString(insp) {
		t.Errorf("inspect after the proxy ended (%s records captured): %s%s", m[1], insp, stderr)
	}
	if _, err := os.Stat(feed); !os.IsNotExist(err) {
		t.Errorf("the killed worker's copy of the feed is still there: %v", err)
	}
	t.Logf("sysbench %d transactions, 0 errors; %s records captured", n, m[1])
}

// A write the shadow's engine fails for good (here a trigger on the
// shadow answers 1213 to every UPDATE of b, so the retries fail too),
// while the primary's succeeded: that statement is the divergence (the
// engine's verdict); its transaction is rolled back on the shadow, its
// INSERT into a with it (before, the INSERT stayed: committed in part);
// the later reads of both tables differ because of it, and are counted
// apart, naming the transaction, not as divergences of their own — in
// the run's report and in the shadow's live tally alike.
func TestShadowFailedWriteCountsLaterReadsApart(t *testing.T) {
	if testing.Short() {
		t.Skip("needs MariaDB; skipped with -short")
	}
	inno, _, sconn, primary, cp := primaryAndCopy(t, "CREATE TABLE a (id INT PRIMARY KEY, v INT)", "CREATE TABLE b (id INT PRIMARY KEY, v INT)", "INSERT INTO b VALUES (1, 0), (2, 0)")
	if _, err := sconn.Exec("CREATE TRIGGER b_conflict BEFORE UPDATE ON b FOR EACH ROW SIGNAL SQLSTATE '40001' SET MYSQL_ERRNO = 1213, MESSAGE_TEXT = 'shadow conflict'"); err != nil {
		t.Fatal(err)
	}
	pc, _ := driver.ParseDSN(primary)
	pdb := pc.DBName
	r := startShadowProxy(t, inno.Addr(), primary, "--shadow", "copy="+cp)
	r.mariadb("SELECT v FROM b WHERE id = 1; BEGIN; INSERT INTO a VALUES (1, 1); UPDATE b SET v = 2 WHERE id = 1; COMMIT; " +
		"SELECT v FROM b WHERE id = 1; SELECT SUM(v) FROM b; SELECT v FROM b WHERE id = 2; SELECT COUNT(*) FROM a")
	vc := r.stop("copy")["copy"].VsCapture
	// The UPDATE: 1213 against ok after the shadow's retries: the
	// divergence. The two reads of b that see v = 2 on the primary, and
	// a's count (1 on the primary, 0 on the shadow): counted apart because
	// of it. The read of b's id 2 is equal.
	if vc.Total() != 1 || vc.ByClass["error-vs-ok"] != 1 || vc.AmbiguousBy["after-failed-transaction"] != 3 || vc.Ambiguous != 3 {
		t.Errorf("divergent %v (total %d), apart %v", vc.ByClass, vc.Total(), vc.AmbiguousBy)
	}
	// The reads name the UPDATE's session (the client's: the proxy's
	// readiness probe may or may not have taken an id before it).
	var writer uint64
	for _, s := range vc.Samples {
		if strings.HasPrefix(s.Statement, "UPDATE") {
			writer = s.Session
		}
	}
	for _, s := range vc.Samples {
		table := pdb + ".b"
		if strings.Contains(s.Statement, "FROM a") {
			table = pdb + ".a"
		}
		if strings.HasPrefix(s.Statement, "SELECT") && !(strings.Contains(s.Why, fmt.Sprintf("a transaction of session %d (", writer)) &&
			strings.Contains(s.Why, "failed for good on copy (1213 after 4 attempts), and wrote "+table+" before this")) {
			t.Errorf("sample %q: %s (the UPDATE's session: %d)", s.Statement, s.Why, writer)
		}
	}
	// The shadow's closing line says what its report says (the live
	// tally named the three reads not-replayed).
	if out := r.out.w.(*strings.Builder).String(); !strings.Contains(out, "divergent error-vs-ok=1, counted apart after-failed-transaction=3") {
		t.Errorf("the shadow's closing line: %s", out)
	}
}

// A shadow that would get writes on a server read-only for its account
// is refused before the capture is made (each write would fail with 1290
// and be compared as the engine's answer); read-only mode sends it none
// and is let through.
func TestReadOnlyServerIsRefusedAsAWrittenShadow(t *testing.T) {
	if testing.Short() {
		t.Skip("needs MariaDB servers; skipped with -short")
	}
	t.Parallel()
	inno := sandboxtest.Server(t, "innodb")
	srv, _ := ownServer(t)
	rootSQL(t, srv.Port, "CREATE DATABASE shop; CREATE USER app@'127.0.0.1'; GRANT ALL ON shop.* TO app@'127.0.0.1'; SET GLOBAL read_only = ON")
	shadow := "ro=" + strings.Replace(srv.DSN("shop"), "root@", "app@", 1)
	capDir := filepath.Join(t.TempDir(), "capture")
	_, stderr, code := runRefused(t, "proxy", "--listen", freeAddr(t), "--backend", inno.Addr(), "--capture", capDir, "--metrics-addr", "off", "--shadow", shadow)
	if want := "shadow ro refuses this account's writes: the server is read-only ("; code != 1 || !strings.Contains(stderr, want) || !strings.Contains(stderr, "or give --shadow-mode read-only") {
		t.Errorf("proxy --shadow on a read-only server: exit %d, %q; want 1 and %q", code, stderr, want)
	}
	if _, err := os.Stat(capDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused proxy left %s: %v", capDir, err)
	}
	_, primary := inno.FreshDB(t)
	r := startShadowProxy(t, inno.Addr(), primary, "--shadow", shadow, "--shadow-mode", "read-only")
	reps := r.stop("ro")
	if reps["ro"].Failed != "" {
		t.Errorf("a read-only shadow on a read-only server: failed %q", reps["ro"].Failed)
	}
}

// A shadow cut off at the proxy's stop — its server hangs (SIGSTOP) while
// the capture ends, and --shadow-drain-timeout runs out — says so on its
// last line, with how many records it had not finished: they are in no
// count the line gives. Before, the line gave clean counts as if the
// shadow had replayed the whole capture.
func TestShadowCutOffAtStopSaysSo(t *testing.T) {
	if testing.Short() {
		t.Skip("stops a MariaDB server; skipped with -short")
	}
	t.Parallel()
	inno := sandboxtest.Server(t, "innodb")
	_, primary := inno.FreshDB(t)
	shadowSrv, _ := ownServer(t)
	rootSQL(t, shadowSrv.Port, "CREATE DATABASE shop")
	copyDSN := shadowSrv.DSN("shop")
	loadSbtest(t, 1, 1000, primary, copyDSN)
	r := startShadowProxy(t, inno.Addr(), primary, "--shadow", "copy="+copyDSN, "--shadow-drain-timeout", "2s")
	done := make(chan int)
	go func() { done <- r.sysbench("--tables=1", "--table-size=1000", "--threads=2", "--time=3", "--rate=20") }()
	time.Sleep(time.Second)
	if err := syscall.Kill(shadowSrv.PID, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(shadowSrv.PID, syscall.SIGCONT) })
	<-done
	reps := r.stop("copy")
	syscall.Kill(shadowSrv.PID, syscall.SIGCONT)
	out := r.out.w.(*strings.Builder).String()
	m := regexp.MustCompile(`shadow copy: \d+ compared with the primary, .*, stopped before the capture's end with (\d+) records not finished \(they are not compared\)`).FindStringSubmatch(out)
	if m == nil || m[1] == "0" {
		t.Errorf("the shadow's last line does not say it was cut off, with the records it had not finished:\n%s", out)
	}
	if reps["copy"].Failed != "" {
		t.Errorf("the shadow failed (%q); want it cut off at the stop", reps["copy"].Failed)
	}
}

// A server's xids are its own, not a database's. A shadow on the
// primary's server (another database) replayed the captured XA START
// while the primary's transaction of that xid was still open: refused
// (1440, XAER_DUPID), its UPDATE ran outside any transaction and the
// rest of the XA statements failed. Every shadow now gives its xids a
// branch qualifier of its own.
func TestShadowOnThePrimarysServerHasXidsOfItsOwn(t *testing.T) {
	if testing.Short() {
		t.Skip("needs MariaDB; skipped with -short")
	}
	inno, _, sconn, primary, cp := primaryAndCopy(t, "CREATE TABLE b (id INT PRIMARY KEY, v INT)", "INSERT INTO b VALUES (1, 0), (2, 0)")
	r := startShadowProxy(t, inno.Addr(), primary, "--shadow", "copy="+cp)
	// The primary holds the xid open for a second: the shadow's XA START
	// comes within it.
	r.mariadb("XA START 'pay-1'; UPDATE b SET v = 5 WHERE id = 1; DO SLEEP(1); XA END 'pay-1'; XA PREPARE 'pay-1'; XA COMMIT 'pay-1'; " +
		"XA START 'pay-2', 'b'; UPDATE b SET v = 7 WHERE id = 2; DO SLEEP(1); XA END 'pay-2', 'b'; XA ROLLBACK 'pay-2', 'b'")
	tr := r.stop("copy")["copy"]
	if tr.Errors != 0 || tr.VsCapture.Total() != 0 || tr.VsCapture.Ambiguous != 0 {
		t.Errorf("copy: %d errors %v, divergent %v, apart %v; want none", tr.Errors, tr.ErrorCodes, tr.VsCapture.ByClass, tr.VsCapture.AmbiguousBy)
	}
	var got string
	if err := sconn.QueryRow("SELECT GROUP_CONCAT(v ORDER BY id) FROM b").Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != "5,0" {
		t.Errorf("the shadow's rows: %s; want 5,0 ('pay-1' committed, 'pay-2' rolled back)", got)
	}
}

// Two shadows that are one server's one database would each get every
// write: refused before the capture is made, as replay's targets are.
func TestShadowsThatAreTheSameTablesAreRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("needs MariaDB; skipped with -short")
	}
	inno := sandboxtest.Server(t, "innodb")
	_, cp := inno.FreshDB(t)
	capDir := filepath.Join(t.TempDir(), "capture")
	_, stderr, code := runRefused(t, "proxy", "--listen", freeAddr(t), "--backend", inno.Addr(), "--capture", capDir, "--metrics-addr", "off",
		"--shadow", "copy="+cp, "--shadow", "twin="+strings.Replace(cp, "tcp(127.0.0.1:", "tcp(localhost:", 1))
	if code != 1 || !strings.Contains(stderr, "--shadow: targets copy and twin are the same tables: one server") {
		t.Errorf("exit %d, stderr %q; want 1 and the shadows refused as the same tables", code, stderr)
	}
	if _, err := os.Stat(capDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the capture directory was made (%v); want none", err)
	}
}

// A shadow counts rows an ORDER BY leaves tied apart (tied-order), the
// server's choice, not the engine's, as replay does. A shadow starts
// before its capture holds a record, so it read the keys of no table, and
// without a table's keys ties cannot be told: both its live counts and its
// report counted the tied rows' other order as the engine's difference
// (order-only 1). The shadow's index on k is descending, so its tied rows
// come the other way round.
func TestShadowLiveCountsKnowTheKeys(t *testing.T) {
	if testing.Short() {
		t.Skip("needs MariaDB; skipped with -short")
	}
	inno := sandboxtest.Server(t, "innodb")
	pconn, primary := inno.FreshDB(t)
	sconn, cp := inno.FreshDB(t)
	for db, dir := range map[*sql.DB]string{pconn: "", sconn: " DESC"} {
		for _, q := range []string{"CREATE TABLE t (id INT PRIMARY KEY, k INT, KEY (k" + dir + "))", "INSERT INTO t VALUES (1, 5), (2, 5), (3, 7)"} {
			if _, err := db.Exec(q); err != nil {
				t.Fatal(err)
			}
		}
	}
	order := func(db *sql.DB) string {
		var got string
		if err := db.QueryRow("SELECT GROUP_CONCAT(id) FROM (SELECT id FROM t FORCE INDEX (k) ORDER BY k LIMIT 9) x").Scan(&got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	if p, s := order(pconn), order(sconn); p == s {
		t.Skipf("the tied rows come in one order on both (%s): nothing to tell", p)
	}
	r := startShadowProxy(t, inno.Addr(), primary, "--shadow", "copy="+cp)
	r.mariadb("SELECT id FROM t FORCE INDEX (k) ORDER BY k; SELECT id FROM t ORDER BY id")
	vc := r.stop("copy")["copy"].VsCapture
	if vc.Total() != 0 || vc.Ambiguous != 1 || vc.AmbiguousBy["tied-order"] != 1 {
		t.Errorf("report: divergent %v, apart %v; want none divergent, tied-order 1 apart", vc.ByClass, vc.AmbiguousBy)
	}
	if out := r.out.w.(*strings.Builder).String(); !strings.Contains(out, "counted apart tied-order=1") || strings.Contains(out, "divergent order-only") {
		t.Errorf("the shadow's closing line (its live counts): %s", out)
	}
}
