package order

import (
	"context"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Board keeps the statements of regrouped units (--concurrency) in the
// capture's order among the units running at once, as far as it can
// without deadlock, by the gate's rules (see the package documentation): before a statement, a
// unit waits while another running unit's current statement ended, in the
// capture, before this one began — a read only for statements that change
// what others see, a change for every statement — and a statement that
// changes what others see also waits while a conflicting one (it changes
// too, on a table of this one's) that overlapped it and ended before it
// has not yet been sent: conflicting locks are then requested in the
// order the capture granted them, so fewer units meet in a lock cycle
// (which MyRocks, without deadlock detection, ends only at its lock wait
// timeout) or in an order cycle the gate must break by a rerun. Waits go
// from a statement to ones that ended before it, so they form no cycle,
// and each is bounded (boardWait): a unit blocked on a lock, or waiting at
// the gate, is idle here and holds no one.
//
// A unit that waits here behind another's statement that has been on the
// server for lockBound, and that its own transaction's locks may block
// (lockSet.mayBlock), yields at once (Wait returns that connection): the gate
// would see the same stall only at its COMMIT, and meanwhile every other
// unit waits behind the stuck statement.
//
// Each connection has a slot, written by its worker alone; a statement's
// cost when nobody waits is a few atomic stores.
type Board struct {
	bound   time.Duration // a statement's longest wait (boardWait)
	slots   []slot
	waiters atomic.Int32
	mu      sync.Mutex
	ch      chan struct{} // closed and replaced when a slot changes while someone waits
}

// slot is one connection's current statement.
type slot struct {
	end     atomic.Int64 // its capture end; MaxInt64 when idle
	changes atomic.Bool  // it changes what others see
	sent    atomic.Bool  // it has gone to the server
	tables  atomic.Pointer[[]string]
	keys    atomic.Pointer[[]string] // the rows it locks (nil: any of its tables')
	unit    atomic.Pointer[Ticket]   // the unit the connection runs (nil: none)
	// A slot fills a cache line of its own: its worker stores to it at
	// every statement, and slots that shared a line made every other
	// worker reading the board fetch it again.
	_ [64 - 40]byte
}

// boardWait bounds a statement's wait on the board.
const boardWait = 20 * time.Millisecond

func NewBoard(conns int, bound time.Duration) *Board {
	if bound <= 0 {
		bound = boardWait
	}
	b := &Board{bound: bound, slots: make([]slot, conns), ch: make(chan struct{})}
	for i := range b.slots {
		b.slots[i].end.Store(math.MaxInt64)
	}
	return b
}

// Set records that connection i now runs a statement that ended, in the
// capture, at end (negative: i is idle), touching tables; it is not yet
// sent (sent says when it is).
func (b *Board) Set(i int, end int64, changes bool, tables, keys []string) {
	if end < 0 {
		end = math.MaxInt64
	}
	s := &b.slots[i]
	s.sent.Store(false)
	s.changes.Store(changes)
	s.tables.Store(ptrOrNil(tables))
	s.keys.Store(ptrOrNil(keys))
	s.end.Store(end)
	b.notify()
}

// ptrOrNil is a pointer to v, or nil (the same "unknown" to shareRow)
// for a nil v: a read's statement, whose tables no one asks for, costs no
// allocation. (Returning &v moved the parameter to the heap on every
// call, nil or not: two allocations a statement.)
func ptrOrNil(v []string) *[]string {
	if v == nil {
		return nil
	}
	p := new([]string)
	*p = v
	return p
}

// Running records the ticket of the unit connection i runs (nil: none).
func (b *Board) Running(i int, t *Ticket) { b.slots[i].unit.Store(t) }

// Sent records that connection i's current statement went to the server.
func (b *Board) Sent(i int) {
	b.slots[i].sent.Store(true)
	b.notify()
}

func (b *Board) notify() {
	if b.waiters.Load() > 0 {
		b.mu.Lock()
		close(b.ch)
		b.ch = make(chan struct{})
		b.mu.Unlock()
	}
}

// behind returns the connection whose statement connection i's
// statement [start, end] must wait for (see board), or -1.
//
// Units that do not depend on each other (their tickets' Access) are in
// each other's way neither in time nor for locks.
func (b *Board) behind(i int, start, end int64, changes bool, tables, keys []string) int {
	mine := b.slots[i].unit.Load()
	for j := range b.slots {
		s := &b.slots[j]
		if j == i {
			continue
		}
		e := s.end.Load()
		switch {
		case e < start && (changes || s.changes.Load()):
		case changes && e < end && e >= start && s.changes.Load() && !s.sent.Load() && shareRow(s.tables.Load(), s.keys.Load(), tables, keys):
		default:
			continue
		}
		if waitsFor(mine, s.unit.Load()) {
			return j
		}
	}
	return -1
}

// shareRow reports whether two statements can lock a row in common: by
// their row keys when both have them, else by their tables.
func shareRow(pt, pk *[]string, tables, keys []string) bool {
	if pk != nil && *pk != nil && keys != nil {
		return sharedKey(*pk, keys)
	}
	return shareTable(pt, tables)
}

func shareTable(p *[]string, tables []string) bool {
	if p == nil || *p == nil || tables == nil {
		return true // unknown: any
	}
	for _, t := range *p {
		if slices.Contains(tables, t) {
			return true
		}
	}
	return false
}

// stuck reports whether connection j's statement has been on the server
// for lockBound and locks may block it. What may be blocked is that
// statement, not the rest of its unit: a plain read takes no row locks,
// and a change waits only for the rows it names (its tables' when it
// names none). Judged by the unit's rows, every read of a writing unit
// that outlasted the bound (2 ms at most: any statement, on a loaded
// machine) made a waiter yield.
func (b *Board) stuck(j int, locks *LockSet, now int64) bool {
	s := &b.slots[j]
	t := s.unit.Load()
	if t == nil || !s.sent.Load() || locks == nil || !s.changes.Load() {
		return false
	}
	sent := t.sent.Load()
	if sent == 0 || time.Duration(now-sent) < lockBound(t) {
		return false
	}
	// The statement, as far as mayBlock asks: from the unit's start (its
	// own start is not kept; an earlier one rules out fewer locks).
	st := Ticket{Start: t.Start, Changes: true, Unclocked: t.Unclocked}
	if p := s.tables.Load(); p != nil && *p != nil {
		st.Tables = *p
	} else {
		st.AnyTable = true
	}
	if p := s.keys.Load(); p != nil {
		st.Keys = *p
	}
	return locks.mayBlock(&st)
}

// Holder is a connection found running a statement stuck behind a
// waiter's locks (Wait), as it was then: Slot -1 for none.
type Holder struct {
	Slot int
	end  int64
	unit *Ticket
}

// noHolder is Wait's answer when no one is stuck.
var noHolder = Holder{Slot: -1}

// holder is connection j as it is now.
func (b *Board) holder(j int) Holder {
	s := &b.slots[j]
	return Holder{Slot: j, end: s.end.Load(), unit: s.unit.Load()}
}

// Wait holds connection i until no statement it must follow is running,
// or boardWait has passed; it returns the connection whose stuck
// statement locks may block (see board), as it was when found, or
// Holder.Slot -1.
func (b *Board) Wait(ctx context.Context, i int, start, end int64, changes bool, tables, keys []string, locks *LockSet) Holder {
	j := b.behind(i, start, end, changes, tables, keys)
	if j < 0 {
		return noHolder
	}
	b.waiters.Add(1)
	defer b.waiters.Add(-1)
	deadline := time.Now().Add(b.bound)
	for {
		b.mu.Lock()
		ch := b.ch
		b.mu.Unlock()
		if j = b.behind(i, start, end, changes, tables, keys); j < 0 {
			return noHolder
		}
		h := b.holder(j)
		if b.stuck(j, locks, time.Now().UnixNano()) && b.holder(j) == h {
			return h
		}
		left := time.Until(deadline)
		if left <= 0 {
			return noHolder
		}
		timer := time.NewTimer(min(left, lockBoundMin))
		select {
		case <-ch:
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return noHolder
		}
		timer.Stop()
	}
}

// Until waits, up to limit, until h's connection no longer runs the
// statement Wait found it running (it finished, or its unit moved on),
// and reports whether it did (false: the limit or ctx ended the wait).
// It compares with the statement as Wait found it, not as it is when
// Until begins: the holder may have moved on meanwhile (while the waiter
// rolled back), to a wait at the gate for the waiter's own unit, and
// waiting for it to move again would hold both until the limit.
func (b *Board) Until(ctx context.Context, h Holder, limit time.Duration) bool {
	s := &b.slots[h.Slot]
	moved := func() bool { return s.end.Load() != h.end || s.unit.Load() != h.unit }
	if moved() {
		return true
	}
	b.waiters.Add(1)
	defer b.waiters.Add(-1)
	deadline := time.Now().Add(limit)
	for {
		b.mu.Lock()
		ch := b.ch
		b.mu.Unlock()
		if moved() {
			return true
		}
		left := time.Until(deadline)
		if left <= 0 || ctx.Err() != nil {
			return false
		}
		timer := time.NewTimer(left)
		select {
		case <-ch:
		case <-timer.C:
		case <-ctx.Done():
		}
		timer.Stop()
	}
}

// sharedKey reports whether two key sets have a key in common.
func sharedKey(a, b []string) bool {
	for _, x := range a {
		for _, y := range b {
			if x == y {
				return true
			}
		}
	}
	return false
}
