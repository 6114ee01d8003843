package order

import (
	"context"
	"fmt"
	"slices"
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
// goroutines); waits/ticket how many waits parked; walks/ticket how many
// looks walked the backlog for stalls (mayStallLocked).
func BenchmarkGateSessions(b *testing.B) { benchGateSessions(b, false) }

// BenchmarkGateSessionsTrx: the same, each session inside a transaction
// that holds the rows its statements changed (published, as replay's
// workers do): its waits look for statements stuck behind those locks
// (the stall check, patience 1). Each session changes rows of its own,
// in one of four tables, so no statement is ever stuck: a look walks only
// while a statement has been in flight for --order-inflight (50 ms here),
// which at a thousand goroutines on two cores happens.
func BenchmarkGateSessionsTrx(b *testing.B) { benchGateSessions(b, true) }

func benchGateSessions(b *testing.B, trx bool) {
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
					patience, h := 0, (*Cursor)(nil)
					if trx {
						patience, h = 1, curs[s]
					}
					var held []LockStmt
					for t := range chans[s] {
						t.Queue(curs[s])
						curs[s].At(t)
						if r, _ := g.Wait(ctx, t, t.Start, patience, 0, h); r == Ordered {
							parked++
						}
						g.Sent(t, 0)
						if trx {
							// The transaction holds its last 8 statements' rows.
							held = append(held, LockStmt{End: t.End, Tables: t.Tables, Keys: t.Keys})
							if len(held) > 8 {
								held = held[1:]
							}
							g.Publish(curs[s], &LockSet{Stmts: slices.Clone(held)})
						}
						g.Finish(t)
					}
					waited.Store(s, parked)
				})
			}
			tables := [][]string{{"t0"}, {"t1"}, {"t2"}, {"t3"}}
			b.ResetTimer()
			for k := range per {
				for s := range n {
					start := int64(k)*150_000 + int64(s)*150_000/int64(n)
					if !trx {
						chans[s] <- g.Register(start, start+100_000, curs[s], true, nil, false)
						continue
					}
					chans[s] <- g.Add(&Ticket{Start: start, End: start + 100_000, Changes: true, Tables: tables[s%4],
						Keys: []string{fmt.Sprintf("t%d/%d.%d", s%4, s, k%8)}}, curs[s])
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
			b.ReportMetric(float64(g.walks)/tickets, "walks/ticket")
			b.ReportMetric(float64(g.pass)/tickets, "looks/ticket")
		})
	}
}

// BenchmarkFootprintAdd adds the row keys of a unit of n single-row
// changes, one a statement, as replay builds a unit's Access: the time
// per key should not grow with n (it grew linearly, each key compared
// with those before it: 20,000 keys took 3.5 s of a replay's CPU).
func BenchmarkFootprintAdd(b *testing.B) {
	for _, n := range []int{10, 1000, 20000} {
		keys := make([]string, n)
		for i := range keys {
			keys[i] = fmt.Sprintf("s.t\x00%d", i*7919%100003)
		}
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var f Footprint
				for _, k := range keys {
					f.Add([]string{"s.t"}, []string{k}, false)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/key")
		})
	}
}

// BenchmarkPublishGrowingSet publishes the lock set of one transaction
// of n single-row changes as its worker does, a statement at a time, each
// set its last with the statement appended: the time per statement
// should not grow with n (a transaction of 4,000 replayed at 31
// statements a second when each set was filed anew against the last).
func BenchmarkPublishGrowingSet(b *testing.B) {
	for _, n := range []int{10, 1000, 4000} {
		stmts := make([]LockStmt, n)
		for i := range stmts {
			stmts[i] = LockStmt{End: int64(i), Tables: []string{"s.t"}, Keys: []string{fmt.Sprintf("s.t\x00%d", i)}}
		}
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			g := NewGate(time.Hour, time.Hour)
			c := &Cursor{}
			for b.Loop() {
				for i := range stmts {
					g.Publish(c, &LockSet{Stmts: stmts[:i+1]})
				}
				g.Publish(c, nil)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/stmt")
		})
	}
}
