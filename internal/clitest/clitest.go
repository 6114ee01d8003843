// Package clitest is what tests that run the real tandem binary share
// (cmd/tandem's and e2e's): building it once, free loopback addresses,
// waiting for a listener. Only tests import it.
package clitest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/tandemdb/tandem/internal/freeport"
	"github.com/tandemdb/tandem/sandbox/sandboxtest"
)

// Main builds tandem from pkg (the directory of cmd/tandem, relative to
// the test's package) into a temporary directory, sets *bin to it, runs
// the tests with their sandboxed servers (sandboxtest.Main) and removes
// the build; its result is the exit code.
func Main(m *testing.M, pkg string, bin *string) int {
	dir, err := os.MkdirTemp("", "tandem-cli-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	*bin = filepath.Join(dir, "tandem")
	if out, err := exec.Command("go", "build", "-o", *bin, pkg).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build tandem: %v\n%s", err, out)
		return 1
	}
	return sandboxtest.Main(m)
}

// FreeAddr is a loopback address nothing listens on now, outside the
// ephemeral range so that no outgoing connection takes it before the
// test starts its server there.
func FreeAddr(t testing.TB) string {
	t.Helper()
	a, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// WaitTCP waits up to 20 s for something to listen on addr.
func WaitTCP(t testing.TB, addr string) {
	t.Helper()
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return
		}
	}
	t.Fatalf("nothing listens on %s", addr)
}
