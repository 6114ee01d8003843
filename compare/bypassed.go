package compare

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
	if old, ok := b.byTable[w.Table]; !ok || w.At < old.At {
		b.byTable[w.Table] = w
	}
}

// Before reports the first bypassing write on one of tables that came
// before a statement ending at to.
func (b *Bypassed) Before(to int64, tables []string) (BypassedWrite, bool) {
	if b == nil {
		return BypassedWrite{}, false
	}
	for _, t := range tables {
		if w, ok := b.byTable[t]; ok && w.At < to {
			return w, true
		}
	}
	return BypassedWrite{}, false
}
