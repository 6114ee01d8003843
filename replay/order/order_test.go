package order

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// A record waits exactly for the records that ended before it started,
// never for one it overlapped in the capture.
func TestGateWaitsForWhatEndedBefore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := NewGate(time.Hour, time.Hour)
		a := g.Register(0, 10, nil, true, nil, false)  // ended before c started
		b := g.Register(5, 30, nil, true, nil, false)  // overlaps c
		c := g.Register(20, 40, nil, true, nil, false) // waits for a only
		ctx := context.Background()
		if r := first(g.Wait(ctx, a, a.Start, 1, 0, nil)); r != NotWaited {
			t.Fatalf("a waited: %v", r)
		}
		if r := first(g.Wait(ctx, b, b.Start, 1, 0, nil)); r != NotWaited {
			t.Fatalf("b waited for a although they overlapped: %v", r)
		}
		done := make(chan WaitResult)
		go func() { done <- first(g.Wait(ctx, c, c.Start, 1, 0, nil)) }()
		select {
		case r := <-done:
			t.Fatalf("c went before a finished: %v", r)
		case <-time.After(50 * time.Millisecond):
		}
		g.Finish(a)
		select {
		case r := <-done:
			if r != Ordered {
				t.Fatalf("c: %v, want waitOrdered", r)
			}
		case <-time.After(time.Second):
			t.Fatal("c still waits after a finished (b overlapped it and must not hold it)")
		}
		g.Finish(b)
		g.Finish(c)
		if g.all.minEnd.Load() != 1<<63-1 || len(g.all.pending) != 0 || len(g.changes.pending) != 0 {
			t.Fatalf("gate not empty: minEnd %d, %d pending", g.all.minEnd.Load(), len(g.all.pending))
		}
	})
}

// Finishing out of order only releases waiters when everything before them
// is done; registration out of end order is sorted.
func TestGateOutOfOrderFinish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := NewGate(time.Hour, time.Hour)
		x := g.Register(0, 50, nil, true, nil, false)
		y := g.Register(0, 10, nil, true, nil, false) // registered later, ends earlier
		z := g.Register(60, 70, nil, true, nil, false)
		if g.all.pending[0] != y || g.all.minEnd.Load() != 10 {
			t.Fatalf("registration not sorted by end")
		}
		got := make(chan WaitResult, 1)
		go func() { got <- first(g.Wait(context.Background(), z, z.Start, 1, 0, nil)) }()
		g.Finish(x) // y still pending: z keeps waiting
		if g.all.minEnd.Load() != 10 {
			t.Fatalf("minEnd %d after finishing x, want 10", g.all.minEnd.Load())
		}
		select {
		case r := <-got:
			t.Fatalf("z went (%v) with y, which ended before it, not done", r)
		case <-time.After(50 * time.Millisecond):
		}
		g.Finish(y)
		select {
		case r := <-got:
			if r != Ordered {
				t.Fatalf("z: %v, want waitOrdered", r)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("z still waits after x and y are done")
		}
	})
}

