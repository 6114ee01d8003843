package replay

import (
	"fmt"
	"io"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tandemdb/tandem/latency"
	"github.com/tandemdb/tandem/sqlinfo"
	"github.com/tandemdb/tandem/store"
)

// Statistics are kept in shards per target (runner.stats, statShards of
// them), each under its own lock; a worker records into the shard its
// number picks (taken per statement, and by the collector once per
// interval), and the shards are merged per target when an interval ends,
// when metrics are scraped and when the run ends. Two workers share a
// lock only if they share a shard and run at the same instant, which the
// cores bound: statShards is several times their number.
//
// Memory: a latency.Histogram takes about 0.5 KiB plus 1 KiB per power of
// two its values span (4 to 8 for statement latencies in an interval; a
// long run's rare slow statements add more). A shard keeps 5 histograms,
// an interval histogram, and one per statement digest its workers run, up
// to maxDigests digests per run (the rest share "other"), and hands them
// to its target's retired totals at the end of every interval
// (retireInto): it holds only what one interval reached, about 300 KiB
// for a sysbench read/write workload, at most ~5 MiB for a capture of 500
// shapes or more; the cumulative histograms are kept once per target.
// So a target's statistics take the same memory at 16 sessions as at
// 5,000: kept per worker, they were 217 KiB a session (13.9 MB of a
// 64-session replay's 37 MB live heap). A worker whose session closed
// hands its lists to its runner and is forgotten (runner.retireWorker):
// memory follows the sessions open at once, not the sessions a capture
// ever had.

// statShards is how many statistics shards a target has: four per CPU,
// at least 16 and at most 256.
func statShards() int {
	return min(max(4*runtime.NumCPU(), 16), 256)
}

// newStatShards makes a target's statShards empty shards.
func newStatShards() []*wstats {
	st := make([]*wstats, statShards())
	for i := range st {
		st[i] = newWStats()
	}
	return st
}

// maxDigests bounds the digests a run keeps histograms for; later ones are
// counted under "other".
const maxDigests = 500

// digestRegistry numbers the digests of a run, shared by every target.
type digestRegistry struct {
	mu   sync.RWMutex
	byID map[string]int
	list []store.DigestInfo // by index; 0 is "other"
	ids  []string
}

func newDigestRegistry() *digestRegistry {
	return &digestRegistry{byID: map[string]int{"other": 0}, list: []store.DigestInfo{{Text: "(other statements)", Class: "other"}}, ids: []string{"other"}}
}

// seed numbers the capture's most frequent digests first, so that they,
// not the first ones replayed, get histograms of their own.
func (d *digestRegistry) seed(x *captureIndex) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, id := range x.topDigests(maxDigests) {
		if _, ok := d.byID[id]; ok {
			continue
		}
		dc := x.digests[id]
		d.byID[id] = len(d.list)
		d.list = append(d.list, store.DigestInfo{Text: dc.text, Class: dc.class.String()})
		d.ids = append(d.ids, id)
	}
}

