package compare

import (
	"slices"
	"sort"
	"sync"
)

// Gaps indexes, per table, the writes of the capture that replay could
// not run (LOAD DATA LOCAL, whose file was on the client; a statement
// truncated or masked in the capture; an execute whose long data was
// cut), and the moments the table started over (CREATE, DROP, TRUNCATE).
// From a gap on, until the table starts over, the targets' data in that
// table is not the capture's: a statement reading it may differ from its
// captured response although no engine differs. Such a difference is
// counted apart, as ambiguous for the reason "not-replayed", in the
// comparison with the capture (the targets all lack the same writes, so
// comparisons between targets are unaffected).
// Safe for concurrent use.
type Gaps struct {
	mu      sync.Mutex
	byTable map[string][]gapEvent
	n       int
}

// Gap is one write replay could not run: at Start (the capture's clock,
// ns), by Session, on Table.
type Gap struct {
	Session uint64
	Start   int64
	Table   string
	// Failed: the write ran and failed on this side, where the capture's
	// succeeded (a shadow's engine rolled its transaction back).
	Failed bool
}

type gapEvent struct {
	at      int64
	session uint64
	reset   bool // the table started over here
	failed  bool
}

// NewGaps returns an empty index.
func NewGaps() *Gaps { return &Gaps{byTable: map[string][]gapEvent{}} }

// Len is the number of gaps recorded.
func (g *Gaps) Len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.n
}

// Add records a write by session at start to tables that replay skips.
// AnyTable stands for every table: records lost from the capture (a
// crash, a damaged file), by no known session (0), which may have
// written anything.
func (g *Gaps) Add(session uint64, start int64, tables []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, t := range tables {
		g.insert(t, gapEvent{at: start, session: session})
		g.n++
	}
}

// AddFailed records writes by session, ending at end, that failed on the
// side compared while the capture's succeeded: the side's data in tables
// differs from the capture's from then on.
func (g *Gaps) AddFailed(session uint64, end int64, tables []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, t := range tables {
		g.insert(t, gapEvent{at: end, session: session, failed: true})
		g.n++
	}
}

// Reset records that tables started over at start: created, dropped or
// truncated, so earlier gaps no longer matter for them.
func (g *Gaps) Reset(start int64, tables []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, t := range tables {
		if len(g.byTable[TableKey(t)]) > 0 { // nothing to forget on a table without gaps
			g.insert(t, gapEvent{at: start, reset: true})
		}
	}
}

func (g *Gaps) insert(t string, e gapEvent) {
	t = TableKey(t)
	evs := g.byTable[t]
	i := sort.Search(len(evs), func(i int) bool { return evs[i].at > e.at })
	evs = append(evs, gapEvent{})
	copy(evs[i+1:], evs[i:])
	evs[i] = e
	g.byTable[t] = evs
}

// Before returns a gap on one of tables, before the moment to, that no
// reset of that table followed before to.
func (g *Gaps) Before(to int64, tables []string) (Gap, bool) {
	if g == nil {
		return Gap{}, false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.byTable[AnyTable]) > 0 && !slices.Contains(tables, AnyTable) {
		tables = append(slices.Clip(tables), AnyTable) // records lost from the capture: they may have written any table
	}
	for _, t := range tables {
		evs := g.byTable[TableKey(t)]
		i := sort.Search(len(evs), func(i int) bool { return evs[i].at >= to })
		if i > 0 && !evs[i-1].reset {
			return Gap{Session: evs[i-1].session, Start: evs[i-1].at, Table: t, Failed: evs[i-1].failed}, true
		}
	}
	return Gap{}, false
}
