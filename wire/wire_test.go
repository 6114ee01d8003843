package wire

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"reflect"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// mariadbGreeting is what MariaDB 10.11.19 (Debian 12) sent on connect.
const mariadbGreeting = "0a352e352e352d31302e31312e31392d4d6172696144422d302b64656231327531000500000031495966753a5e4c00fef72d0200ff81150000000000001d00000043477c5b332e292371354f70006d7973716c5f6e61746976655f70617373776f726400"

func TestGreetingMariaDB(t *testing.T) {
	b, _ := hex.DecodeString(mariadbGreeting)
	g, err := ParseGreeting(b)
	if err != nil {
		t.Fatal(err)
	}
	if string(g.ServerVersion) != "5.5.5-10.11.19-MariaDB-0+deb12u1" || g.ConnID != 5 || string(g.AuthPlugin) != "mysql_native_password" {
		t.Errorf("greeting = %+v", g)
	}
	if !mariaDBExt(g.Caps) || g.Caps&MariaDBClientCacheMetadata == 0 || g.Caps&MariaDBClientStmtBulkOps == 0 || g.Caps&MariaDBClientProgress == 0 {
		t.Errorf("extended capabilities not read: %#x", g.Caps)
	}
	if uint32(g.Caps)&mysql.CLIENT_DEPRECATE_EOF == 0 || uint32(g.Caps)&mysql.CLIENT_SSL != 0 {
		t.Errorf("caps %#x: want DEPRECATE_EOF, no SSL", g.Caps)
	}
	if out := g.Append(nil); !bytes.Equal(out, b) {
		t.Fatalf("round trip differs\n got %x\nwant %x", out, b)
	}
	// Clearing extended capabilities changes only those bytes.
	g.Caps &^= MariaDBClientCacheMetadata | MariaDBClientStmtBulkOps | MariaDBClientProgress
	out := g.Append(nil)
	g2, err := ParseGreeting(out)
	if err != nil || g2.Caps != g.Caps || g2.Caps>>32 != uint64(MariaDBClientExtendedMetadata>>32) {
		t.Fatalf("after clearing: caps %#x (%v)", g2.Caps, err)
	}
}

func TestHandshakeResponseRoundTrip(t *testing.T) {
	base := uint64(mysql.CLIENT_PROTOCOL_41 | mysql.CLIENT_SECURE_CONNECTION | mysql.CLIENT_PLUGIN_AUTH)
	cases := []*HandshakeResponse{
		{Caps: base | uint64(mysql.CLIENT_CONNECT_WITH_DB|mysql.CLIENT_CONNECT_ATTRS|mysql.CLIENT_LONG_PASSWORD), MaxPacket: 1 << 24, Charset: 45,
			User: []byte("app"), AuthResponse: bytes.Repeat([]byte{7}, 20), Database: []byte("sbtest"), HasDatabase: true,
			AuthPlugin: []byte("mysql_native_password"), HasPlugin: true, Attrs: []byte("\x04_pid\x0512345"), HasAttrs: true},
		{Caps: base | uint64(mysql.CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA) | MariaDBClientExtendedMetadata, User: []byte("root"),
			AuthResponse: bytes.Repeat([]byte{1}, 300), AuthPlugin: []byte("client_ed25519"), HasPlugin: true},
		{Caps: uint64(mysql.CLIENT_PROTOCOL_41 | mysql.CLIENT_SSL | mysql.CLIENT_LONG_PASSWORD), MaxPacket: 16777216, Charset: 8, SSLRequest: true},
		{Caps: uint64(mysql.CLIENT_PROTOCOL_41), User: []byte("old"), AuthResponse: []byte("x")},
	}
	for i, h := range cases {
		b := h.Append(nil)
		got, err := ParseHandshakeResponse(b)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if h.SSLRequest && len(b) != sslRequestLen {
			t.Errorf("case %d: SSLRequest of %d bytes", i, len(b))
		}
		if !bytes.Equal(got.Append(nil), b) {
			t.Errorf("case %d: re-encoding differs", i)
		}
		got.Filler = h.Filler
		if !reflect.DeepEqual(got, h) {
			t.Errorf("case %d:\n got %+v\nwant %+v", i, got, h)
		}
	}
}

