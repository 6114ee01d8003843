package replay

import (
	"cmp"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tandemdb/tandem/compare"
	"github.com/tandemdb/tandem/internal/textclip"
	"github.com/tandemdb/tandem/latency"
	"github.com/tandemdb/tandem/sqlinfo"
	"github.com/tandemdb/tandem/store"
)

// Metrics exports replays to Prometheus. It is a collector: a scrape
// merges the workers' own statistics (see stats.go), so a statement costs
// nothing more with metrics on than off. Every series carries the run's id
// (label run) and, but for the capture-wide ones, the target's name:
// several runs, and the shards of one run, aggregate with sum by.
//
// Latency histograms are the run's own (package latency) exported at
// fixed bucket bounds (latency.MetricBuckets); a bucket's count is exact up to the
// 1/128 resolution of the run's histograms. Divergences are found by the
// merge join after a replay point ends, so their counters move then, not
// during the replay.
type Metrics struct {
	mu   sync.Mutex
	runs []*runMetrics
}

// runMetrics is one run's state as the collector sees it.
type runMetrics struct {
	id      string
	targets []store.RunTarget
	total   uint64         // records per pass
	top     map[string]int // top digests of the capture: id → rank
	topList []string
	info    map[string]store.DigestInfo
	done    [][]*runner // finished points
	results []map[string]*store.TargetResult
	live    []*runner
}

// maxErrorCodes bounds the code label of tandem_replay_errors_total per
// target (the rest count as "other").
const maxErrorCodes = 10

// NewMetrics creates replay metrics registered with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{}
	reg.MustRegister(m)
	return m
}

var (
	mDesc = func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("tandem_replay_"+name, help, labels, nil)
	}
	descStatements   = mDesc("statements_total", "Statements replayed, by target, class (read, write, other) and outcome (ok, error, skipped).", "run", "target", "class", "outcome")
	descTransactions = mDesc("transactions_total", "Transactions completed (COMMIT, ROLLBACK or an autocommit statement).", "run", "target")
	descLatency      = mDesc("statement_duration_seconds", "Statement service time (sent to last byte of the reply), by class.", "run", "target", "class")
	descDigest       = mDesc("digest_duration_seconds", "Statement service time of the capture's most frequent digests (--metrics-digests; the rest as \"other\").", "run", "target", "digest")
	descDigestInfo   = mDesc("digest_info", "The normalized text and class of each digest label value (always 1).", "run", "digest", "class", "text")
	descLag          = mDesc("lag_seconds", "How late statements were sent against the capture's pacing scaled by --speed (paced replays only).", "run", "target")
	descErrors       = mDesc("errors_total", "Failed statements and lifecycle commands by error code (the 10 most frequent per target; the rest as \"other\").", "run", "target", "code")
	descDeadlocks    = mDesc("deadlocks_total", "Deadlocks and lock wait timeouts (1213, 1205) the target gave, retried or not.", "run", "target")
	descRetries      = mDesc("retries_total", "Transactions retried after a deadlock or lock wait timeout, by result (succeeded, failed).", "run", "target", "result")
	descFailedTrx    = mDesc("failed_transactions_total", "Transactions that failed for good on the target (a deadlock or lock wait timeout on every retry, or the connection lost): rolled back, never committed in part.", "run", "target")
	descOrder        = mDesc("order_total", "Ordering between sessions: records that waited (wait), transactions run again so a blocked statement could go first (rerun), records released early (released), and of those the changes that went ahead of a conflicting change not yet done (reordered: their tables may differ from then on by replay's doing).", "run", "target", "event")
	descDone         = mDesc("records_done_total", "Capture records handled (statements, lifecycle commands, skipped).", "run", "target")
	descRecords      = mDesc("records", "Records in one pass over the capture.", "run")
	descPass         = mDesc("pass", "The pass over the capture under way (1 = first; --loop, --duration).", "run", "target")
	descTargetInfo   = mDesc("target_info", "The target's engine, server version and whether it is the baseline (always 1).", "run", "target", "engine", "version", "baseline")
	descUp           = mDesc("target_up", "1 while the target replays (or replayed to the end), 0 once it failed.", "run", "target")
	descDivergences  = mDesc("divergences_total", "Statements whose outcome differs, by class, against the baseline target or the captured response (order-ambiguous ones are apart).", "run", "target", "against", "class")
	descAmbiguous    = mDesc("order_ambiguous_total", "Differing outcomes the capture's own order leaves open, or that replay could not order exactly, by reason.", "run", "target", "against", "reason")
	descCompared     = mDesc("compared_total", "Statements compared, against the baseline target or the captured response.", "run", "target", "against")
	descNondet       = mDesc("nondeterministic_total", "Nondeterministic statements (compared only for errors).", "run", "target", "against")
)

