package replay

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// board keeps the statements of regrouped units (--concurrency) in the
// capture's order among the units running at once, as far as it can
// without deadlock: before a statement, a unit waits while another running
// unit's current statement ended, in the capture, before this one began —
// a read only for statements that change what others see, a change for
// every statement (as the gate orders tickets). Statements then take row
// locks in the order they took them in the capture, so fewer transactions
// meet in an order cycle the gate must break by a rerun. The wait is
// bounded (boardWait): a unit blocked on a lock, or waiting at the gate, is
// idle here and holds no one.
//
// Each connection has a slot, written by its worker alone; a statement's
// cost when nobody waits is two atomic stores.
type board struct {
	end     []atomic.Int64 // per connection: the capture end of its statement; MaxInt64 when idle
	changes []atomic.Bool  // per connection: that statement changes what others see
	waiters atomic.Int32
	mu      sync.Mutex
	ch      chan struct{} // closed and replaced when a slot changes while someone waits
}

// boardWait bounds a statement's wait on the board.
const boardWait = 20 * time.Millisecond

func newBoard(conns int) *board {
	b := &board{end: make([]atomic.Int64, conns), changes: make([]atomic.Bool, conns), ch: make(chan struct{})}
	for i := range b.end {
		b.end[i].Store(math.MaxInt64)
	}
	return b
}

// set records that connection i now runs a statement that ended, in the
// capture, at end (negative: i is idle).
func (b *board) set(i int, end int64, changes bool) {
	if end < 0 {
		end = math.MaxInt64
	}
	b.changes[i].Store(changes)
	b.end[i].Store(end)
	if b.waiters.Load() > 0 {
		b.mu.Lock()
		close(b.ch)
		b.ch = make(chan struct{})
		b.mu.Unlock()
	}
}

// behind reports whether another connection runs a statement connection i
// must wait for before a statement that began at start.
func (b *board) behind(i int, start int64, changes bool) bool {
	for j := range b.end {
		if j != i && b.end[j].Load() < start && (changes || b.changes[j].Load()) {
			return true
		}
	}
	return false
}

// wait holds connection i until no statement it must follow is running,
// or boardWait has passed.
func (b *board) wait(ctx context.Context, i int, start int64, changes bool) {
	if !b.behind(i, start, changes) {
		return
	}
	b.waiters.Add(1)
	defer b.waiters.Add(-1)
	timer := time.NewTimer(boardWait)
	defer timer.Stop()
	for {
		b.mu.Lock()
		ch := b.ch
		b.mu.Unlock()
		if !b.behind(i, start, changes) {
			return
		}
		select {
		case <-ch:
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		}
	}
}
