package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/tandemdb/tandem/footprint"
	"github.com/tandemdb/tandem/report"
	"github.com/tandemdb/tandem/sandbox/sandboxtest"
	"github.com/tandemdb/tandem/store"
)

// A sweep over 1, 2, 4 and 8 threads against two targets (InnoDB, and
// InnoDB compressed) makes one point per thread count per target, its
// table and charts; the HTML report of it renders in headless Chromium
// with every chart drawn and no network request; its numbers are the
// stored ones.
func TestSweepAndHTMLReport(t *testing.T) {
	t.Parallel()
	srv := sandboxtest.Server(t, "innodb")
	_, a := srv.FreshDB(t)
	_, b := srv.FreshDB(t)
	dir := t.TempDir()
	capDir, runDir := filepath.Join(dir, "cap"), filepath.Join(dir, "run")
	if _, stderr, code := run(t, nil, "synth", "oltp_read_only", "--out", capDir, "--tables", "2", "--table-size", "10000", "--threads", "8", "--events", "2000"); code != 0 {
		t.Fatalf("synth: %s", stderr)
	}
	out, stderr, code := run(t, nil, "sweep", capDir, "--threads", "1,2,4,8", "--duration", "1500ms", "--run", runDir, "--metrics-addr", "off",
		"--target", "plain="+a, "--target", "zipped="+b+",options=ROW_FORMAT=COMPRESSED KEY_BLOCK_SIZE=4",
		"--prepare-tables", "2", "--prepare-table-size", "10000")
	if code != 0 {
		t.Fatalf("sweep: exit %d: %s", code, stderr)
	}
	if n := strings.Count(stderr, "tandem sweep: point "); n != 8 {
		t.Errorf("%d points announced, want 8:\n%s", n, stderr)
	}
	// The table: one row per thread count, a cell per target.
	i := strings.Index(out, "sweep of "+capDir)
	if i < 0 {
		t.Fatalf("no sweep table in:\n%s", out)
	}
	lines := strings.Split(strings.TrimSpace(out[i:]), "\n")
	for k, n := range []string{"1", "2", "4", "8"} {
		f := strings.Fields(lines[2+k])
		if f[0] != n || strings.Count(lines[2+k], " / ") != 6 {
			t.Errorf("row %d: %q", k, lines[2+k])
		}
	}

	rep, err := report.Load(runDir)
	if err != nil {
		t.Fatal(err)
	}
	rows, names := rep.Sweep()
	if len(rep.Points) != 8 || len(rows) != 4 || len(names) != 2 {
		t.Fatalf("%d points, %d rows, targets %v", len(rep.Points), len(rows), names)
	}
	// Each row ran its thread count: as many connections, each busy, no
	// errors. (How throughput scales is a measurement, not a test: on a
	// loaded machine 2 threads can do less than 1.)
	for k, n := range []int{1, 2, 4, 8} {
		if rows[k].Threads != n {
			t.Errorf("row %d: %d threads, want %d", k, rows[k].Threads, n)
		}
		for _, name := range names {
			if tg := rows[k].Targets[name]; tg.Connections != int64(n) || tg.Transactions == 0 || tg.Errors != 0 {
				t.Errorf("%d threads, %s: %d connections (want %d), %d transactions, %d errors", n, name, tg.Connections, n, tg.Transactions, tg.Errors)
			}
		}
	}
	// The report's figures are the stored ones: recount from the run.
	rr, err := store.OpenRun(runDir)
	if err != nil {
		t.Fatal(err)
	}
	index := map[string]int{"plain": 0, "zipped": 1}
	for _, pt := range rep.Points {
		for _, tg := range pt.Targets {
			p, ti := pt.Point.Point, index[tg.Name]
			res, ok, err := rr.Result(p, ti)
			if err != nil || !ok {
				t.Fatalf("point %d %s: result %v %v", p, tg.Name, ok, err)
			}
			if res.Reads != tg.Reads || res.Transactions != tg.Transactions {
				t.Errorf("point %d %s: report %d reads %d trx, stored %d, %d", p, tg.Name, tg.Reads, tg.Transactions, res.Reads, res.Transactions)
			}
			h, ok, err := rr.Histogram(p, ti, store.SeriesService, "")
			if err != nil || !ok || int64(h.Count()) != tg.Reads+tg.Writes+tg.Other {
				t.Fatalf("point %d %s: stored latency histogram %v %v", p, tg.Name, ok, err)
			}
			if want := float64(h.Quantile(0.95)) / 1e6; tg.Latency.P95 != want {
				t.Errorf("point %d %s: p95 %v, the stored histogram says %v", p, tg.Name, tg.Latency.P95, want)
			}
			if len(tg.Footprint) != 2 || len(tg.FootprintBefore) != 2 {
				t.Errorf("point %d %s: footprint %d tables, before %d", pt.Point.Point, tg.Name, len(tg.Footprint), len(tg.FootprintBefore))
			}
		}
	}
	rr.Close() // a run open here is locked for other processes
	// The compressed target takes less room, in every point.
	for _, r := range rows {
		pd, px := footprint.Total(r.Targets["plain"].Footprint)
		zd, zx := footprint.Total(r.Targets["zipped"].Footprint)
		if zd+zx >= pd+px {
			t.Errorf("%d threads: compressed %d bytes, plain %d", r.Threads, zd+zx, pd+px)
		}
	}

	// CSV: a header and a row per point per target.
	csvOut, stderr, code := run(t, nil, "report", runDir, "--format", "csv")
	recs, err := csv.NewReader(strings.NewReader(csvOut)).ReadAll()
	if code != 0 || err != nil || len(recs) != 1+8 || recs[0][0] != "run_id" {
		t.Fatalf("csv: exit %d %s %v, %d rows", code, stderr, err, len(recs))
	}

	// HTML, and the charts as files.
	html, charts := filepath.Join(dir, "report.html"), filepath.Join(dir, "charts")
	if _, stderr, code := run(t, nil, "report", runDir, "--format", "html", "-o", html, "--charts", charts); code != 0 {
		t.Fatalf("report --format html: %s", stderr)
	}
	for _, name := range []string{"sweep-qps", "sweep-p95", "footprint"} {
		for _, ext := range []string{".svg", ".png"} {
			if st, err := os.Stat(filepath.Join(charts, name+ext)); err != nil || st.Size() < 1000 {
				t.Errorf("chart %s%s: %v", name, ext, err)
			}
		}
	}
	raw, _ := os.ReadFile(html)
	for _, bad := range []string{"<script", "http://", "https://", "<link", "@import", "url("} {
		if bytes.Contains(bytes.ToLower(raw), []byte(bad)) && bad != "http://" || bad == "http://" && bytes.Contains(raw, []byte("src=\"http")) {
			t.Errorf("the HTML holds %q: it must not fetch anything", bad)
		}
	}
	sizes, shot, requests := renderInChromium(t, html)
	if len(sizes) != 3 {
		t.Errorf("%d charts drawn, want 3 (qps and p95 against threads, footprint)", len(sizes))
	}
	for i, s := range sizes {
		if s[0] < 100 || s[1] < 100 {
			t.Errorf("chart %d drawn %vx%v px", i, s[0], s[1])
		}
	}
	for _, u := range requests {
		if !strings.HasPrefix(u, "file://") {
			t.Errorf("the report made a request to %s", u)
		}
	}
	if len(requests) != 1 {
		t.Errorf("requests %v, want the file alone", requests)
	}
	if colors := distinctColors(t, shot); colors < 8 {
		t.Errorf("screenshot has %d colors: blank", colors)
	}
}

