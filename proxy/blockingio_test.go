package proxy

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Every test of this package runs again with blocking I/O, in a child run
// of the test binary (the default run uses the poller).
//
// The child starts at once (of this package's tests only admin_test.go's,
// which need no server, come before this file's) and runs beside this
// run's tests: it has sandbox servers, ports and directories of its own.
// t.Parallel lets this run's tests go on; this test waits for the child
// once they have ended.
func TestEverythingAgainWithBlockingIO(t *testing.T) {
	if os.Getenv(ioEnv) != "" {
		t.Skip("this is the child run")
	}
	if testing.Short() {
		t.Skip("needs a MariaDB server; skipped with -short")
	}
	args := []string{"-test.count=1", "-test.timeout=5m"}
	if testing.Verbose() {
		args = append(args, "-test.v")
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), ioEnv+"="+IOBlocking)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Parallel()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the tests with --io blocking failed: %v\n%s", err, out.Bytes())
	}
	if !strings.Contains(out.String(), "PASS") {
		t.Fatalf("the child run did not pass:\n%s", out.Bytes())
	}
	t.Logf("with --io blocking:\n%s", out.Bytes())
}
