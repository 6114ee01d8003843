package replay

import (
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// maxDigests bounds the per-digest histograms of a target; later digests
// are counted under "other".
const maxDigests = 500

func newHist() *hdrhistogram.Histogram {
	return hdrhistogram.New(1, int64(10*time.Minute/time.Microsecond), 3) // microseconds, 3 significant digits
}

func record(h *hdrhistogram.Histogram, d time.Duration) {
	us := d.Microseconds()
	if us < 1 {
		us = 1
	}
	_ = h.RecordValue(min(us, h.HighestTrackableValue()))
}

// LatencySummary is a histogram's summary in milliseconds.
type LatencySummary struct {
	Count int64   `json:"count"`
	Min   float64 `json:"min_ms"`
	Avg   float64 `json:"avg_ms"`
	P50   float64 `json:"p50_ms"`
	P95   float64 `json:"p95_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
}

func summarize(h *hdrhistogram.Histogram) LatencySummary {
	if h.TotalCount() == 0 {
		return LatencySummary{}
	}
	ms := func(us int64) float64 { return float64(us) / 1000 }
	return LatencySummary{Count: h.TotalCount(), Min: ms(h.Min()), Avg: h.Mean() / 1000, P50: ms(h.ValueAtQuantile(50)),
		P95: ms(h.ValueAtQuantile(95)), P99: ms(h.ValueAtQuantile(99)), Max: ms(h.Max())}
}

// targetStats are one target's counters and histograms. The target's
// outcome writer is the only writer; the reporter reads under mu.
type targetStats struct {
	mu              sync.Mutex
	queries         [3]int64 // by Class
	transactions    int64
	errors          int64
	deadlocks       int64 // deadlocks and lock-wait timeouts: engine behaviour
	connectFailures int64 // failed connection attempts
	connections     int64 // connections opened
	skipped         int64
	service         *hdrhistogram.Histogram
	lag             *hdrhistogram.Histogram // from the intended send instant (paced modes)
	byClass         [3]*hdrhistogram.Histogram
	byDigest        map[string]*digestStats
	interval        *hdrhistogram.Histogram
	// at the last interval report
	lastQueries [3]int64
	lastTrx     int64
	lastErrors  int64
}

type digestStats struct {
	text  string
	class Class
	hist  *hdrhistogram.Histogram
}

func newTargetStats() *targetStats {
	s := &targetStats{service: newHist(), lag: newHist(), interval: newHist(), byDigest: map[string]*digestStats{}}
	for i := range s.byClass {
		s.byClass[i] = newHist()
	}
	return s
}

// add records one executed statement.
func (s *targetStats) add(si *StmtInfo, service, lag time.Duration, paced bool, errCode uint16, trxEnd bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queries[si.Class]++
	if trxEnd {
		s.transactions++
	}
	switch errCode {
	case 0:
	case 1213, 1205: // deadlock, lock wait timeout
		s.deadlocks++
		s.errors++
	default:
		s.errors++
	}
	record(s.service, service)
	record(s.interval, service)
	record(s.byClass[si.Class], service)
	if paced {
		record(s.lag, lag)
	}
	key, text := si.Digest.ID, si.Digest.Text
	ds := s.byDigest[key]
	if ds == nil {
		if len(s.byDigest) >= maxDigests {
			key, text = "other", "(other statements)"
			ds = s.byDigest[key]
		}
		if ds == nil {
			ds = &digestStats{text: text, class: si.Class, hist: newHist()}
			s.byDigest[key] = ds
		}
	}
	record(ds.hist, service)
}

// intervalLine takes the counts since the last call, in sysbench's form.
type intervalLine struct {
	tps, qps, errs float64
	rwo            [3]float64
	p95ms          float64
}

func (s *targetStats) takeInterval(secs float64) intervalLine {
	s.mu.Lock()
	defer s.mu.Unlock()
	var l intervalLine
	var total int64
	for i := range s.queries {
		d := s.queries[i] - s.lastQueries[i]
		l.rwo[i] = float64(d) / secs
		total += d
	}
	l.qps = float64(total) / secs
	l.tps = float64(s.transactions-s.lastTrx) / secs
	l.errs = float64(s.errors-s.lastErrors) / secs
	l.p95ms = float64(s.interval.ValueAtQuantile(95)) / 1000
	s.lastQueries, s.lastTrx, s.lastErrors = s.queries, s.transactions, s.errors
	s.interval.Reset()
	return l
}
