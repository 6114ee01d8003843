package store

import (
	"crypto/rand"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A free-space floor lower than what the capture holds only in its log:
// the stop leaves room for Close to write that into tables, so the capture
// closes cleanly with every record it accepted, instead of filling the
// disk as it closes. On an 18 MiB disk with a 6 MiB floor, the old rule
// (stop under the floor) stopped with about 12 MiB in the log, and
// Close's flush of it failed for want of room: no space left on device.
func TestFloorLeavesRoomToClose(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a 20 MiB tmpfs needs root (CI runs as root)")
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=20m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", mnt).Run() })
	if err := os.WriteFile(filepath.Join(mnt, "ballast"), make([]byte, 2<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(mnt, "cap")
	w, err := Create(dir, WriterOptions{MinFreeBytes: 6 << 20, FlushInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// Records that do not compress (the tables take what the log does), at
	// 32 MiB/s: a proxy's pace, not a loop's (the stop takes effect at a
	// commit, every 10 ms here).
	raw := make([]byte, 32<<10)
	var appended int
	var appendErr error
	for appended < 2000 {
		rand.Read(raw)
		if _, appendErr = w.Append(&Record{Kind: KindQuery, Session: 1, Start: time.Now(), SQL: string(raw)}); appendErr != nil {
			break
		}
		appended++
		time.Sleep(time.Millisecond)
	}
	if !errors.Is(appendErr, ErrStopped) {
		t.Fatalf("after %d records: Append: %v, want the capture stopped", appended, appendErr)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("Close: %v; want a clean close after the stop", err)
	}
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if sum, ok := r.Summary(); !ok || !strings.Contains(sum.Stopped, "the disk is nearly full") {
		t.Errorf("summary %+v (found %v); want one that says the disk stopped the capture", sum, ok)
	}
	n := 0
	for _, err := range r.Records() {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != appended {
		t.Errorf("%d records readable, %d accepted", n, appended)
	}
	t.Logf("%d records of 32 KiB accepted and readable", appended)
}
