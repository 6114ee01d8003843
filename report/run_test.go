package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/tandemdb/tandem/compare"
	"path/filepath"
	"regexp"
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
		VsBaseline: &store.Divergences{Compared: 100, Ambiguous: 2, ByClass: map[string]int64{"row-content": 3}, Missing: 4, Extra: 1},
		VsCapture: &store.Divergences{Compared: 100, Ambiguous: 9, AmbiguousBy: map[string]int64{
			compare.ReasonBypassed: 3, compare.ReasonNotReplayed: 2, compare.ReasonFailedTrx: 1, compare.ReasonStartedBefore: 1}}}))
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
		"  ran on one side only                              -                      5\n",
		// Compared with the capture: 9 counted apart, 2 of them for the
		// order, each other reason on its own row.
		"  compared with capture                             -                    100\n" +
			"    order-ambiguous                                 -                      2\n" +
			"    trx began before capture                        -                      1\n" +
			"    after a failed trx                              -                      1\n" +
			"    after a skipped write                           -                      2\n" +
			"    after a bypassed write                          -                      3\n",
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

// Every target lists the baseline's top statements (and its own): each
// target's top-N used to be cut separately, so that the table of the
// baseline's statements showed "-" for a target on statements it ran,
// and the p95-ratio chart lacked their bars.
func TestEveryTargetListsTheBaselinesTopStatements(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	w, err := store.CreateRun(dir, store.RunMeta{RunID: "r1", Command: "replay", Capture: "/cap", Baseline: "a",
		Targets: []store.RunTarget{{Name: "a", Engine: "InnoDB", Baseline: true}, {Name: "b", Engine: "ROCKSDB"}}})
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(w.PutPoint(store.Point{Point: 0, Label: "replay", Targets: []string{"a", "b"}, Order: "capture", IO: "blocking", Elapsed: 1}))
	// 30 statements: on a, d00 takes longest and d29 least; on b the
	// reverse, so b's own top 20 lacks a's first 10.
	const n = 30
	for i := range n {
		id := fmt.Sprintf("d%02d", i)
		must(w.PutDigest(id, store.DigestInfo{Text: "select " + id, Class: "read"}))
		must(w.PutHistogram(0, 0, store.SeriesDigest, id, hist(float64(n-i))))
		must(w.PutHistogram(0, 1, store.SeriesDigest, id, hist(float64(i+1))))
	}
	for ti, name := range []string{"a", "b"} {
		must(w.PutHistogram(0, ti, store.SeriesService, "", hist(1)))
		must(w.PutResult(0, ti, &store.TargetResult{Target: name, Elapsed: 1, Transactions: 1, Reads: n}))
	}
	must(w.End(store.RunEnd{Elapsed: 1}))
	rep, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	a, b := rep.Points[0].Targets[0], rep.Points[0].Targets[1]
	ids := func(ds []DigestLatency) map[string]bool {
		m := map[string]bool{}
		for _, d := range ds {
			m[d.Digest] = true
		}
		return m
	}
	if len(a.TopDigests) != TopDigests {
		t.Errorf("a lists %d statements, want its top %d", len(a.TopDigests), TopDigests)
	}
	// b: its own top 20 (d29..d10) and a's top 20 (d00..d19): all 30.
	if got := ids(b.TopDigests); len(got) != n || !got["d00"] || !got["d29"] {
		t.Errorf("b lists %d statements (%v), want all %d", len(got), got, n)
	}
	for _, d := range b.TopDigests {
		if d.Digest == "d00" && (d.RatioP95 < 1.0/n || d.RatioP95 > 1.0/n*1.01) {
			t.Errorf("b's d00: p95 ratio %v, want 1/%d", d.RatioP95, n)
		}
	}
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if i := strings.Index(text.String(), "statements by total time"); i < 0 || strings.Contains(text.String()[i:], " - ") || strings.Contains(text.String()[i:], " -\n") {
		t.Errorf("the statements table has a hole:\n%s", text.String())
	}
}

// Footprint rows are named as captured (so targets line up), and the
// report says in which database each target measured them: a target
// whose DSN names sbtest_compressed measured sbtest_compressed.sbtest1,
// which the table used to show as sbtest.sbtest1 without a word.
func TestFootprintSaysWhereATargetMeasured(t *testing.T) {
	var a, b Target
	a.Name, a.Footprint = "a", []store.TableFootprint{{Table: "sbtest.sbtest1", DataBytes: 1024, IndexBytes: 1024}}
	b.Name, b.Footprint = "b", []store.TableFootprint{{Table: "sbtest.sbtest1", Measured: "sbtest_compressed.sbtest1", DataBytes: 512, IndexBytes: 512}}
	pt := Point{Targets: []Target{a, b}}
	var out bytes.Buffer
	WriteFootprint(&out, &pt, "a", "storage footprint after the replay")
	want := "  tables are named as captured; on b, sbtest is database sbtest_compressed\n"
	if !strings.Contains(out.String(), want) || strings.Count(out.String(), "named as captured") != 1 ||
		!strings.Contains(out.String(), "512 B + 512 B 0.50x") {
		t.Errorf("footprint table:\n%s\nwant the line %q once", out.String(), want)
	}
}