// A record in flight longer than the bound is reported as stalled (it may
// be blocked on a lock held by the very transaction that waits), and so is
// one queued behind its own session's stalled record; without reporting
// stalls a waiter waits on, up to the hard bound.
func TestGateStallsAndBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := NewGate(40*time.Millisecond, 300*time.Millisecond)
		ctx := context.Background()
		sa := &Cursor{}
		a := g.Register(0, 1, sa, true, nil, false)
		b := g.Register(10, 20, nil, true, nil, false)
		sa.At(a)
		g.Sent(a, 0)
		start := time.Now()
		if r := first(g.Wait(ctx, b, b.Start, 1, 0, nil)); r != Stalled {
			t.Fatalf("b: %v, want waitStalled", r)
		}
		if took := time.Since(start); took < 35*time.Millisecond || took > 250*time.Millisecond {
			t.Fatalf("stalled after %v, want about the 40ms bound", took)
		}
		// Queued behind its session's record in flight: stalled too.
		a2 := g.Register(2, 3, sa, true, nil, false) // a's session, not yet handled
		c := g.Register(30, 40, nil, true, nil, false)
		if r := first(g.Wait(ctx, c, c.Start, 1, 0, nil)); r != Stalled {
			t.Fatalf("c (waiting for a2 behind a): %v, want waitStalled", r)
		}
		// Not reporting stalls: the waiter waits for them to finish.
		g.Finish(b)
		go func() { time.Sleep(60 * time.Millisecond); g.Finish(a); g.Finish(a2) }()
		if r := first(g.Wait(ctx, c, c.Start, 0, 0, nil)); r != Ordered {
			t.Fatalf("c after a finished: %v, want waitOrdered", r)
		}
		g.Finish(c)
		// A record never sent is waited for up to the hard bound.
		d := g.Register(5, 6, nil, true, nil, false)
		e := g.Register(50, 60, nil, true, nil, false)
		start = time.Now()
		if r := first(g.Wait(ctx, e, e.Start, 1, 0, nil)); r != TimedOut {
			t.Fatalf("e: %v, want waitTimeout", r)
		}
		if took := time.Since(start); took < 290*time.Millisecond {
			t.Fatalf("timed out after %v, before the 300ms bound", took)
		}
		// A threshold later than the ticket's start (a unit's COMMIT) waits for
		// what ended before it.
		f := g.Register(55, 100, nil, true, nil, false)
		g.Finish(e)
		if r := first(g.Wait(ctx, f, f.Start, 1, 0, nil)); r != TimedOut {
			t.Fatalf("f waits for d (never sent) up to the bound: %v", r)
		}
		g.Finish(d)
		if r := first(g.Wait(ctx, f, 99, 1, 0, nil)); r != NotWaited && r != Ordered {
			t.Fatalf("f's commit: %v", r)
		}
		// A cancelled context ends a wait at once.
		h := g.Register(200, 201, nil, true, nil, false)
		k := g.Register(300, 301, nil, true, nil, false)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if r := first(g.Wait(cctx, k, k.Start, 1, 0, nil)); r != TimedOut {
			t.Fatalf("cancelled wait: %v", r)
		}
		g.Finish(f)
		g.Finish(h)
		g.Finish(k)
		if len(g.all.waiters)+len(g.changes.waiters) != 0 || len(g.all.pending) != 0 {
			t.Fatalf("%d waiters and %d tickets left behind", len(g.all.waiters)+len(g.changes.waiters), len(g.all.pending))
		}
	})
}

func first(r WaitResult, _ []*Ticket) WaitResult { return r }

// Reads wait only for changes before them; a change waits for everything
// before it, reads included.
func TestGateReadsWaitOnlyForChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := NewGate(time.Hour, time.Hour)
		ctx := context.Background()
		r1 := g.Register(0, 10, nil, false, nil, false) // a read
		w1 := g.Register(0, 20, nil, true, nil, false)  // a write
		r2 := g.Register(15, 30, nil, false, nil, false)
		if res := first(g.Wait(ctx, r2, r2.Start, 0, 0, nil)); res != NotWaited {
			t.Fatalf("a read waited for a read: %v", res)
		}
		r3 := g.Register(25, 40, nil, false, nil, false) // after w1 ended: waits for it
		done := make(chan WaitResult, 1)
		go func() { done <- first(g.Wait(ctx, r3, r3.Start, 0, 0, nil)) }()
		select {
		case <-done:
			t.Fatal("a read went before the write that ended before it")
		case <-time.After(30 * time.Millisecond):
		}
		w2 := g.Register(12, 50, nil, true, nil, false) // a write after r1: waits for it
		wdone := make(chan WaitResult, 1)
		go func() { wdone <- first(g.Wait(ctx, w2, w2.Start, 0, 0, nil)) }()
		g.Finish(w1)
		if res := <-done; res != Ordered {
			t.Fatalf("r3: %v", res)
		}
		select {
		case <-wdone:
			t.Fatal("a write went before the read that ended before it")
		case <-time.After(30 * time.Millisecond):
		}
		g.Finish(r1)
		if res := <-wdone; res != Ordered {
			t.Fatalf("w2: %v", res)
		}
		for _, x := range []*Ticket{r2, r3, w2} {
			g.Finish(x)
		}
	})
}

func BenchmarkGateNoConflict(b *testing.B) {
	// Every record overlaps the next (a point-select capture): the fast
	// path, one atomic load per wait.
	g := NewGate(50*time.Millisecond, time.Second)
	ctx := context.Background()
	for i := range b.N {
		t := g.Register(int64(i), int64(i)+10, nil, true, nil, false)
		first(g.Wait(ctx, t, t.Start, 1, 0, nil))
		g.Finish(t)
	}
}

