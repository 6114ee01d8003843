package sandbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
)

// fakeServer is a binary that exists, for tests whose error must come
// before any server is started.
const fakeServer = "/bin/true"

func TestLookupProfileUnknown(t *testing.T) {
	_, err := LookupProfile("tokudb")
	if !errors.Is(err, ErrUnknownProfile) {
		t.Fatalf("err = %v, want ErrUnknownProfile", err)
	}
	if want := `unknown profile "tokudb" (known profiles: innodb, innodb-lower-case, primary, reference, replica-innodb, replica-rocksdb, replica-zstd, rocksdb)`; !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %q, want it to contain %q", err, want)
	}
	if _, err := Up(context.Background(), Config{Dir: t.TempDir(), Profiles: []string{"innodb", "tokudb"}, Server: fakeServer}); !errors.Is(err, ErrUnknownProfile) {
		t.Fatalf("Up with an unknown profile: err = %v", err)
	}
}

func TestServerOptionsScopedByProfile(t *testing.T) {
	cfg := Config{ServerOptions: []string{
		"innodb-buffer-pool-size=64M",
		"rocksdb:rocksdb-default-cf-options=compression=kZSTD",
		"innodb:--innodb-flush-log-at-trx-commit=2",
		"--log-bin",
	}}
	inno, _ := LookupProfile("innodb")
	rocks, _ := LookupProfile("rocksdb")
	got, err := cfg.optionsFor(inno)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"--innodb-buffer-pool-size=64M", "--innodb-flush-log-at-trx-commit=2", "--log-bin"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("innodb options = %q, want %q", got, want)
	}
	got, _ = cfg.optionsFor(rocks)
	want = []string{"--innodb-buffer-pool-size=64M", "--rocksdb-default-cf-options=compression=kZSTD", "--log-bin"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("rocksdb options = %q, want %q", got, want)
	}
	bad := Config{ServerOptions: []string{"tokudb:tokudb-cache-size=1G"}}
	if _, err := bad.optionsFor(inno); !errors.Is(err, ErrUnknownProfile) {
		t.Errorf("unknown profile prefix: err = %v", err)
	}
}

func TestNoServerOnPathNamesPackages(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := Up(context.Background(), Config{Dir: t.TempDir()})
	if !errors.Is(err, ErrNoServer) {
		t.Fatalf("err = %v, want ErrNoServer", err)
	}
	for _, pkg := range []string{"mariadb-server", "mariadb-plugin-rocksdb"} {
		if !strings.Contains(err.Error(), pkg) {
			t.Errorf("error %q does not name package %s", err, pkg)
		}
	}
}

func TestPortTakenIsRefusedBeforeClaimingDir(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	dir := t.TempDir()
	_, err = Up(context.Background(), Config{Dir: dir, Profiles: []string{"innodb"}, Port: port, Server: fakeServer})
	if !errors.Is(err, ErrPortInUse) {
		t.Fatalf("err = %v, want ErrPortInUse", err)
	}
	if !strings.Contains(err.Error(), "127.0.0.1:"+strconv.Itoa(port)) {
		t.Errorf("error %q does not name the port", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "innodb")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("profile directory was created although the port was taken (stat err %v)", err)
	}
}

func TestForeignDirectoryIsLeftAlone(t *testing.T) {
	dir := t.TempDir()
	foreign := filepath.Join(dir, "innodb")
	if err := os.MkdirAll(filepath.Join(foreign, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	keep := filepath.Join(foreign, "data", "ibdata1")
	if err := os.WriteFile(keep, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Up(context.Background(), Config{Dir: dir, Profiles: []string{"innodb"}, Server: fakeServer})
	if !errors.Is(err, ErrForeignDir) {
		t.Fatalf("err = %v, want ErrForeignDir", err)
	}
	if b, err := os.ReadFile(keep); err != nil || string(b) != "precious" {
		t.Fatalf("foreign file changed: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(foreign, stateFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("sandbox claimed a foreign directory")
	}
	// Down and purge must not touch it either.
	if _, err := Down(context.Background(), dir, nil, true); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Fatalf("purge removed a foreign directory: %v", err)
	}
}

func TestSandboxDirThatIsADataDirIsRefused(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "mysql"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := Up(context.Background(), Config{Dir: dir, Server: fakeServer})
	if !errors.Is(err, ErrForeignDir) || !strings.Contains(err.Error(), "data directory") {
		t.Fatalf("err = %v, want ErrForeignDir naming a data directory", err)
	}
}

func needServer(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs mariadbd; skipped with -short")
	}
}

// tableEngine creates a table without ENGINE= and returns what
// information_schema reports for it.
func tableEngine(t *testing.T, s Server) string {
	t.Helper()
	db, err := sql.Open("mysql", s.DSN(""))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{"CREATE DATABASE IF NOT EXISTS sbx", "CREATE TABLE sbx.t (id INT PRIMARY KEY, v VARCHAR(10))"} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s on %s: %v", q, s.Profile, err)
		}
	}
	var engine string
	if err := db.QueryRow("SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA='sbx' AND TABLE_NAME='t'").Scan(&engine); err != nil {
		t.Fatal(err)
	}
	return engine
}

