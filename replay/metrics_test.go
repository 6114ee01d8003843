package replay

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/tandemdb/tandem/compare"
	"github.com/tandemdb/tandem/latency"
	"github.com/tandemdb/tandem/sandbox/sandboxtest"
	"github.com/tandemdb/tandem/store"
)

// A capture of 10,000 statement shapes exports K+1 digest label values per
// target (the top K and "other"), the metrics lint clean, and the
// statement counters equal the report's.
func TestMetricsCardinalityAndCounts(t *testing.T) {
	srv := sandboxtest.Server(t, "innodb")
	_, a := srv.FreshDB(t)
	ta := tgt(t, "a", a, "")
	var sqls []string
	for i := range 10000 {
		sqls = append(sqls, fmt.Sprintf("SELECT 1 AS c%d", i)) // a digest each
	}
	sqls = append(sqls, "SELECT * FROM no_such_table", "SELECT 1 AS c0")
	capDir := writeCapture(t, sqls)
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	const k = 7
	var last Progress
	calls := 0
	rep := replayRun(t, capDir, func(c *Config) {
		c.Speed, c.Metrics, c.MetricsDigests = 0, m, k
		c.Progress = func(p Progress) { last = p; calls++ }
	}, ta)
	// Progress ends at every record of the capture, once finished.
	if !last.Finished || last.Done != last.Total || last.Total != 10002+2 || last.ByTime || last.Point != "replay" {
		t.Errorf("last progress %+v after %d calls; want 10004 of 10004 records, finished", last, calls)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*dto.MetricFamily{}
	series := 0
	for _, mf := range mfs {
		byName[mf.GetName()] = mf
		series += len(mf.GetMetric())
	}
	label := func(m *dto.Metric, name string) string {
		for _, l := range m.GetLabel() {
			if l.GetName() == name {
				return l.GetValue()
			}
		}
		return ""
	}
	digests := map[string]bool{}
	var other uint64
	for _, mm := range byName["tandem_replay_digest_duration_seconds"].GetMetric() {
		digests[label(mm, "digest")] = true
		if label(mm, "digest") == "other" {
			other = mm.GetHistogram().GetSampleCount()
		}
		if label(mm, "run") != rep.RunID || label(mm, "target") != "a" {
			t.Errorf("digest series labels %v", mm.GetLabel())
		}
	}
	if len(digests) != k+1 || !digests["other"] {
		t.Errorf("%d digest label values, want %d (top %d and other): %v", len(digests), k+1, k, digests)
	}
	if n := len(byName["tandem_replay_digest_info"].GetMetric()); n != k {
		t.Errorf("%d digest_info series, want %d", n, k)
	}
	tr := rep.Targets[0]
	var ok, errs float64
	for _, mm := range byName["tandem_replay_statements_total"].GetMetric() {
		switch label(mm, "outcome") {
		case "ok":
			ok += mm.GetCounter().GetValue()
		case "error":
			errs += mm.GetCounter().GetValue()
		}
	}
	if ok+errs != float64(tr.Reads+tr.Writes+tr.Other) || errs != 1 || tr.Errors != 1 {
		t.Errorf("statements: ok %v error %v; report: %d statements, %d errors", ok, errs, tr.Reads+tr.Writes+tr.Other, tr.Errors)
	}
	if ok+errs != 10002 {
		t.Errorf("%v statements counted, want 10002", ok+errs)
	}
	// The top 7 hold 8 statements (c0 twice); "other" the rest but the error.
	if other != 10002-8 {
		t.Errorf("other digests: %d statements, want %d", other, 10002-8)
	}
	for _, mm := range byName["tandem_replay_errors_total"].GetMetric() {
		if label(mm, "code") != "1146" || mm.GetCounter().GetValue() != 1 {
			t.Errorf("errors_total %v = %v, want code 1146 once", mm.GetLabel(), mm.GetCounter().GetValue())
		}
	}
	// Every divergence class and ambiguity reason is exported, zeros too,
	// from the one list each (compare.Classes, compare.Reasons), and the
	// latency buckets are the one set the proxy and the shadows use.
	for name, want := range map[string][]string{
		"tandem_replay_divergences_total|class":      compare.Classes,
		"tandem_replay_order_ambiguous_total|reason": compare.Reasons,
	} {
		family, lbl, _ := strings.Cut(name, "|")
		var got []string
		for _, mm := range byName[family].GetMetric() {
			if label(mm, "against") == "capture" {
				got = append(got, label(mm, lbl))
			}
		}
		if slices.Sort(got); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
			t.Errorf("%s %s values %v, want %v", family, lbl, got, want)
		}
	}
	for _, mm := range byName["tandem_replay_statement_duration_seconds"].GetMetric() {
		var bounds []float64
		for _, b := range mm.GetHistogram().GetBucket() {
			bounds = append(bounds, b.GetUpperBound())
		}
		if !slices.Equal(bounds, latency.MetricBuckets()) {
			t.Errorf("statement_duration buckets %v, want latency.MetricBuckets", bounds)
		}
	}
	t.Logf("%d series for one target, K=%d", series, k)
}

// A shard's share of the records, for its progress: the shards' shares add
// up to the capture.
func TestRecordsInShards(t *testing.T) {
	x := &captureIndex{records: 0, recordsOf: map[uint64]uint64{}}
	for s := uint64(1); s <= 50; s++ {
		x.recordsOf[s] = s
		x.records += s
	}
	var sum uint64
	for i := range 4 {
		n := x.recordsIn(store.Shard{Index: i, Count: 4})
		if n == 0 || n == x.records {
			t.Errorf("shard %d/4: %d of %d records", i, n, x.records)
		}
		sum += n
	}
	if sum != x.records || x.recordsIn(store.Shard{}) != x.records {
		t.Errorf("shards hold %d records, the capture %d", sum, x.records)
	}
}
