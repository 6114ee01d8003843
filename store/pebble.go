package store

import (
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

func pebbleOptions(readOnly bool, log *slog.Logger) *pebble.Options {
	o := &pebble.Options{
		ReadOnly:         readOnly,
		ErrorIfNotExists: readOnly,
		Logger:           pebbleLogger{log},
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
		o.FS = readerFS{vfs.Default}
	} else {
		o.FS = noPreallocFS{vfs.Default}
	}
	o.EnsureDefaults()
	return o
}

// pebbleLogger sends Pebble's messages to slog: info at debug level, since
// a capture's user has no use for compaction chatter.
type pebbleLogger struct{ log *slog.Logger }

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

func (l pebbleLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf("pebble: "+format, args...))
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
func checkCaptureDir(dir string) error {
	fi, err := os.Stat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: %s does not exist", ErrNotCapture, dir)
	}
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: %s is a file; a capture is a directory", ErrNotCapture, dir)
	}
	ok, err := looksLikePebble(dir)
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if !ok {
		return fmt.Errorf("%w: %s holds no Pebble store (no marker.manifest.* or CURRENT file)", ErrNotCapture, dir)
	}
	return nil
}

// openErr turns Pebble's open errors into ones that say what to do.
func openErr(dir string, err error) error {
	msg := err.Error()
	switch {
	case errors.Is(err, pebble.ErrCorruption):
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

// noPreallocFS is the file system writers use. Pebble preallocates each
// WAL file at 110 % of the memtable size (70 MiB here), and up to four
// WALs live before the first flush: a capture of 1 MB took 282 MB of disk.
// Without preallocation a capture's disk use tracks what it holds; the
// cost is a file-size update with each sync.
type noPreallocFS struct{ vfs.FS }

func (f noPreallocFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	file, err := f.FS.Create(name, c)
	if err != nil {
		return nil, err
	}
	return noPrealloc{file}, nil
}

func (f noPreallocFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	file, err := f.FS.ReuseForWrite(oldname, newname, c)
	if err != nil {
		return nil, err
	}
	return noPrealloc{file}, nil
}

type noPrealloc struct{ vfs.File }

func (noPrealloc) Preallocate(offset, length int64) error { return nil }
