package main

import (
	"bytes"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/tandemdb/tandem/sandbox/sandboxtest"
	"github.com/tandemdb/tandem/store"
)

// writeKeyFile writes a key file (hex, mode 600) and returns its path.
func writeKeyFile(t *testing.T, hexKey string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "capture.key")
	if err := os.WriteFile(f, []byte(hexKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// noFileHolds fails the test if a file in dir holds s.
func noFileHolds(t *testing.T, dir, s string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if b, err := os.ReadFile(filepath.Join(dir, e.Name())); err == nil && bytes.Contains(b, []byte(s)) {
			t.Errorf("%s holds %q in clear", filepath.Join(dir, e.Name()), s)
		}
	}
}

// A capture taken through tandem proxy --encrypt-key-file, with a shadow,
// holds no statement in clear, nor does the shadow's copy of the feed;
// inspect, replay, report and pack read them with the key (the flag, or
// $TANDEM_ENCRYPT_KEY_FILE), and without it, or with another, each says
// in one line that the capture is encrypted and which flag to give.
func TestEncryptedCaptureThroughTheCLI(t *testing.T) {
	const literal = "iban-DE89370400440532013000"
	key := writeKeyFile(t, "6b3a1f09d2c4e8577a10ff3c9e2b4d6a0c8e1f2a3b4c5d6e7f8091a2b3c4d5e6")
	other := writeKeyFile(t, strings.Repeat("5a", 32))
	srv := sandboxtest.Server(t, "innodb")
	_, primary := srv.FreshDB(t)
	_, shadowDSN := srv.FreshDB(t)
	target, targetDSN := srv.FreshDB(t)
	capDir := filepath.Join(t.TempDir(), "cap")
	listen := freeAddr(t)
	p, out := startProc(t, tandemBin, "proxy", "--listen", listen, "--backend", srv.Addr(), "--capture", capDir, "--metrics-addr", "off",
		"--encrypt-key-file", key, "--shadow", "sh="+shadowDSN, "--shadow-status-interval", "1s")
	ls := lines(out)
	waitLine(t, ls, "listening on", 30*time.Second)
	db, err := sql.Open("mysql", strings.Replace(primary, srv.Addr(), listen, 1))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"CREATE TABLE accounts (id INT PRIMARY KEY, iban VARCHAR(64))",
		"INSERT INTO accounts VALUES (1, '" + literal + "'), (2, 'other')",
		"UPDATE accounts SET iban = CONCAT(iban, '-x') WHERE id = 2",
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	var got string
	if err := db.QueryRow("SELECT iban FROM accounts WHERE id = 1").Scan(&got); err != nil || got != literal {
		t.Fatalf("through the proxy: %q, %v", got, err)
	}
	db.Close()

	// The shadow's worker keeps the feed in a copy of its own: encrypted.
	feed := capDir + ".shadows/sh.feed"
	deadline := time.Now().Add(15 * time.Second)
	for {
		if ok, err := store.Encrypted(feed); err == nil && ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the shadow's copy of the feed %s is not encrypted", feed)
		}
		time.Sleep(50 * time.Millisecond)
	}
	noFileHolds(t, feed, literal)
	noFileHolds(t, capDir, literal)
	p.Process.Signal(os.Interrupt)
	waitLine(t, ls, "records captured into", 30*time.Second)
	if err := p.Wait(); err != nil {
		t.Fatalf("proxy exit: %v", err)
	}
	noFileHolds(t, capDir, literal)
	noFileHolds(t, capDir+".shadows/sh", literal)

	refused := func(what, stderr string, code int, want string) {
		t.Helper()
		if code == 0 || !strings.Contains(stderr, want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%s: exit %d, %q; want one line saying %q", what, code, stderr, want)
		}
	}
	_, stderr, code := run(t, nil, "inspect", capDir)
	refused("inspect without the key", stderr, code, capDir+" is encrypted; give the key it was written with (--encrypt-key-file FILE, or TANDEM_ENCRYPT_KEY_FILE=FILE)")
	_, stderr, code = run(t, nil, "inspect", capDir, "--encrypt-key-file", other)
	refused("inspect with another key", stderr, code, capDir+" is encrypted with another key")
	_, stderr, code = run(t, nil, "replay", capDir, "--target", "t="+targetDSN, "--metrics-addr", "off", "--run", filepath.Join(t.TempDir(), "norun"))
	refused("replay without the key", stderr, code, "--encrypt-key-file")
	_, stderr, code = run(t, nil, "report", capDir+".shadows/sh")
	refused("report of the shadow's run without the key", stderr, code, "is encrypted; give the key")

	text, stderr, code := run(t, []string{store.KeyFileEnv + "=" + key}, "inspect", capDir)
	if code != 0 || !strings.Contains(text, "at rest, AES-256-GCM") || !strings.Contains(text, "closed cleanly") {
		t.Fatalf("inspect with $%s: exit %d %s\n%s", store.KeyFileEnv, code, stderr, text)
	}
	runDir := filepath.Join(t.TempDir(), "run")
	if _, stderr, code := run(t, nil, "replay", capDir, "--target", "t="+targetDSN, "--metrics-addr", "off", "--run", runDir, "--encrypt-key-file", key); code != 0 {
		t.Fatalf("replay with the key: exit %d: %s", code, stderr)
	}
	if err := target.QueryRow("SELECT iban FROM accounts WHERE id = 1").Scan(&got); err != nil || got != literal {
		t.Fatalf("the replayed target holds %q (%v), want %q", got, err, literal)
	}
	if ok, err := store.Encrypted(runDir); err != nil || !ok {
		t.Errorf("the run directory is not encrypted: %v %v", ok, err)
	}
	_, stderr, code = run(t, nil, "report", runDir)
	refused("report without the key", stderr, code, runDir+" is encrypted")
	if text, stderr, code := run(t, nil, "report", runDir, "--encrypt-key-file", key); code != 0 || !strings.Contains(text, "against 1 target") {
		t.Errorf("report with the key: exit %d %s\n%s", code, stderr, text)
	}
	if text, stderr, code := run(t, nil, "report", capDir+".shadows/sh", "--encrypt-key-file", key); code != 0 || !strings.Contains(text, "sh") {
		t.Errorf("report of the shadow's run with the key: exit %d %s\n%s", code, stderr, text)
	}

	archive := filepath.Join(t.TempDir(), "cap"+store.ArchiveSuffix)
	_, stderr, code = run(t, nil, "pack", capDir, "-o", archive)
	refused("pack without the key", stderr, code, "--encrypt-key-file")
	if _, stderr, code := run(t, nil, "pack", capDir, "-o", archive, "--encrypt-key-file", key); code != 0 {
		t.Fatalf("pack with the key: exit %d %s", code, stderr)
	}
	unpack := t.TempDir()
	_, stderr, code = run(t, nil, "inspect", archive, "--unpack-dir", unpack)
	refused("inspect of the archive without the key", stderr, code, "is encrypted; give the key")
	if text, stderr, code := run(t, nil, "inspect", archive, "--unpack-dir", unpack, "--encrypt-key-file", key, "--verify"); code != 0 || !strings.Contains(text, "whole") {
		t.Errorf("inspect --verify of the archive with the key: exit %d %s\n%s", code, stderr, text)
	}
}

