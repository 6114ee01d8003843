package replay

import (
	"database/sql"
	"strings"
	"testing"

	"github.com/tandemdb/tandem/compare"
	"github.com/tandemdb/tandem/store"
	"github.com/tandemdb/tandem/wire"
)

// A write that fails on one target where the capture's succeeded is that
// target's verdict, counted; what differs on its table after it follows
// from it, and is counted apart (not-replayed, "a write … failed on b"),
// in both comparisons, as a live shadow does. Here b refuses session 1's
// second INSERT (a row with its key was there: the engine difference this
// stands for), and the SELECT after it differs too. The SELECT used to be
// counted as a second difference of the engine's.
func TestAWriteThatFailedOnATargetExplainsWhatFollows(t *testing.T) {
	// In a transaction, with --concurrency too, where a statement's
	// interval runs to its transaction's end: the failed INSERT used to
	// explain itself there, and no difference was counted.
	modes := []struct {
		name string
		mod  func(*Config)
	}{{"sessions", nil}, {"--concurrency 1", func(c *Config) { c.Concurrency = 1 }}}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			ta, tb, dba, dbb := twoInnoDB(t)
			exec(t, dba, "CREATE TABLE w (id INT PRIMARY KEY, v INT)")
			exec(t, dbb, "CREATE TABLE w (id INT PRIMARY KEY, v INT)", "INSERT INTO w VALUES (2, 99)")
			at, q := session1()
			ok, ins := store.Response{Kind: store.RespOK}, store.Response{Kind: store.RespOK, AffectedRows: 1}
			capDir := writeRecords(t, []store.Record{
				{Session: 1, Start: at(0), Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
				q(1, "BEGIN", ok),
				q(2, "INSERT INTO w VALUES (1, 1)", ins),
				q(3, "INSERT INTO w VALUES (2, 2)", ins),
				q(4, "COMMIT", ok),
				q(5, "SELECT v FROM w ORDER BY id", textRows("1", "2")),
				{Session: 1, Start: at(6), Kind: store.KindQuit},
			})
			rep := replayRun(t, capDir, func(c *Config) {
				c.Speed = 1
				if m.mod != nil {
					m.mod(c)
				}
			}, ta, tb)
			var text strings.Builder
			if err := rep.WriteText(&text); err != nil {
				t.Fatal(err)
			}
			if want := "writes that failed on b where the capture's succeeded: 1; shop.w lack them"; !strings.Contains(text.String(), want) {
				t.Errorf("the text report does not say %q:\n%s", want, text.String())
			}
			if c := rep.VsCapture[0]; c.Compared != 5 || c.Total() != 0 || c.Ambiguous != 0 {
				t.Errorf("a vs capture: compared %d, divergent %v, apart %v; want 5 as captured", c.Compared, c.ByClass, c.AmbiguousBy)
			}
			for name, c := range map[string]*store.Divergences{"b vs capture": rep.VsCapture[1], "b vs a": rep.Divergences[0]} {
				if c.Total() != 1 || c.ByClass[compare.ErrorVsOK] != 1 || c.Ambiguous != 1 || c.AmbiguousBy[compare.ReasonNotReplayed] != 1 {
					t.Errorf("%s: divergent %v, apart %v; want the INSERT error-vs-ok, the SELECT apart (not-replayed)", name, c.ByClass, c.AmbiguousBy)
				}
				for _, s := range c.Samples {
					if strings.HasPrefix(s.Statement, "SELECT") && !strings.Contains(s.Why, "failed on b") {
						t.Errorf("%s: the SELECT's sample says %q (%s); want it to name the write that failed on b", name, s.Why, s.Class)
					}
				}
			}
		})
	}
}

// A write every side lacks leaves them alike: it explains a difference
// with the capture, not one between them.
func TestAWriteBothSidesLackExplainsNoDifferenceBetweenThem(t *testing.T) {
	failed := store.Reorder{Session: 1, Seq: 5, At: 100, Tables: []string{"shop.w"}, Kind: store.ReorderFailed}
	one := &store.TargetResult{Reorders: []store.Reorder{failed}}
	both := failuresOf(map[string]*store.TargetResult{"a": one, "b": {Reorders: []store.Reorder{failed}}})
	if why, _ := both.Before(store.OutcomeSeq(9, 0), 1, 200, []string{"shop.w"}, false); why != "" {
		t.Errorf("failed on both sides: a later difference between them is explained by %q; want nothing", why)
	}
	oneSide := failuresOf(map[string]*store.TargetResult{"a": one, "b": {}})
	if why, reason := oneSide.Before(store.OutcomeSeq(9, 0), 1, 200, []string{"shop.w"}, false); reason != compare.ReasonNotReplayed {
		t.Errorf("failed on a only: explained by %q (%s); want not-replayed", why, reason)
	}
	if why, _ := oneSide.Before(store.OutcomeSeq(5, 0), 1, 200, []string{"shop.w"}, false); why != "" {
		t.Errorf("the failed write itself is explained by %q; want nothing (it is the target's difference)", why)
	}
	vsCapture := failuresOf(map[string]*store.TargetResult{"b": {Reorders: []store.Reorder{failed}}})
	if _, reason := vsCapture.Before(store.OutcomeSeq(9, 0), 1, 200, []string{"shop.w"}, false); reason != compare.ReasonNotReplayed {
		t.Errorf("one side against the capture: reason %q; want not-replayed", reason)
	}
}