func TestUpStatusDownBothProfiles(t *testing.T) {
	needServer(t)
	ctx := context.Background()
	dir := t.TempDir()
	srvs, err := Up(ctx, Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Down(context.Background(), dir, nil, true) })
	if len(srvs) != 2 || srvs[0].Profile != "innodb" || srvs[1].Profile != "rocksdb" {
		t.Fatalf("Up returned %+v, want innodb and rocksdb", srvs)
	}
	for _, s := range srvs {
		if !s.Running || s.PID <= 0 || !strings.Contains(s.Version, "MariaDB") {
			t.Errorf("%s: running=%v pid=%d version=%q", s.Profile, s.Running, s.PID, s.Version)
		}
	}
	if got := tableEngine(t, srvs[0]); got != "InnoDB" {
		t.Errorf("innodb profile: table engine %q, want InnoDB", got)
	}
	if got := tableEngine(t, srvs[1]); got != "ROCKSDB" {
		t.Errorf("rocksdb profile: table engine %q, want ROCKSDB", got)
	}

	// A second Up finds them running and starts nothing new.
	again, err := Up(ctx, Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range again {
		if !s.Running || s.PID != srvs[i].PID || s.Port != srvs[i].Port {
			t.Errorf("second Up: %s running=%v pid=%d port=%d, want running pid=%d port=%d",
				s.Profile, s.Running, s.PID, s.Port, srvs[i].PID, srvs[i].Port)
		}
	}

	st, err := Status(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 2 || !st[0].Running || !st[1].Running {
		t.Fatalf("Status = %+v, want two running", st)
	}

	down, err := Down(ctx, dir, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(down) != 2 {
		t.Fatalf("Down stopped %d servers, want 2", len(down))
	}
	for _, s := range srvs {
		if s.running() {
			t.Errorf("%s: pid %d still running after Down", s.Profile, s.PID)
		}
		if c, err := net.DialTimeout("tcp", s.Addr(), time.Second); err == nil {
			c.Close()
			t.Errorf("%s: %s still accepts connections after Down", s.Profile, s.Addr())
		}
	}
	st, _ = Status(ctx, dir)
	if len(st) != 2 || st[0].Running || st[1].Running {
		t.Fatalf("Status after Down = %+v, want two stopped", st)
	}

	// The data survives a restart; --purge removes it.
	srvs, err = Up(ctx, Config{Dir: dir, Profiles: []string{"rocksdb"}})
	if err != nil {
		t.Fatal(err)
	}
	db, _ := sql.Open("mysql", srvs[0].DSN("sbx"))
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM t").Scan(&n); err != nil || n != 0 {
		t.Errorf("table after restart: n=%d err=%v", n, err)
	}
	db.Close()
	if _, err := Down(ctx, dir, nil, true); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("purge left %s behind", dir)
	}
}

func TestServerOptionReachesServer(t *testing.T) {
	needServer(t)
	dir := t.TempDir()
	srvs, err := Up(context.Background(), Config{Dir: dir, Profiles: []string{"innodb"}, ServerOptions: []string{"innodb:max-connections=77"}})
	if err != nil {
		t.Fatal(err)
	}
	defer Down(context.Background(), dir, nil, true)
	db, _ := sql.Open("mysql", srvs[0].DSN(""))
	defer db.Close()
	var n int
	if err := db.QueryRow("SELECT @@max_connections").Scan(&n); err != nil || n != 77 {
		t.Fatalf("max_connections = %d (%v), want 77", n, err)
	}

	// Up on the running server: reported as it is when asked for what it
	// has (its options, its port, or nothing); refused, naming what
	// differs, when asked for another option or port, which it would not
	// have had.
	for _, ok := range []Config{
		{},
		{ServerOptions: []string{"innodb:max-connections=77"}},
		{ServerOptions: []string{"max_connections=77"}},        // the server's other spelling
		{ServerOptions: []string{"rocksdb:max-connections=5"}}, // another profile's
		{Port: srvs[0].Port},
	} {
		ok.Dir, ok.Profiles = dir, []string{"innodb"}
		again, err := Up(context.Background(), ok)
		if err != nil || len(again) != 1 || again[0].PID != srvs[0].PID {
			t.Errorf("Up %+v on the running server: %+v, %v; want it as it is", ok, again, err)
		}
	}
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{ServerOptions: []string{"max-connections=78"}}, "sandbox: profile innodb already runs (port " + fmt.Sprint(srvs[0].Port) + ", pid " + fmt.Sprint(srvs[0].PID) + ") without the server option max-connections=78; stop it first (tandem sandbox down innodb) to start it with the option"},
		{Config{Port: srvs[0].Port + 1}, fmt.Sprintf("sandbox: profile innodb already runs on port %d (pid %d), not %d as --port asks; stop it first (tandem sandbox down innodb) or leave --port out", srvs[0].Port, srvs[0].PID, srvs[0].Port+1)},
	} {
		c.cfg.Dir, c.cfg.Profiles = dir, []string{"innodb"}
		if _, err := Up(context.Background(), c.cfg); err == nil || err.Error() != c.want {
			t.Errorf("Up %+v on the running server: %v\nwant %s", c.cfg, err, c.want)
		}
	}
}

