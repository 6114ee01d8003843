package capture

import (
	"path/filepath"
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
	// The writer flushes once an hour: a Record that waited for room
	// would wait that long. Each must return at once instead.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 10; i++ {
			rec.Record(&r)
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Record blocked on a writer that is behind (it must drop and count)")
	}
	if rec.Dropped() != 9 {
		t.Fatalf("dropped %d, want 9 (one fits under the 100-byte bound)", rec.Dropped())
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	rd, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	n := 0
	for _, err := range rd.Records() {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 1 {
		t.Fatalf("%d records in the capture, want the 1 that was not dropped", n)
	}
	var nilRec *Recorder
	nilRec.Record(&r) // a nil recorder records nothing and does not panic
}
