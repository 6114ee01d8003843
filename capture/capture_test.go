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

func TestMaskSecrets(t *testing.T) {
	cases := []struct{ in, want string }{
		{"CREATE USER 'app'@'%' IDENTIFIED BY 's3cr3t'", "CREATE USER '***'@'***' IDENTIFIED BY '***'"},
		{"alter user app identified by 'it''s \\' hidden'", "alter user app identified by '***'"},
		{"SET PASSWORD FOR u = PASSWORD(\"pw\")", "SET PASSWORD FOR u = PASSWORD('***')"},
		{"/* admin */ GRANT\n ALL ON *.* TO u IDENTIFIED BY 'pw'", "/* admin */ GRANT\n ALL ON *.* TO u IDENTIFIED BY '***'"},
		{"CHANGE MASTER TO MASTER_PASSWORD='pw'", "CHANGE MASTER TO MASTER_PASSWORD='***'"},
		{"create user u identified via ed25519 using PASSWORD('pw')", "create user u identified via ed25519 using PASSWORD('***')"},
		{"CREATE USER 'unterminated", "CREATE USER '***'"},
	}
	for _, c := range cases {
		got, masked := MaskSecrets(c.in)
		if got != c.want || !masked {
			t.Errorf("MaskSecrets(%q) = %q, %v; want %q", c.in, got, masked, c.want)
		}
		if strings.Contains(got, "pw") || strings.Contains(got, "s3cr3t") || strings.Contains(got, "hidden") {
			t.Errorf("secret survived in %q", got)
		}
	}
	for _, keep := range []string{"SELECT 'IDENTIFIED BY' FROM t", "INSERT INTO users (password) VALUES ('x')", "UPDATE t SET c='x' WHERE id=1"} {
		if got, masked := MaskSecrets(keep); got != keep || masked {
			t.Errorf("MaskSecrets(%q) changed an ordinary statement: %q", keep, got)
		}
	}
}

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
