package store

import (
	"bytes"
	"cmp"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

const testKeyHex = "6b3a1f09d2c4e8577a10ff3c9e2b4d6a0c8e1f2a3b4c5d6e7f8091a2b3c4d5e6"

func testKey(t *testing.T, h string) *Key {
	t.Helper()
	k, err := ParseKey([]byte(h))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// secret is a literal that must not be found in any file of an
// encrypted capture.
const secret = "customer-4711-iban-DE89370400440532013000"

func secretRecords(n int) []Record {
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = Record{Session: uint64(i%5 + 1), Start: time.Unix(0, testBase+int64(i)*1000), Duration: time.Duration(i), Kind: KindQuery, Schema: "shop",
			SQL:  fmt.Sprintf("UPDATE accounts SET iban = '%s' WHERE id = %d", secret, i),
			Resp: Response{Kind: RespOK, AffectedRows: uint64(i)}}
	}
	return recs
}

// filesHolding lists the files in dir whose bytes hold s.
func filesHolding(t *testing.T, dir, s string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(s)) {
			out = append(out, e.Name())
		}
	}
	return out
}

// An encrypted capture reads back exactly what was written, and none of
// its files holds a literal of the records: not while it is written (the
// log holds them), nor once it is closed (the tables do). The same
// capture in clear holds it in its log: the check can fail.
func TestEncryptedCaptureRoundTripHoldsNoPlaintext(t *testing.T) {
	key := testKey(t, testKeyHex)
	for _, enc := range []bool{false, true} {
		t.Run(fmt.Sprintf("encrypted=%v", enc), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "cap")
			// Synced: with NoSync Pebble may still hold the log's last
			// bytes in memory when Flush returns, and the check in clear
			// would find nothing on some runs.
			opts := WriterOptions{}
			if enc {
				opts.Key = key
			}
			recs := secretRecords(3000)
			w, err := Create(dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			for i := range recs {
				if _, err := w.Append(&recs[i]); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			live := filesHolding(t, dir, secret)
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			closed := filesHolding(t, dir, secret)
			if !enc {
				if len(live) == 0 {
					t.Fatal("the capture in clear does not hold the literal in its log: this test cannot tell")
				}
				return
			}
			if len(live) > 0 || len(closed) > 0 {
				t.Fatalf("files holding %q: %v while written, %v once closed", secret, live, closed)
			}
			r, err := Open(dir, WithKey(key))
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if got := r.Meta().Encryption; got != "AES-256-GCM" {
				t.Errorf("Meta().Encryption = %q", got)
			}
			got := collect(t, r.Records())
			if len(got) != len(recs) {
				t.Fatalf("%d records, want %d", len(got), len(recs))
			}
			for i := range got {
				if got[i].Seq != uint64(i+1) || got[i].SQL != recs[i].SQL || got[i].Session != recs[i].Session ||
					got[i].Resp.AffectedRows != uint64(i) || !got[i].Start.Equal(recs[i].Start) {
					t.Fatalf("record %d: %+v, want %+v", i, got[i], recs[i])
				}
			}
			if sum, ok := r.Summary(); !ok || sum.Records != 3000 {
				t.Fatalf("summary %+v %v", sum, ok)
			}
			if enc, err := Encrypted(dir); err != nil || !enc {
				t.Fatalf("Encrypted: %v %v", enc, err)
			}
		})
	}
}

