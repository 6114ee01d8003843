package replay

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tandemdb/tandem/latency"
	"github.com/tandemdb/tandem/sqlinfo"
	"github.com/tandemdb/tandem/store"
)

// Text statements with literals get an Info per text from the analyzer
// (its own caches are bounded); a worker's cache of digest numbers must
// not keep them all: 20,000 texts of one digest leave at most
// maxDigestOf entries, and every statement is still counted under its
// digest.
func TestWorkerDigestCacheIsBounded(t *testing.T) {
	an, reg, ws := sqlinfo.NewAnalyzer(), newDigestRegistry(), newWStats()
	for i := range 20000 {
		info := an.Info(fmt.Sprintf("UPDATE t SET k = k + 1 WHERE id = %d", i))
		ws.statement(reg, info, &store.Outcome{Service: 1000}, false, false)
	}
	if n := len(ws.digestOf); n > maxDigestOf {
		t.Errorf("the cache holds %d Infos, want at most %d", n, maxDigestOf)
	}
	if len(reg.list) != 2 || ws.digests[1] == nil || ws.digests[1].Count() != 20000 {
		t.Errorf("digests %v; the statement's histogram %v, want 20000 under one digest", reg.list, ws.digests)
	}
}

// A worker's statistics retired into its target's totals every interval
// (retireInto) add up, merged with what the worker holds since, to the
// same totals as a worker that never retired: counts, errors and every
// histogram, value for value; and the retired worker holds no memory for
// a power of two only a rare slow statement reached.
func TestRetiredStatisticsAddUp(t *testing.T) {
	an, reg := sqlinfo.NewAnalyzer(), newDigestRegistry()
	kept, retiring := newWStats(), newWStats()
	var retired totals
	sel, upd := an.Info("SELECT c FROM t WHERE id = 1"), an.Info("UPDATE t SET k = k + 1 WHERE id = 2")
	for iv := range 10 {
		for i := range 200 {
			info, d := sel, time.Duration(50+i%40)*time.Microsecond
			if i%4 == 0 {
				info, d = upd, time.Duration(200+i%100)*time.Microsecond
			}
			if iv == 3 && i == 7 {
				d = 3 * time.Second // one slow statement
			}
			o := &store.Outcome{Service: d, Lag: d / 2}
			if i%50 == 0 {
				o.Flags, o.ErrCode = store.OutcomeError, 1213
			}
			for _, ws := range []*wstats{kept, retiring} {
				ws.statement(reg, info, o, true, info == upd)
				if o.ErrCode != 0 {
					ws.failedRun(o)
				}
			}
		}
		retiring.retireInto(&retired)
		if iv == 3 {
			continue
		}
		for _, h := range retiring.digests {
			if h != nil && h.Chunks() > 2 {
				t.Fatalf("interval %d: a retired worker's digest histogram holds %d powers of two, want at most 2 (the slow statement's released)", iv, h.Chunks())
			}
		}
	}
	var want, got totals
	want.merge(kept)
	got.add(&retired)
	got.merge(retiring)
	if want.c != got.c || fmt.Sprint(want.errCodes) != fmt.Sprint(got.errCodes) {
		t.Errorf("counters %+v errors %v; want %+v %v", got.c, got.errCodes, want.c, want.errCodes)
	}
	hs := func(t *totals) []*latency.Histogram {
		l := []*latency.Histogram{&t.service, &t.lag, &t.byClass[0], &t.byClass[1], &t.byClass[2]}
		for i := range len(reg.list) {
			l = append(l, t.digests[i])
		}
		return l
	}
	w, g := hs(&want), hs(&got)
	for i := range w {
		if w[i] == nil && g[i] == nil {
			continue
		}
		if w[i] == nil || g[i] == nil || w[i].Count() != g[i].Count() || w[i].Sum() != g[i].Sum() || w[i].Max() != g[i].Max() ||
			w[i].Quantile(0.5) != g[i].Quantile(0.5) || w[i].Quantile(0.99) != g[i].Quantile(0.99) {
			t.Errorf("histogram %d differs: got %v, want %v", i, g[i], w[i])
		}
	}
	if want.c.queries[sqlinfo.ClassRead] != 1500 || want.c.queries[sqlinfo.ClassWrite] != 500 {
		t.Errorf("reads %d writes %d, want 1500, 500", want.c.queries[sqlinfo.ClassRead], want.c.queries[sqlinfo.ClassWrite])
	}
}

// A target's statistics take the same memory at any number of sessions:
// its workers share statShards shards. 1,000 workers recording at once
// leave exactly statShards sets of histograms, and every statement,
// error and latency is counted once. Before, each worker kept its own
// (about 217 KiB each for a sysbench read/write workload: 13.9 MB of a
// 64-session replay's 37 MB live heap).
func TestStatisticsDoNotGrowWithSessions(t *testing.T) {
	an, reg := sqlinfo.NewAnalyzer(), newDigestRegistry()
	rn := &runner{reg: reg, stats: newStatShards()}
	const workers, each = 1000, 50
	sel, upd := an.Info("SELECT c FROM t WHERE id = 1"), an.Info("UPDATE t SET k = k + 1 WHERE id = 2")
	var wg sync.WaitGroup
	shards := map[*wstats]bool{}
	for w := range workers {
		st := rn.statsFor()
		shards[st] = true
		wg.Go(func() {
			for i := range each {
				info, d := sel, time.Duration(100+w%7)*time.Microsecond
				if i%5 == 0 {
					info, d = upd, time.Millisecond
				}
				o := &store.Outcome{Service: d}
				if i == 0 {
					o.Flags, o.ErrCode = store.OutcomeError, 1213
					st.failedRun(o)
				}
				st.statement(reg, info, o, false, info == upd)
				st.records.Add(1)
			}
		})
	}
	wg.Wait()
	if len(shards) != statShards() || len(rn.stats) != statShards() {
		t.Fatalf("%d workers share %d shards of %d; want all %d", workers, len(shards), len(rn.stats), statShards())
	}
	var tt totals
	var records int64
	rn.mergeInto(&tt, &records)
	if records != workers*each || tt.c.queries[sqlinfo.ClassRead] != workers*each*4/5 || tt.c.queries[sqlinfo.ClassWrite] != workers*each/5 ||
		tt.c.errors != workers || tt.c.deadlocks != workers || tt.errCodes["1213"] != workers {
		t.Errorf("records %d reads %d writes %d errors %d deadlocks %d codes %v; want %d, %d, %d, %d, %d, 1213:%d",
			records, tt.c.queries[sqlinfo.ClassRead], tt.c.queries[sqlinfo.ClassWrite], tt.c.errors, tt.c.deadlocks, tt.errCodes,
			workers*each, workers*each*4/5, workers*each/5, workers, workers, workers)
	}
	if n := tt.service.Count(); n != workers*each || tt.byClass[sqlinfo.ClassWrite].Count() != workers*each/5 ||
		tt.byClass[sqlinfo.ClassWrite].Max() != time.Millisecond || tt.digests[reg.byID[sel.Digest.ID]].Count() != workers*each*4/5 {
		t.Errorf("latencies counted %d (writes %d, max %v; the SELECT's digest %d); want %d, %d, 1ms, %d", n, tt.byClass[sqlinfo.ClassWrite].Count(),
			tt.byClass[sqlinfo.ClassWrite].Max(), tt.digests[reg.byID[sel.Digest.ID]].Count(), workers*each, workers*each/5, workers*each*4/5)
	}
}
