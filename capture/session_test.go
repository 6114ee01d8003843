package capture

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/tandemdb/tandem/store"
	"github.com/tandemdb/tandem/wire"
)

// The session recorder, fed what crosses the wire with no socket: one
// conversation per case, each command's answer frame by frame, checking
// what each frame says comes next and the record it builds.

const caps41 = uint64(mysql.CLIENT_PROTOCOL_41 | mysql.CLIENT_TRANSACTIONS | mysql.CLIENT_MULTI_RESULTS)

type sink []store.Record

func (s *sink) Record(r *store.Record) { *s = append(*s, *r.Clone()) }

func okp(affected, id uint64, status uint16, warnings uint16) []byte {
	return (&wire.OK{Header: wire.HeaderOK, AffectedRows: affected, InsertID: id, Status: status, Warnings: warnings}).Append(nil, caps41)
}

func errp(code uint16, state, msg string) []byte {
	return (&wire.Err{Code: code, HasState: true, State: state, Message: msg}).Append(nil)
}

func eofp(warnings, status uint16) []byte {
	return (&wire.EOF{Warnings: warnings, Status: status}).Append(nil)
}

func query(sql string) []byte { return append([]byte{mysql.COM_QUERY}, sql...) }

var (
	colDef  = []byte("\x03def\x00\x00\x00\x01c\x00\x0c\x08\x00\x0b\x00\x00\x00\x03\x00\x00\x00\x00\x00")
	textRow = []byte("\x0242")
)

// feed runs one command through s: its answer's frames in order, each
// with the step it must give.
type frame struct {
	p    []byte
	want Step
}

func feed(t *testing.T, s *Session, cmd []byte, first Step, frames ...frame) {
	t.Helper()
	at := time.Unix(100, 0)
	if got := s.Command(cmd, false, at); got != first {
		t.Fatalf("command %q: step %d, want %d", cmd, got, first)
	}
	for i, f := range frames {
		if got := s.Server(f.p); got != f.want {
			t.Fatalf("command %q, frame %d (%x): step %d, want %d (err %v)", cmd, i, f.p, got, f.want, s.Err())
		}
	}
	s.End(at.Add(time.Millisecond))
}

func TestSessionRecordsEachCommandAndAnswer(t *testing.T) {
	var out sink
	s := NewSession(7, State{User: "app", Schema: "shop", Caps: caps41, Collation: 45}, Options{MaxRecordBytes: 64, Checksums: true}, &out)
	s.Connect(time.Unix(99, 0), time.Millisecond, true, "")

	// A result set: count, definitions, EOF, rows, EOF.
	feed(t, s, query("SELECT c FROM t"), Read,
		frame{[]byte{1}, Read}, frame{colDef, Read}, frame{eofp(0, 2), Read},
		frame{textRow, Read}, frame{textRow, Read}, frame{eofp(1, 2), Done})
	// An OK with affected rows and an insert id.
	feed(t, s, query("INSERT INTO t VALUES (1)"), Read, frame{okp(1, 9, 2, 0), Done})
	// An error.
	feed(t, s, query("SELECT nope"), Read, frame{errp(1054, "42S22", "Unknown column 'nope'"), Done})
	// Two results (a multi-statement query): both kept.
	feed(t, s, query("DO 1; DO 2"), Read,
		frame{okp(0, 0, 2|mysql.SERVER_MORE_RESULTS_EXISTS, 0), Read}, frame{okp(0, 0, 2, 1), Done})
	// USE: the schema changes once the server says OK.
	feed(t, s, query("USE other"), Read, frame{okp(0, 0, 2, 0), Done})
	feed(t, s, []byte{mysql.COM_INIT_DB, 'x'}, Read, frame{errp(1049, "42000", "Unknown database 'x'"), Done})
	// Ping, and a command the recorder does not know (its bytes not
	// kept: they may hold anything).
	feed(t, s, []byte{mysql.COM_PING}, Read, frame{okp(0, 0, 2, 0), Done})
	feed(t, s, []byte{0x42, 'z'}, Read, frame{errp(1047, "08S01", "Unknown command"), Done})
	// COM_STATISTICS answers with a string.
	feed(t, s, []byte{mysql.COM_STATISTICS}, Read, frame{[]byte("Uptime: 5"), Done})
	// COM_FIELD_LIST: definitions until EOF.
	feed(t, s, []byte{mysql.COM_FIELD_LIST, 't', 0}, Read, frame{colDef, Read}, frame{eofp(0, 2), Done})
	// LOAD DATA LOCAL: the client sends a file; not replayable.
	feed(t, s, query("LOAD DATA LOCAL INFILE 'f' INTO TABLE t"), Read, frame{[]byte{0xfb, 'f'}, SendFile}, frame{okp(3, 0, 2, 0), Done})

	want := []struct {
		kind    store.Kind
		schema  string
		resp    store.RespKind
		rows    uint64
		more    int
		flags   store.Flags
		detail  string
		errCode uint16
	}{
		{store.KindConnect, "shop", store.RespOK, 0, 0, 0, "", 0},
		{store.KindQuery, "shop", store.RespResultSet, 2, 0, 0, "SELECT c FROM t", 0},
		{store.KindQuery, "shop", store.RespOK, 0, 0, 0, "INSERT INTO t VALUES (1)", 0},
		{store.KindQuery, "shop", store.RespError, 0, 0, 0, "SELECT nope", 1054},
		{store.KindQuery, "shop", store.RespOK, 0, 1, 0, "DO 1; DO 2", 0},
		{store.KindQuery, "shop", store.RespOK, 0, 0, 0, "USE other", 0},
		{store.KindInitDB, "x", store.RespError, 0, 0, 0, "", 1049},
		{store.KindPing, "other", store.RespOK, 0, 0, 0, "", 0},
		{store.KindOther, "other", store.RespError, 0, 0, 0, "", 1047},
		{store.KindOther, "other", store.RespOK, 0, 0, 0, "", 0},
		{store.KindOther, "other", store.RespOK, 0, 0, 0, "t\x00", 0},
		{store.KindQuery, "other", store.RespOK, 0, 0, store.FlagNotReplayable, "LOAD DATA LOCAL INFILE 'f' INTO TABLE t", 0},
	}
	if len(out) != len(want) {
		t.Fatalf("%d records, want %d", len(out), len(want))
	}
	for i, w := range want {
		r := out[i]
		detail := r.SQL
		if r.Kind == store.KindOther {
			detail = string(r.Data)
		}
		if r.Session != 7 || r.Kind != w.kind || r.Schema != w.schema || r.Resp.Kind != w.resp || r.Resp.Rows != w.rows ||
			len(r.Resp.More) != w.more || r.Flags != w.flags || detail != w.detail || r.Resp.ErrCode != w.errCode {
			t.Errorf("record %d: %s schema %q resp %d rows %d more %d flags %x %q err %d\nwant %+v", i, r.Kind, r.Schema, r.Resp.Kind,
				r.Resp.Rows, len(r.Resp.More), r.Flags, detail, r.Resp.ErrCode, w)
		}
	}
	c := out[0]
	if c.User != "app" || c.ClientCaps != caps41 || c.Collation != 45 || c.Start != time.Unix(99, 0) {
		t.Errorf("connect %+v", c)
	}
	sel := out[1].Resp
	if !sel.HasChecksums || sel.Columns != 1 || sel.Warnings != 1 || sel.Ordered == 0 || sel.Unordered == 0 ||
		sel.Bytes != uint64(1+len(colDef)+5+2*len(textRow)+5+6*4) || out[1].Duration != time.Millisecond {
		t.Errorf("result set summary %+v (duration %v)", sel, out[1].Duration)
	}
	var rs wire.RowSums
	rs.AddRow(textRow)
	rs.AddRow(textRow)
	if sel.Ordered != rs.Ordered || sel.Unordered != rs.Unordered {
		t.Errorf("checksums %x/%x, want %x/%x (RowSums of the two rows)", sel.Ordered, sel.Unordered, rs.Ordered, rs.Unordered)
	}
	if ins := out[2].Resp; ins.AffectedRows != 1 || ins.InsertID != 9 {
		t.Errorf("insert: %+v", ins)
	}
	if e := out[3].Resp; e.SQLState != "42S22" || e.Message != "Unknown column 'nope'" {
		t.Errorf("error: %+v", e)
	}
	if s.State().Schema != "other" {
		t.Errorf("state schema %q after USE other and a failed INIT_DB, want other", s.State().Schema)
	}
	// The session ends without COM_QUIT: a quit is recorded once.
	s.Close(time.Unix(200, 0))
	s.Close(time.Unix(201, 0))
	if n := len(out); out[n-1].Kind != store.KindQuit || out[n-2].Kind == store.KindQuit {
		t.Errorf("close: last records %s %s, want one quit", out[n-2].Kind, out[n-1].Kind)
	}
}

