package sniff

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/tandemdb/tandem/store"
	"github.com/tandemdb/tandem/wire"
)

// An answer of several results that ends with an ERR (BEGIN; INSERT; an
// INSERT that fails) leaves the transaction open: the ERR has no status,
// and the last OK's says where the session stands.
func TestInTransactionReadsPastATrailingError(t *testing.T) {
	in := uint16(mysql.SERVER_STATUS_IN_TRANS | mysql.SERVER_STATUS_AUTOCOMMIT)
	r := &store.Response{Kind: store.RespOK, Status: in | mysql.SERVER_MORE_RESULTS_EXISTS,
		More: []store.Response{{Kind: store.RespOK, Status: in | mysql.SERVER_MORE_RESULTS_EXISTS, AffectedRows: 1}, {Kind: store.RespError, ErrCode: 1062}}}
	if !inTransaction(r) {
		t.Error("BEGIN; INSERT; failed INSERT: not in a transaction")
	}
	r.More[0].Status = mysql.SERVER_STATUS_AUTOCOMMIT | mysql.SERVER_MORE_RESULTS_EXISTS
	if inTransaction(r) {
		t.Error("a transaction that ended before the error: still in one")
	}
}

// A client that sends commands before the answer to the one before them
// (MariaDB Connector/J 3 and the Node.js connector pipeline; Connector/C's
// execute direct sends a prepare and its execute together) gets each
// answer paired with its own command: the server answers in order.
func TestPipelinedCommandsGetTheirOwnAnswers(t *testing.T) {
	t.Run("three queries", func(t *testing.T) {
		k := newConv(t)
		k.connect(clientCaps)
		k.send(fromClient, slices.Concat(query("SELECT 1"), query("INSERT INTO t VALUES (1)")))
		k.send(fromClient, query("UPDATE t SET c = 2"))
		k.send(fromServer, resultSet(autocommit, "1"))
		k.send(fromServer, pkt(1, okp(1, autocommit)))
		k.send(fromServer, pkt(1, okp(2, autocommit)))
		k.send(fromClient, query("SELECT 2"))
		k.send(fromServer, resultSet(autocommit, "2", "3"))
		k.close()
		k.check("connect flags=0x0 | ok affected=0",
			`query flags=0x0 "SELECT 1" | resultset rows=1`,
			`query flags=0x0 "INSERT INTO t VALUES (1)" | ok affected=1`,
			`query flags=0x0 "UPDATE t SET c = 2" | ok affected=2`,
			`query flags=0x0 "SELECT 2" | resultset rows=2`,
			"quit flags=0x0")
		if st := k.stats(); st.AnswersLost != 0 || st.StrayPackets != 0 || st.Gaps != 0 {
			t.Errorf("stats %+v", st)
		}
	})
	t.Run("prepare and execute direct", func(t *testing.T) {
		k := newConv(t)
		k.connect(clientCaps)
		exec := wire.Execute{StmtID: 0xffffffff, Iterations: 1, NewParamsBound: true,
			Params: []wire.Param{{ParamType: wire.ParamType{Type: mysql.MYSQL_TYPE_LONGLONG}, Int: 42}}}
		k.send(fromClient, slices.Concat(pkt(0, append([]byte{mysql.COM_STMT_PREPARE}, "SELECT ?"...)), pkt(0, exec.Append(nil))))
		k.send(fromServer, pkts(1, (&wire.PrepareOK{StmtID: 3, Params: 1, Columns: 1}).Append(nil), colDef, eofp(autocommit), colDef, eofp(autocommit)))
		k.send(fromServer, pkts(1, []byte{1}, colDef, eofp(autocommit), []byte{0, 0, 42, 0, 0, 0, 0, 0, 0, 0}, eofp(autocommit)))
		k.close()
		k.check("connect flags=0x0 | ok affected=0",
			`prepare flags=0x0 "SELECT ?" stmt=3 | ok affected=0`,
			"execute flags=0x8 stmt=3 param=42 | resultset rows=1",
			"quit flags=0x0")
		if st := k.stats(); st.AnswersLost != 0 || st.StrayPackets != 0 || st.UnknownStatements != 0 {
			t.Errorf("stats %+v", st)
		}
	})
}

