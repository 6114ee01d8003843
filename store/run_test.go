package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tandemdb/tandem/latency"
)

func goldenRunMeta() RunMeta {
	return RunMeta{RunID: "golden-1", Shard: &Shard{Index: 1, Count: 4}, Command: "replay", Capture: "/captures/c1", CaptureSource: "proxy 127.0.0.1:4000 -> 127.0.0.1:3306",
		Started: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC), Baseline: "innodb",
		Targets: []RunTarget{{Name: "innodb", Addr: "127.0.0.1:3306", Engine: "InnoDB", Version: "10.11.19-MariaDB", Baseline: true},
			{Name: "myrocks", Addr: "127.0.0.1:3307", Engine: "ROCKSDB", Options: "COMMENT='a, b'", Version: "10.11.19-MariaDB"}},
		Settings: []Setting{{"speed", "0"}, {"order", "capture"}}}
}

func goldenHist(vals ...time.Duration) *latency.Histogram {
	h := &latency.Histogram{}
	for _, v := range vals {
		h.Record(v)
	}
	return h
}

// goldenOutcomes are the outcomes of the golden run of a run format
// version: format 2 adds a transaction that failed for good, 3 a KILL
// not replayed, 4 a SET GLOBAL not run.
func goldenOutcomes(version int) [][]Outcome {
	os := [][]Outcome{
		{ // innodb
			{Seq: 2, Session: 1, Flags: OutcomeRows | OutcomeOrdered, Service: 120 * time.Microsecond, Results: 1, Rows: 3, Columns: 2, Ordered: 7, Unordered: 9},
			{Seq: 3, Session: 1, Service: time.Millisecond, Lag: 2 * time.Millisecond, Results: 1, Affected: 1, InsertID: 42, Warnings: 1},
			{Seq: OutcomeSeq(2, 1), Session: 1, Flags: OutcomeRows, Results: 1, Rows: 3},
		},
		{ // myrocks
			{Seq: 2, Session: 1, Flags: OutcomeError | OutcomeClientError | OutcomeOrderReleased | OutcomeOrderRerun, ErrCode: 2013, Cause: CauseTimeout},
			{Seq: 3, Session: 1, Flags: OutcomeSkipped | OutcomeRetried | OutcomeCaptureRollback, SkipReason: SkipTargetFailed},
		},
	}
	if version >= 2 {
		os[1] = append(os[1],
			Outcome{Seq: 5, Session: 2, Flags: OutcomeError | OutcomeRetried | OutcomeTrxFailed, ErrCode: 1213, Results: 1},
			Outcome{Seq: 6, Session: 2, Flags: OutcomeSkipped | OutcomeTrxFailed, SkipReason: SkipTrxFailed})
	}
	if version >= 3 {
		os[0] = slices.Insert(os[0], 2, Outcome{Seq: 8, Session: 3, Flags: OutcomeSkipped, SkipReason: SkipKill})
	}
	if version >= 4 {
		os[0] = slices.Insert(os[0], 3, Outcome{Seq: 9, Session: 3, Flags: OutcomeSkipped, SkipReason: SkipGlobalSet})
	}
	return os
}

func goldenResult(version int) *TargetResult {
	r := &TargetResult{Target: "myrocks", Elapsed: 1.5, Transactions: 10, Reads: 20, Writes: 5, Other: 3, Errors: 2,
		ErrorCodes: map[string]int64{"1213": 1, "2013 timeout": 1}, Deadlocks: 1, Retries: 1, RetriesSucceeded: 1, Connections: 2,
		Skipped: 1, SkippedBy: map[string]int64{"target had failed": 1}, OrderWaits: 7, OrderReruns: 1, Failed: "statement timed out",
		VsBaseline: &Divergences{Compared: 3, Ambiguous: 1, ByClass: map[string]int64{"error-vs-ok": 1},
			Samples: []Sample{{Class: "error-vs-ok", Seq: 2, Session: 1, Digest: "d1", Statement: "SELECT 1", Baseline: "1 rows", Target: "error 2013"}}},
		EndState: &EndState{Tables: []TableState{{Table: "sbtest.t", Exists: true, Rows: 3, Checksum: "00ff", Differs: true}}},
		Created:  []CreatedTable{{Table: "sbtest.t", Engine: "ROCKSDB", Want: "ROCKSDB"}}}
	if version >= 2 {
		r.Reexecuted, r.FailedTransactions, r.FailedByCode = 4, 1, map[string]int64{"1213": 1}
		r.Failures = []FailedTrx{{Session: 2, FirstSeq: 4, FailedSeq: 5, LastSeq: 7, Code: 1213, Attempts: 4, Statements: 3,
			Tables: []string{"sbtest.t"}, At: 1764579600000000000}}
		r.EndState.Tables[0].Because = "a transaction of session 2 failed for good on myrocks"
	}
	return r
}

