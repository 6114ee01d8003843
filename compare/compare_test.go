package compare

import (
	"fmt"
	"iter"
	"strings"
	"testing"

	"github.com/tandemdb/tandem/store"
)

func TestClassify(t *testing.T) {
	rows := store.Outcome{Flags: store.OutcomeRows, Rows: 3, Ordered: 11, Unordered: 22, Results: 1}
	ok := store.Outcome{Affected: 2, InsertID: 7, Warnings: 1, Results: 1}
	with := func(o store.Outcome, f func(*store.Outcome)) *store.Outcome { f(&o); return &o }
	cases := []struct {
		name   string
		b, t   *store.Outcome
		class  string
		nondet bool
	}{
		{"same rows", &rows, &rows, "", false},
		{"error vs ok", with(ok, func(o *store.Outcome) { o.Flags, o.ErrCode = store.OutcomeError, 1062 }), &ok, ErrorVsOK, false},
		{"error codes", with(ok, func(o *store.Outcome) { o.Flags, o.ErrCode = store.OutcomeError, 1062 }),
			with(ok, func(o *store.Outcome) { o.Flags, o.ErrCode = store.OutcomeError, 1213 }), ErrorCode, false},
		{"same error at a later result", with(ok, func(o *store.Outcome) { o.Flags, o.ErrCode, o.Results = store.OutcomeError, 1644, 2 }),
			with(ok, func(o *store.Outcome) { o.Flags, o.ErrCode, o.Results = store.OutcomeError, 1644, 3 }), ErrorVsOK, false},
		{"affected", &ok, with(ok, func(o *store.Outcome) { o.Affected = 3 }), Affected, false},
		{"insert id", &ok, with(ok, func(o *store.Outcome) { o.InsertID = 8 }), InsertID, false},
		{"warnings", &ok, with(ok, func(o *store.Outcome) { o.Warnings = 0 }), Warnings, false},
		{"row count", &rows, with(rows, func(o *store.Outcome) { o.Rows = 4 }), RowCount, false},
		{"content", &rows, with(rows, func(o *store.Outcome) { o.Unordered = 23 }), Content, false},
		{"order without ORDER BY", &rows, with(rows, func(o *store.Outcome) { o.Ordered = 12 }), "", false},
		{"order with ORDER BY", with(rows, func(o *store.Outcome) { o.Flags |= store.OutcomeOrdered }),
			with(rows, func(o *store.Outcome) { o.Flags |= store.OutcomeOrdered; o.Ordered = 12 }), Order, false},
		{"nondeterministic content", &rows, with(rows, func(o *store.Outcome) { o.Flags |= store.OutcomeNondeterministic; o.Unordered = 1 }), "", true},
		{"nondeterministic still compares errors", &rows, with(rows, func(o *store.Outcome) {
			o.Flags |= store.OutcomeNondeterministic | store.OutcomeError
		}), ErrorVsOK, false},
	}
	for _, c := range cases {
		class, nondet := Classify(c.b, c.t)
		if class != c.class || nondet != c.nondet {
			t.Errorf("%s: Classify = %q, %v; want %q, %v", c.name, class, nondet, c.class, c.nondet)
		}
	}
}