// index returns the digest's number (0 once maxDigests are taken).
func (d *digestRegistry) index(info *sqlinfo.Info) int {
	d.mu.RLock()
	i, ok := d.byID[info.Digest.ID]
	d.mu.RUnlock()
	if ok {
		return i
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if i, ok := d.byID[info.Digest.ID]; ok {
		return i
	}
	if len(d.list) > maxDigests {
		return 0
	}
	i = len(d.list)
	d.byID[info.Digest.ID] = i
	d.list = append(d.list, store.DigestInfo{Text: info.Digest.Text, Class: info.Class.String()})
	d.ids = append(d.ids, info.Digest.ID)
	return i
}

// counters are what a worker counts.
type counters struct {
	trx, retries, retriesOK, captureRollbacks int64
	// errors and deadlocks (1213, 1205) count every failed run of a
	// statement or command, first runs, retries and reruns alike: what
	// the server counts.
	errors, deadlocks int64
	// reexecuted: statements run again by retries and reruns;
	// failedTrx: transactions that failed for good.
	reexecuted, failedTrx                  int64
	queries                                [3]int64 // by sqlinfo.Class (each record's first run)
	errClass, skippedClass                 [3]int64 // records whose first run failed, skipped records, by class
	connections, connectFailures, skipped  int64
	orderWaits, orderReruns, orderReleased int64
	// reordered: changes sent ahead of a conflicting change not yet done
	// (store.Reorder).
	reordered int64
}

func (c *counters) add(o *counters) {
	c.trx += o.trx
	c.reexecuted += o.reexecuted
	c.failedTrx += o.failedTrx
	c.errors += o.errors
	c.deadlocks += o.deadlocks
	c.retries += o.retries
	c.retriesOK += o.retriesOK
	c.captureRollbacks += o.captureRollbacks
	for i := range c.queries {
		c.queries[i] += o.queries[i]
		c.errClass[i] += o.errClass[i]
		c.skippedClass[i] += o.skippedClass[i]
	}
	c.connections += o.connections
	c.connectFailures += o.connectFailures
	c.skipped += o.skipped
	c.orderWaits += o.orderWaits
	c.orderReruns += o.orderReruns
	c.orderReleased += o.orderReleased
	c.reordered += o.reordered
}

// wstats are one shard of a target's statistics, shared by the workers
// whose number picks it (runner.statsFor).
type wstats struct {
	mu        sync.Mutex
	c         counters
	errCodes  map[string]int64
	skippedBy map[string]int64
	failedBy  map[string]int64
	// lag; byClass, the service times by class (all of them, merged,
	// are the totals' service: recorded once, not twice a statement).
	lag     latency.Histogram
	byClass [3]latency.Histogram
	digests []*latency.Histogram
	// records counts every record handled (for progress; read without
	// the lock by the metrics collector).
	records atomic.Int64
	// since the last interval
	iv       counters
	ivLat    latency.Histogram
	digestOf map[*sqlinfo.Info]int // cache of the registry's numbers
}

// maxDigestOf bounds a shard's cache of digest numbers (wstats.digestOf).
const maxDigestOf = 4096

func newWStats() *wstats {
	return &wstats{errCodes: map[string]int64{}, skippedBy: map[string]int64{}, failedBy: map[string]int64{}, digestOf: map[*sqlinfo.Info]int{}}
}

// statement counts one executed statement in queries, transactions and
// latencies. One no server answered (the connection refused, lost or
// timed out: a client error) counts in none of them, only in errors
// (failedRun): a dead target must not look the fastest.
func (s *wstats) statement(reg *digestRegistry, info *sqlinfo.Info, o *store.Outcome, paced, trxEnd bool) {
	if o.Flags&store.OutcomeClientError != 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	di, ok := s.digestOf[info]
	if !ok {
		di = reg.index(info)
		if len(s.digestOf) >= maxDigestOf {
			// Text statements with literals have an Info per text: a
			// cache that kept them all would hold every one for the run.
			clear(s.digestOf)
		}
		s.digestOf[info] = di
	}
	for _, c := range []*counters{&s.c, &s.iv} {
		c.queries[info.Class]++
		if trxEnd {
			c.trx++
		}
		if o.Flags&store.OutcomeError != 0 {
			c.errClass[info.Class]++
		}
	}
	s.ivLat.Record(o.Service)
	s.byClass[info.Class].Record(o.Service)
	if paced {
		s.lag.Record(o.Lag)
	}
	for len(s.digests) <= di {
		s.digests = append(s.digests, nil)
	}
	if s.digests[di] == nil {
		s.digests[di] = &latency.Histogram{}
	}
	s.digests[di].Record(o.Service)
}

// errorKey names an error for TargetResult.ErrorCodes.
func errorKey(o *store.Outcome) string {
	if o.Flags&store.OutcomeClientError != 0 {
		return strconv.Itoa(int(o.ErrCode)) + " " + store.CauseText(o.Cause)
	}
	return strconv.Itoa(int(o.ErrCode))
}

// count applies f to both counter sets under the lock.
func (s *wstats) count(f func(c *counters)) {
	s.mu.Lock()
	f(&s.c)
	f(&s.iv)
	s.mu.Unlock()
}

// skip records a skipped record of the given class.
func (s *wstats) skip(reason byte, class sqlinfo.Class) {
	s.mu.Lock()
	s.c.skipped++
	s.iv.skipped++
	s.c.skippedClass[class]++
	s.skippedBy[store.SkipReasonText(reason)]++
	s.mu.Unlock()
}

// failedRun counts one failed run of a statement or command (a connect,
// a prepare), by its error code.
func (s *wstats) failedRun(o *store.Outcome) {
	if interrupted(o) {
		return // stopped by the user, not failed by the target
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errCodes[errorKey(o)]++
	for _, c := range []*counters{&s.c, &s.iv} {
		c.errors++
		if o.Flags&store.OutcomeClientError == 0 && (o.ErrCode == sqlinfo.ErrDeadlock || o.ErrCode == sqlinfo.ErrLockWaitTimeout) {
			c.deadlocks++
		}
	}
}

// failedTrx counts a transaction that failed for good, by the error of
// its last attempt.
func (s *wstats) failedTrx(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.c.failedTrx++
	s.iv.failedTrx++
	s.failedBy[key]++
}

// takeInterval returns and resets the interval's counters and histogram.
func (s *wstats) takeInterval(into *store.Interval) {
	s.mu.Lock()
	addInterval(into, &s.iv, &s.ivLat)
	s.iv = counters{}
	s.ivLat.Reset()
	s.mu.Unlock()
}

// addInterval adds an interval's counters and latencies to into.
func addInterval(into *store.Interval, c *counters, lat *latency.Histogram) {
	into.Transactions += uint64(c.trx)
	into.Reads += uint64(c.queries[sqlinfo.ClassRead])
	into.Writes += uint64(c.queries[sqlinfo.ClassWrite])
	into.Other += uint64(c.queries[sqlinfo.ClassOther])
	into.Errors += uint64(c.errors)
	into.Deadlocks += uint64(c.deadlocks)
	into.Retries += uint64(c.retries)
	into.Latency.Merge(lat)
}

// totals are a target's merged statistics.
type totals struct {
	c         counters
	errCodes  map[string]int64
	skippedBy map[string]int64
	failedBy  map[string]int64
	service   latency.Histogram
	lag       latency.Histogram
	byClass   [3]latency.Histogram
	digests   map[int]*latency.Histogram
	digestIDs []string // the registry's ids by number (metrics)
}

func (t *totals) merge(s *wstats) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t.mergeLocked(s)
}

func (t *totals) mergeLocked(s *wstats) {
	t.addParts(&s.c, s.errCodes, s.failedBy, s.skippedBy, nil, &s.lag, &s.byClass)
	for i, h := range s.digests {
		t.mergeDigest(i, h)
	}
}

// add merges o (retired statistics) into t.
func (t *totals) add(o *totals) {
	t.addParts(&o.c, o.errCodes, o.failedBy, o.skippedBy, &o.service, &o.lag, &o.byClass)
	for i, h := range o.digests {
		t.mergeDigest(i, h)
	}
}

// addParts adds what a worker's statistics and a target's totals both
// keep (all but the digests' histograms, a slice in one, a map in the
// other). service nil: the classes' merged (a worker's).
func (t *totals) addParts(c *counters, errCodes, failedBy, skippedBy map[string]int64, service, lag *latency.Histogram, byClass *[3]latency.Histogram) {
	t.init()
	t.c.add(c)
	addCounts(t.errCodes, errCodes)
	addCounts(t.failedBy, failedBy)
	addCounts(t.skippedBy, skippedBy)
	if service != nil {
		t.service.Merge(service)
	} else {
		for i := range byClass {
			t.service.Merge(&byClass[i])
		}
	}
	t.lag.Merge(lag)
	for i := range t.byClass {
		t.byClass[i].Merge(&byClass[i])
	}
}

func (t *totals) init() {
	if t.errCodes == nil {
		t.errCodes, t.skippedBy, t.failedBy, t.digests = map[string]int64{}, map[string]int64{}, map[string]int64{}, map[int]*latency.Histogram{}
	}
}

func (t *totals) mergeDigest(i int, h *latency.Histogram) {
	if h == nil {
		return
	}
	if t.digests[i] == nil {
		t.digests[i] = &latency.Histogram{}
	}
	t.digests[i].Merge(h)
}

func addCounts(into, from map[string]int64) {
	for k, v := range from {
		into[k] += v
	}
}

// retireInto moves the shard's statistics so far into t (its runner's
// retired totals, under their lock) and starts them afresh. A shard's
// histograms grow a chunk for each power of two their latencies reach: kept
// for a whole run, per worker and per digest, the rare slow statements of
// a long run made them grow with its length (latency histograms were 30 MB
// of an 800,000-statement replay's 83 MB heap at 64 sessions, 4 MB at
// 80,000). Retired every interval, a target keeps one set of cumulative
// histograms, and a shard only what one interval reached.
func (s *wstats) retireInto(t *totals) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t.mergeLocked(s)
	s.c = counters{}
	clear(s.errCodes)
	clear(s.failedBy)
	clear(s.skippedBy)
	s.lag.Recycle()
	for i := range s.byClass {
		s.byClass[i].Recycle()
	}
	for _, h := range s.digests {
		if h != nil {
			h.Recycle()
		}
	}
}

