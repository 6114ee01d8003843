package compare

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/tandemdb/tandem/store"
)

// Failures indexes, per table, the transactions that failed for good on a
// side (a deadlock or lock wait timeout on every retry, or the connection
// lost in the middle): rolled back there, so from then on that side's
// tables they wrote lack their writes, and a later statement on one of
// them can differ although no engine does — the literals its client
// computed from what it read no longer fit. Such a difference is counted
// apart (ReasonFailedTrx), naming the transaction; so is a table that
// differs at the end (Explain). The transaction's own statements are not
// explained by it: the failure itself is the engine's verdict.
//
// It indexes alike the changes replay sent out of the capture's order
// (store.Reorder, ReasonReplayOrder): ahead of a conflicting change, they
// leave other data on that side from then on.
type Failures struct {
	byTable map[string][]failure
}

type failure struct {
	at          int64
	session     uint64
	first, last uint64 // outcome keys of its first and last record
	why         string
	reason      string // ReasonFailedTrx, ReasonReplayOrder, ReasonRetried or ReasonNotReplayed
	// own: the session's records first to last (outcome keys) are not
	// explained by it: a failed transaction's own, or a write the side
	// lacks and what its session ran before it (regrouped, a statement's
	// interval runs to its transaction's end).
	own bool
	// mayHave: the order may have been lost (a transaction rolled back and
	// run again: a change that waited for its locks, if there was one,
	// went ahead of it), not surely; a cause known for certain (a write that bypassed
	// the proxy) is named before it (Before).
	mayHave bool
}

// AnyTable in a failure's tables stands for every table (it ran a
// statement whose writes the analysis cannot name).
const AnyTable = "*"

// TableKey is how the indexes of this package (Gaps, Bypassed, Commits,
// Failures, Writers) key a schema.table name: case-folded. A server with
// lower_case_table_names 1 or 2 takes `Orders` and `orders` for one
// table, and names it in lower case in its own lists (the binary log,
// information_schema), so a write spelled one way and a read or an end
// state named another must meet. On a case-sensitive server two tables
// that differ only in case share what these indexes say, which only
// labels more statements apart: never a difference reported that replay
// caused.
func TableKey(t string) string { return strings.ToLower(t) }

// NewFailures returns an empty index.
func NewFailures() *Failures { return &Failures{byTable: map[string][]failure{}} }

// Add records f, which failed on the side named side.
func (fs *Failures) Add(side string, f store.FailedTrx) {
	code := fmt.Sprint(f.Code)
	if f.Cause != 0 {
		code += " " + store.CauseText(f.Cause)
	}
	why := fmt.Sprintf("a transaction of %s (seq %d–%d) failed for good on %s (%s after %d attempts)",
		store.SessionName(f.Session), f.FirstSeq, f.LastSeq, side, code, f.Attempts)
	if f.Cause != 0 {
		why = fmt.Sprintf("a transaction of %s (seq %d–%d) lost its connection on %s (%s) and was rolled back",
			store.SessionName(f.Session), f.FirstSeq, f.LastSeq, side, code)
	}
	x := failure{at: f.At, session: f.Session, first: store.OutcomeSeq(f.FirstSeq, f.Loop), last: store.OutcomeSeq(f.LastSeq, f.Loop),
		why: why, reason: ReasonFailedTrx, own: true}
	for _, t := range f.Tables {
		fs.byTable[TableKey(t)] = append(fs.byTable[TableKey(t)], x)
	}
}

// AddReorder records r, a change replay sent out of the capture's order
// on the side named side. Unlike a failed transaction's, the statement's
// own outcome is explained too (its worker flags it released). A change
// the side lacks (store.ReorderUnsent, store.ReorderFailed) explains what
// follows it (r.At is its end), as ReasonNotReplayed.
func (fs *Failures) AddReorder(side string, r store.Reorder) {
	why := fmt.Sprintf("replay sent a change of %s (seq %d) to %s ahead of a conflicting change that came before it in the capture (the order could not be kept), so the data differs from then on",
		store.SessionName(r.Session), r.Seq, side)
	reason := ReasonReplayOrder
	switch r.Kind {
	case store.ReorderUnsent:
		why = fmt.Sprintf("replay did not send a write of %s (seq %d) to %s (its table's engine could not be set in it; --on-unrewritable skip), so the data differs from then on",
			store.SessionName(r.Session), r.Seq, side)
		reason = ReasonNotReplayed
	case store.ReorderFailed:
		why = fmt.Sprintf("a write of %s (seq %d) failed on %s where the capture's succeeded, so the data differs from then on",
			store.SessionName(r.Session), r.Seq, side)
		reason = ReasonNotReplayed
	case store.ReorderYielded:
		why = fmt.Sprintf("replay rolled back a transaction of %s (from seq %d) on %s and ran it again, to let a statement stuck behind its locks through; a change waiting for those locks went on at the rollback, ahead of its writes, so the data may differ from then on",
			store.SessionName(r.Session), r.Seq, side)
	case store.ReorderRetried:
		why = fmt.Sprintf("a transaction of %s (from seq %d) hit a deadlock or lock wait timeout on %s that the capture did not have and was retried; a change waiting for its locks went on at the rollback, ahead of its writes, so the data may differ from then on",
			store.SessionName(r.Session), r.Seq, side)
		reason = ReasonRetried
	}
	x := failure{at: r.At, session: r.Session, why: why, reason: reason, mayHave: r.Kind == store.ReorderYielded || r.Kind == store.ReorderRetried}
	if reason == ReasonNotReplayed {
		x.own, x.last = true, store.OutcomeSeq(r.Seq, r.Loop)
	}
	for _, t := range r.Tables {
		fs.byTable[TableKey(t)] = append(fs.byTable[TableKey(t)], x)
	}
}