// A replay parses an OK or two EOFs per statement: neither may allocate.
func TestOKAndEOFParseWithoutAllocating(t *testing.T) {
	caps := uint64(mysql.CLIENT_PROTOCOL_41 | mysql.CLIENT_TRANSACTIONS)
	ok := (&OK{Header: HeaderOK, AffectedRows: 1, Status: 2, Info: []byte("Rows matched: 1  Changed: 1  Warnings: 0")}).Append(nil, caps)
	eof := (&EOF{Status: 2}).Append(nil)
	var affected uint64
	var status uint16
	if n := testing.AllocsPerRun(100, func() {
		o, err := ParseOK(ok, caps)
		if err != nil {
			t.Fatal(err)
		}
		e, err := ParseEOF(eof)
		if err != nil {
			t.Fatal(err)
		}
		affected, status = o.AffectedRows, e.Status
	}); n != 0 {
		t.Errorf("ParseOK and ParseEOF: %v allocations, want 0", n)
	}
	if affected != 1 || status != 2 {
		t.Errorf("parsed affected %d, status %d; want 1 and 2", affected, status)
	}
}

func TestOKErrEOFPrepareRoundTrip(t *testing.T) {
	caps := uint64(mysql.CLIENT_PROTOCOL_41 | mysql.CLIENT_TRANSACTIONS)
	ok := &OK{Header: HeaderOK, AffectedRows: 70000, InsertID: 1 << 40, Status: 0x0022, Warnings: 3, Info: []byte("Rows matched: 1")}
	b := ok.Append(nil, caps)
	got, err := ParseOK(b, caps)
	if err != nil || !reflect.DeepEqual(got, *ok) {
		t.Fatalf("OK: %+v %v", got, err)
	}
	e := &Err{Code: 1062, HasState: true, State: "23000", Message: "Duplicate entry '1' for key 'PRIMARY'"}
	if got, err := ParseErr(e.Append(nil)); err != nil || !reflect.DeepEqual(got, e) {
		t.Fatalf("ERR: %+v %v", got, err)
	}
	eof := &EOF{Warnings: 1, Status: mysql.SERVER_MORE_RESULTS_EXISTS}
	if got, err := ParseEOF(eof.Append(nil)); err != nil || !reflect.DeepEqual(got, *eof) {
		t.Fatalf("EOF: %+v %v", got, err)
	}
	p := &PrepareOK{StmtID: 9, Columns: 4, Params: 2, Warnings: 1}
	if got, err := ParsePrepareOK(p.Append(nil)); err != nil || !reflect.DeepEqual(got, p) {
		t.Fatalf("PrepareOK: %+v %v", got, err)
	}
}

func TestIsResultEnd(t *testing.T) {
	eof := (&EOF{Status: 2}).Append(nil)
	okEOF := (&OK{Header: HeaderEOF, Status: 2, Info: []byte("some session state that is long")}).Append(nil, uint64(mysql.CLIENT_PROTOCOL_41))
	row := AppendLenencBytes(nil, []byte("abc"))
	cases := []struct {
		p    []byte
		dep  bool
		want bool
	}{
		{eof, false, true}, {eof, true, true},
		{okEOF, true, true}, {okEOF, false, false},
		{row, false, false}, {row, true, false},
		{[]byte{HeaderEOF}, false, true},
		{nil, true, false},
	}
	for i, c := range cases {
		if got := IsResultEnd(c.p, c.dep); got != c.want {
			t.Errorf("case %d (%x, deprecateEOF=%v): %v, want %v", i, c.p, c.dep, got, c.want)
		}
	}
}

