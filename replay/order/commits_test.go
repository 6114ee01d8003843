package order

import (
	"context"
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"
)

// waitAsync starts t's wait and returns where its result arrives.
func waitAsync(g *Gate, t *Ticket, patience int, h *Cursor) <-chan WaitResult {
	ch := make(chan WaitResult, 1)
	go func() { ch <- first(g.Wait(context.Background(), t, t.Start, patience, 0, h)) }()
	return ch
}

// pendingOrFail fails when the wait has ended.
func stillWaits(t *testing.T, ch <-chan WaitResult, what string) {
	t.Helper()
	synctest.Wait()
	select {
	case r := <-ch:
		t.Fatalf("%s went (%v)", what, r)
	default:
	}
}

func result(t *testing.T, ch <-chan WaitResult, what string) WaitResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(time.Minute):
		t.Fatalf("%s still waits", what)
		return 0
	}
}

// Commits that overlapped in the capture are unordered by time, but the
// server gave them an order (their GTIDs): each goes only once the one
// before it in that order is done, even when it was registered first,
// and even when that one is not registered yet. Before, all three went
// at once.
func TestGateKeepsTheServersCommitOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := NewGate(time.Hour, time.Hour)
		// Registered in start order; ranks 1, 2, 3 are the GTID order.
		c2 := g.Add(&Ticket{Start: 0, End: 10, Changes: true, Commit: 2, Floor: 1}, nil)
		c3 := g.Add(&Ticket{Start: 2, End: 11, Changes: true, Commit: 3, Floor: 1}, nil)
		free := g.Add(&Ticket{Start: 3, End: 9, Changes: true}, nil) // commits nothing ranked
		if r := first(g.Wait(context.Background(), free, free.Start, 1, 0, nil)); r != NotWaited {
			t.Fatalf("a ticket outside the commit order waited: %v", r)
		}
		w2, w3 := waitAsync(g, c2, 1, nil), waitAsync(g, c3, 1, nil)
		stillWaits(t, w2, "rank 2 before rank 1 was even registered")
		c1 := g.Add(&Ticket{Start: 1, End: 12, Changes: true, Commit: 1, Floor: 1}, nil)
		if r := first(g.Wait(context.Background(), c1, c1.Start, 1, 0, nil)); r != NotWaited {
			t.Fatalf("rank 1 waited: %v", r)
		}
		stillWaits(t, w2, "rank 2 while rank 1 is registered, not done")
		g.Sent(c1, 0)
		stillWaits(t, w2, "rank 2 while rank 1 is sent, not done")
		stillWaits(t, w3, "rank 3 while rank 2 is not done")
		g.Finish(c1)
		if r := result(t, w2, "rank 2 after rank 1 was done"); r != Ordered {
			t.Fatalf("rank 2: %v, want Ordered", r)
		}
		stillWaits(t, w3, "rank 3 while rank 2 is not done")
		g.Finish(c2)
		if r := result(t, w3, "rank 3 after rank 2 was done"); r != Ordered {
			t.Fatalf("rank 3: %v, want Ordered", r)
		}
		g.Finish(c3)
		g.Finish(free)
		if len(g.commits.pending) != 0 || g.commits.low != 4 || len(g.commits.above) != 0 {
			t.Fatalf("commit order not empty: %d pending, low %d, %d above", len(g.commits.pending), g.commits.low, len(g.commits.above))
		}
	})
}

