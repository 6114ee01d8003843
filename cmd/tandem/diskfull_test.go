package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tandemdb/tandem/sandbox/sandboxtest"
	"github.com/tandemdb/tandem/store"
)

// A capture that cannot go on never reaches the clients: clients write
// through `tandem proxy` whose capture is on a 20 MB tmpfs that fills, or
// whose capture directory is deleted, and see no error; afterwards
// sysbench runs through the same proxy with 0 errors and 0 reconnects.
// The capture stops (cleanly at the free-space floor, or failed at the
// full disk), the metric and the log say so, and what was synced opens
// afterwards. Before, Pebble's failed WAL rotation ended the proxy and
// every client with it.
//
// The disk fills by construction, whatever the machine's speed: a ballast
// leaves a known margin, and eight connections write incompressible 48 KiB
// statements until the capture's state changes (bounded: a minute).
func TestSysbenchWhileTheCaptureDiskFails(t *testing.T) {
	if testing.Short() {
		t.Skip("needs MariaDB and sysbench; skipped with -short")
	}
	t.Parallel()
	srv := sandboxtest.Server(t, "innodb")
	sdb, dsn := srv.FreshDB(t)
	db := dsn[strings.LastIndex(dsn, "/")+1:]
	if _, err := sdb.Exec("CREATE TABLE fill (id INT AUTO_INCREMENT PRIMARY KEY, v MEDIUMTEXT)"); err != nil {
		t.Fatal(err)
	}
	common := []string{"oltp_read_write", "--db-driver=mysql", "--mysql-host=127.0.0.1", "--mysql-user=root", "--mysql-db=" + db, "--tables=2", "--table-size=2000"}
	if out, err := exec.Command("sysbench", append(common, fmt.Sprintf("--mysql-port=%d", srv.Port), "prepare")...).CombinedOutput(); err != nil {
		t.Fatalf("sysbench prepare: %v\n%s", err, out)
	}

	// A 20 MB tmpfs, ballast MiB of it already used by other files.
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
		during  func(t *testing.T, capDir, metrics string) // while sysbench runs
		state   string                                     // tandem_capture_state at the end
		reason  string                                     // in its reason and in inspect
		summary bool                                       // closed cleanly, with a summary
	}{
		// The default floor (256 MiB) is more than this disk: the capture
		// stops before its first record, cleanly.
		{name: "tmpfs-default-floor", dir: tmpfs(0), state: "stopped", reason: "the disk is nearly full", summary: true},
		// A floor under the disk's size: it records, then stops cleanly.
		{name: "tmpfs-floor-8MiB", dir: tmpfs(8), flags: []string{"--capture-min-free", fmt.Sprint(8 << 20)}, state: "stopped", reason: "the disk is nearly full", summary: true},
		// No floor: the disk really fills under Pebble.
		{name: "tmpfs-no-floor", dir: tmpfs(12), flags: []string{"--capture-min-free", "0"}, state: "failed", reason: "no space left on device"},
		{name: "directory-deleted", dir: func(t *testing.T) string { return t.TempDir() },
			during: func(t *testing.T, capDir, metrics string) {
				// Once the capture records: removed while the store is
				// still being created, it would fail to start instead.
				waitFor(t, func() bool {
					st, err := captureState(metrics)
					return err == nil && strings.Contains(st, `state="recording"`)
				}, "the capture recording")
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
			if c.during != nil {
				c.during(t, capDir, metrics)
			}
			// Write until the capture's state changes: at most 20 MB each
			// time, so it does within the first few hundred statements.
			written, cerr := fillUntil(t, "root@tcp("+listen+")/"+db, func() bool {
				st, err := captureState(metrics)
				return err == nil && !strings.Contains(st, `state="recording"`)
			}, time.Minute)
			if cerr != nil {
				t.Fatalf("a client through the proxy failed after %d statements: %v\nproxy log:\n%s", written, cerr, logs.String())
			}
			// Relaying goes on: sysbench through the proxy sees nothing.
			out, err := exec.Command("sysbench", append(common, "--mysql-port="+port, "--threads=4", "--time=2", "--report-interval=0", "run")...).CombinedOutput()
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
			t.Logf("%d statements filled it; then sysbench %s transactions, %s ignored errors (deadlocks); %d records readable; %s",
				written, counts["transactions"], counts["ignored errors"], n, state)
		})
	}
}

// fillUntil writes incompressible 48 KiB rows from 8 connections to dsn
// until done reports true (checked after every statement) or limit
// passes; it returns how many statements it wrote and the first error a
// client got.
func fillUntil(t *testing.T, dsn string, done func() bool, limit time.Duration) (int64, error) {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	var n atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			raw := make([]byte, 36<<10)
			for ctx.Err() == nil {
				rand.Read(raw)
				if _, err := db.ExecContext(ctx, "INSERT INTO fill (v) VALUES ('"+base64.StdEncoding.EncodeToString(raw)+"')"); err != nil {
					if ctx.Err() == nil {
						once.Do(func() { first = err })
					}
					cancel()
					return
				}
				n.Add(1)
				if done() {
					cancel()
				}
			}
		})
	}
	wg.Wait()
	if first == nil && !done() {
		first = fmt.Errorf("the capture was still recording after %v and %d statements", limit, n.Load())
	}
	return n.Load(), first
}

// waitFor polls cond every 20 ms for up to 10 s.
func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("waited 10 s for %s", what)
}

// scrapeCaptureState returns the tandem_capture_state line of a proxy's
// /metrics.
func scrapeCaptureState(t *testing.T, addr string) string {
	t.Helper()
	st, err := captureState(addr)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func captureState(addr string) (string, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "tandem_capture_state{") {
			return sc.Text(), nil
		}
	}
	return "", sc.Err()
}