// A table DDL replay did not send to a target (its engine could not be
// set in it: --on-unrewritable skip) leaves that target's table other
// than the capture's: what differs there after it is counted apart (not
// as the engine's). The capture here is made up: a CREATE TABLE whose
// definitions do not close, which the capture's server "took"; neither
// target can rewrite it. Before, each later INSERT counted as a
// difference of the engine's (error-vs-ok: no table).
func TestADDLNotSentExplainsWhatFollows(t *testing.T) {
	ta, tb, _, _ := twoInnoDB(t)
	at, q := session1()
	ok, ins := store.Response{Kind: store.RespOK}, store.Response{Kind: store.RespOK, AffectedRows: 1}
	capDir := writeRecords(t, []store.Record{
		{Session: 1, Start: at(0), Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
		q(1, "CREATE TABLE w (id INT PRIMARY KEY, v INT", ok),
		q(2, "INSERT INTO w VALUES (1, 1)", ins),
		q(3, "INSERT INTO w VALUES (2, 2)", ins),
		{Session: 1, Start: at(4), Kind: store.KindQuit},
	})
	rep := replayRun(t, capDir, func(c *Config) { c.Speed, c.OnUnrewritable = 1, UnrewritableSkip }, ta, tb)
	for i, c := range rep.VsCapture {
		if tr := rep.Targets[i]; tr.Skipped != 1 || tr.Errors != 2 {
			t.Errorf("%s: skipped %d %v, %d errors; want the DDL skipped, both INSERTs failing", tr.Name, tr.Skipped, tr.SkippedBy, tr.Errors)
		}
		if c.Total() != 0 || c.Ambiguous != 2 || c.AmbiguousBy[compare.ReasonNotReplayed] != 2 {
			t.Errorf("%s vs capture: divergent %v, apart %v; want none divergent, the 2 INSERTs apart (not-replayed)", rep.Targets[i].Name, c.ByClass, c.AmbiguousBy)
		}
	}
	if c := rep.Divergences[0]; c.Total() != 0 {
		t.Errorf("b vs a: divergent %v; want none", c.ByClass)
	}
}

// A failed CALL, whose writes the analysis cannot name, explains no
// difference that follows: it used to stand for every table, so every
// later difference of the run on the target was counted apart as
// not-replayed, a real one too. Here b's copy of the procedure fails
// (its w already holds the row), and b's c holds another value than the
// capture's: that difference is counted.
func TestAFailedCallExplainsNothingElse(t *testing.T) {
	ta, tb, dba, dbb := twoInnoDB(t)
	for db, v := range map[*sql.DB]string{dba: "x", dbb: "y"} {
		exec(t, db, "CREATE TABLE w (id INT PRIMARY KEY, v INT)", "CREATE TABLE c (id INT PRIMARY KEY, v VARCHAR(5))",
			"INSERT INTO c VALUES (1, '"+v+"')", "CREATE PROCEDURE p() BEGIN INSERT INTO w VALUES (5, 5); END")
	}
	exec(t, dbb, "INSERT INTO w VALUES (5, 0)")
	at, q := session1()
	ok := store.Response{Kind: store.RespOK}
	capDir := writeRecords(t, []store.Record{
		{Session: 1, Start: at(0), Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
		q(1, "CALL p()", store.Response{Kind: store.RespOK, AffectedRows: 1}),
		q(2, "SELECT v FROM c WHERE id = 1", textRows("x")),
		{Session: 1, Start: at(3), Kind: store.KindQuit},
	})
	rep := replayRun(t, capDir, nil, ta, tb)
	for name, c := range map[string]*store.Divergences{"b vs capture": rep.VsCapture[1], "b vs a": rep.Divergences[0]} {
		if c.Total() != 2 || c.ByClass[compare.ErrorVsOK] != 1 || c.ByClass[compare.Content] != 1 || c.Ambiguous != 0 {
			t.Errorf("%s: divergent %v, apart %v; want the CALL error-vs-ok and the SELECT row-content, none apart", name, c.ByClass, c.AmbiguousBy)
		}
	}
}

// textRows is a captured result of one text column holding rs, with the
// row checksums --capture-results checksum gives it.
func textRows(rs ...string) store.Response {
	var s wire.RowSums
	for _, r := range rs {
		s.AddRow(append([]byte{byte(len(r))}, r...))
	}
	return store.Response{Kind: store.RespResultSet, Columns: 1, Rows: uint64(len(rs)), HasChecksums: true, Ordered: s.Ordered, Unordered: s.Unordered}
}