// A transaction run again (for order, or after a deadlock) undid what its
// records did: their tickets reopen, and what came after them in the
// capture waits again until they have run again. The first time through,
// a record whose wait had ended stays ended; a later one waits.
func TestGateReopen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := NewGate(time.Hour, time.Hour)
		ctx := context.Background()
		st := &Cursor{}
		del := g.Register(0, 10, st, true, nil, false)    // T: DELETE id=1
		ins := g.Register(11, 20, st, true, nil, false)   // T: INSERT id=1
		early := g.Register(5, 40, nil, true, nil, false) // overlapped T: never waits for it
		late := g.Register(25, 30, nil, true, nil, false) // U: DELETE id=1, after T's INSERT
		g.Finish(del)
		g.Finish(ins)
		if r := first(g.Wait(ctx, late, late.Start, 0, 0, nil)); r != NotWaited {
			t.Fatalf("late waited with T done: %v", r)
		}
		// T is rolled back to run again: del is popped already, ins too.
		g.Reopen([]*Ticket{del, ins, nil})
		if del.done || ins.done || !del.in[0] || !ins.in[1] || g.all.minEnd.Load() != 10 {
			t.Fatalf("reopen: done %v/%v, lanes %v/%v, minEnd %d", del.done, ins.done, del.in, ins.in, g.all.minEnd.Load())
		}
		if r := first(g.Wait(ctx, early, early.Start, 0, 0, nil)); r != NotWaited {
			t.Fatalf("early waited for a ticket it overlapped: %v", r)
		}
		done := make(chan WaitResult)
		go func() { done <- first(g.Wait(ctx, late, late.Start, 0, 0, nil)) }()
		g.Finish(del)
		select {
		case r := <-done:
			t.Fatalf("late went with T's INSERT not run again: %v", r)
		case <-time.After(50 * time.Millisecond):
		}
		g.Finish(ins)
		select {
		case r := <-done:
			if r != Ordered {
				t.Fatalf("late: %v, want waitOrdered", r)
			}
		case <-time.After(time.Second):
			t.Fatal("late still waits after T ran again")
		}
		// Reopening a done ticket still held in a lane (not popped) does not
		// put it there twice.
		a := g.Register(50, 60, nil, true, nil, false)
		b := g.Register(51, 70, nil, true, nil, false)
		g.Finish(early)
		g.Finish(late)
		g.Finish(b) // a still pending: b stays in the lanes
		g.Reopen([]*Ticket{b})
		g.Finish(a)
		g.Finish(b)
		if len(g.all.pending) != 0 || len(g.changes.pending) != 0 || g.all.minEnd.Load() != 1<<63-1 {
			t.Fatalf("gate not empty: %d/%d pending, minEnd %d", len(g.all.pending), len(g.changes.pending), g.all.minEnd.Load())
		}
	})
}

// Patience doubles the in-flight bound per step: a transaction started
// over for order gives a slow statement more time before it stalls again,
// and patience 0 never reports a stall.
func TestGatePatience(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := NewGate(40*time.Millisecond, 2*time.Second)
		a := g.Register(0, 1, nil, true, nil, false)
		for _, c := range []struct {
			patience int
			want     time.Duration
		}{{0, 0}, {1, 40 * time.Millisecond}, {2, 80 * time.Millisecond}, {4, 320 * time.Millisecond}} {
			if got := g.inflightBound(a, c.patience); c.patience > 0 && got != c.want {
				t.Errorf("inflightBound(patience %d) = %v, want %v", c.patience, got, c.want)
			}
		}
		g.Sent(a, 0)
		a.sent.Store(g.now().Add(-60 * time.Millisecond).UnixNano()) // in flight 60ms
		b := g.Register(10, 20, nil, true, nil, false)
		for _, c := range []struct {
			patience int
			stuck    int
		}{{0, 0}, {1, 1}, {2, 0}} {
			g.mu.Lock()
			first, stuck, _, _, _ := g.blockerLocked(g.lane(b), b, b.Start, c.patience, nil)
			g.mu.Unlock()
			if first != a || len(stuck) != c.stuck || c.stuck > 0 && stuck[0] != a {
				t.Errorf("patience %d, in flight 60ms: blocker %v, stuck %v; want a, and %d stuck", c.patience, first, stuck, c.stuck)
			}
		}
	})
}

