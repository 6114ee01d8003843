package order

import (
	"context"
	"fmt"
	"maps"
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
	// Sets change, and some end: the index follows. A transaction's next
	// set is its last with statements appended to the same array, or,
	// rerun, a prefix of it; one statement may name what another does.
	grow := func(ls *LockSet) *LockSet {
		more := randomSet()
		return &LockSet{Stmts: append(ls.Stmts, more.Stmts...)}
	}
	for i, c := range cursors {
		switch i % 6 {
		case 0:
			g.Publish(c, randomSet())
		case 1:
			g.Publish(c, nil)
		case 2, 3:
			ls := c.locks.Load()
			for range 1 + rng.IntN(4) {
				ls = grow(ls)
				g.Publish(c, ls)
			}
			if i%6 == 3 {
				g.Publish(c, &LockSet{Stmts: ls.Stmts[:1+rng.IntN(len(ls.Stmts))]})
			}
		case 4:
			ls := grow(c.locks.Load())
			g.Publish(c, ls)
			g.Publish(c, &LockSet{Stmts: ls.Stmts[:1]})
			g.Publish(c, grow(&LockSet{Stmts: slices.Clip(ls.Stmts[:1])}))
		}
	}
	// What the index holds is what filing every current set anew gives
	// (a set replaced files only the lists that differ).
	fresh := newLockIndex()
	for _, c := range cursors {
		fresh.set(c, nil, c.locks.Load())
	}
	if got, want := indexHolds(&g.locks), indexHolds(&fresh); !maps.EqualFunc(got, want, func(a, b map[*Cursor]int) bool { return maps.Equal(a, b) }) {
		t.Fatalf("the index holds %d lists, filing anew %d: they differ", len(got), len(want))
	}
	if !maps.EqualFunc(g.locks.filed, fresh.filed, func(a, b map[entry]int) bool { return maps.Equal(a, b) }) {
		t.Fatalf("the index counts %d sets' names, filing anew %d: they differ", len(g.locks.filed), len(fresh.filed))
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
	if n := len(g.locks.holding.list); n != 1000 {
		t.Fatalf("holding %d, want 1000", n)
	}
	for _, c := range list(g.locks.byKey, "t:500") {
		g.Publish(c, nil)
	}
	if n := len(g.locks.holding.list); n != 999 || len(list(g.locks.byKey, "t:500")) != 0 || len(list(g.locks.byTable, "t")) != 999 {
		t.Fatalf("after one set ended: holding %d, under its key %d, under its table %d; want 999, 0, 999",
			len(g.locks.holding.list), len(list(g.locks.byKey, "t:500")), len(list(g.locks.byTable, "t")))
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

// indexHolds is what each list of ix holds (each cursor with how many
// times), checking that a list that keeps its members' places has them
// right.
func indexHolds(ix *lockIndex) map[string]map[*Cursor]int {
	out := map[string]map[*Cursor]int{}
	add := func(name string, l *members[*Cursor]) {
		m := map[*Cursor]int{}
		for i, c := range l.list {
			m[c]++
			if l.at != nil && l.at[c] != i {
				panic(fmt.Sprintf("%s: a member's place is %d, kept as %d", name, i, l.at[c]))
			}
		}
		if len(m) > 0 {
			out[name] = m
		}
	}
	for i, mp := range []map[string]*members[*Cursor]{ix.byKey, ix.keyless, ix.byTable} {
		for k, l := range mp {
			add(fmt.Sprint(i, k), l)
		}
	}
	add("any", &ix.anyT)
	add("holding", &ix.holding)
	return out
}

// members takes any member out, in any order, whether it keeps its
// members' places in a map (past membersMapped) or not.
func TestMembersTakeOutAnyOne(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{3, membersMapped, membersMapped + 1, 200} {
		var l members[int]
		want := map[int]bool{}
		for i := range n {
			l.add(i)
			want[i] = true
		}
		for _, x := range append(rng.Perm(n), n+5) { // and one never added
			l.remove(x)
			delete(want, x)
			if len(l.list) != len(want) {
				t.Fatalf("n %d: %d left, want %d", n, len(l.list), len(want))
			}
			for i, y := range l.list {
				if !want[y] || l.at != nil && l.at[y] != i {
					t.Fatalf("n %d: after taking out %d, list %v, places %v", n, x, l.list, l.at)
				}
			}
		}
		if l.at != nil {
			t.Fatalf("n %d: an empty list keeps a map of %d places", n, len(l.at))
		}
	}
}

// A waiter in a transaction looks for statements stuck behind its locks
// only when one can be: at 1,000 sessions, each with a statement in
// flight on rows of its own, the waiter (its locks on other rows) does
// not walk them; it walks, and finds the statement, once one in flight
// is on a row it holds, or has been in flight for the in-flight bound.
func TestStallCheckWalksOnlyWhenSomethingCanBeStuck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := NewGate(50*time.Millisecond, time.Minute)
		var inflight []*Ticket
		for s := range 1000 {
			p := g.Add(&Ticket{Start: int64(s), End: int64(s) + 100, Changes: true, Tables: []string{"t"}, Keys: []string{fmt.Sprintf("t:%d", s)}}, &Cursor{})
			p.session.Load().At(p)
			g.Sent(p, time.Millisecond)
			inflight = append(inflight, p)
		}
		time.Sleep(5 * time.Millisecond) // every one past lockBound
		waiter := g.Add(&Ticket{Start: 2000, End: 2010, Changes: true, Tables: []string{"t"}, Keys: []string{"t:5000"}}, &Cursor{})
		h := waiter.session.Load()
		g.Publish(h, &LockSet{Stmts: []LockStmt{{End: 500, Tables: []string{"t"}, Keys: []string{"t:5000"}}}})
		look := func() []*Ticket {
			g.mu.Lock()
			defer g.mu.Unlock()
			first, stuck, _, _, _ := g.blockerLocked(g.lane(waiter), waiter, waiter.Start, 1, h)
			if first != inflight[0] {
				t.Fatalf("first blocker %v, want the earliest", first)
			}
			return stuck
		}
		if stuck := look(); len(stuck) != 0 || g.walks != 0 {
			t.Fatalf("nothing can be stuck: %d stuck, %d walks; want 0, 0", len(stuck), g.walks)
		}
		// One in flight on a row the waiter holds (its lock taken by a
		// statement that ended after that one started): stuck behind it.
		g.Publish(h, &LockSet{Stmts: []LockStmt{{End: 750, Tables: []string{"t"}, Keys: []string{"t:5000", "t:700"}}}})
		if stuck := look(); len(stuck) != 1 || stuck[0] != inflight[700] || g.walks != 1 {
			t.Fatalf("one on its row: %d stuck (%v), %d walks; want that one, 1 walk", len(stuck), stuck, g.walks)
		}
		// Done: nothing can be stuck again.
		g.Finish(inflight[700])
		if stuck := look(); len(stuck) != 0 || g.walks != 1 {
			t.Fatalf("after it is done: %d stuck, %d walks; want 0, 1", len(stuck), g.walks)
		}
		// At 50 ms in flight, the in-flight bound, the others are all
		// stuck (whatever the locks); at 45 ms none is.
		time.Sleep(40 * time.Millisecond)
		if stuck := look(); len(stuck) != 0 || g.walks != 1 {
			t.Fatalf("at 45 ms: %d stuck, %d walks; want 0, 1", len(stuck), g.walks)
		}
		time.Sleep(5 * time.Millisecond)
		if stuck := look(); len(stuck) != 999 || g.walks != 2 {
			t.Fatalf("at the in-flight bound: %d stuck, %d walks; want 999, 2", len(stuck), g.walks)
		}
	})
}

