package replay

import (
	"container/heap"
	"context"
	"math"
	"slices"
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
// Reads need not wait for reads. A ticket that only reads waits for the
// earlier tickets that change what others see (writes, COMMITs, locking
// reads: sqlinfo.Info.Changes); a ticket that changes waits for every
// earlier ticket, reads included, so that no read sees a change made after
// it in the capture. The gate keeps the two sets apart (lanes), so a
// read-only workload never waits at all.
//
// The gate can deadlock against the server's row locks: a statement in
// flight, blocked on a lock held by a transaction whose next statement
// waits here for it. Statements that overlapped in the capture can take a
// lock in the other order in replay, so this happens. wait reports such a
// stall — a ticket it waits for has been in flight longer than
// inflightBound (at least 50 ms, and 20 times its captured duration), or
// is queued behind one of its own session's that has — and the waiter,
// if it holds a transaction, rolls it back, waits for the stalled ticket
// and runs its transaction again (wound-wait, in the capture's order): the
// lock then goes as it went in the capture. A waiter that holds no
// transaction waits on. No wait lasts longer than hardBound; a record
// released by it is marked (OutcomeOrderReleased), as are the records of a
// transaction run again (OutcomeOrderRerun), and their divergences are
// counted as order-ambiguous.
type gate struct {
	mu sync.Mutex
	// all holds every ticket, changes those that change what others see.
	all, changes lane

	inflightMin, hardBound time.Duration
	now                    func() time.Time
}

// lane is a set of tickets by end, and the waiters that wait for them.
type lane struct {
	id      int       // index into ticket.in
	pending []*ticket // not yet popped, sorted by end; done ones leave from the front
	waiters waiterHeap
	// minEnd is the end of the earliest ticket not done (MaxInt64 if none):
	// a waiter whose threshold is not after it waits for nothing.
	minEnd atomic.Int64
}

func (l *lane) insert(t *ticket) {
	i := len(l.pending)
	for i > 0 && l.pending[i-1].end > t.end {
		i--
	}
	l.pending = append(l.pending, nil)
	copy(l.pending[i+1:], l.pending[i:])
	l.pending[i] = t
	t.in[l.id] = true
	if i == 0 {
		l.minEnd.Store(t.end)
	}
}

// pop drops the done tickets at the front and wakes the waiters that then
// wait for nothing.
func (l *lane) pop() {
	n := 0
	for n < len(l.pending) && l.pending[n].done {
		n++
	}
	if n == 0 {
		return
	}
	for _, t := range l.pending[:n] {
		t.in[l.id] = false
	}
	clear(l.pending[:n])
	l.pending = l.pending[n:]
	min := int64(math.MaxInt64)
	if len(l.pending) > 0 {
		min = l.pending[0].end
	}
	l.minEnd.Store(min)
	for len(l.waiters) > 0 && l.waiters[0].start <= min {
		w := heap.Pop(&l.waiters).(*waiter)
		close(w.ch)
	}
}

// lane is the lane t waits in.
func (g *gate) lane(t *ticket) *lane {
	if t.changes {
		return &g.all
	}
	return &g.changes
}

// ticket is one record's (or transaction's) place in the order.
type ticket struct {
	start, end int64
	done       bool
	// sent is when the ticket's statement went to the server (unix ns), 0
	// while it is not executing one; span is that statement's captured
	// duration (for the in-flight bound). A unit's ticket is sent again
	// for each of its statements and idle while it waits here.
	sent atomic.Int64
	span atomic.Int64
	// session is where the worker that will handle it stands (its
	// session's, or for a unit the connection's it was handed to): a
	// ticket not yet handled waits behind that worker's current one.
	// waiting is the ticket its owner waits for here, if it does.
	session atomic.Pointer[cursor]
	waiting atomic.Pointer[ticket]
	// changes: it changes what others see (see gate).
	changes bool
	// in says which lanes (all, changes) hold it.
	in [2]bool
}

// cursor is where a worker stands in its queue of tickets: the one it
// handles (waits for, runs, or runs again after a rollback). Tickets do
// not point at their queue's earlier ones, so the gate keeps no history.
type cursor struct{ cur atomic.Pointer[ticket] }

// at notes that the worker now handles t.
func (c *cursor) at(t *ticket) {
	if c != nil && t != nil {
		c.cur.Store(t)
	}
}

// queue notes that t waits in c's queue (a unit handed to a connection).
func (t *ticket) queue(c *cursor) {
	if t != nil {
		t.session.Store(c)
	}
}

// current notes that t's worker now handles t.
func (t *ticket) current() {
	if t != nil {
		t.session.Load().at(t)
	}
}

// ahead returns the ticket p's worker handles when it is not p.
func (p *ticket) ahead() *ticket {
	s := p.session.Load()
	if s == nil {
		return nil
	}
	if c := s.cur.Load(); c != p {
		return c
	}
	return nil
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
	g.all.minEnd.Store(math.MaxInt64)
	g.changes.minEnd.Store(math.MaxInt64)
	g.changes.id = 1
	return g
}

// register adds a ticket for [start, end] of the session at c (nil: on
// its own); changes says whether it changes what others see. Tickets are
// registered in the capture's order (by sequence, which for a proxy
// capture is nearly end order), so insertion is at or near the back.
func (g *gate) register(start, end int64, c *cursor, changes bool) *ticket {
	t := &ticket{start: start, end: end, changes: changes}
	if c != nil {
		t.session.Store(c)
	}
	t.span.Store(end - start)
	g.mu.Lock()
	g.all.insert(t)
	if changes {
		g.changes.insert(t)
	}
	g.mu.Unlock()
	return t
}

// markSent notes that t's record (or its unit's next statement, of
// captured duration span; 0 keeps t's own) went to the server.
func (g *gate) markSent(t *ticket, span time.Duration) {
	if t != nil {
		if span > 0 {
			t.span.Store(int64(span))
		}
		t.sent.Store(g.now().UnixNano())
	}
}

// markIdle notes that t is not executing a statement (a unit waiting here).
func (g *gate) markIdle(t *ticket) {
	if t != nil {
		t.sent.Store(0)
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
	g.all.pop()
	if t.changes {
		g.changes.pop()
	}
}

// reopen makes done tickets pending again: their records' effects were
// rolled back (a transaction run again, for order or after a deadlock),
// so what ran after them in the capture must wait until they run again.
// A statement already on the server, blocked on the rolled-back
// transaction's locks, goes ahead; if it then meets the transaction run
// again, the gate orders them as any other pair (see gate).
func (g *gate) reopen(ts []*ticket) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, t := range ts {
		if t == nil || !t.done {
			continue
		}
		t.done = false
		t.sent.Store(0)
		if !t.in[0] {
			g.all.insert(t)
		}
		if t.changes && !t.in[1] {
			g.changes.insert(t)
		}
	}
}

// waitResult says how a wait ended.
type waitResult uint8

const (
	waitNone     waitResult = iota // nothing to wait for
	waitOrdered                    // waited until all before it were done
	waitStalled                    // a ticket it waits for is stuck on the server (see gate)
	waitTimeout                    // went after hardBound
	waitReleased                   // went without a ticket that waits for it (it could never come)
)

// wait blocks until every ticket that ended before threshold (t's start,
// or a later instant of t's own, such as its COMMIT's start) is done, for
// at most limit (0: the gate's hard bound), or until ctx ends. With
// patience > 0 it returns waitStalled, and the tickets stuck on the server,
// as soon as it waits for a ticket in flight longer than the in-flight
// bound times 2^(patience-1) (a transaction run again after a stall gives
// the server more time before it stalls again); with 0, it waits on.
func (g *gate) wait(ctx context.Context, t *ticket, threshold int64, patience int, limit time.Duration) (waitResult, []*ticket) {
	if t == nil {
		return waitNone, nil
	}
	ln := g.lane(t)
	if ln.minEnd.Load() >= threshold {
		return waitNone, nil
	}
	if limit <= 0 {
		limit = g.hardBound
	}
	began := g.now()
	released := false
	for {
		g.mu.Lock()
		blocker, stuck, cyclic := g.blockerLocked(ln, t, threshold, patience)
		released = released || cyclic
		if blocker == nil {
			g.mu.Unlock()
			if released {
				return waitReleased, nil
			}
			return waitOrdered, nil
		}
		if len(stuck) > 0 {
			g.mu.Unlock()
			return waitStalled, stuck
		}
		w := &waiter{start: threshold, ch: make(chan struct{})}
		heap.Push(&ln.waiters, w)
		g.mu.Unlock()
		t.waiting.Store(blocker)

		// Wake when the earliest blocker may pass the in-flight bound, or at
		// the limit.
		left := limit - g.now().Sub(began)
		if in := g.inflight(blocker); in != nil {
			left = min(left, g.inflightBound(in, patience)-g.now().Sub(time.Unix(0, in.sent.Load())))
		} else {
			left = min(left, g.inflightMin)
		}
		timer := time.NewTimer(max(left, time.Millisecond))
		select {
		case <-w.ch:
			timer.Stop()
			t.waiting.Store(nil)
			continue
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			g.drop(ln, w)
			t.waiting.Store(nil)
			return waitTimeout, nil
		}
		g.drop(ln, w)
		t.waiting.Store(nil)
		if g.now().Sub(began) >= limit {
			return waitTimeout, nil
		}
	}
}

// drop removes a waiter that stopped waiting.
func (g *gate) drop(ln *lane, w *waiter) {
	g.mu.Lock()
	if w.index >= 0 {
		heap.Remove(&ln.waiters, w.index)
	}
	g.mu.Unlock()
}

// inflightBound is how long t may execute before it counts as stuck:
// twenty times its captured duration, at least inflightMin, doubled for
// each patience step past the first.
func (g *gate) inflightBound(t *ticket, patience int) time.Duration {
	b := max(g.inflightMin, 20*time.Duration(t.span.Load()))
	if patience > 1 {
		b <<= min(patience-1, 16)
	}
	return b
}

// inflight returns the ticket in flight on the server that p waits
// behind: p itself once sent, else its session's current ticket if that
// is sent (nil if neither).
func (g *gate) inflight(p *ticket) *ticket {
	if p == nil || p.done {
		return nil
	}
	if p.sent.Load() != 0 {
		return p
	}
	if a := p.ahead(); a != nil && !a.done && a.sent.Load() != 0 {
		return a
	}
	return nil
}

// stalled returns the ticket on the server that keeps p from completing
// on its own, if there is one stuck there: p's statement once it has been
// executing longer than the in-flight bound, or the stalled ticket p waits
// for here, or (p not started) its session's current ticket's.
func (g *gate) stalled(p *ticket, now int64, patience, depth int) *ticket {
	if p == nil || p.done || depth > 16 {
		return nil
	}
	if s := p.sent.Load(); s != 0 {
		if time.Duration(now-s) >= g.inflightBound(p, patience) {
			return p
		}
		return nil
	}
	if w := p.waiting.Load(); w != nil {
		return g.stalled(w, now, patience, depth+1)
	}
	return g.stalled(p.ahead(), now, patience, depth+1)
}

// dependsOn reports whether p cannot start or finish before t does: p is
// t, or waits here for a ticket that depends on t, or has not started and
// its session's current ticket depends on t.
func dependsOn(p, t *ticket, depth int) bool {
	switch {
	case p == nil || depth > 16 || p.done:
		return false
	case p == t:
		return true
	case p.sent.Load() != 0:
		return false
	}
	if w := p.waiting.Load(); w != nil {
		return dependsOn(w, t, depth+1)
	}
	return dependsOn(p.ahead(), t, depth+1)
}

// blockerLocked returns the earliest ticket that ended before threshold
// and is not done (nil if none); with patience > 0, the tickets stuck on
// the server behind any such ticket; and whether one was passed over
// because it depends on t itself.
func (g *gate) blockerLocked(ln *lane, t *ticket, threshold int64, patience int) (*ticket, []*ticket, bool) {
	now := g.now().UnixNano()
	var first *ticket
	var stuck []*ticket
	cyclic := false
	for _, p := range ln.pending {
		if p.end >= threshold {
			break
		}
		if p.done || p == t {
			continue
		}
		if dependsOn(p, t, 0) {
			cyclic = true
			continue
		}
		if first == nil {
			first = p
		}
		if patience == 0 {
			break // only the earliest matters
		}
		if s := g.stalled(p, now, patience, 0); s != nil && !slices.Contains(stuck, s) {
			stuck = append(stuck, s)
		}
	}
	return first, stuck, cyclic
}
