package report

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/tandemdb/tandem/latency"
	"github.com/tandemdb/tandem/store"
)

// Report is a replay run as people read it: per target side by side, with
// latency summaries computed from the run's stored histograms (never
// averaged percentiles), divergences, the end state. `tandem replay` prints
// it when it ends and `tandem report RUN_DIR` prints it again from the run
// directory, identically.
//
// JSON field names (stable; --json and --format json):
//
//	run_dirs, run_id, command, capture, capture_source, started (RFC 3339),
//	elapsed_seconds, finished, baseline, settings [{name, value}], notes,
//	capture_sessions {open_at_start, open_at_start_in_transaction,
//	  connected_during, quit_or_disconnected, open_at_stop} (only for a
//	  capture with sessions open at its start or stop),
//	points: [{point, label, threads, order, io, started, elapsed_seconds,
//	  targets: [target]}]
//
// and for each target: name, addr, engine, options, version, baseline;
// the counters of store.TargetResult (transactions, reads, writes, other,
// errors, error_codes, deadlocks_and_lock_waits, retries,
// retries_succeeded, connections, connect_failures, skipped,
// skipped_by_reason, order_waits, order_released, order_timeouts, failed,
// divergences_from_baseline, divergences_from_capture, end_state,
// created_tables, footprint, footprint_before, footprint_error); tps, qps; latency, lag_from_intended and
// latency_by_class.{read,write,other} as summaries {count, min_ms, avg_ms,
// p50_ms, p95_ms, p99_ms, max_ms}; top_digests [{digest, text, class,
// total_seconds, latency, p95_ratio_to_baseline}]; intervals [{start_s,
// length_s, tps, qps, reads_ps, writes_ps, other_ps, errors_ps, p95_ms,
// threads}].
type Report struct {
	RunDirs       []string        `json:"run_dirs"`
	RunID         string          `json:"run_id"`
	Shards        []store.Shard   `json:"shards,omitempty"`
	Command       string          `json:"command"`
	Capture       string          `json:"capture"`
	CaptureSource string          `json:"capture_source"`
	Started       time.Time       `json:"started"`
	Elapsed       float64         `json:"elapsed_seconds"`
	Finished      bool            `json:"finished"`
	Baseline      string          `json:"baseline"`
	Settings      []store.Setting `json:"settings"`
	Notes         []string        `json:"notes,omitempty"`
	// CaptureSessions counts the capture's sessions open at its start and
	// stop, when it began or ended on a running proxy with sessions open.
	CaptureSessions *store.CaptureSessions `json:"capture_sessions,omitempty"`
	Points          []Point                `json:"points"`

	digestInfo map[string]store.DigestInfo // the run's digests (for Merge)
	// fromIntervals: for a run that stored no results, each target's sums
	// over its intervals (by target index).
	fromIntervals map[int]intervalTotals
}

// Point is one replay of the run: a plain replay has one.
type Point struct {
	store.Point
	Targets []Target `json:"targets"`
}

// Target is one target's figures in one point.
type Target struct {
	store.RunTarget
	store.TargetResult
	TPS        float64            `json:"tps"`
	QPS        float64            `json:"qps"`
	Latency    Summary            `json:"latency"`
	Lag        *Summary           `json:"lag_from_intended,omitempty"`
	ByClass    map[string]Summary `json:"latency_by_class"`
	TopDigests []DigestLatency    `json:"top_digests"`
	Intervals  []Interval         `json:"intervals,omitempty"`

	hist      map[store.Series]*latency.Histogram
	digests   map[string]*latency.Histogram
	intervals []store.Interval
}

