package capture

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"log/slog"

	"github.com/tandemdb/tandem/store"
)

func TestRecorderDropsAndCountsWithoutBlocking(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cap")
	w, err := store.Create(dir, store.WriterOptions{NoSync: true, MaxPendingBytes: 100, FlushInterval: time.Hour, FlushRecords: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	rec := NewRecorder(w, slog.New(slog.DiscardHandler))
	r := store.Record{Session: 1, Start: time.Now(), Kind: store.KindQuery, SQL: strings.Repeat("x", 60)}
	for i := 0; i < 10; i++ {
		rec.Record(&r)
	}
	if rec.Dropped() != 9 {
		t.Fatalf("dropped %d, want 9 (one fits under the 100-byte bound)", rec.Dropped())
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	var nilRec *Recorder
	nilRec.Record(&r) // a nil recorder records nothing and does not panic
}

// WireParams is Params' inverse: a captured execute's values go out as the
// client sent them, types, signedness and NULLs included.
func TestWireParamsInvertsParams(t *testing.T) {
	vs := []store.Value{
		{Type: store.TypeLongLong, Unsigned: true, Int: -1},
		{Type: store.TypeTiny, Int: -5},
		{Type: store.TypeDouble, Float: 2.5},
		{Type: store.TypeDateTime, Bytes: []byte{0xea, 0x07, 11, 30, 12, 0, 1}},
		{Type: store.TypeVarString, Null: true},
		{Type: store.TypeBlob, Bytes: []byte("x")},
	}
	ps := WireParams(nil, vs)
	if len(ps) != len(vs) || !ps[0].Unsigned() || ps[1].Unsigned() || !ps[4].Null {
		t.Fatalf("WireParams = %+v", ps)
	}
	if back := Params(nil, ps); !reflect.DeepEqual(back, vs) {
		t.Fatalf("Params(WireParams(v)) = %+v\nwant %+v", back, vs)
	}
}