// The rate charts leave out a last interval the run ended in (0.05 s of
// 1 s intervals: a rate over a sliver, drawn as a spike off the chart
// before) and keep room above the lines for the legend.
func TestOverTimeLeavesOutThePartialLastInterval(t *testing.T) {
	var a Target
	a.Name = "a"
	for i := range 3 {
		a.Intervals = append(a.Intervals, Interval{Start: float64(i), Length: 1, QPS: 100})
	}
	a.Intervals = append(a.Intervals, Interval{Start: 3, Length: 0.05, QPS: 2000})
	c, err := overTime(&Point{Targets: []Target{a}}, "qps", "q", "queries/s", func(iv Interval) float64 { return iv.QPS })
	if err != nil || c == nil {
		t.Fatalf("overTime: %v, %v", c, err)
	}
	if c.plot.X.Max != 3 || c.plot.Y.Max != 130 {
		t.Errorf("x to %v, y to %v; want 3 (the last whole interval) and 130 (100 and room for the legend)", c.plot.X.Max, c.plot.Y.Max)
	}
	if got := len(wholeIntervals(a.Intervals[:3])); got != 3 {
		t.Errorf("whole intervals of 3 whole ones: %d", got)
	}
}

// A transaction that failed for good is listed with the tables it writes,
// and one that writes none says so (the line ended in "writing " before).
func TestFailedTransactionsSayWhatTheyWrite(t *testing.T) {
	var a Target
	a.Name = "a"
	a.FailedTransactions = 2
	a.FailedByCode = map[string]int64{"1213": 2}
	a.Failures = []store.FailedTrx{
		{Session: 3, FirstSeq: 10, FailedSeq: 11, LastSeq: 12, Statements: 3, Code: 1213, Tables: []string{"sbtest.sbtest1"}},
		{Session: 4, FirstSeq: 20, FailedSeq: 21, LastSeq: 22, Statements: 3, Code: 1213},
	}
	rep := &Report{Baseline: "a", Points: []Point{{Targets: []Target{a}}}}
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"seq 10–12 (3 statements, failed at seq 11) writing sbtest.sbtest1\n", "seq 20–22 (3 statements, failed at seq 21) writing nothing\n"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("want %q in:\n%s", want, text.String())
		}
	}
}

// Each reason a difference is counted apart for has its row, and the
// samples' heading says how many were counted apart for which reason.
func TestTextNamesEveryReasonCountedApart(t *testing.T) {
	var a, b Target
	a.Name, b.Name = "a", "b"
	b.VsBaseline = &store.Divergences{Compared: 10, Ambiguous: 3, ByClass: map[string]int64{compare.Content: 1},
		AmbiguousBy: map[string]int64{compare.ReasonCommitOverlap: 1, compare.ReasonChosenValues: 1, compare.ReasonTiedOrder: 1},
		Samples:     []store.Sample{{Class: compare.Content, Seq: 7, Session: 1, Statement: "SELECT u FROM t"}}}
	b.VsCapture = &store.Divergences{Compared: 10, Ambiguous: 4, AmbiguousBy: map[string]int64{compare.ReasonReplayOrder: 1, compare.ReasonChosenValues: 1, compare.ReasonTiedOrder: 2}}
	rep := &Report{Baseline: "a", Finished: true, Points: []Point{{Targets: []Target{a, b}}}}
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`(?m)^  order-ambiguous +- +1$`,
		`(?m)^  after a nondeterministic write +- +1$`,
		`(?m)^  tied rows of an ORDER BY +- +1$`,
		`(?m)^    order-ambiguous +- +1$`,
		`(?m)^    after a nondeterministic write +- +1$`,
		`(?m)^    tied rows of an ORDER BY +- +2$`,
		`divergences of b from a \(1, and 3 counted apart \(commit-overlap 1, nondeterministic-write 1, tied-order 1\)\); 1 of 1 samples`,
	} {
		if !regexp.MustCompile(want).MatchString(text.String()) {
			t.Errorf("text lacks %s:\n%s", want, text.String())
		}
	}
}
