package sandbox

import (
	"context"
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// countingServer links the real mariadbd into a directory of its own,
// beside a mariadb-install-db that counts its runs in the returned file
// before it runs the real one: Up finds the tool next to the server.
func countingServer(t *testing.T) (server, count string) {
	t.Helper()
	real, err := findServer("")
	if err != nil {
		t.Skip(err)
	}
	tool, err := findInstallDB(real)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	server, count = filepath.Join(dir, "mariadbd"), filepath.Join(dir, "installs")
	if err := os.Symlink(real, server); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\necho run >>" + count + "\nexec " + tool + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "mariadb-install-db"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return server, count
}

func installs(t *testing.T, count string) int {
	t.Helper()
	b, err := os.ReadFile(count)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "run\n")
}

// users is what the server's system tables hold: its accounts.
func users(t *testing.T, s Server) string {
	t.Helper()
	db, err := sql.Open("mysql", s.DSN(""))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var u string
	if err := db.QueryRow("SELECT GROUP_CONCAT(CONCAT(user, '@', host) ORDER BY user, host) FROM mysql.global_priv").Scan(&u); err != nil {
		t.Fatal(err)
	}
	return u
}

// Servers after the first start from a copy of the pristine data
// directory the first one's install made: three servers, one install.
// With the cache off, each installs; with a cache that cannot be made,
// each installs too, and starts.
func TestNewServersCopyOnePristineDataDir(t *testing.T) {
	needServer(t)
	ctx := context.Background()
	for _, c := range []struct {
		name     string
		cache    func(t *testing.T) string
		installs int
		kept     bool
	}{
		{"cache", func(t *testing.T) string { return filepath.Join(t.TempDir(), "cache") }, 1, true},
		{"off", func(*testing.T) string { return "off" }, 3, false},
		{"unwritable", func(t *testing.T) string {
			f := filepath.Join(t.TempDir(), "file")
			if err := os.WriteFile(f, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(f, "cache") // under a file: cannot be made
		}, 3, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			server, count := countingServer(t)
			cache := c.cache(t)
			t.Setenv(CacheEnv, cache)
			var want string
			for i := range 3 {
				dir := t.TempDir()
				srvs, err := Up(ctx, Config{Dir: dir, Profiles: []string{"innodb"}, Server: server})
				if err != nil {
					t.Fatalf("server %d: %v", i, err)
				}
				u := users(t, srvs[0])
				if _, err := Down(ctx, dir, nil, true); err != nil {
					t.Fatal(err)
				}
				if i == 0 {
					want = u
				} else if u != want {
					t.Errorf("server %d has accounts %s, the first had %s", i, u, want)
				}
			}
			if !strings.Contains(want, "root@localhost") {
				t.Errorf("accounts %q: no root@localhost", want)
			}
			if got := installs(t, count); got != c.installs {
				t.Errorf("mariadb-install-db ran %d times for 3 servers, want %d", got, c.installs)
			}
			kept, _ := filepath.Glob(filepath.Join(cache, "datadir-*", "mysql"))
			staging, _ := filepath.Glob(filepath.Join(cache, "staging-*"))
			if c.kept && (len(kept) != 1 || len(staging) != 0) {
				t.Errorf("cache holds %v and staging %v, want one pristine data directory", kept, staging)
			}
			if !c.kept && len(kept) != 0 {
				t.Errorf("cache %s holds %v, want nothing", cache, kept)
			}
		})
	}
}

// A data directory holds only directories and regular files; anything
// else in the pristine copy is an error, not copied as something else.
func TestCopyTreeRefusesWhatIsNotAFile(t *testing.T) {
	src := t.TempDir()
	if err := os.MkdirAll(filepath.Join(src, "mysql"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "mysql", "user.frm"), []byte("frm"), 0o660); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "data")
	if err := copyTree(src, dst); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dst, "mysql", "user.frm"))
	fi, serr := os.Stat(filepath.Join(dst, "mysql"))
	if err != nil || string(b) != "frm" || serr != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("copy: %q %v, dir %v %v", b, err, fi, serr)
	}
	if err := exec.Command("mkfifo", filepath.Join(src, "fifo")).Run(); err != nil {
		t.Skip(err)
	}
	err = copyTree(src, filepath.Join(t.TempDir(), "data"))
	if err == nil || !strings.Contains(err.Error(), "is not a regular file or directory") {
		t.Fatalf("copying a fifo: err = %v", err)
	}
}

// A data directory left without system tables (an install or a copy cut
// short) is replaced by a whole copy of the pristine one; a copy cut
// short beside it is removed first.
func TestNewDataDirReplacesWhatAnInterruptedStartLeft(t *testing.T) {
	bin := t.TempDir()
	server, tool := filepath.Join(bin, "mariadbd"), filepath.Join(bin, "mariadb-install-db")
	for _, f := range []string{server, tool} {
		if err := os.WriteFile(f, []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cache := t.TempDir()
	t.Setenv(CacheEnv, cache)
	key, err := templateKey(server, tool, installArgs(os.Geteuid() == 0))
	if err != nil {
		t.Fatal(err)
	}
	tpl := filepath.Join(cache, "datadir-"+key)
	for f, body := range map[string]string{"mysql/db.frm": "db", "ibdata1": "pages"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(tpl, f)), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tpl, f), []byte(body), 0o660); err != nil {
			t.Fatal(err)
		}
	}
	data := filepath.Join(t.TempDir(), "data")
	for _, f := range []string{filepath.Join(data, "ibdata1"), filepath.Join(data+".copy", "mysql", "half")} {
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte("left over"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The fake install tool fails: the data directory must come from the
	// pristine copy, not from an install.
	if err := newDataDir(context.Background(), server, data, t.TempDir(), os.Geteuid() == 0); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	filepath.WalkDir(data, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(p)
			rel, _ := filepath.Rel(data, p)
			got[rel] = string(b)
		}
		return nil
	})
	if len(got) != 2 || got["mysql/db.frm"] != "db" || got["ibdata1"] != "pages" {
		t.Errorf("data directory holds %v, want the pristine copy's mysql/db.frm and ibdata1", got)
	}
	if _, err := os.Stat(data + ".copy"); !os.IsNotExist(err) {
		t.Errorf("%s.copy is still there (%v)", data, err)
	}
}
