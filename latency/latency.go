// Package latency is a high-dynamic-range histogram of durations: exact
// counts, min, max and sum, and quantiles within 1/128 (0.8 %) of the true
// value, from a nanosecond to the age of the universe. Histograms merge
// exactly (the counts add), so percentiles of merged histograms — several
// workers, several shards — are those of all the values together, never an
// average of percentiles.
//
// # Buckets
//
// A value v (nanoseconds) below 256 has a bucket of its own, index v.
// Above, with e = floor(log2 v) and shift = e - 7, its bucket is
// shift*128 + (v >> shift): 128 buckets per power of two, each 2^shift
// wide, so a bucket spans at most 1/128 of its values. This is the layout
// of HdrHistogram with 2 significant digits. The index is part of the run
// format (store encodes histograms by bucket index).
//
// # Memory
//
// Counts are allocated per power of two when a value first lands there: a
// histogram costs about 0.5 KiB, plus 1 KiB for each power of two its
// values span (a statement latency histogram typically spans 4 to 8, so 4
// to 8.5 KiB in all).
package latency

import (
	"math"
	"math/bits"
	"time"
)

const (
	subBits  = 7
	subCount = 1 << subBits // buckets per power of two
	// chunk 0 holds values 0..255 (256 buckets); chunk c ≥ 1 holds the 128
	// buckets of shift c (values in [2^(c+7), 2^(c+8))), up to shift 55
	// for the largest int64.
	chunks = 64 - subBits - 1
	// MaxIndex is the largest bucket index: that of math.MaxInt64.
	MaxIndex = (chunks+1)*subCount - 1
)

// Index is the bucket of value v (nanoseconds, negative counts as 0).
func Index(v int64) int {
	if v < 2*subCount {
		if v < 0 {
			return 0
		}
		return int(v)
	}
	shift := bits.Len64(uint64(v)) - 1 - subBits
	return shift*subCount + int(uint64(v)>>shift)
}

// Lower is the smallest value in bucket i.
func Lower(i int) int64 {
	if i < 2*subCount {
		return int64(i)
	}
	shift := i/subCount - 1
	sub := i - shift*subCount
	return int64(sub) << shift
}

// Upper is the largest value in bucket i.
func Upper(i int) int64 {
	if i < 2*subCount {
		return int64(i)
	}
	shift := i/subCount - 1
	return Lower(i) + int64(1)<<shift - 1
}

// chunkOf is the chunk and offset of bucket i.
func chunkOf(i int) (int, int) {
	if i < 2*subCount {
		return 0, i
	}
	shift := i/subCount - 1
	return shift, i - (shift+1)*subCount
}

// Histogram counts durations. The zero value is empty and ready to use. It
// is not safe for concurrent use: give each writer its own and Merge.
type Histogram struct {
	count    uint64
	sum      uint64 // nanoseconds; wraps after 584 years of latency
	min, max int64
	chunk    [chunks]*[]uint64
}

// Record adds one duration.
func (h *Histogram) Record(d time.Duration) { h.RecordN(int64(d), 1) }

// RecordN adds n values v (nanoseconds).
func (h *Histogram) RecordN(v int64, n uint64) {
	if n == 0 {
		return
	}
	v = max(v, 0)
	if h.count == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.count += n
	h.sum += uint64(v) * n
	c, off := chunkOf(Index(v))
	p := h.chunk[c]
	if p == nil {
		size := subCount
		if c == 0 {
			size = 2 * subCount
		}
		s := make([]uint64, size)
		p = &s
		h.chunk[c] = p
	}
	(*p)[off] += n
}

// Count is the number of values recorded.
func (h *Histogram) Count() uint64 { return h.count }

// Sum is the total of the values, nanoseconds.
func (h *Histogram) Sum() uint64 { return h.sum }

// Min and Max are the exact extremes (0 when empty).
func (h *Histogram) Min() time.Duration { return time.Duration(h.min) }
func (h *Histogram) Max() time.Duration { return time.Duration(h.max) }

// Mean is the exact mean (0 when empty).
func (h *Histogram) Mean() time.Duration {
	if h.count == 0 {
		return 0
	}
	return time.Duration(h.sum / h.count)
}

// Quantile returns the value at quantile q (0 ≤ q ≤ 1): the largest value
// of the bucket holding the ceil(q·count)-th smallest value, clamped to the
// exact min and max, so it is at most 1/128 above the true value.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.count == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.count)))
	rank = min(max(rank, 1), h.count)
	var seen uint64
	for c, p := range h.chunk {
		if p == nil {
			continue
		}
		for off, n := range *p {
			if n == 0 {
				continue
			}
			seen += n
			if seen >= rank {
				i := off
				if c > 0 {
					i = (c+1)*subCount + off
				}
				return time.Duration(min(max(Upper(i), h.min), h.max))
			}
		}
	}
	return time.Duration(h.max)
}