// progressLines prints sysbench-style interval lines per target.
type progressLines struct {
	w     io.Writer
	every time.Duration
	mu    sync.Mutex
	acc   map[string]*store.Interval
}

func (p *progressLines) add(name string, iv *store.Interval, at time.Duration) {
	if p == nil || p.w == nil || p.every <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	a := p.acc[name]
	if a == nil {
		a = &store.Interval{Start: iv.Start}
		p.acc[name] = a
	}
	a.Transactions += iv.Transactions
	a.Reads += iv.Reads
	a.Writes += iv.Writes
	a.Other += iv.Other
	a.Errors += iv.Errors
	a.Length += iv.Length
	a.Threads = iv.Threads
	a.Latency.Merge(&iv.Latency)
	if a.Length < p.every-time.Millisecond {
		return
	}
	secs := a.Length.Seconds()
	fmt.Fprintf(p.w, "[ %ds ] %s thds: %d tps: %.2f qps: %.2f (r/w/o: %.2f/%.2f/%.2f) lat (ms,95%%): %.2f err/s: %.2f\n",
		int(at.Round(time.Second).Seconds()), name, a.Threads, float64(a.Transactions)/secs, float64(a.Reads+a.Writes+a.Other)/secs,
		float64(a.Reads)/secs, float64(a.Writes)/secs, float64(a.Other)/secs, float64(a.Latency.Quantile(0.95))/1e6, float64(a.Errors)/secs)
	delete(p.acc, name)
}
