package order

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
	byKey   map[string][]*Cursor // keys of statements that name their rows
	keyless map[string][]*Cursor // tables of statements that name none
	byTable map[string][]*Cursor // tables of every statement
	anyT    []*Cursor            // sets with a statement that may touch any table
	holding []*Cursor            // every cursor with a set
}

func newLockIndex() lockIndex {
	return lockIndex{byKey: map[string][]*Cursor{}, keyless: map[string][]*Cursor{}, byTable: map[string][]*Cursor{}}
}

// entries calls f with each list c's set ls is filed in, once each.
func (ix *lockIndex) entries(ls *LockSet, f func(m map[string][]*Cursor, k string, list *[]*Cursor)) {
	var seen [3][]string // per map, the names already given
	once := func(i int, m map[string][]*Cursor, k string) {
		for _, s := range seen[i] {
			if s == k {
				return
			}
		}
		seen[i] = append(seen[i], k)
		l := m[k]
		f(m, k, &l)
	}
	anyT := false
	for _, p := range ls.Stmts {
		anyT = anyT || p.Any
		for _, k := range p.Keys {
			once(0, ix.byKey, k)
		}
		for _, t := range p.Tables {
			if p.Keys == nil {
				once(1, ix.keyless, t)
			}
			once(2, ix.byTable, t)
		}
	}
	if anyT {
		f(nil, "", &ix.anyT)
	}
	f(nil, "", &ix.holding)
}

// set files c under ls in place of what it was filed under (old).
func (ix *lockIndex) set(c *Cursor, old, ls *LockSet) {
	if old != nil {
		ix.entries(old, func(m map[string][]*Cursor, k string, list *[]*Cursor) {
			l := *list
			for i, x := range l {
				if x == c {
					l[i] = l[len(l)-1]
					l[len(l)-1] = nil
					l = l[:len(l)-1]
					break
				}
			}
			switch {
			case m == nil:
				*list = l
			case len(l) == 0:
				delete(m, k)
			default:
				m[k] = l
			}
		})
	}
	if ls != nil {
		ix.entries(ls, func(m map[string][]*Cursor, k string, list *[]*Cursor) {
			if m == nil {
				*list = append(*list, c)
			} else {
				m[k] = append(*list, c)
			}
		})
	}
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
		each(ix.holding)
		return
	}
	if !each(ix.anyT) {
		return
	}
	if s.Keys != nil {
		for _, k := range s.Keys {
			if !each(ix.byKey[k]) {
				return
			}
		}
		for _, t := range s.Tables {
			if !each(ix.keyless[t]) {
				return
			}
		}
		return
	}
	for _, t := range s.Tables {
		if !each(ix.byTable[t]) {
			return
		}
	}
}