func allTypesExecute() (*Execute, int) {
	params := []Param{
		{ParamType: ParamType{Type: mysql.MYSQL_TYPE_TINY}, Int: -128},
		{ParamType: ParamType{Type: mysql.MYSQL_TYPE_TINY, Flag: 0x80}, Int: 255},
		{ParamType: ParamType{Type: mysql.MYSQL_TYPE_SHORT}, Int: -32768},
		{ParamType: ParamType{Type: mysql.MYSQL_TYPE_YEAR, Flag: 0x80}, Int: 2026},
		{ParamType: ParamType{Type: mysql.MYSQL_TYPE_LONG}, Int: math.MinInt32},
		{ParamType: ParamType{Type: mysql.MYSQL_TYPE_INT24, Flag: 0x80}, Int: 1 << 23},
		{ParamType: ParamType{Type: mysql.MYSQL_TYPE_LONGLONG, Flag: 0x80}, Int: -1},
		{ParamType: ParamType{Type: mysql.MYSQL_TYPE_FLOAT}, Float: 0.5},
		{ParamType: ParamType{Type: mysql.MYSQL_TYPE_DOUBLE}, Float: -1e300},
		{ParamType: ParamType{Type: mysql.MYSQL_TYPE_NEWDECIMAL}, Bytes: []byte("3.14159")},
		{ParamType: ParamType{Type: mysql.MYSQL_TYPE_VAR_STRING}, Bytes: []byte{}},
		{ParamType: ParamType{Type: mysql.MYSQL_TYPE_BLOB}, Bytes: bytes.Repeat([]byte{0xfe}, 70000)},
		{ParamType: ParamType{Type: mysql.MYSQL_TYPE_DATETIME}, Bytes: []byte{0xea, 7, 11, 30, 12, 0, 1, 0x15, 0xcd, 0x5b, 0x07}},
		{ParamType: ParamType{Type: mysql.MYSQL_TYPE_DATE}, Bytes: []byte{0xea, 7, 11, 30}},
		{ParamType: ParamType{Type: mysql.MYSQL_TYPE_TIME}, Bytes: []byte{1, 2, 0, 0, 0, 3, 4, 5}},
		{ParamType: ParamType{Type: mysql.MYSQL_TYPE_TIMESTAMP}, Bytes: []byte{}},
		{ParamType: ParamType{Type: mysql.MYSQL_TYPE_STRING}, Null: true},
		{ParamType: ParamType{Type: mysql.MYSQL_TYPE_NULL}, Null: true},
		{ParamType: ParamType{Type: mysql.MYSQL_TYPE_BLOB}, LongData: true},
	}
	return &Execute{StmtID: 3, CursorType: 1, Iterations: 1, NewParamsBound: true, Params: params}, len(params)
}

func TestExecuteRoundTripEveryType(t *testing.T) {
	e, n := allTypesExecute()
	e.Types = make([]ParamType, n)
	for i, p := range e.Params {
		e.Types[i] = p.ParamType
	}
	b := e.Append(nil)
	longData := func(i int) bool { return i == n-1 }
	got, err := ParseExecute(b, n, nil, longData)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, e) {
		for i := range e.Params {
			if !reflect.DeepEqual(got.Params[i], e.Params[i]) {
				t.Errorf("param %d: got %+v want %+v", i, got.Params[i], e.Params[i])
			}
		}
		t.Fatalf("execute differs")
	}
	if uint64(got.Params[6].Int) != math.MaxUint64 || got.Params[1].Int != 255 || got.Params[0].Int != -128 {
		t.Errorf("sign handling: %d %d %d", got.Params[0].Int, got.Params[1].Int, uint64(got.Params[6].Int))
	}

	// A later execute without types reuses the earlier ones.
	e2 := *got
	e2.NewParamsBound = false
	b2 := e2.Append(nil)
	got2, err := ParseExecute(b2, n, got.Types, longData)
	if err != nil || got2.NewParamsBound || !reflect.DeepEqual(got2.Params, got.Params) {
		t.Fatalf("execute without types: %v", err)
	}
	if _, err := ParseExecute(b2, n, nil, longData); !errors.Is(err, ErrUnknownParamTypes) {
		t.Fatalf("no types known: err = %v", err)
	}
	// Truncations are malformed, never a panic.
	for cut := 1; cut < len(b); cut += 97 {
		if _, err := ParseExecute(b[:cut], n, nil, longData); !errors.Is(err, ErrMalformed) {
			t.Fatalf("truncated at %d: err = %v", cut, err)
		}
	}
}

