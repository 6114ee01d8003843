package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tandemdb/tandem/sandbox/sandboxtest"
)

// A replay whose run directory's disk fills ends with an error that says
// so and what to do, never a panic: a run is refused when its disk is
// already under the free-space floor (64 MiB), and one that brings it
// under the floor stops recording there, with the outcomes written so far
// kept. Before, Pebble's failed write panicked the process ("no space
// left on device", exit 2) and the replay's results were lost.
func TestReplayStopsAtTheRunDirectorysFreeSpaceFloor(t *testing.T) {
	if testing.Short() {
		t.Skip("needs MariaDB; skipped with -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root (CI runs as root)")
	}
	t.Parallel()
	srv := sandboxtest.Server(t, "innodb")
	_, dsn := srv.FreshDB(t)
	target := "a=" + dsn
	if _, stderr, code := run(t, nil, "prepare", "--tables", "1", "--table-size", "1000", "--target", target); code != 0 {
		t.Fatalf("prepare: %s", stderr)
	}
	capDir := filepath.Join(t.TempDir(), "cap")
	if _, stderr, code := run(t, nil, "synth", "oltp_point_select", "--out", capDir, "--tables", "1", "--table-size", "1000",
		"--threads", "4", "--events", "100000"); code != 0 {
		t.Fatalf("synth: %s", stderr)
	}
	// tmpfs of size MiB, ballast MiB of it already used.
	tmpfs := func(size, ballast int) string {
		mnt := t.TempDir()
		if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+strconv.Itoa(size)+"m", "tmpfs", mnt).CombinedOutput(); err != nil {
			t.Skipf("cannot mount a tmpfs here: %v: %s", err, out)
		}
		t.Cleanup(func() { exec.Command("umount", "-l", mnt).Run() })
		if err := os.WriteFile(filepath.Join(mnt, "ballast"), make([]byte, ballast<<20), 0o644); err != nil {
			t.Fatal(err)
		}
		return mnt
	}
	for _, c := range []struct {
		name          string
		size, ballast int
		started       bool // the run began (and stopped at the floor)
	}{
		{"under the floor at the start", 8, 6, false},
		{"crosses the floor", 66, 1, true},
	} {
		runDir := filepath.Join(tmpfs(c.size, c.ballast), "run")
		_, stderr, code := run(t, nil, "replay", capDir, "--run", runDir, "--speed", "0", "--metrics-addr", "off", "--target", target)
		if code != 1 || strings.Contains(stderr, "panic") || !strings.Contains(stderr, "the run directory's disk is nearly full") ||
			!strings.Contains(stderr, "under the floor of 67108864): free space on that disk, or put the run on another one, and run it again") {
			t.Errorf("%s: exit %d; want 1, the floor's error, no panic:\n%s", c.name, code, stderr)
		}
		if _, err := os.Stat(runDir); (err == nil) != c.started {
			t.Errorf("%s: run directory made: %v; want %v", c.name, err == nil, c.started)
		}
	}
}
