package replay

import (
	"database/sql"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tandemdb/tandem/compare"
	"github.com/tandemdb/tandem/sandbox/sandboxtest"
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
	rows := oneRow
	ok := store.Response{Kind: store.RespOK, AffectedRows: 1}
	q := queriesOf(at)
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
	differentUUIDs(t, "copied", dba, dbb)
}

// differentUUIDs checks that table's row 1 holds a UUID of each target's
// own on a and b.
func differentUUIDs(t *testing.T, table string, a, b *sql.DB) {
	t.Helper()
	var ua, ub string
	if err := a.QueryRow("SELECT u FROM " + table + " WHERE id = 1").Scan(&ua); err != nil {
		t.Fatal(err)
	}
	if err := b.QueryRow("SELECT u FROM " + table + " WHERE id = 1").Scan(&ub); err != nil {
		t.Fatal(err)
	}
	if ua == ub || len(ua) != 36 {
		t.Errorf("%s rows %q and %q: want two different UUIDs", table, ua, ub)
	}
}

// Values each server chooses anew reach the tables through user
// variables too (SET @u = UUID(), then INSERT … VALUES (@u)), and through
// a variable read from a table such a value reached (SELECT … INTO). So
// do variables of a session open at the capture's start: the SETs its
// join runs again (SET @t = NOW(6) gets the join's time; a SET kept once
// may have been overwritten since), and what it assigned otherwise,
// which nothing runs again. The rows written from such variables differ
// between the targets or from the capture although no engine differs,
// and the reads of those tables after them are counted apart
// (nondeterministic-write). A variable set again from a plain value, and
// a table written from one, are compared as ever. Before, every such
// read was the engine's difference.
func TestUserVariablesCarryChosenValues(t *testing.T) {
	ta, tb, dba, dbb := twoInnoDB(t)
	tables := []string{"made", "copied", "plain", "picked", "stamped", "kept", "kept2", "copied2", "pre", "called"}
	for _, db := range []*sql.DB{dba, dbb} {
		for _, tb := range tables {
			exec(t, db, "CREATE TABLE "+tb+" (id INT PRIMARY KEY, u VARCHAR(40))")
		}
		exec(t, db, "CREATE PROCEDURE newid(OUT id VARCHAR(40)) SET id = UUID()")
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rows := oneRow
	ok := store.Response{Kind: store.RespOK, AffectedRows: 1}
	set := store.Response{Kind: store.RespOK}
	n := 0
	q := func(session uint64, sql string, resp store.Response) store.Record {
		n++
		return store.Record{Session: session, Start: at.Add(time.Duration(n) * 10 * time.Millisecond), Kind: store.KindQuery, SQL: sql, Resp: resp}
	}
	joined := func(r store.Record) store.Record {
		r.Start, r.Flags = at, r.Flags|store.FlagOpenAtStart
		return r
	}
	primaryUUID := "6ccd780c-baba-1026-9564-5b8c656024db"
	capDir := writeRecords(t, []store.Record{
		// Sessions 2 and 3 were open when the capture began: their
		// connects and session 2's SETs are the join's
		// (capture.Session.Join).
		joined(store.Record{Session: 2, Kind: store.KindConnect, User: "app", Resp: set}),
		joined(q(2, "SET @t = NOW(6)", set)),
		joined(q(2, "SET @k2 = 'b'", set)), // the session had set it to 'a' since: Join keeps a text once
		joined(store.Record{Session: 3, Kind: store.KindConnect, User: "app", Resp: set}),
		{Session: 1, Start: at, Kind: store.KindConnect, User: "app", Resp: set},
		q(1, "SET @u = UUID()", set),
		q(1, "INSERT INTO made VALUES (1, @u)", ok),
		q(1, "SET @v = @u, @u = 'fixed'", set), // @v takes the chosen value; @u no longer holds one
		q(1, "INSERT INTO copied VALUES (1, @v)", ok),
		q(1, "INSERT INTO plain VALUES (1, @u)", ok),
		q(1, "SELECT UUID() INTO @w", set),
		q(1, "INSERT INTO picked VALUES (1, @w)", ok),
		q(1, "SELECT u INTO @x FROM made WHERE id = 1", set), // a chosen value, read from its table
		q(1, "INSERT INTO copied2 VALUES (1, @x)", ok),
		q(1, "CALL newid(@o)", set), // the routine chose @o's value
		q(1, "INSERT INTO called VALUES (1, @o)", ok),
		q(2, "INSERT INTO stamped VALUES (1, @t)", ok),
		q(2, "SET @k = 'k1'", set),
		q(2, "INSERT INTO kept VALUES (1, @k)", ok),
		q(2, "INSERT INTO kept2 VALUES (1, @k2)", ok),
		q(3, "INSERT INTO pre VALUES (1, @pre)", ok),                            // set before the capture: NULL on the targets
		q(1, "SELECT u FROM made WHERE id = 1", rows(primaryUUID)),              // apart
		q(1, "SELECT u FROM copied WHERE id = 1", rows(primaryUUID)),            // apart: through @v
		q(1, "SELECT u FROM plain WHERE id = 1", rows("wrong")),                 // compared: a divergence from the capture
		q(1, "SELECT u FROM picked WHERE id = 1", rows(primaryUUID)),            // apart: SELECT … INTO
		q(1, "SELECT u FROM copied2 WHERE id = 1", rows(primaryUUID)),           // apart: read from made
		q(1, "SELECT u FROM called WHERE id = 1", rows(primaryUUID)),            // apart: a routine's OUT parameter
		q(2, "SELECT u FROM stamped WHERE id = 1", rows("2026-01-01 23:59:59")), // apart from the capture: the join's time
		q(2, "SELECT u FROM kept WHERE id = 1", rows("k1")),                     // compared, the same
		q(2, "SELECT u FROM kept2 WHERE id = 1", rows("a")),                     // apart from the capture: 'b' on the targets
		q(3, "SELECT u FROM pre WHERE id = 1", rows("p")),                       // apart from the capture: NULL on the targets
		{Session: 1, Start: at.Add(time.Second), Kind: store.KindQuit},
		{Session: 2, Start: at.Add(time.Second), Kind: store.KindQuit},
		{Session: 3, Start: at.Add(time.Second), Kind: store.KindQuit},
	})
	rep := replayRun(t, capDir, nil, ta, tb)
	for i, tr := range rep.Targets {
		if tr.Errors != 0 {
			t.Fatalf("%s: %d errors %v", tr.Name, tr.Errors, tr.ErrorCodes)
		}
		c := rep.VsCapture[i]
		if c.Total() != 1 || c.ByClass[compare.Content] != 1 || c.Ambiguous != 8 || c.AmbiguousBy[compare.ReasonChosenValues] != 8 || len(c.AmbiguousBy) != 1 {
			t.Errorf("%s vs capture: compared %d, divergent %d %v, apart %d %v; want 1 row-content (plain), 8 nondeterministic-write",
				tr.Name, c.Compared, c.Total(), c.ByClass, c.Ambiguous, c.AmbiguousBy)
		}
		for _, s := range c.Samples {
			if s.Class == compare.Content && !strings.Contains(s.Statement, "plain") {
				t.Errorf("%s vs capture: divergent %q; want only plain's read", tr.Name, s.Statement)
			}
		}
		if got, want := chosenTables(c.Samples), "called copied copied2 kept2 made picked pre stamped"; got != want {
			t.Errorf("%s vs capture: reads counted apart on %s; want %s", tr.Name, got, want)
		}
	}
	d := rep.Divergences[0]
	if d.Total() != 0 || d.Ambiguous != 5 || d.AmbiguousBy[compare.ReasonChosenValues] != 5 || chosenTables(d.Samples) != "called copied copied2 made picked" {
		t.Errorf("b vs a: compared %d, divergent %d %v, apart %d %v on %s; want 0 divergent, 5 nondeterministic-write (called copied copied2 made picked)",
			d.Compared, d.Total(), d.ByClass, d.Ambiguous, d.AmbiguousBy, chosenTables(d.Samples))
	}
	// The targets did choose their own, and the joined SET took the
	// join's time.
	differentUUIDs(t, "copied2", dba, dbb)
	differentUUIDs(t, "called", dba, dbb)
	var sa string
	if err := dba.QueryRow("SELECT u FROM stamped WHERE id = 1").Scan(&sa); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(sa, "2026-01-02 03:04:05") {
		t.Errorf("stamped row %q: want the join's time, 2026-01-02 03:04:05", sa)
	}
}

// oneRow is a captured result of one VARCHAR row holding v, with the
// checksums the proxy's --capture-results checksum gives it.
func oneRow(v string) store.Response {
	var s wire.RowSums
	s.AddRow(append([]byte{byte(len(v))}, v...))
	return store.Response{Kind: store.RespResultSet, Columns: 1, Rows: 1, HasChecksums: true, Ordered: s.Ordered, Unordered: s.Unordered}
}

// Values the server chooses on its own, which no statement names: a
// column whose DEFAULT is UUID(), a trigger that calls UUID() (and the
// table its body writes), a procedure that does (or calls one that
// does), a stored function that does (or calls one that does, or writes
// one itself), directly or through a variable, and a CALL whose argument
// holds one. Each target holds its
// own, so the reads of those tables after such a write are counted
// apart (nondeterministic-write), on two InnoDB copies; a trigger that
// sets a plain value, the table of an AFTER trigger that writes its
// UUID() elsewhere, and one written from a variable passed to a
// procedure's IN parameter are compared as ever: a row only b holds in
// the last two is each a difference. Before, every such read was the
// engine's difference (b vs a: divergent 11).
func TestValuesTheServersChooseOnTheirOwn(t *testing.T) {
	ta, tb, dba, dbb := twoInnoDB(t)
	for _, db := range []*sql.DB{dba, dbb} {
		exec(t, db,
			"CREATE TABLE dflt (id INT PRIMARY KEY, u VARCHAR(40) DEFAULT (UUID()))",
			"CREATE TABLE trig (id INT PRIMARY KEY, u VARCHAR(40))",
			"CREATE TRIGGER trig_bi BEFORE INSERT ON trig FOR EACH ROW SET NEW.u = UUID()",
			"CREATE TABLE trig2 (id INT PRIMARY KEY, u VARCHAR(40))",
			"CREATE TABLE audit (id INT PRIMARY KEY, u VARCHAR(40))",
			"CREATE TRIGGER trig2_au AFTER UPDATE ON trig2 FOR EACH ROW INSERT INTO audit VALUES (NEW.id, UUID())",
			"CREATE TABLE proc (id INT PRIMARY KEY, u VARCHAR(40))",
			"CREATE PROCEDURE mk(i INT) INSERT INTO proc VALUES (i, UUID())",
			"CREATE TABLE fixed (id INT PRIMARY KEY, u VARCHAR(40))",
			"CREATE TRIGGER fixed_bi BEFORE INSERT ON fixed FOR EACH ROW SET NEW.u = 'f'",
			"CREATE TABLE inparam (id INT PRIMARY KEY, u VARCHAR(40))",
			"CREATE PROCEDURE echo(IN v VARCHAR(40)) SELECT v",
			"CREATE FUNCTION mkid() RETURNS VARCHAR(40) NOT DETERMINISTIC NO SQL RETURN UUID()",
			"CREATE FUNCTION mkid2() RETURNS VARCHAR(40) NOT DETERMINISTIC NO SQL RETURN CONCAT('', mkid())",
			"CREATE TABLE fn (id INT PRIMARY KEY, u VARCHAR(40))",
			"CREATE TABLE fnvar (id INT PRIMARY KEY, u VARCHAR(40))",
			"CREATE TABLE putt (id INT PRIMARY KEY, u VARCHAR(40))",
			"CREATE PROCEDURE put(IN v VARCHAR(40)) INSERT INTO putt VALUES (1, v)",
			"CREATE TABLE sess (id INT PRIMARY KEY, u VARCHAR(40))",
			"CREATE FUNCTION new_session() RETURNS INT NOT DETERMINISTIC MODIFIES SQL DATA BEGIN INSERT INTO sess VALUES (1, UUID()); RETURN 1; END",
			"CREATE TABLE proc3 (id INT PRIMARY KEY, u VARCHAR(40))",
			"CREATE PROCEDURE mk3(i INT) INSERT INTO proc3 VALUES (i, UUID())",
			"CREATE PROCEDURE outer3() CALL mk3(1)",
		)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ok := store.Response{Kind: store.RespOK, AffectedRows: 1}
	q := queriesOf(at)
	primaryUUID := "6ccd780c-baba-1026-9564-5b8c656024db"
	capDir := writeRecords(t, []store.Record{
		{Session: 1, Start: at, Kind: store.KindConnect, User: "app", Resp: store.Response{Kind: store.RespOK}},
		q("INSERT INTO dflt (id) VALUES (1)", ok),
		q("INSERT INTO trig VALUES (1, 'a')", ok),
		q("INSERT INTO trig2 VALUES (1, 'a')", ok),
		q("UPDATE trig2 SET u = 'b' WHERE id = 1", ok),
		q("CALL mk(1)", ok),
		q("INSERT INTO fixed VALUES (1, 'a')", ok),
		q("SET @in = 'plain'", store.Response{Kind: store.RespOK}),
		q("CALL echo(@in)", oneRow("plain")), // an IN parameter: the routine cannot assign it
		q("INSERT INTO inparam VALUES (1, @in)", ok),
		q("INSERT INTO fn VALUES (1, mkid2())", ok), // a stored function that calls one that calls UUID()
		q("SET @f = mkid()", store.Response{Kind: store.RespOK}),
		q("INSERT INTO fnvar VALUES (1, @f)", ok),
		q("CALL put(UUID())", ok),              // the argument holds the chosen value
		q("SELECT new_session()", oneRow("1")), // a function that writes one
		q("CALL outer3()", ok),                 // a procedure that calls one that chooses
		q("SELECT u FROM dflt WHERE id = 1", oneRow(primaryUUID)),
		q("SELECT u FROM trig WHERE id = 1", oneRow(primaryUUID)),
		q("SELECT COUNT(*) FROM trig2", oneRow("1")), // compared: the trigger writes audit, not trig2's rows
		q("SELECT u FROM audit WHERE id = 1", oneRow(primaryUUID)),
		q("SELECT u FROM proc WHERE id = 1", oneRow(primaryUUID)),
		q("SELECT u FROM fixed WHERE id = 1", oneRow("f")),
		q("SELECT COUNT(*) FROM inparam", oneRow("1")), // compared: @in is as the capture had it
		q("SELECT u FROM fn WHERE id = 1", oneRow(primaryUUID)),
		q("SELECT u FROM fnvar WHERE id = 1", oneRow(primaryUUID)),
		q("SELECT u FROM putt WHERE id = 1", oneRow(primaryUUID)),
		q("SELECT u FROM sess WHERE id = 1", oneRow(primaryUUID)),
		q("SELECT u FROM proc3 WHERE id = 1", oneRow(primaryUUID)),
		{Session: 1, Start: at.Add(time.Second), Kind: store.KindQuit},
	})
	exec(t, dbb, "INSERT INTO trig2 VALUES (2, 'only b')", "INSERT INTO inparam VALUES (2, 'only b')") // differences, found as such
	rep := replayRun(t, capDir, nil, ta, tb)
	divergentOn := func(samples []store.Sample) string {
		var tables []string
		for _, s := range samples {
			if !s.Ambiguous {
				tables = append(tables, strings.Fields(s.Statement)[3])
			}
		}
		slices.Sort(tables)
		return strings.Join(tables, " ")
	}
	for i, tr := range rep.Targets {
		if tr.Errors != 0 {
			t.Fatalf("%s: %d errors %v", tr.Name, tr.Errors, tr.ErrorCodes)
		}
		c, want := rep.VsCapture[i], map[string]string{"a": "", "b": "inparam trig2"}[tr.Name]
		if c.Total() != int64(len(strings.Fields(want))) || divergentOn(c.Samples) != want || c.Ambiguous != 9 || c.AmbiguousBy[compare.ReasonChosenValues] != 9 || chosenTables(c.Samples) != "audit dflt fn fnvar proc proc3 putt sess trig" {
			t.Errorf("%s vs capture: compared %d, divergent %d %v on %q, apart %d %v on %s; want divergent on %q, 9 nondeterministic-write (audit dflt fn fnvar proc proc3 putt sess trig)",
				tr.Name, c.Compared, c.Total(), c.ByClass, divergentOn(c.Samples), c.Ambiguous, c.AmbiguousBy, chosenTables(c.Samples), want)
		}
	}
	d := rep.Divergences[0]
	if d.Total() != 2 || d.ByClass[compare.Content] != 2 || divergentOn(d.Samples) != "inparam trig2" || d.Ambiguous != 9 || chosenTables(d.Samples) != "audit dflt fn fnvar proc proc3 putt sess trig" {
		t.Errorf("b vs a: compared %d, divergent %d %v on %q, apart %d %v on %s; want 2 row-content on inparam trig2, 9 nondeterministic-write (audit dflt fn fnvar proc proc3 putt sess trig)",
			d.Compared, d.Total(), d.ByClass, divergentOn(d.Samples), d.Ambiguous, d.AmbiguousBy, chosenTables(d.Samples))
	}
	if !slices.ContainsFunc(rep.Notes, func(n string) bool {
		return strings.Contains(n, "column defaults ") && strings.Contains(n, "dflt.u DEFAULT uuid()") && strings.Contains(n, "triggers ") && strings.Contains(n, "procedures ") && strings.Contains(n, ".mk") &&
			strings.Contains(n, "functions ") && strings.Contains(n, ".mkid2")
	}) {
		t.Errorf("no note names the default, the triggers and the procedure: %q", rep.Notes)
	}
	for _, tbl := range []string{"dflt", "trig", "audit", "proc", "fn", "fnvar", "putt", "sess", "proc3"} {
		differentUUIDs(t, tbl, dba, dbb)
	}
}

// queriesOf returns a builder of session 1's query records, each 10 ms
// after the one before, from at.
func queriesOf(at time.Time) func(sql string, resp store.Response) store.Record {
	n := 0
	return func(sql string, resp store.Response) store.Record {
		n++
		return store.Record{Session: 1, Start: at.Add(time.Duration(n) * 10 * time.Millisecond), Kind: store.KindQuery, SQL: sql, Resp: resp}
	}
}

// chosenTables are the tables (the fourth word of each statement, as in
// SELECT u FROM t …) of the samples counted apart after a
// nondeterministic write, sorted.
func chosenTables(samples []store.Sample) string {
	var tables []string
	for _, s := range samples {
		if s.Ambiguous && s.Class == compare.ReasonChosenValues {
			tables = append(tables, strings.Fields(s.Statement)[3])
		}
	}
	slices.Sort(tables)
	return strings.Join(tables, " ")
}

// What the capture itself creates chooses from its CREATE on: a table
// whose DEFAULT is UUID(), a trigger, a procedure; an ALTER that adds
// such a column fills the rows already there. Before, the trigger's and
// the procedure's tables were the engine's difference (b vs a: divergent
// 2); the table and the ALTER were counted apart already, their own
// texts holding UUID().
func TestValuesChosenByWhatTheCaptureCreates(t *testing.T) {
	ta, tb, dba, dbb := twoInnoDB(t)
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	q := queriesOf(at)
	ok, done := store.Response{Kind: store.RespOK, AffectedRows: 1}, store.Response{Kind: store.RespOK}
	primaryUUID := "6ccd780c-baba-1026-9564-5b8c656024db"
	capDir := writeRecords(t, []store.Record{
		{Session: 1, Start: at, Kind: store.KindConnect, User: "app", Resp: done},
		q("CREATE TABLE cdflt (id INT PRIMARY KEY, u VARCHAR(40) DEFAULT (UUID()))", done),
		q("INSERT INTO cdflt (id) VALUES (1)", ok),
		q("CREATE TABLE ctrig (id INT PRIMARY KEY, u VARCHAR(40))", done),
		q("CREATE TRIGGER ctrig_bi BEFORE INSERT ON ctrig FOR EACH ROW SET NEW.u = UUID()", done),
		q("INSERT INTO ctrig VALUES (1, 'a')", ok),
		q("CREATE TABLE cproc (id INT PRIMARY KEY, u VARCHAR(40))", done),
		q("CREATE PROCEDURE cmk() INSERT INTO cproc VALUES (1, UUID())", done),
		q("CALL cmk()", ok),
		q("CREATE TABLE cadd (id INT PRIMARY KEY)", done),
		q("INSERT INTO cadd VALUES (1)", ok),
		q("ALTER TABLE cadd ADD COLUMN u VARCHAR(40) DEFAULT (UUID())", done),
		q("CREATE TABLE cplain (id INT PRIMARY KEY, u VARCHAR(40))", done),
		q("INSERT INTO cplain VALUES (1, 'p')", ok),
		q("SELECT u FROM cdflt WHERE id = 1", oneRow(primaryUUID)),
		q("SELECT u FROM ctrig WHERE id = 1", oneRow(primaryUUID)),
		q("SELECT u FROM cproc WHERE id = 1", oneRow(primaryUUID)),
		q("SELECT u FROM cadd WHERE id = 1", oneRow(primaryUUID)),
		q("SELECT u FROM cplain WHERE id = 1", oneRow("p")), // compared, the same
		{Session: 1, Start: at.Add(time.Second), Kind: store.KindQuit},
	})
	rep := replayRun(t, capDir, nil, ta, tb)
	for _, tr := range rep.Targets {
		if tr.Errors != 0 {
			t.Fatalf("%s: %d errors %v", tr.Name, tr.Errors, tr.ErrorCodes)
		}
	}
	for i, c := range append(slices.Clone(rep.VsCapture), rep.Divergences[0]) {
		if c.Total() != 0 || c.Ambiguous != 4 || chosenTables(c.Samples) != "cadd cdflt cproc ctrig" {
			t.Errorf("comparison %d: compared %d, divergent %d %v, apart %d %v on %s; want 0 divergent, 4 nondeterministic-write (cadd cdflt cproc ctrig)",
				i, c.Compared, c.Total(), c.ByClass, c.Ambiguous, c.AmbiguousBy, chosenTables(c.Samples))
		}
	}
	for _, tbl := range []string{"cdflt", "ctrig", "cproc", "cadd"} {
		differentUUIDs(t, tbl, dba, dbb)
	}
}

// On a server whose table names ignore case (lower_case_table_names=1, as
// MySQL on Windows and macOS), `Audit` and `audit` are one table: a read
// spelled one way after a write of UUID() spelled the other is counted
// apart, as after any nondeterministic write. Replay compared names as
// spelled, and reported the targets' own UUIDs there as the engine's
// difference.
func TestTableNamesMeetInAnyCaseOnACaseInsensitiveServer(t *testing.T) {
	srv := sandboxtest.Server(t, "innodb-lower-case")
	dba, a := srv.FreshDB(t)
	dbb, b := srv.FreshDB(t)
	for _, db := range []*sql.DB{dba, dbb} {
		exec(t, db, "CREATE TABLE Audit (id INT PRIMARY KEY, u VARCHAR(40))")
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	q := queriesOf(at)
	primaryUUID := "6ccd780c-baba-1026-9564-5b8c656024db"
	capDir := writeRecords(t, []store.Record{
		{Session: 1, Start: at, Kind: store.KindConnect, User: "app", Resp: store.Response{Kind: store.RespOK}},
		q("INSERT INTO Audit VALUES (1, UUID())", store.Response{Kind: store.RespOK, AffectedRows: 1}),
		q("SELECT u FROM audit WHERE id = 1", oneRow(primaryUUID)),
		q("SELECT u FROM AUDIT WHERE id = 1", oneRow(primaryUUID)),
		{Session: 1, Start: at.Add(time.Second), Kind: store.KindQuit},
	})
	rep := replayRun(t, capDir, nil, tgt(t, "a", a, ""), tgt(t, "b", b, ""))
	for i, tr := range rep.Targets {
		if c := rep.VsCapture[i]; tr.Errors != 0 || c.Total() != 0 || c.AmbiguousBy[compare.ReasonChosenValues] != 2 {
			t.Errorf("%s vs capture: %d errors, divergent %d %v, apart %v; want 0, 0 and the 2 reads nondeterministic-write",
				tr.Name, tr.Errors, c.Total(), c.ByClass, c.AmbiguousBy)
		}
	}
	if d := rep.Divergences[0]; d.Total() != 0 || d.AmbiguousBy[compare.ReasonChosenValues] != 2 {
		t.Errorf("b vs a: divergent %d %v, apart %v; want 0 and the 2 reads nondeterministic-write", d.Total(), d.ByClass, d.AmbiguousBy)
	}
	differentUUIDs(t, "audit", dba, dbb) // the targets did choose their own
}
