package compare

import (
	"slices"
	"testing"
)

// A table's first write around the proxy committed after every captured
// commit before it in its domain's order, each after its statement
// began: it goes at the latest of those starts, whatever their order on
// the capture's clock; commits of another domain or after it do not
// count; with none before it, at the capture's start.
func TestPlaceBypassed(t *testing.T) {
	commits := []CommitStart{
		{Domain: 0, Seq: 10, Start: 500},
		{Domain: 0, Seq: 11, Start: 400}, // later in the order, began earlier: answered late
		{Domain: 0, Seq: 13, Start: 900}, // after the write
		{Domain: 1, Seq: 5, Start: 800},  // another domain
	}
	b := PlaceBypassed([]BypassedTable{
		{Table: "shop.orders", GTID: "0-1-12", Domain: 0, Seq: 12, Transactions: 3},
		{Table: "shop.stock", GTID: "0-1-9", Domain: 0, Seq: 9, Transactions: 1},
		{Table: "shop.audit", GTID: "1-1-4", Domain: 1, Seq: 4, Transactions: 2},
	}, 100, commits)
	want := []BypassedWrite{
		{Table: "shop.audit", At: 100, GTID: "1-1-4", Transactions: 2},
		{Table: "shop.orders", At: 500, GTID: "0-1-12", Transactions: 3},
		{Table: "shop.stock", At: 100, GTID: "0-1-9", Transactions: 1},
	}
	if got := b.Writes(); !slices.Equal(got, want) {
		t.Errorf("placed %+v, want %+v", got, want)
	}
	// An answer on orders that ended at 500 or before cannot have seen it.
	if _, hit := b.Before(500, []string{"shop.orders"}); hit {
		t.Error("a statement ending at the write's place counted as after it")
	}
	if w, hit := b.Before(501, []string{"shop.orders", "shop.x"}); !hit || w.GTID != "0-1-12" {
		t.Errorf("a statement ending after the write's place: %+v %v, want the write 0-1-12", w, hit)
	}
	if PlaceBypassed(nil, 100, commits) != nil {
		t.Error("no table: want no list")
	}
}
