package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/sstable/block"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// blockSize is larger than Pebble's 4 KiB default: records are small and
// alike, and zstd finds more to share in a larger block.
const blockSize = 32 << 10

// pebbleOptions are the options of a store; key, if not nil, encrypts it
// (cryptFS, under the readers' and writers' own layers).
func pebbleOptions(readOnly bool, log *slog.Logger, key *Key) *pebble.Options {
	o := &pebble.Options{
		ReadOnly:         readOnly,
		ErrorIfNotExists: readOnly,
		Logger:           pebbleLogger{log: log},
		// Captures are written once, sequentially: large memtables make few,
		// large L0 files, and L0 compactions are rare.
		MemTableSize:                64 << 20,
		MemTableStopWritesThreshold: 4,
		L0CompactionThreshold:       8,
		L0StopWritesThreshold:       64,
	}
	for i := range o.Levels {
		o.Levels[i].BlockSize = blockSize
		o.Levels[i].Compression = func() *block.CompressionProfile { return block.ZstdCompression }
	}
	if readOnly {
		o.FS = readerFS{encryptFS(vfs.Default, key)}
		// A damaged file is reported to whoever reads it, as an error
		// (damaged); Pebble's default calls Fatalf, which for a reader
		// could only panic.
		o.EventListener = &pebble.EventListener{DataCorruption: func(info pebble.DataCorruptionInfo) {
			if log != nil {
				log.Debug("damaged file", "component", "pebble", "path", info.Path, "err", info.Details)
			}
		}}
	} else {
		o.FS = writerFS{FS: encryptFS(vfs.Default, key)}
	}
	o.EnsureDefaults()
	return o
}

// pebbleLogger sends Pebble's messages to slog: info at debug level, since
// a capture's user has no use for compaction chatter. fatal, if set,
// receives Pebble's Fatalf (see Fatalf).
type pebbleLogger struct {
	log   *slog.Logger
	fatal func(msg string)
}

func (l pebbleLogger) Infof(format string, args ...any) {
	if l.log != nil {
		l.log.Debug(fmt.Sprintf(format, args...), "component", "pebble")
	}
}

func (l pebbleLogger) Errorf(format string, args ...any) {
	if l.log != nil {
		l.log.Error(fmt.Sprintf(format, args...), "component", "pebble")
	}
}

// Fatalf is how Pebble reports what it cannot go on from: for a writer, a
// WAL write, sync or rotation that failed (a full disk, a directory
// removed or made read-only), often in one of its own goroutines while it
// holds its locks. Pebble does not expect Fatalf to return. A panic there
// cannot be recovered (it is not our goroutine, and unwinding releases a
// mutex Pebble has already released: a fatal runtime error), and either
// would end the process and every client the proxy relays. So a writer's
// Fatalf hands the message to the writer, which stops recording, and
// parks the calling goroutine for good: the store is abandoned, not
// closed, and the process goes on. Readers (no fatal) panic, on their own
// goroutine as far as Pebble allows.
func (l pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if !strings.HasPrefix(msg, "pebble") {
		msg = "pebble: " + msg
	}
	if l.fatal == nil {
		panic(msg)
	}
	l.fatal(msg)
	select {}
}

// damaged turns an error of Pebble's reading dir into one that says
// which file is damaged and what it held: ErrCorrupt for a corruption,
// err unchanged otherwise.
func damaged(dir string, err error) error {
	if err == nil || !pebble.IsCorruptionError(err) {
		return err
	}
	info := pebble.ExtractDataCorruptionInfo(err)
	if info == nil {
		return fmt.Errorf("%w: %s: %v", ErrCorrupt, dir, err)
	}
	held := heldRecords(info.Bounds.Start, info.Bounds.End.Key)
	detail := "damaged"
	if info.Details != nil {
		detail = info.Details.Error()
	}
	return fmt.Errorf("%w: %s: %s is damaged (%s); it holds %s, which cannot be read. Restore the directory from a good copy (a packed capture: unpack it again)",
		ErrCorrupt, dir, filepath.Base(info.Path), detail, held)
}

// damagedRun is damaged for a run directory, whose keys are no records.
func damagedRun(dir string, err error) error {
	if err == nil || !pebble.IsCorruptionError(err) {
		return err
	}
	file, detail := "a file", err.Error()
	if info := pebble.ExtractDataCorruptionInfo(err); info != nil {
		file = filepath.Base(info.Path)
		if info.Details != nil {
			detail = info.Details.Error()
		}
	}
	return fmt.Errorf("%w: run directory %s: %s is damaged (%s): what the run stored there cannot be read. Restore the directory from a good copy, or replay again",
		ErrCorrupt, dir, file, detail)
}

// heldRecords says which records a file whose keys span [lo, hi] holds.
func heldRecords(lo, hi []byte) string {
	if len(lo) == 0 || len(hi) == 0 || lo[0] > prefixRecord || hi[0] < prefixRecord {
		return "no records (the capture's header or index)"
	}
	from, to := "1", "the last"
	if len(lo) == 9 && lo[0] == prefixRecord {
		from = fmt.Sprint(binary.BigEndian.Uint64(lo[1:]))
	}
	if len(hi) == 9 && hi[0] == prefixRecord {
		to = fmt.Sprint(binary.BigEndian.Uint64(hi[1:]))
	}
	return "records " + from + " to " + to
}