// A waiter whose transaction may hold a lock the statement it waits for
// needs — one of its locking statements did not end, in the capture,
// before that statement started, and they share a table — yields as soon
// as the statement has been in flight for lockBound, whatever its
// patience; one whose locking statements all ended before it started, or
// touch other tables, cannot be in its way and waits for the in-flight
// bound — unless s is unclocked (a write that bypassed the proxy), whose
// place says nothing of when it took its locks.
func TestGateYieldsAtOnceToWhatItMayBlock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := NewGate(time.Second, 10*time.Second)
		// s: a statement in flight on accounts, captured at [100, 110].
		s := g.Register(100, 110, nil, true, []string{"accounts"}, false)
		g.Sent(s, 700*time.Microsecond)
		s.sent.Store(g.now().Add(-25 * time.Millisecond).UnixNano()) // 25ms: past lockBound (1.4ms), far from the in-flight bound (1s)
		waiter := g.Register(200, 210, nil, true, []string{"accounts"}, false)
		holding := func(end int64, tables ...string) *Cursor {
			c := &Cursor{}
			c.locks.Store(&LockSet{Stmts: []LockStmt{{End: end, Tables: tables}}})
			return c
		}
		for _, c := range []struct {
			name  string
			h     *Cursor
			stuck bool
		}{
			{"its write overlapped s", holding(105, "accounts"), true},
			{"its locking read ended after s", holding(150, "accounts"), true},
			{"its write ended before s began", holding(90, "accounts"), false},
			{"its write is on another table", holding(105, "other"), false},
			{"it holds nothing", nil, false},
		} {
			for _, patience := range []int{1, 6} {
				g.mu.Lock()
				_, stuck, _, wake, _ := g.blockerLocked(g.lane(waiter), waiter, waiter.Start, patience, c.h)
				g.mu.Unlock()
				if got := len(stuck) == 1 && stuck[0] == s; got != c.stuck {
					t.Errorf("%s, patience %d: stuck %v, want %v", c.name, patience, got, c.stuck)
				}
				if !c.stuck && c.h != nil && wake > lockBoundMax {
					t.Errorf("%s: looks again in %v, want at most %v", c.name, wake, lockBoundMax)
				}
			}
		}
		// A write that bypassed the proxy, placed at 100 by its GTID: it
		// may have waited for its lock since before 90, so a holder whose
		// write ended then is in its way too.
		s.Unclocked = true
		for _, patience := range []int{1, 6} {
			g.mu.Lock()
			_, stuck, _, _, _ := g.blockerLocked(g.lane(waiter), waiter, waiter.Start, patience, holding(90, "accounts"))
			g.mu.Unlock()
			if len(stuck) != 1 || stuck[0] != s {
				t.Errorf("an unclocked statement, a holder whose write ended before its place, patience %d: stuck %v, want s", patience, stuck)
			}
		}
		s.Unclocked = false
		if b := lockBound(s); b != 1400*time.Microsecond {
			t.Errorf("lockBound of a 0.7ms statement = %v, want 1.4ms", b)
		}
		s.span.Store(int64(time.Hour))
		if b := lockBound(s); b != lockBoundMax {
			t.Errorf("lockBound of a long statement = %v, want %v", b, lockBoundMax)
		}
	})
}

// A cycle through another transaction: the waiter waits for s; s is stuck
// behind x's locks; x's own statement in flight is stuck behind the
// waiter's. The waiter yields at lockBound although it cannot block s
// itself; without the link through x it waits.
func TestGateYieldsToALockChain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := NewGate(time.Second, 10*time.Second)
		s := g.Register(100, 110, nil, true, []string{"district"}, false)
		g.Sent(s, time.Millisecond)
		s.sent.Store(g.now().Add(-20 * time.Millisecond).UnixNano())
		xs := g.Register(105, 250, &Cursor{}, true, []string{"stock"}, false) // x's statement in flight, not waited for
		g.Sent(xs, time.Millisecond)
		xs.sent.Store(g.now().Add(-20 * time.Millisecond).UnixNano())
		x := xs.session.Load()
		x.At(xs)
		g.Publish(x, &LockSet{Stmts: []LockStmt{{End: 120, Tables: []string{"district"}}}}) // may block s
		waiter := g.Register(200, 210, nil, true, []string{"district"}, false)
		h := &Cursor{}
		g.Publish(h, &LockSet{Stmts: []LockStmt{{End: 140, Tables: []string{"stock"}}}}) // may block xs, not s
		g.mu.Lock()
		_, stuck, _, _, _ := g.blockerLocked(g.lane(waiter), waiter, waiter.Start, 1, h)
		g.mu.Unlock()
		if len(stuck) != 1 || stuck[0] != s {
			t.Fatalf("through x: stuck %v, want s", stuck)
		}
		g.Publish(x, &LockSet{Stmts: []LockStmt{{End: 120, Tables: []string{"orders"}}}}) // x cannot block s
		g.mu.Lock()
		_, stuck, _, _, _ = g.blockerLocked(g.lane(waiter), waiter, waiter.Start, 1, h)
		g.mu.Unlock()
		if len(stuck) != 0 {
			t.Fatalf("no chain: stuck %v, want none", stuck)
		}
	})
}