// Without its key, or with another, an encrypted capture or run
// directory is refused in one line that says so; a store in clear opens
// with a key given (the key is for the stores that are encrypted).
func TestEncryptedStoreNeedsItsKey(t *testing.T) {
	key, other := testKey(t, testKeyHex), testKey(t, strings.Repeat("5a", 32))
	root := t.TempDir()
	capDir, runDir, plain := filepath.Join(root, "cap"), filepath.Join(root, "run"), filepath.Join(root, "plain")
	writeCapture(t, capDir, WriterOptions{NoSync: true, Key: key}, secretRecords(100))
	writeGoldenRun(t, runDir, RunFormatVersion, WithKey(key))
	writeCapture(t, plain, WriterOptions{NoSync: true}, secretRecords(100))

	oneLine := func(what string, err, want error, text string) {
		t.Helper()
		if !errors.Is(err, want) || !strings.Contains(err.Error(), text) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v; want one line, %v, saying %q", what, err, want, text)
		}
	}
	_, err := Open(capDir)
	oneLine("Open without a key", err, ErrNoKey, capDir+" is encrypted; give the key it was written with (--encrypt-key-file FILE, or TANDEM_ENCRYPT_KEY_FILE=FILE)")
	_, err = Open(capDir, WithKey(other))
	oneLine("Open with another key", err, ErrWrongKey, capDir+" is encrypted with another key")
	_, err = OpenRun(runDir)
	oneLine("OpenRun without a key", err, ErrNoKey, "--encrypt-key-file")
	_, err = OpenRun(runDir, WithKey(other))
	oneLine("OpenRun with another key", err, ErrWrongKey, runDir+" is encrypted with another key")
	_, err = Pack(capDir, io.Discard)
	oneLine("Pack without a key", err, ErrNoKey, "--encrypt-key-file")
	_, err = Seal(capDir)
	oneLine("Seal without a key", err, ErrNoKey, "--encrypt-key-file")

	r, err := OpenRun(runDir, WithKey(key))
	if err != nil {
		t.Fatal(err)
	}
	checkRun(t, r, RunFormatVersion)
	r.Close()
	pr, err := Open(plain, WithKey(key))
	if err != nil {
		t.Fatalf("a capture in clear, opened with a key: %v", err)
	}
	if n := len(collect(t, pr.Records())); n != 100 || pr.Meta().Encryption != "" {
		t.Errorf("a capture in clear: %d records, encryption %q", n, pr.Meta().Encryption)
	}
	pr.Close()
	if enc, err := Encrypted(plain); err != nil || enc {
		t.Errorf("Encrypted(plain) = %v, %v", enc, err)
	}
}

// A byte changed in an encrypted table is damage, said as for a table in
// clear (ErrCorrupt, the file, the records it holds), never records
// decrypted into garbage.
func TestFlippedByteInAnEncryptedTableIsDamage(t *testing.T) {
	key := testKey(t, testKeyHex)
	dir := filepath.Join(t.TempDir(), "cap")
	writeCapture(t, dir, WriterOptions{NoSync: true, Key: key}, secretRecords(5000))
	ssts, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	if len(ssts) != 1 {
		t.Fatalf("%d table files, want 1", len(ssts))
	}
	flip(t, ssts[0])
	r, err := Open(dir, WithKey(key))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	n, gotErr := readToError(r)
	want := filepath.Base(ssts[0]) + " is damaged"
	if !errors.Is(gotErr, ErrCorrupt) || !strings.Contains(gotErr.Error(), want) || !strings.Contains(gotErr.Error(), "fails authentication") ||
		!strings.Contains(gotErr.Error(), "holds records 1 to the last") || strings.Contains(gotErr.Error(), "\n") {
		t.Fatalf("after %d records: %v; want one line, ErrCorrupt naming %q, a block that fails authentication, records 1 to the last", n, gotErr, want)
	}
	v, err := r.Verify()
	if err != nil || len(v.Damaged) != 1 || v.Damaged[0].Held != "records 1 to the last" {
		t.Fatalf("Verify: %+v, %v; want one damaged file holding records 1 to the last", v, err)
	}
}