// Prepared statements: the prepare's answer (its definitions counted
// off), executes decoded with the statement's types (sent once, then
// remembered), long data, reset, close, and a cursor's fetch.
func TestSessionFollowsPreparedStatements(t *testing.T) {
	var out sink
	s := NewSession(1, State{User: "u", Caps: caps41}, Options{MaxRecordBytes: 48}, &out)
	prep := func(id uint32, params, cols uint16) []byte {
		return (&wire.PrepareOK{StmtID: id, Params: params, Columns: cols}).Append(nil)
	}
	// Two parameters, one column: 2 definitions + EOF, 1 + EOF.
	feed(t, s, append([]byte{mysql.COM_STMT_PREPARE}, "SELECT c FROM t WHERE id = ? AND k = ?"...), Read,
		frame{prep(5, 2, 1), Read}, frame{colDef, Read}, frame{colDef, Read}, frame{eofp(0, 2), Read},
		frame{colDef, Read}, frame{eofp(0, 2), Done})
	exec := func(bound bool, cursor byte, vals ...int64) []byte {
		e := wire.Execute{StmtID: 5, CursorType: cursor, Iterations: 1, NewParamsBound: bound}
		for _, v := range vals {
			e.Params = append(e.Params, wire.Param{ParamType: wire.ParamType{Type: mysql.MYSQL_TYPE_LONGLONG}, Int: v})
		}
		return e.Append(nil)
	}
	binRow := []byte{0x00, 0x00, 0x01, 'a'}
	feed(t, s, exec(true, 0, 3, 4), Read, frame{[]byte{1}, Read}, frame{colDef, Read}, frame{eofp(0, 2), Read},
		frame{binRow, Read}, frame{eofp(0, 2), Done})
	// Types not sent again: the remembered ones decode it.
	feed(t, s, exec(false, 0, 8, 9), Read, frame{okp(0, 0, 2, 0), Done})
	// A cursor: the result set ends after the definitions; rows come with
	// fetches.
	feed(t, s, exec(false, 1, 1, 2), Read, frame{[]byte{1}, Read}, frame{colDef, Read}, frame{eofp(0, 2|mysql.SERVER_STATUS_CURSOR_EXISTS), Done})
	feed(t, s, (&wire.StmtCommand{Command: mysql.COM_STMT_FETCH, StmtID: 5, Rows: 10}).Append(nil), Read,
		frame{binRow, Read}, frame{binRow, Read}, frame{eofp(0, 2|0x80), Done})
	// Long data: no answer; its data cut at MaxRecordBytes.
	feed(t, s, (&wire.LongData{StmtID: 5, Param: 1, Data: []byte(strings.Repeat("0123456789", 5))}).Append(nil), Done)
	feed(t, s, (&wire.StmtCommand{Command: mysql.COM_STMT_RESET, StmtID: 5}).Append(nil), Read, frame{okp(0, 0, 2, 0), Done})
	feed(t, s, (&wire.StmtCommand{Command: mysql.COM_STMT_CLOSE, StmtID: 5}).Append(nil), Done)
	// Closed: an execute of it is unknown (the server answers ERR).
	feed(t, s, exec(false, 0, 1, 2), Read, frame{errp(1243, "HY000", "Unknown prepared statement handler"), Done})
	// A prepare the server refuses.
	feed(t, s, append([]byte{mysql.COM_STMT_PREPARE}, "SELEC"...), Read, frame{errp(1064, "42000", "syntax"), Done})
	// A cursor on a statement the recorder does not know (prepared before
	// it followed the session): the answer still ends at the server's
	// EOF; it used to wait for rows, and the relay hung.
	feed(t, s, (&wire.Execute{StmtID: 77, CursorType: 1, Iterations: 1}).Append(nil), Read,
		frame{[]byte{1}, Read}, frame{colDef, Read}, frame{eofp(0, 2|mysql.SERVER_STATUS_CURSOR_EXISTS), Done})

	kinds := []store.Kind{store.KindPrepare, store.KindExecute, store.KindExecute, store.KindExecute, store.KindFetch,
		store.KindLongData, store.KindReset, store.KindClose, store.KindExecute, store.KindPrepare, store.KindExecute}
	if len(out) != len(kinds) {
		t.Fatalf("%d records, want %d", len(out), len(kinds))
	}
	for i, k := range kinds {
		if out[i].Kind != k {
			t.Errorf("record %d: %s, want %s", i, out[i].Kind, k)
		}
	}
	if p := out[0]; p.StmtID != 5 || p.Resp.Params != 2 || p.Resp.Columns != 1 {
		t.Errorf("prepare: %+v", p)
	}
	if e := out[1]; len(e.Params) != 2 || e.Params[0].Int != 3 || e.Params[1].Int != 4 || e.Flags&store.FlagNewParamsBound == 0 || e.Resp.Rows != 1 {
		t.Errorf("first execute: params %+v flags %x rows %d", e.Params, e.Flags, e.Resp.Rows)
	}
	if e := out[2]; len(e.Params) != 2 || e.Params[0].Int != 8 || e.Params[1].Int != 9 || e.Flags != 0 {
		t.Errorf("second execute (types remembered): params %+v flags %x", e.Params, e.Flags)
	}
	if e := out[3]; e.CursorType != 1 || e.Resp.Status&mysql.SERVER_STATUS_CURSOR_EXISTS == 0 || e.Resp.Rows != 0 {
		t.Errorf("cursor execute: %+v", e.Resp)
	}
	if f := out[4]; f.FetchRows != 10 || f.Resp.Rows != 2 || f.Resp.Kind != store.RespResultSet {
		t.Errorf("fetch: rows asked %d, got %d, kind %d", f.FetchRows, f.Resp.Rows, f.Resp.Kind)
	}
	if l := out[5]; string(l.Data) != strings.Repeat("0123456789", 5)[:48] || l.ParamIndex != 1 || l.Flags&(store.FlagTruncated|store.FlagNotReplayable) != store.FlagTruncated|store.FlagNotReplayable {
		t.Errorf("long data: %q flags %x", l.Data, l.Flags)
	}
	if e := out[8]; e.Resp.ErrCode != 1243 || e.Params != nil {
		t.Errorf("execute of a closed statement: %+v", e)
	}
}

