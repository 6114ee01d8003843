package replay

import (
	"strings"
	"testing"

	"github.com/tandemdb/tandem/store"
)

func TestClassifyCaptured(t *testing.T) {
	rowsResp := store.Response{Kind: store.RespResultSet, Rows: 3, HasChecksums: true, Ordered: 11, Unordered: 22}
	rowsOut := store.Outcome{Flags: store.OutcomeRows, Rows: 3, Ordered: 11, Unordered: 22}
	okResp := store.Response{Kind: store.RespOK, AffectedRows: 2, InsertID: 7, Warnings: 1}
	okOut := store.Outcome{Affected: 2, InsertID: 7, Warnings: 1}
	with := func(o store.Outcome, f func(*store.Outcome)) *store.Outcome { f(&o); return &o }
	withResp := func(p store.Response, f func(*store.Response)) *store.Response { f(&p); return &p }
	cases := []struct {
		name             string
		resp             *store.Response
		out              *store.Outcome
		class            string
		nondeterministic bool
	}{
		{"same rows", &rowsResp, &rowsOut, "", false},
		{"same ok", &okResp, &okOut, "", false},
		{"error vs ok", &store.Response{Kind: store.RespError, ErrCode: 1062}, &okOut, DivErrorVsOK, false},
		{"ok vs error", &okResp, &store.Outcome{Flags: store.OutcomeError, ErrCode: 2013}, DivErrorVsOK, false},
		{"other error code", &store.Response{Kind: store.RespError, ErrCode: 1062}, &store.Outcome{Flags: store.OutcomeError, ErrCode: 1213}, DivErrorCode, false},
		{"same error", &store.Response{Kind: store.RespError, ErrCode: 1062}, &store.Outcome{Flags: store.OutcomeError, ErrCode: 1062}, "", false},
		{"affected", &okResp, with(okOut, func(o *store.Outcome) { o.Affected = 3 }), DivAffected, false},
		{"insert id", &okResp, with(okOut, func(o *store.Outcome) { o.InsertID = 8 }), DivInsertID, false},
		{"warnings", &okResp, with(okOut, func(o *store.Outcome) { o.Warnings = 0 }), DivWarnings, false},
		{"row count", &rowsResp, with(rowsOut, func(o *store.Outcome) { o.Rows = 4 }), DivRowCount, false},
		{"content", &rowsResp, with(rowsOut, func(o *store.Outcome) { o.Unordered = 23 }), DivContent, false},
		{"order ignored without ORDER BY", &rowsResp, with(rowsOut, func(o *store.Outcome) { o.Ordered = 12 }), "", false},
		{"order with ORDER BY", &rowsResp, with(rowsOut, func(o *store.Outcome) { o.Ordered, o.Flags = 12, o.Flags|store.OutcomeOrdered }), DivOrder, false},
		{"no checksums captured: counts only", withResp(rowsResp, func(p *store.Response) { p.HasChecksums = false }),
			with(rowsOut, func(o *store.Outcome) { o.Unordered = 99 }), "", false},
		{"nondeterministic", &rowsResp, with(rowsOut, func(o *store.Outcome) { o.Unordered, o.Flags = 99, o.Flags|store.OutcomeNondeterministic }), "", true},
		{"multi-result: total rows", withResp(rowsResp, func(p *store.Response) { p.More = []store.Response{{Kind: store.RespResultSet, Rows: 2}} }),
			with(rowsOut, func(o *store.Outcome) { o.Rows, o.Unordered = 5, 1 }), "", false},
		{"multi-result: error in a later result", withResp(rowsResp, func(p *store.Response) { p.More = []store.Response{{Kind: store.RespError, ErrCode: 1146}} }),
			&store.Outcome{Flags: store.OutcomeError, ErrCode: 1146}, "", false},
	}
	for _, c := range cases {
		class, nondet := classifyCaptured(c.resp, c.out)
		if class != c.class || nondet != c.nondeterministic {
			t.Errorf("%s: classifyCaptured = %q, %v; want %q, %v", c.name, class, nondet, c.class, c.nondeterministic)
		}
	}
}

func TestFirstDiff(t *testing.T) {
	const p = "first differing row (re-run after the replay): "
	cases := []struct {
		a, b    []string
		ordered bool
		want    string
	}{
		{[]string{"(1)", "(2)"}, []string{"(2)", "(1)"}, false, "rows agree when re-run after the replay"},
		{[]string{"(1)", "(2)"}, []string{"(2)", "(1)"}, true, p + "row 1: a (1), b (2)"},
		{[]string{"(1)", "(2)"}, []string{"(1)"}, true, p + "row 2: a (2), b (no row)"},
		{[]string{"(1)", "(2)", "(3)"}, []string{"(1)", "(3)"}, false, p + "row 2 on a (2) is not on b (3 rows vs 2)"},
		{[]string{"(1)"}, []string{"(1)", "(1)"}, false, p + "row 1 on b (1) is not on a (2 rows vs 1)"},
		{nil, nil, true, "rows agree when re-run after the replay, in the same order"},
		{[]string{"(" + strings.Repeat("x", 200) + ")"}, nil, false, p + "row 1 on a (" + strings.Repeat("x", 118) + "… is not on b (1 rows vs 0)"},
	}
	for _, c := range cases {
		if got := firstDiff(c.a, c.b, "a", "b", c.ordered); got != c.want {
			t.Errorf("firstDiff(%v, %v, ordered=%v) = %q, want %q", c.a, c.b, c.ordered, got, c.want)
		}
	}
}
