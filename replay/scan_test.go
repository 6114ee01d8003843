package replay

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/tandemdb/tandem/compare"
	"github.com/tandemdb/tandem/sqlinfo"
	"github.com/tandemdb/tandem/store"
)

// The tables a capture created are those still there at its end: one
// dropped again, and a temporary one (gone with its session, in no
// server's list of tables), are counted apart. A temporary table used to
// be listed as created, and the report then printed it "(not there) (not
// InnoDB!)" on every target.
func TestScanCreatedTables(t *testing.T) {
	sc := newScanner(sqlinfo.NewAnalyzer())
	at := time.Unix(1, 0)
	for i, q := range []string{
		"CREATE TABLE kept (id INT PRIMARY KEY)",
		"CREATE TABLE gone (id INT PRIMARY KEY)",
		"DROP TABLE gone",
		"CREATE TEMPORARY TABLE scratch (id INT)",
		"INSERT INTO scratch VALUES (1)",
		"CREATE TEMPORARY TABLE kept (id INT)", // shadows a real one: that stays created
	} {
		sc.add(&store.Record{Seq: uint64(i + 1), Session: 1, Kind: store.KindQuery, SQL: q, Schema: "s", Start: at.Add(time.Duration(i) * time.Millisecond),
			Resp: store.Response{Kind: store.RespOK}})
	}
	sc.finish()
	if !slices.Equal(sc.x.created, []string{"s.kept"}) || sc.x.createdDropped != 2 {
		t.Errorf("created %v, gone again %d; want [s.kept] and 2 (s.gone dropped, s.scratch temporary)", sc.x.created, sc.x.createdDropped)
	}
}

// Commands a packet capture lost inside a transaction: the scan ends it
// there as replay does (committed: sqlinfo.Trx.Lost) and counts it. As
// replay commits it as soon as the session's last statement seen is done,
// its writes may show to what others ran from its first change on: the
// commit's moment spans that, and so does the label for what follows
// the lost commands between targets. Commands lost outside a transaction
// end nothing, and are labelled from where they were lost.
func TestScanLostCommandsEndTheOpenTransaction(t *testing.T) {
	sc := newScanner(sqlinfo.NewAnalyzer())
	at := func(ms int) time.Time { return time.Unix(1, 0).Add(time.Duration(ms) * time.Millisecond) }
	ns := func(ms int) int64 { return at(ms).UnixNano() }
	ok := store.Response{Kind: store.RespOK}
	for i, r := range []store.Record{
		{Session: 1, Kind: store.KindQuery, SQL: "BEGIN", Start: at(1), Resp: ok},
		{Session: 1, Kind: store.KindQuery, SQL: "SELECT v FROM t WHERE id = 2", Start: at(2), Resp: store.Response{Kind: store.RespResultSet}},
		{Session: 1, Kind: store.KindQuery, SQL: "UPDATE t SET v = 5 WHERE id = 1", Start: at(3), Resp: store.Response{Kind: store.RespOK, AffectedRows: 1}},
		{Session: 1, Kind: store.KindOther, Flags: store.FlagLost | store.FlagNotReplayable, Start: at(6)},
		{Session: 2, Kind: store.KindOther, Flags: store.FlagLost | store.FlagNotReplayable, Start: at(7)},
		{Session: 1, Kind: store.KindQuery, SQL: "COMMIT", Start: at(9), Resp: ok},
	} {
		r.Seq, r.Schema, r.Duration = uint64(i+1), "s", 500*time.Microsecond
		sc.add(&r)
	}
	if sc.x.lostEnded != 1 {
		t.Errorf("%d transactions ended where commands were lost, want 1 (session 1's)", sc.x.lostEnded)
	}
	// The commit: from the UPDATE's start (3 ms) to the lost record (6);
	// the COMMIT at 9 ends nothing more.
	if c, found := sc.x.commits.Overlapping(2, ns(3), ns(3), []string{"s.t"}); !found || c.Start != ns(3) || c.End != ns(6) || c.Session != 1 {
		t.Errorf("commit seen by a read at 3 ms: %+v (found %v), want session 1's over [3 ms, 6 ms]", c, found)
	}
	if c, found := sc.x.commits.Overlapping(2, ns(2), ns(2)+int64(900*time.Microsecond), []string{"s.t"}); found {
		t.Errorf("a read that ended before the UPDATE began overlaps %+v", c)
	}
	if _, found := sc.x.commits.Overlapping(2, ns(8), ns(10), []string{"s.t"}); found {
		t.Errorf("the COMMIT at 9 ms committed writes again")
	}
	// Between targets: from the UPDATE's start for session 1, from the
	// record itself for session 2.
	for _, tc := range []struct {
		to      int
		session uint64
		found   bool
	}{{3, 0, false}, {4, 1, true}, {8, 2, true}} {
		g, found := sc.x.lostCmds.Before(ns(tc.to), []string{"s.t"})
		if found != tc.found || found && (g.Session != tc.session || g.Start != map[uint64]int64{1: ns(3), 2: ns(7)}[tc.session]) {
			t.Errorf("label before %d ms: %+v (found %v), want session %d's (found %v)", tc.to, g, found, tc.session, tc.found)
		}
	}
}

