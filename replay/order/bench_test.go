package order

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// BenchmarkGateSessions: the gate's cost per ticket with N sessions
// replaying at --speed 0, every statement a change (each waits for every
// ticket that ended before it started). In the capture, session s's k-th
// statement lasts 100 µs and starts at k·150 µs plus s/N of that period:
// each overlaps the other sessions' statements around it and follows the
// rest. A registrar adds tickets in start order, as replay's reader does;
// each session waits, is sent and finishes its own in order. ns/ticket
// is wall time per ticket (the machine's cores shared by all sessions'
// goroutines); waits/ticket how many waits parked.
func BenchmarkGateSessions(b *testing.B) {
	for _, n := range []int{16, 64, 256, 1024} {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) {
			g := NewGate(50*time.Millisecond, time.Minute)
			ctx := context.Background()
			per := max(b.N/n, 4)
			chans := make([]chan *Ticket, n)
			curs := make([]*Cursor, n)
			var waited sync.Map
			var wg sync.WaitGroup
			for s := range n {
				chans[s], curs[s] = make(chan *Ticket, 8), &Cursor{}
				wg.Go(func() {
					parked := 0
					for t := range chans[s] {
						t.Queue(curs[s])
						curs[s].At(t)
						if r, _ := g.Wait(ctx, t, t.Start, 0, 0, nil); r == Ordered {
							parked++
						}
						g.Sent(t, 0)
						g.Finish(t)
					}
					waited.Store(s, parked)
				})
			}
			b.ResetTimer()
			for k := range per {
				for s := range n {
					start := int64(k)*150_000 + int64(s)*150_000/int64(n)
					chans[s] <- g.Register(start, start+100_000, curs[s], true, nil, false)
				}
			}
			for _, ch := range chans {
				close(ch)
			}
			wg.Wait()
			b.StopTimer()
			parked := 0
			waited.Range(func(_, v any) bool { parked += v.(int); return true })
			tickets := float64(per * n)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/tickets, "ns/ticket")
			b.ReportMetric(float64(parked)/tickets, "waits/ticket")
		})
	}
}