// An execute pipelined with the commands after it, which come in later
// segments before its answer (the framer reads them into the buffer the
// execute came in): each keeps its values and gets its own answer.
func TestPipelinedCommandAfterAnExecuteKeepsItsValues(t *testing.T) {
	k := newConv(t)
	k.connect(clientCaps)
	k.send(fromClient, pkt(0, append([]byte{mysql.COM_STMT_PREPARE}, "SELECT ?"...)))
	k.send(fromServer, pkts(1, (&wire.PrepareOK{StmtID: 1, Params: 1, Columns: 1}).Append(nil), colDef, eofp(autocommit), colDef, eofp(autocommit)))
	exec := wire.Execute{StmtID: 1, Iterations: 1, NewParamsBound: true,
		Params: []wire.Param{{ParamType: wire.ParamType{Type: mysql.MYSQL_TYPE_VAR_STRING}, Bytes: []byte("hello")}}}
	k.send(fromClient, pkt(0, exec.Append(nil)))
	k.send(fromClient, slices.Concat(query("SELECT 'overwrite'"), query("SELECT 'the values'")[:9]))
	k.send(fromClient, query("SELECT 'the values'")[9:])
	k.send(fromServer, pkts(1, []byte{1}, colDef, eofp(autocommit), []byte{0, 0, 5, 'h', 'e', 'l', 'l', 'o'}, eofp(autocommit)))
	k.send(fromServer, resultSet(autocommit, "overwrite"))
	k.send(fromServer, resultSet(autocommit, "the values"))
	k.close()
	k.check("connect flags=0x0 | ok affected=0",
		`prepare flags=0x0 "SELECT ?" stmt=1 | ok affected=0`,
		`execute flags=0x8 stmt=1 param="hello" | resultset rows=1`,
		`query flags=0x0 "SELECT 'overwrite'" | resultset rows=1`,
		`query flags=0x0 "SELECT 'the values'" | resultset rows=1`,
		"quit flags=0x0")
}

// More pipelined commands than the reader holds (maxQueued): the answers
// can no longer be told apart, so every command from there on is recorded
// with its answer lost, none with another's answer.
func TestPipelinedCommandsBeyondTheBoundAreLabelled(t *testing.T) {
	k := newConv(t)
	k.connect(clientCaps)
	k.send(fromClient, query("SELECT 1"))
	big := query("SELECT '" + strings.Repeat("x", 60000) + "'")
	n := maxQueued/len(big) + 2
	for range n {
		k.send(fromClient, big)
	}
	k.send(fromServer, resultSet(autocommit, "1"))
	for range n {
		k.send(fromServer, resultSet(autocommit, "x"))
	}
	k.send(fromClient, query("SELECT 2"))
	k.send(fromServer, resultSet(autocommit, "2"))
	k.close()
	var lost, answered int
	for _, r := range k.sink.recs {
		switch {
		case r.Kind != store.KindQuery:
		case r.Flags == store.FlagAnswerLost && r.Resp.Kind == store.RespNone:
			lost++
		default:
			answered++
		}
	}
	if lost != n+2 || answered != 0 || len(k.sink.recs) != n+4 {
		t.Errorf("%d records: %d queries with their answer lost, %d answered; want %d records, %d lost, none answered", len(k.sink.recs), lost, answered, n+4, n+2)
	}
	if st := k.stats(); st.AnswersLost != uint64(n+2) || st.StrayPackets != 0 {
		t.Errorf("stats %+v", st)
	}
}

// foundOpenJoined is a session whose login the capture did not see,
// joined at its first answer (SELECT 1, no transaction open).
func foundOpenJoined(t *testing.T) *conv {
	k := newConv(t)
	k.send(fromClient, query("SELECT 1"))
	k.send(fromServer, resultSet(autocommit, "1"))
	return k
}

// A MariaDB progress report (ff ff ff: error code 0xffff, never an
// error's) inside an answer is not the answer, whether or not the login
// said the client asked for them: a session found open has no login.
func TestProgressReportOfASessionFoundOpen(t *testing.T) {
	k := foundOpenJoined(t)
	k.send(fromClient, query("ALTER TABLE t ADD c INT"))
	k.send(fromServer, pkt(1, []byte("\xff\xff\xff\x01\x02\x10\x27\x00\x0bcopy to tmp")))
	k.send(fromServer, pkt(2, okp(0, autocommit)))
	k.close()
	k.check("connect flags=0x10 | ok affected=0",
		`query flags=0x0 "ALTER TABLE t ADD c INT" | ok affected=0`,
		"quit flags=0x0")
	if st := k.stats(); st.StrayPackets != 0 || st.AnswersLost != 0 {
		t.Errorf("stats %+v", st)
	}
}