// The end of a session that a KILL under way ended is left to that KILL
// (killedQuits); only that one: not a client's COM_QUIT, not an end
// before the KILL began, not what a KILL QUERY or a failed KILL names.
func TestScanFindsTheEndsKillsCaused(t *testing.T) {
	sc := newScanner(sqlinfo.NewAnalyzer())
	at := func(ms float64) time.Time { return time.Unix(1, 0).Add(time.Duration(ms * float64(time.Millisecond))) }
	ok := store.Response{Kind: store.RespOK}
	recs := []store.Record{}
	for s := uint64(1); s <= 6; s++ {
		recs = append(recs, store.Record{Session: s, Kind: store.KindConnect, ConnID: uint32(100 + s), Start: at(0), Resp: ok})
	}
	kill := func(ms float64, sql string, resp store.Response) store.Record {
		return store.Record{Session: 6, Kind: store.KindQuery, SQL: sql, Start: at(ms), Duration: time.Millisecond, Resp: resp}
	}
	recs = append(recs,
		store.Record{Session: 1, Kind: store.KindQuit, Start: at(10.5)},                          // 7: ended by the KILL at 10
		store.Record{Session: 2, Kind: store.KindQuit, Start: at(20.5), Command: mysql.COM_QUIT}, // 8: the client quit
		store.Record{Session: 3, Kind: store.KindQuit, Start: at(29)},                            // 9: before the KILL began
		store.Record{Session: 4, Kind: store.KindQuit, Start: at(40.5)},                          // 10
		store.Record{Session: 5, Kind: store.KindQuit, Start: at(50.5)},                          // 11
		kill(10, "KILL 101", ok),
		kill(20, "KILL CONNECTION 102", ok),
		kill(30, "KILL 103", ok),
		kill(40, "KILL QUERY 104", ok),
		kill(50, "KILL 105", store.Response{Kind: store.RespError, ErrCode: 1094}),
	)
	for i := range recs {
		recs[i].Seq, recs[i].Schema = uint64(i+1), "s"
		sc.add(&recs[i])
	}
	if want := map[uint64]bool{7: true}; !maps.Equal(sc.x.killedQuits, want) {
		t.Errorf("ends left to a KILL: %v, want %v", sc.x.killedQuits, want)
	}
}