// Only conflicting commits wait for each other: a commit whose
// transaction shares no row (nor a table locked without naming rows)
// with the pending ones below it goes at once; one that does waits; and a
// commit of another replication domain never waits.
func TestGateCommitOrderOnlyBetweenConflicts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := NewGate(time.Hour, time.Hour)
		row := func(k string) *Footprint { return &Footprint{Keys: []string{"t\x00" + k}, Tables: []string{"t"}} }
		c1 := g.Add(&Ticket{Start: 0, End: 10, Changes: true, Commit: 1, Floor: 1, Trx: row("1")}, nil)
		c2 := g.Add(&Ticket{Start: 1, End: 9, Changes: true, Commit: 2, Floor: 1, Trx: row("2")}, nil)
		c3 := g.Add(&Ticket{Start: 2, End: 8, Changes: true, Commit: 3, Floor: 1, Trx: row("1")}, nil)
		scan := g.Add(&Ticket{Start: 3, End: 7, Changes: true, Commit: 4, Floor: 1, Trx: &Footprint{Keyless: []string{"t"}, Tables: []string{"t"}}}, nil)
		other := g.Add(&Ticket{Start: 4, End: 6, Changes: true, Commit: 5, Floor: 5, Trx: row("1")}, nil) // another domain
		if r := first(g.Wait(context.Background(), c2, c2.Start, 1, 0, nil)); r != NotWaited {
			t.Fatalf("rank 2 (row 2) waited for rank 1 (row 1): %v", r)
		}
		if r := first(g.Wait(context.Background(), other, other.Start, 1, 0, nil)); r != NotWaited {
			t.Fatalf("another domain's commit waited: %v", r)
		}
		w3, w4 := waitAsync(g, c3, 1, nil), waitAsync(g, scan, 1, nil)
		stillWaits(t, w3, "rank 3 (row 1) while rank 1 (row 1) is not done")
		g.Finish(c1)
		if r := result(t, w3, "rank 3 after rank 1"); r != Ordered {
			t.Fatalf("rank 3: %v", r)
		}
		stillWaits(t, w4, "rank 4 (a scan of t) while ranks 2 and 3 are not done")
		g.Finish(c3)
		stillWaits(t, w4, "rank 4 (a scan of t) while rank 2 is not done")
		g.Finish(c2)
		if r := result(t, w4, "rank 4 after ranks 1 to 3"); r != Ordered {
			t.Fatalf("rank 4: %v", r)
		}
	})
}

// A rank that never comes (its record was lost, or this replay does not
// run it) holds the next one only until the capture is read
// (CloseCommits), or until maxAhead later ranks have come.
func TestGateCommitRankThatNeverComes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := NewGate(time.Hour, time.Hour)
		c6 := g.Add(&Ticket{Start: 0, End: 10, Changes: true, Commit: 6, Floor: 1}, nil)
		w := waitAsync(g, c6, 1, nil)
		stillWaits(t, w, "rank 6 without rank 5")
		g.CloseCommits()
		if r := result(t, w, "rank 6 once no more ranks come"); r != Ordered {
			t.Fatalf("rank 6: %v", r)
		}

		g = NewGate(time.Hour, time.Hour)
		for r := int64(2); r <= maxAhead+1; r++ {
			g.Add(&Ticket{Start: r, End: r + 1, Commit: r, Floor: 1, done: true}, nil)
		}
		if g.commits.low != 1 || len(g.commits.above) != maxAhead {
			t.Fatalf("low %d with %d above, want 1 and %d", g.commits.low, len(g.commits.above), maxAhead)
		}
		g.Add(&Ticket{Start: 1e6, End: 1e6 + 1, Commit: maxAhead + 2, Floor: 1, done: true}, nil)
		if g.commits.low != maxAhead+3 || len(g.commits.above) != 0 {
			t.Fatalf("after rank 1 was passed over: low %d with %d above, want %d and 0", g.commits.low, len(g.commits.above), maxAhead+3)
		}
		if !g.commits.registered(1) {
			t.Fatal("rank 1 still counts as to come")
		}
	})
}

