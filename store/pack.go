package store

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/klauspost/compress/zstd"
)

// ArchiveSuffix is the file name ending of a packed capture.
const ArchiveSuffix = ".tar.zst"

// unpackedMarker marks a directory Unpack finished.
const unpackedMarker = ".tandem-unpacked"

// ErrNotClosed: Pack was given a capture its writer did not close (Seal
// closes one).
var ErrNotClosed = errors.New("store: capture not closed")

// manifestName is the archive's last entry: the SHA-256 of every file
// before it, which Unpack checks.
const manifestName = "SHA256SUMS"

// Pack writes the closed capture in dir to w as a zstd-compressed tar
// archive (every file but Pebble's LOCK), holding a reader's lock so that
// no writer can start meanwhile. A capture still being written is refused.
// An encrypted capture needs its key (WithKey), to verify it; the archive
// holds its files as they are, encrypted.
func Pack(dir string, w io.Writer, opts ...Option) (files int, err error) {
	r, err := Open(dir, opts...)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	sum, closed := r.Summary()
	if !closed {
		return 0, fmt.Errorf("%w: %s was not closed cleanly (its writer is still running, or was killed); 'tandem pack --crashed' seals one whose writer was killed, after reading every record, then packs it ('tandem inspect' says what it holds, and what is lost)", ErrNotClosed, dir)
	}
	// What is shipped must be whole: every record read (each block's
	// checksum checked), none missing.
	var gaps SeqGaps
	for rec, err := range r.Records() {
		if err != nil {
			return 0, fmt.Errorf("store: %s cannot be packed: %w", dir, err)
		}
		gaps.Note(rec.Seq)
	}
	// A sealed capture ships with the records it lacked when sealed, which
	// its summary lists (replay then refuses it unless --skip-damaged).
	if lost := gaps.String(); lost != "" && lost != sum.Lost {
		return 0, fmt.Errorf("%w: %s cannot be packed: it lacks records (%s)", ErrCorrupt, dir, lost)
	}
	zw, err := zstd.NewWriter(w, zstd.WithEncoderLevel(zstd.SpeedDefault))
	if err != nil {
		return 0, err
	}
	tw := tar.NewWriter(zw)
	var sums strings.Builder // the manifest: "sha256  name" per file, last in the archive
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == "LOCK" {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		hdr := &tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, Size: info.Size(), ModTime: info.ModTime()}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		h := sha256.New()
		if _, err := io.CopyN(io.MultiWriter(tw, h), f, info.Size()); err != nil {
			return err
		}
		fmt.Fprintf(&sums, "%x  %s\n", h.Sum(nil), hdr.Name)
		files++
		return nil
	})
	if err == nil {
		m := sums.String()
		if err = tw.WriteHeader(&tar.Header{Name: manifestName, Mode: 0o644, Size: int64(len(m))}); err == nil {
			_, err = io.WriteString(tw, m)
		}
	}
	if err == nil {
		err = tw.Close()
	}
	if cerr := zw.Close(); err == nil {
		err = cerr
	}
	return files, err
}

// Unpack makes a packed capture (Pack) readable: it extracts archive into
// a directory under tmp (os.TempDir() if empty) named after the archive's
// path, size and time, once; later calls reuse it. It returns the
// capture's directory; tmp is made if missing. The files are extracted
// as they were packed (encrypted, for an encrypted capture); an archive
// without checksums is verified by reading it, which needs the key of an
// encrypted one (WithKey).
func Unpack(archive, tmp string, opts ...Option) (string, error) {
	fi, err := os.Stat(archive)
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("%w: %s does not exist", ErrNotCapture, archive)
	}
	if err != nil {
		return "", fmt.Errorf("store: %w", err)
	}
	abs, _ := filepath.Abs(archive)
	h := sha256.Sum256([]byte(fmt.Sprintf("%s\x00%d\x00%d", abs, fi.Size(), fi.ModTime().UnixNano())))
	if tmp == "" {
		tmp = os.TempDir()
	}
	// A directory named for unpacking is made if it is not there yet
	// (before: "stat DIR: no such file or directory").
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return "", fmt.Errorf("store: unpack %s: the directory to unpack into: %w", archive, err)
	}
	dir := filepath.Join(tmp, "tandem-capture-"+hex.EncodeToString(h[:6]))
	if _, err := os.Stat(filepath.Join(dir, unpackedMarker)); err == nil {
		return dir, nil
	}
	// Each process unpacks apart (shards on one machine start together)
	// and the first to finish wins.
	part, err := os.MkdirTemp(tmp, filepath.Base(dir)+".part-")
	if err != nil {
		return "", fmt.Errorf("store: unpack %s: %w", archive, err)
	}
	defer os.RemoveAll(part)
	if err := extract(archive, part, opts); err != nil {
		os.RemoveAll(part)
		return "", fmt.Errorf("store: unpack %s: %w", archive, err)
	}
	if err := os.WriteFile(filepath.Join(part, unpackedMarker), []byte(abs+"\n"), 0o644); err != nil {
		return "", err
	}
	if err := os.Rename(part, dir); err != nil {
		if _, serr := os.Stat(filepath.Join(dir, unpackedMarker)); serr == nil {
			return dir, nil // another process finished first
		}
		return "", fmt.Errorf("store: unpack %s: %w", archive, err)
	}
	return dir, nil
}