// The scan says whether a capture changes anything other sessions see, by
// trxChanges' rule: without such a record, --order capture has nothing to
// order (nothingToOrder). A read-only transaction's COMMIT, a read and a
// prepared read change nothing; a write, a locking read, a KILL, and an
// execute of a statement the session did not prepare in the capture each
// may.
func TestScanTellsWhetherTheCaptureChangesAnything(t *testing.T) {
	ok := store.Response{Kind: store.RespOK}
	rows := store.Response{Kind: store.RespResultSet}
	reads := []store.Record{
		{Session: 1, Kind: store.KindConnect, Resp: ok},
		{Session: 1, Kind: store.KindQuery, SQL: "BEGIN", Resp: ok},
		{Session: 1, Kind: store.KindQuery, SQL: "SELECT c FROM sbtest1 WHERE id = 7", Resp: rows},
		{Session: 2, Kind: store.KindQuery, SQL: "SELECT SUM(k) FROM sbtest2 WHERE id BETWEEN 1 AND 99", Resp: rows},
		{Session: 1, Kind: store.KindQuery, SQL: "COMMIT", Resp: ok},
		{Session: 2, Kind: store.KindPrepare, StmtID: 1, SQL: "SELECT c FROM sbtest3 WHERE id = ?", Resp: ok},
		{Session: 2, Kind: store.KindExecute, StmtID: 1, Resp: rows},
		{Session: 2, Kind: store.KindQuery, SQL: "SET autocommit = 1", Resp: ok},
		{Session: 1, Kind: store.KindQuit},
	}
	for _, c := range []struct {
		name string
		last *store.Record // appended to reads (nil: none)
		want bool
	}{
		{"reads", nil, false},
		{"a write", &store.Record{Session: 2, Kind: store.KindQuery, SQL: "UPDATE sbtest1 SET k = k + 1 WHERE id = 7", Resp: ok}, true},
		{"a write that failed", &store.Record{Session: 2, Kind: store.KindQuery, SQL: "DELETE FROM sbtest1 WHERE id = 7",
			Resp: store.Response{Kind: store.RespError, ErrCode: mysql.ER_LOCK_DEADLOCK}}, true},
		{"a locking read", &store.Record{Session: 2, Kind: store.KindQuery, SQL: "SELECT c FROM sbtest1 WHERE id = 7 FOR UPDATE", Resp: rows}, true},
		{"DDL", &store.Record{Session: 2, Kind: store.KindQuery, SQL: "CREATE TABLE t2 (id INT PRIMARY KEY)", Resp: ok}, true},
		{"a KILL", &store.Record{Session: 2, Kind: store.KindQuery, SQL: "KILL 12", Resp: ok}, true},
		{"an execute prepared before the capture", &store.Record{Session: 2, Kind: store.KindExecute, StmtID: 9, Resp: rows}, true},
	} {
		sc := newScanner(sqlinfo.NewAnalyzer())
		recs := slices.Clone(reads)
		if c.last != nil {
			recs = append(recs, *c.last)
		}
		for i, r := range recs {
			r.Seq, r.Schema, r.Start, r.Duration = uint64(i+1), "s", time.Unix(1, 0).Add(time.Duration(i)*time.Millisecond), 100*time.Microsecond
			sc.add(&r)
		}
		sc.finish()
		if sc.x.changes != c.want || nothingToOrder(sc.x, false) == c.want {
			t.Errorf("%s: changes %v, nothing to order %v; want changes %v", c.name, sc.x.changes, nothingToOrder(sc.x, false), c.want)
		}
		if nothingToOrder(sc.x, true) {
			t.Errorf("%s: a followed capture's records to come are not known; it must be ordered", c.name)
		}
	}
}

