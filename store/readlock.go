package store

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"
)

// readerFS is the file system readers open stores with. Pebble takes an
// exclusive lock on a store's LOCK file even to read it, so two replays of
// one capture (the shards of a run on one machine, two targets' reports)
// could not open it at once. A reader takes a shared lock instead: an
// open-file-description lock (Linux F_OFD_SETLK), which conflicts with a
// writer's exclusive lock, in this process or another, and with no other
// reader's; closing it releases only its own. A LOCK file that does not
// exist (a capture copied without it, on a read-only volume) is not
// created: nothing can be writing there.
type readerFS struct{ vfs.FS }

func (r readerFS) Lock(name string) (io.Closer, error) {
	f, err := os.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return io.NopCloser(nil), nil
	}
	if err != nil {
		return nil, err
	}
	spec := unix.Flock_t{Type: unix.F_RDLCK, Whence: io.SeekStart}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &spec); err != nil {
		f.Close()
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EACCES) {
			return nil, fmt.Errorf("lock %s held: %w", name, unix.EAGAIN)
		}
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	return f, nil
}
