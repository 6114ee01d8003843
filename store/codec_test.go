package store

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"
)

var testBase = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC).UnixNano()

// sampleRecords has one record of every kind, with every field and value
// class in use somewhere.
func sampleRecords() []Record {
	t0 := time.Unix(0, testBase).Add(1500 * time.Millisecond)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	return []Record{
		{Session: 1, Start: at(0), Duration: 250 * time.Microsecond, Kind: KindConnect, User: "app", Schema: "sbtest", ConnID: 1234,
			Resp: Response{Kind: RespOK, Status: 2}},
		{Session: 1, Start: at(1), Duration: 90 * time.Microsecond, Kind: KindQuery, Schema: "sbtest",
			SQL: "SELECT c FROM sbtest1 WHERE id=42", Resp: Response{Kind: RespResultSet, Columns: 1, Rows: 1, Bytes: 131,
				HasChecksums: true, Ordered: 0xdeadbeefcafef00d, Unordered: 1}},
		{Session: 1, Start: at(2), Kind: KindQuery, Schema: "sbtest", SQL: "SELECT 1; SELECT 2; SELEC 3",
			Resp: Response{Kind: RespResultSet, Columns: 1, Rows: 1, Bytes: 20, More: []Response{
				{Kind: RespResultSet, Columns: 1, Rows: 1, Bytes: 20},
				{Kind: RespError, ErrCode: 1064, SQLState: "42000", Message: "You have an error in your SQL syntax"},
			}}},
		{Session: 2, Start: at(-1000), Duration: time.Millisecond, Kind: KindPrepare, Schema: "sbtest",
			SQL: "UPDATE sbtest1 SET k=k+1 WHERE id=?", StmtID: 7, Resp: Response{Kind: RespOK, Params: 1}},
		{Session: 2, Start: at(3), Kind: KindExecute, Schema: "sbtest", StmtID: 7, Flags: FlagNewParamsBound, CursorType: 1,
			Params: []Value{
				{Type: TypeLong, Int: -5},
				{Type: TypeLongLong, Unsigned: true, Int: int64(-1)}, // 2^64-1
				{Type: TypeTiny, Int: 127},
				{Type: TypeYear, Unsigned: true, Int: 2026},
				{Type: TypeFloat, Float: 1.5},
				{Type: TypeDouble, Float: math.Pi},
				{Type: TypeNewDecimal, Bytes: []byte("-12345.6789")},
				{Type: TypeVarString, Bytes: []byte("héllo")},
				{Type: TypeBlob, Bytes: []byte{0, 1, 2, 0xff}},
				{Type: TypeDateTime, Bytes: []byte{0xea, 0x07, 11, 30, 12, 1, 2, 0x40, 0xe2, 0x01, 0}},
				{Type: TypeString, Null: true},
				{Type: TypeNull, Null: true},
			},
			Resp: Response{Kind: RespOK, AffectedRows: 1, InsertID: 99, Status: 3, Warnings: 2}},
		{Session: 2, Start: at(4), Kind: KindLongData, StmtID: 7, ParamIndex: 3, Data: bytes.Repeat([]byte("x"), 1000)},
		{Session: 2, Start: at(5), Kind: KindReset, StmtID: 7, Resp: Response{Kind: RespOK}},
		{Session: 2, Start: at(6), Kind: KindFetch, StmtID: 7, FetchRows: 100, Resp: Response{Kind: RespResultSet, Rows: 100, Bytes: 5000}},
		{Session: 2, Start: at(7), Kind: KindClose, StmtID: 7},
		{Session: 3, Start: at(8), Kind: KindInitDB, Schema: "other", Resp: Response{Kind: RespError, ErrCode: 1049, SQLState: "42000", Message: "Unknown database 'other'"}},
		{Session: 3, Start: at(9), Kind: KindChangeUser, User: "reporting", Schema: "sbtest", Resp: Response{Kind: RespOK}},
		{Session: 3, Start: at(10), Kind: KindResetConnection, Resp: Response{Kind: RespOK}},
		{Session: 3, Start: at(11), Kind: KindPing, Resp: Response{Kind: RespOK}},
		{Session: 3, Start: at(12), Kind: KindQuery, SQL: "LOAD DATA LOCAL INFILE '/tmp/x' INTO TABLE t", Flags: FlagNotReplayable,
			Resp: Response{Kind: RespOK, AffectedRows: 10}},
		{Session: 3, Start: at(13), Kind: KindQuery, SQL: "CREATE USER u IDENTIFIED BY '?'", Flags: FlagMasked, Resp: Response{Kind: RespOK}},
		{Session: 3, Start: at(14), Kind: KindOther, Command: 0x1b, Data: []byte{0, 1}, Flags: FlagTruncated, Resp: Response{Kind: RespOK}},
		{Session: 1 << 40, Start: at(15), Kind: KindQuit},
	}
}

