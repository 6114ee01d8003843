package replay

import (
	"bytes"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tandemdb/tandem/compare"
	"github.com/tandemdb/tandem/store"
)

// writeOpenAtStartCapture writes by hand what the recorder writes for a
// capture started on a running proxy: session 1 was open at the start,
// inside a transaction that had not written, with autocommit off and a
// statement prepared (synthetic records), then runs that transaction to
// its COMMIT and one statement more, and is still open at the stop;
// session 3 was open at the start too, with a SET the targets refuse;
// session 2 connects and quits during the capture.
func writeOpenAtStartCapture(t *testing.T) string {
	t.Helper()
	at := time.Now().Truncate(time.Millisecond)
	ms := func(n int) time.Time { return at.Add(time.Duration(n) * time.Millisecond) }
	syn, before, stop := store.FlagOpenAtStart, store.FlagBeforeStart, store.FlagOpenAtStop
	ok := store.Response{Kind: store.RespOK}
	row := store.Response{Kind: store.RespResultSet, Columns: 1, Rows: 1}
	long := func(n int64) []store.Value { return []store.Value{{Type: store.TypeLong, Int: n}} }
	recs := []store.Record{
		{Session: 1, Start: at, Kind: store.KindConnect, Flags: syn, User: "app", Schema: "shop", Resp: ok},                     // 1
		{Session: 1, Start: at, Kind: store.KindQuery, Flags: syn, Schema: "shop", SQL: "SET autocommit=0", Resp: ok},           // 2
		{Session: 1, Start: at, Kind: store.KindQuery, Flags: syn | before, Schema: "shop", SQL: "START TRANSACTION", Resp: ok}, // 3
		{Session: 1, Start: at, Kind: store.KindPrepare, Flags: syn, Schema: "shop", SQL: "SELECT c FROM t WHERE id=?", StmtID: 7, // 4
			Resp: store.Response{Kind: store.RespOK, Params: 1}},
		{Session: 3, Start: at, Kind: store.KindConnect, Flags: syn, User: "app", Schema: "shop", Resp: ok},                                                   // 5
		{Session: 3, Start: at, Kind: store.KindQuery, Flags: syn, Schema: "shop", SQL: "SET SESSION tandem_no_such_variable = 1", Resp: ok},                  // 6
		{Session: 2, Start: ms(1), Duration: time.Millisecond, Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},                                // 7
		{Session: 1, Start: ms(2), Duration: time.Millisecond, Kind: store.KindExecute, Flags: before, Schema: "shop", StmtID: 7, Params: long(1), Resp: row}, // 8
		// The transaction's snapshot began before the capture: there the
		// row was already changed; on the targets it is not.
		{Session: 1, Start: ms(4), Duration: time.Millisecond, Kind: store.KindQuery, Flags: before, Schema: "shop", SQL: "UPDATE t SET k = 5 WHERE id = 2", // 9
			Resp: store.Response{Kind: store.RespOK, AffectedRows: 0}},
		{Session: 1, Start: ms(6), Duration: time.Millisecond, Kind: store.KindQuery, Flags: before, Schema: "shop", SQL: "COMMIT", Resp: ok},          // 10
		{Session: 1, Start: ms(8), Duration: time.Millisecond, Kind: store.KindExecute, Schema: "shop", StmtID: 7, Params: long(2), Resp: row},         // 11
		{Session: 2, Start: ms(10), Duration: time.Millisecond, Kind: store.KindQuery, Schema: "shop", SQL: "SELECT k FROM t WHERE id = 3", Resp: row}, // 12
		{Session: 2, Start: ms(12), Kind: store.KindQuit},              // 13
		{Session: 1, Start: ms(14), Kind: store.KindQuit, Flags: stop}, // 14
		{Session: 3, Start: ms(14), Kind: store.KindQuit, Flags: stop}, // 15
	}
	return writeRecords(t, recs)
}