// MaxRecordBytes 0 keeps everything: long data too (it was cut to no
// bytes and marked truncated).
func TestSessionWithoutALimitKeepsLongData(t *testing.T) {
	var out sink
	s := NewSession(1, State{User: "u", Caps: caps41}, Options{}, &out)
	feed(t, s, append([]byte{mysql.COM_STMT_PREPARE}, "INSERT INTO t VALUES (?)"...), Read,
		frame{(&wire.PrepareOK{StmtID: 3, Params: 1}).Append(nil), Read}, frame{colDef, Read}, frame{eofp(0, 2), Done})
	data := strings.Repeat("0123456789", 200)
	feed(t, s, (&wire.LongData{StmtID: 3, Param: 0, Data: []byte(data)}).Append(nil), Done)
	if len(out) != 2 {
		t.Fatalf("%d records, want 2", len(out))
	}
	if l := out[1]; l.Kind != store.KindLongData || string(l.Data) != data || l.Flags != 0 {
		t.Errorf("long data: %s, %d bytes, flags %#x; want all %d bytes, no flags", l.Kind, len(l.Data), l.Flags, len(data))
	}
}

// Long data for a statement the session does not know (prepared before
// it was followed, or its prepare's answer lost) may be a password
// (ALTER USER ? IDENTIFIED BY ?): it is not stored.
func TestSessionDoesNotStoreLongDataOfAnUnknownStatement(t *testing.T) {
	var out sink
	s := NewSession(1, State{User: "u", Caps: caps41}, Options{MaxRecordBytes: 1024}, &out)
	feed(t, s, (&wire.LongData{StmtID: 9, Param: 1, Data: []byte("hunter2")}).Append(nil), Done)
	// Statement -1 before any prepare: unknown too.
	feed(t, s, (&wire.LongData{StmtID: 0xffffffff, Param: 0, Data: []byte("hunter3")}).Append(nil), Done)
	if len(out) != 2 {
		t.Fatalf("%d records", len(out))
	}
	for i, r := range out {
		if r.Kind != store.KindLongData || r.Data != nil || r.Flags != store.FlagMasked|store.FlagNotReplayable {
			t.Errorf("record %d: %s data %q flags %#x, want long data, no data, masked and not replayable", i, r.Kind, r.Data, r.Flags)
		}
	}
}