// A change that goes ahead after the hard bound marks what it overtook:
// every ticket that ended before it and is not done (their records may
// see its change), and itself reordered only when one of those is a
// conflicting change (the data differs from then on). A read going ahead
// marks nothing; a change overtaking only reads or other tables' changes
// is not reordered.
func TestGateMarksWhatAReleasedChangeOvertakes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := NewGate(time.Hour, 20*time.Millisecond)
		ctx := context.Background()
		read := g.Register(0, 10, nil, false, []string{"t"}, false)
		other := g.Register(1, 11, nil, true, []string{"u"}, false) // another table's change
		done := g.Register(2, 12, nil, true, []string{"t"}, false)
		g.Finish(done)
		// A read released: it marks nothing.
		r := g.Register(20, 30, nil, false, []string{"t"}, false)
		if res := first(g.Wait(ctx, r, r.Start, 0, 0, nil)); res != TimedOut {
			t.Fatalf("read: %v, want waitTimeout", res)
		}
		if other.overtaken.Load() || r.reordered.Load() {
			t.Fatalf("a read going ahead marked others (other overtaken %v, reordered %v)", other.overtaken.Load(), r.reordered.Load())
		}
		g.Finish(r)
		// A change to t released ahead of a read of t and a change to u.
		c := g.Register(40, 50, nil, true, []string{"t"}, false)
		if res := first(g.Wait(ctx, c, c.Start, 0, 0, nil)); res != TimedOut {
			t.Fatalf("change: %v, want waitTimeout", res)
		}
		if !read.overtaken.Load() || !other.overtaken.Load() || done.overtaken.Load() {
			t.Fatalf("overtaken: read %v other %v done %v, want true true false", read.overtaken.Load(), other.overtaken.Load(), done.overtaken.Load())
		}
		if c.reordered.Load() {
			t.Fatal("reordered though no conflicting change was overtaken")
		}
		g.Finish(c)
		// A change to t released ahead of a change to t not yet done.
		pending := g.Register(41, 55, nil, true, []string{"t"}, false)
		d := g.Register(60, 70, nil, true, []string{"t"}, false)
		if res := first(g.Wait(ctx, d, d.Start, 0, 0, nil)); res != TimedOut {
			t.Fatalf("second change: %v, want waitTimeout", res)
		}
		if !pending.overtaken.Load() || !d.reordered.Load() {
			t.Fatalf("pending overtaken %v, d reordered %v: want both", pending.overtaken.Load(), d.reordered.Load())
		}
		for _, x := range []*Ticket{read, other, pending, d} {
			g.Finish(x)
		}
	})
}