// Describe sends nothing: the label sets depend on the run (an unchecked
// collector).
func (m *Metrics) Describe(chan<- *prometheus.Desc) {}

// begin registers a run; k is how many digests get a label of their own.
func (m *Metrics) begin(id string, targets []store.RunTarget, x *captureIndex, k int) *runMetrics {
	if m == nil {
		return nil
	}
	rm := &runMetrics{id: id, targets: targets, total: x.records, top: map[string]int{}, info: map[string]store.DigestInfo{}}
	for i, d := range x.topDigests(k) {
		rm.top[d] = i
		rm.topList = append(rm.topList, d)
		dc := x.digests[d]
		rm.info[d] = store.DigestInfo{Text: dc.text, Class: dc.class.String()}
	}
	m.mu.Lock()
	m.runs = append(m.runs, rm)
	m.mu.Unlock()
	return rm
}

// start makes a point's runners the live ones.
func (rm *runMetrics) start(m *Metrics, runners []*runner) {
	if rm == nil {
		return
	}
	m.mu.Lock()
	rm.live = runners
	m.mu.Unlock()
}

// end moves the live runners to the finished points, with their results.
func (rm *runMetrics) end(m *Metrics, results []*store.TargetResult) {
	if rm == nil {
		return
	}
	byName := map[string]*store.TargetResult{}
	for _, r := range results {
		if r != nil {
			byName[r.Target] = r
		}
	}
	m.mu.Lock()
	rm.done = append(rm.done, rm.live)
	rm.results = append(rm.results, byName)
	rm.live = nil
	m.mu.Unlock()
}

// targetView is what the collector merges for one target of a run.
type targetView struct {
	t       totals
	records int64
	pass    int64
	up      bool
	results []*store.TargetResult
}

// Collect merges every run's statistics per target and sends them.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	runs := slices.Clone(m.runs)
	type snap struct {
		rm      *runMetrics
		points  [][]*runner
		results []map[string]*store.TargetResult
	}
	snaps := make([]snap, len(runs))
	for i, rm := range runs {
		pts := slices.Clone(rm.done)
		if rm.live != nil {
			pts = append(pts, rm.live)
		}
		snaps[i] = snap{rm, pts, slices.Clone(rm.results)}
	}
	m.mu.Unlock()

	for _, s := range snaps {
		rm := s.rm
		ch <- prometheus.MustNewConstMetric(descRecords, prometheus.GaugeValue, float64(rm.total), rm.id)
		for _, t := range rm.targets {
			ch <- prometheus.MustNewConstMetric(descTargetInfo, prometheus.GaugeValue, 1, rm.id, t.Name, t.Engine, t.Version, strconv.FormatBool(t.Baseline))
		}
		for _, d := range rm.topList {
			in := rm.info[d]
			ch <- prometheus.MustNewConstMetric(descDigestInfo, prometheus.GaugeValue, 1, rm.id, digestLabel(d), in.Class, textclip.Clip(in.Text, 200))
		}
		views := map[string]*targetView{}
		var names []string
		for _, pt := range s.points {
			for _, rn := range pt {
				v := views[rn.t.Name]
				if v == nil {
					v = &targetView{up: true}
					views[rn.t.Name] = v
					names = append(names, rn.t.Name)
				}
				rn.mergeInto(&v.t, &v.records)
				v.pass = max(v.pass, rn.pass.Load())
				v.up = v.up && rn.failed() == ""
			}
		}
		for _, res := range s.results {
			for name, r := range res {
				if v := views[name]; v != nil {
					v.results = append(v.results, r)
				}
			}
		}
		for _, name := range names {
			rm.collectTarget(ch, name, views[name])
		}
	}
}