// A MariaDB server deletes every "#sql*" file in its tmpdir when it starts;
// sharing /tmp, a sandbox starting deleted the temporary tables of others
// (an install running at the same time failed with "Unknown table
// 'mysql.tmp_proxies_priv'"). Each server has its own tmpdir, and a file
// like another server's temporary table in the system's survives.
func TestServersKeepTheirOwnTmpdir(t *testing.T) {
	needServer(t)
	probe, err := os.CreateTemp("", "#sql-tandem-probe-*.MAI")
	if err != nil {
		t.Fatal(err)
	}
	probe.Close()
	defer os.Remove(probe.Name())
	dir := t.TempDir()
	srvs, err := Up(context.Background(), Config{Dir: dir, Profiles: []string{"innodb"}})
	if err != nil {
		t.Fatal(err)
	}
	defer Down(context.Background(), dir, nil, true)
	if _, err := os.Stat(probe.Name()); err != nil {
		t.Errorf("starting a sandbox server deleted %s: %v", probe.Name(), err)
	}
	db, _ := sql.Open("mysql", srvs[0].DSN(""))
	defer db.Close()
	var tmp string
	if err := db.QueryRow("SELECT @@tmpdir").Scan(&tmp); err != nil || tmp != srvs[0].tmpDir() {
		t.Fatalf("@@tmpdir = %q (%v), want the server's own %q", tmp, err, srvs[0].tmpDir())
	}
}

func TestBadServerOptionReportsErrorLog(t *testing.T) {
	needServer(t)
	dir := t.TempDir()
	_, err := Up(context.Background(), Config{Dir: dir, Profiles: []string{"innodb"}, ServerOptions: []string{"no-such-option=1"}})
	if !errors.Is(err, ErrStartFailed) {
		t.Fatalf("err = %v, want ErrStartFailed", err)
	}
	if !strings.Contains(err.Error(), "no-such-option") {
		t.Errorf("error does not quote the server's complaint: %v", err)
	}
}

// Regression: with a relative sandbox directory, Status saw no running
// server and Down wrote "stopped" while the servers went on running.
func TestRelativeDirStatusAndDown(t *testing.T) {
	needServer(t)
	ctx := context.Background()
	base := t.TempDir()
	t.Chdir(base)
	srvs, err := Up(ctx, Config{Dir: "rel/sbx", Profiles: []string{"innodb"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Down(context.Background(), filepath.Join(base, "rel/sbx"), nil, true) })
	st, err := Status(ctx, "rel/sbx")
	if err != nil || len(st) != 1 || !st[0].Running || st[0].PID != srvs[0].PID {
		t.Fatalf("Status(relative) = %+v, %v; want innodb running with pid %d", st, err, srvs[0].PID)
	}
	if _, err := Down(ctx, "rel/sbx", nil, false); err != nil {
		t.Fatal(err)
	}
	if srvs[0].running() {
		t.Fatalf("pid %d still running after Down with a relative directory", srvs[0].PID)
	}
}

// The replication topology: one primary with a row-based binary log and
// GTIDs, the rest replicas, every server id distinct (a replica with its
// primary's id would skip every event as its own).
func TestReplicationProfilesHaveTheirOwnServerIDs(t *testing.T) {
	ids := map[string]string{}
	for i, name := range ReplicationProfiles {
		p, err := LookupProfile(name)
		if err != nil {
			t.Fatal(err)
		}
		if p.Replica != (i > 0) {
			t.Errorf("%s: Replica %v", name, p.Replica)
		}
		var id string
		for _, o := range p.Options {
			if v, ok := strings.CutPrefix(o, "--server-id="); ok {
				id = v
			}
		}
		if id == "" || ids[id] != "" {
			t.Errorf("%s: server id %q (already %q's)", name, id, ids[id])
		}
		ids[id] = name
		bin := strings.Join(p.Options, " ")
		if primary := i == 0; primary != strings.Contains(bin, "--log-bin") || primary != strings.Contains(bin, "--binlog-format=ROW") {
			t.Errorf("%s: options %s", name, bin)
		}
	}
}