// normalize makes a record comparable after a round trip: times without
// location or monotonic reading, empty byte slices as nil.
func normalize(r Record) Record {
	r = *r.Clone()
	r.Start = time.Unix(0, r.Start.UnixNano())
	if len(r.Data) == 0 {
		r.Data = nil
	}
	for i := range r.Params {
		if len(r.Params[i].Bytes) == 0 {
			r.Params[i].Bytes = nil
		}
	}
	if len(r.Params) == 0 {
		r.Params = nil
	}
	return r
}

func TestRecordRoundTripEveryKind(t *testing.T) {
	recs := sampleRecords()
	seen := map[Kind]bool{}
	for _, want := range recs {
		seen[want.Kind] = true
		b := AppendRecord(nil, &want, testBase)
		var got Record
		got.Seq = 77
		if err := DecodeRecord(b, testBase, &got); err != nil {
			t.Fatalf("%s: decode: %v", want.Kind, err)
		}
		want.Seq = 77
		if g, w := normalize(got), normalize(want); !reflect.DeepEqual(g, w) {
			t.Errorf("%s: round trip\n got %+v\nwant %+v", want.Kind, g, w)
		}
	}
	for _, k := range Kinds() {
		if !seen[k] {
			t.Errorf("no sample record of kind %s", k)
		}
	}
	if got := recs[4].Params[1]; uint64(got.Int) != math.MaxUint64 {
		t.Errorf("unsigned bits changed: %d", uint64(got.Int))
	}
}

func TestDecodeReusesRecordWithoutAliasing(t *testing.T) {
	recs := sampleRecords()
	var r Record
	b := AppendRecord(nil, &recs[4], testBase) // execute with params
	if err := DecodeRecord(b, testBase, &r); err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] ^= 0 // keep vet quiet about unused writes
	for i := range b {
		b[i] = 0xAA // scribble: nothing in r may alias b
	}
	if string(r.Params[6].Bytes) != "-12345.6789" || string(r.Params[7].Bytes) != "héllo" {
		t.Fatalf("decoded values alias the input: %q %q", r.Params[6].Bytes, r.Params[7].Bytes)
	}
	// Decoding a smaller record into the same Record clears the old fields.
	b = AppendRecord(nil, &recs[len(recs)-1], testBase)
	if err := DecodeRecord(b, testBase, &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Params) != 0 || r.StmtID != 0 || r.Resp.Kind != RespNone || r.Kind != KindQuit {
		t.Fatalf("stale fields after reuse: %+v", r)
	}
}

func TestDecodeRejectsDamage(t *testing.T) {
	good := AppendRecord(nil, &sampleRecords()[2], testBase)
	cases := map[string][]byte{
		"empty":          {},
		"truncated":      good[:len(good)-3],
		"trailing":       append(append([]byte(nil), good...), 0),
		"bad kind":       append([]byte{recordVersion, 99}, good[2:]...),
		"unknown resp":   func() []byte { r := Record{Kind: KindPing, Resp: Response{Kind: 9}}; return AppendRecord(nil, &r, 0) }(),
		"huge string":    {recordVersion, byte(KindQuery), byte(hasSQL), 1, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"huge params":    {recordVersion, byte(KindExecute), byte(hasParams), 1, 0, 0, 0xff, 0xff, 0x03},
		"varint overrun": {recordVersion, byte(KindPing), 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
	}
	for name, b := range cases {
		var r Record
		if err := DecodeRecord(b, 0, &r); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: err = %v, want ErrCorrupt", name, err)
		}
	}
	var r Record
	newer := append([]byte{recordVersion + 1}, good[1:]...)
	if err := DecodeRecord(newer, 0, &r); !errors.Is(err, ErrNewerFormat) {
		t.Errorf("newer record version: err = %v, want ErrNewerFormat", err)
	}
}

func FuzzDecodeRecord(f *testing.F) {
	for _, r := range sampleRecords() {
		f.Add(AppendRecord(nil, &r, testBase))
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		var r Record
		if err := DecodeRecord(b, testBase, &r); err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrNewerFormat) {
				t.Fatalf("error %v is neither ErrCorrupt nor ErrNewerFormat", err)
			}
			return
		}
		// What decodes must re-encode to a canonical form that is a fixed
		// point (compared as bytes, so NaN parameters compare too).
		b2 := AppendRecord(nil, &r, testBase)
		var r2 Record
		if err := DecodeRecord(b2, testBase, &r2); err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		if b3 := AppendRecord(nil, &r2, testBase); !bytes.Equal(b2, b3) {
			t.Fatalf("round trip changed the record\n got %x\nwant %x", b3, b2)
		}
	})
}

