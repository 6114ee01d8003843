package capture

import (
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/tandemdb/tandem/store"
	"github.com/tandemdb/tandem/wire"
)

const (
	stAC    = mysql.SERVER_STATUS_AUTOCOMMIT
	stTrx   = mysql.SERVER_STATUS_IN_TRANS
	stTrxAC = mysql.SERVER_STATUS_IN_TRANS | mysql.SERVER_STATUS_AUTOCOMMIT
)

func prepareOK(id uint32, params uint16) []byte {
	return (&wire.PrepareOK{StmtID: id, Params: params}).Append(nil)
}

// summary is a record as the tests compare it.
type summary struct {
	kind  store.Kind
	sql   string
	id    uint32
	flags store.Flags
}

func summaries(rs []store.Record) []summary {
	out := make([]summary, len(rs))
	for i, r := range rs {
		out[i] = summary{r.Kind, r.SQL, r.StmtID, r.Flags}
	}
	return out
}

func sameSummaries(t *testing.T, got []store.Record, want []summary) {
	t.Helper()
	g := summaries(got)
	if len(g) != len(want) {
		t.Fatalf("%d records, want %d:\n got %+v\nwant %+v", len(g), len(want), g, want)
	}
	for i := range want {
		if g[i] != want[i] {
			t.Errorf("record %d: %+v, want %+v", i, g[i], want[i])
		}
	}
}

// A session open when a capture starts joins it with its state rebuilt
// from what it did before (nothing of which was recorded): its login,
// its SETs, autocommit off, its open read-only transaction, its prepared
// statements; what follows in that transaction is marked, and a stop
// ends it with a synthetic quit.
func TestJoinRebuildsAnOpenSessionsState(t *testing.T) {
	s := NewSession(7, State{User: "app", Schema: "shop", Caps: caps41, Collation: 45, ConnID: 4242}, Options{MaxRecordBytes: 1 << 20}, nil)
	feed(t, s, query("SET NAMES utf8mb4"), Read, frame{okp(0, 0, stAC, 0), Done})
	feed(t, s, query("SET GLOBAL max_connections=500"), Read, frame{okp(0, 0, stAC, 0), Done})      // not the session's
	feed(t, s, query("SET SESSION sql_mode='ANSI'"), Read, frame{errp(1231, "42000", "bad"), Done}) // refused: not kept
	feed(t, s, query("set @@session.time_zone='+00:00'"), Read, frame{okp(0, 0, stAC, 0), Done})
	feed(t, s, query("SET NAMES utf8mb4"), Read, frame{okp(0, 0, stAC, 0), Done}) // kept once
	feed(t, s, query("SET autocommit=0"), Read, frame{okp(0, 0, 0, 0), Done})
	feed(t, s, append([]byte{mysql.COM_STMT_PREPARE}, "SELECT c FROM t WHERE id=?"...), Read, frame{prepareOK(3, 1), Read}, frame{colDef, Read}, frame{eofp(0, 0), Done})
	feed(t, s, append([]byte{mysql.COM_STMT_PREPARE}, "UPDATE t SET k=k+1 WHERE id=?"...), Read, frame{prepareOK(4, 1), Read}, frame{colDef, Read}, frame{eofp(0, 0), Done})
	feed(t, s, append([]byte{mysql.COM_STMT_PREPARE}, "SELECT 1"...), Read, frame{prepareOK(5, 0), Done})
	feed(t, s, (&wire.StmtCommand{Command: mysql.COM_STMT_CLOSE, StmtID: 5}).Append(nil), Done)
	// A read opens the transaction (autocommit=0): it has not written.
	feed(t, s, query("SELECT 1"), Read, frame{[]byte{1}, Read}, frame{colDef, Read}, frame{eofp(0, stTrx), Read}, frame{textRow, Read}, frame{eofp(0, stTrx), Done})
	if !s.Joinable() || !s.InTransaction() {
		t.Fatalf("joinable %v, in a transaction %v: want both", s.Joinable(), s.InTransaction())
	}

	var out sink
	at := time.Unix(200, 0)
	if in := s.Join(&out, Options{MaxRecordBytes: 1 << 20}, at); !in {
		t.Error("Join said the session is not inside a transaction")
	}
	feed(t, s, query("UPDATE t SET k=1 WHERE id=2"), Read, frame{okp(1, 0, stTrx, 0), Done})
	feed(t, s, query("COMMIT"), Read, frame{okp(0, 0, 0, 0), Done})
	feed(t, s, query("SELECT 2"), Read, frame{okp(0, 0, stTrx, 0), Done})
	s.Leave(at.Add(time.Second))
	feed(t, s, query("SELECT 3"), Read, frame{okp(0, 0, stTrx, 0), Done}) // after the stop: not recorded
	s.Close(at.Add(2 * time.Second))

	syn, before := store.FlagOpenAtStart, store.FlagBeforeStart
	sameSummaries(t, out, []summary{
		{store.KindConnect, "", 0, syn},
		{store.KindQuery, "SET NAMES utf8mb4", 0, syn},
		{store.KindQuery, "set @@session.time_zone='+00:00'", 0, syn},
		{store.KindQuery, "SET autocommit=0", 0, syn}, // as the client sent it
		{store.KindQuery, "SET autocommit=0", 0, syn}, // from the server's status: the SETs may have turned it off otherwise
		{store.KindQuery, "START TRANSACTION", 0, syn | before},
		{store.KindPrepare, "SELECT c FROM t WHERE id=?", 3, syn},
		{store.KindPrepare, "UPDATE t SET k=k+1 WHERE id=?", 4, syn},
		{store.KindQuery, "UPDATE t SET k=1 WHERE id=2", 0, before},
		{store.KindQuery, "COMMIT", 0, before},
		{store.KindQuery, "SELECT 2", 0, 0},
		{store.KindQuit, "", 0, store.FlagOpenAtStop},
	})
	c := out[0]
	if c.User != "app" || c.Schema != "shop" || c.ClientCaps != caps41 || c.Collation != 45 || c.ConnID != 4242 || !c.Start.Equal(at) || c.Resp.Kind != store.RespOK {
		t.Errorf("synthetic connect: %+v", c)
	}
	if p := out[6]; p.Resp.Params != 1 || p.Resp.Columns != 0 || p.Schema != "shop" {
		t.Errorf("synthetic prepare: params %d columns %d schema %q", p.Resp.Params, p.Resp.Columns, p.Schema)
	}
}

