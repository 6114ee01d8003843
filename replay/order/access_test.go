package order

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"
)

// access builds a ticket's Access from statements "r" (reads) or "w"
// (changes) on table:key ("" key: the whole table).
func access(stmts ...[3]string) *Access {
	a := &Access{}
	for _, s := range stmts {
		var keys []string
		if s[2] != "" {
			keys = []string{s[1] + "\x00" + s[2]}
		}
		a.Touches.Add([]string{s[1]}, keys, false)
		if s[0] == "w" {
			a.Changes.Add([]string{s[1]}, keys, false)
		}
	}
	return a
}

// A ticket with Access waits only for the earlier tickets it depends on:
// a read for the changes of what it reads, a change for whatever touched
// what it changes. One without Access waits for all of them, as before.
func TestGateWaitsOnlyForWhatItDependsOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := NewGate(time.Hour, time.Hour)
		add := func(start, end int64, changes bool, a *Access) *Ticket {
			return g.Add(&Ticket{Start: start, End: end, Changes: changes, Access: a}, nil)
		}
		w1 := add(0, 10, true, access([3]string{"w", "t1", "1"}))      // writes t1 row 1
		r5 := add(2, 12, false, access([3]string{"r", "t2", "5"}))     // reads t2 row 5
		other := add(20, 30, false, access([3]string{"r", "t2", "5"})) // t2 row 5: w1 is not its business
		same := add(20, 30, false, access([3]string{"r", "t1", "1"}))  // t1 row 1: after w1
		row2 := add(20, 30, false, access([3]string{"r", "t1", "2"}))  // another row of t1
		scan := add(20, 30, false, access([3]string{"r", "t1", ""}))   // all of t1: after w1
		blind := add(20, 30, false, nil)                               // unknown: after w1
		w5 := add(20, 30, true, access([3]string{"w", "t2", "5"}))     // after the read of row 5
		w9 := add(20, 30, true, access([3]string{"w", "t3", "9"}))     // depends on neither
		ctx := context.Background()
		for _, c := range []struct {
			name string
			t    *Ticket
		}{{"other", other}, {"row2", row2}, {"w9", w9}} {
			if r := first(g.Wait(ctx, c.t, c.t.Start, 0, 0, nil)); r != NotWaited {
				t.Errorf("%s waited (%v) for tickets it does not depend on", c.name, r)
			}
		}
		type res struct {
			name string
			r    WaitResult
		}
		done := make(chan res, 4)
		for _, c := range []struct {
			name string
			t    *Ticket
		}{{"same", same}, {"scan", scan}, {"blind", blind}, {"w5", w5}} {
			go func() { done <- res{c.name, first(g.Wait(ctx, c.t, c.t.Start, 0, 0, nil))} }()
		}
		synctest.Wait()
		select {
		case r := <-done:
			t.Fatalf("%s went (%v) before what it depends on was done", r.name, r.r)
		default:
		}
		g.Finish(r5) // frees w5 alone
		synctest.Wait()
		if r := <-done; r.name != "w5" || r.r != Ordered {
			t.Fatalf("after the read of row 5: %s %v, want w5 Ordered", r.name, r.r)
		}
		select {
		case r := <-done:
			t.Fatalf("%s went (%v) with w1 not done", r.name, r.r)
		default:
		}
		g.Finish(w1)
		synctest.Wait()
		got := map[string]WaitResult{}
		for range 3 {
			r := <-done
			got[r.name] = r.r
		}
		if got["same"] != Ordered || got["scan"] != Ordered || got["blind"] != Ordered {
			t.Fatalf("after w1: %v, want same, scan and blind Ordered", got)
		}
	})
}