// looksLikePebble reports whether dir holds a Pebble store, without
// touching it (Pebble's own open creates a LOCK file, even read-only).
func looksLikePebble(dir string) (bool, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false, err
	}
	for _, e := range entries {
		n := e.Name()
		if n == "CURRENT" || strings.HasPrefix(n, "marker.manifest.") {
			return true, nil
		}
	}
	return false, nil
}

// checkCaptureDir says why dir cannot be opened as a capture, or nil.
func checkCaptureDir(dir string) error { return checkStoreDir(dir, "capture", ErrNotCapture) }

// checkStoreDir says why dir cannot be opened as a store of the kind
// named (a capture, a run), wrapping notKind, or nil.
func checkStoreDir(dir, kind string, notKind error) error {
	fi, err := os.Stat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: %s does not exist", notKind, dir)
	}
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: %s is a file; a %s is a directory", notKind, dir, kind)
	}
	ok, err := looksLikePebble(dir)
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if !ok {
		return fmt.Errorf("%w: %s holds no Pebble store (no marker.manifest.* or CURRENT file)", notKind, dir)
	}
	return nil
}

// openErr turns Pebble's open errors into ones that say what to do.
func openErr(dir string, err error) error {
	msg := err.Error()
	switch {
	case pebble.IsCorruptionError(err):
		return fmt.Errorf("%w: %s: %v", ErrCorrupt, dir, err)
	case errors.Is(err, syscall.EAGAIN) || strings.Contains(msg, "lock") && strings.Contains(msg, "held"):
		return fmt.Errorf("store: %s is open for writing by another process (a running proxy or synth?); try again when it has finished: %v", dir, err)
	}
	return fmt.Errorf("store: open %s: %w", dir, err)
}

// dirSize is the disk space the regular files in dir take: allocated
// blocks, not apparent sizes (a preallocated or sparse file differs).
func dirSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				n += st.Blocks * 512
			} else {
				n += fi.Size()
			}
		}
		return nil
	})
	return n, err
}

// writerFS is the file system writers use.
//
// It does not preallocate. Pebble preallocates each WAL file at 110 % of
// the memtable size (70 MiB here), and up to four WALs live before the
// first flush: a capture of 1 MB took 282 MB of disk. Without
// preallocation a capture's disk use tracks what it holds; the cost is a
// file-size update with each sync.
//
// And it stops a failing store before Pebble sees the failure. Pebble
// answers some write errors with a bare panic while it holds no lock it
// can release (a WAL rotation whose new file cannot be created or whose
// old one cannot be synced: "unlock of unlocked mutex", a fatal runtime
// error no recover catches), which would end the process and every client
// the proxy relays. So with fail set, the first error of a write, sync,
// file creation or rename goes to fail, and the goroutine that met it
// (ours or Pebble's) is parked for good; the writer abandons the store
// (Writer.fail). Without fail (run directories), errors pass through.
type writerFS struct {
	vfs.FS
	fail func(msg string)
}

// check passes err on, or reports it and parks the calling goroutine.
func (f writerFS) check(op, name string, err error) error {
	if err == nil || f.fail == nil {
		return err
	}
	if pe, ok := err.(*os.PathError); ok {
		err = pe.Err
	}
	f.fail(fmt.Sprintf("%s %s: %v", op, name, err))
	select {}
}

func (f writerFS) file(name string, file vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return writerFile{file, f, name}, nil
}

func (f writerFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	file, err := f.FS.Create(name, c)
	return f.file(name, file, f.check("create", name, err))
}

func (f writerFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	file, err := f.FS.ReuseForWrite(oldname, newname, c)
	return f.file(newname, file, f.check("create", newname, err))
}

func (f writerFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	file, err := f.FS.OpenReadWrite(name, c, opts...)
	return f.file(name, file, f.check("open", name, err))
}

func (f writerFS) OpenDir(name string) (vfs.File, error) {
	file, err := f.FS.OpenDir(name)
	return f.file(name, file, f.check("open directory", name, err))
}

func (f writerFS) Link(oldname, newname string) error {
	return f.check("link", newname, f.FS.Link(oldname, newname))
}

func (f writerFS) Rename(oldname, newname string) error {
	return f.check("rename", newname, f.FS.Rename(oldname, newname))
}

type writerFile struct {
	vfs.File
	fs   writerFS
	name string
}

func (writerFile) Preallocate(offset, length int64) error { return nil }

func (f writerFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	return n, f.fs.check("write", f.name, err)
}

func (f writerFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	return n, f.fs.check("write", f.name, err)
}

func (f writerFile) Sync() error { return f.fs.check("sync", f.name, f.File.Sync()) }

func (f writerFile) SyncData() error { return f.fs.check("sync", f.name, f.File.SyncData()) }

func (f writerFile) SyncTo(length int64) (bool, error) {
	full, err := f.File.SyncTo(length)
	return full, f.fs.check("sync", f.name, err)
}
