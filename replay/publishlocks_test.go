package replay

import (
	"fmt"
	"testing"
	"time"

	"github.com/tandemdb/tandem/replay/order"
	"github.com/tandemdb/tandem/sqlinfo"
	"github.com/tandemdb/tandem/store"
)

// A transaction's lock set grows by the statement that ran: publishing
// it costs that statement, not the transaction so far. Before, each
// statement rebuilt the set from the transaction's first record and the
// gate compared every name of the old set with every name of the new: a
// transaction of 1,000 single-row updates replayed at 514 statements a
// second, one of 4,000 at 31 (2 CPUs; 18,000 to 21,000 after). What is
// published is still exactly the changes of the records that ran: as the
// transaction grows, when a rerun starts it again from its first record,
// and once it ends.
func TestPublishLocksGrowsWithTheTransaction(t *testing.T) {
	g := order.NewGate(time.Hour, time.Hour)
	w := &worker{rn: &runner{gate: g}, cursor: &order.Cursor{}}
	at := time.Unix(1_700_000_000, 0)
	read := sqlinfo.Analyze("SELECT c FROM t WHERE id = 1")
	mk := func(i int) *job {
		info := read
		if i%2 == 1 {
			info = sqlinfo.Analyze(fmt.Sprintf("UPDATE t%d SET c = 1 WHERE id = %d", i%7, i))
		}
		return &job{rec: &store.Record{Start: at.Add(time.Duration(i) * time.Millisecond), Duration: time.Microsecond}, info: info}
	}
	// published checks the set holds the changes among the first n
	// records, in order.
	published := func(n int) {
		t.Helper()
		ls := w.cursor.Locks()
		var want []int64
		for _, j := range w.trx[:n] {
			if j.info.Changes() {
				want = append(want, w.rn.offset(j.rec, 0)+int64(j.rec.Duration))
			}
		}
		if ls == nil {
			if len(want) != 0 {
				t.Fatalf("after %d records: nothing published, want %d statements", n, len(want))
			}
			return
		}
		if len(ls.Stmts) != len(want) {
			t.Fatalf("after %d records: %d statements published, want %d", n, len(ls.Stmts), len(want))
		}
		for i, p := range ls.Stmts {
			if p.End != want[i] || len(p.Tables) != 1 {
				t.Fatalf("after %d records: statement %d ends at %d on %v, want %d on one table", n, i, p.End, p.Tables, want[i])
			}
		}
	}
	for i := range 40 {
		w.trx = append(w.trx, mk(i))
		w.publishLocks(len(w.trx))
		published(len(w.trx))
	}
	first := w.cursor.Locks()
	// A rerun: from the first record again, then on.
	for n := 1; n <= len(w.trx); n++ {
		w.publishLocks(n)
		published(n)
	}
	if &first.Stmts[0] == &w.cursor.Locks().Stmts[0] {
		t.Fatal("the rerun's sets share the first run's array: a set published is not to change")
	}
	if len(first.Stmts) != 20 {
		t.Fatalf("the first run's set changed under its readers: %d statements, want 20", len(first.Stmts))
	}
	w.publishLocks(0)
	published(0)

	// A long transaction: the next statement's set costs the same at the
	// 2,000th as at the first (the allocations of the statement's own
	// tables, the set, its list in the gate's index; not the 1,000
	// changes before it).
	w.trx = w.trx[:0]
	for i := range 2000 {
		w.trx = append(w.trx, mk(i))
		w.publishLocks(len(w.trx))
	}
	next := make([]*job, 0, 202)
	for i := range 202 {
		next = append(next, mk(2000+2*i+1)) // all changes
	}
	allocs := testing.AllocsPerRun(200, func() {
		w.trx = append(w.trx, next[0])
		next = next[1:]
		w.publishLocks(len(w.trx))
	})
	published(len(w.trx))
	if allocs > 6 {
		t.Fatalf("publishing the set of a transaction's 2,000th statement: %.1f allocations, want at most 6 (its own)", allocs)
	}
}