// Secrets: a statement that can carry a password is stored masked, and
// so is the server's message about it; a prepared one's parameters are
// never kept. COM_CHANGE_USER's exchange: the client's turns, and the
// new user taking effect only on OK.
func TestSessionMasksSecretsAndFollowsChangeUser(t *testing.T) {
	var out sink
	s := NewSession(2, State{User: "root", Schema: "a", Caps: caps41 | uint64(mysql.CLIENT_PLUGIN_AUTH|mysql.CLIENT_CONNECT_WITH_DB)}, Options{MaxRecordBytes: 1024}, &out)
	feed(t, s, query("CREATE USER x IDENTIFIED BY 'hunter2'"), Read, frame{errp(1064, "42000", "near 'IDENTIFIED BY 'hunter2''"), Done})
	feed(t, s, append([]byte{mysql.COM_STMT_PREPARE}, "SET PASSWORD FOR x = PASSWORD(?)"...), Read,
		frame{(&wire.PrepareOK{StmtID: 1, Params: 1}).Append(nil), Read}, frame{colDef, Read}, frame{eofp(0, 2), Done})
	e := wire.Execute{StmtID: 1, Iterations: 1, NewParamsBound: true,
		Params: []wire.Param{{ParamType: wire.ParamType{Type: mysql.MYSQL_TYPE_VAR_STRING}, Bytes: []byte("hunter2")}}}
	feed(t, s, e.Append(nil), Read, frame{okp(0, 0, 2, 0), Done})
	cu := (&wire.ChangeUser{User: []byte("bob"), AuthResponse: []byte("secret-scramble"), Database: []byte("b")}).Append(nil, s.State().Caps)
	// An auth switch (the client answers), then ERR: nothing changes.
	feed(t, s, cu, Read, frame{append([]byte{0xfe}, "mysql_native_password\x00salt"...), ClientTurn},
		frame{errp(1045, "28000", "Access denied for user 'bob'"), Done})
	if st := s.State(); st.User != "root" || st.Schema != "a" {
		t.Errorf("after a refused change of user: %+v", st)
	}
	// Fast auth (0x01 0x03) then OK: the new user and schema hold.
	feed(t, s, cu, Read, frame{[]byte{0x01, 0x03}, Read}, frame{okp(0, 0, 2, 0), Done})
	if st := s.State(); st.User != "bob" || st.Schema != "b" {
		t.Errorf("after change user: %+v", st)
	}
	// A replica registering (COM_REGISTER_SLAVE): server id, host, user,
	// its report password, port, rank, source id.
	reg := append([]byte{mysql.COM_REGISTER_SLAVE, 9, 0, 0, 0, 0, 4}, "repl"...)
	reg = append(append(append(reg, 7), "hunter2"...), 0xea, 0x0c, 0, 0, 0, 0, 0, 0, 0, 0)
	feed(t, s, reg, Read, frame{okp(0, 0, 2, 0), Done})
	for i, r := range out {
		var buf bytes.Buffer
		buf.WriteString(r.SQL + r.Resp.Message + string(r.Data))
		for _, p := range r.Params {
			buf.Write(p.Bytes)
		}
		if strings.Contains(buf.String(), "hunter2") || strings.Contains(buf.String(), "secret-scramble") {
			t.Errorf("record %d stores a secret: %+v", i, r)
		}
	}
	if out[0].Flags&store.FlagMasked == 0 || out[0].Resp.ErrCode != 1064 || out[0].Resp.Message != "(message of a statement with a secret, not stored)" {
		t.Errorf("masked statement: %+v", out[0])
	}
	if out[2].Flags&store.FlagMasked == 0 || out[2].Params != nil {
		t.Errorf("secret execute keeps params %+v (flags %x)", out[2].Params, out[2].Flags)
	}
	if r := out[3]; r.Kind != store.KindChangeUser || r.User != "bob" || r.Resp.Kind != store.RespError || !strings.Contains(r.Resp.Message, "1045") {
		t.Errorf("refused change user: %+v", r)
	}
	if r := out[4]; r.Resp.Kind != store.RespOK || r.Schema != "b" {
		t.Errorf("change user: %+v", r)
	}
}

// MariaDB's statement commands may name the last prepared statement as
// -1 (Connector/C's execute direct sends the prepare and the execute
// together): the record names the statement by its prepare's id, and the
// execute's parameters are decoded with its types. The old recorder kept
// -1, and replay skipped the execute as prepared before the capture.
func TestSessionResolvesTheLastPreparedStatement(t *testing.T) {
	var out sink
	s := NewSession(1, State{User: "u", Caps: caps41}, Options{MaxRecordBytes: 1024}, &out)
	prepare := func(sql string, answer ...frame) {
		feed(t, s, append([]byte{mysql.COM_STMT_PREPARE}, sql...), Read, answer...)
	}
	last := func(cmd []byte) []byte {
		return append(cmd[:1:1], append([]byte{0xff, 0xff, 0xff, 0xff}, cmd[5:]...)...)
	}
	exec := func(v int64) []byte {
		e := wire.Execute{StmtID: 9, Iterations: 1, NewParamsBound: true,
			Params: []wire.Param{{ParamType: wire.ParamType{Type: mysql.MYSQL_TYPE_LONGLONG}, Int: v}}}
		return last(e.Append(nil))
	}
	prepare("UPDATE t SET k = k + 1 WHERE id = ?", frame{(&wire.PrepareOK{StmtID: 9, Params: 1}).Append(nil), Read}, frame{colDef, Read}, frame{eofp(0, 2), Done})
	feed(t, s, exec(42), Read, frame{okp(1, 0, 2, 0), Done})
	feed(t, s, last((&wire.StmtCommand{Command: mysql.COM_STMT_CLOSE, StmtID: 9}).Append(nil)), Done)
	// After a prepare the server refused, -1 names no statement.
	prepare("UPDATE nope SET k = 1 WHERE id = ?", frame{errp(1146, "42S02", "no such table"), Done})
	feed(t, s, exec(43), Read, frame{errp(1243, "HY000", "Unknown prepared statement handler"), Done})
	if len(out) != 5 {
		t.Fatalf("%d records, want 5", len(out))
	}
	if e := out[1]; e.Kind != store.KindExecute || e.StmtID != 9 || len(e.Params) != 1 || e.Params[0].Int != 42 || e.Flags&store.FlagNotReplayable != 0 {
		t.Errorf("execute of -1: statement %d, params %+v, flags %x; want statement 9, 42", e.StmtID, e.Params, e.Flags)
	}
	if c := out[2]; c.Kind != store.KindClose || c.StmtID != 9 {
		t.Errorf("close of -1: %s statement %d; want close of 9", c.Kind, c.StmtID)
	}
	if e := out[4]; e.StmtID != 0xffffffff || e.Resp.ErrCode != 1243 {
		t.Errorf("execute of -1 after a failed prepare: statement %d, error %d; want -1 and 1243", e.StmtID, e.Resp.ErrCode)
	}
}