func TestStmtCommandsAndLongDataAndChangeUser(t *testing.T) {
	for _, c := range []*StmtCommand{{Command: mysql.COM_STMT_CLOSE, StmtID: 5}, {Command: mysql.COM_STMT_RESET, StmtID: 6}, {Command: mysql.COM_STMT_FETCH, StmtID: 7, Rows: 100}} {
		got, err := ParseStmtCommand(c.Append(nil))
		if err != nil || *got != *c {
			t.Errorf("%+v: got %+v %v", c, got, err)
		}
	}
	l := &LongData{StmtID: 1, Param: 2, Data: []byte("chunk")}
	if got, err := ParseLongData(l.Append(nil)); err != nil || !reflect.DeepEqual(got, l) {
		t.Errorf("long data: %+v %v", got, err)
	}
	caps := uint64(mysql.CLIENT_PROTOCOL_41 | mysql.CLIENT_SECURE_CONNECTION | mysql.CLIENT_PLUGIN_AUTH | mysql.CLIENT_CONNECT_ATTRS)
	cu := &ChangeUser{User: []byte("u2"), AuthResponse: []byte{1, 2, 3}, Database: []byte("db"), Charset: 45, HasCharset: true,
		AuthPlugin: []byte("mysql_native_password"), HasPlugin: true, Attrs: []byte("\x01a\x01b"), HasAttrs: true}
	if got, err := ParseChangeUser(cu.Append(nil, caps), caps); err != nil || !reflect.DeepEqual(got, cu) {
		t.Errorf("change user: %+v %v", got, err)
	}
}

func TestColumnCount(t *testing.T) {
	cases := []struct {
		b             []byte
		cacheMetadata bool
		n             uint64
		metadata      bool
	}{
		{[]byte{3}, false, 3, true},
		{[]byte{0xfc, 0x2c, 0x01}, false, 300, true},
		{[]byte{3, 1}, true, 3, true},  // definitions follow
		{[]byte{3, 0}, true, 3, false}, // skipped: the client has them
		{[]byte{0xfc, 0x2c, 0x01, 0}, true, 300, false},
	}
	for _, c := range cases {
		n, metadata, err := ParseColumnCount(c.b, c.cacheMetadata)
		if err != nil || n != c.n || metadata != c.metadata {
			t.Errorf("ParseColumnCount(%x, %v) = %d, %v, %v; want %d, %v", c.b, c.cacheMetadata, n, metadata, err, c.n, c.metadata)
		}
	}
}

func TestMalformedPackets(t *testing.T) {
	g, _ := hex.DecodeString(mariadbGreeting)
	cases := map[string]error{}
	_, cases["greeting truncated"] = ParseGreeting(g[:20])
	_, cases["greeting protocol 9"] = ParseGreeting(append([]byte{9}, g[1:]...))
	_, cases["greeting trailing"] = ParseGreeting(append(append([]byte{}, g...), 'x'))
	_, cases["response short"] = ParseHandshakeResponse([]byte{1, 2, 3})
	_, cases["response 3.23"] = ParseHandshakeResponse(make([]byte, 40))
	_, cases["ok wrong header"] = ParseOK([]byte{0x03, 0}, 0)
	_, cases["err empty"] = ParseErr(nil)
	_, cases["prepare short"] = ParsePrepareOK([]byte{0, 1, 0})
	_, _, cases["column count 0xff"] = ParseColumnCount([]byte{0xff}, false)
	_, _, cases["column count trailing"] = ParseColumnCount([]byte{3, 0}, false)
	_, _, cases["column count metadata byte missing"] = ParseColumnCount([]byte{3}, true)
	_, _, cases["column count metadata byte 2"] = ParseColumnCount([]byte{3, 2}, true)
	_, _, cases["column count metadata trailing"] = ParseColumnCount([]byte{3, 1, 0}, true)
	_, cases["stmt command wrong"] = ParseStmtCommand([]byte{mysql.COM_QUERY, 0, 0, 0, 0})
	_, cases["long string"] = ParseExecute([]byte{mysql.COM_STMT_EXECUTE, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, mysql.MYSQL_TYPE_STRING, 0, 0xfc, 0xff}, 1, nil, nil)
	for name, err := range cases {
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err = %v, want ErrMalformed", name, err)
		}
	}
}

// Fuzz targets: no panic on any input, and what parses re-encodes to a
// canonical form that parses back the same.

func FuzzParseGreeting(f *testing.F) {
	b, _ := hex.DecodeString(mariadbGreeting)
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := ParseGreeting(b)
		if err != nil {
			return
		}
		b2 := g.Append(nil)
		g2, err := ParseGreeting(b2)
		if err != nil {
			t.Fatalf("re-encoded greeting does not parse: %v", err)
		}
		if b3 := g2.Append(nil); !bytes.Equal(b2, b3) {
			t.Fatalf("not canonical:\n%x\n%x", b2, b3)
		}
	})
}