// A frame that continues a packet of MaxPayload bytes (a row of 16 MiB)
// is part of it, whatever its first bytes: never a progress report.
func TestProgressReportIsNeverAContinuation(t *testing.T) {
	k := newConv(t)
	k.connect(clientCaps)
	k.send(fromClient, query("SELECT big"))
	row := make([]byte, wire.MaxPayload)
	row[0] = 0xfd
	k.sendSplit(fromServer, slices.Concat(pkts(1, []byte{1}, colDef, eofp(autocommit), row), pkts(5, []byte("\xff\xff\xff tail"), eofp(autocommit))), 60000)
	k.close()
	k.check("connect flags=0x0 | ok affected=0",
		`query flags=0x0 "SELECT big" | resultset rows=1`,
		"quit flags=0x0")
}

// A session found open loses a command (an autocommit UPDATE) before its
// client stream was found: the gap is counted and the session, once it
// joins, begins with a record standing for what it may have changed.
func TestCommandLostBeforeAFoundOpenSessionResyncs(t *testing.T) {
	k := newConv(t)
	k.send(fromServer, pkt(1, okp(0, autocommit))) // the answer to a command before the capture
	update := query("UPDATE t SET c = 1")
	k.lose(fromClient, update)
	k.send(fromServer, pkt(1, okp(1, autocommit)))
	k.send(fromClient, query("SELECT 1"))
	k.send(fromServer, resultSet(autocommit, "1"))
	k.send(fromClient, query("SELECT 2"))
	k.send(fromServer, resultSet(autocommit, "2"))
	k.close()
	k.check("other flags=0x91",
		"connect flags=0x10 | ok affected=0",
		`query flags=0x0 "SELECT 2" | resultset rows=1`,
		"quit flags=0x0")
	if st := k.stats(); st.Gaps != 1 || st.GapBytes != uint64(len(update)) || st.FoundOpen != 1 || st.CommandsBeforeJoin != 1 {
		t.Errorf("stats %+v", st)
	}
}

// A plaintext command of 0x0316 bytes begins 16 03 00 00 03: a TLS
// handshake record's header to a reader that looks no further. The
// MySQL reading fits the segment whole: the session is read.
func TestCommandOfATLSLikeLengthIsRead(t *testing.T) {
	k := newConv(t)
	q := query("SELECT '" + strings.Repeat("x", 0x0316-10) + "'")
	if q[0] != 0x16 || q[1] != 0x03 || q[2] != 0 || len(q) != 0x0316+4 {
		t.Fatalf("header % x, %d bytes", q[:5], len(q))
	}
	k.send(fromClient, q)
	k.send(fromServer, resultSet(autocommit, "x"))
	k.send(fromClient, query("SELECT 2"))
	k.send(fromServer, resultSet(autocommit, "2"))
	k.close()
	k.check("connect flags=0x10 | ok affected=0",
		`query flags=0x0 "SELECT 2" | resultset rows=1`,
		"quit flags=0x0")
	if st := k.stats(); st.TLS != 0 || st.Sessions != 1 || st.FoundOpen != 1 || st.CommandsBeforeJoin != 1 {
		t.Errorf("stats %+v", st)
	}
}

// A session read until bytes that read as TLS (after a gap: TLS begins
// at a login, never in the middle of a session) is not followed further:
// it leaves the capture with a record standing for what it did next, not
// with an ordinary end.
func TestJoinedSessionTurningUnreadableLeaves(t *testing.T) {
	k := foundOpenJoined(t)
	k.lose(fromClient, query("SELECT 3"))
	k.send(fromServer, resultSet(autocommit, "3"))
	k.send(fromClient, append([]byte("\x17\x03\x03\x00\x10"), bytes.Repeat([]byte{0xaa}, 16)...))
	k.close()
	k.check("connect flags=0x10 | ok affected=0",
		"other flags=0x81",
		"quit flags=0x40")
	if st := k.stats(); st.TLS != 0 || st.Sessions != 1 || st.FoundOpen != 1 || st.Undecoded != 1 || st.Gaps != 1 {
		t.Errorf("stats %+v", st)
	}
}

