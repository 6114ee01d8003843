package report

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tandemdb/tandem/latency"
	"github.com/tandemdb/tandem/store"
)

func hist(ms ...float64) *latency.Histogram {
	h := &latency.Histogram{}
	for _, m := range ms {
		h.Record(time.Duration(m * float64(time.Millisecond)))
	}
	return h
}

// writeRun writes a two-target run whose figures the test knows.
func writeRun(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "run")
	w, err := store.CreateRun(dir, store.RunMeta{RunID: "r1", Command: "replay", Capture: "/cap", Baseline: "a",
		Started: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
		Targets: []store.RunTarget{{Name: "a", Engine: "InnoDB", Version: "10.11.19-MariaDB", Baseline: true}, {Name: "b", Engine: "ROCKSDB", Version: "10.11.19-MariaDB"}}})
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(w.PutPoint(store.Point{Point: 0, Label: "replay", Targets: []string{"a", "b"}, Order: "capture", IO: "blocking", Elapsed: 2}))
	// a: 100 statements of 1..100 ms; b: the same, twice as slow.
	var av, bv []float64
	for i := 1; i <= 100; i++ {
		av, bv = append(av, float64(i)), append(bv, float64(2*i))
	}
	for ti, vals := range [][]float64{av, bv} {
		must(w.PutHistogram(0, ti, store.SeriesService, "", hist(vals...)))
		must(w.PutHistogram(0, ti, store.SeriesRead, "", hist(vals...)))
		must(w.PutHistogram(0, ti, store.SeriesDigest, "d1", hist(vals...)))
		must(w.PutInterval(0, ti, 0, &store.Interval{Length: time.Second, Transactions: 10, Reads: 50, Latency: *hist(vals[:50]...)}))
		must(w.PutInterval(0, ti, 1, &store.Interval{Start: time.Second, Length: time.Second, Transactions: 10, Reads: 50, Latency: *hist(vals[50:]...)}))
	}
	must(w.PutDigest("d1", store.DigestInfo{Text: "select ?", Class: "read"}))
	must(w.PutResult(0, 0, &store.TargetResult{Target: "a", Elapsed: 2, Transactions: 20, Reads: 100}))
	must(w.PutResult(0, 1, &store.TargetResult{Target: "b", Elapsed: 4, Transactions: 20, Reads: 100,
		VsBaseline: &store.Divergences{Compared: 100, Ambiguous: 2, ByClass: map[string]int64{"row-content": 3}}}))
	must(w.End(store.RunEnd{Elapsed: 4}))
	return dir
}

// The report's numbers are the stored histograms' and counters': recomputed
// here from the values themselves.
func TestLoadComputesFromStoredHistograms(t *testing.T) {
	rep, err := Load(writeRun(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Points) != 1 || len(rep.Points[0].Targets) != 2 || !rep.Finished || rep.RunID != "r1" {
		t.Fatalf("report %+v", rep)
	}
	a, b := rep.Points[0].Targets[0], rep.Points[0].Targets[1]
	// p95 of 1..100 ms is the 95th value, 95 ms, within the histogram's
	// 1/128 bucket width; the mean and extremes are exact.
	within := func(got, want float64) bool { return got >= want && got <= want*(1+1.0/128) }
	if !within(a.Latency.P95, 95) || !within(a.Latency.P50, 50) || a.Latency.Avg != 50.5 || a.Latency.Min != 1 || a.Latency.Max != 100 || a.Latency.Count != 100 {
		t.Errorf("a latency %+v", a.Latency)
	}
	if !within(b.Latency.P95, 190) || b.Latency.Max != 200 {
		t.Errorf("b latency %+v", b.Latency)
	}
	if a.TPS != 10 || a.QPS != 50 || b.TPS != 5 || b.QPS != 25 {
		t.Errorf("rates a %v/%v b %v/%v", a.TPS, a.QPS, b.TPS, b.QPS)
	}
	if len(b.TopDigests) != 1 || b.TopDigests[0].Text != "select ?" || b.TopDigests[0].RatioP95 < 1.99 || b.TopDigests[0].RatioP95 > 2.01 {
		t.Errorf("b digests %+v", b.TopDigests)
	}
	if len(a.Intervals) != 2 || a.Intervals[0].TPS != 10 || a.Intervals[1].QPS != 50 || !within(a.Intervals[1].P95, 98) {
		t.Errorf("a intervals %+v", a.Intervals)
	}
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		// The label column is as wide as its longest label (28:
		// "order: waits/reruns/released"), each target's as its widest cell.
		"  queries/s                                      50.0                   25.0\n",
		"  divergent: row-content                            -                      3\n",
		"  order-ambiguous                                   -                      2\n",
		"select ?",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	// The JSON names are the documented ones.
	b2, _ := json.Marshal(rep)
	for _, key := range []string{`"points":`, `"targets":`, `"latency":{"count":100`, `"p95_ms":`, `"divergences_from_baseline":`, `"order_ambiguous":2`, `"top_digests":`, `"intervals":`} {
		if !strings.Contains(string(b2), key) {
			t.Errorf("JSON lacks %s", key)
		}
	}
}

// No cell of the target table is cut: a column is as wide as its widest
// cell, and every row's cells line up.
func TestTableCellsAreWholeAndAligned(t *testing.T) {
	var b bytes.Buffer
	long := "innodb ROW_FORMAT=COMPRESSED KEY_BLOCK_SIZE=4"
	writeTable(&b, [][]string{
		{"", "plain", "zipped"},
		{"engine", "innodb", long},
		{"differs from capture", "0", "1117 (affected-rows 3, row-count 1114)"},
	})
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	if len(lines) != 3 || !strings.Contains(lines[1], long) || !strings.Contains(lines[2], "1117 (affected-rows 3, row-count 1114)") {
		t.Fatalf("cells cut:\n%s", b.String())
	}
	for _, l := range lines {
		if len(l) != len(lines[0]) {
			t.Errorf("rows of different widths (%d, %d): columns do not line up:\n%s", len(l), len(lines[0]), b.String())
		}
	}
}