// A session whose SETs turned autocommit off and on again (SET
// autocommit=1, =0, =1, each kept once, where first run) joins with it on,
// as the server last said: it joined with it off (its transactions never
// committing on the targets) while its client had it on. SETs that save
// and restore a variable keep their order.
func TestJoinEndsWithTheSessionsAutocommit(t *testing.T) {
	s := NewSession(7, State{User: "app", Schema: "shop", Caps: caps41, Collation: 45}, Options{MaxRecordBytes: 1 << 20}, nil)
	for i := 0; i < 2; i++ {
		feed(t, s, query("SET @old = @@sql_mode"), Read, frame{okp(0, 0, stAC, 0), Done})
		feed(t, s, query("SET sql_mode = ''"), Read, frame{okp(0, 0, stAC, 0), Done})
		feed(t, s, query("SET sql_mode = @old"), Read, frame{okp(0, 0, stAC, 0), Done})
	}
	feed(t, s, query("SET autocommit=1"), Read, frame{okp(0, 0, stAC, 0), Done})
	feed(t, s, query("SET autocommit=0"), Read, frame{okp(0, 0, 0, 0), Done})
	feed(t, s, query("SET autocommit=1"), Read, frame{okp(0, 0, stAC, 0), Done})
	var out sink
	s.Join(&out, Options{MaxRecordBytes: 1 << 20}, time.Unix(200, 0))
	syn := store.FlagOpenAtStart
	sameSummaries(t, out, []summary{
		{store.KindConnect, "", 0, syn},
		{store.KindQuery, "SET @old = @@sql_mode", 0, syn},
		{store.KindQuery, "SET sql_mode = ''", 0, syn},
		{store.KindQuery, "SET sql_mode = @old", 0, syn},
		{store.KindQuery, "SET autocommit=1", 0, syn},
		{store.KindQuery, "SET autocommit=0", 0, syn},
		{store.KindQuery, "SET autocommit=1", 0, syn}, // from the server's status
	})
}

// A SET for the statement after it only (SET insert_id, as mysqlbinlog's
// output sends before an INSERT) is no state of the session's: a session
// joining a capture long after it does not set it again, which made the
// replay's next INSERT take that id. A SET that also assigns a variable
// of the session's keeps that part.
func TestJoinLeavesOutOneShotSets(t *testing.T) {
	s := NewSession(7, State{User: "app", Schema: "shop", Caps: caps41, Collation: 45}, Options{MaxRecordBytes: 1 << 20}, nil)
	feed(t, s, query("SET insert_id = 100"), Read, frame{okp(0, 0, stAC, 0), Done})
	feed(t, s, query("SET @@session.last_insert_id = 7"), Read, frame{okp(0, 0, stAC, 0), Done})
	feed(t, s, query("SET insert_id = 5, @x = 1"), Read, frame{okp(0, 0, stAC, 0), Done})
	var out sink
	s.Join(&out, Options{MaxRecordBytes: 1 << 20}, time.Unix(200, 0))
	syn := store.FlagOpenAtStart
	sameSummaries(t, out, []summary{
		{store.KindConnect, "", 0, syn},
		{store.KindQuery, "SET @x = 1", 0, syn},
	})
}

// A session that turned multi-statement texts on (COM_SET_OPTION, which
// the server answers with an EOF) joins a capture with them on.
func TestJoinKeepsMultiStatementsTurnedOn(t *testing.T) {
	s := NewSession(7, State{User: "app", Schema: "shop", Caps: caps41, Collation: 45}, Options{MaxRecordBytes: 1 << 20}, nil)
	feed(t, s, []byte{mysql.COM_SET_OPTION, 0, 0}, Read, frame{eofp(0, stAC), Done})
	var out sink
	s.Join(&out, Options{MaxRecordBytes: 1 << 20}, time.Unix(200, 0))
	if len(out) == 0 || out[0].Kind != store.KindConnect || out[0].ClientCaps&uint64(mysql.CLIENT_MULTI_STATEMENTS) == 0 {
		t.Fatalf("synthetic connect %+v: want multi-statements on", out)
	}
	feed(t, s, []byte{mysql.COM_SET_OPTION, 1, 0}, Read, frame{eofp(0, stAC), Done})
	if s.State().Caps&uint64(mysql.CLIENT_MULTI_STATEMENTS) != 0 {
		t.Error("turned off again: still on")
	}
}