// renderInChromium opens a file in headless Chromium and returns the size
// of every chart's SVG as laid out, a screenshot, and every URL requested.
func renderInChromium(t *testing.T, path string) ([][2]float64, []byte, []string) {
	t.Helper()
	bin := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		t.Fatal("chromium is not installed: run 'make deps' (Debian package chromium)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.Flag("headless", true),
		chromedp.Flag("disable-gpu", true), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 2000))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	var mu sync.Mutex
	var urls []string
	ctx, cancel2 := chromedp.NewContext(actx, chromedp.WithListener(func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok {
			mu.Lock()
			urls = append(urls, e.Request.URL)
			mu.Unlock()
		}
	}))
	defer cancel2()
	ctx, cancel3 := context.WithTimeout(ctx, 60*time.Second)
	defer cancel3()
	if err := chromedp.Do(ctx); err != nil { // starts the browser and a tab
		t.Fatalf("chromium: %v", err)
	}
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatalf("chromium: network.enable: %v", err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate("file://"+path)); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	js, err := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify([...document.querySelectorAll('figure svg')].map(s => {const r = s.getBoundingClientRect(); return [r.width, r.height]}))`))
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("chromium: screenshot: %v", err)
	}
	var sizes [][2]float64
	if err := json.Unmarshal([]byte(js), &sizes); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	return sizes, shot, slicesClone(urls)
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }

func distinctColors(t *testing.T, b []byte) int {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	seen := map[[3]uint32]bool{}
	bounds := img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y += 3 {
		for x := bounds.Min.X; x < bounds.Max.X; x += 3 {
			r, g, bl, _ := img.At(x, y).RGBA()
			seen[[3]uint32{r >> 12, g >> 12, bl >> 12}] = true
		}
	}
	_ = image.Point{}
	return len(seen)
}