func extract(archive, dir string, opts []Option) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := zstd.NewReader(f)
	if err != nil {
		return fmt.Errorf("%w: not a zstd archive: %v", ErrNotCapture, err)
	}
	defer zr.Close()
	tr := tar.NewReader(zr)
	n := 0
	got := map[string]string{}
	manifest := ""
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return archiveErr(err, n == 0 && manifest == "")
		}
		name := filepath.FromSlash(hdr.Name)
		if hdr.Typeflag != tar.TypeReg || !filepath.IsLocal(name) || strings.Contains(name, string(filepath.Separator)) {
			return fmt.Errorf("%w: archive entry %q is not a capture file", ErrCorrupt, hdr.Name)
		}
		if hdr.Name == manifestName {
			b, err := io.ReadAll(io.LimitReader(tr, 1<<20))
			if err != nil {
				return fmt.Errorf("%w: %v", ErrCorrupt, err)
			}
			manifest = string(b)
			continue
		}
		out, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		h := sha256.New()
		_, err = io.Copy(io.MultiWriter(out, h), io.LimitReader(tr, hdr.Size))
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("%s: %w", hdr.Name, archiveErr(err, false))
		}
		got[hdr.Name] = hex.EncodeToString(h.Sum(nil))
		n++
	}
	if n == 0 {
		return fmt.Errorf("%w: the archive holds no files", ErrNotCapture)
	}
	if manifest == "" {
		// Packed by a tandem before archives carried checksums: read it
		// all, which checks every block's own checksum.
		return verifyCapture(dir, opts)
	}
	want := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(manifest), "\n") {
		sum, name, ok := strings.Cut(l, "  ")
		if !ok {
			return fmt.Errorf("%w: the archive's %s is unreadable", ErrCorrupt, manifestName)
		}
		want[name] = sum
	}
	for name, sum := range want {
		if got[name] != sum {
			if _, ok := got[name]; !ok {
				return fmt.Errorf("%w: the archive lacks %s, which its %s lists", ErrCorrupt, name, manifestName)
			}
			return fmt.Errorf("%w: %s in the archive does not match its checksum (the archive was damaged in transit or on disk: copy it again)", ErrCorrupt, name)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			return fmt.Errorf("%w: the archive holds %s, which its %s does not list", ErrCorrupt, name, manifestName)
		}
	}
	return nil
}

// archiveErr says what a read error of an archive means: one cut short
// (the stream ends inside it), or — at its very start — not an archive
// tandem pack writes (zstd's "magic number mismatch", tar's header
// errors); else damage.
func archiveErr(err error, first bool) error {
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%w: the archive ends early (cut short in transit or on disk: copy it again): %v", ErrCorrupt, err)
	case first:
		return fmt.Errorf("%w: it is not an archive tandem pack writes (a zstd-compressed tar): %v", ErrNotCapture, err)
	}
	return fmt.Errorf("%w: %v", ErrCorrupt, err)
}

// verifyCapture reads every record of the capture in dir.
func verifyCapture(dir string, opts []Option) error {
	r, err := Open(dir, opts...)
	if err != nil {
		return err
	}
	defer r.Close()
	for _, err := range r.Records() {
		if err != nil {
			return err
		}
	}
	return nil
}