func FuzzParseHandshakeResponse(f *testing.F) {
	f.Add((&HandshakeResponse{Caps: uint64(mysql.CLIENT_PROTOCOL_41 | mysql.CLIENT_SECURE_CONNECTION | mysql.CLIENT_CONNECT_WITH_DB), User: []byte("u"), AuthResponse: []byte("pw"), Database: []byte("d"), HasDatabase: true}).Append(nil))
	f.Add((&HandshakeResponse{Caps: uint64(mysql.CLIENT_PROTOCOL_41 | mysql.CLIENT_SSL), SSLRequest: true}).Append(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseHandshakeResponse(b)
		if err != nil {
			return
		}
		b2 := h.Append(nil)
		h2, err := ParseHandshakeResponse(b2)
		if err != nil {
			t.Fatalf("re-encoded response does not parse: %v", err)
		}
		if b3 := h2.Append(nil); !bytes.Equal(b2, b3) {
			t.Fatalf("not canonical:\n%x\n%x", b2, b3)
		}
	})
}

func FuzzParseExecute(f *testing.F) {
	e, n := allTypesExecute()
	f.Add(e.Append(nil), uint8(n))
	f.Fuzz(func(t *testing.T, b []byte, n uint8) {
		x, err := ParseExecute(b, int(n), nil, nil)
		if err != nil {
			return
		}
		b2 := x.Append(nil)
		x2, err := ParseExecute(b2, int(n), nil, nil)
		if err != nil {
			t.Fatalf("re-encoded execute does not parse: %v", err)
		}
		if b3 := x2.Append(nil); !bytes.Equal(b2, b3) {
			t.Fatalf("not canonical:\n%x\n%x", b2, b3)
		}
	})
}

func FuzzParseResponses(f *testing.F) {
	caps := uint64(mysql.CLIENT_PROTOCOL_41)
	f.Add((&OK{AffectedRows: 1}).Append(nil, caps))
	f.Add((&Err{Code: 1, HasState: true, State: "HY000", Message: "m"}).Append(nil))
	f.Add((&PrepareOK{StmtID: 1}).Append(nil))
	f.Add((&EOF{}).Append(nil))
	f.Add([]byte{mysql.COM_CHANGE_USER, 'u', 0, 1, 9, 'd', 0, 45, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		if o, err := ParseOK(b, caps); err == nil {
			if o2, err := ParseOK(o.Append(nil, caps), caps); err != nil || !reflect.DeepEqual(o, o2) {
				t.Fatalf("OK round trip: %v", err)
			}
		}
		if e, err := ParseErr(b); err == nil {
			if e2, err := ParseErr(e.Append(nil)); err != nil || e2.Code != e.Code || e2.Message != e.Message {
				t.Fatalf("ERR round trip: %v", err)
			}
		}
		if p, err := ParsePrepareOK(b); err == nil {
			if p2, err := ParsePrepareOK(p.Append(nil)); err != nil || *p2 != *p {
				t.Fatalf("prepare-OK round trip: %v", err)
			}
		}
		if e, err := ParseEOF(b); err == nil {
			if _, err := ParseEOF(e.Append(nil)); err != nil {
				t.Fatalf("EOF round trip: %v", err)
			}
		}
		if c, err := ParseChangeUser(b, uint64(mysql.CLIENT_SECURE_CONNECTION|mysql.CLIENT_PLUGIN_AUTH|mysql.CLIENT_CONNECT_ATTRS)); err == nil {
			ccaps := uint64(mysql.CLIENT_SECURE_CONNECTION | mysql.CLIENT_PLUGIN_AUTH | mysql.CLIENT_CONNECT_ATTRS)
			if c2, err := ParseChangeUser(c.Append(nil, ccaps), ccaps); err != nil || !reflect.DeepEqual(c, c2) {
				t.Fatalf("change-user round trip: %v", err)
			}
		}
		ParseColumnCount(b, false)
		ParseColumnCount(b, true)
		ParseStmtCommand(b)
		ParseLongData(b)
	})
}