// What a read-only server refuses (captureIndex.writes, which decides
// whether a read-only target is refused): writes to permanent tables, DDL,
// locking reads, LOCK TABLES, table maintenance, what cannot be told; not
// a session's temporary tables (followed through USE, DROP TEMPORARY,
// a new connection), named locks, transactions of reads.
func TestScanTellsWhetherTheCaptureWritesTables(t *testing.T) {
	ok := store.Response{Kind: store.RespOK}
	q := func(sql string) store.Record {
		return store.Record{Session: 1, Kind: store.KindQuery, SQL: sql, Resp: ok}
	}
	temp := q("CREATE TEMPORARY TABLE tmp (id INT)")
	for _, c := range []struct {
		name string
		recs []store.Record
		want bool
	}{
		{"reads, a transaction, named locks", []store.Record{q("BEGIN"), q("SELECT c FROM sbtest1 WHERE id = 7"), q("COMMIT"),
			q("SELECT GET_LOCK('x', 0)"), q("SELECT RELEASE_LOCK('x')")}, false},
		{"a temporary table", []store.Record{q("DROP TEMPORARY TABLE IF EXISTS tmp"), temp, q("INSERT INTO tmp SELECT id FROM sbtest1"),
			q("UPDATE s.tmp SET id = id + 1"), q("DROP TEMPORARY TABLE tmp")}, false},
		{"a write", []store.Record{q("UPDATE sbtest1 SET k = k + 1 WHERE id = 7")}, true},
		{"a write that failed in the capture", []store.Record{{Session: 1, Kind: store.KindQuery, SQL: "DELETE FROM sbtest1 WHERE id = 7",
			Resp: store.Response{Kind: store.RespError, ErrCode: mysql.ER_LOCK_DEADLOCK}}}, true},
		{"DDL", []store.Record{q("CREATE TABLE t2 (id INT PRIMARY KEY)")}, true},
		{"CREATE DATABASE", []store.Record{q("CREATE DATABASE d2")}, true},
		{"a locking read", []store.Record{q("SELECT c FROM sbtest1 WHERE id = 7 FOR UPDATE")}, true},
		{"LOCK TABLES", []store.Record{q("LOCK TABLES sbtest1 WRITE"), q("UNLOCK TABLES")}, true},
		{"ANALYZE TABLE", []store.Record{q("ANALYZE TABLE sbtest1")}, true},
		{"a sequence's next value", []store.Record{q("SELECT NEXTVAL(sq)")}, true},
		{"a sequence's next value, standard spelling", []store.Record{q("SELECT NEXT VALUE FOR sq")}, true},
		{"a sequence's last value", []store.Record{q("SELECT LASTVAL(sq)")}, false},
		{"several statements in one text", []store.Record{q("SELECT 1; CREATE DATABASE d2")}, true},
		{"a temporary table and a write in one text", []store.Record{q("CREATE TEMPORARY TABLE tmp (id INT); INSERT INTO sbtest1 (k) VALUES (1)")}, true},
		{"the temporary table's name in another schema", []store.Record{temp, q("USE other"), q("INSERT INTO tmp VALUES (1)")}, true},
		{"the permanent table after DROP TEMPORARY", []store.Record{q("CREATE TEMPORARY TABLE sbtest1 (id INT)"), q("DROP TEMPORARY TABLE sbtest1"),
			q("INSERT INTO sbtest1 (k) VALUES (1)")}, true},
		{"after a reconnect", []store.Record{temp, {Session: 1, Kind: store.KindConnect, Schema: "s", Resp: ok}, q("INSERT INTO tmp VALUES (1)")}, true},
		{"after a reset", []store.Record{temp, {Session: 1, Kind: store.KindResetConnection, Resp: ok}, q("INSERT INTO tmp VALUES (1)")}, true},
		{"a temporary table the capture failed to create", []store.Record{{Session: 1, Kind: store.KindQuery, SQL: temp.SQL,
			Resp: store.Response{Kind: store.RespError, ErrCode: mysql.ER_TABLE_EXISTS_ERROR}}, q("INSERT INTO tmp VALUES (1)")}, true},
		{"a temporary table replay does not create (truncated)", []store.Record{{Session: 1, Kind: store.KindQuery, SQL: temp.SQL, Resp: ok,
			Flags: store.FlagTruncated}, q("INSERT INTO tmp VALUES (1)")}, true},
		{"an execute of a prepare that failed in the capture", []store.Record{
			{Session: 1, Kind: store.KindPrepare, StmtID: 1, SQL: "INSERT INTO sbtest1 (k) VALUES (?)", Resp: store.Response{Kind: store.RespError, ErrCode: mysql.ER_NO_SUCH_TABLE}},
			{Session: 1, Kind: store.KindExecute, StmtID: 1, Resp: ok}}, true},
		{"an execute of a read", []store.Record{{Session: 1, Kind: store.KindPrepare, StmtID: 1, SQL: "SELECT c FROM sbtest1 WHERE id = ?", Resp: ok},
			{Session: 1, Kind: store.KindExecute, StmtID: 1, Resp: store.Response{Kind: store.RespResultSet}}}, false},
	} {
		sc := newScanner(sqlinfo.NewAnalyzer())
		recs := append([]store.Record{{Session: 1, Kind: store.KindConnect, Schema: "s", Resp: ok}}, c.recs...)
		for i, r := range recs {
			r.Seq, r.Start, r.Duration = uint64(i+1), time.Unix(1, 0).Add(time.Duration(i)*time.Millisecond), 100*time.Microsecond
			if r.Schema == "" {
				r.Schema = "s"
			}
			sc.add(&r)
		}
		sc.finish()
		if sc.x.writes != c.want {
			t.Errorf("%s: writes %v, want %v", c.name, sc.x.writes, c.want)
		}
	}
}