// Summary is a histogram's summary in milliseconds.
type Summary struct {
	Count int64   `json:"count"`
	Min   float64 `json:"min_ms"`
	Avg   float64 `json:"avg_ms"`
	P50   float64 `json:"p50_ms"`
	P95   float64 `json:"p95_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
}

// Summarize summarizes h.
func Summarize(h *latency.Histogram) Summary {
	if h == nil || h.Count() == 0 {
		return Summary{}
	}
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	return Summary{Count: int64(h.Count()), Min: ms(h.Min()), Avg: ms(h.Mean()), P50: ms(h.Quantile(0.50)),
		P95: ms(h.Quantile(0.95)), P99: ms(h.Quantile(0.99)), Max: ms(h.Max())}
}

// DigestLatency is one statement shape's latency on a target.
type DigestLatency struct {
	Digest  string  `json:"digest"`
	Text    string  `json:"text"`
	Class   string  `json:"class"`
	Total   float64 `json:"total_seconds"`
	Latency Summary `json:"latency"`
	// RatioP95 is this p95 over the baseline's p95 for the same digest.
	RatioP95 float64 `json:"p95_ratio_to_baseline,omitempty"`
}

// Interval is one line of a target's interval series.
type Interval struct {
	Start   float64 `json:"start_s"`
	Length  float64 `json:"length_s"`
	TPS     float64 `json:"tps"`
	QPS     float64 `json:"qps"`
	Reads   float64 `json:"reads_ps"`
	Writes  float64 `json:"writes_ps"`
	Other   float64 `json:"other_ps"`
	Errors  float64 `json:"errors_ps"`
	P95     float64 `json:"p95_ms"`
	Threads uint64  `json:"threads"`
}

// TopDigests is how many statement digests a target lists.
const TopDigests = 20

// Load reads the run in dir (an encrypted one with store.WithKey).
func Load(dir string, opts ...store.Option) (*Report, error) {
	r, err := store.OpenRun(dir, opts...)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	m := r.Meta()
	rep := &Report{RunDirs: []string{dir}, RunID: m.RunID, Command: m.Command, Capture: m.Capture, CaptureSource: m.CaptureSource,
		Started: m.Started, Baseline: m.Baseline, Settings: m.Settings, CaptureSessions: m.CaptureSessions}
	if m.Shard != nil {
		rep.Shards = []store.Shard{*m.Shard}
	}
	if end, ok := r.End(); ok {
		rep.Finished, rep.Elapsed, rep.Notes = !end.Interrupted, end.Elapsed, end.Notes
	}
	digests, err := r.Digests()
	if err != nil {
		return nil, err
	}
	points, err := r.Points()
	if err != nil {
		return nil, err
	}
	if len(points) == 0 {
		// Killed (or still running): a point's results are stored when it
		// ends, its per-second intervals as it runs.
		pt, secs, err := fromIntervals(r, m)
		if err != nil {
			return nil, err
		}
		if pt == nil {
			return nil, fmt.Errorf("report: %s holds no results: it was created and nothing ran, or the replay was killed within its first second (what a replay ran is stored each second, its results when it ends)", dir)
		}
		points = []store.Point{pt.p}
		rep.Notes = append(rep.Notes, fmt.Sprintf("the replay was killed, or is still running: it stored no results, so the figures are what its per-second intervals hold, up to %.1fs (transactions, queries, errors, latencies); comparisons, divergences and end states are computed when a replay ends, and are missing", secs))
		rep.fromIntervals = pt.targets
	}
	for _, p := range points {
		pt := Point{Point: p}
		for ti, rt := range m.Targets {
			if !slices.Contains(p.Targets, rt.Name) {
				continue
			}
			t := Target{RunTarget: rt, hist: map[store.Series]*latency.Histogram{}}
			res, ok, err := r.Result(p.Point, ti)
			if err != nil {
				return nil, err
			}
			if ok {
				t.TargetResult = *res
			} else if x, found := rep.fromIntervals[ti]; found {
				t.TargetResult = x.res
				t.hist[store.SeriesService] = x.lat
			}
			t.Target = rt.Name
			for _, s := range []store.Series{store.SeriesService, store.SeriesLag, store.SeriesRead, store.SeriesWrite, store.SeriesOther} {
				h, ok, err := r.Histogram(p.Point, ti, s, "")
				if err != nil {
					return nil, err
				}
				if ok {
					t.hist[s] = h
				}
			}
			if t.digests, err = r.DigestHistograms(p.Point, ti); err != nil {
				return nil, err
			}
			if t.intervals, err = r.Intervals(p.Point, ti); err != nil {
				return nil, err
			}
			pt.Targets = append(pt.Targets, t)
		}
		rep.Points = append(rep.Points, pt)
	}
	rep.digestInfo = digests
	rep.finish(digests)
	return rep, nil
}

// intervalTotals is a target's sums over its stored intervals.
type intervalTotals struct {
	res store.TargetResult
	lat *latency.Histogram
}

type intervalPoint struct {
	p       store.Point
	targets map[int]intervalTotals
}

// fromIntervals sums the first point's intervals per target, for a run
// that stored no point (killed mid-way); nil when none were stored. secs
// is how far the last interval reached.
func fromIntervals(r *store.RunReader, m store.RunMeta) (*intervalPoint, float64, error) {
	out := &intervalPoint{targets: map[int]intervalTotals{}}
	var secs float64
	for ti, rt := range m.Targets {
		ivs, err := r.Intervals(0, ti)
		if err != nil {
			return nil, 0, err
		}
		if len(ivs) == 0 {
			continue
		}
		x := intervalTotals{res: store.TargetResult{Target: rt.Name}, lat: &latency.Histogram{}}
		for i := range ivs {
			iv := &ivs[i]
			x.res.Transactions += int64(iv.Transactions)
			x.res.Reads += int64(iv.Reads)
			x.res.Writes += int64(iv.Writes)
			x.res.Other += int64(iv.Other)
			x.res.Errors += int64(iv.Errors)
			x.res.Deadlocks += int64(iv.Deadlocks)
			x.res.Retries += int64(iv.Retries)
			x.lat.Merge(&iv.Latency)
			x.res.Elapsed = max(x.res.Elapsed, (iv.Start + iv.Length).Seconds())
		}
		secs = max(secs, x.res.Elapsed)
		out.targets[ti] = x
		out.p.Targets = append(out.p.Targets, rt.Name)
	}
	if len(out.targets) == 0 {
		return nil, 0, nil
	}
	out.p.Label, out.p.Elapsed, out.p.Order, out.p.IO = "replay", secs, "(not stored)", "(not stored)"
	return out, secs, nil
}

// finish computes the derived figures from counters and histograms.
func (rep *Report) finish(digests map[string]store.DigestInfo) {
	for pi := range rep.Points {
		pt := &rep.Points[pi]
		for ti := range pt.Targets {
			t := &pt.Targets[ti]
			if t.Elapsed > 0 {
				t.TPS = float64(t.Transactions) / t.Elapsed
				t.QPS = float64(t.Reads+t.Writes+t.Other) / t.Elapsed
			}
			t.Latency = Summarize(t.hist[store.SeriesService])
			if h := t.hist[store.SeriesLag]; h != nil && h.Count() > 0 {
				s := Summarize(h)
				t.Lag = &s
			}
			t.ByClass = map[string]Summary{"read": Summarize(t.hist[store.SeriesRead]), "write": Summarize(t.hist[store.SeriesWrite]),
				"other": Summarize(t.hist[store.SeriesOther])}
			t.TopDigests = t.TopDigests[:0]
			for id, h := range t.digests {
				d := digests[id]
				if id == otherDigest {
					d = store.DigestInfo{Text: "(other statements)", Class: "other"}
				}
				t.TopDigests = append(t.TopDigests, DigestLatency{Digest: id, Text: d.Text, Class: d.Class,
					Total: float64(h.Sum()) / 1e9, Latency: Summarize(h)})
			}
			slices.SortFunc(t.TopDigests, func(a, b DigestLatency) int {
				return cmp.Or(cmp.Compare(b.Total, a.Total), cmp.Compare(a.Digest, b.Digest))
			})
			t.Intervals = t.Intervals[:0]
			for _, iv := range t.intervals {
				secs := iv.Length.Seconds()
				if secs <= 0 {
					continue
				}
				t.Intervals = append(t.Intervals, Interval{Start: iv.Start.Seconds(), Length: secs, TPS: float64(iv.Transactions) / secs,
					QPS: float64(iv.Reads+iv.Writes+iv.Other) / secs, Reads: float64(iv.Reads) / secs, Writes: float64(iv.Writes) / secs,
					Other: float64(iv.Other) / secs, Errors: float64(iv.Errors) / secs, P95: float64(iv.Latency.Quantile(0.95)) / 1e6, Threads: iv.Threads})
			}
		}
		var base *Target
		for ti := range pt.Targets {
			if pt.Targets[ti].Name == rep.Baseline {
				base = &pt.Targets[ti]
			}
		}
		// Each target lists its own top statements and the baseline's
		// (the first target's without one), so that the tables and charts
		// that follow the baseline's show every target on each statement
		// it ran; "-" then means it did not run it.
		lead := base
		if lead == nil && len(pt.Targets) > 0 {
			lead = &pt.Targets[0]
		}
		keep := map[string]bool{}
		if lead != nil {
			for _, d := range lead.TopDigests[:min(TopDigests, len(lead.TopDigests))] {
				keep[d.Digest] = true
			}
		}
		for ti := range pt.Targets {
			t := &pt.Targets[ti]
			top := t.TopDigests[:0]
			for j, d := range t.TopDigests {
				if j < TopDigests || keep[d.Digest] {
					top = append(top, d)
				}
			}
			t.TopDigests = top
		}
		// Ratios to the baseline, per digest.
		if base == nil {
			continue
		}
		p95 := map[string]float64{}
		for id, h := range base.digests {
			p95[id] = float64(h.Quantile(0.95)) / 1e6
		}
		for ti := range pt.Targets {
			for j, d := range pt.Targets[ti].TopDigests {
				if b := p95[d.Digest]; b > 0 {
					pt.Targets[ti].TopDigests[j].RatioP95 = d.Latency.P95 / b
				}
			}
		}
	}
}

// otherDigest names the histogram of the digests past a run's bound.
const otherDigest = "other"

// Histogram returns one of a target's stored histograms (for charts and
// tests that recompute figures).
func (t *Target) Histogram(s store.Series) *latency.Histogram { return t.hist[s] }

// DigestHistogram returns a target's histogram of one digest.
func (t *Target) DigestHistogram(id string) *latency.Histogram { return t.digests[id] }

// ErrMixedRuns: runs given together are not shards of one run.
var ErrMixedRuns = errors.New("report: runs of different run ids")