// A multi-statement answer that ends with an ERR (BEGIN; INSERT; an
// INSERT that fails) leaves the transaction open and written: the ERR
// carries no status, and was read as "autocommit off, no transaction" —
// the session joined a capture inside a transaction that had written, and
// its commit's GTID was never asked for.
func TestAMultiStatementErrorKeepsTheTransaction(t *testing.T) {
	more := uint16(mysql.SERVER_MORE_RESULTS_EXISTS)
	s := NewSession(7, State{User: "app", Schema: "shop", Caps: caps41, Collation: 45}, Options{MaxRecordBytes: 1 << 20, Commits: true}, nil)
	feed(t, s, query("BEGIN; INSERT INTO t VALUES (1); INSERT INTO t VALUES (1)"), Read,
		frame{okp(0, 0, stTrxAC|more, 0), Read}, frame{okp(1, 0, stTrxAC|more, 0), Read}, frame{errp(1062, "23000", "Duplicate entry '1'"), Done})
	if s.Joinable() || !s.InTransaction() {
		t.Errorf("joinable %v, in a transaction %v: want a transaction open that wrote", s.Joinable(), s.InTransaction())
	}
	if _, ended := s.CommitEnded(); ended {
		t.Error("the transaction was taken for committed")
	}
	feed(t, s, query("COMMIT"), Read, frame{okp(0, 0, stAC, 0), Done})
	if _, ended := s.CommitEnded(); !ended {
		t.Error("its COMMIT was not taken for the end of a transaction that wrote")
	}
}

// A session whose open transaction has written cannot join until that
// transaction ends: its writes were before the capture.
func TestJoinWaitsForAWrittenTransactionToEnd(t *testing.T) {
	s := NewSession(1, State{User: "u", Caps: caps41}, Options{MaxRecordBytes: 1 << 20}, nil)
	feed(t, s, query("BEGIN"), Read, frame{okp(0, 0, stTrxAC, 0), Done})
	if !s.Joinable() {
		t.Fatal("an open transaction that has not written: want joinable")
	}
	feed(t, s, query("UPDATE t SET k=1 WHERE id=2"), Read, frame{okp(0, 0, stTrxAC, 0), Done}) // matched nothing
	if !s.Joinable() {
		t.Fatal("an update that changed no row: want joinable")
	}
	feed(t, s, query("UPDATE t SET k=1 WHERE id=3"), Read, frame{okp(1, 0, stTrxAC, 0), Done})
	if s.Joinable() {
		t.Fatal("a transaction that changed a row: want not joinable")
	}
	feed(t, s, query("UPDATE t SET k=2 WHERE id=3"), Read, frame{errp(1213, "40001", "Deadlock"), Done})
	if s.Joinable() {
		t.Fatal("after an error the state is not known: want not joinable until an answer says")
	}
	feed(t, s, query("ROLLBACK"), Read, frame{okp(0, 0, stAC, 0), Done})
	if !s.Joinable() || s.InTransaction() {
		t.Fatalf("after ROLLBACK: joinable %v, in a transaction %v", s.Joinable(), s.InTransaction())
	}
	var out sink
	if in := s.Join(&out, Options{}, time.Unix(1, 0)); in {
		t.Error("Join: inside a transaction, want not")
	}
	sameSummaries(t, out, []summary{{store.KindConnect, "", 0, store.FlagOpenAtStart}})
}

// A reset forgets the session's SETs and transaction; the bound on SETs
// is counted.
func TestJoinAfterResetAndBeyondMaxSets(t *testing.T) {
	s := NewSession(1, State{User: "u", Caps: caps41}, Options{}, nil)
	feed(t, s, query("SET @a=1"), Read, frame{okp(0, 0, 0, 0), Done})
	feed(t, s, []byte{mysql.COM_RESET_CONNECTION}, Read, frame{okp(0, 0, stAC, 0), Done})
	for i := range MaxSets + 3 {
		feed(t, s, query("SET @v"+string(rune('a'+i%26))+string(rune('a'+i/26))+"=1"), Read, frame{okp(0, 0, stAC, 0), Done})
	}
	var out sink
	s.Join(&out, Options{}, time.Unix(1, 0))
	if len(out) != 1+MaxSets || s.SetsBeyond() != 3 {
		t.Errorf("%d records, %d SETs beyond; want %d and 3", len(out), s.SetsBeyond(), 1+MaxSets)
	}
	for _, r := range out {
		if r.SQL == "SET @a=1" || r.SQL == "SET autocommit=0" {
			t.Errorf("replayed %q, which the reset undid", r.SQL)
		}
	}
}