func TestClassifyCaptured(t *testing.T) {
	rowsResp := store.Response{Kind: store.RespResultSet, Rows: 3, HasChecksums: true, Ordered: 11, Unordered: 22}
	rowsOut := store.Outcome{Flags: store.OutcomeRows, Rows: 3, Ordered: 11, Unordered: 22, Results: 1}
	okResp := store.Response{Kind: store.RespOK, AffectedRows: 2, InsertID: 7, Warnings: 1}
	okOut := store.Outcome{Affected: 2, InsertID: 7, Warnings: 1, Results: 1}
	with := func(o store.Outcome, f func(*store.Outcome)) *store.Outcome { f(&o); return &o }
	withResp := func(p store.Response, f func(*store.Response)) *store.Response { f(&p); return &p }
	cases := []struct {
		name   string
		resp   *store.Response
		out    *store.Outcome
		class  string
		nondet bool
	}{
		{"same rows", &rowsResp, &rowsOut, "", false},
		{"same ok", &okResp, &okOut, "", false},
		{"error vs ok", &store.Response{Kind: store.RespError, ErrCode: 1062}, &okOut, ErrorVsOK, false},
		{"ok vs error", &okResp, &store.Outcome{Flags: store.OutcomeError, ErrCode: 2013}, ErrorVsOK, false},
		{"other error code", &store.Response{Kind: store.RespError, ErrCode: 1062}, &store.Outcome{Flags: store.OutcomeError, ErrCode: 1213}, ErrorCode, false},
		{"same error", &store.Response{Kind: store.RespError, ErrCode: 1062}, &store.Outcome{Flags: store.OutcomeError, ErrCode: 1062, Results: 1}, "", false},
		{"affected", &okResp, with(okOut, func(o *store.Outcome) { o.Affected = 3 }), Affected, false},
		{"insert id", &okResp, with(okOut, func(o *store.Outcome) { o.InsertID = 8 }), InsertID, false},
		{"warnings", &okResp, with(okOut, func(o *store.Outcome) { o.Warnings = 0 }), Warnings, false},
		{"row count", &rowsResp, with(rowsOut, func(o *store.Outcome) { o.Rows = 4 }), RowCount, false},
		{"content", &rowsResp, with(rowsOut, func(o *store.Outcome) { o.Unordered = 23 }), Content, false},
		{"order ignored without ORDER BY", &rowsResp, with(rowsOut, func(o *store.Outcome) { o.Ordered = 12 }), "", false},
		{"order with ORDER BY", &rowsResp, with(rowsOut, func(o *store.Outcome) { o.Ordered, o.Flags = 12, o.Flags|store.OutcomeOrdered }), Order, false},
		{"no checksums captured: counts only", withResp(rowsResp, func(p *store.Response) { p.HasChecksums = false }),
			with(rowsOut, func(o *store.Outcome) { o.Unordered = 99 }), "", false},
		{"nondeterministic", &rowsResp, with(rowsOut, func(o *store.Outcome) { o.Unordered, o.Flags = 99, o.Flags|store.OutcomeNondeterministic }), "", true},
		{"multi-result: total rows and checksums", withResp(rowsResp, func(p *store.Response) {
			p.More = []store.Response{{Kind: store.RespResultSet, Rows: 2, HasChecksums: true, Unordered: 5}, {Kind: store.RespOK}}
		}), with(rowsOut, func(o *store.Outcome) { o.Rows, o.Unordered, o.Results = 5, 27, 3 }), "", false},
		{"multi-result: content differs", withResp(rowsResp, func(p *store.Response) {
			p.More = []store.Response{{Kind: store.RespResultSet, Rows: 2, HasChecksums: true, Unordered: 5}}
		}), with(rowsOut, func(o *store.Outcome) { o.Rows, o.Unordered, o.Results = 5, 28, 2 }), Content, false},
		{"multi-result: error in a later result", withResp(rowsResp, func(p *store.Response) { p.More = []store.Response{{Kind: store.RespError, ErrCode: 1146}} }),
			&store.Outcome{Flags: store.OutcomeError, ErrCode: 1146, Results: 2}, "", false},
		// Issue 13: a CALL that SIGNALs after one SELECT on one side only.
		{"multi-result: error vs ok after a result set", withResp(rowsResp, func(p *store.Response) {
			p.More = []store.Response{{Kind: store.RespError, ErrCode: 1644}}
		}), with(rowsOut, func(o *store.Outcome) { o.Results = 2 }), ErrorVsOK, false},
	}
	for _, c := range cases {
		class, nondet := ClassifyCaptured(c.resp, c.out)
		if class != c.class || nondet != c.nondet {
			t.Errorf("%s: ClassifyCaptured = %q, %v; want %q, %v", c.name, class, nondet, c.class, c.nondet)
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
		if got := FirstDiff(c.a, c.b, "a", "b", c.ordered); got != c.want {
			t.Errorf("FirstDiff(%v, %v, ordered=%v) = %q, want %q", c.a, c.b, c.ordered, got, c.want)
		}
	}
}

func outcomes(os ...store.Outcome) iter.Seq2[*store.Outcome, error] {
	return func(yield func(*store.Outcome, error) bool) {
		for i := range os {
			if !yield(&os[i], nil) {
				return
			}
		}
	}
}

type fakeSource map[uint64]Statement

func (f fakeSource) Statement(key uint64) (Statement, bool) { s, ok := f[key]; return s, ok }

// The merge join pairs outcomes by key, counts what one side lacks, and
// the tally counts each divergence once, in its class or as ambiguous.
func TestJoinAndTally(t *testing.T) {
	rows := func(seq uint64, sum uint64) store.Outcome {
		return store.Outcome{Seq: seq, Flags: store.OutcomeRows, Rows: 1, Unordered: sum, Results: 1}
	}
	base := outcomes(rows(1, 1), rows(2, 2), rows(3, 3), rows(5, 5), rows(store.OutcomeSeq(2, 1), 2))
	tgt := outcomes(rows(1, 1), rows(2, 9), rows(4, 4), rows(5, 7), rows(store.OutcomeSeq(2, 1), 8))
	commits := NewCommits()
	commits.Add(2, 4950, 5050, []string{"db.t"}, false) // overlaps seq 5's window only
	commits.Add(1, 4950, 5050, []string{"db.t"}, false) // its own session: never ambiguous
	src := fakeSource{
		2:                      {Session: 1, SQL: "SELECT v FROM t WHERE id = 2", Digest: "d2", From: 2000, To: 2100, Tables: []string{"db.t"}},
		5:                      {Session: 1, SQL: "SELECT v FROM t WHERE id = 5", Digest: "d5", From: 5000, To: 5100, Tables: []string{"db.t"}},
		store.OutcomeSeq(2, 1): {Session: 1, SQL: "SELECT v FROM t WHERE id = 2", Digest: "d2", From: 2000, To: 2100, Tables: []string{"db.t"}},
	}
	tl := NewTally(1, commits, src)
	err := Join(base, tgt, &tl.D, func(b, o *store.Outcome) {
		class, nondet := Classify(b, o)
		tl.Note(b.Seq, class, nondet, OrderOf(b, o), Describe(b), Describe(o))
	})
	if err != nil {
		t.Fatal(err)
	}
	d := tl.D
	if d.Compared != 4 || d.Missing != 1 || d.Extra != 1 || d.ByClass[Content] != 2 || d.Ambiguous != 1 || d.Total() != 2 {
		t.Fatalf("tally %+v", d)
	}
	var got []string
	for _, s := range d.Samples {
		got = append(got, fmt.Sprintf("%s seq %d loop %d", s.Class, s.Seq, s.Loop))
	}
	// One sample per (digest, class): the second pass's divergence of seq 2
	// is counted but not sampled again.
	if want := "[row-content seq 2 loop 0 order-ambiguous seq 5 loop 0]"; fmt.Sprint(got) != want {
		t.Errorf("samples %v, want %s", got, want)
	}
	if !strings.Contains(d.Samples[1].Why, "session 2 on db.t") {
		t.Errorf("ambiguous sample says %q", d.Samples[1].Why)
	}
}

// A statement whose answer the kept commit order decides (Locked: a
// locking statement of a transaction that committed in the server's
// order) is a divergence even where another session's commit overlapped
// it; a plain read there stays ambiguous, and so does a locking statement
// that overlapped a commit that deleted rows of its table (InnoDB skips a
// row deleted by a transaction it waited for: its answer depends on
// whether it waited). Before, all three were ambiguous alike.
// noteAll joins base and tgt and notes every pair in tl.
func noteAll(t *testing.T, tl *Tally, base, tgt iter.Seq2[*store.Outcome, error]) {
	t.Helper()
	if err := Join(base, tgt, &tl.D, func(b, o *store.Outcome) {
		class, nondet := Classify(b, o)
		tl.Note(b.Seq, class, nondet, OrderOf(b, o), Describe(b), Describe(o))
	}); err != nil {
		t.Fatal(err)
	}
}

func TestLockedStatementOverlappingACommitIsAVerdict(t *testing.T) {
	affected := func(seq, n uint64) store.Outcome { return store.Outcome{Seq: seq, Affected: n, Results: 1} }
	rows := func(seq uint64, sum uint64) store.Outcome {
		return store.Outcome{Seq: seq, Flags: store.OutcomeRows, Rows: 1, Unordered: sum, Results: 1}
	}
	base := outcomes(affected(1, 1), rows(2, 5), affected(3, 0))
	tgt := outcomes(affected(1, 0), rows(2, 6), affected(3, 1))
	commits := NewCommits()
	commits.Add(2, 1000, 3000, []string{"db.t"}, false) // another session's commit over both
	commits.AddDeleting(3, 1000, 3000, []string{"db.t", "db.u"}, []string{"db.u"}, false)
	src := fakeSource{
		1: {Session: 1, SQL: "UPDATE t SET v = v + 1 WHERE id = 1", Digest: "u", From: 900, To: 2000, Tables: []string{"db.t"}, Locked: true},
		2: {Session: 1, SQL: "SELECT v FROM t WHERE id = 1", Digest: "s", From: 900, To: 2100, Tables: []string{"db.t"}},
		3: {Session: 1, SQL: "UPDATE u SET v = 1 WHERE id = 1", Digest: "u2", From: 900, To: 2200, Tables: []string{"db.u"}, Locked: true},
	}
	tl := NewTally(4, commits, src)
	noteAll(t, tl, base, tgt)
	d := tl.D
	if d.Compared != 3 || d.ByClass[Affected] != 1 || d.Total() != 1 || d.Ambiguous != 2 || d.AmbiguousBy[ReasonCommitOverlap] != 2 {
		t.Fatalf("tally %+v: want the UPDATE of t a divergence (affected-rows), the SELECT and the UPDATE of u ambiguous (commit-overlap)", d)
	}
	if why := d.Samples[len(d.Samples)-1].Why; !strings.Contains(why, "deleted rows of db.u") {
		t.Errorf("the UPDATE of u is ambiguous because %q", why)
	}
}

func TestCommitsOverlap(t *testing.T) {
	cs := NewCommits()
	cs.Add(1, 100, 200, []string{"a"}, false)
	cs.Add(2, 5000, 9000, []string{"a"}, false) // long: found from windows after its start
	cs.Add(3, 300, 310, nil, true)              // may have written anything
	cases := []struct {
		session  uint64
		from, to int64
		tables   []string
		hit      bool
	}{
		{9, 150, 160, []string{"a"}, true},
		{1, 150, 160, []string{"a"}, false}, // own session
		{9, 201, 250, []string{"a"}, false},
		{9, 8000, 8100, []string{"a"}, true},
		{9, 150, 160, []string{"b"}, false},
		{9, 305, 306, []string{"b"}, true}, // the unknown writer
		{9, 305, 306, nil, false},
	}
	for _, c := range cases {
		if _, hit := cs.Overlapping(c.session, c.from, c.to, c.tables); hit != c.hit {
			t.Errorf("session %d [%d, %d] %v: hit %v, want %v", c.session, c.from, c.to, c.tables, hit, c.hit)
		}
	}
	if cs.Len() != 3 {
		t.Errorf("Len %d", cs.Len())
	}
}

// A live shadow lets go of old commits: what is kept is still found,
// and an interval that begins before what went is reported as such, not
// as overlapping nothing; a differing answer there is ambiguous.
func TestForgottenCommitsMakeOlderTransactionsAmbiguous(t *testing.T) {
	cs := NewCommits()
	cs.Add(1, 100, 200, []string{"a"}, false)
	cs.Add(2, 150, 5000, []string{"a", "b"}, false) // a long one: ends after the bound
	cs.AddDeleting(3, 400, 450, []string{"b"}, []string{"b"}, false)
	cs.Add(4, 300, 310, nil, true) // may have written anything
	cs.Add(5, 2000, 2100, []string{"a"}, false)
	for i := range 200 {
		cs.Add(6, int64(600+i), int64(601+i), []string{"c"}, false)
	}
	if cs.Len() != 206 {
		t.Fatalf("Len %d, want 206", cs.Len())
	}
	if n := cs.Forget(1000); n != 203 || cs.Len() != 3 || cs.Forgotten() != 1000 {
		t.Fatalf("Forget(1000) let %d go, kept %d, bound %d; want 203, 3 and 1000", n, cs.Len(), cs.Forgotten())
	}
	if n := cs.Forget(900); n != 0 || cs.Forgotten() != 1000 {
		t.Fatalf("an earlier bound let %d go and moved it to %d", n, cs.Forgotten())
	}
	for _, c := range []struct {
		session  uint64
		from, to int64
		tables   []string
		table    string
		hit      bool
	}{
		{9, 2050, 2060, []string{"a"}, "a", true},      // session 5's, kept
		{9, 4000, 4100, []string{"b"}, "b", true},      // session 2's long commit, kept
		{9, 1500, 1600, []string{"a"}, "a", true},      // session 2's long commit again
		{9, 1500, 1600, []string{"c"}, "", false},      // table c's commits all went; none after 1000
		{9, 120, 1600, []string{"a"}, Forgotten, true}, // began before the bound
		{9, 999, 1600, []string{"z"}, Forgotten, true}, // any table: what went may have written it
		{9, 120, 130, nil, "", false},                  // no tables: nothing to look up
	} {
		got, hit := cs.Overlapping(c.session, c.from, c.to, c.tables)
		if hit != c.hit || got.Table != c.table {
			t.Errorf("[%d, %d] %v: %+v %v, want table %q %v", c.from, c.to, c.tables, got, hit, c.table, c.hit)
		}
	}
	if got, hit := cs.OverlappingDelete(9, 420, 430, []string{"b"}); !hit || got.Table != Forgotten {
		t.Errorf("deletes before the bound: %+v %v, want forgotten", got, hit)
	}

	// Judged: the statement whose transaction began before the bound is
	// ambiguous, and says why.
	base := outcomes(store.Outcome{Seq: 1, Affected: 1, Results: 1}, store.Outcome{Seq: 2, Affected: 1, Results: 1})
	tgt := outcomes(store.Outcome{Seq: 1, Affected: 0, Results: 1}, store.Outcome{Seq: 2, Affected: 0, Results: 1})
	src := fakeSource{
		1: {Session: 9, SQL: "UPDATE c SET v = 1", Digest: "u", From: 500, To: 1600, Tables: []string{"c"}},
		2: {Session: 9, SQL: "UPDATE c SET v = 2", Digest: "u2", From: 1500, To: 1600, Tables: []string{"c"}},
	}
	tl := NewTally(4, cs, src)
	noteAll(t, tl, base, tgt)
	d := tl.D
	if d.Compared != 2 || d.Total() != 1 || d.Ambiguous != 1 || d.AmbiguousBy[ReasonCommitOverlap] != 1 {
		t.Fatalf("tally %+v: want the first UPDATE ambiguous (commit-overlap), the second a divergence", d)
	}
	for _, s := range d.Samples {
		if s.Seq == 1 && !strings.Contains(s.Why, "still keeps") {
			t.Errorf("the first UPDATE is ambiguous because %q", s.Why)
		}
	}
}

// A statement whose ORDER BY may leave rows tied: a difference in order
// only, or in content under a LIMIT, is the server's choice among tied
// rows, counted apart; any other difference of it, or an order difference
// of a statement without ties, stays a divergence.
func TestTiedOrderIsTheServersChoice(t *testing.T) {
	src := fakeSource{
		1: {Session: 1, SQL: "SELECT id FROM t ORDER BY k", Digest: "a", Tables: []string{"s.t"}, TiedOrder: true},
		2: {Session: 1, SQL: "SELECT id FROM t ORDER BY k LIMIT 1", Digest: "b", Tables: []string{"s.t"}, TiedOrder: true, Limited: true},
		3: {Session: 1, SQL: "SELECT id FROM t ORDER BY k", Digest: "a", Tables: []string{"s.t"}, TiedOrder: true},
		4: {Session: 1, SQL: "SELECT id FROM t ORDER BY id", Digest: "c", Tables: []string{"s.t"}},
	}
	tl := NewTally(5, nil, src)
	tl.Note(1, Order, false, OrderKept, "", "")
	tl.Note(2, Content, false, OrderKept, "", "")
	tl.Note(3, Content, false, OrderKept, "", "") // no LIMIT: other rows are the engine's
	tl.Note(4, Order, false, OrderKept, "", "")
	d := tl.D
	if d.Ambiguous != 2 || d.AmbiguousBy[ReasonTiedOrder] != 2 || d.ByClass[Content] != 1 || d.ByClass[Order] != 1 {
		t.Errorf("tally: apart %v, divergent %v; want 2 tied-order, 1 row-content, 1 order-only", d.AmbiguousBy, d.ByClass)
	}
}

// A followed capture (a live shadow) lets go of old commits, and its run
// compares again at its end: with Remember, that comparison finds for each
// statement what the live one found while the commits were kept — an
// overlap, or none (a divergence) — and only a statement never judged
// before is Forgotten. Without it, every difference older than the bound
// became ambiguous at the end although the live count had it divergent.
func TestAFinalComparisonAfterForgetFindsWhatTheLiveOneFound(t *testing.T) {
	cs := NewCommits()
	cs.Remember()
	cs.Add(2, 100, 110, []string{"t"}, false)
	src := fakeSource{
		1: {Session: 1, SQL: "SELECT v FROM t", Digest: "s", From: 90, To: 105, Tables: []string{"t"}},  // overlapped session 2's commit
		2: {Session: 1, SQL: "SELECT v FROM t", Digest: "s", From: 200, To: 210, Tables: []string{"t"}}, // after it
		3: {Session: 1, SQL: "SELECT v FROM t", Digest: "s", From: 300, To: 310, Tables: []string{"t"}}, // not judged live
	}
	live := NewTally(4, cs, src)
	live.Note(1, Content, false, OrderKept, "1 rows", "1 rows")
	live.Note(2, Content, false, OrderKept, "1 rows", "1 rows")
	if d := live.D; d.ByClass[Content] != 1 || d.AmbiguousBy[ReasonCommitOverlap] != 1 {
		t.Fatalf("live: %+v; want 1 divergent, 1 commit-overlap", d)
	}
	cs.Forget(1000)
	final := NewTally(4, cs, src)
	for k := uint64(1); k <= 3; k++ {
		final.Note(k, Content, false, OrderKept, "1 rows", "1 rows")
	}
	d := final.D
	if d.Compared != 3 || d.ByClass[Content] != 1 || d.Ambiguous != 2 || d.AmbiguousBy[ReasonCommitOverlap] != 2 {
		t.Fatalf("final: compared %d, divergent %v, apart %v; want 3, 1 row-content (seq 2, as live), 2 commit-overlap (seq 1 as live, seq 3 forgotten)", d.Compared, d.ByClass, d.AmbiguousBy)
	}
	for _, sm := range d.Samples {
		switch {
		case sm.Seq == 1 && !strings.Contains(sm.Why, "session 2 on t"):
			t.Errorf("seq 1 apart because %q; want session 2's commit on t named", sm.Why)
		case sm.Seq == 2 && sm.Ambiguous:
			t.Errorf("seq 2 counted apart (%q); want the divergence the live comparison found", sm.Why)
		case sm.Seq == 3 && !strings.Contains(sm.Why, "still keeps"):
			t.Errorf("seq 3 apart because %q; want the commits no longer kept", sm.Why)
		}
	}
}

// A difference from the capture on a table a skipped write reached
// earlier is ambiguous ("not-replayed") until the table starts over; on
// other tables, before the gap, or after the reset, it is a divergence.
func TestGapsMakeLaterReadsAmbiguous(t *testing.T) {
	g := NewGaps()
	g.Add(9, 1000, []string{"db.t"}) // LOAD DATA LOCAL into db.t at 1000
	g.Reset(3000, []string{"db.t"})  // DROP TABLE db.t at 3000
	g.Reset(500, []string{"db.u"})   // a table without gaps: nothing to forget
	g.Add(4, 4000, []string{"db.t", "db.u"})
	if g.Len() != 3 {
		t.Fatalf("Len %d, want 3", g.Len())
	}
	for _, c := range []struct {
		to     int64
		tables []string
		want   string
	}{
		{900, []string{"db.t"}, ""},             // before the gap
		{1000, []string{"db.t"}, ""},            // at the gap's own start: itself
		{2000, []string{"db.t"}, "9 db.t 1000"}, // after it
		{2000, []string{"db.v", "db.t"}, "9 db.t 1000"},
		{2000, []string{"db.u"}, ""}, // another table
		{3500, []string{"db.t"}, ""}, // after the table started over
		{4500, []string{"db.u"}, "4 db.u 4000"},
	} {
		got := ""
		if gap, ok := g.Before(c.to, c.tables); ok {
			got = fmt.Sprintf("%d %s %d", gap.Session, gap.Table, gap.Start)
		}
		if got != c.want {
			t.Errorf("Before(%d, %v) = %q, want %q", c.to, c.tables, got, c.want)
		}
	}

	src := fakeSource{
		2: {Session: 1, SQL: "SELECT * FROM t", Digest: "d", From: 1900, To: 2000, Tables: []string{"db.t"}},
		5: {Session: 1, SQL: "SELECT * FROM t", Digest: "d", From: 3400, To: 3500, Tables: []string{"db.t"}},
	}
	tl := NewTally(5, nil, src)
	tl.Gaps = g
	tl.Note(2, RowCount, false, OrderKept, "1 rows", "0 rows")
	tl.Note(5, RowCount, false, OrderKept, "1 rows", "0 rows")
	d := tl.D
	if d.Ambiguous != 1 || d.AmbiguousBy[ReasonNotReplayed] != 1 || d.ByClass[RowCount] != 1 || d.Samples[0].Class != AfterSkip {
		t.Fatalf("tally %+v", d)
	}
	if !strings.Contains(d.Samples[0].Why, "session 9 wrote to db.t") {
		t.Errorf("sample says %q", d.Samples[0].Why)
	}
	var nilGaps *Gaps
	if _, ok := nilGaps.Before(5000, []string{"db.t"}); ok {
		t.Error("nil Gaps found a gap")
	}
}

// A write of values each server chooses (UUID(), RAND() …): a difference
// after it on a table it wrote is counted apart in either comparison
// (the tally of two targets has no Gaps), with the writer named; one
// before it, or on another table, stays the engine's.
func TestChosenValuesMakeLaterDifferencesApart(t *testing.T) {
	ch := NewGaps()
	ch.Add(3, 1000, []string{"db.t"}) // INSERT INTO db.t VALUES (UUID())
	src := fakeSource{
		1: {Session: 1, SQL: "SELECT u FROM t", Digest: "d", From: 800, To: 900, Tables: []string{"db.t"}},
		2: {Session: 1, SQL: "SELECT u FROM t", Digest: "d", From: 1900, To: 2000, Tables: []string{"db.t"}},
		3: {Session: 1, SQL: "SELECT v FROM w", Digest: "e", From: 1900, To: 2000, Tables: []string{"db.w"}},
	}
	tl := NewTally(5, nil, src)
	tl.Chosen = ch
	for k := uint64(1); k <= 3; k++ {
		tl.Note(k, Content, false, OrderKept, "1 rows", "1 rows")
	}
	d := tl.D
	if d.Compared != 3 || d.ByClass[Content] != 2 || d.Ambiguous != 1 || d.AmbiguousBy[ReasonChosenValues] != 1 || len(d.AmbiguousBy) != 1 {
		t.Fatalf("tally: compared %d, divergent %v, ambiguous %d %v; want 3, 2 row-content, 1 nondeterministic-write", d.Compared, d.ByClass, d.Ambiguous, d.AmbiguousBy)
	}
	var apart []store.Sample
	for _, sm := range d.Samples {
		if sm.Ambiguous {
			apart = append(apart, sm)
		}
	}
	if len(apart) != 1 || apart[0].Seq != 2 || apart[0].Class != ReasonChosenValues || !strings.Contains(apart[0].Why, "session 3 wrote db.t") {
		t.Errorf("samples counted apart: %+v; want seq 2, %s, naming session 3 and db.t", apart, ReasonChosenValues)
	}
}

// A write that failed on the compared side (a shadow's engine rolled its
// transaction back) while the capture's succeeded: later differences on
// its tables are counted apart and say so; the failed write itself, and
// reads before it, are not.
func TestFailedWriteMakesLaterReadsAmbiguous(t *testing.T) {
	g := NewGaps()
	g.AddFailed(7, 2000, []string{"db.t", "db.u"}) // its captured end: 2000
	src := fakeSource{
		1: {Session: 7, SQL: "UPDATE t SET c=1 WHERE id=5", Digest: "w", From: 1900, To: 2000, Tables: []string{"db.t"}},
		2: {Session: 3, SQL: "SELECT c FROM u WHERE id=5", Digest: "r", From: 2100, To: 2200, Tables: []string{"db.u"}},
		3: {Session: 3, SQL: "SELECT c FROM v WHERE id=5", Digest: "r2", From: 2100, To: 2200, Tables: []string{"db.v"}},
	}
	tl := NewTally(5, nil, src)
	tl.Gaps = g
	tl.Note(1, ErrorVsOK, false, OrderKept, "ok", "error 1213")
	tl.Note(2, Content, false, OrderKept, "1 rows", "1 rows")
	tl.Note(3, Content, false, OrderKept, "1 rows", "1 rows")
	d := tl.D
	if d.ByClass[ErrorVsOK] != 1 || d.ByClass[Content] != 1 || d.AmbiguousBy[ReasonNotReplayed] != 1 || d.Ambiguous != 1 {
		t.Fatalf("tally %+v", d)
	}
	for _, s := range d.Samples {
		if s.Seq == 2 && !strings.Contains(s.Why, "a write of session 7 to db.u before it failed on this side and succeeded in the capture") {
			t.Errorf("sample says %q", s.Why)
		}
	}
}

// Failed transactions and changes out of order explain later differences
// on the tables they wrote, on their side: a failed transaction not its
// own statements (the failure is the engine's verdict), a change out of
// order every later statement, its own session's too.
func TestFailuresExplainLaterDifferences(t *testing.T) {
	fs := NewFailures()
	fs.Add("b", store.FailedTrx{Session: 1, FirstSeq: 10, FailedSeq: 12, LastSeq: 13, Code: 1213, Attempts: 4, Tables: []string{"db.t"}, At: 100})
	fs.AddReorder("b", store.Reorder{Session: 2, Seq: 20, Tables: []string{"db.u"}, At: 200})
	fs.AddReorder("b", store.Reorder{Session: 6, Seq: 60, Tables: []string{"db.w"}, At: 300, Kind: store.ReorderYielded})
	for _, c := range []struct {
		key, session uint64
		to           int64
		tables       []string
		reason       string
		mayHave      bool
	}{
		{store.OutcomeSeq(11, 0), 1, 150, []string{"db.t"}, "", false},              // the failed transaction's own
		{store.OutcomeSeq(30, 0), 3, 150, []string{"db.t"}, ReasonFailedTrx, false}, // after it, same table
		{store.OutcomeSeq(30, 0), 3, 90, []string{"db.t"}, "", false},               // ended before it
		{store.OutcomeSeq(30, 0), 3, 150, []string{"db.v"}, "", false},              // another table
		{store.OutcomeSeq(21, 0), 2, 250, []string{"db.u"}, ReasonReplayOrder, false},
		{store.OutcomeSeq(40, 0), 5, 250, []string{"db.u"}, ReasonReplayOrder, false},
		{store.OutcomeSeq(40, 0), 5, 150, []string{"db.u"}, "", false},
		// A transaction that yielded only may have let a change go
		// ahead: asked for apart, after the causes known for certain.
		{store.OutcomeSeq(70, 0), 7, 350, []string{"db.w"}, "", false},
		{store.OutcomeSeq(70, 0), 7, 350, []string{"db.w"}, ReasonReplayOrder, true},
		{store.OutcomeSeq(70, 0), 7, 350, []string{"db.u"}, "", true},
	} {
		why, reason := fs.Before(c.key, c.session, c.to, c.tables, c.mayHave)
		if reason != c.reason || (why == "") != (c.reason == "") {
			t.Errorf("Before(seq %d, session %d, to %d, %v, %v) = %q, %q; want reason %q", c.key, c.session, c.to, c.tables, c.mayHave, why, reason, c.reason)
		}
	}
	if why, _ := fs.Before(store.OutcomeSeq(70, 0), 7, 350, []string{"db.w"}, true); !strings.Contains(why, "rolled back a transaction of session 6 (from seq 60) on b and ran it again") {
		t.Errorf("a yielded transaction's why: %q", why)
	}
	if got := fs.Explain("db.t"); !strings.Contains(got, "failed for good on b (1213 after 4 attempts)") {
		t.Errorf("Explain(db.t) = %q", got)
	}
	if got := fs.Explain("db.u"); !strings.Contains(got, "change of session 2 (seq 20) to b ahead of a conflicting change") {
		t.Errorf("Explain(db.u) = %q", got)
	}
	if got := fs.Explain("db.v"); got != "" {
		t.Errorf("Explain(db.v) = %q, want nothing", got)
	}
	// A yield only may explain a table: ExplainCertain leaves it out.
	if got := fs.Explain("db.w"); !strings.Contains(got, "rolled back a transaction of session 6 (from seq 60) on b and ran it again") {
		t.Errorf("Explain(db.w) = %q", got)
	}
	if got := fs.ExplainCertain("db.w"); got != "" {
		t.Errorf("ExplainCertain(db.w) = %q, want nothing: the yield only may have lost the order", got)
	}
	if got := fs.ExplainCertain("db.t"); !strings.Contains(got, "failed for good on b (1213 after 4 attempts)") {
		t.Errorf("ExplainCertain(db.t) = %q", got)
	}
	if fs.Len() != 3 {
		t.Errorf("Len %d, want 3", fs.Len())
	}
}

// Writers says whether a session other than the reader writes one of its
// tables, keeping two writers per table at most.
func TestWritersOtherSession(t *testing.T) {
	w := NewWriters()
	w.Add("db.t", 1)
	w.Add("db.u", 2)
	w.Add("db.u", 3)
	w.Add("db.u", 4) // not kept: two are enough
	for _, c := range []struct {
		session uint64
		tables  []string
		want    bool
	}{
		{1, []string{"db.t"}, false}, // its own writes only
		{2, []string{"db.t"}, true},
		{2, []string{"db.u"}, true}, // 3 writes it too
		{4, []string{"db.u"}, true},
		{1, []string{"db.v"}, false},
	} {
		if _, got := w.Other(c.session, c.tables); got != c.want {
			t.Errorf("Other(%d, %v) = %v, want %v", c.session, c.tables, got, c.want)
		}
	}
	if !w.Several("db.u") || w.Several("db.t") || len(w.by["db.u"]) != 2 {
		t.Errorf("Several: u %v t %v, %d kept for u", w.Several("db.u"), w.Several("db.t"), len(w.by["db.u"]))
	}
	w.Add(AnyTable, 9)
	if _, got := w.Other(1, []string{"db.v"}); !got {
		t.Error("a session writing what the analysis cannot name writes any table")
	}
}

// The failing statement of a transaction that failed for good on one side
// is a verdict on the engines' locking; when the capture's times are a
// server log's whole seconds, replay could not keep the order locks were
// taken in, and it is counted apart (coarse-times).
func TestFailedTransactionUnderCoarseTimesIsCountedApart(t *testing.T) {
	failed := store.Outcome{Seq: 1, Flags: store.OutcomeError | store.OutcomeTrxFailed, ErrCode: 1213, Results: 1}
	ok := store.Outcome{Seq: 1, Affected: 1, Results: 1}
	src := fakeSource{1: {Session: 1, SQL: "DELETE FROM t WHERE id = 1", Digest: "d", From: 900, To: 2000, Tables: []string{"db.t"}, Locked: true}}
	for _, coarse := range []string{"", "the capture's times are to 1s"} {
		tl := NewTally(4, nil, src)
		tl.Coarse = coarse
		if err := Join(outcomes(failed), outcomes(ok), &tl.D, func(b, o *store.Outcome) {
			class, nondet := Classify(b, o)
			tl.Note(b.Seq, class, nondet, OrderOf(b, o), Describe(b), Describe(o))
		}); err != nil {
			t.Fatal(err)
		}
		d := tl.D
		switch {
		case coarse == "" && (d.Total() != 1 || d.ByClass[ErrorVsOK] != 1 || d.Ambiguous != 0):
			t.Errorf("precise times: %+v, want 1 error-vs-ok divergence", d)
		case coarse != "" && (d.Total() != 0 || d.AmbiguousBy[ReasonCoarseTimes] != 1):
			t.Errorf("coarse times: %+v, want it counted apart (coarse-times)", d)
		}
	}
}

// A write that bypassed the proxy is a cause known for certain: it is
// named before a transaction that yielded, which only may have let a
// change go ahead; a change sent ahead (known) is named before both.
// (The production path's shadow, which yielded once, labelled the reads
// after the write around the proxy as the yield's.)
func TestJudgeNamesTheCertainCauseFirst(t *testing.T) {
	fs := NewFailures()
	fs.AddReorder("shadow", store.Reorder{Session: 5, Seq: 377, Tables: []string{"sb.sbtest1"}, At: 100, Kind: store.ReorderYielded})
	by := NewBypassed()
	by.Add(BypassedWrite{Table: "sb.sbtest1", At: 150, GTID: "0-1-9", Transactions: 1})
	tl := &Tally{Failed: fs, Bypassed: by}
	st := Statement{Session: 3, From: 180, To: 200, Tables: []string{"sb.sbtest1"}}
	if _, reason := tl.Judge(store.OutcomeSeq(583, 0), st, true, OrderKept); reason != ReasonBypassed {
		t.Errorf("after a bypassed write and a yield: %q, want %q", reason, ReasonBypassed)
	}
	st.Tables = []string{"sb.sbtest2"}
	fs.AddReorder("shadow", store.Reorder{Session: 5, Seq: 400, Tables: []string{"sb.sbtest2"}, At: 100, Kind: store.ReorderYielded})
	if why, reason := tl.Judge(store.OutcomeSeq(583, 0), st, true, OrderKept); reason != ReasonReplayOrder || !strings.Contains(why, "rolled back a transaction of session 5 (from seq 400)") {
		t.Errorf("after a yield alone: %q, %q", why, reason)
	}
	fs.AddReorder("shadow", store.Reorder{Session: 4, Seq: 390, Tables: []string{"sb.sbtest1"}, At: 120})
	st.Tables = []string{"sb.sbtest1"}
	if why, reason := tl.Judge(store.OutcomeSeq(583, 0), st, true, OrderKept); reason != ReasonReplayOrder || !strings.Contains(why, "ahead of a conflicting change") {
		t.Errorf("after a change sent ahead, a bypassed write and a yield: %q, %q", why, reason)
	}
}