// Whether two tickets wait for each other: by keys when both name the
// rows, by tables when one does not; two reads never; a ticket without
// Access for all and all for it.
func TestWaitsFor(t *testing.T) {
	tk := func(a *Access) *Ticket { return &Ticket{Access: a} }
	for _, c := range []struct {
		name string
		a, b *Ticket
		want bool
	}{
		{"two reads of a row", tk(access([3]string{"r", "t", "1"})), tk(access([3]string{"r", "t", "1"})), false},
		{"two reads of a table", tk(access([3]string{"r", "t", ""})), tk(access([3]string{"r", "t", ""})), false},
		{"write and read of a row", tk(access([3]string{"w", "t", "1"})), tk(access([3]string{"r", "t", "1"})), true},
		{"read and write of a row", tk(access([3]string{"r", "t", "1"})), tk(access([3]string{"w", "t", "1"})), true},
		{"write and read of other rows", tk(access([3]string{"w", "t", "1"})), tk(access([3]string{"r", "t", "2"})), false},
		{"write of a row, scan of its table", tk(access([3]string{"w", "t", "1"})), tk(access([3]string{"r", "t", ""})), true},
		{"write of a table, read of a row", tk(access([3]string{"w", "t", ""})), tk(access([3]string{"r", "t", "2"})), true},
		{"writes of two tables", tk(access([3]string{"w", "t", ""})), tk(access([3]string{"w", "u", ""})), false},
		{"one without access", tk(nil), tk(access([3]string{"r", "u", "1"})), true},
		{"a read view and a read", tk(&Access{Touches: Footprint{Any: true}}), tk(access([3]string{"r", "u", "1"})), false},
		{"a read view and a write", tk(&Access{Touches: Footprint{Any: true}}), tk(access([3]string{"w", "u", "1"})), true},
		{"a read view that writes, and a read of another row", tk(&Access{Touches: Footprint{Any: true}, Changes: access([3]string{"w", "u", "1"}).Changes}), tk(access([3]string{"r", "u", "2"})), false},
		{"nothing at all and a write", tk(&Access{}), tk(access([3]string{"w", "u", "1"})), false},
		{"nil ticket", nil, tk(access([3]string{"r", "u", "1"})), true},
	} {
		if got := waitsFor(c.a, c.b); got != c.want || waitsFor(c.b, c.a) != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// On the board, a unit goes past a running unit it does not depend on,
// though that one's statement ended first in the capture; it waits for
// one it depends on, and for any when either has no Access.
func TestBoardPassesUnitsItDoesNotDependOn(t *testing.T) {
	b := NewBoard(3, time.Hour)
	w1 := &Ticket{Access: access([3]string{"w", "t1", "1"})}
	b.Running(0, w1)
	b.Set(0, 10, true, []string{"t1"}, []string{"t1\x001"}) // a change that ended at 10
	b.Sent(0)
	other := &Ticket{Access: access([3]string{"r", "t2", "5"})}
	b.Running(1, other)
	if j := b.behind(1, 20, 30, false, []string{"t2"}, nil); j != -1 {
		t.Errorf("a read of another table waits behind connection %d", j)
	}
	same := &Ticket{Access: access([3]string{"r", "t1", "1"})}
	b.Running(1, same)
	if j := b.behind(1, 20, 30, false, []string{"t1"}, nil); j != 0 {
		t.Errorf("a read of the row written: behind %d, want 0", j)
	}
	b.Running(1, &Ticket{})
	if j := b.behind(1, 20, 30, false, []string{"t2"}, nil); j != 0 {
		t.Errorf("a unit without access: behind %d, want 0", j)
	}
	b.Set(0, math.MaxInt64, false, nil, nil)
	if j := b.behind(1, 20, 30, false, []string{"t2"}, nil); j != -1 {
		t.Errorf("behind an idle connection: %d", j)
	}
}

// A waiter with Access walks past at most maxPassed tickets it does not
// depend on; past them it waits, as one without Access would, so that a
// look costs what maxPassed sets, not what the backlog holds.
func TestGatePassesAtMostMaxPassed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, n := range []int{maxPassed, maxPassed + 1} {
			g := NewGate(time.Hour, time.Hour)
			var ahead []*Ticket
			for i := range n {
				ahead = append(ahead, g.Add(&Ticket{Start: int64(i), End: int64(i) + 1, Changes: true,
					Access: access([3]string{"w", "t2", string(rune('a' + i%26))})}, nil))
			}
			r := g.Add(&Ticket{Start: 1000, End: 1001, Access: access([3]string{"r", "t1", "1"})}, nil)
			done := make(chan WaitResult, 1)
			go func() { done <- first(g.Wait(context.Background(), r, r.Start, 0, 0, nil)) }()
			synctest.Wait()
			select {
			case res := <-done:
				if n > maxPassed {
					t.Fatalf("%d tickets ahead: went (%v) past more than maxPassed", n, res)
				}
				if res != NotWaited {
					t.Fatalf("%d tickets ahead: %v, want NotWaited", n, res)
				}
				continue
			default:
				if n <= maxPassed {
					t.Fatalf("%d tickets ahead, none it depends on: it waits", n)
				}
			}
			g.Finish(ahead[maxPassed])
			synctest.Wait()
			if res := <-done; res != Ordered {
				t.Fatalf("after the ticket past maxPassed: %v, want Ordered", res)
			}
		}
	})
}

