package replay

import (
	"testing"

	"github.com/tandemdb/tandem/sqlinfo"
	"github.com/tandemdb/tandem/store"
)

// A divergent execute's sample names the SQL its statement was prepared
// with and the schema its session was in — the latest before it, with
// statement ids reused after a re-prepare — and each session is read once
// however many samples it gives (reading it per sample made comparison
// quadratic).
func TestSessionsBefore(t *testing.T) {
	dir := t.TempDir()
	w, err := store.Create(dir, store.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	recs := []store.Record{
		{Session: 1, Kind: store.KindConnect, Schema: "a"},
		{Session: 2, Kind: store.KindConnect, Schema: "z"},
		{Session: 1, Kind: store.KindPrepare, StmtID: 1, SQL: "SELECT 1"},
		{Session: 2, Kind: store.KindPrepare, StmtID: 1, SQL: "SELECT 'other session'"},
		{Session: 1, Kind: store.KindExecute, StmtID: 1}, // 5: a, SELECT 1
		{Session: 1, Kind: store.KindInitDB, Schema: "b"},
		{Session: 1, Kind: store.KindPrepare, StmtID: 1, SQL: "SELECT 2"},
		{Session: 1, Kind: store.KindPrepare, StmtID: 2, SQL: "SELECT 3"},
		{Session: 1, Kind: store.KindExecute, StmtID: 1}, // 9: b, SELECT 2
		{Session: 1, Kind: store.KindExecute, StmtID: 7}, // 10: b, never prepared
	}
	for i := range recs {
		if _, err := w.Append(&recs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	h := newHistories(r, sqlinfo.NewAnalyzer())
	for _, c := range []struct {
		seq         uint64
		schema, sql string
	}{{9, "b", "SELECT 2"}, {5, "a", "SELECT 1"}, {10, "b", "(statement 7)"}, {5, "a", "SELECT 1"}} {
		rec, ok, err := r.Get(c.seq)
		if !ok || err != nil {
			t.Fatalf("record %d: %v %v", c.seq, ok, err)
		}
		if schema, sql, _ := h.before(rec); schema != c.schema || sql != c.sql {
			t.Errorf("record %d: before = %q, %q; want %q, %q", c.seq, schema, sql, c.schema, c.sql)
		}
	}
	if len(h.by) != 1 || len(h.by[1]) != 5 {
		t.Errorf("indexed sessions %v; want session 1 only, with its 5 prepares and schema changes", h.by)
	}
}