// A commit waiting for the one before it, while that one's session is
// stuck behind the waiter's own locks, yields (Stalled, naming the stuck
// statement) so that its transaction is rolled back and run again after;
// a commit that cannot wait (the hard bound) goes ahead and marks the
// one it overtook and its session's current ticket; a commit reopened
// (its transaction runs again) holds the next one again.
func TestGateCommitOrderYieldsAndBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := NewGate(time.Hour, 500*time.Millisecond)
		s1, s2 := &Cursor{}, &Cursor{}
		// Session 1: an UPDATE of t in flight, then its COMMIT (rank 1).
		u := g.Add(&Ticket{Start: 5, End: 8, Changes: true, Tables: []string{"t"}}, s1)
		c1 := g.Add(&Ticket{Start: 9, End: 20, Changes: true, Commit: 1, Floor: 1}, s1)
		// Session 2 wrote t before u started (it holds the lock u waits
		// for) and commits second.
		c2 := g.Add(&Ticket{Start: 10, End: 15, Changes: true, Commit: 2, Floor: 1}, s2)
		s1.At(u)
		g.Sent(u, 0)
		s2.At(c2)
		g.Publish(s2, &LockSet{Stmts: []LockStmt{{End: 6, Tables: []string{"t"}}}})
		w := make(chan []*Ticket, 1)
		go func() {
			r, stuck := g.Wait(context.Background(), c2, c2.Start, 1, 0, s2)
			if r != Stalled {
				t.Errorf("rank 2 behind its own locks: %v, want Stalled", r)
			}
			w <- stuck
		}()
		if stuck := <-w; len(stuck) != 1 || stuck[0] != u {
			t.Fatalf("stuck: %v, want the UPDATE in flight", stuck)
		}

		// Without patience it waits, up to the hard bound, and then marks
		// what it overtook.
		g.Publish(s2, nil)
		began := time.Now()
		if r := first(g.Wait(context.Background(), c2, c2.Start, 0, 0, nil)); r != TimedOut {
			t.Fatalf("rank 2 with rank 1 never done: %v, want TimedOut", r)
		}
		if d := time.Since(began); d != 500*time.Millisecond {
			t.Fatalf("went after %v, want the 500ms hard bound", d)
		}
		if !c1.Overtaken() || !u.Overtaken() {
			t.Fatalf("overtaken: rank 1 %v, its session's UPDATE %v; want both", c1.Overtaken(), u.Overtaken())
		}
		g.Finish(u)
		g.Finish(c1)
		g.Finish(c2)

		// Rank 1 reopened: rank 2 (run again) waits for it once more.
		g.Reopen([]*Ticket{c1})
		g.Reopen([]*Ticket{c2})
		w2 := waitAsync(g, c2, 1, nil)
		stillWaits(t, w2, "rank 2 while rank 1 runs again")
		g.Finish(c1)
		if r := result(t, w2, "rank 2 after rank 1 ran again"); r != Ordered {
			t.Fatalf("rank 2: %v", r)
		}
	})
}

// conflicts by the keys' mask and sums says what the keys themselves
// say: over 300 footprints of one to twelve keys out of 2,000 rows, and
// one in ten of 40 to 400 keys (indexed: footprintMapped), with rows
// added twice (masks that share a bit without a shared key included),
// every pair agrees with a plain comparison of the key strings, and each
// footprint holds each row it was given once.
func TestFootprintMaskAgreesWithTheKeys(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	fps := make([]*Footprint, 300)
	for i := range fps {
		f := &Footprint{}
		n := 1 + rng.IntN(12)
		if i%10 == 0 {
			n = 40 + rng.IntN(360)
		}
		given := map[string]bool{}
		for range n {
			k := fmt.Sprintf("s.t\x00%d", rng.IntN(2000))
			given[k] = true
			f.Add([]string{"s.t"}, []string{k}, false)
		}
		if len(f.Keys) != len(given) || len(f.sums) != len(given) {
			t.Fatalf("footprint %d: %d keys, %d sums; want the %d rows given", i, len(f.Keys), len(f.sums), len(given))
		}
		if (f.at != nil) != (len(f.Keys) > footprintMapped) {
			t.Fatalf("footprint %d of %d keys: indexed %v", i, len(f.Keys), f.at != nil)
		}
		for k := range given {
			if !f.has(k, maphash.String(keySeed, k)) {
				t.Fatalf("footprint %d: %q given, not held", i, k)
			}
		}
		fps[i] = f
	}
	shared, maskOnly := 0, 0
	for _, a := range fps {
		for _, b := range fps {
			want := sharedKey(a.Keys, b.Keys)
			if got := a.conflicts(b); got != want {
				t.Fatalf("%q and %q: conflicts %v, want %v", a.Keys, b.Keys, got, want)
			}
			switch {
			case want:
				shared++
			case a.mask&b.mask != 0:
				maskOnly++
			}
		}
	}
	if shared == 0 || maskOnly == 0 {
		t.Errorf("pairs with a shared key %d, with a shared mask bit only %d: want both", shared, maskOnly)
	}
}