// A waiter that holds a transaction and goes ahead after the hard bound
// takes its transaction's earlier statements ahead with it. Here session
// B's UPDATE of row 1 (s, captured at [100, 110]) is on the server, stuck
// behind the lock that the waiter's transaction took on row 1 with a
// DELETE that overlapped s in the capture (it got the lock after s there,
// before s here: s had been sent, but the DELETE reached the server
// first). The waiter's next statement u — an UPDATE of row 2, or its
// COMMIT — waits for s, which ended before it began. With --order-timeout
// 1 ms and s sent as the wait begins, the hard bound runs out before s has
// been in flight for lockBound, so u does not yield: it is released, and
// s runs only once the transaction has committed — the two changes to
// row 1 applied in the other order. u is marked reordered (its worker
// lists the transaction's writes), though u itself shares no row with s.
// A transaction whose write ended before s began, or locked another row,
// cannot be what s waits for: u is then not reordered.
func TestGateMarksWhatAReleasedTransactionOvertakes(t *testing.T) {
	commit := func() *Ticket { return &Ticket{Start: 200, End: 210, Changes: true} } // names no table
	for _, c := range []struct {
		name      string
		held      LockStmt
		u         func() *Ticket
		reordered bool
	}{
		{"its UPDATE of row 2", LockStmt{End: 115, Tables: []string{"t"}, Keys: []string{"t/1"}},
			func() *Ticket {
				return &Ticket{Start: 200, End: 210, Changes: true, Tables: []string{"t"}, Keys: []string{"t/2"}, SendOrder: true}
			}, true},
		{"its COMMIT", LockStmt{End: 115, Tables: []string{"t"}, Keys: []string{"t/1"}},
			commit, true},
		{"its COMMIT, row 1 locked before s began", LockStmt{End: 95, Tables: []string{"t"}, Keys: []string{"t/1"}},
			commit, false},
		{"its COMMIT, row 3 locked", LockStmt{End: 115, Tables: []string{"t"}, Keys: []string{"t/3"}},
			commit, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := NewGate(time.Hour, time.Millisecond)
				s := g.Add(&Ticket{Start: 100, End: 110, Changes: true, Tables: []string{"t"}, Keys: []string{"t/1"}, SendOrder: true}, &Cursor{})
				s.Current()
				g.Sent(s, 100*time.Microsecond)
				h := &Cursor{}
				g.Publish(h, &LockSet{Stmts: []LockStmt{c.held}})
				u := g.Add(c.u(), h)
				u.Current()
				res, stuck := g.Wait(context.Background(), u, u.Start, 1, 0, h)
				if res != TimedOut || len(stuck) != 0 {
					t.Fatalf("u: %v (stuck %v), want TimedOut: the hard bound runs out before s has been in flight for lockBound", res, stuck)
				}
				if !s.Overtaken() {
					t.Error("s not overtaken: its outcome is not flagged")
				}
				if got := u.TakeReordered(); got != c.reordered {
					t.Errorf("u reordered %v, want %v", got, c.reordered)
				}
				g.Finish(u)
				g.Finish(s)
			})
		})
	}
}

// The hard bound counts from the last progress: a record waiting behind
// records that keep getting done waits for all of them, however long that
// takes in all; one behind a record that makes no progress is released
// the hard bound after the last one was done. (At --speed 0 a session
// runs ahead of the others as far as the target lets it: at a thousand
// sessions hundreds of reads were released after 2 s while the replay was
// only catching up.)
func TestGateHardBoundCountsFromTheLastProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const bound = 100 * time.Millisecond
		g := NewGate(10*time.Millisecond, bound)
		var before []*Ticket
		for i := range int64(5) {
			before = append(before, g.Register(i*10, i*10+5, nil, true, nil, false))
		}
		stuck := g.Register(60, 65, nil, true, nil, false)
		r := g.Register(100, 101, nil, false, nil, false) // a read: waits for the changes before it
		go func() {
			for _, p := range before {
				time.Sleep(61 * time.Millisecond) // each within the bound, 305 ms in all
				g.Finish(p)
			}
		}()
		start := time.Now()
		res := first(g.Wait(context.Background(), r, r.Start, 0, 0, nil))
		waited := time.Since(start)
		// Released by the bound after the fifth was done, behind the one
		// never done; not at 100 ms, behind the first. The bound counts
		// from when the fifth was done (305 ms), not from when the waiter
		// saw it (it looks every quarter of the bound; before, every
		// --order-inflight, 10 ms here, and counted from its look at 310).
		// (synctest's clock.)
		if res != TimedOut || waited != 405*time.Millisecond {
			t.Fatalf("wait ended %v after %v; want TimedOut after 405ms (the last progress at 305ms, then the bound)", res, waited)
		}
		g.Finish(stuck)
		g.Finish(r)
	})
}

