package order

import "slices"

// lockIndex finds, for a statement in flight, the transactions whose
// locks may block it (LockSet.mayBlock) without looking at the others: at
// a thousand sessions a search for a lock cycle that walked every
// transaction holding locks, for every waiter, every few milliseconds,
// was all a replay did. A transaction's set is filed under the rows its
// statements name, the tables of those that name none, every table it
// touches, and "any" for those that may touch any; a statement's
// candidates are then those filed under its rows (or, naming none, its
// tables), the row-less ones on its tables, and the "any" ones. Kept
// under the gate's lock.
type lockIndex struct {
	byKey   map[string]*members[*Cursor] // keys of statements that name their rows
	keyless map[string]*members[*Cursor] // tables of statements that name none
	byTable map[string]*members[*Cursor] // tables of every statement
	anyT    members[*Cursor]             // sets with a statement that may touch any table
	holding members[*Cursor]             // every cursor with a set
	// filed counts, for each cursor with a set, the statements of its
	// set that file it in each list (set).
	filed map[*Cursor]map[entry]int
}

func newLockIndex() lockIndex {
	return lockIndex{byKey: map[string]*members[*Cursor]{}, keyless: map[string]*members[*Cursor]{}, byTable: map[string]*members[*Cursor]{}, filed: map[*Cursor]map[entry]int{}}
}

// members is a list that one member is taken out of in O(1) however
// long it is: past a few members, each one's place is kept in a map. A
// transaction's set is filed under every table it touches, so at a
// thousand sessions on a few tables a list holds hundreds, and each of
// its statements would otherwise scan one to file its new set.
type members[T comparable] struct {
	list []T
	at   map[T]int
}

// membersMapped is the length from which a list keeps its members' places.
const membersMapped = 16

func (l *members[T]) add(x T) {
	l.list = append(l.list, x)
	switch {
	case l.at != nil:
		l.at[x] = len(l.list) - 1
	case len(l.list) > membersMapped:
		l.at = make(map[T]int, len(l.list))
		for i, y := range l.list {
			l.at[y] = i
		}
	}
}

// remove takes x out (if it is in), moving the last member to its place.
func (l *members[T]) remove(x T) {
	i, ok := -1, false
	if l.at != nil {
		if i, ok = l.at[x]; ok {
			delete(l.at, x)
		}
	} else {
		i = slices.Index(l.list, x)
		ok = i >= 0
	}
	if !ok {
		return
	}
	last := len(l.list) - 1
	if i != last {
		l.list[i] = l.list[last]
		if l.at != nil {
			l.at[l.list[i]] = i
		}
	}
	var zero T
	l.list[last] = zero
	l.list = l.list[:last]
	if len(l.list) == 0 {
		l.at = nil
	}
}

// file adds x to m's list under k, made if needed.
func file[T comparable](m map[string]*members[T], k string, x T) {
	l := m[k]
	if l == nil {
		l = &members[T]{}
		m[k] = l
	}
	l.add(x)
}

// unfile takes x out of m's list under k, dropped once empty.
func unfile[T comparable](m map[string]*members[T], k string, x T) {
	if l := m[k]; l != nil {
		l.remove(x)
		if len(l.list) == 0 {
			delete(m, k)
		}
	}
}

// list is m's list under k (nil if none).
func list[T comparable](m map[string]*members[T], k string) []T {
	if l := m[k]; l != nil {
		return l.list
	}
	return nil
}

// entry names a list of the index: a map (0 byKey, 1 keyless, 2 byTable)
// and a name in it, or 3 (anyT).
type entry struct {
	in int
	k  string
}

// stmtEntries calls f with each list statement p files its set in (a
// name p gives twice, twice).
func stmtEntries(p *LockStmt, f func(entry)) {
	if p.Any {
		f(entry{in: 3})
	}
	for _, k := range p.Keys {
		f(entry{0, k})
	}
	for _, t := range p.Tables {
		if p.Keys == nil {
			f(entry{1, t})
		}
		f(entry{2, t})
	}
}

// shared is how many leading statements two sets have in common because
// they are the same statements: a worker publishes its transaction's next
// set by appending to its last one's (LockSet is immutable, so what both
// hold of the same array is the same).
func shared(a, b *LockSet) int {
	if a == nil || b == nil || len(a.Stmts) == 0 || len(b.Stmts) == 0 || &a.Stmts[0] != &b.Stmts[0] {
		return 0
	}
	return min(len(a.Stmts), len(b.Stmts))
}

// set files c under ls in place of what it was filed under (old). Each
// list c is in counts the statements of its set that put it there, so
// that a set that is its last one and a statement more costs that
// statement's names: a transaction of 4,000 updates, which compared its
// whole set's names with each other at each statement, replayed 31
// statements a second.
func (ix *lockIndex) set(c *Cursor, old, ls *LockSet) {
	k := shared(old, ls)
	n := ix.filed[c]
	if n == nil && ls != nil {
		n = map[entry]int{}
		ix.filed[c] = n
	}
	if old != nil {
		for i := k; i < len(old.Stmts); i++ {
			stmtEntries(&old.Stmts[i], func(e entry) {
				if n[e]--; n[e] > 0 {
					return
				}
				delete(n, e)
				switch e.in {
				case 3:
					ix.anyT.remove(c)
				default:
					unfile(ix.maps(e.in), e.k, c)
				}
			})
		}
	}
	if ls != nil {
		for i := k; i < len(ls.Stmts); i++ {
			stmtEntries(&ls.Stmts[i], func(e entry) {
				if n[e]++; n[e] > 1 {
					return
				}
				switch e.in {
				case 3:
					ix.anyT.add(c)
				default:
					file(ix.maps(e.in), e.k, c)
				}
			})
		}
	}
	switch {
	case old == nil && ls != nil:
		ix.holding.add(c)
	case old != nil && ls == nil:
		ix.holding.remove(c)
		delete(ix.filed, c)
	}
}

