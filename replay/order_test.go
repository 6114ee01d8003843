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
	a := g.register(0, 10)  // ended before c started
	b := g.register(5, 30)  // overlaps c
	c := g.register(20, 40) // waits for a only
	ctx := context.Background()
	if r := g.wait(ctx, a); r != waitNone {
		t.Fatalf("a waited: %v", r)
	}
	if r := g.wait(ctx, b); r != waitNone {
		t.Fatalf("b waited for a although they overlapped: %v", r)
	}
	done := make(chan waitResult)
	go func() { done <- g.wait(ctx, c) }()
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
	if g.minEnd.Load() != 1<<63-1 || len(g.pending) != 0 {
		t.Fatalf("gate not empty: minEnd %d, %d pending", g.minEnd.Load(), len(g.pending))
	}
}

// Finishing out of order only releases waiters when everything before them
// is done; registration out of end order is sorted.
func TestGateOutOfOrderFinish(t *testing.T) {
	g := newGate(time.Hour, time.Hour)
	x := g.register(0, 50)
	y := g.register(0, 10) // registered later, ends earlier
	z := g.register(60, 70)
	if g.pending[0] != y || g.minEnd.Load() != 10 {
		t.Fatalf("registration not sorted by end")
	}
	var wg sync.WaitGroup
	wg.Add(1)
	var got waitResult
	go func() { defer wg.Done(); got = g.wait(context.Background(), z) }()
	g.finish(x) // y still pending: z keeps waiting
	time.Sleep(30 * time.Millisecond)
	if g.minEnd.Load() != 10 {
		t.Fatalf("minEnd %d after finishing x, want 10", g.minEnd.Load())
	}
	g.finish(y)
	wg.Wait()
	if got != waitOrdered {
		t.Fatalf("z: %v", got)
	}
}

// A record in flight longer than the bound stops holding others back (it
// may be blocked on a lock held by the very transaction that waits), and
// the released record is told so; a record never sent is waited for up to
// the hard bound.
func TestGateBounds(t *testing.T) {
	g := newGate(40*time.Millisecond, 300*time.Millisecond)
	a := g.register(0, 1)
	b := g.register(10, 20)
	g.markSent(a)
	start := time.Now()
	if r := g.wait(context.Background(), b); r != waitReleased {
		t.Fatalf("b: %v, want waitReleased", r)
	}
	if took := time.Since(start); took < 35*time.Millisecond || took > 250*time.Millisecond {
		t.Fatalf("released after %v, want about the 40ms bound", took)
	}
	c := g.register(5, 6) // never sent
	d := g.register(30, 40)
	start = time.Now()
	if r := g.wait(context.Background(), d); r != waitTimeout {
		t.Fatalf("d: %v, want waitTimeout", r)
	}
	if took := time.Since(start); took < 290*time.Millisecond {
		t.Fatalf("timed out after %v, before the 300ms bound", took)
	}
	g.finish(a)
	g.finish(b)
	g.finish(c)
	g.finish(d)
	// A cancelled context ends a wait at once.
	e := g.register(50, 51)
	f := g.register(60, 61)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if r := g.wait(ctx, f); r != waitTimeout {
		t.Fatalf("cancelled wait: %v", r)
	}
	g.finish(e)
	g.finish(f)
	if len(g.waiters) != 0 {
		t.Fatalf("%d waiters left behind", len(g.waiters))
	}
}

func BenchmarkGateNoConflict(b *testing.B) {
	// Every record overlaps the next (a point-select capture): the fast
	// path, one atomic load per wait.
	g := newGate(50*time.Millisecond, time.Second)
	ctx := context.Background()
	for i := range b.N {
		t := g.register(int64(i), int64(i)+10)
		g.wait(ctx, t)
		g.finish(t)
	}
}
