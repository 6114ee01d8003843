package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	driver "github.com/go-sql-driver/mysql"

	"github.com/tandemdb/tandem/grafana"
	"github.com/tandemdb/tandem/internal/clitest"
	"github.com/tandemdb/tandem/report"
	"github.com/tandemdb/tandem/sandbox/sandboxtest"
)

func freeAddr(t *testing.T) string { return clitest.FreeAddr(t) }

// startProc starts tandem (or another program) in the background; it is
// interrupted and waited for when the test ends.
func startProc(t *testing.T, bin string, args ...string) (*exec.Cmd, io.Reader) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errb strings.Builder
	cmd.Stderr = &syncWriter{w: &errb}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
		}
		if t.Failed() {
			t.Logf("%s stderr:\n%s", filepath.Base(bin), errb.String())
		}
	})
	return cmd, out
}

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func waitTCP(t *testing.T, addr string) { clitest.WaitTCP(t, addr) }

// promQuery evaluates expr now through Prometheus's HTTP API and returns
// each series' labels and value.
func promQuery(t *testing.T, prom, expr string) []promSample {
	t.Helper()
	resp, err := http.Get("http://" + prom + "/api/v1/query?query=" + url.QueryEscape(expr))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	if r.Status != "success" {
		t.Fatalf("query %s: %s", expr, r.Error)
	}
	var out []promSample
	for _, s := range r.Data.Result {
		v, _ := strconv.ParseFloat(fmt.Sprint(s.Value[1]), 64)
		out = append(out, promSample{s.Metric, v})
	}
	return out
}

type promSample struct {
	labels map[string]string
	value  float64
}