// A waiter whose transaction holds locks, and whose look found nothing
// that could be stuck, does not look again on a clock: it is poked when a
// change its locks may block is sent, and yields at that change's
// lockBound; it looks again when a statement in flight may pass the
// in-flight bound, and yields then; otherwise only its blockers wake it.
// It used to look at 2, 6, 14, 30, 62 and 126 ms: a stall seen up to 64 ms
// late, and at a thousand sessions half the gate's wake-ups.
func TestGateCalmWaiterLooksOnEvents(t *testing.T) {
	// h holds row accounts/1, locked by a statement that ended at 150.
	holder := func(g *Gate) *Cursor {
		h := &Cursor{}
		g.Publish(h, &LockSet{Stmts: []LockStmt{{End: 150, Tables: []string{"accounts"}, Keys: []string{"accounts/1"}}}})
		return h
	}
	change := func(start, end int64, key string) *Ticket {
		return &Ticket{Start: start, End: end, Changes: true, Tables: []string{"accounts"}, Keys: []string{key}}
	}
	type outcome struct {
		r     WaitResult
		stuck []*Ticket
		after time.Duration
	}
	wait := func(g *Gate, w *Ticket, h *Cursor) <-chan outcome {
		ch := make(chan outcome, 1)
		began := time.Now()
		go func() {
			r, stuck := g.Wait(context.Background(), w, w.Start, 1, 0, h)
			ch <- outcome{r, stuck, time.Since(began)}
		}()
		return ch
	}

	t.Run("poked by a change it may block", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			g := NewGate(time.Second, 10*time.Second)
			h := holder(g)
			b := g.Add(change(100, 110, "accounts/7"), &Cursor{}) // not sent yet
			w := g.Add(change(200, 210, "accounts/9"), h)
			got := wait(g, w, h)
			time.Sleep(20 * time.Millisecond)
			synctest.Wait()
			passes := g.pass
			// s started at 120, before h's statement ended, on h's row:
			// it may wait for h's lock. Captured 0.7 ms: lockBound 1.4 ms;
			// the poked look finds it in flight for 0, and the next comes
			// at 2 ms (lockBoundMax, the least a waiter that found
			// something that may become stuck waits to look again).
			s := g.Add(change(120, 130, "accounts/1"), &Cursor{})
			g.Sent(s, 700*time.Microsecond)
			o := <-got
			if o.r != Stalled || len(o.stuck) != 1 || o.stuck[0] != s || o.after != 22*time.Millisecond {
				t.Errorf("Wait = %v, stuck %v, after %v; want Stalled on s at 22ms (sent at 20ms, past its lockBound at the look 2ms later)", o.r, o.stuck, o.after)
			}
			if passes != 1 {
				t.Errorf("looks in the first 20 ms: %d, want 1 (the first)", passes)
			}
			g.Finish(b)
		})
	})

	t.Run("a change it cannot block does not poke it", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			g := NewGate(time.Second, 10*time.Second)
			h := holder(g)
			b := g.Add(change(100, 110, "accounts/7"), &Cursor{})
			g.Sent(b, time.Millisecond) // in flight, on a row h does not hold
			w := g.Add(change(200, 210, "accounts/9"), h)
			got := wait(g, w, h)
			time.Sleep(10 * time.Millisecond)
			other := g.Add(change(120, 130, "accounts/2"), &Cursor{})
			g.Sent(other, time.Millisecond)
			time.Sleep(30 * time.Millisecond)
			g.Finish(b)
			g.Finish(other)
			o := <-got
			if o.r != Ordered || o.after != 40*time.Millisecond {
				t.Errorf("Wait = %v after %v; want Ordered at 40ms", o.r, o.after)
			}
			if g.pass != 2 {
				t.Errorf("looks: %d, want 2 (the first, and when b was done)", g.pass)
			}
		})
	})

	t.Run("looks again when a statement may pass the in-flight bound", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			g := NewGate(100*time.Millisecond, 10*time.Second)
			h := holder(g)
			b := g.Add(change(100, 110, "accounts/7"), &Cursor{})
			g.Sent(b, time.Millisecond) // stuck for a reason h cannot be
			w := g.Add(change(200, 210, "accounts/9"), h)
			o := <-wait(g, w, h)
			if o.r != Stalled || len(o.stuck) != 1 || o.stuck[0] != b || o.after != 100*time.Millisecond {
				t.Errorf("Wait = %v, stuck %v, after %v; want Stalled on b at 100ms, its in-flight bound", o.r, o.stuck, o.after)
			}
			if g.pass != 3 {
				t.Errorf("looks: %d, want 3 (0, 50 and 100 ms)", g.pass)
			}
		})
	})
}
