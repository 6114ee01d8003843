package replay

import (
	"context"
	"sync"
	"testing"
	"time"
)

// A record waits exactly for the records that ended before it started,
// never for one it overlapped in the capture.
func TestGateWaitsForWhatEndedBefore(t *testing.T) {
	g := newGate(time.Hour, time.Hour)
	a := g.register(0, 10, nil, true)  // ended before c started
	b := g.register(5, 30, nil, true)  // overlaps c
	c := g.register(20, 40, nil, true) // waits for a only
	ctx := context.Background()
	if r := first(g.wait(ctx, a, a.start, true, 0)); r != waitNone {
		t.Fatalf("a waited: %v", r)
	}
	if r := first(g.wait(ctx, b, b.start, true, 0)); r != waitNone {
		t.Fatalf("b waited for a although they overlapped: %v", r)
	}
	done := make(chan waitResult)
	go func() { done <- first(g.wait(ctx, c, c.start, true, 0)) }()
	select {
	case r := <-done:
		t.Fatalf("c went before a finished: %v", r)
	case <-time.After(50 * time.Millisecond):
	}
	g.finish(a)
	select {
	case r := <-done:
		if r != waitOrdered {
			t.Fatalf("c: %v, want waitOrdered", r)
		}
	case <-time.After(time.Second):
		t.Fatal("c still waits after a finished (b overlapped it and must not hold it)")
	}
	g.finish(b)
	g.finish(c)
	if g.all.minEnd.Load() != 1<<63-1 || len(g.all.pending) != 0 || len(g.changes.pending) != 0 {
		t.Fatalf("gate not empty: minEnd %d, %d pending", g.all.minEnd.Load(), len(g.all.pending))
	}
}

// Finishing out of order only releases waiters when everything before them
// is done; registration out of end order is sorted.
func TestGateOutOfOrderFinish(t *testing.T) {
	g := newGate(time.Hour, time.Hour)
	x := g.register(0, 50, nil, true)
	y := g.register(0, 10, nil, true) // registered later, ends earlier
	z := g.register(60, 70, nil, true)
	if g.all.pending[0] != y || g.all.minEnd.Load() != 10 {
		t.Fatalf("registration not sorted by end")
	}
	var wg sync.WaitGroup
	wg.Add(1)
	var got waitResult
	go func() { defer wg.Done(); got = first(g.wait(context.Background(), z, z.start, true, 0)) }()
	g.finish(x) // y still pending: z keeps waiting
	time.Sleep(30 * time.Millisecond)
	if g.all.minEnd.Load() != 10 {
		t.Fatalf("minEnd %d after finishing x, want 10", g.all.minEnd.Load())
	}
	g.finish(y)
	wg.Wait()
	if got != waitOrdered {
		t.Fatalf("z: %v", got)
	}
}