// maps is the map an entry names (in 0, 1 or 2).
func (ix *lockIndex) maps(in int) map[string]*members[*Cursor] {
	return [...]map[string]*members[*Cursor]{ix.byKey, ix.keyless, ix.byTable}[in]
}

// candidates calls f with each cursor whose set may block s (a superset:
// f checks mayBlock), until f returns false. A cursor may come twice.
func (ix *lockIndex) candidates(s *Ticket, f func(c *Cursor) bool) {
	if !s.Changes {
		return // a plain read takes no row locks
	}
	each := func(l []*Cursor) bool {
		for _, c := range l {
			if !f(c) {
				return false
			}
		}
		return true
	}
	if s.AnyTable {
		each(ix.holding.list)
		return
	}
	if !each(ix.anyT.list) {
		return
	}
	if s.Keys != nil {
		for _, k := range s.Keys {
			if !each(list(ix.byKey, k)) {
				return
			}
		}
		for _, t := range s.Tables {
			if !each(list(ix.keyless, t)) {
				return
			}
		}
		return
	}
	for _, t := range s.Tables {
		if !each(list(ix.byTable, t)) {
			return
		}
	}
}

// changeIndex files the tickets that change what others see and have been
// sent (not done: in flight, or a unit between its statements) by what a
// lock may block them on (LockSet.mayBlock): those that name their rows
// under each row, those that name none under each table, and those that
// may touch any table in a list. A waiter finds the statements in flight
// its own locks may block by asking for its rows, without walking the
// rest (Gate.mayStallLocked). Kept under Gate.fmu: a ticket is filed when
// it is first sent (again after a Reopen) and leaves when it is done.
// Filing the pending ones instead, registered ahead of the replay, made
// each look pass the sessions' queued tickets: at a thousand sessions a
// third of the gate's time, in cache misses.
type changeIndex struct {
	byKey   map[string]*members[*Ticket]
	keyless map[string]*members[*Ticket]
	anyT    members[*Ticket]
}

func newChangeIndex() changeIndex {
	return changeIndex{byKey: map[string]*members[*Ticket]{}, keyless: map[string]*members[*Ticket]{}}
}

// lists calls f with each list t is filed in, once each (m nil: the
// index's own list).
func (ix *changeIndex) lists(t *Ticket, f func(m map[string]*members[*Ticket], k string)) {
	names := t.Tables
	m := ix.keyless
	switch {
	case t.AnyTable:
		f(nil, "")
		return
	case t.Keys != nil:
		names, m = t.Keys, ix.byKey
	}
	for i, k := range names {
		if !slices.Contains(names[:i], k) {
			f(m, k)
		}
	}
}

// add files t (a change, not filed yet).
func (ix *changeIndex) add(t *Ticket) {
	if !t.Changes || t.filed {
		return
	}
	t.filed = true
	ix.lists(t, func(m map[string]*members[*Ticket], k string) {
		if m == nil {
			ix.anyT.add(t)
		} else {
			file(m, k, t)
		}
	})
}

// remove takes t out of every list it is filed in.
func (ix *changeIndex) remove(t *Ticket) {
	if !t.filed {
		return
	}
	t.filed = false
	ix.lists(t, func(m map[string]*members[*Ticket], k string) {
		if m == nil {
			ix.anyT.remove(t)
		} else {
			unfile(m, k, t)
		}
	})
}

// inflightMayBlock reports whether a statement in flight (sent, not done)
// may be blocked by ls's locks. A set with a statement that may touch any
// table, or that names no rows (it may block every change on its tables,
// those that name rows too), counts as one that may: the caller then looks
// at everything, as it would without the index.
func (ix *changeIndex) inflightMayBlock(ls *LockSet) bool {
	if ls == nil {
		return false
	}
	for _, p := range ls.Stmts {
		if p.Any || p.Keys == nil {
			return true
		}
	}
	check := func(l []*Ticket) bool {
		for _, x := range l {
			if !x.done && x.sent.Load() != 0 && ls.mayBlock(x) {
				return true
			}
		}
		return false
	}
	if check(ix.anyT.list) {
		return true
	}
	// A transaction's statements lock rows of the same few tables: each
	// table's changes that name no rows are looked at once.
	var seen [8]string
	tables := seen[:0]
	for _, p := range ls.Stmts {
		for _, k := range p.Keys {
			if check(list(ix.byKey, k)) {
				return true
			}
		}
		if len(ix.keyless) == 0 {
			continue
		}
		for _, tb := range p.Tables {
			if slices.Contains(tables, tb) {
				continue
			}
			tables = append(tables, tb)
			if check(list(ix.keyless, tb)) {
				return true
			}
		}
	}
	return false
}