func writeGoldenRun(t *testing.T, dir string, version int, opts ...Option) {
	t.Helper()
	w, err := CreateRun(dir, goldenRunMeta(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(w.PutPoint(Point{Point: 0, Label: "replay", Targets: []string{"innodb", "myrocks"}, Order: "capture", IO: "blocking",
		Started: time.Date(2026, 12, 1, 9, 0, 1, 0, time.UTC), Elapsed: 1.5}))
	for ti, os := range goldenOutcomes(version) {
		b := w.NewOutcomeBatch(0, ti)
		for i := range os {
			b.Add(&os[i])
		}
		must(b.Commit())
	}
	must(w.PutHistogram(0, 0, SeriesService, "", goldenHist(time.Millisecond, 2*time.Millisecond, 40*time.Millisecond)))
	must(w.PutHistogram(0, 0, SeriesDigest, "d1", goldenHist(time.Millisecond)))
	must(w.PutHistogram(0, 1, SeriesRead, "", goldenHist(3*time.Millisecond)))
	must(w.PutInterval(0, 0, 0, &Interval{Start: 0, Length: time.Second, Transactions: 5, Reads: 10, Writes: 2, Other: 1, Threads: 4,
		Latency: *goldenHist(time.Millisecond, time.Millisecond)}))
	must(w.PutInterval(0, 0, 1, &Interval{Start: time.Second, Length: 500 * time.Millisecond, Errors: 1, Deadlocks: 1, Retries: 1}))
	must(w.PutDigest("d1", DigestInfo{Text: "select ?", Class: "read"}))
	must(w.PutResult(0, 1, goldenResult(version)))
	must(w.End(RunEnd{Ended: time.Date(2026, 12, 1, 9, 0, 3, 0, time.UTC), Elapsed: 2, Notes: []string{"a note"}}))
}

func checkRun(t *testing.T, r *RunReader, version int) {
	t.Helper()
	m := goldenRunMeta()
	got := r.Meta()
	if got.Magic != "tandem-run" || got.RunFormat != version || got.ToolVersion == "" {
		t.Fatalf("meta %+v", got)
	}
	got.Magic, got.RunFormat, got.ToolVersion = "", 0, ""
	if !reflect.DeepEqual(got, m) {
		t.Errorf("meta\n got %+v\nwant %+v", got, m)
	}
	end, ok := r.End()
	if !ok || !reflect.DeepEqual(end, RunEnd{Ended: time.Date(2026, 12, 1, 9, 0, 3, 0, time.UTC), Elapsed: 2, Notes: []string{"a note"}}) {
		t.Errorf("end %+v %v", end, ok)
	}
	pts, err := r.Points()
	if err != nil || len(pts) != 1 || pts[0].Label != "replay" || pts[0].Order != "capture" || pts[0].Elapsed != 1.5 || len(pts[0].Targets) != 2 {
		t.Errorf("points %+v %v", pts, err)
	}
	for ti, want := range goldenOutcomes(version) {
		var gotOs []Outcome
		for o, err := range r.Outcomes(0, ti) {
			if err != nil {
				t.Fatal(err)
			}
			gotOs = append(gotOs, *o)
		}
		if !reflect.DeepEqual(gotOs, want) {
			t.Errorf("target %d outcomes\n got %+v\nwant %+v", ti, gotOs, want)
		}
	}
	h, ok, err := r.Histogram(0, 0, SeriesService, "")
	if err != nil || !ok || h.Count() != 3 || h.Max() != 40*time.Millisecond || h.Min() != time.Millisecond || h.Sum() != uint64(43*time.Millisecond) {
		t.Errorf("service histogram %v %v %v", h, ok, err)
	}
	if _, ok, _ := r.Histogram(0, 1, SeriesService, ""); ok {
		t.Error("a histogram that was never written")
	}
	dh, err := r.DigestHistograms(0, 0)
	if err != nil || len(dh) != 1 || dh["d1"].Count() != 1 {
		t.Errorf("digest histograms %v %v", dh, err)
	}
	ivs, err := r.Intervals(0, 0)
	if err != nil || len(ivs) != 2 || ivs[0].Transactions != 5 || ivs[0].Reads != 10 || ivs[0].Threads != 4 || ivs[0].Latency.Count() != 2 ||
		ivs[1].Start != time.Second || ivs[1].Length != 500*time.Millisecond || ivs[1].Deadlocks != 1 || ivs[1].Latency.Count() != 0 {
		t.Errorf("intervals %+v %v", ivs, err)
	}
	ds, err := r.Digests()
	if err != nil || !reflect.DeepEqual(ds, map[string]DigestInfo{"d1": {Text: "select ?", Class: "read"}}) {
		t.Errorf("digests %v %v", ds, err)
	}
	res, ok, err := r.Result(0, 1)
	if err != nil || !ok || !reflect.DeepEqual(res, goldenResult(version)) {
		t.Errorf("result\n got %+v\nwant %+v (%v %v)", res, goldenResult(version), ok, err)
	}
	if _, ok, _ := r.Result(0, 0); ok {
		t.Error("a result that was never written")
	}
}

func TestRunRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	writeGoldenRun(t, dir, RunFormatVersion)
	r, err := OpenRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	checkRun(t, r, RunFormatVersion)
}

// Runs written by every run format version read as they were written.
func TestGoldenRuns(t *testing.T) {
	for v := 1; v <= RunFormatVersion; v++ {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) {
			dir := filepath.Join("testdata", fmt.Sprintf("run-v%d", v))
			if _, err := os.Stat(dir); os.IsNotExist(err) && *updateGolden && v == RunFormatVersion {
				writeGoldenRun(t, dir, v)
				os.Remove(filepath.Join(dir, "LOCK"))
			}
			r, err := OpenRun(copyDir(t, dir))
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			checkRun(t, r, v)
		})
	}
}

