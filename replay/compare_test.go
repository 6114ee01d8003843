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

// A divergent execute's sample names the SQL its statement was prepared
// with and the schema its session was in — the latest before it, with
// statement ids reused after a re-prepare — and each session is read once
// however many samples it gives (reading it per sample made comparison
// quadratic).
func TestSessionsBefore(t *testing.T) {
	dir := t.TempDir()
	w, err := store.Create(dir, store.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	recs := []store.Record{
		{Session: 1, Kind: store.KindConnect, Schema: "a"},
		{Session: 2, Kind: store.KindConnect, Schema: "z"},
		{Session: 1, Kind: store.KindPrepare, StmtID: 1, SQL: "SELECT 1"},
		{Session: 2, Kind: store.KindPrepare, StmtID: 1, SQL: "SELECT 'other session'"},
		{Session: 1, Kind: store.KindExecute, StmtID: 1}, // 5: a, SELECT 1
		{Session: 1, Kind: store.KindInitDB, Schema: "b"},
		{Session: 1, Kind: store.KindPrepare, StmtID: 1, SQL: "SELECT 2"},
		{Session: 1, Kind: store.KindPrepare, StmtID: 2, SQL: "SELECT 3"},
		{Session: 1, Kind: store.KindExecute, StmtID: 1}, // 9: b, SELECT 2
		{Session: 1, Kind: store.KindExecute, StmtID: 7}, // 10: b, never prepared
	}
	for i := range recs {
		if _, err := w.Append(&recs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ss := newSessions(r)
	for _, c := range []struct {
		seq         uint64
		schema, sql string
	}{{9, "b", "SELECT 2"}, {5, "a", "SELECT 1"}, {10, "b", "(statement 7)"}, {5, "a", "SELECT 1"}} {
		rec, ok, err := r.Get(c.seq)
		if !ok || err != nil {
			t.Fatalf("record %d: %v %v", c.seq, ok, err)
		}
		if schema, sql := ss.before(rec); schema != c.schema || sql != c.sql {
			t.Errorf("record %d: before = %q, %q; want %q, %q", c.seq, schema, sql, c.schema, c.sql)
		}
	}
	if len(ss.byID) != 1 || len(ss.byID[1]) != 5 {
		t.Errorf("indexed sessions %v; want session 1 only, with its 5 prepares and schema changes", ss.byID)
	}
}

// A multi-result response (a CALL) is compared by its total rows, and its
// sample says so rather than showing the first result set's.
func TestDescribeMultiResultResponse(t *testing.T) {
	call := store.Response{Kind: store.RespResultSet, Rows: 2, HasChecksums: true,
		More: []store.Response{{Kind: store.RespResultSet, Rows: 1, HasChecksums: true}, {Kind: store.RespOK}}}
	if got, want := describeResponse(&call), "3 rows in 3 results"; got != want {
		t.Errorf("describeResponse = %q, want %q", got, want)
	}
	call.More[1] = store.Response{Kind: store.RespError, ErrCode: 1305}
	if got, want := describeResponse(&call), "error 1305 after 2 results"; got != want {
		t.Errorf("describeResponse = %q, want %q", got, want)
	}
}