// A real Prometheus scrapes a running proxy (capturing) and a running
// replay of two targets, one with a changed row; then every query of every
// dashboard panel returns data, every tandem_ metric the dashboard names
// exists, and the totals Prometheus holds equal what replay reported.
func TestDashboardAgainstPrometheus(t *testing.T) {
	t.Parallel()
	promBin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatal("prometheus is not installed: run 'make deps' (Debian package prometheus)")
	}
	srv := sandboxtest.Server(t, "innodb")
	originDB, origin := srv.FreshDB(t)
	dba, a := srv.FreshDB(t)
	dbb, b := srv.FreshDB(t)
	dbs, shadowDSN := srv.FreshDB(t) // a copy of origin, the second proxy's shadow
	for _, db := range []*sql.DB{originDB, dba, dbb, dbs} {
		mustExec(t, db, "CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL)")
		var vals []string
		for i := 1; i <= 100; i++ {
			vals = append(vals, fmt.Sprintf("(%d, %d)", i, i))
		}
		mustExec(t, db, "INSERT INTO t VALUES "+strings.Join(vals, ","))
		// r is read and never written: b's difference there stays a
		// divergence even when replay runs a transaction on t again (a
		// yield under load), which makes later differences on t
		// order-ambiguous, counted apart (CI saw it once).
		mustExec(t, db, "CREATE TABLE r (id INT PRIMARY KEY, v INT NOT NULL)", "INSERT INTO r VALUES (1, 1)")
	}
	ocfg, err := driver.ParseDSN(origin)
	if err != nil {
		t.Fatal(err)
	}

	// Two capturing proxies: the first's capture is replayed (it must be
	// closed first); the second stays up, scraped, for the proxy panels,
	// with a shadow for the shadow panels.
	dir := t.TempDir()
	replayMetrics, proxyMetrics, promAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	p1, p2 := freeAddr(t), freeAddr(t)
	capDir := filepath.Join(dir, "capture")
	proxy1, _ := startProc(t, tandemBin, "proxy", "--listen", p1, "--backend", ocfg.Addr, "--capture", capDir, "--capture-results", "checksum", "--metrics-addr", "off")
	startProc(t, tandemBin, "proxy", "--listen", p2, "--backend", ocfg.Addr, "--capture", filepath.Join(dir, "capture2"), "--metrics-addr", proxyMetrics,
		"--shadow", "copy="+shadowDSN)
	waitTCP(t, p1)
	waitTCP(t, p2)
	waitTCP(t, proxyMetrics)

	cfg := fmt.Sprintf("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n"+
		"  - job_name: replay\n    static_configs:\n      - targets: ['%s']\n"+
		"  - job_name: proxy\n    static_configs:\n      - targets: ['%s']\n", replayMetrics, proxyMetrics)
	cfgFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	startProc(t, promBin, "--config.file="+cfgFile, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		"--web.listen-address="+promAddr, "--log.level=warn")
	waitTCP(t, promAddr)

	// Traffic: two sessions through each proxy for about 3 s: point reads,
	// updates in transactions, and a statement that fails.
	traffic := func(addr string) {
		c := *ocfg
		c.Addr, c.InterpolateParams = addr, false
		db, err := sql.Open("mysql", c.FormatDSN())
		if err != nil {
			t.Error(err)
			return
		}
		defer db.Close()
		db.SetMaxOpenConns(2)
		var wg sync.WaitGroup
		for s := 0; s < 2; s++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				conn, err := db.Conn(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				defer conn.Close()
				ctx := context.Background()
				for i, end := 0, time.Now().Add(3*time.Second); time.Now().Before(end); i++ {
					id := (i*7+s*13)%100 + 1
					var v int
					if err := conn.QueryRowContext(ctx, "SELECT v FROM t WHERE id = ?", id).Scan(&v); err != nil {
						t.Error(err)
						return
					}
					if i%5 == 0 {
						if _, err := conn.ExecContext(ctx, "BEGIN"); err == nil {
							conn.ExecContext(ctx, "UPDATE t SET v = v + 1 WHERE id = ?", 50+s)
							conn.ExecContext(ctx, "COMMIT")
						}
					}
					if i%40 == 0 {
						conn.ExecContext(ctx, "SELECT * FROM no_such_table")
					}
					if i%10 == 0 {
						if err := conn.QueryRowContext(ctx, "SELECT v FROM r WHERE id = 1").Scan(&v); err != nil {
							t.Error(err)
							return
						}
					}
					time.Sleep(2 * time.Millisecond)
				}
			}()
		}
		wg.Wait()
	}
	var wg sync.WaitGroup
	for _, addr := range []string{p1, p2} {
		wg.Add(1)
		go func() { defer wg.Done(); traffic(addr) }()
	}
	wg.Wait()
	proxy1.Process.Signal(os.Interrupt)
	proxy1.Wait()

	// b differs in one row of each table the traffic reads.
	mustExec(t, dbb, "UPDATE t SET v = -1 WHERE id = 8", "UPDATE r SET v = -1 WHERE id = 1")
	_, out := startProc(t, tandemBin, "replay", capDir, "--speed", "1", "--json", "--run", filepath.Join(dir, "run"),
		"--target", "a="+a, "--target", "b="+b, "--metrics-addr", replayMetrics, "--metrics-linger", "60s")
	var rep report.Report
	if err := json.NewDecoder(bufio.NewReader(out)).Decode(&rep); err != nil {
		t.Fatalf("replay's --json: %v", err)
	}
	if len(rep.Points) != 1 || len(rep.Points[0].Targets) != 2 {
		t.Fatalf("report: %d points", len(rep.Points))
	}
	ta, tb := rep.Points[0].Targets[0], rep.Points[0].Targets[1]
	if tb.VsBaseline == nil || tb.VsBaseline.Total() == 0 || ta.Errors == 0 {
		t.Fatalf("want divergences on b and errors: b vs a %+v, errors %d", tb.VsBaseline, ta.Errors)
	}

	// Prometheus holds the final counts once it has scraped after the end.
	sel := fmt.Sprintf(`run="%s"`, rep.RunID)
	want := map[string]float64{
		"a": float64(ta.Reads + ta.Writes + ta.Other),
		"b": float64(tb.Reads + tb.Writes + tb.Other),
	}
	var got map[string]float64
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		got = map[string]float64{}
		for _, s := range promQuery(t, promAddr, `sum by (target) (tandem_replay_statements_total{`+sel+`,outcome!="skipped"})`) {
			got[s.labels["target"]] = s.value
		}
		if got["a"] == want["a"] && got["b"] == want["b"] && len(promQuery(t, promAddr, `tandem_replay_compared_total{`+sel+`}`)) > 0 {
			break
		}
	}
	if got["a"] != want["a"] || got["b"] != want["b"] {
		t.Fatalf("statements in Prometheus %v, replay reported %v", got, want)
	}
	checks := []struct {
		expr string
		want float64
	}{
		{`sum(tandem_replay_divergences_total{` + sel + `,target="b",against="baseline"})`, float64(tb.VsBaseline.Total())},
		{`sum(tandem_replay_order_ambiguous_total{` + sel + `,target="b",against="baseline"})`, float64(tb.VsBaseline.Ambiguous)},
		{`sum(tandem_replay_compared_total{` + sel + `,target="b",against="baseline"})`, float64(tb.VsBaseline.Compared)},
		{`sum(tandem_replay_divergences_total{` + sel + `,target="a",against="capture"})`, float64(ta.VsCapture.Total())},
		{`sum(tandem_replay_divergences_total{` + sel + `,target="b",against="capture"})`, float64(tb.VsCapture.Total())},
		{`sum(tandem_replay_errors_total{` + sel + `,target="a"})`, float64(sumMap(ta.ErrorCodes))},
		{`sum(tandem_replay_transactions_total{` + sel + `,target="b"})`, float64(tb.Transactions)},
		{`sum(tandem_replay_statements_total{` + sel + `,target="b",outcome="error"})`, float64(tb.Errors)},
	}
	for _, c := range checks {
		s := promQuery(t, promAddr, c.expr)
		if len(s) != 1 || s[0].value != c.want {
			t.Errorf("%s = %v, want %v (from the report)", c.expr, s, c.want)
		}
	}

	// Every panel's queries, with the variables as Grafana fills them.
	vars := map[string]string{"run": regexp.QuoteMeta(rep.RunID), "target": ".*", "baseline": "a", "proxy": ".*", "shadow": ".*"}
	names := map[string]bool{}
	metricName := regexp.MustCompile(`tandem_[a-z_]+`)
	d := grafana.New()
	qs := grafana.Queries(d)
	// A rate needs two scrapes in its window; a target's first scrapes can
	// come late on a loaded machine, so each query gets time.
	deadline := time.Now().Add(30 * time.Second)
	failed := false
	for _, q := range qs {
		expr := grafana.Substitute(q.Expr, vars, "1m")
		s := promQuery(t, promAddr, expr)
		for len(s) == 0 && time.Now().Before(deadline) {
			time.Sleep(500 * time.Millisecond)
			s = promQuery(t, promAddr, expr)
		}
		if len(s) == 0 {
			failed = true
			t.Errorf("panel %d %q: no series for %s", q.PanelID, q.Panel, expr)
		}
		for _, n := range metricName.FindAllString(q.Expr, -1) {
			names[strings.TrimSuffix(n, "_bucket")] = true
		}
	}
	if failed {
		for _, diag := range []string{`up`, `scrape_duration_seconds`, `count_over_time(up[1m])`, `scrape_samples_scraped`} {
			t.Logf("%s: %v", diag, promQuery(t, promAddr, diag))
		}
	}
	for n := range names {
		if s := promQuery(t, promAddr, `count({__name__=~"`+n+`(_bucket)?"})`); len(s) == 0 {
			t.Errorf("the dashboard uses %s; neither replay nor proxy exports it", n)
		}
	}
	// Cardinality, for the record.
	series := promQuery(t, promAddr, `count({__name__=~"tandem_.*"})`)
	t.Logf("%d panel queries over %d metric names; %v tandem_ series", len(qs), len(names), series)
}