func TestOpenRunRejects(t *testing.T) {
	capDir := filepath.Join(t.TempDir(), "cap")
	w, err := Create(capDir, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if _, err := OpenRun(capDir); !errors.Is(err, ErrNotRun) || !strings.Contains(err.Error(), "is a capture") {
		t.Errorf("a capture: %v", err)
	}
	if _, err := OpenRun(t.TempDir()); !errors.Is(err, ErrNotRun) {
		t.Errorf("an empty directory: %v", err)
	}
	if _, err := OpenRun(filepath.Join(t.TempDir(), "nope")); !errors.Is(err, ErrNotRun) {
		t.Errorf("a missing directory: %v", err)
	}
}

func FuzzDecodeOutcome(f *testing.F) {
	for _, os := range goldenOutcomes(RunFormatVersion) {
		for i := range os {
			f.Add(AppendOutcome(nil, &os[i]))
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var o Outcome
		if err := DecodeOutcome(b, &o); err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrNewerFormat) {
				t.Fatalf("error %v is neither ErrCorrupt nor ErrNewerFormat", err)
			}
			return
		}
		if b2 := AppendOutcome(nil, &o); !bytes.Equal(b, b2) {
			var o2 Outcome
			if err := DecodeOutcome(b2, &o2); err != nil || o2 != o {
				t.Fatalf("round trip: %+v -> %+v (%v)", o, o2, err)
			}
		}
	})
}

