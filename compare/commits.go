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
	// forgotten: commits that ended before it were let go (Forget); an
	// interval that begins before it cannot be told apart.
	forgotten int64
	// judged, once Remember made it, keeps what OverlappingFor found for
	// a statement (by outcome key) while its commits were kept, to give
	// it again once Forget let them go: a followed capture's final
	// comparison then finds what its live verdict found, at most
	// maxJudged statements (those that differed: only they are judged).
	judged map[judgedKey]Commit
}

type judgedKey struct {
	key     uint64
	deleted bool
}

// maxJudged bounds Commits.judged: about 64 bytes each.
const maxJudged = 1 << 18

// Forgotten is the Table of the Commit that Overlapping returns for an
// interval that began before the commits Forget let go: whether one
// overlapped it is not known any more.
const Forgotten = "(commits no longer kept)"

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
		l := cs.byTable[TableKey(t)]
		if l == nil {
			l = &commitList{sorted: true}
			cs.byTable[TableKey(t)] = l
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

// Forget lets go of the commits that ended before before: a followed
// capture (a live shadow) is indexed for as long as it runs, and would
// otherwise hold every commit it ever saw, 32 bytes per commit and table.
// An interval that begins before the latest such bound is not looked up
// any more: Overlapping reports it as Forgotten. It returns how many
// entries went.
func (cs *Commits) Forget(before int64) int {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if before <= cs.forgotten {
		return 0
	}
	cs.forgotten = before
	gone := cs.any.forget(before)
	for t, l := range cs.byTable {
		gone += l.forget(before)
		if len(l.c) == 0 {
			delete(cs.byTable, t)
		}
	}
	cs.n -= gone
	return gone
}

// Forgotten is the bound of the latest Forget (0: none).
func (cs *Commits) Forgotten() int64 {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.forgotten
}

// forget drops the list's commits that ended before before, keeping the
// others in their order; a list much larger than what it keeps is
// reallocated.
func (l *commitList) forget(before int64) int {
	kept := l.c[:0]
	for _, c := range l.c {
		if c.end >= before {
			kept = append(kept, c)
		}
	}
	gone := len(l.c) - len(kept)
	clear(l.c[len(kept):])
	if cap(kept) > 64 && cap(kept) >= 4*len(kept) {
		kept = append([]commit(nil), kept...)
	}
	l.c = kept
	l.maxSpan = 0
	for _, c := range l.c {
		l.maxSpan = max(l.maxSpan, c.end-c.start)
	}
	return gone
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
	if from < cs.forgotten && len(tables) > 0 {
		return Commit{Table: Forgotten}, true
	}
	return cs.overlappingLocked(session, from, to, tables, deletedOnly)
}

// Remember makes OverlappingFor keep its answers for after a Forget (a
// followed capture, whose run compares again at its end).
func (cs *Commits) Remember() {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.judged == nil {
		cs.judged = map[judgedKey]Commit{}
	}
}

// OverlappingFor is Overlapping (deleted: OverlappingDelete) for the
// statement of outcome key. Once Remember was called it keeps the answer,
// and for an interval that begins before the commits Forget let go, gives
// the answer it kept (a commit still kept that overlaps it comes first);
// an interval it never judged is Forgotten.
func (cs *Commits) OverlappingFor(key uint64, deleted bool, session uint64, from, to int64, tables []string) (Commit, bool) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	k := judgedKey{key, deleted}
	c, hit := cs.overlappingLocked(session, from, to, tables, deleted)
	if len(tables) == 0 || from >= cs.forgotten {
		if cs.judged != nil {
			if _, seen := cs.judged[k]; seen || len(cs.judged) < maxJudged {
				cs.judged[k] = c // Commit{}: judged, none overlapped
			}
		}
		return c, hit
	}
	if hit {
		return c, true // a commit still kept
	}
	if j, ok := cs.judged[k]; ok {
		return j, j != (Commit{})
	}
	return Commit{Table: Forgotten}, true
}

func (cs *Commits) overlappingLocked(session uint64, from, to int64, tables []string, deletedOnly bool) (Commit, bool) {
	for _, t := range tables {
		if l := cs.byTable[TableKey(t)]; l != nil {
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
