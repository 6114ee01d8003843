package replay

import (
	"testing"
	"time"

	"github.com/tandemdb/tandem/compare"
	"github.com/tandemdb/tandem/sandbox/sandboxtest"
	"github.com/tandemdb/tandem/store"
	"github.com/tandemdb/tandem/wire"
)

// Rows tied on an ORDER BY come in the server's order, and a LIMIT picks
// among them as the server likes: a difference from the capture in order
// only, or in content under a LIMIT, of a statement whose ORDER BY holds
// no unique key is counted apart (tied-order), never as the engine's.
// Rows 1 and 2 tie on k; the capture (made up here) had them as 2, 1. An
// ORDER BY of the primary key, or of a unique key of NOT NULL columns
// (e), leaves no ties: its difference in order (made up too) is a
// divergence; one of a unique key with a nullable column (n) does not,
// as its NULLs repeat. The ORDER BY e used to be counted apart too: only
// the primary key was read.
func TestTiedRowsOfAnOrderByAreCountedApart(t *testing.T) {
	srv := sandboxtest.Server(t, "innodb")
	db, dsn := srv.FreshDB(t)
	exec(t, db, "CREATE TABLE t (id INT PRIMARY KEY, k INT, e VARCHAR(10) NOT NULL UNIQUE, n INT UNIQUE)",
		"INSERT INTO t VALUES (1, 5, 'a', NULL), (2, 5, 'b', NULL), (3, 7, 'c', 3)")
	// rows is a captured result of rows of text columns, in that order,
	// with the checksums --capture-results checksum gives them.
	rows := func(rs ...[]string) store.Response {
		var s wire.RowSums
		for _, r := range rs {
			var p []byte
			for _, v := range r {
				p = append(append(p, byte(len(v))), v...)
			}
			s.AddRow(p)
		}
		return store.Response{Kind: store.RespResultSet, Columns: uint32(len(rs[0])), Rows: uint64(len(rs)), HasChecksums: true, Ordered: s.Ordered, Unordered: s.Unordered}
	}
	// The capture had the tied rows the other way round from what this
	// server gives (which way that is depends on its plan: a LIMIT's
	// priority queue differs from a full sort).
	other := func(sql string) string {
		var id string
		if err := db.QueryRow(sql).Scan(&id); err != nil {
			t.Fatal(err)
		}
		if id == "1" {
			return "2"
		}
		return "1"
	}
	first, pick := other("SELECT id FROM t ORDER BY k"), other("SELECT id FROM t ORDER BY k LIMIT 1")
	firstNull := other("SELECT id FROM t ORDER BY n")
	second0 := func(id string) string { return map[string]string{"1": "2", "2": "1"}[id] }
	second := second0(first)
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	n := 0
	q := func(sql string, resp store.Response) store.Record {
		n++
		return store.Record{Session: 1, Start: at.Add(time.Duration(n) * time.Millisecond), Kind: store.KindQuery, Schema: "shop", SQL: sql, Resp: resp}
	}
	capDir := writeRecords(t, []store.Record{
		{Session: 1, Start: at, Kind: store.KindConnect, User: "app", Schema: "shop", Resp: store.Response{Kind: store.RespOK}},
		q("SELECT id, k FROM t ORDER BY k", rows([]string{first, "5"}, []string{second, "5"}, []string{"3", "7"})), // apart: order of tied rows
		q("SELECT id FROM t ORDER BY k LIMIT 1", rows([]string{pick})),                                             // apart: LIMIT's pick among them
		q("SELECT id, k FROM t ORDER BY id", rows([]string{"2", "5"}, []string{"1", "5"}, []string{"3", "7"})),     // divergent: no ties
		q("SELECT id FROM t ORDER BY k, id LIMIT 1", rows([]string{"2"})),                                          // divergent: no ties
		q("SELECT id FROM t ORDER BY e", rows([]string{"2"}, []string{"1"}, []string{"3"})),                        // divergent: a unique key
		q("SELECT id FROM t ORDER BY n", rows([]string{firstNull}, []string{second0(firstNull)}, []string{"3"})),   // apart: NULLs tie
		{Session: 1, Start: at.Add(time.Second), Kind: store.KindQuit},
	})
	rep := replayRun(t, capDir, nil, tgt(t, "a", dsn, ""))
	c := rep.VsCapture[0]
	if c.Compared != 6 || c.Total() != 3 || c.ByClass[compare.Order] != 2 || c.ByClass[compare.Content] != 1 ||
		c.Ambiguous != 3 || c.AmbiguousBy[compare.ReasonTiedOrder] != 3 || len(c.AmbiguousBy) != 1 {
		t.Errorf("vs capture: compared %d, divergent %d %v, apart %d %v; want 6, 3 (2 order-only, 1 row-content: the ORDER BYs of a key), 3 tied-order",
			c.Compared, c.Total(), c.ByClass, c.Ambiguous, c.AmbiguousBy)
	}
	for _, s := range c.Samples {
		if apart := s.Class == compare.ReasonTiedOrder; apart != (s.Seq == 2 || s.Seq == 3 || s.Seq == 7) {
			t.Errorf("sample seq %d (%s) class %s: want tied-order for seqs 2, 3 and 7 only", s.Seq, s.Statement, s.Class)
		}
	}
}
