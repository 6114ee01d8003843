package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The writer's metrics and its collector lint clean, and the collector
// reports the queue and the state.
func TestWriterMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	w, err := Create(filepath.Join(t.TempDir(), "cap"), WriterOptions{NoSync: true, Metrics: NewMetrics(reg)})
	if err != nil {
		t.Fatal(err)
	}
	reg.MustRegister(w.Collector())
	if _, err := w.Append(&Record{Session: 1, Kind: KindQuery, SQL: "SELECT 1"}); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	want := `
# HELP tandem_capture_queue_records Records accepted by the capture writer and not yet committed.
# TYPE tandem_capture_queue_records gauge
tandem_capture_queue_records 0
# HELP tandem_capture_state 1 for the capture's current state: recording, stopped (its budget or free-space floor; reason says why), failed (the store could not write: reason says why) or closed; relaying goes on in every state.
# TYPE tandem_capture_state gauge
tandem_capture_state{reason="",state="recording"} 1
# HELP tandem_store_records_appended_total Records accepted by capture writers.
# TYPE tandem_store_records_appended_total counter
tandem_store_records_appended_total 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "tandem_capture_queue_records", "tandem_capture_state", "tandem_store_records_appended_total"); err != nil {
		t.Error(err)
	}
	if n, err := testutil.GatherAndCount(reg, "tandem_pebble_disk_usage_bytes"); err != nil || n != 1 {
		t.Errorf("pebble disk usage: %d series, %v", n, err)
	}
	w.Close()
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP tandem_capture_state 1 for the capture's current state: recording, stopped (its budget or free-space floor; reason says why), failed (the store could not write: reason says why) or closed; relaying goes on in every state.
# TYPE tandem_capture_state gauge
tandem_capture_state{reason="",state="closed"} 1
`), "tandem_capture_state"); err != nil {
		t.Error(err)
	}
}

// Readers share a capture (the shards of a run on one machine); a writer
// still keeps it to itself.
func TestReadersShareAWriterExcludes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cap")
	w, err := Create(dir, WriterOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Append(&Record{Session: 1, Kind: KindQuery, SQL: "SELECT 1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "open for writing by another process") {
		t.Fatalf("reading while it is written: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r1, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := Open(dir)
	if err != nil {
		t.Fatalf("a second reader: %v", err)
	}
	r1.Close()
	r2.Close()
}

// A capture over its budget stops cleanly: appends fail with ErrStopped,
// the state says stopped and why, Close closes it properly, and the
// capture opens with what was recorded and the reason in its summary.
func TestCaptureStopsAtItsBudget(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cap")
	reg := prometheus.NewRegistry()
	w, err := Create(dir, WriterOptions{NoSync: true, MaxBytes: 2 << 20, FlushInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	reg.MustRegister(w.Collector())
	pad := strings.Repeat("y", 2000)
	var appendErr error
	var accepted uint64
	deadline := time.Now().Add(20 * time.Second)
	for n := 0; appendErr == nil && time.Now().Before(deadline); n++ {
		if _, appendErr = w.Append(&Record{Session: 1, Kind: KindQuery, SQL: fmt.Sprintf("SELECT %d, '%s'", n, pad)}); appendErr == nil {
			accepted++
		}
		if n%500 == 0 {
			time.Sleep(50 * time.Millisecond) // let the flusher check the budget
		}
	}
	if !errors.Is(appendErr, ErrStopped) || !strings.Contains(appendErr.Error(), "reached its budget") {
		t.Fatalf("append: %v, want ErrStopped at the budget", appendErr)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP tandem_capture_state 1 for the capture's current state: recording, stopped (its budget or free-space floor; reason says why), failed (the store could not write: reason says why) or closed; relaying goes on in every state.
# TYPE tandem_capture_state gauge
tandem_capture_state{reason="`+appendErr.Error()+`",state="stopped"} 1
`), "tandem_capture_state"); err != nil {
		t.Error(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("close after a clean stop: %v", err)
	}
	// Read once closed: the batch the stop was found at may still be
	// committing when the append that meets the stop returns (read
	// before Close, 1,001 of 1,213 in one CI run).
	committed := w.Stats().Committed
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	sum, ok := r.Summary()
	// Every record accepted before the stop is kept: the batch the stop
	// was found at is committed, not dropped.
	if !ok || sum.Records != committed || committed != accepted || sum.Dropped != 0 || !strings.Contains(sum.Stopped, "reached its budget") || sum.StoppedAt.IsZero() {
		t.Fatalf("summary %+v (closed %v), %d committed, %d accepted", sum, ok, committed, accepted)
	}
	var n uint64
	for _, err := range r.Records() {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != committed {
		t.Errorf("%d records readable, %d committed", n, committed)
	}
}

// A capture's disk use tracks what it holds: Pebble's WAL preallocation
// (70 MiB per file here) took 282 MB for a 1 MB capture.
func TestSmallCaptureTakesLittleDisk(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cap")
	w, err := Create(dir, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pad := strings.Repeat("q", 1000)
	for i := range 1000 { // about 1 MB of records
		if _, err := w.Append(&Record{Session: 1, Kind: KindQuery, SQL: fmt.Sprintf("SELECT %d, '%s'", i, pad)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	open := blocksUsed(t, dir)
	if open > 8<<20 {
		t.Errorf("an open 1 MB capture takes %d bytes of disk, want under 8 MiB", open)
	}
	w.Close()
	closed := blocksUsed(t, dir)
	if d, _ := dirSize(dir); d != closed {
		t.Errorf("dirSize says %d, the blocks %d", d, closed)
	}
	t.Logf("1 MB of records: %d bytes on disk open, %d closed", open, closed)
}

// blocksUsed is the disk space (allocated blocks) of dir's files, as du
// counts it.
func blocksUsed(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		n += fi.Sys().(*syscall.Stat_t).Blocks * 512
	}
	return n
}