// A record in flight longer than the bound is reported as stalled (it may
// be blocked on a lock held by the very transaction that waits), and so is
// one queued behind its own session's stalled record; without reporting
// stalls a waiter waits on, up to the hard bound.
func TestGateStallsAndBounds(t *testing.T) {
	g := newGate(40*time.Millisecond, 300*time.Millisecond)
	ctx := context.Background()
	a := g.register(0, 1, nil, true)
	b := g.register(10, 20, nil, true)
	g.markSent(a, 0)
	start := time.Now()
	if r := first(g.wait(ctx, b, b.start, true, 0)); r != waitStalled {
		t.Fatalf("b: %v, want waitStalled", r)
	}
	if took := time.Since(start); took < 35*time.Millisecond || took > 250*time.Millisecond {
		t.Fatalf("stalled after %v, want about the 40ms bound", took)
	}
	// Queued behind its session's record in flight: stalled too.
	a2 := g.register(2, 3, a, true) // a's session, not yet sent
	c := g.register(30, 40, nil, true)
	if r := first(g.wait(ctx, c, c.start, true, 0)); r != waitStalled {
		t.Fatalf("c (waiting for a2 behind a): %v, want waitStalled", r)
	}
	// Not reporting stalls: the waiter waits for them to finish.
	g.finish(b)
	go func() { time.Sleep(60 * time.Millisecond); g.finish(a); g.finish(a2) }()
	if r := first(g.wait(ctx, c, c.start, false, 0)); r != waitOrdered {
		t.Fatalf("c after a finished: %v, want waitOrdered", r)
	}
	g.finish(c)
	// A record never sent is waited for up to the hard bound.
	d := g.register(5, 6, nil, true)
	e := g.register(50, 60, nil, true)
	start = time.Now()
	if r := first(g.wait(ctx, e, e.start, true, 0)); r != waitTimeout {
		t.Fatalf("e: %v, want waitTimeout", r)
	}
	if took := time.Since(start); took < 290*time.Millisecond {
		t.Fatalf("timed out after %v, before the 300ms bound", took)
	}
	// A threshold later than the ticket's start (a unit's COMMIT) waits for
	// what ended before it.
	f := g.register(55, 100, nil, true)
	g.finish(e)
	if r := first(g.wait(ctx, f, f.start, true, 0)); r != waitTimeout {
		t.Fatalf("f waits for d (never sent) up to the bound: %v", r)
	}
	g.finish(d)
	if r := first(g.wait(ctx, f, 99, true, 0)); r != waitNone && r != waitOrdered {
		t.Fatalf("f's commit: %v", r)
	}
	// A cancelled context ends a wait at once.
	h := g.register(200, 201, nil, true)
	k := g.register(300, 301, nil, true)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if r := first(g.wait(cctx, k, k.start, true, 0)); r != waitTimeout {
		t.Fatalf("cancelled wait: %v", r)
	}
	g.finish(f)
	g.finish(h)
	g.finish(k)
	if len(g.all.waiters)+len(g.changes.waiters) != 0 || len(g.all.pending) != 0 {
		t.Fatalf("%d waiters and %d tickets left behind", len(g.all.waiters)+len(g.changes.waiters), len(g.all.pending))
	}
}

func first(r waitResult, _ []*ticket) waitResult { return r }

// Reads wait only for changes before them; a change waits for everything
// before it, reads included.
func TestGateReadsWaitOnlyForChanges(t *testing.T) {
	g := newGate(time.Hour, time.Hour)
	ctx := context.Background()
	r1 := g.register(0, 10, nil, false) // a read
	w1 := g.register(0, 20, nil, true)  // a write
	r2 := g.register(15, 30, nil, false)
	if res := first(g.wait(ctx, r2, r2.start, false, 0)); res != waitNone {
		t.Fatalf("a read waited for a read: %v", res)
	}
	r3 := g.register(25, 40, nil, false) // after w1 ended: waits for it
	done := make(chan waitResult, 1)
	go func() { done <- first(g.wait(ctx, r3, r3.start, false, 0)) }()
	select {
	case <-done:
		t.Fatal("a read went before the write that ended before it")
	case <-time.After(30 * time.Millisecond):
	}
	w2 := g.register(12, 50, nil, true) // a write after r1: waits for it
	wdone := make(chan waitResult, 1)
	go func() { wdone <- first(g.wait(ctx, w2, w2.start, false, 0)) }()
	g.finish(w1)
	if res := <-done; res != waitOrdered {
		t.Fatalf("r3: %v", res)
	}
	select {
	case <-wdone:
		t.Fatal("a write went before the read that ended before it")
	case <-time.After(30 * time.Millisecond):
	}
	g.finish(r1)
	if res := <-wdone; res != waitOrdered {
		t.Fatalf("w2: %v", res)
	}
	for _, x := range []*ticket{r2, r3, w2} {
		g.finish(x)
	}
}

func BenchmarkGateNoConflict(b *testing.B) {
	// Every record overlaps the next (a point-select capture): the fast
	// path, one atomic load per wait.
	g := newGate(50*time.Millisecond, time.Second)
	ctx := context.Background()
	for i := range b.N {
		t := g.register(int64(i), int64(i)+10, nil, true)
		first(g.wait(ctx, t, t.start, true, 0))
		g.finish(t)
	}
}