// Whatever the gate holds, a stall check that skips its walk
// (mayStallLocked) finds what one that always walks finds: the same
// earliest blocker and the same stuck statements, at every instant. Random
// sessions, tickets (rows, tables, any table), statements in flight for
// random times, tickets waiting here for others, and transactions'
// locks; the clock moves on by random steps, so that the scan for long
// statements in flight runs at every phase of their age.
func TestStallCheckSkipsOnlyWalksThatFindNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const inflightMin = 40 * time.Millisecond
		rng := rand.New(rand.NewPCG(5, 6))
		tables := []string{"a", "b", "c"}
		key := func(tb string) string { return fmt.Sprintf("%s:%d", tb, rng.IntN(6)) }
		randomSet := func() *LockSet {
			ls := &LockSet{}
			for range 1 + rng.IntN(3) {
				p := LockStmt{End: int64(rng.IntN(1000)), Tables: []string{tables[rng.IntN(3)]}}
				switch rng.IntN(16) {
				case 0:
					p.Any = true
				case 1: // names no rows
				default:
					p.Keys = []string{key(p.Tables[0])}
				}
				ls.Stmts = append(ls.Stmts, p)
			}
			return ls
		}
		walked, skipped, stuckSeen := 0, 0, 0
		for round := range 80 {
			g := NewGate(inflightMin, time.Minute)
			var cursors []*Cursor
			var tickets []*Ticket
			for range 30 {
				c := &Cursor{}
				cursors = append(cursors, c)
				if rng.IntN(3) > 0 {
					g.Publish(c, randomSet())
				}
			}
			add := func(c *Cursor, start int64) *Ticket {
				tb := tables[rng.IntN(3)]
				x := &Ticket{Start: start, End: start + int64(1+rng.IntN(200)), Changes: rng.IntN(4) > 0, Tables: []string{tb}, AnyTable: rng.IntN(15) == 0, Unclocked: rng.IntN(20) == 0}
				if rng.IntN(3) > 0 {
					x.Keys = []string{key(tb)}
				}
				g.Add(x, c)
				tickets = append(tickets, x)
				return x
			}
			for i := range 120 {
				c := cursors[rng.IntN(len(cursors))]
				x := add(c, int64(i*8))
				switch rng.IntN(5) {
				case 0:
					c.At(x)
					g.Sent(x, time.Duration(rng.IntN(3))*time.Millisecond)
				case 1:
					c.At(x)
					if len(tickets) > 1 {
						x.waiting.Store(tickets[rng.IntN(len(tickets)-1)])
					}
				}
			}
			for step := range 12 {
				time.Sleep(time.Duration(rng.IntN(int(inflightMin / 3))))
				// Some finish, some are sent.
				for range 6 {
					x := tickets[rng.IntN(len(tickets))]
					switch {
					case x.done:
					case x.sent.Load() != 0 && rng.IntN(2) == 0:
						g.Finish(x)
					case x.sent.Load() == 0:
						x.session.Load().At(x)
						x.waiting.Store(nil)
						g.Sent(x, time.Millisecond)
					}
				}
				if rng.IntN(4) == 0 {
					g.Publish(cursors[rng.IntN(len(cursors))], randomSet())
				}
				h := cursors[rng.IntN(len(cursors))]
				waiter := add(h, int64(1000+step))
				look := func(always bool) (*Ticket, []*Ticket, bool) {
					g.mu.Lock()
					defer g.mu.Unlock()
					g.walkAlways = always
					walks := g.walks
					first, stuck, cyclic, _, _ := g.blockerLocked(g.lane(waiter), waiter, waiter.Start, 1+rng.IntN(2)*0, h)
					if !always {
						if g.walks > walks {
							walked++
						} else {
							skipped++
						}
					}
					return first, stuck, cyclic
				}
				f1, s1, c1 := look(true)
				f2, s2, c2 := look(false)
				if f1 != f2 || !slices.Equal(s1, s2) || c2 && !c1 {
					t.Fatalf("round %d step %d: always walking gives first %p, stuck %v, cyclic %v; skipping: %p, %v, %v", round, step, f1, s1, c1, f2, s2, c2)
				}
				stuckSeen += len(s1)
				g.Finish(waiter)
			}
		}
		// The case must be exercised both ways, and find stalls.
		if walked < 100 || skipped < 100 || stuckSeen < 100 {
			t.Fatalf("walked %d, skipped %d, stuck found %d: the random gates do not test both paths", walked, skipped, stuckSeen)
		}
		t.Logf("walked %d, skipped %d, stuck found %d", walked, skipped, stuckSeen)
	})
}
