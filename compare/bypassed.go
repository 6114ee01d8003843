package compare

import (
	"slices"
	"strings"
)

// Bypassed says, per table, from when writes that did not pass through
// the proxy (another client on the captured server) had changed it: from
// then on the captured answers on that table saw rows replay never wrote.
type Bypassed struct {
	byTable map[string]BypassedWrite
}

// BypassedWrite is the first bypassing write on Table: it committed after
// At (ns, the capture's clock: the end of the last captured commit before
// it in the server's order), and it is GTID, the first of Transactions.
type BypassedWrite struct {
	Table        string
	At           int64
	GTID         string
	Transactions int
}

// NewBypassed starts an empty list.
func NewBypassed() *Bypassed { return &Bypassed{byTable: map[string]BypassedWrite{}} }

// Add notes table's first bypassing write.
func (b *Bypassed) Add(w BypassedWrite) {
	k := TableKey(w.Table)
	if old, ok := b.byTable[k]; !ok || w.At < old.At {
		b.byTable[k] = w
	}
}

// Before reports the first bypassing write on one of tables that came
// before a statement ending at to.
func (b *Bypassed) Before(to int64, tables []string) (BypassedWrite, bool) {
	if b == nil {
		return BypassedWrite{}, false
	}
	for _, t := range tables {
		if w, ok := b.byTable[TableKey(t)]; ok && w.At < to {
			return w, true
		}
	}
	return BypassedWrite{}, false
}

// CommitStart is a captured commit: its place in the server's order (its
// replication domain and sequence number) and when its statement (the
// COMMIT, or a write outside a transaction) began on the capture's clock
// (ns).
type CommitStart struct {
	Domain uint32
	Seq    uint64
	Start  int64
}

// BypassedTable is a table that writes around the proxy changed, with
// the first of them (its GTID, and that GTID's domain and sequence number).
type BypassedTable struct {
	Table        string
	GTID         string
	Domain       uint32
	Seq          uint64
	Transactions int
}

// PlaceBypassed places each table's first write that bypassed the proxy
// on the capture's clock: it committed after every captured commit before
// it in its domain's order, each of which committed after its statement
// began, so after the latest of those starts; with none, after the
// capture's start point (start, ns). Captured answers on the table from
// then on may have seen it. Nil when tables is empty.
func PlaceBypassed(tables []BypassedTable, start int64, commits []CommitStart) *Bypassed {
	if len(tables) == 0 {
		return nil
	}
	b := NewBypassed()
	for _, t := range tables {
		at := start
		for _, c := range commits {
			if c.Domain == t.Domain && c.Seq < t.Seq && c.Start > at {
				at = c.Start
			}
		}
		b.Add(BypassedWrite{Table: t.Table, At: at, GTID: t.GTID, Transactions: t.Transactions})
	}
	return b
}

// Writes lists the first bypassing write of each table, by table name.
func (b *Bypassed) Writes() []BypassedWrite {
	if b == nil {
		return nil
	}
	out := make([]BypassedWrite, 0, len(b.byTable))
	for _, w := range b.byTable {
		out = append(out, w)
	}
	slices.SortFunc(out, func(x, y BypassedWrite) int { return strings.Compare(x.Table, y.Table) })
	return out
}
