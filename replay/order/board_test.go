package order

import (
	"context"
	"slices"
	"testing"
	"time"
	"unsafe"
)

// stuckBoard is a board of two connections where connection 1 runs a
// change on table t, sent a second ago and still on the server, and the
// locks of connection 0's transaction may block it.
func stuckBoard(t *testing.T) (*Board, *LockSet) {
	t.Helper()
	b := NewBoard(2, time.Minute)
	tk := &Ticket{Start: 0, End: 10, Changes: true, Tables: []string{"t"}}
	tk.sent.Store(time.Now().Add(-time.Second).UnixNano())
	b.Running(1, tk)
	b.Set(1, 5, true, []string{"t"}, nil)
	b.Sent(1)
	return b, &LockSet{Stmts: []LockStmt{{End: 20, Tables: []string{"t"}}}}
}

// Wait names the connection whose statement is stuck behind the waiter's
// locks, as it found it; Until then waits for that statement to be done,
// and says whether it was.
func TestBoardWaitFindsTheStuckStatement(t *testing.T) {
	b, locks := stuckBoard(t)
	h := b.Wait(context.Background(), 0, 6, 7, true, []string{"t"}, nil, locks)
	if h.Slot != 1 || h.end != 5 || h.unit == nil {
		t.Fatalf("Wait returned %+v, want connection 1 as it ran its statement ending at 5", h)
	}
	if b.Until(context.Background(), h, 0) {
		t.Errorf("Until says connection 1 moved on; it still runs the same statement")
	}
	done := make(chan bool)
	go func() { done <- b.Until(context.Background(), h, time.Minute) }()
	b.Set(1, 9, true, []string{"t"}, nil) // its next statement
	if !<-done {
		t.Errorf("Until says connection 1 did not move on; it went to its next statement")
	}
}

// Until compares with the statement as Wait found it. Between the two,
// the waiter rolls back its transaction; the holder's statement may get
// its locks then and end, and the holder wait at the gate (idle on the
// board) for the waiter's own unit to commit. Before, Until took the
// holder as it was when Until began (idle) and waited for it to change:
// each waited for the other until --order-timeout ran out (2 s), and
// every unit that started meanwhile was released (in a 4-session
// sysbench read/write replay with --concurrency 8, 4 to 7 releases in
// about 1 run in 3, and a tenth of the outcomes counted apart).
func TestBoardUntilSeesAMoveBeforeItBegan(t *testing.T) {
	b, locks := stuckBoard(t)
	h := b.Wait(context.Background(), 0, 6, 7, true, []string{"t"}, nil, locks)
	if h.Slot != 1 {
		t.Fatalf("Wait returned %+v, want connection 1", h)
	}
	b.Set(1, -1, false, nil, nil) // done, and waiting at the gate: idle here
	if !b.Until(context.Background(), h, 0) {
		t.Errorf("Until does not see that connection 1 moved on before it began")
	}
}

// A connection that no statement must follow is not waited for, stuck or
// not.
func TestBoardWaitIgnoresStatementsItNeedNotFollow(t *testing.T) {
	b, locks := stuckBoard(t)
	// Connection 1's statement ended at 5; this one began at 4: the
	// capture ran it first, and it overlaps on no row (other table).
	if h := b.Wait(context.Background(), 0, 4, 8, true, []string{"u"}, nil, locks); h.Slot != -1 {
		t.Errorf("Wait returned %+v, want none (-1)", h)
	}
}

// Only a change can be stuck behind row locks, and only on rows the locks
// may share with it: the statement on the server is judged, not the rest
// of its unit. Before, a plain read of a writing unit, or a change to
// other rows, that outlasted the bound (2 ms at most) made every waiter
// behind it whose locks share a row with the unit's yield: 13 to 26
// order reruns per target in a 4-session sysbench read/write replay with
// --concurrency 8, against 2 to 4 now.
func TestBoardJudgesTheStatementNotItsUnit(t *testing.T) {
	now := time.Now().UnixNano()
	for _, c := range []struct {
		name    string
		changes bool
		tables  []string
		keys    []string
		want    bool
	}{
		{"a plain read", false, nil, nil, false},
		{"a change to another row", true, []string{"t"}, []string{"t/2"}, false},
		{"a change to a row the locks hold", true, []string{"t"}, []string{"t/1"}, true},
		{"a change naming no rows, on their table", true, []string{"t"}, nil, true},
		{"a change on another table", true, []string{"u"}, nil, false},
		{"a change of unknown tables", true, nil, nil, true},
	} {
		b := NewBoard(2, time.Minute)
		// The unit writes row 1 of t (a later statement of it), as the
		// waiter's transaction did.
		unit := &Ticket{Start: 0, End: 10, Changes: true, Tables: []string{"t"}, Keys: []string{"t/1", "t/2"}}
		unit.sent.Store(now - int64(time.Second))
		b.Running(1, unit)
		b.Set(1, 5, c.changes, c.tables, c.keys)
		b.Sent(1)
		locks := &LockSet{Stmts: []LockStmt{{End: 20, Tables: []string{"t"}, Keys: []string{"t/1"}}}}
		if got := b.stuck(1, locks, now); got != c.want {
			t.Errorf("%s, on the server for a second: stuck %v, want %v", c.name, got, c.want)
		}
	}
}

// A statement's cost on the board, when nobody waits, is a few stores:
// a read's (no tables, no keys) allocates nothing, a change's one pointer
// for each list it gives. Each slot has a cache line of its own.
func TestBoardSetAllocatesOnlyForListsGiven(t *testing.T) {
	b := NewBoard(4, 0)
	tables, keys := []string{"sbtest.sbtest1"}, []string{"sbtest.sbtest1/7"}
	for _, tc := range []struct {
		name         string
		tables, keys []string
		want         float64
	}{{"read", nil, nil, 0}, {"change of tables", tables, nil, 1}, {"change of rows", tables, keys, 2}} {
		if n := testing.AllocsPerRun(100, func() {
			b.Set(1, 5, tc.tables != nil, tc.tables, tc.keys)
			b.Sent(1)
		}); n != tc.want {
			t.Errorf("%s: %v allocations a statement, want %v", tc.name, n, tc.want)
		}
	}
	if got := b.slots[1].tables.Load(); got == nil || !slices.Equal(*got, tables) {
		t.Errorf("slot's tables %v, want %v", got, tables)
	}
	if size := unsafe.Sizeof(slot{}); size != 64 {
		t.Errorf("a slot takes %d bytes, want a cache line (64)", size)
	}
}