// CountAtOrBelow is how many values lie in buckets whose largest value is
// at most v: the cumulative count a Prometheus bucket with upper bound v
// shows (within one bucket's width).
func (h *Histogram) CountAtOrBelow(v int64) uint64 {
	var n uint64
	h.Buckets(func(i int, c uint64) bool {
		if Upper(i) > v {
			return false
		}
		n += c
		return true
	})
	return n
}

// Buckets calls f for each non-empty bucket in increasing order, until f
// returns false.
func (h *Histogram) Buckets(f func(index int, count uint64) bool) {
	for c, p := range h.chunk {
		if p == nil {
			continue
		}
		for off, n := range *p {
			if n == 0 {
				continue
			}
			i := off
			if c > 0 {
				i = (c+1)*subCount + off
			}
			if !f(i, n) {
				return
			}
		}
	}
}

// Merge adds o's values to h.
func (h *Histogram) Merge(o *Histogram) {
	if o == nil || o.count == 0 {
		return
	}
	if h.count == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.count += o.count
	h.sum += o.sum
	for c, p := range o.chunk {
		if p == nil {
			continue
		}
		q := h.chunk[c]
		if q == nil {
			s := make([]uint64, len(*p))
			q = &s
			h.chunk[c] = q
		}
		for off, n := range *p {
			(*q)[off] += n
		}
	}
}

// Reset empties h, keeping its memory.
func (h *Histogram) Reset() {
	for _, p := range h.chunk {
		if p != nil {
			clear(*p)
		}
	}
	h.count, h.sum, h.min, h.max = 0, 0, 0, 0
}

// Recycle empties h (merged elsewhere first), keeping the memory of the
// powers of two that held at least 1/64 of its values — the common
// latencies, which come again — and releasing the others': a histogram
// recycled after every interval holds what an interval needs, not every
// power of two a long run's rare slow values ever reached.
func (h *Histogram) Recycle() {
	for c, p := range h.chunk {
		if p == nil {
			continue
		}
		var n uint64
		for _, v := range *p {
			n += v
		}
		if n*64 < h.count {
			h.chunk[c] = nil
		} else {
			clear(*p)
		}
	}
	h.count, h.sum, h.min, h.max = 0, 0, 0, 0
}

// Chunks is how many powers of two h holds memory for (1 KiB each; the
// first, 2 KiB).
func (h *Histogram) Chunks() int {
	n := 0
	for _, p := range h.chunk {
		if p != nil {
			n++
		}
	}
	return n
}

// Clone returns a copy of h sharing no memory with it.
func (h *Histogram) Clone() *Histogram {
	c := &Histogram{}
	c.Merge(h)
	return c
}

// Restore sets h from its parts, as store decodes a histogram: the exact
// extremes and sum, and the bucket counts. It reports false when the parts
// contradict each other (count not the buckets' total, an index out of
// range, min above max); h is then empty.
func (h *Histogram) Restore(sum uint64, minV, maxV int64, buckets func(yield func(index int, count uint64) bool)) bool {
	h.Reset()
	ok := true
	var total uint64
	buckets(func(i int, n uint64) bool {
		if i < 0 || i > MaxIndex || n == 0 {
			ok = false
			return false
		}
		c, off := chunkOf(i)
		p := h.chunk[c]
		if p == nil {
			size := subCount
			if c == 0 {
				size = 2 * subCount
			}
			s := make([]uint64, size)
			p = &s
			h.chunk[c] = p
		}
		(*p)[off] += n
		total += n
		return true
	})
	if !ok || total == 0 && (sum != 0 || minV != 0 || maxV != 0) || total > 0 && (minV < 0 || minV > maxV ||
		Index(minV) > Index(maxV)) {
		h.Reset()
		return false
	}
	h.count, h.sum, h.min, h.max = total, sum, minV, maxV
	return true
}

// MetricBuckets returns the upper bounds, in seconds, of the buckets of
// every latency histogram Tandem exports to Prometheus: 50 µs to about
// 26 s, doubling (20 bounds). The proxy's, replay's and the shadows'
// histograms all use these, because the dashboard divides one side's
// quantiles and bucket rates by the other's: different bounds would make
// those ratios wrong without anyone noticing.
func MetricBuckets() []float64 {
	b := make([]float64, 20)
	for i := range b {
		b[i] = 50e-6 * float64(uint64(1)<<i)
	}
	return b
}