func mustExec(t *testing.T, db *sql.DB, qs ...string) {
	t.Helper()
	for _, q := range qs {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

func sumMap(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// An explicit metrics address that is taken is an error; replay's default
// one being taken (another replay runs) turns metrics off with a warning.
func TestReplayMetricsAddressTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	capDir := filepath.Join(t.TempDir(), "nope")
	_, stderr, code := run(t, nil, "replay", capDir, "--target", "a=root@tcp(127.0.0.1:1)/x", "--metrics-addr", ln.Addr().String())
	if code != 1 || !strings.Contains(stderr, "metrics endpoint: listen tcp "+ln.Addr().String()) || !strings.Contains(stderr, "choose another with --metrics-addr") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	def, err := net.Listen("tcp", defaultReplayMetrics)
	if err != nil {
		t.Skipf("the default metrics port is in use here: %v", err)
	}
	defer def.Close()
	_, stderr, code = run(t, nil, "replay", capDir, "--target", "a=root@tcp(127.0.0.1:1)/x")
	want := "tandem replay: warning: metrics endpoint: listen tcp " + defaultReplayMetrics
	if code != 1 || !strings.HasPrefix(stderr, want) || !strings.Contains(stderr, "replaying with metrics off\ntandem: store: not a tandem capture") {
		t.Errorf("default port taken: exit %d, stderr %q", code, stderr)
	}
}
