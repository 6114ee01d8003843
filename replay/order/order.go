package order

import (
	"container/heap"
	"context"
	"math"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Gate keeps one target's tickets in the capture's order (see the package
// documentation for the rules it follows). Its methods are safe for
// concurrent use by the target's workers.
type Gate struct {
	mu sync.Mutex
	// all holds every ticket, changes those that change what others see.
	all, changes lane

	inflightMin, hardBound time.Duration
	now                    func() time.Time
	// locks files what the workers' open transactions have locked (see
	// blocksLocked), under lmu (taken after the gate's lock, never before
	// it, and never with fmu): Publish and the pokes of Sent take only
	// lmu. epoch marks what one search has looked at.
	lmu   sync.Mutex
	locks lockIndex
	epoch uint64
	// parked counts the waiters in Wait with a transaction and patience
	// (Cursor.parked): Sent pokes those whose locks may block the change
	// it sends.
	parked atomic.Int32
	// pass marks the in-flight tickets one blocker search has looked at
	// (Ticket.checked); it counts the searches with a stall check too.
	pass uint64
	// commits keeps commits in the server's order (Ticket.Commit, Floor,
	// Trx).
	commits commitOrder
	// inflight files the changes sent and not done by row and table
	// (under fmu), and old holds
	// the tickets that had been in flight for half of inflightMin or more
	// at oldAt (unix ns): what a waiter's stall check can find stuck
	// (mayStallLocked). walks counts the checks that walked; walkAlways
	// (tests) makes every check walk.
	inflight   changeIndex
	old        []*Ticket
	oldAt      int64
	walks      uint64
	walkAlways bool
	// flying lists the tickets sent and not yet done or idle (each one's
	// place in it: Ticket.flyAt), under fmu, so that the scan for old
	// ones looks at those in flight, not at the whole backlog. Sent does
	// not take the gate's lock; fmu is taken after it, never before.
	fmu    sync.Mutex
	flying []*Ticket
}

// lane is a set of tickets by end, and the waiters that wait for them.
type lane struct {
	id      int       // index into ticket.in
	pending []*Ticket // not yet popped, sorted by end; done ones leave from the front
	waiters waiterHeap
	// minEnd is the end of the earliest ticket not done (MaxInt64 if none):
	// a waiter whose threshold is not after it waits for nothing.
	minEnd atomic.Int64
}

func (l *lane) insert(t *Ticket) {
	i := len(l.pending)
	for i > 0 && l.pending[i-1].End > t.End {
		i--
	}
	l.pending = append(l.pending, nil)
	copy(l.pending[i+1:], l.pending[i:])
	l.pending[i] = t
	t.in[l.id] = true
	if i == 0 {
		l.minEnd.Store(t.End)
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
		min = l.pending[0].End
	}
	l.minEnd.Store(min)
	for len(l.waiters) > 0 && l.waiters[0].start <= min {
		w := heap.Pop(&l.waiters).(*waiter)
		close(w.ch)
	}
}

// lane is the lane t waits in.
func (g *Gate) lane(t *Ticket) *lane {
	if t.Changes {
		return &g.all
	}
	return &g.changes
}

// Ticket is one record's (or transaction's) place in the order.
type Ticket struct {
	Start, End int64
	done       bool
	doneAt     int64 // when it was done (unix ns; under the gate's lock)
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
	session atomic.Pointer[Cursor]
	waiting atomic.Pointer[Ticket]
	// Changes: it changes what others see (see the package documentation).
	Changes bool
	// Tables its statements touch (lower-case names, no schema), and
	// whether they may touch any (lockSet.mayBlock); keys are the rows
	// its statements that change what others see lock, when they all name
	// them (replay's row keys; nil: any row of its tables).
	Tables   []string
	AnyTable bool
	Keys     []string
	// Access is what the ticket reads and what it changes, when all of it
	// is known (nil: anything): it then waits only for the earlier
	// tickets it must follow (waitsFor), not for every one (see the
	// package documentation).
	Access *Access
	// SendOrder: a record's ticket that changes what others see; it goes
	// to the server only after the conflicting ones that overlapped it
	// and ended before it have (see the package documentation).
	SendOrder bool
	// Commit is the ticket's rank in the server's commit order (1, 2, …;
	// 0: it commits nothing the order knows), Floor the first rank of its
	// replication domain, Trx what its transaction locked: it goes to the
	// server once the conflicting commits ranked below it are done (see
	// commitOrder).
	Commit, Floor int64
	Trx           *Footprint
	// Unclocked: the ticket's interval is not when its statement ran on
	// the capture's server but a place in its order (a write that
	// bypassed the proxy, placed by its GTID): it may have been waiting
	// for its locks since any time before, so no lock is ruled out by when
	// it was taken (LockSet.mayBlock).
	Unclocked bool
	// onSent, made by a waiter under the gate's lock, is closed when the
	// ticket is sent or done; sendWaiters says one may exist. onDone, made
	// by a waiter with Access under the gate's lock, is closed when it is
	// done.
	onSent      chan struct{}
	onDone      chan struct{}
	sendWaiters atomic.Bool
	// rerun: reopened (its transaction runs again after yielding): it
	// goes after the conflicting ones that overlapped it and ended before
	// it are done, not merely sent (see the package documentation).
	rerun atomic.Bool
	// in says which lanes (all, changes) hold it; inCommits, whether the
	// commit order's pending list does.
	in        [2]bool
	inCommits bool
	// filed: the gate's change index holds it (changeIndex; under fmu).
	filed bool
	// flyAt is its place in Gate.flying, plus one (0: not there).
	flyAt int
	// checked is the gate's pass of the last blocker search that looked at
	// it (under its lock).
	checked uint64
	// overtaken: a record that changes what others see went to the
	// server before this ticket was done, though it came after it in the
	// capture (released: see overtake). What this ticket's records read
	// from then on may include that change: their outcomes are flagged.
	overtaken atomic.Bool
	// reordered: this ticket, a change, went ahead of a conflicting change
	// not yet done (see overtakeLocked); its worker lists it
	// (store.Reorder) and clears it.
	reordered atomic.Bool
}

// Access is what a ticket's statements read and what they change: a
// statement that names its rows by key (replay's row keys, when they can
// be trusted) adds its keys, any other its tables. Touches holds all of
// them, writes included; Changes those that write or lock. Either may be
// Any (touches every table), and a ticket that changes nothing makes no
// other wait, Any or not.
type Access struct {
	Touches, Changes Footprint
}

// waitsFor reports whether t must wait for p, an earlier ticket: the
// order of the two can change what either reads or leaves, as one
// changes a row (a table, when one of them names no rows there) the
// other touches. A ticket without Access waits for every other, and
// every other for it; two that only read never wait for each other.
func waitsFor(t, p *Ticket) bool {
	if t == nil || p == nil {
		return true
	}
	x, y := t.Access, p.Access
	if x == nil || y == nil {
		return true
	}
	return changesTouch(&x.Changes, &y.Touches) || changesTouch(&y.Changes, &x.Touches)
}

// changesTouch reports whether changes (what one ticket changes) may
// change what touches says another touches. Nothing changed touches
// nothing, and nothing touched is touched by nothing, Any or not.
func changesTouch(changes, touches *Footprint) bool {
	if changes.none() || touches.none() {
		return false
	}
	return changes.conflicts(touches)
}

// Cursor is where a worker stands in its queue of tickets: the one it
// handles (waits for, runs, or runs again after a rollback). Tickets do
// not point at their queue's earlier ones, so the gate keeps no history.
// locks is what the worker's open transaction has locked (nil: nothing),
// published by the worker, read by every waiter.
type Cursor struct {
	cur   atomic.Pointer[Ticket]
	locks atomic.Pointer[LockSet]
	mark  uint64 // the gate's epoch of the last search that looked at it (under its lock)
	// parked: the worker waits in Gate.Wait with its transaction, and a
	// change its locks may block, once sent, pokes it to look again (a
	// calm waiter looks on no clock). poke is made by the worker before
	// parked is first set.
	parked atomic.Bool
	poke   chan struct{}
}

// LockSet is what a worker's open transaction may hold locks with: its
// statements that changed what others see, each with its captured end
// and the tables it touched. Immutable once published.
type LockSet struct{ Stmts []LockStmt }

type LockStmt struct {
	End    int64
	Tables []string
	Any    bool
	Keys   []string // the rows it locked (nil: any of its tables')
}

// mayBlock reports whether the statement of ticket s, in flight, can be
// waiting for a lock the set holds: one of its statements did not end, in
// the capture, before s started — one that did could not have taken a
// lock s needed, or s would have waited for its transaction in the
// capture too, and ended after it (unless s is Unclocked: then the
// capture's clock does not say when it ran) — and touches one of s's
// tables (or either may touch any).
func (ls *LockSet) mayBlock(s *Ticket) bool {
	if ls == nil || !s.Changes {
		return false // a plain read takes no row locks: none can block it
	}
	for _, p := range ls.Stmts {
		if p.End < s.Start && !s.Unclocked {
			continue
		}
		if p.Any || s.AnyTable {
			return true
		}
		if p.Keys != nil && s.Keys != nil {
			if sharedKey(p.Keys, s.Keys) {
				return true
			}
			continue // both name their rows, and none is the other's
		}
		for _, x := range p.Tables {
			if slices.Contains(s.Tables, x) {
				return true
			}
		}
	}
	return false
}

// Publish makes ls (immutable from now on; nil: nothing) what c's
// worker's open transaction has locked: every waiter's search for a lock
// cycle reads it (blocksLocked), and the board's waits (Cursor.Locks).
// Only c's worker publishes for c. A next set may append to ls's array
// (the index then files only the statements past ls's: shared), never
// write within ls's length: a shorter set that is to grow again is a new
// array (or clipped).
func (g *Gate) Publish(c *Cursor, ls *LockSet) {
	if ls != nil && len(ls.Stmts) == 0 {
		ls = nil
	}
	if ls == nil && c.locks.Load() == nil {
		return // nothing held before or now (a statement outside a transaction): no lock taken
	}
	g.lmu.Lock()
	if old := c.locks.Load(); old != ls {
		g.locks.set(c, old, ls)
		c.locks.Store(ls)
	}
	g.lmu.Unlock()
}

// blocksLocked reports whether waiter h's transaction may keep the
// in-flight ticket s from finishing: it may hold a lock s needs, or a
// lock that a statement in flight of another transaction that may hold
// one s needs is waiting for, and so on (depth 4) — a transaction that
// waits here instead counts by what it waits for. Only the transactions
// the lock index gives for a statement are looked at, each once.
func (g *Gate) blocksLocked(h *Cursor, s *Ticket) bool {
	g.lmu.Lock()
	defer g.lmu.Unlock()
	g.epoch++
	return g.blocksFrom(h, s, 0, g.epoch)
}

func (g *Gate) blocksFrom(h *Cursor, s *Ticket, depth int, mark uint64) bool {
	if h == nil || s == nil {
		return false
	}
	if h.locks.Load().mayBlock(s) {
		return true
	}
	if depth >= 4 {
		return false
	}
	own := s.session.Load()
	found := false
	g.locks.candidates(s, func(c *Cursor) bool {
		if c == h || c == own || c.mark == mark || !c.locks.Load().mayBlock(s) {
			return true
		}
		c.mark = mark
		found = g.blocksFrom(h, g.inflightOf(c.cur.Load(), 0), depth+1, mark)
		return !found
	})
	return found
}

// At notes that the worker now handles t.
func (c *Cursor) At(t *Ticket) {
	if c != nil && t != nil {
		c.cur.Store(t)
	}
}

// Session is the cursor of the worker that handles t (nil: none yet).
func (t *Ticket) Session() *Cursor { return t.session.Load() }

// Overtaken reports whether a record that changes what others see went to
// the server before t was done, though it came after t in the capture:
// what t's records read from then on may include that change.
func (t *Ticket) Overtaken() bool { return t.overtaken.Load() }

// TakeReordered reports, once, that t, a change, went ahead of a
// conflicting change not yet done (its worker lists it: store.Reorder).
func (t *Ticket) TakeReordered() bool { return t.reordered.Swap(false) }

// Locks is what the cursor's worker's open transaction has locked (nil:
// nothing), as it last published it.
func (c *Cursor) Locks() *LockSet { return c.locks.Load() }

// Queue notes that t waits in c's queue (a unit handed to a connection).
func (t *Ticket) Queue(c *Cursor) {
	if t != nil {
		t.session.Store(c)
	}
}

// Current notes that t's worker now handles t.
func (t *Ticket) Current() {
	if t != nil {
		t.session.Load().At(t)
	}
}

// ahead returns the ticket p's worker handles when it is not p.
func (p *Ticket) ahead() *Ticket {
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

func NewGate(inflightMin, hardBound time.Duration) *Gate {
	g := &Gate{inflightMin: inflightMin, hardBound: hardBound, now: time.Now, locks: newLockIndex(), commits: newCommitOrder(), inflight: newChangeIndex()}
	g.all.minEnd.Store(math.MaxInt64)
	g.changes.minEnd.Store(math.MaxInt64)
	g.changes.id = 1
	return g
}

// Register adds a ticket for [start, end] of the session at c (nil: on
// its own); changes says whether it changes what others see. Tickets are
// registered in the capture's order (by sequence, which for a proxy
// capture is nearly end order), so insertion is at or near the back.
func (g *Gate) Register(start, end int64, c *Cursor, changes bool, tables []string, anyTable bool) *Ticket {
	return g.Add(&Ticket{Start: start, End: end, Changes: changes, Tables: tables, AnyTable: anyTable}, c)
}

// Add registers t (start, end, changes, tables, sendOrder set) in the
// session at c.
func (g *Gate) Add(t *Ticket, c *Cursor) *Ticket {
	start, end := t.Start, t.End
	if c != nil {
		t.session.Store(c)
	}
	t.span.Store(end - start)
	g.mu.Lock()
	g.all.insert(t)
	if t.Changes {
		g.changes.insert(t)
	}
	g.commits.add(t)
	g.mu.Unlock()
	return t
}

// Sent notes that t's record (or its unit's next statement, of
// captured duration span; 0 keeps t's own) went to the server.
func (g *Gate) Sent(t *Ticket, span time.Duration) {
	if t != nil {
		if span > 0 {
			t.span.Store(int64(span))
		}
		t.sent.Store(g.now().UnixNano())
		g.fly(t)
		if t.Changes && g.parked.Load() > 0 {
			g.pokeBlockers(t)
		}
		if t.sendWaiters.Load() {
			g.mu.Lock()
			g.sentLocked(t)
			g.mu.Unlock()
		}
	}
}

// pokeBlockers wakes the parked waiters whose locks may block t, a change
// just sent: t may now be stuck behind them, which their next look sees
// (at t's lockBound). A waiter marks itself parked before it looks, and t
// was filed as in flight before this: either its look finds t or t finds
// it here.
func (g *Gate) pokeBlockers(t *Ticket) {
	g.lmu.Lock()
	g.locks.candidates(t, func(c *Cursor) bool {
		if c.parked.Load() && c.locks.Load().mayBlock(t) {
			select {
			case c.poke <- struct{}{}:
			default: // poked already
			}
		}
		return true
	})
	g.lmu.Unlock()
}

// fly lists t as in flight (once), and files it, a change, in the index
// of those sent (until it is done).
func (g *Gate) fly(t *Ticket) {
	g.fmu.Lock()
	if t.flyAt == 0 {
		g.flying = append(g.flying, t)
		t.flyAt = len(g.flying)
	}
	g.inflight.add(t)
	g.fmu.Unlock()
}

// land takes t off the list of those in flight, if it is there.
func (g *Gate) land(t *Ticket) {
	g.fmu.Lock()
	if i := t.flyAt; i != 0 {
		last := g.flying[len(g.flying)-1]
		g.flying[i-1], last.flyAt = last, i
		g.flying[len(g.flying)-1] = nil
		g.flying = g.flying[:len(g.flying)-1]
		t.flyAt = 0
	}
	g.fmu.Unlock()
}

// sentLocked wakes those waiting for t to be sent.
func (g *Gate) sentLocked(t *Ticket) {
	if t.onSent != nil {
		close(t.onSent)
		t.onSent = nil
	}
	t.sendWaiters.Store(false)
}

// Idle notes that t is not executing a statement (a unit waiting here).
func (g *Gate) Idle(t *Ticket) {
	if t != nil {
		t.sent.Store(0)
		g.land(t)
	}
}

// Finish marks t done and wakes the waiters it held back.
func (g *Gate) Finish(t *Ticket) {
	if t == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	t.done, t.doneAt = true, g.now().UnixNano()
	if t.onDone != nil {
		close(t.onDone)
		t.onDone = nil
	}
	g.land(t)
	if t.Commit != 0 {
		g.commits.pop()
	}
	g.sentLocked(t)
	g.all.pop()
	if t.Changes {
		g.changes.pop()
		g.fmu.Lock()
		g.inflight.remove(t)
		g.fmu.Unlock()
	}
}

// Reopen makes done tickets pending again: their records' effects were
// rolled back (a transaction run again, for order or after a deadlock),
// so what ran after them in the capture must wait until they run again.
// A statement already on the server, blocked on the rolled-back
// transaction's locks, goes ahead; if it then meets the transaction run
// again, the gate orders them as any other pair (see the package documentation).
func (g *Gate) Reopen(ts []*Ticket) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, t := range ts {
		if t == nil || !t.done {
			continue
		}
		t.done = false
		t.sent.Store(0)
		g.land(t)
		t.rerun.Store(true)
		if t.Commit != 0 {
			g.commits.insert(t)
		}
		if !t.in[0] {
			g.all.insert(t)
		}
		if t.Changes && !t.in[1] {
			g.changes.insert(t)
		}
	}
}

// WaitResult says how a wait ended.
type WaitResult uint8

const (
	NotWaited WaitResult = iota // nothing to wait for
	Ordered                     // waited until all before it were done
	Stalled                     // a ticket it waits for is stuck on the server (see the package documentation)
	TimedOut                    // went after hardBound
	Released                    // went without a ticket that waits for it (it could never come)
)

// Ready reports whether Wait(t, threshold) would return at once, nothing
// to wait for: a look, as Wait's first, that waits for nothing and marks
// nothing. A ticket that would go ahead of one that waits for it (Wait
// releases it) is not ready: Wait decides. The tickets t waits for only
// get done, and tickets come in about the order they end, so a ready
// ticket stays ready — but for one added late with an end before
// threshold (regrouping hands a unit out late when its session left it
// open and quit, or its COMMIT outlasted the hold): t then waits for it
// in its own later Wait, as it would have without asking.
//
// A connection with a batch of units asks it before waiting on the first:
// while that one waits, a later one that is ready and depends on none of
// the units before it can run.
func (g *Gate) Ready(t *Ticket, threshold int64) bool {
	if t == nil {
		return true
	}
	ln := g.lane(t)
	if ln.minEnd.Load() >= threshold && !t.SendOrder && t.Commit == 0 {
		return true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	lk := g.lookLocked(ln, t, threshold, 0, nil)
	return lk.blocker == nil && lk.unregistered == nil && len(lk.stuck) == 0 && !lk.cyclic
}

// look is what one look of Wait's finds (lookLocked).
type look struct {
	blocker      *Ticket         // the earliest ticket t waits for, if any
	unregistered <-chan struct{} // closed when the commits t follows may all be registered
	stuck        []*Ticket       // in flight, stuck behind the waiter's locks (patience > 0)
	cyclic       bool            // t waits behind a ticket that waits for it
	wake         time.Duration   // when to look again
	calm         bool            // nothing can be stuck: only the earliest blocker was looked for
}

// lookLocked is one look of Wait (and Ready's only one): the tickets
// that ended before threshold, then, at t's start, those t must follow
// in send order and in the server's commit order.
func (g *Gate) lookLocked(ln *lane, t *Ticket, threshold int64, patience int, h *Cursor) look {
	var lk look
	lk.blocker, lk.stuck, lk.cyclic, lk.wake, lk.calm = g.blockerLocked(ln, t, threshold, patience, h)
	if lk.blocker == nil && len(lk.stuck) == 0 && t.SendOrder && threshold == t.Start {
		lk.blocker, lk.stuck, lk.wake = g.sendBlockerLocked(t, patience, h, lk.wake)
	}
	if lk.blocker == nil && len(lk.stuck) == 0 && threshold == t.Start {
		var cyc bool
		lk.blocker, lk.unregistered, lk.stuck, cyc, lk.wake = g.commitWaitLocked(t, patience, h, lk.wake)
		lk.cyclic = lk.cyclic || cyc
	}
	return lk
}

// Independent reports whether neither of two tickets waits for the other
// by what they read and change (their Access): either may run first.
func Independent(t, p *Ticket) bool {
	return t != nil && p != nil && !waitsFor(t, p)
}

// Wait blocks until every ticket that ended before threshold (t's start,
// or a later instant of t's own, such as its COMMIT's start) is done, for
// at most limit (0: the gate's hard bound), or until ctx ends. With
// patience > 0 it returns waitStalled, and the tickets stuck on the server,
// as soon as it waits for a ticket in flight longer than the in-flight
// bound times 2^(patience-1) (a transaction run again after a stall gives
// the server more time before it stalls again); with 0, it waits on.
//
// h is the waiter's transaction (nil when it holds none), which tells
// whether an in-flight ticket may be stuck behind its locks.
func (g *Gate) Wait(ctx context.Context, t *Ticket, threshold int64, patience int, limit time.Duration, h *Cursor) (WaitResult, []*Ticket) {
	if t == nil {
		return NotWaited, nil
	}
	ln := g.lane(t)
	if ln.minEnd.Load() >= threshold && !t.SendOrder && t.Commit == 0 {
		return NotWaited, nil
	}
	if limit <= 0 {
		limit = g.hardBound
	}
	began := g.now()
	released, waited := false, false
	quiet := 0 // looks at the stall check in a row that found nothing stuck
	// The hard bound counts from the last progress: a wait behind tickets
	// that keep getting done is the replay catching up (at --speed 0 a
	// session runs ahead of the others by as much as the target lets
	// it), not a stall. Progress is the last blocker done, or sent when
	// t waited for it to be sent.
	var last *Ticket
	lastSent := false
	// A waiter with a transaction is poked when a change its locks may
	// block is sent (pokeBlockers); it says so before its first look.
	var poke <-chan struct{}
	if patience > 0 && h != nil {
		if h.poke == nil {
			h.poke = make(chan struct{}, 1)
		}
		h.parked.Store(true)
		g.parked.Add(1)
		defer func() {
			h.parked.Store(false)
			g.parked.Add(-1)
		}()
		poke = h.poke
	}
	for {
		g.mu.Lock()
		if at := progressAt(last, lastSent); at > began.UnixNano() {
			began = time.Unix(0, at)
		}
		lk := g.lookLocked(ln, t, threshold, patience, h)
		blocker, unregistered, stuck, cyclic, wake, calm := lk.blocker, lk.unregistered, lk.stuck, lk.cyclic, lk.wake, lk.calm
		released = released || cyclic
		if blocker == nil && unregistered == nil {
			if released {
				g.overtakeLocked(ln, t, threshold, h)
			}
			g.mu.Unlock()
			if released {
				return Released, nil
			}
			if !waited {
				return NotWaited, nil
			}
			return Ordered, nil
		}
		if len(stuck) > 0 {
			g.mu.Unlock()
			return Stalled, stuck
		}
		var w *waiter
		var wake1 <-chan struct{}
		switch {
		case blocker == nil: // a commit t follows, not registered yet
			wake1 = unregistered
		case blocker.End < threshold && t.Access != nil:
			// t waits for the tickets it depends on, not for the lane's
			// front: it looks again when this one is done.
			if blocker.onDone == nil {
				blocker.onDone = make(chan struct{})
			}
			wake1 = blocker.onDone
		case blocker.End < threshold:
			w = &waiter{start: threshold, ch: make(chan struct{})}
			heap.Push(&ln.waiters, w)
			wake1 = w.ch
		default: // until blocker is sent (or, a commit t follows, done)
			if blocker.onSent == nil {
				blocker.onSent = make(chan struct{})
			}
			blocker.sendWaiters.Store(true)
			wake1 = blocker.onSent
		}
		if blocker != nil && blocker != last {
			// A new blocker sent since the last progress seen: its send
			// is progress too, seen late.
			if at := blocker.sent.Load(); at > began.UnixNano() {
				began = time.Unix(0, at)
			}
		}
		last, lastSent = blocker, blocker != nil && blocker.sent.Load() != 0
		g.mu.Unlock()
		t.waiting.Store(blocker)
		waited = true

		// Wake when the earliest blocker may pass the in-flight bound, or at
		// the limit.
		left := limit - g.now().Sub(began)
		switch {
		case patience > 0 && calm:
			// Nothing can be stuck (mayStallLocked): the waiter looks
			// again when a blocker moves, when a change its locks may
			// block is sent (poke), or when wake says a statement in
			// flight may pass the in-flight bound or its lockBound. At a
			// thousand sessions, looking at 2, 4, 8 … ms doubled the
			// looks, each a wake-up and the gate's lock.
			left = min(left, wake)
			quiet = 0
		case patience > 0:
			// A waiter that found nothing stuck looks again less and less
			// often (up to 32 times lockBoundMax): a thousand waiters each
			// walking the backlog every 2 ms under the gate's lock was all
			// a replay at a thousand sessions did. A stall is then seen
			// up to that much later, which costs time, not order.
			left = min(left, max(wake, lockBoundMax<<min(quiet, 5)))
			quiet++
		default:
			// A waiter that holds no transaction is in no one's way: it
			// looks again only for progress (the hard bound counts from
			// when it happened, not from when it is seen) and for a
			// cycle. Looking every inflightMin made three quarters of the
			// gate's wake-ups at a thousand sessions, where such waits last
			// hundreds of ms; a cycle is now seen up to a quarter of the
			// bound later.
			left = min(left, max(g.inflightMin, limit/4))
		}
		timer := time.NewTimer(max(left, time.Millisecond))
		select {
		case <-wake1:
			timer.Stop()
			t.waiting.Store(nil)
			continue
		case <-poke:
			timer.Stop()
			g.drop(ln, w)
			t.waiting.Store(nil)
			continue
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			g.drop(ln, w)
			t.waiting.Store(nil)
			return TimedOut, nil
		}
		g.drop(ln, w)
		t.waiting.Store(nil)
		if g.now().Sub(began) >= limit {
			g.mu.Lock()
			if progressed(last, lastSent) {
				g.mu.Unlock()
				continue // counted from now at the top
			}
			g.overtakeLocked(ln, t, threshold, h)
			g.mu.Unlock()
			return TimedOut, nil
		}
	}
}

// progressed reports whether a waiter's last blocker is done, or was sent
// when it had not been (sent: whether it had): the order moved on since
// the waiter looked. Under the gate's lock.
func progressed(last *Ticket, sent bool) bool {
	return progressAt(last, sent) != 0
}

// progressAt is when last progressed (unix ns), 0 if it did not (see
// progressed). Under the gate's lock.
func progressAt(last *Ticket, sent bool) int64 {
	switch {
	case last == nil:
		return 0
	case last.done:
		return last.doneAt
	case !sent:
		return last.sent.Load()
	}
	return 0
}

// overtakeLocked notes that t goes to the server, at threshold, before
// tickets it should follow are done (the hard bound ran out, or one of
// them waits behind t itself). When t changes what others see, each such
// ticket — one that ended before threshold, or (t's own statement, sent
// in lock order) a conflicting change that overlapped t, ended before it
// and is not yet sent — is marked overtaken: it, or a later read of its
// transaction (a snapshot taken after t committed), may see t's change,
// which it did not see in the capture. A change overtaking a conflicting
// change also marks t reordered: two writes to the same rows applied in
// the other order leave other data, so what its tables hold may differ
// from then on by replay's doing. A read going ahead affects only its own
// outcome (flagged by its worker).
//
// h is the waiter's transaction (nil: it holds none). Its statements that
// ran before t went ahead with it: a change t overtakes that h's locks may
// block (LockSet.mayBlock: one of h's locking statements did not end, in
// the capture, before it started, and they may share a row) took its lock
// after them here, and goes to the server only once h's transaction ends,
// though it came first in the capture. That too is a conflicting change
// overtaken, whether or not t itself conflicts with it (t may be a write
// to other rows, or the COMMIT): t is marked reordered, and its worker
// lists the transaction's writes with it.
func (g *Gate) overtakeLocked(ln *lane, t *Ticket, threshold int64, h *Cursor) {
	if !t.Changes {
		return
	}
	var held *LockSet
	if h != nil {
		held = h.locks.Load()
	}
	reorder := false
	mark := func(p *Ticket) {
		if p == t || p.done {
			return
		}
		p.overtaken.Store(true)
		reorder = reorder || p.Changes && (conflicts(p, t) || held.mayBlock(p))
	}
	for _, p := range ln.pending {
		if p.End >= threshold {
			break
		}
		if waitsFor(t, p) {
			mark(p)
		}
	}
	if t.SendOrder && threshold == t.Start {
		pend := g.changes.pending
		for i := sort.Search(len(pend), func(i int) bool { return pend[i].End >= t.Start }); i < len(pend) && pend[i].End < t.End; i++ {
			if p := pend[i]; p.sent.Load() == 0 && conflicts(p, t) && !commitsAfter(p, t) {
				mark(p)
			}
		}
	}
	if p, _ := g.commitBlockerLocked(t); p != nil {
		// A commit going ahead of one that came before it in the
		// server's order: that one's transaction may now see t's change.
		mark(p)
		if a := p.ahead(); a != nil {
			mark(a)
		}
	}
	if reorder {
		t.reordered.Store(true)
	}
}

// drop removes a waiter that stopped waiting.
func (g *Gate) drop(ln *lane, w *waiter) {
	if w == nil {
		return
	}
	g.mu.Lock()
	if w.index >= 0 {
		heap.Remove(&ln.waiters, w.index)
	}
	g.mu.Unlock()
}

// inflightBound is how long t may execute before it counts as stuck:
// twenty times its captured duration, at least inflightMin, doubled for
// each patience step past the first.
func (g *Gate) inflightBound(t *Ticket, patience int) time.Duration {
	b := max(g.inflightMin, 20*time.Duration(t.span.Load()))
	if patience > 1 {
		b <<= min(patience-1, 16)
	}
	return b
}

// lockBound is how long a statement that a waiter's transaction may block
// (holder.mayBlock) may be in flight before the waiter yields: twice its
// captured duration, between lockBoundMin and lockBoundMax.
func lockBound(t *Ticket) time.Duration {
	return min(max(2*time.Duration(t.span.Load()), lockBoundMin), lockBoundMax)
}

// maxPassed bounds how many pending tickets it does not depend on a
// waiter with Access walks past, each time it looks.
const maxPassed = 256

const (
	lockBoundMin = time.Millisecond
	lockBoundMax = 2 * time.Millisecond
)

// inflightOf returns the ticket on the server that keeps p from
// completing, if there is one: p's statement once sent, or what p waits
// for here, or (p not started) its session's current ticket's.
func (g *Gate) inflightOf(p *Ticket, depth int) *Ticket {
	if p == nil || p.done || depth > 16 {
		return nil
	}
	if p.sent.Load() != 0 {
		return p
	}
	if w := p.waiting.Load(); w != nil {
		return g.inflightOf(w, depth+1)
	}
	return g.inflightOf(p.ahead(), depth+1)
}

// dependsOn reports whether p cannot start or finish before t does: p is
// t, or waits here for a ticket that depends on t, or has not started and
// its session's current ticket depends on t.
func dependsOn(p, t *Ticket, depth int) bool {
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

// sendBlockerLocked returns, for a record t that changes what others see
// and waits for nothing that ended before it, the earliest conflicting
// ticket (one that changes, on a table of t's, or on any) that overlapped
// t in the capture, ended before t did, and is not yet sent or done: t
// goes to the server after it (see the package documentation). Like blockerLocked, it reports
// the stalled tickets such a blocker waits behind, and when to look again.
func (g *Gate) sendBlockerLocked(t *Ticket, patience int, h *Cursor, wake time.Duration) (*Ticket, []*Ticket, time.Duration) {
	pend := g.changes.pending
	strict := t.rerun.Load()
	i := sort.Search(len(pend), func(i int) bool { return pend[i].End >= t.Start })
	for ; i < len(pend) && pend[i].End < t.End; i++ {
		p := pend[i]
		// A statement that locks one row has its lock once the server has
		// it; one that locks several, or rows it does not name, takes them
		// one after another, so t goes after it is done.
		ready := p.sent.Load() != 0 && !strict && len(p.Keys) == 1
		if p == t || p.done || ready || !conflicts(p, t) || commitsAfter(p, t) || dependsOn(p, t, 0) {
			continue
		}
		if patience > 0 {
			if s := g.inflightOf(p, 0); s != nil {
				var stuck bool
				if stuck, wake = g.stuckLocked(h, s, patience, wake, g.now().UnixNano()); stuck {
					return p, []*Ticket{s}, wake
				}
			}
		}
		return p, nil, wake
	}
	return nil, nil, wake
}

// conflicts reports whether two tickets can lock a row in common: they
// share a row key when both name their rows, else a table (or may).
func conflicts(a, b *Ticket) bool {
	if a.AnyTable || b.AnyTable {
		return true
	}
	if a.Keys != nil && b.Keys != nil {
		return sharedKey(a.Keys, b.Keys)
	}
	for _, x := range a.Tables {
		if slices.Contains(b.Tables, x) {
			return true
		}
	}
	return false
}

// blockerLocked returns the earliest ticket that ended before threshold
// and is not done (nil if none); with patience > 0, the tickets stuck on
// the server behind any such ticket (see the package documentation), and how long until one
// may be; whether one was passed over because it depends on t itself;
// and calm: with patience > 0, nothing in flight could be stuck
// (mayStallLocked), so that only a statement sent from now on (a poke)
// or one passing the in-flight bound (by wake) can change that.
func (g *Gate) blockerLocked(ln *lane, t *Ticket, threshold int64, patience int, h *Cursor) (*Ticket, []*Ticket, bool, time.Duration, bool) {
	var first *Ticket
	var stuck []*Ticket
	cyclic := false
	// Look again soon: a ticket not yet on the server may be sent, and
	// then be stuck behind the waiter's locks.
	wake := g.inflightMin
	if h != nil {
		wake = lockBoundMax
	}
	// Many tickets wait behind one statement in flight (their sessions'
	// queues): each is looked at once (checked), at one instant.
	g.pass++
	now := g.now().UnixNano()
	// The walk below looks for what is stuck; when nothing can be, only
	// the earliest blocker matters (as for a waiter that holds nothing).
	walk := patience > 0 && (g.walkAlways || g.mayStallLocked(h, now))
	calm := patience > 0 && !walk
	if walk {
		g.walks++
	}
	if calm {
		wake = g.untilOldLocked(now)
	}
	passed := 0
	for _, p := range ln.pending {
		if p.End >= threshold {
			break
		}
		if p.done || p == t {
			continue
		}
		if !waitsFor(t, p) {
			if passed < maxPassed {
				passed++
				continue
			}
			// Past maxPassed, t waits for what it may not depend on:
			// later, never wrongly, at a cost per look that the
			// backlog does not set.
		}
		if dependsOn(p, t, 0) {
			cyclic = true
			continue
		}
		if first == nil {
			first = p
		}
		if !walk {
			break // only the earliest matters
		}
		if p.sent.Load() == 0 && p.waiting.Load() == nil {
			if a := p.ahead(); a != nil && a.End <= p.End && waitsFor(t, a) {
				// Queued behind its worker's current ticket, which came
				// earlier in this walk (pending is sorted by end): what
				// keeps p from finishing is what keeps that one.
				continue
			}
		}
		s := g.inflightOf(p, 0)
		if s == nil || s.checked == g.pass {
			continue
		}
		s.checked = g.pass
		var st bool
		if st, wake = g.stuckLocked(h, s, patience, wake, now); st {
			stuck = append(stuck, s)
		}
	}
	return first, stuck, cyclic, wake, calm
}

// untilOldLocked is how long, after mayStallLocked found nothing that
// could be stuck at now, until a statement in flight may have been in
// flight for inflightMin: one its scan found old at its own time, any
// other (in flight for less than half of inflightMin at the scan, or sent
// since) no sooner than half of inflightMin after the scan.
func (g *Gate) untilOldLocked(now int64) time.Duration {
	at := g.oldAt + int64(g.inflightMin/2)
	for _, p := range g.old {
		if s := p.sent.Load(); !p.done && s != 0 {
			at = min(at, s+int64(g.inflightMin))
		}
	}
	return time.Duration(max(at-now, 0))
}

// mayStallLocked reports whether a stall check by waiter h (nil: it holds
// no transaction) can find a ticket stuck at now: one in flight for
// inflightMin or more (the least in-flight bound), or one in flight that
// h's locks may block. Every lock chain blocksLocked finds ends at such a
// one (h's locks may block the statement at its far end), so when there
// is neither, a walk of the waiter's backlog would find nothing stuck.
// The first costs a look at every ticket in flight (at most one per
// worker) once per half of inflightMin for the whole gate, the second a
// look at the changes filed under h's rows (changeIndex): neither grows
// with the sessions, where a walk per look did.
func (g *Gate) mayStallLocked(h *Cursor, now int64) bool {
	// A ticket in flight for inflightMin now was in flight for more than
	// half of it at a scan less than half of it ago.
	if now-g.oldAt >= int64(g.inflightMin/2) {
		clear(g.old)
		g.old = g.old[:0]
		g.fmu.Lock()
		for _, p := range g.flying {
			if s := p.sent.Load(); !p.done && s != 0 && now-s >= int64(g.inflightMin/2) {
				g.old = append(g.old, p)
			}
		}
		g.fmu.Unlock()
		g.oldAt = now
	}
	for _, p := range g.old {
		if s := p.sent.Load(); !p.done && s != 0 && now-s >= int64(g.inflightMin) {
			return true
		}
	}
	if h == nil {
		return false
	}
	g.fmu.Lock()
	defer g.fmu.Unlock()
	return g.inflight.inflightMayBlock(h.locks.Load())
}

// stuckLocked reports whether the in-flight ticket s that waiter h waits
// for (h nil: the waiter holds nothing) is stalled — past lockBound when
// h may block it, past the in-flight bound otherwise — and lowers wake to
// when it may be.
func (g *Gate) stuckLocked(h *Cursor, s *Ticket, patience int, wake time.Duration, now int64) (bool, time.Duration) {
	since := time.Duration(now - s.sent.Load())
	bound := g.inflightBound(s, patience)
	if h != nil {
		if lb := lockBound(s); since < lb {
			wake = min(wake, lb-since)
		} else if g.blocksLocked(h, s) {
			return true, wake
		}
	}
	if since >= bound {
		return true, wake
	}
	return false, min(wake, bound-since)
}