// A packet numbered other than 0 where a command begins: the stream is
// not where it seemed, and what the client sent there is unknown.
func TestCommandNumberedWrongIsALoss(t *testing.T) {
	k := newConv(t)
	k.connect(clientCaps)
	k.send(fromClient, pkt(2, append([]byte{mysql.COM_QUERY}, "SELECT 9"...)))
	k.send(fromClient, query("SELECT 1"))
	k.send(fromServer, resultSet(autocommit, "1"))
	k.close()
	k.check("connect flags=0x0 | ok affected=0",
		"other flags=0x81",
		`query flags=0x0 "SELECT 1" | resultset rows=1`,
		"quit flags=0x0")
	if st := k.stats(); st.Gaps != 1 {
		t.Errorf("stats %+v", st)
	}
}

// compressed wraps packets in one compressed-protocol packet (stored,
// not deflated).
func compressed(seq byte, b []byte) []byte {
	return append([]byte{byte(len(b)), byte(len(b) >> 8), byte(len(b) >> 16), seq, 0, 0, 0}, b...)
}

// The same in a compressed session, whose packets cannot be found again
// in the stream: it is not followed further, and says so.
func TestCompressedCommandNumberedWrongUnfollows(t *testing.T) {
	k := newConv(t)
	k.connect(clientCaps | uint64(mysql.CLIENT_COMPRESS))
	k.send(fromClient, compressed(0, query("SELECT 1")))
	k.send(fromServer, compressed(1, resultSet(autocommit, "1")))
	k.send(fromClient, compressed(0, pkt(3, append([]byte{mysql.COM_QUERY}, "SELECT 9"...))))
	k.send(fromClient, compressed(0, query("SELECT 2")))
	k.send(fromServer, compressed(1, resultSet(autocommit, "2")))
	k.close()
	k.check("connect flags=0x0 | ok affected=0",
		`query flags=0x0 "SELECT 1" | resultset rows=1`,
		"other flags=0x81",
		"quit flags=0x40")
	if st := k.stats(); st.Undecoded != 1 || st.Gaps != 1 {
		t.Errorf("stats %+v", st)
	}
}

// A segment sent again, cut by the snapshot length: its bytes were all
// seen before, so the cut loses nothing, and the next segment is read
// whole.
func TestCutRetransmissionIsNoGap(t *testing.T) {
	k := newConv(t)
	k.connect(clientCaps)
	q := query("SELECT 1")
	k.send(fromClient, q)
	k.send(fromServer, resultSet(autocommit, "1"))
	k.write(fromClient, k.next[fromClient]-uint32(len(q)), flagsData, q, 6)
	k.send(fromClient, query("SELECT 2"))
	k.send(fromServer, resultSet(autocommit, "2"))
	k.close()
	k.check("connect flags=0x0 | ok affected=0",
		`query flags=0x0 "SELECT 1" | resultset rows=1`,
		`query flags=0x0 "SELECT 2" | resultset rows=1`,
		"quit flags=0x0")
	if st := k.stats(); st.Gaps != 0 || st.Retransmitted != 1 {
		t.Errorf("stats %+v", st)
	}
}

// A session found open with no --schema: its statements are not
// replayable until it says USE, and counted (with an example) for the
// capture's summary.
func TestSessionFoundOpenWithoutASchemaIsCounted(t *testing.T) {
	k := newConv(t)
	k.d = New(Config{Ports: []uint16{3306}}, &k.sink)
	k.send(fromClient, query("SELECT 1"))
	k.send(fromServer, resultSet(autocommit, "1"))
	k.send(fromClient, query("UPDATE t SET v = 2"))
	k.send(fromServer, pkt(1, okp(1, autocommit)))
	k.send(fromClient, query("USE shop"))
	k.send(fromServer, pkt(1, okp(0, autocommit)))
	k.send(fromClient, query("UPDATE t SET v = 3"))
	k.send(fromServer, pkt(1, okp(1, autocommit)))
	k.close()
	k.check("connect flags=0x10 | ok affected=0",
		`query flags=0x201 "UPDATE t SET v = 2" | ok affected=1`,
		`query flags=0x0 "USE shop" | ok affected=0`,
		`query flags=0x0 "UPDATE t SET v = 3" | ok affected=1`,
		"quit flags=0x0")
	if st := k.d.Stats(); st.SchemaUnknown != 1 || st.Samples["schema_unknown"] != "session 1: UPDATE t SET v = 2" {
		t.Errorf("schema unknown %d (%q), want 1 with the UPDATE", st.SchemaUnknown, st.Samples["schema_unknown"])
	}
}