// Every command that opens a capture, a run directory or a packed capture
// takes the key the same way; a key file of the wrong length, or one that
// others can read, is refused in one line that never quotes it.
func TestEveryStoreCommandTakesTheKey(t *testing.T) {
	for _, cmd := range []*cobra.Command{newProxyCmd(), newInspectCmd(), newReplayCmd(), newSweepCmd(), newReportCmd(), newPackCmd(), newAlignCmd()} {
		f := cmd.Flags().Lookup("encrypt-key-file")
		if f == nil || !strings.Contains(f.Usage, "$"+store.KeyFileEnv) || f.DefValue != "" {
			t.Errorf("%s --encrypt-key-file: %+v", cmd.Name(), f)
		}
	}
	dir := t.TempDir()
	short := filepath.Join(dir, "short.key")
	os.WriteFile(short, []byte("6b3a1f09d2c4e857\n"), 0o600)
	open := writeKeyFile(t, strings.Repeat("5a", 32))
	os.Chmod(open, 0o644)
	for _, tc := range []struct {
		env  []string
		args []string
		want string
	}{
		{nil, []string{"inspect", dir, "--encrypt-key-file", short}, "--encrypt-key-file: key file " + short + ": a key is 32 raw bytes or 64 hex digits (for one: openssl rand -hex 32), not 17 bytes"},
		{[]string{store.KeyFileEnv + "=" + short}, []string{"report", dir}, "$" + store.KeyFileEnv + ": key file " + short + ": a key is 32 raw bytes"},
		{nil, []string{"pack", dir, "-o", filepath.Join(dir, "x.tar.zst"), "--encrypt-key-file", open}, "can be read by others than its owner (mode 0644); make it private: chmod 600"},
	} {
		_, stderr, code := run(t, tc.env, tc.args...)
		if code != 1 || !strings.Contains(stderr, tc.want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || strings.Contains(stderr, "6b3a1f09") {
			t.Errorf("tandem %s: exit %d, %q; want one line saying %q", strings.Join(tc.args, " "), code, stderr, tc.want)
		}
	}
}
