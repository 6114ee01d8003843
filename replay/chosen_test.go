package replay

import (
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/tandemdb/tandem/compare"
	"github.com/tandemdb/tandem/store"
	"github.com/tandemdb/tandem/wire"
)

// A write of values each server chooses anew (UUID() here) leaves every
// target's rows its own: the reads of that table after it, and of a table
// filled from it, differ between two identical targets and from the
// capture, and are counted apart (nondeterministic-write), never as the
// engine's; a table without such a write is compared as ever, and a table
// truncated since starts over (its difference from the capture, made up
// here, counts again). A table CREATE … SELECT fills with UUID()s is one
// such; a table named user is written by no USER() call.
func TestNondeterministicWritesAreCountedApart(t *testing.T) {
	ta, tb, dba, dbb := twoInnoDB(t)
	for _, db := range []*sql.DB{dba, dbb} {
		exec(t, db, "CREATE TABLE made (id INT PRIMARY KEY, u VARCHAR(40))",
			"CREATE TABLE copied (id INT PRIMARY KEY, u VARCHAR(40))",
			"CREATE TABLE plain (id INT PRIMARY KEY, u VARCHAR(40))",
			"CREATE TABLE user (id INT PRIMARY KEY, u VARCHAR(40))")
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	// rows is a captured result of one VARCHAR row holding v, with the
	// checksums the proxy's --capture-results checksum gives it.
	rows := func(v string) store.Response {
		var s wire.RowSums
		s.AddRow(append([]byte{byte(len(v))}, v...))
		return store.Response{Kind: store.RespResultSet, Columns: 1, Rows: 1, HasChecksums: true, Ordered: s.Ordered, Unordered: s.Unordered}
	}
	ok := store.Response{Kind: store.RespOK, AffectedRows: 1}
	n := 0
	q := func(sql string, resp store.Response) store.Record {
		n++
		return store.Record{Session: 1, Start: at.Add(time.Duration(n) * 10 * time.Millisecond), Kind: store.KindQuery, SQL: sql, Resp: resp}
	}
	primaryUUID := "6ccd780c-baba-1026-9564-5b8c656024db"
	capDir := writeRecords(t, []store.Record{
		{Session: 1, Start: at, Kind: store.KindConnect, User: "app", Resp: store.Response{Kind: store.RespOK}},
		q("INSERT INTO made VALUES (1, UUID())", ok),
		q("INSERT INTO copied SELECT id, u FROM made", ok),
		q("INSERT INTO plain VALUES (1, 'kept')", ok),
		q("SELECT u FROM made WHERE id = 1", rows(primaryUUID)),   // apart
		q("SELECT u FROM copied WHERE id = 1", rows(primaryUUID)), // apart: filled from made
		q("SELECT u FROM plain WHERE id = 1", rows("kept")),       // the same everywhere
		q("TRUNCATE TABLE made", store.Response{Kind: store.RespOK}),
		q("INSERT INTO made VALUES (2, 'fixed')", ok),
		q("SELECT u FROM made WHERE id = 2", rows("other")), // made started over: a divergence from the capture
		q("CREATE TABLE made2 AS SELECT id, UUID() AS u FROM plain", ok),
		q("SELECT u FROM made2 WHERE id = 1", rows(primaryUUID)), // apart: CREATE … SELECT chose them
		q("INSERT INTO user (id, u) VALUES (1, 'u1')", ok),       // a table named user: no USER() call
		q("SELECT u FROM user WHERE id = 1", rows("wrong")),      // a divergence from the capture
		{Session: 1, Start: at.Add(time.Second), Kind: store.KindQuit},
	})
	rep := replayRun(t, capDir, nil, ta, tb)
	for i, tr := range rep.Targets {
		if tr.Errors != 0 {
			t.Fatalf("%s: %d errors %v", tr.Name, tr.Errors, tr.ErrorCodes)
		}
		c := rep.VsCapture[i]
		// Compared: the 13 statements; the two writes of UUID() for
		// errors only.
		if c.Compared != 13 || c.Total() != 2 || c.ByClass[compare.Content] != 2 || c.Ambiguous != 3 || c.AmbiguousBy[compare.ReasonChosenValues] != 3 || len(c.AmbiguousBy) != 1 {
			t.Errorf("%s vs capture: compared %d, divergent %d %v, apart %d %v; want 13 compared, 2 row-content (seqs 10, 14), 3 nondeterministic-write",
				tr.Name, c.Compared, c.Total(), c.ByClass, c.Ambiguous, c.AmbiguousBy)
		}
		var seqs []uint64
		for _, s := range c.Samples {
			if s.Class == compare.ReasonChosenValues && strings.Contains(s.Why, "session 1 wrote") {
				seqs = append(seqs, s.Seq)
			}
		}
		if len(seqs) != 3 || seqs[0] != 5 || seqs[1] != 6 || seqs[2] != 12 {
			t.Errorf("%s vs capture: samples counted apart at seqs %v; want [5 6 12]: %+v", tr.Name, seqs, c.Samples)
		}
	}
	d := rep.Divergences[0]
	// Between targets the connect is compared too.
	if d.Compared != 14 || d.Total() != 0 || d.Ambiguous != 3 || d.AmbiguousBy[compare.ReasonChosenValues] != 3 || d.Nondeterministic != 2 {
		t.Errorf("b vs a: compared %d, divergent %d %v, apart %d %v, nondeterministic %d; want 14, 0, 3 nondeterministic-write, 2",
			d.Compared, d.Total(), d.ByClass, d.Ambiguous, d.AmbiguousBy, d.Nondeterministic)
	}
	// The targets did choose their own: the rows are not the same.
	var ua, ub string
	if err := dba.QueryRow("SELECT u FROM copied WHERE id = 1").Scan(&ua); err != nil {
		t.Fatal(err)
	}
	if err := dbb.QueryRow("SELECT u FROM copied WHERE id = 1").Scan(&ub); err != nil {
		t.Fatal(err)
	}
	if ua == ub || len(ua) != 36 {
		t.Errorf("copied rows %q and %q: want two different UUIDs", ua, ub)
	}
}