// writeRecords writes recs, in order, as a capture in a new temporary
// directory and returns it: a hand-made capture for a test.
func writeRecords(t *testing.T, recs []store.Record) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "cap")
	w, err := store.Create(dir, store.WriterOptions{Source: "replay test", NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range recs {
		if _, err := w.Append(&recs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// A capture started on a running proxy: the synthetic records rebuild the
// sessions open at its start on every target and are never compared with
// the capture; executes of a statement prepared before the start run
// (not skipped as unknown); a difference inside the transaction open at
// the start is counted apart (started-before-capture), never as an engine
// difference; a synthetic record that fails on a target is that target's
// error; the report says how the sessions began and ended.
func TestReplayOfSessionsOpenAtCaptureStart(t *testing.T) {
	ta, tb, dba, dbb := twoInnoDB(t)
	for _, db := range []*sql.DB{dba, dbb} {
		exec(t, db, "CREATE TABLE t (id INT PRIMARY KEY, c VARCHAR(20), k INT)",
			"INSERT INTO t VALUES (1, 'one', 1), (2, 'two', 2), (3, 'three', 3)")
	}
	rep := replayRun(t, writeOpenAtStartCapture(t), nil, ta, tb)

	for i, tr := range rep.Targets {
		c := rep.VsCapture[i]
		// Compared: the two executes, the UPDATE, the COMMIT and session
		// 2's SELECT; not the two synthetic SETs nor the START TRANSACTION.
		if c.Compared != 5 || c.Total() != 0 || c.Ambiguous != 1 || c.AmbiguousBy[compare.ReasonStartedBefore] != 1 || len(c.AmbiguousBy) != 1 {
			t.Errorf("%s vs capture: compared %d, divergent %v, ambiguous %d %v; want 5 compared, 0 divergent, 1 ambiguous (started-before-capture)",
				tr.Name, c.Compared, c.ByClass, c.Ambiguous, c.AmbiguousBy)
		}
		// Connects, SETs, the START TRANSACTION and the prepare: run, not
		// compared; the SET of an unknown variable failed.
		if c.OpenAtStart != 6 || c.OpenAtStartFailed != 1 || c.Skipped != 0 || c.Unavailable != 0 {
			t.Errorf("%s vs capture: open at start %d (failed %d), skipped %d, unavailable %d; want 6 (1), 0, 0",
				tr.Name, c.OpenAtStart, c.OpenAtStartFailed, c.Skipped, c.Unavailable)
		}
		if len(c.Samples) != 1 || c.Samples[0].Seq != 9 || c.Samples[0].Class != compare.ReasonStartedBefore || !c.Samples[0].Ambiguous {
			t.Errorf("%s vs capture samples %+v; want the UPDATE (seq 9), started-before-capture", tr.Name, c.Samples)
		}
		// Executes after the synthetic prepare ran: nothing skipped.
		if tr.Skipped != 0 || len(tr.SkippedBy) != 0 {
			t.Errorf("%s: skipped %d %v; want 0", tr.Name, tr.Skipped, tr.SkippedBy)
		}
		if tr.Errors != 1 || tr.ErrorCodes["1193"] != 1 {
			t.Errorf("%s: errors %d %v; want the synthetic SET of an unknown variable, 1193", tr.Name, tr.Errors, tr.ErrorCodes)
		}
	}
	// Between targets nothing changes: every record with an outcome is
	// compared (3 connects, 3 SETs and START TRANSACTION, the prepare, 2
	// executes, UPDATE, COMMIT, SELECT), and they agree.
	if d := rep.Divergences[0]; d.Compared != 12 || d.Total() != 0 || d.Ambiguous != 0 || d.Skipped != 0 {
		t.Errorf("b vs a: compared %d, divergent %v, ambiguous %d, skipped %d; want 12, none, 0, 0", d.Compared, d.ByClass, d.Ambiguous, d.Skipped)
	}
	// Both targets ran the UPDATE and the COMMIT.
	for _, db := range []*sql.DB{dba, dbb} {
		var k int
		if err := db.QueryRow("SELECT k FROM t WHERE id = 2").Scan(&k); err != nil || k != 5 {
			t.Errorf("k of row 2 = %d (%v), want 5", k, err)
		}
	}
	want := store.CaptureSessions{OpenAtStart: 2, InTransaction: 1, Connected: 1, Ended: 1, OpenAtStop: 2}
	if rep.CaptureSessions == nil || *rep.CaptureSessions != want {
		t.Errorf("capture sessions %+v, want %+v", rep.CaptureSessions, want)
	}
	var b bytes.Buffer
	if err := rep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"sessions: 2 open at the capture's start (1 inside a transaction), 1 connected during it; 2 still open at its stop",
		"trx began before capture                          1                      1",
		"rebuilt open sessions (failed)                  6 (1)                  6 (1)",
	} {
		if !strings.Contains(b.String(), line) {
			t.Errorf("report lacks %q:\n%s", line, b.String())
		}
	}
}

// Under --concurrency a session's SETs are carried to whichever
// connection runs its next transaction: one the capture's server took
// (a synthetic SET of a session open at the start included) that a target
// refuses is that target's error. Before, it was dropped unseen.
func TestRegroupedSETRefusedByATargetIsAnError(t *testing.T) {
	ta, tb, dba, dbb := twoInnoDB(t)
	for _, db := range []*sql.DB{dba, dbb} {
		exec(t, db, "CREATE TABLE t (id INT PRIMARY KEY, c VARCHAR(20), k INT)",
			"INSERT INTO t VALUES (1, 'one', 1), (2, 'two', 2), (3, 'three', 3)")
	}
	at := time.Now().Truncate(time.Millisecond)
	ok := store.Response{Kind: store.RespOK}
	syn := store.FlagOpenAtStart
	capDir := writeRecords(t, []store.Record{
		{Session: 3, Start: at, Kind: store.KindConnect, Flags: syn, User: "app", Schema: "shop", Resp: ok},
		{Session: 3, Start: at, Kind: store.KindQuery, Flags: syn, Schema: "shop", SQL: "SET SESSION tandem_no_such_variable = 1", Resp: ok},
		{Session: 3, Start: at.Add(2 * time.Millisecond), Duration: time.Millisecond, Kind: store.KindQuery, Schema: "shop",
			SQL: "SELECT k FROM t WHERE id = 1", Resp: store.Response{Kind: store.RespResultSet, Columns: 1, Rows: 1}},
		{Session: 3, Start: at.Add(4 * time.Millisecond), Kind: store.KindQuit, Flags: store.FlagOpenAtStop},
	})
	rep := replayRun(t, capDir, func(c *Config) { c.Concurrency = 2 }, ta, tb)
	for _, tr := range rep.Targets {
		if tr.Errors != 1 || tr.ErrorCodes["1193"] != 1 {
			t.Errorf("%s: errors %d %v; want the synthetic SET of an unknown variable, 1193", tr.Name, tr.Errors, tr.ErrorCodes)
		}
	}
}