// What cannot be decoded: a command (recorded, not replayable, its
// answer still followed), an answer (Malformed, with a reason), a binlog
// dump (Raw), a truncated command, and a row of 16 MiB or more arriving
// in frames (one row, its checksum over all of them).
func TestSessionLabelsWhatItCannotDecode(t *testing.T) {
	var out sink
	s := NewSession(3, State{Caps: caps41}, Options{MaxRecordBytes: 1 << 20, Checksums: true}, &out)
	feed(t, s, []byte{mysql.COM_STMT_EXECUTE, 1}, Read, frame{errp(1243, "HY000", "x"), Done})
	if out[0].Kind != store.KindOther || out[0].Flags&store.FlagNotReplayable == 0 {
		t.Errorf("short execute: %s flags %x", out[0].Kind, out[0].Flags)
	}
	if s.Command(query("SELECT 1"), false, time.Now()) != Read || s.Server(nil) != Malformed || !strings.Contains(s.Err().Error(), "empty") {
		t.Errorf("an empty answer is not reported malformed (%v)", s.Err())
	}
	if s.Command(query("SELECT 1"), false, time.Now()) != Read || s.Server([]byte{0xfc}) != Malformed {
		t.Errorf("a bad column count is not reported malformed")
	}
	if s.Command([]byte{mysql.COM_BINLOG_DUMP, 0, 0, 0, 0}, false, time.Now()) != Raw {
		t.Errorf("binlog dump is not Raw")
	}
	s.End(time.Now())
	if r := out[len(out)-1]; r.Kind != store.KindOther || r.Flags&store.FlagNotReplayable == 0 {
		t.Errorf("raw: %+v", r)
	}
	feed(t, s, query("SELECT 'cut"), Read, frame{errp(1064, "42000", "x"), Done})
	s.Command(query("INSERT INTO t VALUES ('"), true, time.Now())
	s.End(time.Now())
	if r := out[len(out)-1]; r.Flags&(store.FlagTruncated|store.FlagNotReplayable) != store.FlagTruncated|store.FlagNotReplayable {
		t.Errorf("truncated command: flags %x", r.Flags)
	}
	big := make([]byte, wire.MaxPayload)
	big[0] = 0xfc // a text row whose first column is long
	tail := []byte("end")
	feed(t, s, query("SELECT blob"), Read, frame{[]byte{1}, Read}, frame{colDef, Read}, frame{eofp(0, 2), Read},
		frame{big, Read}, frame{tail, Read}, frame{textRow, Read}, frame{eofp(0, 2), Done})
	r := out[len(out)-1].Resp
	var rs wire.RowSums
	rs.AddRow(append(append([]byte{}, big...), tail...))
	rs.AddRow(textRow)
	if r.Rows != 2 || r.Ordered != rs.Ordered || r.Unordered != rs.Unordered {
		t.Errorf("long row: %d rows, sums %x/%x want 2, %x/%x", r.Rows, r.Ordered, r.Unordered, rs.Ordered, rs.Unordered)
	}
}

// A nil sink records nothing, and a refused login before the client said
// who it is leaves no record.
func TestSessionConnectRecords(t *testing.T) {
	var out sink
	NewSession(1, State{}, Options{}, &out).Connect(time.Now(), 0, false, "bad handshake")
	s := NewSession(2, State{User: "u"}, Options{}, &out)
	s.Connect(time.Now(), 0, false, "1045 (28000) Access denied")
	if len(out) != 1 || out[0].Session != 2 || out[0].Resp.Kind != store.RespError || out[0].Resp.Message != "1045 (28000) Access denied" {
		t.Fatalf("records %+v", out)
	}
	var nilRec *Recorder
	n := NewSession(3, State{User: "u"}, Options{}, nilRec)
	n.Connect(time.Now(), 0, true, "")
	n.Close(time.Now())
}

// The recorder's cost per row of a result set relayed by the proxy
// (checksums on): the proxy calls Server for every frame it relays.
func BenchmarkSessionResultRows(b *testing.B) {
	s := NewSession(1, State{Caps: caps41}, Options{MaxRecordBytes: 1024, Checksums: true}, nil)
	row := []byte("\x0342\x0b\x3bfoo-bar-baz-qux-0123456789-0123456789-0123456789-0123456789")
	eof := eofp(0, 2)
	b.ReportAllocs()
	for b.Loop() {
		s.Command(query("SELECT c FROM t"), false, time.Time{})
		s.Server([]byte{1})
		s.Server(colDef)
		s.Server(eof)
		for range 100 {
			s.Server(row)
		}
		s.Server(eof)
	}
}

