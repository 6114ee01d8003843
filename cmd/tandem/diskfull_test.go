package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tandemdb/tandem/sandbox/sandboxtest"
	"github.com/tandemdb/tandem/store"
)

// A capture that cannot go on never reaches the clients: sysbench
// oltp_read_write, 8 threads, through `tandem proxy` whose capture is on a
// 20 MB tmpfs that fills, or whose capture directory is deleted mid-run,
// finishes with 0 errors and 0 reconnects. The capture stops (cleanly at
// the free-space floor, or failed at the full disk), the metric and the
// log say so, and what was synced opens afterwards. Before, Pebble's
// failed WAL rotation ended the proxy and every client with it.
func TestSysbenchWhileTheCaptureDiskFails(t *testing.T) {
	if testing.Short() {
		t.Skip("runs sysbench for a minute; skipped with -short")
	}
	srv := sandboxtest.Server(t, "innodb")
	_, dsn := srv.FreshDB(t)
	db := dsn[strings.LastIndex(dsn, "/")+1:]
	common := []string{"oltp_read_write", "--db-driver=mysql", "--mysql-host=127.0.0.1", "--mysql-user=root", "--mysql-db=" + db, "--tables=4", "--table-size=10000"}
	if out, err := exec.Command("sysbench", append(common, fmt.Sprintf("--mysql-port=%d", srv.Port), "prepare")...).CombinedOutput(); err != nil {
		t.Fatalf("sysbench prepare: %v\n%s", err, out)
	}

	// A 20 MB tmpfs, ballast MiB of it already used by other files, so
	// that 15 s of traffic fill it.
	tmpfs := func(ballast int) func(t *testing.T) string {
		return func(t *testing.T) string {
			if os.Geteuid() != 0 {
				t.Skip("mounting a 20 MB tmpfs needs root (CI runs as root)")
			}
			mnt := t.TempDir()
			if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=20m", "tmpfs", mnt).CombinedOutput(); err != nil {
				t.Skipf("cannot mount a tmpfs here: %v: %s", err, out)
			}
			t.Cleanup(func() { exec.Command("umount", "-l", mnt).Run() })
			if err := os.WriteFile(filepath.Join(mnt, "ballast"), make([]byte, ballast<<20), 0o644); err != nil {
				t.Fatal(err)
			}
			return mnt
		}
	}
	cases := []struct {
		name    string
		dir     func(t *testing.T) string
		flags   []string
		during  func(t *testing.T, capDir string) // while sysbench runs
		state   string                            // tandem_capture_state at the end
		reason  string                            // in its reason and in inspect
		summary bool                              // closed cleanly, with a summary
	}{
		// The default floor (256 MiB) is more than this disk: the capture
		// stops before its first record, cleanly.
		{name: "tmpfs-default-floor", dir: tmpfs(0), state: "stopped", reason: "the disk is nearly full", summary: true},
		// A floor under the disk's size: it records, then stops cleanly.
		{name: "tmpfs-floor-8MiB", dir: tmpfs(8), flags: []string{"--capture-min-free", fmt.Sprint(8 << 20)}, state: "stopped", reason: "the disk is nearly full", summary: true},
		// No floor: the disk really fills under Pebble.
		{name: "tmpfs-no-floor", dir: tmpfs(12), flags: []string{"--capture-min-free", "0"}, state: "failed", reason: "no space left on device"},
		{name: "directory-deleted", dir: func(t *testing.T) string { return t.TempDir() },
			during: func(t *testing.T, capDir string) {
				time.Sleep(4 * time.Second)
				if err := os.RemoveAll(capDir); err != nil {
					t.Error(err)
				}
			}, state: "failed", reason: "was removed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			capDir := filepath.Join(c.dir(t), "cap")
			listen, metrics := freeAddr(t), freeAddr(t)
			args := append([]string{"proxy", "--listen", listen, "--backend", srv.Addr(), "--capture", capDir, "--metrics-addr", metrics}, c.flags...)
			p := exec.Command(tandemBin, args...)
			var logs strings.Builder
			p.Stderr = &syncWriter{w: &logs}
			p.Stdout = io.Discard
			if err := p.Start(); err != nil {
				t.Fatal(err)
			}
			defer p.Process.Kill()
			waitTCP(t, listen)
			_, port, _ := net.SplitHostPort(listen)
			done := make(chan struct{})
			if c.during != nil {
				go func() { defer close(done); c.during(t, capDir) }()
			} else {
				close(done)
			}
			out, err := exec.Command("sysbench", append(common, "--mysql-port="+port, "--threads=8", "--time=15", "--report-interval=0", "run")...).CombinedOutput()
			<-done
			if err != nil {
				t.Fatalf("sysbench through the proxy failed: %v\n%s\nproxy log:\n%s", err, out, logs.String())
			}
			counts := map[string]string{}
			for _, k := range []string{"transactions", "reconnects", "ignored errors"} {
				m := regexp.MustCompile(k + `:\s+(\d+)`).FindStringSubmatch(string(out))
				if m == nil {
					t.Fatalf("sysbench output without %q:\n%s", k, out)
				}
				counts[k] = m[1]
			}
			// sysbench ignores and retries deadlocks (1213): the server's,
			// not the proxy's. Anything else would have aborted it above.
			if counts["reconnects"] != "0" || counts["transactions"] == "0" {
				t.Fatalf("sysbench: %v\n%s", counts, out)
			}

			state := scrapeCaptureState(t, metrics)
			if !strings.Contains(state, `state="`+c.state+`"`) || !strings.Contains(state, c.reason) {
				t.Errorf("tandem_capture_state: %s, want state %q with %q", state, c.state, c.reason)
			}
			if n := strings.Count(logs.String(), "capture stopped; relaying goes on") + strings.Count(logs.String(), "capture failed: the store cannot write"); n != 1 {
				t.Errorf("%d log lines say the capture stopped or failed, want 1:\n%s", n, logs.String())
			}
			p.Process.Signal(os.Interrupt)
			werr := p.Wait()
			if c.summary != (werr == nil) {
				t.Errorf("proxy exit: %v (a clean stop exits 0, a failed capture says so and exits 1)", werr)
			}
			if c.name == "directory-deleted" {
				if _, err := os.Stat(capDir); !os.IsNotExist(err) {
					t.Errorf("the deleted capture directory is back: %v", err)
				}
				return
			}
			r, err := store.Open(capDir)
			if err != nil {
				t.Fatalf("the capture does not open: %v\nproxy log:\n%s", err, logs.String())
			}
			var n uint64
			for _, err := range r.Records() {
				if err != nil {
					t.Fatalf("record %d: %v", n+1, err)
				}
				n++
			}
			_, closed := r.Summary()
			r.Close()
			if closed != c.summary {
				t.Errorf("summary present %v, want %v", closed, c.summary)
			}
			ins, stderr, code := run(t, nil, "inspect", capDir)
			if code != 0 || !strings.Contains(ins, c.reason) {
				t.Errorf("inspect (exit %d) does not say why the capture stopped (%q):\n%s%s", code, c.reason, ins, stderr)
			}
			t.Logf("%s transactions, %s ignored errors (deadlocks); %d records readable; %s", counts["transactions"], counts["ignored errors"], n, state)
		})
	}
}

// scrapeCaptureState returns the tandem_capture_state line of a proxy's
// /metrics.
func scrapeCaptureState(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "tandem_capture_state{") {
			return sc.Text()
		}
	}
	return ""
}
