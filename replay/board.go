package replay

import (
	"context"
	"sync"
	"time"
)

// board keeps the statements of regrouped units (--concurrency) in the
// capture's order among the units running at once, as far as it can
// without deadlock: before a statement, a unit waits while another running
// unit's current statement ended, in the capture, before this one began.
// Statements then take row locks in the order they took them in the
// capture, so fewer transactions meet in an order cycle the gate must
// break by a rerun. The wait is bounded (boardWait): a unit blocked on a
// lock, or waiting at the gate, is idle here and holds no one.
type board struct {
	mu   sync.Mutex
	next map[*worker]int64 // running units: the capture end of the statement each runs now
	ch   chan struct{}     // closed and replaced at every change
}

// boardWait bounds a statement's wait on the board.
const boardWait = 20 * time.Millisecond

func newBoard() *board { return &board{next: map[*worker]int64{}, ch: make(chan struct{})} }

// set records that w now runs the statement that ended, in the capture,
// at end; a negative end takes w off the board (idle).
func (b *board) set(w *worker, end int64) {
	b.mu.Lock()
	if end < 0 {
		delete(b.next, w)
	} else {
		b.next[w] = end
	}
	close(b.ch)
	b.ch = make(chan struct{})
	b.mu.Unlock()
}

// wait holds w until no other running unit's statement ended before start,
// or boardWait has passed.
func (b *board) wait(ctx context.Context, w *worker, start int64) {
	var timer *time.Timer
	for {
		b.mu.Lock()
		behind := false
		for o, end := range b.next {
			if o != w && end < start {
				behind = true
				break
			}
		}
		ch := b.ch
		b.mu.Unlock()
		if !behind {
			break
		}
		if timer == nil {
			timer = time.NewTimer(boardWait)
		}
		select {
		case <-ch:
			continue
		case <-timer.C:
			return
		case <-ctx.Done():
		}
		break
	}
	if timer != nil {
		timer.Stop()
	}
}
