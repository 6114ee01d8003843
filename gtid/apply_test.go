package gtid

import (
	"strings"
	"testing"
)

func TestStatementsRebuildRowChanges(t *testing.T) {
	tables := map[string]*Table{
		"s.t":  {Schema: "s", Name: "t", Columns: []string{"id", "k", "c", "g"}, Generated: []bool{false, false, false, true}, Key: []int{0}},
		"s.nk": {Schema: "s", Name: "nk", Columns: []string{"a", "b"}, Generated: []bool{false, false}},
	}
	trx := Trx{Changes: []RowChange{
		{Schema: "s", Table: "t", Kind: 'i', After: []any{int32(7), int64(-3), "it's", "gen"}},
		{Schema: "s", Table: "t", Kind: 'u', Before: []any{int32(7), int64(-3), "it's", "gen"}, After: []any{int32(7), nil, []byte{0, 1}, "gen"}},
		{Schema: "s", Table: "t", Kind: 'd', Before: []any{int32(7), nil, "", "gen"}},
		{Schema: "s", Table: "nk", Kind: 'd', Before: []any{"12.50", float64(0.5)}},
	}}
	got, err := trx.Statements(tables)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"INSERT INTO `s`.`t` (`id`, `k`, `c`) VALUES (7, -3, CAST(X'69742773' AS BINARY))",
		"UPDATE `s`.`t` SET `id` = 7, `k` = NULL, `c` = CAST(X'0001' AS BINARY) WHERE `id` = 7",
		"DELETE FROM `s`.`t` WHERE `id` = 7",
		"DELETE FROM `s`.`nk` WHERE `a` <=> CAST(X'31322e3530' AS BINARY) AND `b` <=> 0.5 LIMIT 1",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if _, err := (Trx{Changes: []RowChange{{Schema: "s", Table: "t", Kind: 'i', After: []any{1}}}}).Statements(tables); err == nil || !strings.Contains(err.Error(), "binlog_row_image must be FULL") {
		t.Errorf("a minimal image: %v", err)
	}
	if _, err := (Trx{Changes: []RowChange{{Schema: "s", Table: "gone", Kind: 'i', After: []any{1}}}}).Statements(tables); err == nil || !strings.Contains(err.Error(), "not on the server") {
		t.Errorf("a table gone: %v", err)
	}
	if s, _ := (Trx{Statement: "DROP TABLE x"}).Statements(tables); len(s) != 1 || s[0] != "DROP TABLE x" {
		t.Errorf("DDL: %q", s)
	}
}