func FuzzDecodeHistogram(f *testing.F) {
	f.Add(AppendHistogram(nil, goldenHist(time.Millisecond, time.Second, 0)))
	f.Add(AppendHistogram(nil, &latency.Histogram{}))
	f.Add(AppendInterval(nil, &Interval{Transactions: 3, Latency: *goldenHist(5 * time.Microsecond)}))
	f.Fuzz(func(t *testing.T, b []byte) {
		var h latency.Histogram
		if err := DecodeHistogram(b, &h); err == nil {
			// What decodes re-encodes to a canonical form that is a fixed point.
			b2 := AppendHistogram(nil, &h)
			var h2 latency.Histogram
			if err := DecodeHistogram(b2, &h2); err != nil || !bytes.Equal(AppendHistogram(nil, &h2), b2) ||
				h2.Count() != h.Count() || h2.Sum() != h.Sum() || h2.Max() != h.Max() {
				t.Fatalf("histogram does not round-trip: %v", err)
			}
		} else if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("error %v is not ErrCorrupt", err)
		}
		var iv Interval
		if err := DecodeInterval(b, &iv); err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("error %v is not ErrCorrupt", err)
		}
	})
}

func FuzzDecodeIndex(f *testing.F) {
	sk := sessionKey(nil, 7, 100)
	f.Add(sk, binary.AppendUvarint(binary.AppendUvarint(binary.AppendUvarint(nil, 2), 1), 5))
	tk := timeKey(nil, 100)
	f.Add(tk, binary.AppendVarint(binary.AppendVarint(binary.AppendUvarint(nil, 3), -5), 9))
	f.Add([]byte{prefixSession}, []byte{})
	f.Fuzz(func(t *testing.T, k, v []byte) {
		if _, seqs, err := decodeSessionIndex(k, v); err == nil {
			for i := 1; i < len(seqs); i++ {
				if seqs[i] <= seqs[i-1] {
					t.Fatalf("seqs not increasing: %v", seqs)
				}
			}
		} else if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("session index: %v", err)
		}
		if _, n, lo, hi, err := decodeTimeIndex(k, v); err == nil && (n == 0 || lo > hi) {
			t.Fatalf("time index accepted count %d, %d..%d", n, lo, hi)
		} else if err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("time index: %v", err)
		}
		recordSeq(k)
	})
}

// An outcome batch is Full before Pebble would take it for a large batch
// (half a memtable of entries, flushed to a file of its own as it commits,
// its buffer dropped): committed when Full, a batch keeps its buffer. Cut
// at 4,096 point-select outcomes, as a --concurrency replay's connections
// did, each commit was a flush of its own and a new buffer.
func TestOutcomeBatchFullStaysOutOfLargeBatches(t *testing.T) {
	w, err := CreateRun(t.TempDir(), RunMeta{RunID: "full"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	b := w.NewOutcomeBatch(0, 0)
	seq := uint64(1 << 20)
	add := func() {
		seq++ // a point select's outcome
		b.Add(&Outcome{Seq: seq, Session: 1 + seq%8, Service: 180 * time.Microsecond, Results: 1, Rows: 1, Columns: 1,
			Ordered: seq * 0x9e3779b97f4a7c15, Unordered: seq * 0xbf58476d1ce4e5b9})
	}
	buffer := func() *byte { return &b.b.Repr()[0] }
	for round := range 3 {
		for !b.Full() {
			add()
		}
		if n := b.Len(); n < 800 || n >= 4096 {
			t.Fatalf("round %d: full at %d outcomes (%d bytes), want 800 to 4,095", round, n, b.b.Len())
		}
		was := buffer()
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
		add()
		if buffer() != was {
			t.Errorf("round %d: a batch committed when Full dropped its buffer (Pebble took it for a large batch)", round)
		}
	}
	// What the old cut did, for contrast: 4,096 outcomes make a large
	// batch, so the test above can tell one from the other.
	for b.Len() < 4096 {
		add()
	}
	was := buffer()
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	add()
	if buffer() == was {
		t.Errorf("4,096 outcomes committed as an ordinary batch: the memtable accounting changed, check memtableEntryRoom")
	}
}
