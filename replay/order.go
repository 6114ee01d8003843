package replay

import (
	"container/heap"
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Ordering modes (Config.Order).
const (
	// OrderCapture keeps the capture's order between sessions: on each
	// target, a record starts only after every record that ended, in the
	// capture, before it started has completed there.
	OrderCapture = "capture"
	// OrderNone lets sessions run as fast as each can (a load generator).
	OrderNone = "none"
)

// gate keeps one target's records in the capture's order between sessions.
// A ticket stands for a record (or, with --concurrency, a transaction) and
// its captured interval [start, end]. wait(t) returns once every ticket
// whose end is before t's start is done. Tickets that overlapped in the
// capture never wait for each other, so the server's own locks decide
// between them as they did in the capture.
//
// Two bounds keep the gate from deadlocking against the server's row
// locks (a statement blocked on a lock held by a transaction whose next
// statement waits here): a ticket in flight on the server for longer than
// inflightBound (at least 50 ms, and 20 times its captured duration) no
// longer holds others back, and no wait lasts longer than hardBound. A
// record released either way is marked (OutcomeOrderReleased) and its
// divergences counted as order-ambiguous.
type gate struct {
	mu      sync.Mutex
	pending []*ticket // not yet popped, sorted by end; done ones leave from the front
	waiters waiterHeap
	// minEnd is the end of the earliest ticket not done (MaxInt64 if none):
	// a ticket whose start is not after it waits for nothing.
	minEnd atomic.Int64

	inflightMin, hardBound time.Duration
	now                    func() time.Time
}

// ticket is one record's (or transaction's) place in the order.
type ticket struct {
	start, end int64
	span       time.Duration // captured duration (for the in-flight bound)
	done       bool
	sent       atomic.Int64 // unix ns when sent to the server, 0 before
}

type waiter struct {
	start int64
	ch    chan struct{}
	index int
}

type waiterHeap []*waiter

func (h waiterHeap) Len() int           { return len(h) }
func (h waiterHeap) Less(i, j int) bool { return h[i].start < h[j].start }
func (h waiterHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i]; h[i].index = i; h[j].index = j }
func (h *waiterHeap) Push(x any)        { w := x.(*waiter); w.index = len(*h); *h = append(*h, w) }
func (h *waiterHeap) Pop() any {
	old := *h
	w := old[len(old)-1]
	*h = old[:len(old)-1]
	w.index = -1
	return w
}

func newGate(inflightMin, hardBound time.Duration) *gate {
	g := &gate{inflightMin: inflightMin, hardBound: hardBound, now: time.Now}
	g.minEnd.Store(math.MaxInt64)
	return g
}

// register adds a ticket for [start, end]. Tickets are registered in the
// capture's order (by sequence, which for a proxy capture is nearly end
// order), so insertion is at or near the back.
func (g *gate) register(start, end int64) *ticket {
	t := &ticket{start: start, end: end, span: time.Duration(end - start)}
	g.mu.Lock()
	i := len(g.pending)
	for i > 0 && g.pending[i-1].end > end {
		i--
	}
	g.pending = append(g.pending, nil)
	copy(g.pending[i+1:], g.pending[i:])
	g.pending[i] = t
	if i == 0 {
		g.minEnd.Store(end)
	}
	g.mu.Unlock()
	return t
}

// markSent notes that t's record went to the server.
func (g *gate) markSent(t *ticket) {
	if t != nil {
		t.sent.Store(g.now().UnixNano())
	}
}

// finish marks t done and wakes the waiters it held back.
func (g *gate) finish(t *ticket) {
	if t == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	t.done = true
	n := 0
	for n < len(g.pending) && g.pending[n].done {
		n++
	}
	if n == 0 {
		return
	}
	clear(g.pending[:n])
	g.pending = g.pending[n:]
	min := int64(math.MaxInt64)
	if len(g.pending) > 0 {
		min = g.pending[0].end
	}
	g.minEnd.Store(min)
	for len(g.waiters) > 0 && g.waiters[0].start <= min {
		w := heap.Pop(&g.waiters).(*waiter)
		close(w.ch)
	}
}

// waitResult says how a wait ended.
type waitResult uint8

const (
	waitNone     waitResult = iota // nothing to wait for
	waitOrdered                    // waited until all before it were done
	waitReleased                   // went while a record before it was still in flight (inflight bound)
	waitTimeout                    // went after hardBound
)

// wait blocks until every ticket that ended before t started is done, a
// bound releases t, or ctx ends.
func (g *gate) wait(ctx context.Context, t *ticket) waitResult {
	if t == nil || g.minEnd.Load() >= t.start {
		return waitNone
	}
	began := g.now()
	for {
		g.mu.Lock()
		blocker, released := g.blockerLocked(t)
		if blocker == nil {
			g.mu.Unlock()
			if released {
				return waitReleased
			}
			return waitOrdered
		}
		w := &waiter{start: t.start, ch: make(chan struct{})}
		heap.Push(&g.waiters, w)
		g.mu.Unlock()

		// Wake when the earliest blocker may pass the in-flight bound, or at
		// the hard bound.
		left := g.hardBound - g.now().Sub(began)
		if s := blocker.sent.Load(); s != 0 {
			left = min(left, g.inflightBound(blocker)-g.now().Sub(time.Unix(0, s)))
		} else {
			left = min(left, g.inflightBound(blocker))
		}
		timer := time.NewTimer(max(left, time.Millisecond))
		select {
		case <-w.ch:
			timer.Stop()
			continue
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			g.drop(w)
			return waitTimeout
		}
		g.drop(w)
		if g.now().Sub(began) >= g.hardBound {
			return waitTimeout
		}
	}
}

// drop removes a waiter that stopped waiting.
func (g *gate) drop(w *waiter) {
	g.mu.Lock()
	if w.index >= 0 {
		heap.Remove(&g.waiters, w.index)
	}
	g.mu.Unlock()
}

func (g *gate) inflightBound(t *ticket) time.Duration {
	return max(g.inflightMin, 20*t.span)
}

// blockerLocked returns the earliest ticket t must still wait for (nil if
// none), and whether a ticket before t was passed over as in flight too
// long.
func (g *gate) blockerLocked(t *ticket) (*ticket, bool) {
	now := g.now().UnixNano()
	released := false
	for _, p := range g.pending {
		if p.end >= t.start {
			break
		}
		if p.done || p == t {
			continue
		}
		if s := p.sent.Load(); s != 0 && time.Duration(now-s) >= g.inflightBound(p) {
			released = true
			continue
		}
		return p, released
	}
	return nil, released
}
