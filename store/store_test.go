package store

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// writeCapture appends recs to a new capture in dir and closes it.
func writeCapture(t *testing.T, dir string, opts WriterOptions, recs []Record) {
	t.Helper()
	w, err := Create(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range recs {
		seq, err := w.Append(&recs[i])
		if err != nil {
			t.Fatal(err)
		}
		if seq != uint64(i+1) || recs[i].Seq != seq {
			t.Fatalf("record %d got seq %d (Seq field %d), want %d", i, seq, recs[i].Seq, i+1)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func collect(t *testing.T, seq func(func(*Record, error) bool)) []Record {
	t.Helper()
	var out []Record
	for r, err := range seq {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, *r.Clone())
	}
	return out
}

// rebase moves sample records' starts to just after a capture's base time.
func rebase(recs []Record, base int64) {
	for i := range recs {
		recs[i].Start = time.Unix(0, base+(recs[i].Start.UnixNano()-testBase))
	}
}

func TestStoreRoundTripAndReaders(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cap")
	recs := sampleRecords()
	// Record starts are relative to when the capture is created.
	base := time.Now().UnixNano()
	rebase(recs, base)
	// Small commits so that the indexes span several entries.
	writeCapture(t, dir, WriterOptions{Source: "test", FlushRecords: 3, NoSync: true}, recs)

	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	m := r.Meta()
	if m.Magic != magic || m.FormatVersion != FormatVersion || m.Source != "test" || m.ToolVersion == "" {
		t.Errorf("meta = %+v", m)
	}
	sum, ok := r.Summary()
	if !ok || sum.Records != uint64(len(recs)) || sum.FirstSeq != 1 || sum.LastSeq != uint64(len(recs)) || sum.Sessions != 4 {
		t.Errorf("summary = %+v, %v; want %d records in 4 sessions", sum, ok, len(recs))
	}

	got := collect(t, r.Records())
	if len(got) != len(recs) {
		t.Fatalf("read %d records, want %d", len(got), len(recs))
	}
	for i := range recs {
		if g, w := normalize(got[i]), normalize(recs[i]); !reflect.DeepEqual(g, w) {
			t.Errorf("record %d\n got %+v\nwant %+v", i+1, g, w)
		}
	}

	sessions, err := r.Sessions()
	if err != nil {
		t.Fatal(err)
	}
	if want := []uint64{1, 2, 3, 1 << 40}; !reflect.DeepEqual(sessions, want) {
		t.Errorf("sessions = %v, want %v", sessions, want)
	}
	for _, s := range sessions {
		var want []uint64
		for _, rec := range recs {
			if rec.Session == s {
				want = append(want, rec.Seq)
			}
		}
		var gotSeqs []uint64
		for _, rec := range collect(t, r.Session(s)) {
			if rec.Session != s {
				t.Errorf("Session(%d) yielded a record of session %d", s, rec.Session)
			}
			gotSeqs = append(gotSeqs, rec.Seq)
		}
		if !reflect.DeepEqual(gotSeqs, want) {
			t.Errorf("Session(%d) seqs = %v, want %v", s, gotSeqs, want)
		}
	}
	if n := len(collect(t, r.Session(12345))); n != 0 {
		t.Errorf("unknown session yielded %d records", n)
	}

	// Window [at(5), at(9)) holds the records that start at 5, 6, 7 and 8 ms.
	from, to := recs[6].Start, recs[10].Start
	var win []uint64
	for _, rec := range collect(t, r.Window(from, to)) {
		win = append(win, rec.Seq)
	}
	if want := []uint64{7, 8, 9, 10}; !reflect.DeepEqual(win, want) {
		t.Errorf("Window seqs = %v, want %v", win, want)
	}
	// The prepare started a second before everything else: a window around
	// it finds it although it was appended fourth.
	var early []uint64
	for _, rec := range collect(t, r.Window(recs[3].Start, recs[3].Start.Add(time.Millisecond))) {
		early = append(early, rec.Seq)
	}
	if want := []uint64{4}; !reflect.DeepEqual(early, want) {
		t.Errorf("early Window seqs = %v, want %v", early, want)
	}
}

func TestCreateRefusesNonEmptyDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cap")
	writeCapture(t, dir, WriterOptions{NoSync: true}, sampleRecords()[:2])
	if _, err := Create(dir, WriterOptions{}); !errors.Is(err, ErrExists) || !strings.Contains(err.Error(), "already holds a capture") {
		t.Fatalf("Create over a capture: err = %v", err)
	}
	other := t.TempDir()
	os.WriteFile(filepath.Join(other, "notes.txt"), []byte("mine"), 0o644)
	if _, err := Create(other, WriterOptions{}); !errors.Is(err, ErrExists) {
		t.Fatalf("Create in a non-empty directory: err = %v", err)
	}
	// Both are intact.
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(collect(t, r.Records())); n != 2 {
		t.Errorf("capture has %d records after refused Create, want 2", n)
	}
	r.Close()
}

func TestAppendAfterCloseFails(t *testing.T) {
	w, err := Create(filepath.Join(t.TempDir(), "cap"), WriterOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	rec := sampleRecords()[0]
	if _, err := w.Append(&rec); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close: %v", err)
	}
	if err := w.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
}

func TestTryAppendDropsWhenBehindAndCounts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cap")
	// A pending bound smaller than two records and a flush that never comes
	// on its own: the first record waits, the rest are dropped.
	w, err := Create(dir, WriterOptions{NoSync: true, MaxPendingBytes: 64, FlushInterval: time.Hour, FlushRecords: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	rec := sampleRecords()[1]
	if seq := w.TryAppend(&rec); seq != 1 {
		t.Fatalf("first TryAppend seq = %d, want 1", seq)
	}
	for i := 0; i < 5; i++ {
		if seq := w.TryAppend(&rec); seq != 0 {
			t.Fatalf("TryAppend over the bound returned seq %d, want 0 (dropped)", seq)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if seq := w.TryAppend(&rec); seq != 2 {
		t.Fatalf("TryAppend after Flush seq = %d, want 2", seq)
	}
	st := w.Stats()
	if st.Appended != 2 || st.Dropped != 5 || st.Committed != 1 || st.DurableSeq != 1 {
		t.Fatalf("stats = %+v; want 2 appended, 5 dropped, 1 committed, durable 1", st)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, _ := Open(dir)
	defer r.Close()
	sum, _ := r.Summary()
	if sum.Records != 2 || sum.Dropped != 5 {
		t.Fatalf("summary = %+v; want 2 records, 5 dropped", sum)
	}
}

func TestOpenRejectsWhatIsNotACapture(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, []byte("x"), 0o644)
	empty := t.TempDir()
	foreign := t.TempDir()
	os.WriteFile(filepath.Join(foreign, "data.csv"), []byte("a,b\n"), 0o644)
	pebbleDir := filepath.Join(t.TempDir(), "pebble")
	db, err := pebble.Open(pebbleDir, &pebble.Options{Logger: pebbleLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	db.Set([]byte("hello"), []byte("world"), pebble.Sync)
	db.Close()

	cases := []struct{ dir, want string }{
		{filepath.Join(t.TempDir(), "missing"), "does not exist"},
		{file, "is a file"},
		{empty, "holds no Pebble store"},
		{foreign, "holds no Pebble store"},
		{pebbleDir, "without a tandem header"},
	}
	for _, c := range cases {
		before, _ := os.ReadDir(c.dir)
		_, err := Open(c.dir)
		if !errors.Is(err, ErrNotCapture) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Open(%s): err = %v, want ErrNotCapture with %q", filepath.Base(c.dir), err, c.want)
		}
		if c.dir == foreign || c.dir == empty {
			after, _ := os.ReadDir(c.dir)
			if len(after) != len(before) {
				t.Errorf("Open(%s) added files to a foreign directory", filepath.Base(c.dir))
			}
		}
	}
}

// rewriteKey opens a capture with Pebble directly and replaces key's value.
func rewriteKey(t *testing.T, dir string, key, value []byte) {
	t.Helper()
	db, err := pebble.Open(dir, pebbleOptions(false, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Set(key, value, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestOpenNewerFormatVersion(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cap")
	writeCapture(t, dir, WriterOptions{NoSync: true}, sampleRecords()[:1])
	m := Meta{Magic: magic, FormatVersion: FormatVersion + 6}
	b, _ := json.Marshal(m)
	rewriteKey(t, dir, keyHeader, b)
	_, err := Open(dir)
	if !errors.Is(err, ErrNewerFormat) || !strings.Contains(err.Error(), fmt.Sprintf("version %d", FormatVersion+6)) || !strings.Contains(err.Error(), "upgrade tandem") {
		t.Fatalf("err = %v, want ErrNewerFormat naming version %d", err, FormatVersion+6)
	}
}

func TestCorruptRecordIsReportedWithItsSeq(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cap")
	recs := sampleRecords()
	writeCapture(t, dir, WriterOptions{NoSync: true}, recs)
	good := AppendRecord(nil, &recs[4], testBase)
	rewriteKey(t, dir, recordKey(nil, 5), good[:len(good)/2])

	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var n int
	var gotErr error
	for _, err := range r.Records() {
		if err != nil {
			gotErr = err
			break
		}
		n++
	}
	if n != 4 || !errors.Is(gotErr, ErrCorrupt) || !strings.Contains(gotErr.Error(), "record seq 5") {
		t.Fatalf("read %d records then err %v; want 4 then ErrCorrupt at seq 5", n, gotErr)
	}
	// Verify (inspect --verify) says the same: it used to stop there with
	// no error, as if record 4 were the capture's last.
	v, err := r.Verify()
	if v.Readable != 4 || !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "record 5") {
		t.Fatalf("Verify: %d readable, %v; want 4, then ErrCorrupt naming record 5", v.Readable, err)
	}
}

func TestMissingRecordsAgainstSummaryAreCorruption(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cap")
	writeCapture(t, dir, WriterOptions{NoSync: true}, sampleRecords())
	db, err := pebble.Open(dir, pebbleOptions(false, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	db.Delete(recordKey(nil, 17), pebble.Sync)
	db.Close()
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var last error
	for _, err := range r.Records() {
		last = err
	}
	if !errors.Is(last, ErrCorrupt) || !strings.Contains(last.Error(), "found 16 records, its summary counts 17") {
		t.Fatalf("err = %v, want the count mismatch", last)
	}
}

// The crash test runs this binary again as a child that appends until it is
// killed; see TestCrashLosesNothingReportedDurable.
const crashChildEnv = "TANDEM_STORE_CRASH_CHILD"

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		crashChild(dir)
		return
	}
	os.Exit(m.Run())
}

// crashRecord is the i-th record the crash child writes: its content can be
// checked from its seq alone.
func crashRecord(i uint64) Record {
	return Record{Session: i % 7, Start: time.Unix(0, testBase+int64(i)*1000), Duration: time.Duration(i),
		Kind: KindQuery, Schema: "crash", SQL: "SELECT " + strconv.FormatUint(i, 10), Resp: Response{Kind: RespResultSet, Rows: i}}
}

// crashKeyEnv gives the crash child the key, in hex, of an encrypted
// capture (TestKilledEncryptedWriterKeepsWhatWasSynced).
const crashKeyEnv = "TANDEM_STORE_CRASH_KEY"

func crashChild(dir string) {
	var key *Key
	if h := os.Getenv(crashKeyEnv); h != "" {
		var err error
		if key, err = ParseKey([]byte(h)); err != nil {
			fmt.Println("error", err)
			os.Exit(2)
		}
	}
	w, err := Create(dir, WriterOptions{FlushInterval: 5 * time.Millisecond, FlushRecords: 500, Key: key})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	out := bufio.NewWriter(os.Stdout)
	var last uint64
	for i := uint64(1); ; i++ {
		rec := crashRecord(i)
		if _, err := w.Append(&rec); err != nil {
			fmt.Println("error", err)
			os.Exit(2)
		}
		if d := w.DurableSeq(); d != last {
			last = d
			fmt.Fprintf(out, "durable %d\n", d)
			out.Flush()
		}
	}
}

// startCrashChild starts crashChild writing a capture in a new directory;
// sc reads its "durable N" lines.
func startCrashChild(t *testing.T, env ...string) (dir string, cmd *exec.Cmd, sc *bufio.Scanner) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "cap")
	cmd = exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), crashChildEnv+"="+dir), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return dir, cmd, bufio.NewScanner(stdout)
}

func TestCrashLosesNothingReportedDurable(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a child process; skipped with -short")
	}
	for round := 0; round < 3; round++ {
		dir, cmd, sc := startCrashChild(t)
		var durable uint64
		deadline := time.Now().Add(time.Duration(300+200*round) * time.Millisecond)
		for sc.Scan() {
			line := sc.Text()
			if v, ok := strings.CutPrefix(line, "durable "); ok {
				durable, _ = strconv.ParseUint(v, 10, 64)
			} else {
				t.Fatalf("child: %s", line)
			}
			if durable > 20000 && time.Now().After(deadline) {
				break
			}
		}
		cmd.Process.Signal(syscall.SIGKILL)
		for sc.Scan() { // durable lines printed before the kill landed
			if v, ok := strings.CutPrefix(sc.Text(), "durable "); ok {
				durable, _ = strconv.ParseUint(v, 10, 64)
			}
		}
		cmd.Wait()
		if durable == 0 {
			t.Fatal("child reported nothing durable")
		}

		r, err := Open(dir)
		if err != nil {
			t.Fatalf("round %d: reopen after SIGKILL: %v", round, err)
		}
		if _, ok := r.Summary(); ok {
			t.Errorf("a killed writer left a summary")
		}
		var n uint64
		for rec, err := range r.Records() {
			if err != nil {
				t.Fatalf("round %d: after %d records: %v", round, n, err)
			}
			n++
			want := crashRecord(n)
			want.Seq = n
			if rec.Seq != n || rec.SQL != want.SQL || rec.Resp.Rows != n || rec.Session != want.Session || rec.Start.UnixNano() != want.Start.UnixNano() {
				t.Fatalf("round %d: record %d is %+v, want %+v", round, n, rec, want)
			}
		}
		r.Close()
		if n < durable {
			t.Fatalf("round %d: reopened capture has %d records; %d had been reported durable", round, n, durable)
		}
		t.Logf("round %d: %d reported durable, %d found", round, durable, n)
	}
}

func TestCleanCloseLeavesNoWALAndReopens(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cap")
	w, err := Create(dir, WriterOptions{FlushRecords: 100})
	if err != nil {
		t.Fatal(err)
	}
	mix := newOLTPMix(3)
	var rec Record
	for i := 0; i < 5000; i++ {
		mix.next(&rec)
		if _, err := w.Append(&rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if logs, _ := filepath.Glob(filepath.Join(dir, "*.log")); len(logs) != 0 {
		t.Fatalf("clean close left WAL files: %v", logs)
	}
	for i := 0; i < 2; i++ { // twice: opening must not need what was removed
		r, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		var n, execs int
		for rec, err := range r.Records() {
			if err != nil {
				t.Fatal(err)
			}
			n++
			if rec.Kind == KindExecute {
				execs++
			}
		}
		r.Close()
		// 250 transactions of 20 statements rotate over 16 sessions; the 128
		// on sessions 1-8 use executes for all but BEGIN and COMMIT.
		if n != 5000 || execs != 128*18 {
			t.Fatalf("reopen %d: %d records (%d executes), want 5000 (%d)", i, n, execs, 128*18)
		}
	}
}

func TestStartSpanMatchesAFullScan(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cap")
	recs := sampleRecords()
	rebase(recs, time.Now().UnixNano())
	writeCapture(t, dir, WriterOptions{FlushRecords: 4, NoSync: true}, recs)
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var lo, hi time.Time
	for rec, err := range r.Records() {
		if err != nil {
			t.Fatal(err)
		}
		if lo.IsZero() || rec.Start.Before(lo) {
			lo = rec.Start
		}
		if rec.Start.After(hi) {
			hi = rec.Start
		}
	}
	first, last, ok, err := r.StartSpan()
	if err != nil || !ok || !first.Equal(lo) || !last.Equal(hi) {
		t.Fatalf("StartSpan = %v, %v, %v, %v; a full scan finds %v and %v", first, last, ok, err, lo, hi)
	}
	// The prepare started a second before the rest, in the second commit.
	if !first.Equal(recs[3].Start) {
		t.Fatalf("earliest start %v, want the prepare's %v", first, recs[3].Start)
	}
}

// fullFS fails every write, sync and file creation with ENOSPC once full
// is set: a disk that filled up under the capture.
type fullFS struct {
	vfs.FS
	full *atomic.Bool
	// createOnly: files already open still write; a new one (a WAL
	// rotation) cannot be made.
	createOnly bool
}

func (f fullFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	if f.full.Load() {
		return nil, &os.PathError{Op: "create", Path: name, Err: syscall.ENOSPC}
	}
	file, err := f.FS.Create(name, c)
	if err != nil {
		return nil, err
	}
	return fullFile{file, f.full, f.createOnly}, nil
}

func (f fullFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	if f.full.Load() {
		return nil, &os.PathError{Op: "create", Path: newname, Err: syscall.ENOSPC}
	}
	file, err := f.FS.ReuseForWrite(oldname, newname, c)
	if err != nil {
		return nil, err
	}
	return fullFile{file, f.full, f.createOnly}, nil
}

type fullFile struct {
	vfs.File
	full       *atomic.Bool
	createOnly bool
}

func (f fullFile) failing() bool { return !f.createOnly && f.full.Load() }

func (f fullFile) Write(p []byte) (int, error) {
	if f.failing() {
		return 0, syscall.ENOSPC
	}
	return f.File.Write(p)
}

func (f fullFile) WriteAt(p []byte, off int64) (int, error) {
	if f.failing() {
		return 0, syscall.ENOSPC
	}
	return f.File.WriteAt(p, off)
}

func (f fullFile) Sync() error {
	if f.failing() {
		return syscall.ENOSPC
	}
	return f.File.Sync()
}

func (f fullFile) SyncData() error { return f.Sync() }

// A disk that fills under the writer (Pebble's WAL write, sync or rotation
// fails, and Pebble calls Fatalf, often on its own goroutine) stops the
// capture and never the process: before, Fatalf panicked and took every
// relayed client down. What was synced is readable afterwards.
func TestDiskFullStopsTheCaptureNotTheProcess(t *testing.T) {
	for _, tc := range []struct {
		name       string
		createOnly bool
		pad        int
	}{
		// Every write fails: the WAL's write or sync, in the commit.
		{"commit", false, 0},
		// Only new files fail: the commit that fills the 64 MiB memtable
		// rotates the WAL, under Pebble's own locks.
		{"rotation", true, 32 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "cap")
			var full atomic.Bool
			opts := WriterOptions{FlushRecords: 50, FlushInterval: 5 * time.Millisecond, NoSync: tc.createOnly}
			opts.FS = fullFS{vfs.Default, &full, tc.createOnly}
			pad := strings.Repeat("p", tc.pad)
			w, err := Create(dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			var appended uint64
			var seqAtFull uint64
			deadline := time.Now().Add(20 * time.Second)
			for w.Err() == nil {
				if time.Now().After(deadline) {
					t.Fatalf("no failure 20s after the disk filled (%d appended)", appended)
				}
				r := crashRecord(appended + 1)
				r.SQL += pad
				if _, err := w.Append(&r); err != nil {
					break
				}
				appended++
				if appended == 3000 {
					if err := w.Flush(); err != nil {
						t.Fatal(err)
					}
					seqAtFull = w.DurableSeq()
					full.Store(true)
				}
			}
			if !errors.Is(w.Err(), ErrFailed) || !strings.Contains(w.Err().Error(), "no space left on device") || strings.Contains(w.Err().Error(), "pebble: pebble:") {
				t.Fatalf("writer error %v, want ErrFailed naming ENOSPC", w.Err())
			}
			r := crashRecord(1)
			if w.TryAppend(&r) != 0 {
				t.Fatal("a failed writer accepted a record")
			}
			if err := w.Flush(); !errors.Is(err, ErrFailed) {
				t.Fatalf("Flush after failure: %v", err)
			}
			done := make(chan error, 1)
			go func() { done <- w.Close() }()
			select {
			case err := <-done:
				if !errors.Is(err, ErrFailed) {
					t.Fatalf("Close after failure: %v, want ErrFailed", err)
				}
			case <-time.After(15 * time.Second):
				t.Fatal("Close of a failed writer did not return")
			}
			// Once this process has ended the capture opens: a copy of its
			// directory is what another process sees.
			cp := filepath.Join(t.TempDir(), "copy")
			if out, err := exec.Command("cp", "-r", dir, cp).CombinedOutput(); err != nil {
				t.Fatalf("cp: %v: %s", err, out)
			}
			os.Remove(filepath.Join(cp, "LOCK"))
			rd, err := Open(cp)
			if err != nil {
				t.Fatalf("open the failed capture: %v", err)
			}
			defer rd.Close()
			if why, _, ok := rd.Failure(); !ok || why != strings.TrimPrefix(w.Err().Error(), ErrFailed.Error()+": ") {
				t.Errorf("the capture's failure note: %q, %v; the writer's error: %v", why, ok, w.Err())
			}
			if _, err := os.Stat(filepath.Join(cp, failedFile)); err != nil {
				t.Errorf("the note is not named %s: %v", failedFile, err)
			}
			var n uint64
			for rec, err := range rd.Records() {
				if err != nil {
					t.Fatalf("after %d records: %v", n, err)
				}
				n++
				if rec.Seq != n || rec.Resp.Rows != n {
					t.Fatalf("record %d is %+v", n, rec)
				}
			}
			if n < seqAtFull || n > appended {
				t.Fatalf("%d records readable; %d were synced when the disk filled, %d appended", n, seqAtFull, appended)
			}
			t.Logf("%d synced before the disk filled, %d appended, %d readable; %v", seqAtFull, appended, n, w.Err())
		})
	}
}

// A live reader follows the capture as it is written: every record, in
// order, each once, as soon as it is committed; Get and Session see the
// live store too; Follow ends when its context does.
func TestFollowSeesRecordsAsTheyAreCommitted(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cap")
	w, err := Create(dir, WriterOptions{FlushInterval: 5 * time.Millisecond, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	live := w.Live()
	const n = 5000
	go func() {
		for i := uint64(1); i <= n; i++ {
			r := crashRecord(i)
			if _, err := w.Append(&r); err != nil {
				t.Error(err)
				return
			}
			if i%500 == 0 {
				time.Sleep(10 * time.Millisecond) // the follower catches up and waits
			}
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	var got uint64
	for rec, err := range live.Follow(ctx, 1) {
		if err != nil {
			t.Fatal(err)
		}
		got++
		if rec.Seq != got || rec.Resp.Rows != got {
			t.Fatalf("record %d is %+v", got, rec)
		}
		if got == n {
			cancel()
		}
	}
	if got != n {
		t.Fatalf("followed %d records, want %d", got, n)
	}
	rec, ok, err := live.Get(n / 2)
	if err != nil || !ok || rec.Resp.Rows != n/2 {
		t.Fatalf("Get on the live reader: %+v %v %v", rec, ok, err)
	}
	// From the middle, and with nothing more to come: it waits until
	// its context ends.
	ctx, cancel = context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	got = 0
	for rec, err := range live.Follow(ctx, n-9) {
		if err != nil {
			t.Fatal(err)
		}
		if rec.Seq != n-9+got {
			t.Fatalf("from %d: record %d", n-9, rec.Seq)
		}
		got++
	}
	if got != 10 || ctx.Err() == nil {
		t.Fatalf("from the middle: %d records, context %v", got, ctx.Err())
	}
	if live.Close() != nil {
		t.Fatal("closing a live reader failed")
	}
	var closed Reader
	for _, err := range closed.Follow(context.Background(), 1) {
		if !errors.Is(err, ErrNotLive) {
			t.Fatalf("Follow on a reader that is not live: %v", err)
		}
	}
}

// A flipped byte in a table file is an error naming the file and the
// records it held, for a capture's reader and a run's alike — never a
// panic (Pebble's default for a reader meeting corruption is Fatalf).
func TestFlippedByteInATableIsAnErrorNotAPanic(t *testing.T) {
	dir, ssts := flippedCapture(t)
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	n, gotErr := readToError(r)
	want := filepath.Base(ssts[0]) + " is damaged"
	if !errors.Is(gotErr, ErrCorrupt) || !strings.Contains(gotErr.Error(), want) || !strings.Contains(gotErr.Error(), "holds records 1 to the last") ||
		strings.Contains(gotErr.Error(), "\n") {
		t.Fatalf("after %d records: %v; want one line, ErrCorrupt naming %q and records 1 to the last", n, gotErr, want)
	}
	// Verify says the same of the file: it holds the header and the
	// indexes too, and "no records" (what it said) was false.
	v, err := r.Verify()
	if err != nil || len(v.Damaged) != 1 || v.Damaged[0].Held != "records 1 to the last" {
		t.Fatalf("Verify: %+v, %v; want one damaged file holding records 1 to the last", v, err)
	}
}

// A reader that passes damage (replay --skip-damaged) reads what is there
// when the damaged file holds the records to the last (and the index
// after them): it ends there, as Verify does, and names the file. It
// ended with the damage's error instead, so --skip-damaged refused a
// capture whose last table was damaged (TestInspectVerify met it when
// the capture's files fell that way).
func TestPassingDamageThatHoldsTheRecordsToTheLast(t *testing.T) {
	dir, ssts := flippedCapture(t)
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	v, err := r.Verify()
	if err != nil || len(v.Damaged) != 1 || !v.Damaged[0].ToLast || v.Readable == 0 || v.Readable >= 5000 {
		t.Fatalf("Verify: %+v, %v; want one damaged file holding the records to the last, some read before it", v, err)
	}
	r.PassDamaged()
	n := 0
	for rec, err := range r.Records() {
		if err != nil {
			t.Fatalf("passing damage, after %d records: %v", n, err)
		}
		if rec.Seq != uint64(n+1) {
			t.Fatalf("record %d has seq %d", n, rec.Seq)
		}
		n++
	}
	want := Damage{File: filepath.Base(ssts[0]), ToLast: true, Held: "records 1 to the last", Detail: v.Damaged[0].Detail}
	if d := r.Damaged(); uint64(n) != v.Readable || len(d) != 1 || d[0] != want {
		t.Errorf("passing damage: %d records (Verify read %d), damaged %+v; want %+v", n, v.Readable, d, want)
	}
}

// flippedCapture writes a closed capture of 5,000 queries, which flushes
// them, with its header and indexes, to one table file, and flips a
// byte in that file; it returns the directory and the file (as a list).
func flippedCapture(t *testing.T) (string, []string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "cap")
	recs := make([]Record, 5000)
	for i := range recs {
		recs[i] = Record{Session: uint64(i%7 + 1), Start: time.Unix(0, testBase+int64(i)*1000), Kind: KindQuery,
			SQL: fmt.Sprintf("SELECT c FROM sbtest1 WHERE id = %d /* %x */", i, i*7919)}
	}
	writeCapture(t, dir, WriterOptions{NoSync: true}, recs)
	ssts, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	if len(ssts) != 1 {
		t.Fatalf("%d table files, want the 1 a closed capture of 5,000 records flushes", len(ssts))
	}
	flip(t, ssts[0])
	return dir, ssts
}

// flip inverts one byte in the middle of a file.
func flip(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/3] ^= 0xff
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Lost records are found by their sequence numbers: runs in the middle
// and before the first, counted exactly.
func TestSeqGapsFindLostRecords(t *testing.T) {
	var g SeqGaps
	for _, s := range []uint64{3, 4, 5, 9, 10, 12} {
		g.Note(s)
	}
	if g.Missing != 6 || len(g.Ranges) != 3 || g.Ranges[0] != (SeqRange{1, 2}) || g.Ranges[1] != (SeqRange{6, 8}) || g.Ranges[2] != (SeqRange{11, 11}) {
		t.Fatalf("%+v", g)
	}
	if g.Last() != 12 {
		t.Errorf("Last() = %d, want 12", g.Last())
	}
	if got := g.String(); got != "6 records lost, in 3 runs (seq 1 to 2, 6 to 8, 11)" {
		t.Errorf("String() = %q", got)
	}
	var none SeqGaps
	for s := uint64(1); s <= 100; s++ {
		none.Note(s)
	}
	if none.Missing != 0 || none.String() != "" {
		t.Errorf("no gap: %+v %q", none, none.String())
	}
	var many SeqGaps
	for s := uint64(2); s <= 100; s += 2 {
		many.Note(s)
	}
	if many.Missing != 50 || len(many.Ranges) != maxGaps || many.More != 50-maxGaps {
		t.Errorf("many gaps: missing %d, %d ranges, %d more", many.Missing, len(many.Ranges), many.More)
	}
}

// While a capture is written, the space kept for a failure note is named
// for what it is, not TANDEM-FAILURE (which read as if the capture had
// failed); a clean close removes it.
func TestReservedSpaceIsNamedForWhatItIs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cap")
	w, err := Create(dir, WriterOptions{Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, reservedFile))
	if err != nil || len(b) != failedFileSize || strings.TrimSpace(string(b)) != "" {
		t.Errorf("%s: %d bytes, %v; want %d spaces", reservedFile, len(b), err, failedFileSize)
	}
	if _, err := os.Stat(filepath.Join(dir, "TANDEM-FAILURE")); !os.IsNotExist(err) {
		t.Errorf("a live capture holds TANDEM-FAILURE (%v)", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{reservedFile, failedFile} {
		if _, err := os.Stat(filepath.Join(dir, name)); !os.IsNotExist(err) {
			t.Errorf("a closed capture holds %s (%v)", name, err)
		}
	}
}

// Close of a failed writer returns only once the failure note is on disk.
// Before, the note was written after the error became visible, on Pebble's
// goroutine, and Close could return first: a copy taken then (CI did, in
// TestDiskFullStopsTheCaptureNotTheProcess) had no note.
func TestCloseOfAFailedWriterWaitsForItsNote(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cap")
	var full atomic.Bool
	w, err := Create(dir, WriterOptions{FlushRecords: 50, FlushInterval: 5 * time.Millisecond, FS: fullFS{vfs.Default, &full, false}})
	if err != nil {
		t.Fatal(err)
	}
	testBeforeNote = func() { time.Sleep(300 * time.Millisecond) }
	defer func() { testBeforeNote = nil }()
	full.Store(true)
	for i := uint64(1); w.Err() == nil; i++ {
		r := crashRecord(i)
		if _, err := w.Append(&r); err != nil {
			break
		}
	}
	if err := w.Close(); !errors.Is(err, ErrFailed) {
		t.Fatalf("Close: %v, want ErrFailed", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, failedFile))
	if err != nil || !strings.Contains(string(b), "no space left on device") {
		t.Fatalf("after Close, %s holds %q (%v); want the reason", failedFile, b, err)
	}
}

// A capture directory removed under a running writer fails it with a
// reason that says so, whichever notices first: the writer's look at its
// directory, or Pebble failing to make its next file (CI saw the second:
// "create …/000004.log: open …: no such file or directory", nothing about
// the directory).
func TestRemovedCaptureDirectoryIsTheReason(t *testing.T) {
	for _, c := range []struct{ name, pebble string }{
		{"the writer looks first", ""},
		{"Pebble fails first", "create 000004.log: open 000004.log: no such file or directory"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "cap")
			w, err := Create(dir, WriterOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
			if c.pebble != "" {
				w.fail(c.pebble)
			}
			// The writer looks at its directory once a second, as it
			// flushes: a record now and then keeps it flushing.
			for i := uint64(1); w.Err() == nil && i < 1000; i++ {
				r := crashRecord(i)
				w.Append(&r)
				time.Sleep(10 * time.Millisecond)
			}
			want := "store: capture failed: the capture directory " + dir + " was removed"
			if c.pebble != "" {
				want += ": " + c.pebble
			}
			if got := fmt.Sprint(w.Err()); got != want {
				t.Fatalf("Err: %q, want %q", got, want)
			}
			w.Close()
		})
	}
}

// A capture whose writer was killed is sealed: every record read, the
// summary written with why and what it holds; then it packs and unpacks
// whole. Pack refuses it before, Seal refuses it after.
func TestSealAKilledWritersCapture(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a child process; skipped with -short")
	}
	dir, cmd, sc := startCrashChild(t)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "durable "); ok {
			if d, _ := strconv.ParseUint(v, 10, 64); d > 5000 {
				break
			}
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	for sc.Scan() {
	}
	cmd.Wait()

	if _, err := Pack(dir, io.Discard); !errors.Is(err, ErrNotClosed) || !strings.Contains(err.Error(), "pack --crashed") {
		t.Fatalf("pack of a killed writer's capture: %v", err)
	}
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, err := range r.Records() {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	r.Close()
	sum, err := Seal(dir)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Records != n || sum.FirstSeq != 1 || sum.LastSeq != n || sum.Sessions != 7 || sum.Lost != "" || !strings.Contains(sum.Sealed, "did not close") || sum.SealedAt.IsZero() {
		t.Errorf("sealed summary %+v, want %d records of 7 sessions, none lost", sum, n)
	}
	r, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	got, closed := r.Summary()
	r.Close()
	if !closed || got.Records != n || got.Sealed != sum.Sealed {
		t.Errorf("summary read back %+v %v", got, closed)
	}
	if _, err := Seal(dir); !errors.Is(err, ErrAlreadyClosed) {
		t.Errorf("sealing again: %v", err)
	}
	var buf bytes.Buffer
	if _, err := Pack(dir, &buf); err != nil {
		t.Fatal(err)
	}
	arch := filepath.Join(t.TempDir(), "cap"+ArchiveSuffix)
	if err := os.WriteFile(arch, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	un, err := Unpack(arch, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r, err = Open(un)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var m uint64
	for rec, err := range r.Records() {
		if err != nil {
			t.Fatal(err)
		}
		m++
		if want := crashRecord(m); rec.Seq != m || rec.SQL != want.SQL {
			t.Fatalf("unpacked record %d: %+v", m, rec)
		}
	}
	if m != n {
		t.Errorf("unpacked %d records, want %d", m, n)
	}
}

// readToError reads r's records up to the first error and returns how
// many it read and that error (nil: none).
func readToError(r *Reader) (int, error) {
	n := 0
	for _, err := range r.Records() {
		if err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
