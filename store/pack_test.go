package store

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func packRecords(n int) []Record {
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = Record{Session: uint64(i%5 + 1), Start: time.Unix(0, testBase+int64(i)*1000), Kind: KindQuery,
			SQL: fmt.Sprintf("UPDATE sbtest1 SET k = k + 1 WHERE id = %d /* %x */", i, i*7919)}
	}
	return recs
}

// Pack refuses a damaged capture; the archive carries each file's SHA-256
// and unpack checks them, so a damaged archive fails to unpack, naming
// what is wrong, and leaves nothing behind. (Before: a corrupt capture
// packed, and an archive with flipped bytes unpacked without a word.)
func TestPackAndUnpackVerify(t *testing.T) {
	root := t.TempDir()
	good := filepath.Join(root, "good")
	writeCapture(t, good, WriterOptions{NoSync: true}, packRecords(5000))

	var buf bytes.Buffer
	files, err := Pack(good, &buf)
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(root, "good"+ArchiveSuffix)
	if err := os.WriteFile(archive, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	unpackTo := filepath.Join(root, "unpack")
	os.Mkdir(unpackTo, 0o755)
	dir, err := Unpack(archive, unpackTo)
	if err != nil {
		t.Fatal(err)
	}
	if err := verifyCapture(dir, nil); err != nil {
		t.Fatalf("unpacked capture: %v", err)
	}
	if sums, err := os.ReadDir(dir); err != nil || len(sums) < files {
		t.Fatalf("unpacked %d entries, packed %d files (%v)", len(sums), files, err)
	}
	// A directory to unpack into that is not there yet is made (it was
	// an error: stat DIR: no such file or directory).
	fresh := filepath.Join(root, "new", "unpack")
	if dir, err := Unpack(archive, fresh); err != nil || filepath.Dir(dir) != fresh {
		t.Fatalf("unpack into a missing directory: %q, %v", dir, err)
	} else if err := verifyCapture(dir, nil); err != nil {
		t.Fatalf("capture unpacked into a missing directory: %v", err)
	}

	// An archive that is not there is said to be missing (it was "stat
	// …: no such file or directory").
	if _, err := Unpack(filepath.Join(root, "nope"+ArchiveSuffix), ""); !errors.Is(err, ErrNotCapture) || !strings.Contains(err.Error(), "nope"+ArchiveSuffix+" does not exist") {
		t.Fatalf("unpack of a missing archive: %v", err)
	}

	// A damaged capture is not packed.
	bad := filepath.Join(root, "bad")
	writeCapture(t, bad, WriterOptions{NoSync: true}, packRecords(5000))
	ssts, _ := filepath.Glob(filepath.Join(bad, "*.sst"))
	flip(t, ssts[0])
	if _, err := Pack(bad, &bytes.Buffer{}); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "cannot be packed") {
		t.Fatalf("pack of a damaged capture: %v", err)
	}

	// A damaged archive: three bytes flipped in the compressed stream,
	// which zstd decodes without a word (here); the checksums catch it,
	// and the failed unpack leaves nothing under the unpack directory.
	// A cut-short archive and one that is no archive at all say so (they
	// said zstd's "unexpected EOF" and "magic number mismatch").
	for name, c := range map[string]struct {
		damage func([]byte) []byte
		want   string
	}{
		"flipped": {func(b []byte) []byte {
			c := bytes.Clone(b)
			for _, at := range []int{len(c) / 4, len(c) / 2, 3 * len(c) / 4} {
				c[at] ^= 0x5a
			}
			return c
		}, "does not match its checksum (the archive was damaged in transit or on disk: copy it again)"},
		"truncated": {func(b []byte) []byte { return bytes.Clone(b[:len(b)/2]) }, "the archive ends early (cut short in transit or on disk: copy it again)"},
		"garbage":   {func([]byte) []byte { return bytes.Repeat([]byte("not an archive "), 100) }, "is not an archive tandem pack writes (a zstd-compressed tar)"},
	} {
		t.Run(name, func(t *testing.T) {
			a := filepath.Join(root, name+ArchiveSuffix)
			if err := os.WriteFile(a, c.damage(buf.Bytes()), 0o644); err != nil {
				t.Fatal(err)
			}
			to := filepath.Join(root, "unpack-"+name)
			os.Mkdir(to, 0o755)
			if _, err := Unpack(a, to); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("unpack: %v, want %q", err, c.want)
			}
			if left, _ := os.ReadDir(to); len(left) != 0 {
				t.Errorf("a failed unpack left %d entries in %s", len(left), to)
			}
		})
	}
}

// A flipped byte in a run directory is an error that names the file and
// says it is the run's, not a capture's records.
func TestFlippedByteInARunIsAnError(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	w, err := CreateRun(dir, RunMeta{RunID: "r", Targets: []RunTarget{{Name: "a"}}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5000 {
		if err := w.PutInterval(0, 0, i, &Interval{Start: time.Duration(i) * time.Second, Length: time.Second, Transactions: uint64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	ssts, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	if len(ssts) == 0 {
		t.Fatal("no table file")
	}
	flip(t, ssts[0])
	r, err := OpenRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	_, err = r.Intervals(0, 0)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "run directory "+dir+": "+filepath.Base(ssts[0])+" is damaged") || strings.Contains(err.Error(), "records") {
		t.Fatalf("reading a damaged run: %v", err)
	}
}
