package main

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tandemdb/tandem/sandbox/sandboxtest"
)

// A replay killed with SIGKILL stored no results; its run directory is
// reported with what it did store — the per-second intervals — and says
// so. (Before: "holds no replay yet (it was created but nothing ran)",
// with 745 KB of outcomes in it.)
// longReplay gives a target loaded with sysbench's rows and a synthetic
// capture of 20 s at 200 events a second for it: a replay that is still
// under way when a test stops it.
func longReplay(t *testing.T) (target, capDir string) {
	t.Helper()
	srv := sandboxtest.Server(t, "innodb")
	_, dsn := srv.FreshDB(t)
	target = "a=" + dsn
	if _, stderr, code := run(t, nil, "prepare", "--tables", "1", "--table-size", "1000", "--target", target); code != 0 {
		t.Fatalf("prepare: %s", stderr)
	}
	capDir = filepath.Join(t.TempDir(), "cap")
	if _, stderr, code := run(t, nil, "synth", "oltp_point_select", "--out", capDir, "--tables", "1", "--table-size", "1000",
		"--threads", "2", "--duration", "20s", "--rate", "200"); code != 0 {
		t.Fatalf("synth: %s", stderr)
	}
	return target, capDir
}

func TestKilledReplayIsReportedFromWhatItStored(t *testing.T) {
	t.Parallel()
	target, capDir := longReplay(t)
	runDir := filepath.Join(t.TempDir(), "run")
	p := exec.Command(tandemBin, "replay", capDir, "--run", runDir, "--metrics-addr", "off", "--report-interval", "1s", "--target", target)
	stderrPipe, err := p.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	// Killed once it has printed (and so stored) three intervals.
	lines := 0
	sc := bufio.NewScanner(stderrPipe)
	deadline := time.AfterFunc(2*time.Minute, func() { p.Process.Kill() })
	defer deadline.Stop()
	for lines < 3 && sc.Scan() {
		if strings.Contains(sc.Text(), "tps:") {
			lines++
		}
	}
	p.Process.Signal(syscall.SIGKILL)
	go io.Copy(io.Discard, stderrPipe)
	p.Wait()
	if lines < 3 {
		t.Fatalf("the replay printed %d interval lines before it ended", lines)
	}
	out, stderr, code := run(t, nil, "report", runDir)
	if code != 0 {
		t.Fatalf("report of a killed run: exit %d: %s", code, stderr)
	}
	if !strings.HasPrefix(out, "DID NOT FINISH") || !strings.Contains(out, "what its per-second intervals hold") {
		t.Errorf("the report does not say the run was killed:\n%s", out)
	}
	m := regexp.MustCompile(`transactions +(\d+) `).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no transactions row:\n%s", out)
	}
	if n, _ := strconv.Atoi(m[1]); n < 200 {
		t.Errorf("%d transactions reported for 3 intervals at 200/s", n)
	}
}

// An interrupted replay (Ctrl-C) writes its report, which begins by
// saying so, and exits with 130: it exited 0, as a complete run does.
func TestInterruptedReplayExits130(t *testing.T) {
	t.Parallel()
	target, capDir := longReplay(t)
	p := exec.Command(tandemBin, "replay", capDir, "--run", filepath.Join(t.TempDir(), "run"), "--metrics-addr", "off", "--report-interval", "1s", "--target", target)
	var stdout strings.Builder
	p.Stdout = &stdout
	stderrPipe, err := p.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.AfterFunc(2*time.Minute, func() { p.Process.Kill() })
	defer deadline.Stop()
	sc := bufio.NewScanner(stderrPipe)
	for sc.Scan() { // until the first interval line: the replay is under way
		if strings.Contains(sc.Text(), "tps:") {
			break
		}
	}
	p.Process.Signal(os.Interrupt)
	var rest strings.Builder
	io.Copy(&rest, stderrPipe)
	err = p.Wait()
	if code := p.ProcessState.ExitCode(); code != 130 || !strings.Contains(rest.String(), "tandem: interrupted: the report above covers what ran until then") {
		t.Fatalf("exit %d (%v), stderr after the signal:\n%s", code, err, rest.String())
	}
	if !strings.HasPrefix(stdout.String(), "INTERRUPTED after ") {
		t.Errorf("the report does not begin by saying it was interrupted:\n%s", stdout.String())
	}
}
