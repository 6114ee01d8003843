package shadow

import (
	"testing"
	"time"
)

// The status line's latency column: per class, the shadow's p95 against
// the primary's and their ratio; the interval's resets at each line, the
// total's does not.
func TestLatencyRatios(t *testing.T) {
	l := newLatencies(nil, "s")
	if got := l.ratios(true); got != "none" {
		t.Fatalf("empty: %q", got)
	}
	for i := 0; i < 100; i++ {
		l.observe("read", 500*time.Microsecond, time.Millisecond)
		l.observe("write", 2*time.Millisecond, time.Millisecond)
	}
	const want = "read 1ms/500µs=2.00x, write 1ms/2ms=0.50x"
	if got := l.ratios(true); got != want {
		t.Errorf("interval: %q, want %q", got, want)
	}
	if got := l.ratios(true); got != "none" {
		t.Errorf("interval after a line: %q, want none", got)
	}
	l.observe("read", 500*time.Microsecond, 500*time.Microsecond)
	if got := l.ratios(false); got != want {
		t.Errorf("total: %q, want %q", got, want)
	}
}

func TestRoundDur(t *testing.T) {
	for in, want := range map[time.Duration]time.Duration{
		812345 * time.Nanosecond:  812 * time.Microsecond,
		1234567 * time.Nanosecond: 1230 * time.Microsecond,
		999 * time.Nanosecond:     999 * time.Nanosecond,
		61234 * time.Millisecond:  61200 * time.Millisecond,
	} {
		if got := roundDur(in); got != want {
			t.Errorf("roundDur(%v) = %v, want %v", in, got, want)
		}
	}
}
