package compare

import (
	"testing"

	"github.com/tandemdb/tandem/store"
)

// A server with lower_case_table_names 1 or 2 takes `Orders` and
// `orders` for one table and names it in lower case in the binary log
// and information_schema. Every table index here (Gaps, Bypassed, Commits, Writers, Failures)
// meets the two spellings:
// a write spelled one way labels a read spelled the other, and an end
// state named in lower case finds what explains it. Before, each index
// compared names as spelled: a read of `audit` after `INSERT INTO Audit
// VALUES (UUID())`, or after a bypassed write the binary log names
// `shop.orders`, was reported as the engine's difference.
func TestTableIndexesIgnoreTheCaseOfNames(t *testing.T) {
	g := NewGaps()
	g.Add(1, 10, []string{"Shop.Audit"})
	if gap, ok := g.Before(20, []string{"shop.audit"}); !ok || gap.Table != "shop.audit" || gap.Session != 1 {
		t.Errorf("gaps: %+v, %v; want the write of session 1 found for shop.audit", gap, ok)
	}
	g.Reset(30, []string{"SHOP.AUDIT"})
	if gap, ok := g.Before(40, []string{"shop.Audit"}); ok {
		t.Errorf("gaps: %+v found after the table started over (spelled in upper case)", gap)
	}

	b := NewBypassed()
	b.Add(BypassedWrite{Table: "shop.orders", At: 10})
	if w, ok := b.Before(20, []string{"Shop.Orders"}); !ok || w.Table != "shop.orders" {
		t.Errorf("bypassed: %+v, %v; want the binary log's write on shop.orders", w, ok)
	}

	cs := NewCommits()
	cs.Add(2, 10, 20, []string{"Shop.Orders"}, false)
	if c, ok := cs.Overlapping(1, 15, 25, []string{"shop.orders"}); !ok || c.Session != 2 || c.Table != "shop.orders" {
		t.Errorf("commits: %+v, %v; want session 2's commit on shop.orders", c, ok)
	}

	w := NewWriters()
	w.Add("Shop.Orders", 1)
	w.Add("shop.orders", 2)
	if table, ok := w.Other(1, []string{"SHOP.orders"}); !ok || table != "SHOP.orders" {
		t.Errorf("writers: %q, %v; want session 2 found writing the table session 1 reads", table, ok)
	}
	if !w.Several("shop.ORDERS") {
		t.Error("writers: two sessions write shop.orders (spelled two ways), Several says no")
	}

	fs := NewFailures()
	fs.AddReorder("myrocks", store.Reorder{Session: 3, Seq: 7, Tables: []string{"Shop.Orders"}, At: 10})
	if why := fs.Explain("shop.orders"); why == "" {
		t.Error("failures: nothing explains shop.orders, which a change out of order on Shop.Orders wrote")
	}
	if why, reason := fs.Before(99, 1, 20, []string{"SHOP.ORDERS"}, false); reason != ReasonReplayOrder || why == "" {
		t.Errorf("failures: %q, %q; want the change out of order (%s)", why, reason, ReasonReplayOrder)
	}
}