// A statement of a later --loop pass is judged on replay's timeline of
// that pass, where its failed transactions and changes out of order are
// (runner.offset): its captured interval used to be taken as the first
// pass's, so no failure of a later pass ever came before it, and the
// differences that followed one counted as the engine's.
func TestLaterLoopsAreJudgedOnTheirOwnTimeline(t *testing.T) {
	at := time.Unix(1000, 0)
	ok := store.Response{Kind: store.RespOK, AffectedRows: 1}
	capDir := writeRecords(t, []store.Record{
		{Session: 1, Start: at, Kind: store.KindConnect, Resp: store.Response{Kind: store.RespOK}},
		{Session: 1, Start: at.Add(time.Second), Duration: time.Millisecond, Kind: store.KindQuery, SQL: "UPDATE t SET k = 1 WHERE id = 1", Resp: ok},
		{Session: 1, Start: at.Add(3 * time.Second), Duration: time.Millisecond, Kind: store.KindQuery, SQL: "SELECT k FROM t WHERE id = 1", Resp: store.Response{Kind: store.RespResultSet, Rows: 1}},
		{Session: 1, Start: at.Add(4 * time.Second), Kind: store.KindQuit},
	})
	r, err := store.Open(capDir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	h := newHistories(r, sqlinfo.NewAnalyzer())
	h.capSpan = int64(4 * time.Second) // the capture's first to last record
	rn := &runner{capSpan: h.capSpan}
	read := store.Record{Start: at.Add(3 * time.Second)}
	st, found := h.Statement(store.OutcomeSeq(3, 2)) // the read, third pass
	if !found || st.To+st.LoopOffset != rn.offset(&read, 2)+int64(time.Millisecond) {
		t.Fatalf("the read of pass 3: %+v (found %v); want it to end at %d on replay's timeline", st, found, rn.offset(&read, 2)+int64(time.Millisecond))
	}
	// Another session's transaction on t failed for good in that pass,
	// between the update and the read.
	fs := compare.NewFailures()
	fs.Add("b", store.FailedTrx{Session: 2, FirstSeq: 7, FailedSeq: 7, LastSeq: 7, Code: 1213, Attempts: 4, Tables: []string{"s.t"},
		At: rn.offset(&store.Record{Start: at.Add(2 * time.Second)}, 2)})
	st.Tables = []string{"s.t"}
	if _, reason := (&compare.Tally{Failed: fs}).Judge(store.OutcomeSeq(3, 2), st, true, compare.OrderKept); reason != compare.ReasonFailedTrx {
		t.Errorf("the read after a failed transaction of its pass: reason %q, want %q", reason, compare.ReasonFailedTrx)
	}
}
