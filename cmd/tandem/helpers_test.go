package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tandemdb/tandem/report"
	"github.com/tandemdb/tandem/sandbox"
)

// The long tests that mostly wait (on servers, sysbench's pace, sleeps)
// and have what they touch to themselves — databases (FreshDB), servers
// (ownServer, sandbox up), addresses (freeAddr) — call t.Parallel. The
// others stay sequential, and parallel tests never run beside them: a
// t.Setenv changes the whole process. (The go-sql-driver suite, which
// takes every connection its server allows, runs on servers of its own.)

// ownServer starts an InnoDB server of the test's own, one it may stop,
// kill or restart (the shared sandboxtest servers must stay up), with
// extra server options; it is stopped and purged when the test ends. The
// returned config restarts it on the same port and data.
func ownServer(t *testing.T, options ...string) (sandbox.Server, sandbox.Config) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := sandbox.Config{Dir: filepath.Join(t.TempDir(), "sandbox"), Profiles: []string{"innodb"}, ServerOptions: options}
	srvs, err := sandbox.Up(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sandbox.Down(context.Background(), cfg.Dir, nil, true) })
	cfg.Port = srvs[0].Port
	return srvs[0], cfg
}

// ownServers starts one InnoDB server per entry of options (its server
// options), all at once, each in a sandbox of its own.
func ownServers(t *testing.T, options [][]string) []sandbox.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srvs := make([]sandbox.Server, len(options))
	errs := make([]error, len(options))
	var wg sync.WaitGroup
	for i, opts := range options {
		cfg := sandbox.Config{Dir: filepath.Join(t.TempDir(), "sandbox"), Profiles: []string{"innodb"}, ServerOptions: opts}
		t.Cleanup(func() { sandbox.Down(context.Background(), cfg.Dir, nil, true) })
		wg.Go(func() {
			s, err := sandbox.Up(ctx, cfg)
			if err == nil {
				srvs[i] = s[0]
			}
			errs[i] = err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return srvs
}

// rootSQL runs statements as root on the server at port with the mariadb CLI.
func rootSQL(t *testing.T, port int, sql string) {
	t.Helper()
	cmd := exec.Command("mariadb", "--protocol=tcp", "-h", "127.0.0.1", "-P", fmt.Sprint(port), "-u", "root", "--skip-ssl", "-e", sql)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mariadb -e %q: %v: %s", sql, err, out)
	}
}

// replayJSON runs tandem replay of capDir into a new run directory, with
// metrics off and the report as JSON, and returns the report; args add the
// targets and settings.
func replayJSON(t *testing.T, capDir string, args ...string) report.Report {
	t.Helper()
	return replayJSONIn(t, filepath.Join(t.TempDir(), "run"), capDir, args...)
}

// replayJSONIn is replayJSON into the run directory runDir.
func replayJSONIn(t *testing.T, runDir, capDir string, args ...string) report.Report {
	t.Helper()
	rep, _ := replayJSONExit(t, 0, runDir, capDir, args...)
	return rep
}

// replayJSONExit is replayJSONIn for a replay that must end with exit
// status want; it returns the report and what the replay said on stderr.
func replayJSONExit(t *testing.T, want int, runDir, capDir string, args ...string) (report.Report, string) {
	t.Helper()
	out, stderr, code := run(t, nil, append([]string{"replay", capDir, "--json", "--run", runDir, "--metrics-addr", "off"}, args...)...)
	if code != want {
		t.Fatalf("replay: exit %d, want %d: %s", code, want, stderr)
	}
	var rep report.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("replay's report: %v: %s", err, out)
	}
	return rep, stderr
}