func (rm *runMetrics) collectTarget(ch chan<- prometheus.Metric, name string, v *targetView) {
	id := rm.id
	counter := func(d *prometheus.Desc, n int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(n), append([]string{id, name}, labels...)...)
	}
	c := &v.t.c
	for cl := range c.queries {
		class := sqlinfo.Class(cl).String()
		counter(descStatements, c.queries[cl]-c.errClass[cl], class, "ok")
		counter(descStatements, c.errClass[cl], class, "error")
		counter(descStatements, c.skippedClass[cl], class, "skipped")
		ch <- constHistogram(descLatency, &v.t.byClass[cl], id, name, class)
	}
	counter(descTransactions, c.trx)
	counter(descDeadlocks, c.deadlocks)
	counter(descRetries, c.retriesOK, "succeeded")
	counter(descRetries, c.retries-c.retriesOK, "failed")
	counter(descFailedTrx, c.failedTrx)
	counter(descOrder, c.orderWaits, "wait")
	counter(descOrder, c.orderReruns, "rerun")
	counter(descOrder, c.orderReleased, "released")
	counter(descOrder, c.reordered, "reordered")
	counter(descDone, v.records)
	ch <- prometheus.MustNewConstMetric(descPass, prometheus.GaugeValue, float64(v.pass), id, name)
	up := 0.0
	if v.up {
		up = 1
	}
	ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, up, id, name)
	ch <- constHistogram(descLag, &v.t.lag, id, name)

	// Errors: the most frequent codes, the rest as other.
	type kv struct {
		k string
		n int64
	}
	var codes []kv
	for k, n := range v.t.errCodes {
		codes = append(codes, kv{k, n})
	}
	slices.SortFunc(codes, func(a, b kv) int { return cmp.Or(cmp.Compare(b.n, a.n), cmp.Compare(a.k, b.k)) })
	var other int64
	for i, e := range codes {
		if i < maxErrorCodes {
			counter(descErrors, e.n, e.k)
		} else {
			other += e.n
		}
	}
	if other > 0 {
		counter(descErrors, other, "other")
	}

	// Digests: the capture's top K, the rest merged as other.
	byDigest := make([]latency.Histogram, len(rm.topList)+1)
	for di, h := range v.t.digests {
		slot := len(rm.topList)
		if di < len(v.t.digestIDs) {
			if r, ok := rm.top[v.t.digestIDs[di]]; ok {
				slot = r
			}
		}
		byDigest[slot].Merge(h)
	}
	for i, d := range rm.topList {
		ch <- constHistogram(descDigest, &byDigest[i], id, name, digestLabel(d))
	}
	if h := &byDigest[len(rm.topList)]; h.Count() > 0 {
		ch <- constHistogram(descDigest, h, id, name, "other")
	}

	// Divergences, once a point has been compared.
	for _, against := range []string{"baseline", "capture"} {
		var compared, nondet int64
		byClass, ambiguous := map[string]int64{}, map[string]int64{}
		seen := false
		for _, r := range v.results {
			d := r.VsCapture
			if against == "baseline" {
				d = r.VsBaseline
			}
			if d == nil {
				continue
			}
			seen = true
			compared += d.Compared
			nondet += d.Nondeterministic
			for k, n := range d.ByClass {
				byClass[k] += n
			}
			for k, n := range d.AmbiguousBy {
				ambiguous[k] += n
			}
		}
		if !seen {
			continue
		}
		counter(descCompared, compared, against)
		counter(descNondet, nondet, against)
		// Every class and reason, zeros too: a panel of a run without
		// divergences shows 0, not "no data".
		for _, k := range compare.Classes {
			counter(descDivergences, byClass[k], against, k)
			delete(byClass, k)
		}
		for k, n := range byClass {
			counter(descDivergences, n, against, k)
		}
		for _, k := range compare.Reasons {
			counter(descAmbiguous, ambiguous[k], against, k)
			delete(ambiguous, k)
		}
		for k, n := range ambiguous {
			counter(descAmbiguous, n, against, k)
		}
	}
}

// constHistogram exports h at latency.MetricBuckets.
func constHistogram(d *prometheus.Desc, h *latency.Histogram, labels ...string) prometheus.Metric {
	bounds := latency.MetricBuckets()
	buckets := make(map[float64]uint64, len(bounds))
	for _, b := range bounds {
		buckets[b] = h.CountAtOrBelow(int64(b * float64(time.Second)))
	}
	return prometheus.MustNewConstHistogram(d, h.Count(), float64(h.Sum())/1e9, buckets, labels...)
}

// digestLabel is a digest's label value: the short form of its id.
func digestLabel(id string) string {
	return sqlinfo.Digest{ID: id}.Short()
}

// mergeInto adds the runner's statistics to t and its record count to
// records.
func (rn *runner) mergeInto(t *totals, records *int64) {
	// Under the retired totals' lock: a shard's statistics are in them or
	// in the shard, never in both or neither (collect moves them).
	rn.retired.Lock()
	t.add(&rn.retired.t)
	for _, st := range rn.stats {
		t.merge(st)
		*records += st.records.Load()
	}
	rn.retired.Unlock()
	t.init()
	rn.reg.mu.RLock()
	t.digestIDs = slices.Clone(rn.reg.ids)
	rn.reg.mu.RUnlock()
}