// A reader decodes every record of a capture into one Record and replay
// clones each it reads ahead: a statement's schema and repeated text are
// not allocated again, and a clone with few parameters is one allocation.
func TestDecodeAndCloneAllocateOnlyWhatChanges(t *testing.T) {
	t0 := time.Unix(0, testBase)
	exec := Record{Session: 4, Start: t0, Kind: KindExecute, Schema: "sbtest", StmtID: 3,
		Params: []Value{{Type: TypeLong, Int: 42}}, Resp: Response{Kind: RespResultSet, Columns: 1, Rows: 1}}
	query := Record{Session: 4, Start: t0, Kind: KindQuery, Schema: "sbtest", SQL: "SELECT c FROM sbtest1 WHERE id=7",
		Resp: Response{Kind: RespResultSet, Columns: 1, Rows: 1}}
	bExec, bQuery := AppendRecord(nil, &exec, testBase), AppendRecord(nil, &query, testBase)
	var r Record
	for _, b := range [][]byte{bExec, bQuery} {
		if err := DecodeRecord(b, testBase, &r); err != nil {
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(50, func() {
			if err := DecodeRecord(b, testBase, &r); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("decoding %s again into the same record: %v allocations, want 0", r.Kind, n)
		}
	}
	if r.Schema != "sbtest" || r.SQL != query.SQL {
		t.Fatalf("decoded schema %q, SQL %q", r.Schema, r.SQL)
	}
	// Another text, then the first again: each decode gives its own text.
	other := query
	other.SQL = "SELECT c FROM sbtest1 WHERE id=8"
	if err := DecodeRecord(AppendRecord(nil, &other, testBase), testBase, &r); err != nil || r.SQL != other.SQL {
		t.Fatalf("decoded %q (%v), want %q", r.SQL, err, other.SQL)
	}

	for _, n := range []int{1, 2, 3, 4, 5} {
		rec := exec
		rec.Params = nil
		for i := range n {
			rec.Params = append(rec.Params, Value{Type: TypeLong, Int: int64(i)})
		}
		want := 1.0
		if n > 4 {
			want = 2
		}
		var c *Record
		if got := testing.AllocsPerRun(50, func() { c = rec.Clone() }); got != want {
			t.Errorf("Clone of a record with %d parameters: %v allocations, want %v", n, got, want)
		}
		if !reflect.DeepEqual(*c, rec) || len(c.Params) != n || cap(c.Params) != n {
			t.Errorf("Clone of %d parameters: %+v (cap %d), want %+v", n, c.Params, cap(c.Params), rec.Params)
		}
		c.Params[0].Int = 99 // the clone shares nothing with rec
		if rec.Params[0].Int != 0 {
			t.Errorf("Clone of %d parameters shares them with the original", n)
		}
	}
}

// CloneInto fills a record its owner is done with: what Clone gives,
// in the record's own room for parameters when it has enough, and
// sharing nothing with the original (replay's spare records).
func TestCloneIntoReusesTheParameterRoom(t *testing.T) {
	rec := Record{Session: 4, Kind: KindExecute, Schema: "sbtest", StmtID: 3, Data: []byte("chunk"),
		Params: []Value{{Type: TypeLong, Int: 42}, {Type: TypeVarString, Bytes: []byte("abc")}},
		Resp:   Response{Kind: RespResultSet, Columns: 1, Rows: 1, More: []Response{{Kind: RespOK}}}}
	spareWith := func(room int) Record {
		s := Record{Seq: 9, SQL: "old", User: "old"}
		if room > 0 {
			s.Params = make([]Value, 1, room)
		}
		return s
	}
	for _, room := range []int{0, 1, 2, 4} {
		t.Run(fmt.Sprint("room=", room), func(t *testing.T) {
			spare := spareWith(room)
			was := spare.Params[:cap(spare.Params)]
			got := rec.CloneInto(&spare)
			if got != &spare || !reflect.DeepEqual(spare, rec) {
				t.Fatalf("CloneInto gave %p %+v, want %p %+v", got, spare, &spare, rec)
			}
			if reused := room >= 2 && &spare.Params[0] == &was[0]; reused != (room >= 2) {
				t.Errorf("room for %d parameters: reused %v", room, reused)
			}
			spare.Params[0].Int, spare.Params[1].Bytes[0], spare.Data[0], spare.Resp.More[0].Rows = 1, 'x', 'x', 7
			if rec.Params[0].Int != 42 || string(rec.Params[1].Bytes) != "abc" || string(rec.Data) != "chunk" || rec.Resp.More[0].Rows != 0 {
				t.Errorf("the clone shares memory with the original: %+v", rec)
			}
			// The spare's own room (if any), then the bytes of a parameter,
			// Data and More; the parameters too when the room is short.
			want := 3.0
			if room > 0 {
				want++
			}
			if room < 2 {
				want++
			}
			if n := testing.AllocsPerRun(20, func() { s := spareWith(room); rec.CloneInto(&s) }); n != want {
				t.Errorf("%v allocations, want %v", n, want)
			}
		})
	}
	// As with Clone, no parameters stay nil and an empty list stays empty.
	if c := (&Record{}).CloneInto(&Record{Params: make([]Value, 2)}); c.Params != nil {
		t.Errorf("nil parameters cloned as %#v", c.Params)
	}
	if c := (&Record{Params: []Value{}}).CloneInto(&Record{}); c.Params == nil || len(c.Params) != 0 {
		t.Errorf("empty parameters cloned as %#v", c.Params)
	}
}