// openWriterCopy writes recs into a new encrypted capture, syncs them,
// and returns a copy of its directory taken while its writer is open (as
// a writer killed then would leave it), and the writer to close.
func openWriterCopy(t *testing.T, key *Key, recs []Record) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "cap")
	w, err := Create(dir, WriterOptions{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	for i := range recs {
		if _, err := w.Append(&recs[i]); err != nil {
			t.Fatal(err)
		}
		if i%500 == 499 {
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(t.TempDir(), "copy")
	if out, err := exec.Command("cp", "-r", dir, cp).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	os.Remove(filepath.Join(cp, "LOCK"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return cp
}

// countRecords reads the capture in dir and checks each record against
// secretRecords.
func countRecords(t *testing.T, dir string, key *Key) (int, error) {
	t.Helper()
	r, err := Open(dir, WithKey(key))
	if err != nil {
		return 0, err
	}
	defer r.Close()
	n := 0
	for rec, err := range r.Records() {
		if err != nil {
			return n, err
		}
		if want := fmt.Sprintf("UPDATE accounts SET iban = '%s' WHERE id = %d", secret, n); rec.Seq != uint64(n+1) || rec.SQL != want {
			t.Fatalf("record %d: seq %d %q, want %q", n+1, rec.Seq, rec.SQL, want)
		}
		n++
	}
	return n, nil
}

// A byte changed in the middle of an encrypted log is damage (ErrCorrupt
// when the capture is opened); a last block that does not open — a write
// torn by a crash — is the log's end: the records before it are there.
func TestFlippedByteInAnEncryptedLog(t *testing.T) {
	key := testKey(t, testKeyHex)
	cp := openWriterCopy(t, key, secretRecords(3000))
	// The log that holds the records: the largest.
	logs, _ := filepath.Glob(filepath.Join(cp, "*.log"))
	slices.SortFunc(logs, func(a, b string) int { return cmp.Compare(fileSize(t, b), fileSize(t, a)) })
	if len(logs) == 0 || fileSize(t, logs[0]) < 20*cryptPage {
		t.Fatalf("logs %v: none holds the records", logs)
	}
	if n, err := countRecords(t, cp, key); err != nil || n != 3000 {
		t.Fatalf("the copy before any damage: %d records, %v", n, err)
	}
	b, err := os.ReadFile(logs[0])
	if err != nil {
		t.Fatal(err)
	}
	pages := (len(b) - cryptPage) / cryptPage
	if len(b)%cryptPage != 0 || pages < 20 {
		t.Fatalf("a log of %d bytes: not whole pages, or too few (%d)", len(b), pages)
	}

	mid := filepath.Join(t.TempDir(), "mid")
	exec.Command("cp", "-r", cp, mid).Run()
	midLog := filepath.Join(mid, filepath.Base(logs[0]))
	flipAt(t, midLog, int64(cryptPage*(pages/2+1)+100))
	_, err = countRecords(t, mid, key)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "fails authentication") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("a flipped byte in the middle of the log: %v; want one line, ErrCorrupt, a block that fails authentication", err)
	}

	tail := filepath.Join(t.TempDir(), "tail")
	exec.Command("cp", "-r", cp, tail).Run()
	tailLog := filepath.Join(tail, filepath.Base(logs[0]))
	flipAt(t, tailLog, int64(cryptPage*pages+100))
	n, err := countRecords(t, tail, key)
	if err != nil {
		t.Fatalf("a torn last block: %v; want the log to end before it", err)
	}
	// The records were committed 500 at a time, each commit one batch
	// of ~40 KB in the log: the last batch ends in the torn block and is
	// lost whole, as Pebble drops a batch cut short; the five before it
	// are all there.
	if n != 2500 {
		t.Fatalf("%d records before a torn last block, want 2500", n)
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// flipAt inverts the byte at off.
func flipAt(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b[:], off); err != nil {
		t.Fatal(err)
	}
}

// A writer of an encrypted capture killed mid-stream leaves a capture
// that opens with every record it reported durable, as one in clear does
// (TestCrashLosesNothingReportedDurable), and that Seal closes.
func TestKilledEncryptedWriterKeepsWhatWasSynced(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a child process; skipped with -short")
	}
	key := testKey(t, testKeyHex)
	dir, cmd, sc := startCrashChild(t, crashKeyEnv+"="+testKeyHex)
	var durable uint64
	deadline := time.Now().Add(400 * time.Millisecond)
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), "durable ")
		if !ok {
			t.Fatalf("child: %s", sc.Text())
		}
		durable, _ = strconv.ParseUint(v, 10, 64)
		if durable > 20000 && time.Now().After(deadline) {
			break
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "durable "); ok {
			durable, _ = strconv.ParseUint(v, 10, 64)
		}
	}
	cmd.Wait()
	if durable == 0 {
		t.Fatal("child reported nothing durable")
	}
	if _, err := Open(dir); !errors.Is(err, ErrNoKey) {
		t.Fatalf("open without the key: %v", err)
	}
	r, err := Open(dir, WithKey(key))
	if err != nil {
		t.Fatalf("reopen after SIGKILL: %v", err)
	}
	if _, ok := r.Summary(); ok {
		t.Errorf("a killed writer left a summary")
	}
	var n uint64
	for rec, err := range r.Records() {
		if err != nil {
			t.Fatalf("after %d records: %v", n, err)
		}
		n++
		want := crashRecord(n)
		if rec.Seq != n || rec.SQL != want.SQL || rec.Resp.Rows != n || rec.Session != want.Session || rec.Start.UnixNano() != want.Start.UnixNano() {
			t.Fatalf("record %d is %+v, want %+v", n, rec, want)
		}
	}
	r.Close()
	if n < durable {
		t.Fatalf("reopened capture has %d records; %d had been reported durable", n, durable)
	}
	sum, err := Seal(dir, WithKey(key))
	if err != nil || sum.Records != n || sum.Lost != "" {
		t.Fatalf("Seal: %+v, %v; want %d records, none lost", sum, err, n)
	}
	if holding := filesHolding(t, dir, "SELECT 1"); len(holding) > 0 {
		t.Errorf("files of the sealed capture holding a record's text: %v", holding)
	}
	t.Logf("%d reported durable, %d found", durable, n)
}

