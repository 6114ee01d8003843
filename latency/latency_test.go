package latency

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestIndexBounds(t *testing.T) {
	if Index(math.MaxInt64) != MaxIndex {
		t.Fatalf("Index(MaxInt64) = %d, MaxIndex %d", Index(math.MaxInt64), MaxIndex)
	}
	if Upper(MaxIndex) != math.MaxInt64 {
		t.Fatalf("Upper(MaxIndex) = %d", Upper(MaxIndex))
	}
	// Every bucket holds exactly the values between its bounds, buckets are
	// contiguous, and each spans at most 1/128 of its values.
	prev := int64(-1)
	for i := 0; i <= MaxIndex; i++ {
		lo, hi := Lower(i), Upper(i)
		if lo != prev+1 || hi < lo || Index(lo) != i || Index(hi) != i {
			t.Fatalf("bucket %d: [%d, %d] after %d; Index(lo)=%d Index(hi)=%d", i, lo, hi, prev, Index(lo), Index(hi))
		}
		if lo >= 256 && float64(hi-lo+1)/float64(lo) > 1.0/128 {
			t.Fatalf("bucket %d [%d, %d] is wider than 1/128", i, lo, hi)
		}
		prev = hi
	}
	if Index(-5) != 0 {
		t.Fatal("a negative value is not counted as 0")
	}
}

func TestQuantilesAgainstSortedValues(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var h Histogram
	vals := make([]int64, 0, 100000)
	for range 100000 {
		// log-uniform from 1 µs to 10 s, like statement latencies
		v := int64(math.Exp(r.Float64()*math.Log(1e7)) * 1000)
		vals = append(vals, v)
		h.RecordN(v, 1)
	}
	slices.Sort(vals)
	var sum uint64
	for _, v := range vals {
		sum += uint64(v)
	}
	if h.Count() != 100000 || h.Min() != time.Duration(vals[0]) || h.Max() != time.Duration(vals[len(vals)-1]) || h.Sum() != sum {
		t.Fatalf("count %d min %v max %v sum %d", h.Count(), h.Min(), h.Max(), h.Sum())
	}
	for _, q := range []float64{0, 0.01, 0.5, 0.9, 0.95, 0.99, 0.999, 1} {
		rank := max(int(math.Ceil(q*float64(len(vals)))), 1)
		exact := vals[rank-1]
		got := int64(h.Quantile(q))
		if got < exact || float64(got-exact) > float64(exact)/128 {
			t.Errorf("q%v = %d, exact %d: not within [exact, exact+1/128]", q, got, exact)
		}
	}
}

func TestMergeIsTheHistogramOfAllValues(t *testing.T) {
	var a, b, all Histogram
	for i := range 5000 {
		v := int64(i*i) + 17
		all.RecordN(v, 1)
		if i%3 == 0 {
			a.RecordN(v, 1)
		} else {
			b.RecordN(v, 1)
		}
	}
	a.Merge(&b)
	if a.Count() != all.Count() || a.Sum() != all.Sum() || a.Min() != all.Min() || a.Max() != all.Max() {
		t.Fatalf("merged %d/%d/%v/%v, all %d/%d/%v/%v", a.Count(), a.Sum(), a.Min(), a.Max(), all.Count(), all.Sum(), all.Min(), all.Max())
	}
	for _, q := range []float64{0.5, 0.95, 0.99} {
		if a.Quantile(q) != all.Quantile(q) {
			t.Errorf("q%v: merged %v, all %v", q, a.Quantile(q), all.Quantile(q))
		}
	}
	var empty Histogram
	empty.Merge(nil)
	empty.Merge(&Histogram{})
	if empty.Count() != 0 || empty.Quantile(0.5) != 0 || empty.Mean() != 0 {
		t.Fatal("merging nothing changed an empty histogram")
	}
}

