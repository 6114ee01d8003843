package order

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// The lock index gives, for any statement, every transaction whose locks
// may block it (LockSet.mayBlock), and for a statement that names its
// rows little else: on 1,000 transactions holding row locks on distinct
// rows of one table, a statement on one of those rows gets exactly the
// one that holds it.
func TestLockIndexFindsEveryHolderThatMayBlock(t *testing.T) {
	g := NewGate(time.Second, time.Second)
	rng := rand.New(rand.NewPCG(1, 2))
	tables := []string{"a", "b", "c"}
	var cursors []*Cursor
	randomSet := func() *LockSet {
		ls := &LockSet{}
		for range 1 + rng.IntN(3) {
			p := LockStmt{End: int64(rng.IntN(100)), Tables: []string{tables[rng.IntN(3)]}}
			switch rng.IntN(6) {
			case 0:
				p.Any = true
			case 1, 2: // names no rows
			default:
				p.Keys = []string{fmt.Sprintf("%s:%d", p.Tables[0], rng.IntN(20))}
			}
			ls.Stmts = append(ls.Stmts, p)
		}
		return ls
	}
	for range 200 {
		c := &Cursor{}
		cursors = append(cursors, c)
		g.Publish(c, randomSet())
	}
	// Sets change, and some end: the index follows.
	for i, c := range cursors {
		switch i % 3 {
		case 0:
			g.Publish(c, randomSet())
		case 1:
			g.Publish(c, nil)
		}
	}
	for i := range 500 {
		s := &Ticket{Start: int64(rng.IntN(100)), Changes: i%10 != 0, Tables: []string{tables[rng.IntN(3)]}, AnyTable: i%17 == 0}
		if rng.IntN(2) == 0 {
			s.Keys = []string{fmt.Sprintf("%s:%d", s.Tables[0], rng.IntN(20))}
		}
		var got []*Cursor
		g.locks.candidates(s, func(c *Cursor) bool { got = append(got, c); return true })
		for _, c := range cursors {
			if c.locks.Load().mayBlock(s) && !slices.Contains(got, c) {
				t.Fatalf("statement %+v: a holder that may block it (%+v) is not a candidate", s, c.locks.Load().Stmts)
			}
		}
	}

	// A thousand row locks, one statement on one of their rows.
	g = NewGate(time.Second, time.Second)
	var holder *Cursor
	for i := range 1000 {
		c := &Cursor{}
		g.Publish(c, &LockSet{Stmts: []LockStmt{{End: 50, Tables: []string{"t"}, Keys: []string{fmt.Sprintf("t:%d", i)}}}})
		if i == 500 {
			holder = c
		}
	}
	s := &Ticket{Start: 10, Changes: true, Tables: []string{"t"}, Keys: []string{"t:500"}}
	var got []*Cursor
	g.locks.candidates(s, func(c *Cursor) bool { got = append(got, c); return true })
	if len(got) != 1 || got[0] != holder {
		t.Fatalf("candidates for one row of 1,000 locked: %d, want the 1 that holds it", len(got))
	}
	if n := len(g.locks.holding); n != 1000 {
		t.Fatalf("holding %d, want 1000", n)
	}
	for _, c := range g.locks.byKey["t:500"] {
		g.Publish(c, nil)
	}
	if n := len(g.locks.holding); n != 999 || len(g.locks.byKey["t:500"]) != 0 || len(g.locks.byTable["t"]) != 999 {
		t.Fatalf("after one set ended: holding %d, under its key %d, under its table %d; want 999, 0, 999",
			len(g.locks.holding), len(g.locks.byKey["t:500"]), len(g.locks.byTable["t"]))
	}
}

// A waiter that holds a transaction looks for a stall behind its locks
// at 2 ms, then less and less often while it finds none: over 1 s of
// waiting for a statement that is not stuck, 20 looks (2, 4, 8, …, 64 ms
// apart), where it used to look every 2 ms (500 looks).
func TestGateWaiterLooksLessOftenWhileNothingIsStuck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := NewGate(10*time.Second, time.Second)
		s := g.Register(100, 110, &Cursor{}, true, []string{"t"}, false)
		s.session.Load().At(s)
		g.Sent(s, time.Hour) // in flight, captured as long: never stuck within the test
		waiter := g.Register(200, 210, nil, true, []string{"u"}, false)
		h := &Cursor{}
		g.Publish(h, &LockSet{Stmts: []LockStmt{{End: 205, Tables: []string{"u"}}}})
		before := g.pass
		res, _ := g.Wait(context.Background(), waiter, waiter.Start, 1, time.Second, h)
		if res != TimedOut {
			t.Fatalf("Wait = %v, want TimedOut at its limit", res)
		}
		if looks := g.pass - before; looks != 20 {
			t.Fatalf("%d looks in 1 s of waiting, want 20", looks)
		}
	})
}