// Ready says what Wait would do at once, without waiting or marking: not
// ready while a ticket t depends on is pending, ready once it is done,
// and ready from the start for a ticket that depends on none. Ready
// agrees with Wait in every case.
func TestReadyIsWhatWaitWouldDoAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := NewGate(time.Hour, time.Hour)
		add := func(start, end int64, changes bool, a *Access) *Ticket {
			return g.Add(&Ticket{Start: start, End: end, Changes: changes, Access: a}, nil)
		}
		w1 := add(0, 10, true, access([3]string{"w", "t1", "1"}))
		same := add(20, 30, false, access([3]string{"r", "t1", "1"})) // after w1
		row2 := add(20, 30, false, access([3]string{"r", "t1", "2"})) // not w1's business
		blind := add(20, 30, false, nil)                              // unknown: after w1
		early := add(5, 30, false, access([3]string{"r", "t1", "1"})) // began before w1 committed
		if g.Ready(same, same.Start) || g.Ready(blind, blind.Start) {
			t.Fatal("ready with w1, which it depends on, pending")
		}
		if !g.Ready(row2, row2.Start) || !g.Ready(early, early.Start) || !g.Ready(nil, 0) {
			t.Fatal("not ready, depending on nothing pending")
		}
		for _, c := range []*Ticket{row2, early} {
			if r := first(g.Wait(context.Background(), c, c.Start, 0, 0, nil)); r != NotWaited {
				t.Errorf("Ready, but Wait %v", r)
			}
		}
		if !Independent(row2, w1) || Independent(same, w1) || Independent(blind, row2) || Independent(nil, w1) {
			t.Error("Independent does not follow the tickets' Access")
		}
		g.Finish(w1)
		if !g.Ready(same, same.Start) || !g.Ready(blind, blind.Start) {
			t.Fatal("not ready with w1 done")
		}
		for _, c := range []*Ticket{same, blind} {
			if r := first(g.Wait(context.Background(), c, c.Start, 0, 0, nil)); r != NotWaited {
				t.Errorf("Ready, but Wait %v", r)
			}
		}
	})
}

// BenchmarkWaitsForIndependentUnits is a waiter's look at the earlier
// units it depends on none of (blockerLocked's walk): sysbench read/write
// transactions, 10 point reads and an UPDATE over 4 x 20,000 rows,
// against 200 earlier ones. ns/op is per pair.
func BenchmarkWaitsForIndependentUnits(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	unit := func() *Ticket {
		a := &Access{}
		for i := range 11 {
			table := fmt.Sprintf("s.sbtest%d", 1+rng.IntN(4))
			k := []string{fmt.Sprintf("%s\x00%d", table, 1+rng.IntN(20000))}
			a.Touches.Add([]string{table}, k, false)
			if i == 10 {
				a.Changes.Add([]string{table}, k, false)
			}
		}
		return &Ticket{Access: a}
	}
	earlier := make([]*Ticket, 200)
	for i := range earlier {
		earlier[i] = unit()
	}
	waiters := make([]*Ticket, 64)
	for i := range waiters {
		waiters[i] = unit()
	}
	b.ResetTimer()
	n := 0
	for i := 0; i < b.N; i++ {
		if waitsFor(waiters[i%len(waiters)], earlier[i%len(earlier)]) {
			n++
		}
	}
	b.ReportMetric(float64(n)/float64(b.N), "waits/op")
}