func TestRestoreRoundTripAndRejects(t *testing.T) {
	var h Histogram
	for _, v := range []int64{0, 3, 255, 256, 1000, 1001, 123456789, math.MaxInt64} {
		h.RecordN(v, uint64(v%7+1))
	}
	type bk struct {
		i int
		n uint64
	}
	var bs []bk
	h.Buckets(func(i int, n uint64) bool { bs = append(bs, bk{i, n}); return true })
	if !slices.IsSortedFunc(bs, func(a, b bk) int { return a.i - b.i }) {
		t.Fatalf("buckets out of order: %v", bs)
	}
	var r Histogram
	ok := r.Restore(h.Sum(), int64(h.Min()), int64(h.Max()), func(yield func(int, uint64) bool) {
		for _, b := range bs {
			if !yield(b.i, b.n) {
				return
			}
		}
	})
	if !ok || r.Count() != h.Count() || r.Quantile(0.5) != h.Quantile(0.5) || r.Max() != h.Max() {
		t.Fatalf("restored %v: count %d q50 %v max %v", ok, r.Count(), r.Quantile(0.5), r.Max())
	}
	bad := []struct {
		name     string
		min, max int64
		buckets  []bk
	}{
		{"index out of range", 0, 10, []bk{{MaxIndex + 1, 1}}},
		{"zero count", 0, 10, []bk{{3, 0}}},
		{"min above max", 10, 5, []bk{{7, 1}}},
		{"extremes without values", 1, 2, nil},
	}
	for _, c := range bad {
		if r.Restore(0, c.min, c.max, func(yield func(int, uint64) bool) {
			for _, b := range c.buckets {
				if !yield(b.i, b.n) {
					return
				}
			}
		}) || r.Count() != 0 {
			t.Errorf("%s: restored", c.name)
		}
	}
}

func TestCountAtOrBelow(t *testing.T) {
	var h Histogram
	for _, ms := range []int{1, 2, 3, 10, 100} {
		h.Record(time.Duration(ms) * time.Millisecond)
	}
	if n := h.CountAtOrBelow(int64(5 * time.Millisecond)); n != 3 {
		t.Errorf("≤5ms: %d, want 3", n)
	}
	if n := h.CountAtOrBelow(math.MaxInt64); n != 5 {
		t.Errorf("≤max: %d, want 5", n)
	}
}

func BenchmarkRecord(b *testing.B) {
	var h Histogram
	for i := range b.N {
		h.RecordN(int64(100000+i%50000), 1)
	}
}

// The exported bounds are the ones the dashboard's queries were written
// for: Prometheus' own ExponentialBuckets(50e-6, 2, 20), exactly.
func TestMetricBuckets(t *testing.T) {
	b := MetricBuckets()
	if len(b) != 20 || b[0] != 50e-6 || b[19] != 50e-6*524288 {
		t.Fatalf("bounds %v", b)
	}
	for i := 1; i < len(b); i++ {
		if b[i] != 2*b[i-1] {
			t.Fatalf("bound %d is %g, want twice %g", i, b[i], b[i-1])
		}
	}
	b[0] = 1
	if MetricBuckets()[0] != 50e-6 {
		t.Error("a caller's change to the bounds reached the next caller")
	}
}

// Recycle empties a histogram and keeps the memory of the powers of two
// that held at least 1/64 of its values, releasing the rare ones'.
func TestRecycleKeepsTheCommonPowersOfTwo(t *testing.T) {
	var h Histogram
	for range 1000 {
		h.Record(100 * time.Microsecond) // 2^16..2^17 ns
		h.Record(300 * time.Microsecond) // 2^18..2^19
	}
	h.Record(2 * time.Second) // one slow value: 2^30..2^31
	h.Record(50)              // and one in chunk 0
	if got := h.Chunks(); got != 4 {
		t.Fatalf("%d chunks before, want 4", got)
	}
	h.Recycle()
	if h.Count() != 0 || h.Sum() != 0 || h.Quantile(0.5) != 0 {
		t.Fatalf("after Recycle: count %d, sum %d, p50 %d; want all 0", h.Count(), h.Sum(), h.Quantile(0.5))
	}
	if got := h.Chunks(); got != 2 {
		t.Fatalf("%d chunks after Recycle, want 2 (the two common ones)", got)
	}
	h.Record(300 * time.Microsecond)
	if h.Count() != 1 || h.Quantile(0.5) < 297*time.Microsecond || h.Quantile(0.5) > 303*time.Microsecond {
		t.Fatalf("after Recycle and one value: count %d, p50 %d", h.Count(), h.Quantile(0.5))
	}
}
