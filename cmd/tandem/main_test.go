package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var tandemBin string

// TestMain builds the real binary once; the tests run it as a user would.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "tandem-cli-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	tandemBin = filepath.Join(dir, "tandem")
	if out, err := exec.Command("go", "build", "-o", tandemBin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build tandem: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// run runs tandem and returns stdout, stderr and the exit code.
func run(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(tandemBin, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func TestCLIErrors(t *testing.T) {
	empty := t.TempDir()
	cases := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"unknown flag", nil, []string{"sandbox", "up", "--bogus"}, "unknown flag: --bogus; see 'tandem sandbox up --help'"},
		{"unknown profile", nil, []string{"sandbox", "up", "--dir", t.TempDir(), "tokudb"}, `unknown profile "tokudb" (known profiles: innodb, rocksdb)`},
		{"no server", []string{"PATH=" + empty}, []string{"sandbox", "up", "--dir", t.TempDir()}, "install the Debian packages mariadb-server and mariadb-plugin-rocksdb"},
		{"status takes no args", nil, []string{"sandbox", "status", "extra"}, `unexpected argument "extra"`},
		{"env without servers", nil, []string{"sandbox", "env", "--dir", t.TempDir()}, "start them with 'tandem sandbox up'"},
		{"unknown command", nil, []string{"frobnicate"}, `unknown command "frobnicate"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stdout, stderr, code := run(t, c.env, c.args...)
			if code != 1 {
				t.Errorf("exit code %d, want 1 (stdout %q)", code, stdout)
			}
			if !strings.HasPrefix(stderr, "tandem: ") || !strings.Contains(stderr, c.want) {
				t.Errorf("stderr = %q, want 'tandem: …%s…'", stderr, c.want)
			}
		})
	}
}

func TestHelpHasExamples(t *testing.T) {
	for _, args := range [][]string{{"sandbox", "up"}, {"sandbox", "down"}, {"sandbox", "env"}, {"sandbox", "status"}} {
		stdout, _, code := run(t, nil, append(args, "--help")...)
		if code != 0 || !strings.Contains(stdout, "Examples:") || !strings.Contains(stdout, "tandem "+strings.Join(args, " ")) {
			t.Errorf("tandem %s --help (exit %d) lacks an example:\n%s", strings.Join(args, " "), code, stdout)
		}
	}
}

func TestCLISandboxLifecycle(t *testing.T) {
	if testing.Short() {
		t.Skip("needs mariadbd; skipped with -short")
	}
	dir := filepath.Join(t.TempDir(), "sbx")
	t.Cleanup(func() { run(t, nil, "sandbox", "down", "--dir", dir, "--purge") })
	out, stderr, code := run(t, nil, "sandbox", "up", "--dir", dir, "innodb")
	if code != 0 {
		t.Fatalf("up: exit %d: %s", code, stderr)
	}
	if !strings.Contains(out, "innodb") || !strings.Contains(out, "root@tcp(127.0.0.1:") || strings.Contains(out, "rocksdb") {
		t.Fatalf("up printed:\n%s", out)
	}
	env, stderr, code := run(t, nil, "sandbox", "env", "--dir", dir)
	if code != 0 || !strings.Contains(env, "TANDEM_INNODB_PORT=") || !strings.Contains(env, "TANDEM_INNODB_DSN='root@tcp(127.0.0.1:") {
		t.Fatalf("env: exit %d, %q %q", code, env, stderr)
	}
	// The mariadb CLI reaches the server with the printed arguments.
	var margs string
	for _, l := range strings.Split(env, "\n") {
		if v, ok := strings.CutPrefix(l, "TANDEM_INNODB_MARIADB="); ok {
			margs = strings.Trim(v, "'")
		}
	}
	q, err := exec.Command("mariadb", append(strings.Fields(margs), "-N", "-e", "SELECT @@default_storage_engine")...).CombinedOutput()
	if err != nil || strings.TrimSpace(string(q)) != "InnoDB" {
		t.Fatalf("mariadb %s: %q %v", margs, q, err)
	}
	out, _, code = run(t, nil, "sandbox", "down", "--dir", dir, "--purge")
	if code != 0 || strings.TrimSpace(out) != "innodb: stopped and purged" {
		t.Fatalf("down: exit %d, %q", code, out)
	}
	out, _, _ = run(t, nil, "sandbox", "status", "--dir", dir)
	if !strings.Contains(out, "no sandbox in") {
		t.Fatalf("status after purge: %q", out)
	}
}