// --max-record-bytes holds for a command of any length (it was enforced
// only on commands of 16 MiB or more, which arrive in several frames): a
// 5,000-byte statement under a 1,000-byte bound keeps 1,000 bytes of SQL
// and is not replayable; one within the bound is kept whole.
func TestSessionBoundsEveryCommand(t *testing.T) {
	var out sink
	s := NewSession(1, State{Caps: caps41}, Options{MaxRecordBytes: 1000}, &out)
	long := "REPLACE INTO t VALUES ('" + strings.Repeat("x", 5000) + "')"
	feed(t, s, query(long), Read, frame{okp(1, 0, 2, 0), Done})
	short := "SELECT '" + strings.Repeat("y", 990) + "'"
	feed(t, s, query(short), Read, frame{okp(0, 0, 2, 0), Done})
	if r := out[0]; len(r.SQL) != 1000 || r.SQL != long[:1000] || r.Flags&(store.FlagTruncated|store.FlagNotReplayable) != store.FlagTruncated|store.FlagNotReplayable {
		t.Errorf("long statement: %d bytes of SQL, flags %x; want 1000, truncated and not replayable", len(r.SQL), r.Flags)
	}
	if r := out[1]; r.SQL != short || r.Flags != 0 {
		t.Errorf("short statement: %d bytes, flags %x; want whole, no flags", len(r.SQL), r.Flags)
	}
}

// With Options.Commits a session says when a transaction that wrote has
// ended, from the server's answers: the moments the proxy asks the server
// for the transaction's GTID. Reads, statements inside a transaction,
// errors and prepare answers (no status) never say it.
func TestSessionSaysWhenAWrittenTransactionEnds(t *testing.T) {
	const inTrx = mysql.SERVER_STATUS_IN_TRANS | mysql.SERVER_STATUS_AUTOCOMMIT
	const auto = mysql.SERVER_STATUS_AUTOCOMMIT
	type cmd struct {
		sql  string
		ans  []byte
		want bool
	}
	for _, c := range []struct {
		name string
		cmds []cmd
	}{
		{"autocommit write", []cmd{{"UPDATE t SET v=1", okp(1, 0, auto, 0), true}}},
		{"autocommit write that changed nothing", []cmd{{"UPDATE t SET v=1 WHERE 0", okp(0, 0, auto, 0), false}}},
		{"DDL", []cmd{{"CREATE TABLE u (a int)", okp(0, 0, auto, 0), true}, {"DROP TABLE u", okp(0, 0, auto, 0), true}}},
		{"SET and BEGIN are no DDL", []cmd{{"SET @a=1", okp(0, 0, auto, 0), false}, {"BEGIN", okp(0, 0, inTrx, 0), false}}},
		// A binary log in statement or mixed format logs them.
		{"temporary tables", []cmd{{"CREATE TEMPORARY TABLE tmp (a int)", okp(0, 0, auto, 0), true}, {"DROP TEMPORARY TABLE tmp", okp(0, 0, auto, 0), true}}},
		{"transaction", []cmd{
			{"BEGIN", okp(0, 0, inTrx, 0), false},
			{"UPDATE t SET v=1", okp(1, 0, inTrx, 0), false},
			{"UPDATE t SET v=2", okp(3, 0, inTrx, 0), false},
			{"COMMIT", okp(0, 0, auto, 0), true},
			{"SELECT 1", okp(0, 0, auto, 0), false},
		}},
		{"read-only transaction", []cmd{{"BEGIN", okp(0, 0, inTrx, 0), false}, {"COMMIT", okp(0, 0, auto, 0), false}}},
		{"error inside keeps the transaction", []cmd{
			{"BEGIN", okp(0, 0, inTrx, 0), false},
			{"INSERT INTO t VALUES (1)", okp(1, 0, inTrx, 0), false},
			{"INSERT INTO t VALUES (1)", errp(1062, "23000", "Duplicate entry"), false},
			{"ROLLBACK", okp(0, 0, auto, 0), true}, // asked: the server says its last GTID did not change
		}},
		{"BEGIN commits a transaction that wrote", []cmd{
			{"BEGIN", okp(0, 0, inTrx, 0), false},
			{"UPDATE t SET v=1", okp(1, 0, inTrx, 0), false},
			{"BEGIN", okp(0, 0, inTrx, 0), true},
			{"COMMIT", okp(0, 0, auto, 0), false}, // the second wrote nothing
		}},
		{"COMMIT AND CHAIN", []cmd{
			{"BEGIN", okp(0, 0, inTrx, 0), false},
			{"UPDATE t SET v=1", okp(1, 0, inTrx, 0), false},
			{"COMMIT AND CHAIN", okp(0, 0, inTrx, 0), true},
		}},
		{"autocommit=0", []cmd{
			{"SET autocommit=0", okp(0, 0, 0, 0), false},
			{"INSERT INTO t VALUES (2)", okp(1, 0, mysql.SERVER_STATUS_IN_TRANS, 0), false},
			{"COMMIT", okp(0, 0, 0, 0), true},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out sink
			s := NewSession(1, State{Caps: caps41}, Options{Commits: true}, &out)
			for i, q := range c.cmds {
				feed(t, s, query(q.sql), Read, frame{q.ans, Done})
				c, got := s.CommitEnded()
				if got != q.want {
					t.Errorf("after %d %q: CommitEnded %v, want %v", i, q.sql, got, q.want)
				}
				// A COMMIT (BEGIN, ROLLBACK) that ends the transaction wrote
				// nothing itself: the server may have committed from its
				// start. A write on its own commits as late as its answer.
				start, end := time.Unix(100, 0), time.Unix(100, 0).Add(time.Millisecond)
				wantFrom := end
				if strings.HasPrefix(q.sql, "COMMIT") || strings.HasPrefix(q.sql, "BEGIN") || strings.HasPrefix(q.sql, "ROLLBACK") {
					wantFrom = start
				}
				if got && (!c.From.Equal(wantFrom) || !c.End.Equal(end) || c.Seq != out[len(out)-1].Seq) {
					t.Errorf("after %d %q: commit %+v, want from %v, end %v, seq of its record", i, q.sql, c, wantFrom, end)
				}
				if _, again := s.CommitEnded(); again {
					t.Errorf("after %d %q: CommitEnded said it twice", i, q.sql)
				}
			}
		})
	}
	// A DDL statement that commits a transaction that wrote: two GTIDs,
	// one askable; the other is counted.
	var dout sink
	d := NewSession(1, State{Caps: caps41}, Options{Commits: true}, &dout)
	feed(t, d, query("BEGIN"), Read, frame{okp(0, 0, inTrx, 0), Done})
	feed(t, d, query("UPDATE t SET v=1"), Read, frame{okp(1, 0, inTrx, 0), Done})
	feed(t, d, query("CREATE TABLE u (a int)"), Read, frame{okp(0, 0, auto, 0), Done})
	if c, got := d.CommitEnded(); !got || d.ImplicitLost() != 1 || !c.From.Equal(c.End) {
		t.Errorf("DDL after a written transaction: CommitEnded %v, ImplicitLost %d; want true, 1", got, d.ImplicitLost())
	}
	// Without the option nothing is followed.
	var out sink
	s := NewSession(1, State{Caps: caps41}, Options{}, &out)
	feed(t, s, query("UPDATE t SET v=1"), Read, frame{okp(1, 0, auto, 0), Done})
	if _, got := s.CommitEnded(); got {
		t.Error("CommitEnded without Options.Commits")
	}
}