// Len is the number of (failure, table) entries.
func (fs *Failures) Len() int {
	if fs == nil {
		return 0
	}
	n := 0
	for _, l := range fs.byTable {
		n += len(l)
	}
	return n
}

// Before returns why the statement with outcome key key, of session,
// whose captured interval ends at to, on tables, follows a failed
// transaction (or a change out of order) that wrote one of its tables (or
// any) before it, and the reason's name: "" when none did, or when the
// statement is one of that transaction's own. mayHave asks for the
// transactions that only may have lost the order (rolled back and run
// again) instead of the others.
func (fs *Failures) Before(key, session uint64, to int64, tables []string, mayHave bool) (why, reason string) {
	if fs == nil || len(fs.byTable) == 0 {
		return "", ""
	}
	check := func(t, name string) (string, string) {
		for _, f := range fs.byTable[TableKey(t)] {
			if f.mayHave == mayHave && f.at < to && !(f.own && f.session == session && f.first <= key && key <= f.last) {
				return f.why + ", and wrote " + name + " before this", f.reason
			}
		}
		return "", ""
	}
	for _, t := range tables {
		if why, n := check(t, t); why != "" {
			return why, n
		}
	}
	if len(tables) > 0 {
		return check(AnyTable, "tables it may have written")
	}
	return "", ""
}

// Explain says which failed transaction — or, if none, which change out
// of order — a table that differs at the end follows from ("" if none
// wrote it).
func (fs *Failures) Explain(table string) string { return fs.explain(table, true) }

// ExplainCertain is Explain without the transactions that only may have
// lost the order (rolled back and run again): a cause known for certain
// (a transaction that failed for good, a change sent ahead) or "".
func (fs *Failures) ExplainCertain(table string) string { return fs.explain(table, false) }

func (fs *Failures) explain(table string, mayHave bool) string {
	if fs == nil {
		return ""
	}
	for _, reason := range []string{ReasonFailedTrx, ReasonNotReplayed, ReasonReplayOrder, ReasonRetried} {
		var l []failure
		for _, t := range []string{table, AnyTable} {
			for _, f := range fs.byTable[TableKey(t)] {
				if f.reason == reason && (mayHave || !f.mayHave) {
					l = append(l, f)
				}
			}
		}
		if len(l) == 0 {
			continue
		}
		first := slices.MinFunc(l, func(a, b failure) int { return cmp.Compare(a.at, b.at) })
		if len(l) == 1 {
			return first.why
		}
		return fmt.Sprintf("%s, and %d more", first.why, len(l)-1)
	}
	return ""
}

// Writers indexes which sessions write each table (AnyTable: a statement
// whose writes the analysis cannot name). When sessions run freely
// (--order none), a statement on a table another session writes sees
// those writes in whatever order replay gave them: a difference there is
// replay's order, not the engine's (ReasonReplayOrder).
type Writers struct {
	by map[string]map[uint64]bool
}

// NewWriters returns an empty index.
func NewWriters() *Writers { return &Writers{by: map[string]map[uint64]bool{}} }

// Add notes that session writes table. Two writers per table are all
// Other needs to know (one of them is not the reader's), so the index
// stays small however many sessions a capture has.
func (w *Writers) Add(table string, session uint64) {
	table = TableKey(table)
	m := w.by[table]
	if m == nil {
		m = map[uint64]bool{}
		w.by[table] = m
	}
	if len(m) < 2 {
		m[session] = true
	}
}

// Other returns one of tables that a session other than session writes
// (or a description, if one writes tables the analysis cannot name).
func (w *Writers) Other(session uint64, tables []string) (string, bool) {
	if w == nil {
		return "", false
	}
	other := func(t string) bool {
		for s := range w.by[TableKey(t)] {
			if s != session {
				return true
			}
		}
		return false
	}
	for _, t := range tables {
		if other(t) {
			return t, true
		}
	}
	if len(tables) > 0 && other(AnyTable) {
		return "tables it may read", true
	}
	return "", false
}

// Several reports whether two sessions or more write table.
func (w *Writers) Several(table string) bool { return w != nil && len(w.by[TableKey(table)]) >= 2 }
