package compare

import (
	"cmp"
	"slices"
	"sort"
	"sync"
)

// Commits indexes, per table, the moments in a capture when a session's
// writes became visible to others: each COMMIT (with the tables its
// transaction wrote), each write outside a transaction, each implicit
// commit. A statement whose captured interval overlaps such a moment of
// another session, on one of its tables, may have seen the writes or not:
// the capture does not say which, so replay cannot reproduce it exactly.
// Safe for concurrent use; Add may go on while lookups run (live shadows).
type Commits struct {
	mu      sync.Mutex
	byTable map[string]*commitList
	// any holds commits that may have written any table (a CALL, a
	// statement the analysis could not read).
	any commitList
	n   int
}

// Commit is one moment writes became visible: [Start, End] in the
// capture's clock (ns), by Session, on Table ("" for any table).
type Commit struct {
	Session    uint64
	Start, End int64
	Table      string
}

type commit struct {
	session    uint64
	start, end int64
	// deleted: the transaction deleted rows of the table (DELETE,
	// REPLACE), or may have (a commit of unknown writes).
	deleted bool
}

type commitList struct {
	c       []commit
	sorted  bool
	maxSpan int64
}

// NewCommits returns an empty index.
func NewCommits() *Commits { return &Commits{byTable: map[string]*commitList{}} }

// Len is the number of (commit, table) entries.
func (cs *Commits) Len() int {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.n
}

// Add records a commit by session over [start, end] of the given tables
// (schema-qualified); unknown marks one that may have written any table.
func (cs *Commits) Add(session uint64, start, end int64, tables []string, unknown bool) {
	cs.AddDeleting(session, start, end, tables, nil, unknown)
}

// AddDeleting is Add for a transaction that deleted rows of the tables
// in deleted (a subset of tables).
func (cs *Commits) AddDeleting(session uint64, start, end int64, tables, deleted []string, unknown bool) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if unknown {
		cs.any.add(commit{session, start, end, true})
		cs.n++
	}
	for _, t := range tables {
		l := cs.byTable[t]
		if l == nil {
			l = &commitList{sorted: true}
			cs.byTable[t] = l
		}
		l.add(commit{session, start, end, slices.Contains(deleted, t)})
		cs.n++
	}
}

func (l *commitList) add(c commit) {
	if n := len(l.c); n > 0 && c.start < l.c[n-1].start {
		l.sorted = false
	}
	if len(l.c) == 0 {
		l.sorted = true
	}
	l.c = append(l.c, c)
	l.maxSpan = max(l.maxSpan, c.end-c.start)
}

// overlapping finds a commit of another session overlapping [from, to]
// (with deletedOnly, one that deleted rows).
func (l *commitList) overlapping(session uint64, from, to int64, deletedOnly bool) (commit, bool) {
	if !l.sorted {
		slices.SortFunc(l.c, func(a, b commit) int { return cmp.Compare(a.start, b.start) })
		l.sorted = true
	}
	// Commits starting after to cannot overlap; those starting before
	// from - maxSpan end before from.
	i := sort.Search(len(l.c), func(i int) bool { return l.c[i].start > to })
	for i--; i >= 0 && l.c[i].start >= from-l.maxSpan; i-- {
		if c := l.c[i]; c.end >= from && c.session != session && (c.deleted || !deletedOnly) {
			return c, true
		}
	}
	return commit{}, false
}

// Overlapping returns a commit of a session other than session that
// overlapped [from, to] on one of tables, and whether there is one.
func (cs *Commits) Overlapping(session uint64, from, to int64, tables []string) (Commit, bool) {
	return cs.overlapping(session, from, to, tables, false)
}

// OverlappingDelete is Overlapping for commits of transactions that
// deleted rows of the table (or may have).
func (cs *Commits) OverlappingDelete(session uint64, from, to int64, tables []string) (Commit, bool) {
	return cs.overlapping(session, from, to, tables, true)
}

func (cs *Commits) overlapping(session uint64, from, to int64, tables []string, deletedOnly bool) (Commit, bool) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for _, t := range tables {
		if l := cs.byTable[t]; l != nil {
			if c, ok := l.overlapping(session, from, to, deletedOnly); ok {
				return Commit{c.session, c.start, c.end, t}, true
			}
		}
	}
	if len(tables) > 0 {
		if c, ok := cs.any.overlapping(session, from, to, deletedOnly); ok {
			return Commit{c.session, c.start, c.end, "(tables it may have written)"}, true
		}
	}
	return Commit{}, false
}