// ReadsDiagnostics says which commands may read what the previous
// statement left (the proxy asks its GTID question after those, never
// before): text queries by what they name, in any case; prepares by their
// SQL; executes by their prepared statement's SQL, and an unknown
// statement may. Statements are prepared here before the session asks
// GTIDs (no Options.Commits: a session before it joins a capture that
// asks), which the old recorder took for reading none.
func TestSessionSaysWhatReadsTheDiagnostics(t *testing.T) {
	var out sink
	s := NewSession(1, State{Caps: caps41 | uint64(mysql.CLIENT_DEPRECATE_EOF)}, Options{}, &out)
	prepOK := func(id byte) []byte { return []byte{0x00, id, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0} }
	feed(t, s, append([]byte{mysql.COM_STMT_PREPARE}, "SELECT Row_Count()"...), Read, frame{prepOK(1), Done})
	feed(t, s, append([]byte{mysql.COM_STMT_PREPARE}, "SELECT c FROM t WHERE id = 1"...), Read, frame{prepOK(2), Done})
	exec := func(id byte) []byte { return []byte{mysql.COM_STMT_EXECUTE, id, 0, 0, 0, 0, 1, 0, 0, 0} }
	for _, c := range []struct {
		cmd  []byte
		want bool
	}{
		{query("SELECT ROW_COUNT()"), true},
		{query("select found_rows()"), true},
		{query("SHOW WARNINGS"), true},
		{query("show errors limit 1"), true},
		{query("SHOW COUNT(*) WARNINGS"), true},
		{query("GET DIAGNOSTICS @n = NUMBER"), true},
		{query("SELECT @@warning_count, @@error_count"), true},
		{query("SHOW STATUS LIKE 'Last_query_cost'"), true},
		{query("SELECT c FROM t WHERE id = 1"), false},
		{query("COMMIT"), false},
		{query("INSERT INTO t VALUES (1, 'row')"), false},
		{append([]byte{mysql.COM_STMT_PREPARE}, "select row_count()"...), true},
		{append([]byte{mysql.COM_STMT_PREPARE}, "SELECT 1"...), false},
		{exec(1), true},
		{exec(2), false},
		{exec(9), true}, // prepared before anything the session saw
		{[]byte{mysql.COM_PING}, false},
		{nil, false},
	} {
		if got := s.ReadsDiagnostics(c.cmd); got != c.want {
			t.Errorf("ReadsDiagnostics(%q) = %v, want %v", c.cmd, got, c.want)
		}
	}
}

// A session found open (its login unseen) learns from its answers how the
// server ends column definitions and whether it caches metadata, and
// reads the same records either way.
func TestSessionFoundOpenLearnsHowAnswersRead(t *testing.T) {
	prep := func(id uint32, params, cols uint16) []byte {
		return (&wire.PrepareOK{StmtID: id, Params: params, Columns: cols}).Append(nil)
	}
	okEnd := func(status uint16) []byte { // an OK that ends rows (no EOF packets)
		return (&wire.OK{Header: wire.HeaderEOF, Status: status}).Append(nil, caps41)
	}
	t.Run("EOF packets", func(t *testing.T) {
		var out sink
		s := NewSession(1, State{Unknown: true}, Options{}, &out)
		// A prepare with parameters and columns: each group ends with an EOF.
		feed(t, s, append([]byte{mysql.COM_STMT_PREPARE}, "SELECT c FROM t WHERE id=?"...), Read,
			frame{prep(3, 1, 1), Read}, frame{colDef, Read}, frame{eofp(0, 2), Read}, frame{colDef, Read}, frame{eofp(0, 2), Done})
		feed(t, s, query("SELECT c FROM t"), Read,
			frame{[]byte{1}, Read}, frame{colDef, Read}, frame{eofp(0, 2), Read}, frame{textRow, Read}, frame{eofp(0, 2), Done})
		if r := out[1]; r.Resp.Kind != store.RespResultSet || r.Resp.Rows != 1 || r.Resp.Columns != 1 {
			t.Errorf("result %+v", r.Resp)
		}
		if out[0].Resp.Params != 1 || out[0].StmtID != 3 {
			t.Errorf("prepare %+v", out[0])
		}
	})
	t.Run("no EOF packets, metadata cached", func(t *testing.T) {
		var out sink
		s := NewSession(1, State{Unknown: true}, Options{}, &out)
		// A prepare whose parameters' end cannot tell: the last definition
		// ends it; an EOF after it would be a stray the session takes.
		feed(t, s, append([]byte{mysql.COM_STMT_PREPARE}, "DO ?"...), Read, frame{prep(4, 1, 0), Read}, frame{colDef, Done})
		if s.Stray(okp(0, 0, 2, 0)) {
			t.Error("an OK taken as a stray EOF")
		}
		// A column count with MariaDB's metadata-follows byte, then rows
		// with no EOF after the definitions: both learned.
		feed(t, s, query("SELECT c FROM t"), Read,
			frame{[]byte{1, 1}, Read}, frame{colDef, Read}, frame{textRow, Read}, frame{textRow, Read}, frame{okEnd(2), Done})
		if r := out[1]; r.Resp.Kind != store.RespResultSet || r.Resp.Rows != 2 {
			t.Errorf("result %+v", r.Resp)
		}
		// Learned: metadata caching (a count with no definitions) reads.
		feed(t, s, query("SELECT c FROM t"), Read, frame{[]byte{1, 0}, Read}, frame{textRow, Read}, frame{okEnd(2), Done})
		if r := out[2]; r.Resp.Rows != 1 {
			t.Errorf("cached-metadata result %+v", r.Resp)
		}
	})
	t.Run("a stray EOF teaches EOF packets", func(t *testing.T) {
		var out sink
		s := NewSession(1, State{Unknown: true}, Options{}, &out)
		feed(t, s, append([]byte{mysql.COM_STMT_PREPARE}, "DO ?"...), Read, frame{prep(4, 1, 0), Read}, frame{colDef, Done})
		if !s.Stray(eofp(0, 2)) {
			t.Fatal("the EOF after the definitions was not taken")
		}
		feed(t, s, query("SELECT c FROM t"), Read,
			frame{[]byte{1}, Read}, frame{colDef, Read}, frame{eofp(0, 2), Read}, frame{eofp(0, 2), Done})
		if r := out[1]; r.Resp.Kind != store.RespResultSet || r.Resp.Rows != 0 {
			t.Errorf("empty result %+v", r.Resp)
		}
	})
}

