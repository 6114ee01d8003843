package store

import (
	"bytes"
	"flag"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// The golden files under testdata are captures (and runs) written by
// earlier versions of this package and checked in. A test decodes each to
// the values spelled out here, so a change that alters encoder and decoder
// together — and with them the format on disk — fails here instead of
// silently making old captures unreadable or misread.
//
// -update-golden writes the golden files of the CURRENT format versions
// (never over existing ones): run it once when a format version is added.
var updateGolden = flag.Bool("update-golden", false, "write missing golden files of the current format versions under testdata")

// goldenCaptureRecords is what testdata/capture-v1 holds: one record of
// every kind, every field and value class somewhere, three sessions. Start
// is relative to the capture's BaseTime.
func goldenCaptureRecords(base int64) []Record {
	at := func(ms int) time.Time { return time.Unix(0, base+int64(ms)*int64(time.Millisecond)) }
	return []Record{
		{Seq: 1, Session: 1, Start: at(0), Duration: 250 * time.Microsecond, Kind: KindConnect, User: "app", Schema: "sbtest",
			Resp: Response{Kind: RespOK, Status: 2}},
		{Seq: 2, Session: 1, Start: at(1), Duration: 90 * time.Microsecond, Kind: KindQuery, Schema: "sbtest",
			SQL: "SELECT c FROM sbtest1 WHERE id=42", Resp: Response{Kind: RespResultSet, Columns: 1, Rows: 1, Bytes: 131,
				HasChecksums: true, Ordered: 0xdeadbeefcafef00d, Unordered: 1}},
		{Seq: 3, Session: 1, Start: at(2), Kind: KindQuery, Schema: "sbtest", SQL: "SELECT 1; SELECT 2; SELEC 3",
			Resp: Response{Kind: RespResultSet, Columns: 1, Rows: 1, Bytes: 20, More: []Response{
				{Kind: RespResultSet, Columns: 1, Rows: 1, Bytes: 20},
				{Kind: RespError, ErrCode: 1064, SQLState: "42000", Message: "You have an error in your SQL syntax"},
			}}},
		{Seq: 4, Session: 2, Start: at(3), Duration: time.Millisecond, Kind: KindPrepare, Schema: "sbtest",
			SQL: "UPDATE sbtest1 SET k=k+1 WHERE id=?", StmtID: 7, Resp: Response{Kind: RespOK, Params: 1}},
		{Seq: 5, Session: 2, Start: at(4), Kind: KindExecute, Schema: "sbtest", StmtID: 7, Flags: FlagNewParamsBound, CursorType: 1,
			Params: []Value{
				{Type: TypeLong, Int: -5},
				{Type: TypeLongLong, Unsigned: true, Int: -1}, // 2^64-1
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
		{Seq: 6, Session: 2, Start: at(5), Kind: KindLongData, StmtID: 7, ParamIndex: 3, Data: bytes.Repeat([]byte("x"), 1000)},
		{Seq: 7, Session: 2, Start: at(6), Kind: KindReset, StmtID: 7, Resp: Response{Kind: RespOK}},
		{Seq: 8, Session: 2, Start: at(7), Kind: KindFetch, StmtID: 7, FetchRows: 100, Resp: Response{Kind: RespResultSet, Rows: 100, Bytes: 5000}},
		{Seq: 9, Session: 2, Start: at(8), Kind: KindClose, StmtID: 7},
		{Seq: 10, Session: 3, Start: at(9), Kind: KindInitDB, Schema: "other", Resp: Response{Kind: RespError, ErrCode: 1049, SQLState: "42000", Message: "Unknown database 'other'"}},
		{Seq: 11, Session: 3, Start: at(10), Kind: KindChangeUser, User: "reporting", Schema: "sbtest", Resp: Response{Kind: RespOK}},
		{Seq: 12, Session: 3, Start: at(11), Kind: KindResetConnection, Resp: Response{Kind: RespOK}},
		{Seq: 13, Session: 3, Start: at(12), Kind: KindPing, Resp: Response{Kind: RespOK}},
		{Seq: 14, Session: 3, Start: at(13), Kind: KindQuery, SQL: "LOAD DATA LOCAL INFILE '/tmp/x' INTO TABLE t", Flags: FlagNotReplayable,
			Resp: Response{Kind: RespOK, AffectedRows: 10}},
		{Seq: 15, Session: 3, Start: at(14), Kind: KindQuery, SQL: "CREATE USER u IDENTIFIED BY '***'", Flags: FlagMasked, Resp: Response{Kind: RespOK}},
		{Seq: 16, Session: 3, Start: at(15), Kind: KindOther, Command: 0x1b, Data: []byte{0, 1}, Flags: FlagTruncated, Resp: Response{Kind: RespOK}},
		{Seq: 17, Session: 2, Start: at(16), Kind: KindQuit},
		{Seq: 18, Session: 1, Start: at(17), Kind: KindQuit},
		{Seq: 19, Session: 3, Start: at(18), Kind: KindQuit},
	}
}

// goldenCaptureV2Records is what testdata/capture-v2 holds: v1's records
// with the fields version 2 added (a connect's client capabilities and
// collation, a parameter sent as long data).
func goldenCaptureV2Records(base int64) []Record {
	recs := goldenCaptureRecords(base)
	recs[0].ClientCaps, recs[0].Collation = 0x000fa28f|1<<34, 45
	recs[4].Params[8] = Value{Type: TypeBlob, LongData: true}
	return recs
}

// goldenCaptureV3Records is what testdata/capture-v3 holds: v2's records
// with the field version 3 added (the server's connection id of a connect).
func goldenCaptureV3Records(base int64) []Record {
	recs := goldenCaptureV2Records(base)
	recs[0].ConnID = 4242
	return recs
}

// writeGoldenCapture writes recs as a capture in dir with the current writer.
func writeGoldenCapture(t *testing.T, dir string, recs func(base int64) []Record) {
	t.Helper()
	w, err := Create(dir, WriterOptions{Source: "golden test"})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs(w.Meta().BaseTime) {
		if _, err := w.Append(&r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestGoldenCaptureV1(t *testing.T) {
	checkGoldenCapture(t, "capture-v1", 1, goldenCaptureRecords)
}

func TestGoldenCaptureV2(t *testing.T) {
	checkGoldenCapture(t, "capture-v2", 2, goldenCaptureV2Records)
}

func TestGoldenCaptureV3(t *testing.T) {
	checkGoldenCapture(t, "capture-v3", 3, goldenCaptureV3Records)
}

func checkGoldenCapture(t *testing.T, name string, version int, records func(int64) []Record) {
	dir := filepath.Join("testdata", name)
	if _, err := os.Stat(dir); os.IsNotExist(err) && *updateGolden && FormatVersion == version {
		writeGoldenCapture(t, dir, records)
		os.Remove(filepath.Join(dir, "LOCK"))
	}
	// Pebble wants to write a LOCK file even to read: read a copy.
	r, err := Open(copyDir(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	m := r.Meta()
	if m.Magic != "tandem-capture" || m.FormatVersion != version || m.Source != "golden test" || m.BaseTime == 0 {
		t.Fatalf("meta %+v", m)
	}
	sum, ok := r.Summary()
	if !ok || sum.Records != 19 || sum.FirstSeq != 1 || sum.LastSeq != 19 || sum.Sessions != 3 || sum.Dropped != 0 {
		t.Fatalf("summary %+v, %v", sum, ok)
	}
	want := records(m.BaseTime)
	var got []Record
	for rec, err := range r.Records() {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, normalize(*rec))
	}
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	for i := range want {
		if w := normalize(want[i]); !reflect.DeepEqual(got[i], w) {
			t.Errorf("record %d:\n got %+v\nwant %+v", i+1, got[i], w)
		}
	}
	// The indexes decode too: sessions, a session's records, the time span.
	ids, err := r.Sessions()
	if err != nil || !reflect.DeepEqual(ids, []uint64{1, 2, 3}) {
		t.Errorf("sessions %v, %v", ids, err)
	}
	var seqs []uint64
	for rec, err := range r.Session(2) {
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, rec.Seq)
	}
	if !reflect.DeepEqual(seqs, []uint64{4, 5, 6, 7, 8, 9, 17}) {
		t.Errorf("session 2's records %v", seqs)
	}
	first, last, ok, err := r.StartSpan()
	if err != nil || !ok || first.UnixNano() != m.BaseTime || last.Sub(first) != 18*time.Millisecond {
		t.Errorf("start span %v..%v %v %v", first, last, ok, err)
	}
}

// copyDir copies a golden directory (flat: Pebble's files) to a temporary one.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}