// A packed encrypted capture holds its files as they are, encrypted;
// packing verifies it with the key, and it unpacks into a capture that
// opens with the key only.
func TestPackOfAnEncryptedCapture(t *testing.T) {
	key := testKey(t, testKeyHex)
	root := t.TempDir()
	dir := filepath.Join(root, "cap")
	writeCapture(t, dir, WriterOptions{NoSync: true, Key: key}, secretRecords(2000))
	var buf bytes.Buffer
	if _, err := Pack(dir, &buf, WithKey(key)); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(root, "cap"+ArchiveSuffix)
	if err := os.WriteFile(archive, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := Unpack(archive, root)
	if err != nil {
		t.Fatal(err)
	}
	if holding := filesHolding(t, out, secret); len(holding) > 0 {
		t.Fatalf("unpacked files holding the literal: %v", holding)
	}
	if _, err := Open(out); !errors.Is(err, ErrNoKey) {
		t.Fatalf("the unpacked capture without its key: %v", err)
	}
	if n, err := countRecords(t, out, key); err != nil || n != 2000 {
		t.Fatalf("the unpacked capture: %d records, %v", n, err)
	}
}

// cryptFile against a plain model: appends of every size (the partial
// last block written again as it grows), writes over the middle, a hole,
// ReadAt and Read at random, Stat's plaintext size; reopened, for
// reading and for appending.
func TestCryptFileMatchesAPlainFile(t *testing.T) {
	key := testKey(t, testKeyHex)
	fs := cryptFS{FS: vfs.Default, key: key}
	name := filepath.Join(t.TempDir(), "f")
	f, err := fs.Create(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var model []byte
	fill := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		return b
	}
	check := func(f vfs.File, when string) {
		t.Helper()
		fi, err := f.Stat()
		if err != nil || fi.Size() != int64(len(model)) {
			t.Fatalf("%s: Stat size %v (%v), want %d", when, fi.Size(), err, len(model))
		}
		for range 50 {
			off := rng.IntN(len(model) + 10)
			p := make([]byte, rng.IntN(3*cryptBlock))
			n, err := f.ReadAt(p, int64(off))
			wantN := max(0, min(len(p), len(model)-off))
			if n != wantN || !bytes.Equal(p[:n], model[min(off, len(model)):min(off, len(model))+wantN]) || (n < len(p) && err != io.EOF) || (n == len(p) && err != nil) {
				t.Fatalf("%s: ReadAt(%d bytes at %d) = %d, %v; want %d bytes of the model", when, len(p), off, n, err, wantN)
			}
		}
	}
	for i := range 300 {
		switch {
		case i%50 == 49 && len(model) > 3*cryptBlock: // over the middle
			off := rng.IntN(len(model) - 2*cryptBlock)
			p := fill(rng.IntN(2 * cryptBlock))
			if _, err := f.WriteAt(p, int64(off)); err != nil {
				t.Fatal(err)
			}
			copy(model[off:], p)
		case i == 100: // a hole
			p := fill(10)
			off := len(model) + 5000
			if _, err := f.WriteAt(p, int64(off)); err != nil {
				t.Fatal(err)
			}
			model = append(append(model, make([]byte, 5000)...), p...)
		default:
			sizes := []int{1, 7, 100, cryptBlock - 1, cryptBlock, cryptBlock + 1, 3 * cryptBlock, 70000}
			p := fill(sizes[rng.IntN(len(sizes))])
			if _, err := f.Write(p); err != nil {
				t.Fatal(err)
			}
			model = append(model, p...)
		}
	}
	check(f, "written")
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, err := fs.Stat(name); err != nil || fi.Size() != int64(len(model)) {
		t.Fatalf("FS.Stat: %v, %v; want %d", fi, err, len(model))
	}
	r, err := fs.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	check(r, "reopened")
	all, err := io.ReadAll(r)
	if err != nil || !bytes.Equal(all, model) {
		t.Fatalf("Read: %d bytes, %v; want the model's %d", len(all), err, len(model))
	}
	r.Close()
	a, err := fs.OpenReadWrite(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	more := fill(cryptBlock + 123)
	if _, err := a.WriteAt(more, int64(len(model))); err != nil {
		t.Fatal(err)
	}
	model = append(model, more...)
	check(a, "appended after reopening")
	a.Close()

	// Another key is refused at open, in one line.
	_, err = cryptFS{FS: vfs.Default, key: testKey(t, strings.Repeat("77", 32))}.Open(name)
	if !errors.Is(err, ErrWrongKey) || !strings.Contains(err.Error(), "f is encrypted with another key") {
		t.Fatalf("another key: %v", err)
	}
}

// Every write of a block gets a nonce of its own: the partial last block,
// written again as it grows, never under the same nonce twice.
func TestCryptBlockRewritesTakeNewNonces(t *testing.T) {
	fs := cryptFS{FS: vfs.Default, key: testKey(t, testKeyHex)}
	name := filepath.Join(t.TempDir(), "f")
	f, err := fs.Create(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := map[string]bool{}
	for i := range 100 {
		if _, err := f.Write([]byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		nonce := hex.EncodeToString(b[cryptPage+2 : cryptPage+2+cryptNonce])
		if seen[nonce] {
			t.Fatalf("write %d of block 0 reused nonce %s", i, nonce)
		}
		seen[nonce] = true
	}
}

func TestParseKey(t *testing.T) {
	raw := bytes.Repeat([]byte{0xa5}, 32)
	for _, tc := range []struct {
		name, in string
		err      string
	}{
		{"raw", string(raw), ""},
		{"hex", testKeyHex, ""},
		{"hex and newline", testKeyHex + "\n", ""},
		{"hex and CRLF", testKeyHex + "\r\n", ""},
		{"short", testKeyHex[:62], "not 62 bytes"},
		{"long", testKeyHex + "00", "not 66 bytes"},
		{"raw short", string(raw[:31]), "not 31 bytes"},
		{"not hex", "zz" + testKeyHex[2:], "hex digits only"},
		{"zeros", strings.Repeat("0", 64), "all zeros"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := ParseKey([]byte(tc.in))
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				if s := fmt.Sprintf("%v %+v %#v %s %v %+v", k, k, k, k, *k, []*Key{k}); strings.Contains(s, "6b3a") || strings.Contains(s, "a5a5") || strings.Count(s, "redacted") != 6 {
					t.Errorf("a key prints as %q", s)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) || strings.Contains(err.Error(), "zz") || strings.Contains(err.Error(), testKeyHex[2:20]) {
				t.Errorf("ParseKey(%s) = %v; want an error saying %q that does not quote the key", tc.name, err, tc.err)
			}
		})
	}
	dir := t.TempDir()
	open := filepath.Join(dir, "open.key")
	os.WriteFile(open, []byte(testKeyHex), 0o644)
	if _, err := LoadKeyFile(open); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a key file others can read: %v", err)
	}
	private := filepath.Join(dir, "private.key")
	os.WriteFile(private, []byte(testKeyHex+"\n"), 0o600)
	k, err := LoadKeyFile(private)
	if err != nil || !reflect.DeepEqual(k, testKey(t, testKeyHex)) {
		t.Errorf("LoadKeyFile: %v", err)
	}
}