func TestMayHaveWritten(t *testing.T) {
	q := func(sql string, resp store.Response, flags store.Flags) *store.Record {
		return &store.Record{Kind: store.KindQuery, SQL: sql, Resp: resp, Flags: flags}
	}
	ok := func(affected uint64) store.Response {
		return store.Response{Kind: store.RespOK, AffectedRows: affected}
	}
	for _, c := range []struct {
		r    *store.Record
		want bool
	}{
		{&store.Record{Kind: store.KindOther, Flags: store.FlagLost | store.FlagNotReplayable}, true},
		{q("UPDATE t SET v = 1", ok(2), 0), true},
		{q("UPDATE t SET v = 1", ok(0), 0), false},
		{q("CREATE TABLE t (id INT)", ok(0), 0), true},
		{q("BEGIN", ok(0), 0), false},
		{q("COMMIT", ok(0), 0), false},
		{q("SET autocommit=1", ok(0), 0), false},
		{q("SELECT 1", store.Response{Kind: store.RespResultSet, Rows: 1}, 0), false},
		{q("DELETE FROM t", store.Response{Kind: store.RespError, ErrCode: 1213}, 0), false},
		{q("DELETE FROM t", store.Response{}, store.FlagAnswerLost), true},
		{q("DO 1; DELETE FROM t", store.Response{Kind: store.RespOK, More: []store.Response{{Kind: store.RespOK, AffectedRows: 1}}}, 0), true},
		{&store.Record{Kind: store.KindExecute, Resp: ok(1)}, true},
		{&store.Record{Kind: store.KindPrepare, SQL: "DELETE FROM t", Resp: ok(0)}, false},
	} {
		if got := MayHaveWritten(c.r); got != c.want {
			t.Errorf("%s %q %+v flags %d: %v, want %v", c.r.Kind, c.r.SQL, c.r.Resp, c.r.Flags, got, c.want)
		}
	}
}

// discard is a sink that keeps nothing.
type discard struct{ n int }

func (d *discard) Record(*store.Record) { d.n++ }

// A capturing proxy records every execute: once its statement and its
// parameters' types are known, recording one and its answer allocates
// nothing (the parsed execute, its parameters and the record's values were
// three allocations).
func TestRecordingAnExecuteDoesNotAllocate(t *testing.T) {
	var out discard
	s := NewSession(7, State{User: "app", Schema: "shop", Caps: caps41, Collation: 45}, Options{}, &out)
	s.Connect(time.Unix(99, 0), time.Millisecond, true, "")
	feed(t, s, append([]byte{mysql.COM_STMT_PREPARE}, "SELECT c FROM t WHERE id = ?"...), Read,
		frame{(&wire.PrepareOK{StmtID: 5, Params: 1, Columns: 1}).Append(nil), Read}, frame{colDef, Read}, frame{eofp(0, 2), Read},
		frame{colDef, Read}, frame{eofp(0, 2), Done})
	e := wire.Execute{StmtID: 5, Iterations: 1, NewParamsBound: true,
		Params: []wire.Param{{ParamType: wire.ParamType{Type: mysql.MYSQL_TYPE_LONGLONG}, Int: 42}}}
	exec := e.Append(nil) // the first binds the types, as clients do
	e.NewParamsBound = false
	again := e.Append(nil)
	count, eof, row := []byte{1}, eofp(0, 2), []byte{0x00, 0x00, 0x01, 'a'}
	at := time.Unix(100, 0)
	run := func() {
		s.Command(exec, false, at)
		exec = again
		for _, p := range [][]byte{count, colDef, eof, row, eof} {
			s.Server(p)
		}
		s.End(at.Add(time.Millisecond))
	}
	run()
	before := out.n
	if n := testing.AllocsPerRun(100, run); n != 0 {
		t.Errorf("an execute and its result set: %v allocations, want 0", n)
	}
	if out.n-before != 101 || s.Err() != nil {
		t.Errorf("recorded %d executes (err %v), want 101", out.n-before, s.Err())
	}
}
