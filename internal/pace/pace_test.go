package pace

import (
	"context"
	"testing"
	"time"
)

// TestSleepUntilReturnsAtItsInstant: never early, whatever the wait; and a
// wait that ends with the context returns before its instant.
func TestSleepUntilReturnsAtItsInstant(t *testing.T) {
	for _, d := range []time.Duration{-time.Millisecond, 0, 50 * time.Microsecond, 700 * time.Microsecond, 3 * time.Millisecond} {
		at := time.Now().Add(d)
		SleepUntil(context.Background(), at)
		if now := time.Now(); now.Before(at) {
			t.Errorf("SleepUntil(now%+v) returned %v early", d, at.Sub(now))
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	at := time.Now().Add(time.Hour)
	SleepUntil(ctx, at)
	if !time.Now().Before(at) {
		t.Errorf("SleepUntil with an ended context waited out its hour")
	}
}

// BenchmarkLateness reports how late a 300 µs wait returns, by SleepUntil
// and by a Go timer (time.Sleep): the reason this package exists.
func BenchmarkLateness(b *testing.B) {
	const d = 300 * time.Microsecond
	for _, c := range []struct {
		name  string
		sleep func(time.Time)
	}{
		{"SleepUntil", func(at time.Time) { SleepUntil(context.Background(), at) }},
		{"time.Sleep", func(at time.Time) { time.Sleep(time.Until(at)) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			var late time.Duration
			for b.Loop() {
				at := time.Now().Add(d)
				c.sleep(at)
				late += time.Since(at)
			}
			b.ReportMetric(float64(late.Microseconds())/float64(b.N), "µs-late/op")
		})
	}
}
