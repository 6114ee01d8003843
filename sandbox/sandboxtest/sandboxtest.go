// Package sandboxtest gives tests real MariaDB servers: each profile is
// started at most once per test binary, on first use, in a temporary
// directory, and stopped when the tests end.
//
// A package that uses it calls Main from its TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(sandboxtest.Main(m)) }
//
// Tests then ask for a server by profile and usually for a fresh database:
//
//	srv := sandboxtest.Server(t, "rocksdb")
//	db, dsn := srv.FreshDB(t)
//
// Under "go test -short" the tests that ask for a server are skipped. Without
// -short a missing mariadbd is a test failure that names the packages to
// install, so a CI machine without them cannot pass by skipping.
package sandboxtest

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql" // database/sql driver for the servers
	"github.com/tandemdb/tandem/sandbox"
)

var (
	mu      sync.Mutex
	dir     string
	servers = map[string]*Handle{}
	failed  = map[string]error{}
	dbSeq   atomic.Int64
	// inMain: the tests run under Main, which stops their servers.
	inMain bool
)

// Main runs the package's tests, then stops every server they started and
// removes the sandbox directory.
func Main(m *testing.M) int {
	mu.Lock()
	inMain = true
	mu.Unlock()
	code := m.Run()
	mu.Lock()
	defer mu.Unlock()
	if dir != "" {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := sandbox.Down(ctx, dir, nil, true); err != nil {
			fmt.Fprintf(os.Stderr, "sandboxtest: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
		os.RemoveAll(dir)
	}
	return code
}

// Handle is a running sandboxed server.
type Handle struct {
	sandbox.Server
	dir string
}

// Server returns the running server of the profile, starting it if needed.
func Server(t testing.TB, profile string) *Handle {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a MariaDB server; skipped with -short")
	}
	mu.Lock()
	defer mu.Unlock()
	if !inMain {
		// Without Main the server outlives the test binary: every run of
		// the package's tests left a mariadbd behind.
		t.Fatalf("sandboxtest.Server needs the package's tests to run under sandboxtest.Main: add func TestMain(m *testing.M) { os.Exit(sandboxtest.Main(m)) }")
	}
	if h, ok := servers[profile]; ok {
		return h
	}
	if err, ok := failed[profile]; ok {
		t.Fatalf("sandbox profile %s failed to start earlier: %v", profile, err)
	}
	if dir == "" {
		d, err := os.MkdirTemp("", "tandem-sandboxtest-")
		if err != nil {
			t.Fatal(err)
		}
		dir = d
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srvs, err := sandbox.Up(ctx, sandbox.Config{Dir: dir, Profiles: []string{profile}})
	if err != nil {
		failed[profile] = err
		t.Fatalf("start sandbox profile %s: %v", profile, err)
	}
	h := &Handle{Server: srvs[0], dir: dir}
	servers[profile] = h
	return h
}

// Dir is the sandbox directory shared by the test binary's servers.
func (h *Handle) SandboxDir() string { return h.dir }

// FreshDB creates an empty database on the server, dropped when the test
// ends, and returns an open handle to it and its DSN.
func (h *Handle) FreshDB(t testing.TB) (*sql.DB, string) {
	t.Helper()
	name := fmt.Sprintf("t%d_%d", os.Getpid(), dbSeq.Add(1))
	root, err := sql.Open("mysql", h.DSN(""))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := root.Exec("CREATE DATABASE " + name); err != nil {
		root.Close()
		t.Fatalf("create database %s on %s: %v", name, h.Profile, err)
	}
	dsn := h.DSN(name)
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		db.Close()
		if _, err := root.Exec("DROP DATABASE IF EXISTS " + name); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
		root.Close()
	})
	return db, dsn
}
