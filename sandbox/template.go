package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// CacheEnv names the environment variable that says where pristine data
// directories are kept: a directory, or "off" for none (every server then
// runs mariadb-install-db itself). Unset, they are kept under the user's
// cache directory (~/.cache/tandem/sandbox).
const CacheEnv = "TANDEM_SANDBOX_CACHE"

// A new server's data directory is a copy of a pristine one: what
// mariadb-install-db made once, for this server build and these install
// options, kept in the cache. Installing runs a bootstrap server over the
// system tables' SQL (about a second of CPU and two to three of waiting);
// copying its result takes a tenth of that. The copy is the same as a
// fresh install: install-db writes no identity into the data directory
// (server ids, ports and paths are options given at start).
//
// The cache holds one directory per key (datadir-KEY), made complete in
// a staging directory and renamed into place, so that a directory under
// its final name is always whole; processes that make one at once each
// install, and the first rename wins.

// cacheDir is where pristine data directories are kept; false: nowhere.
func cacheDir() (string, bool) {
	switch v := os.Getenv(CacheEnv); v {
	case "off":
		return "", false
	case "":
		d, err := os.UserCacheDir()
		if err != nil {
			return "", false
		}
		return filepath.Join(d, "tandem", "sandbox"), true
	default:
		return v, true
	}
}

// templateKey names the pristine data directory of the server bin, the
// install tool and its arguments: another build of either (an upgraded
// package) gets a directory of its own.
func templateKey(bin, tool string, args []string) (string, error) {
	h := sha256.New()
	for _, p := range []string{bin, tool} {
		fi, err := os.Stat(p)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s\x00%d\x00%d\n", p, fi.Size(), fi.ModTime().UnixNano())
	}
	fmt.Fprintf(h, "%q\n", args)
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// newDataDir makes dataDir the data directory of a new server of bin: a
// copy of the cached pristine one, made first if it is not there yet. If
// the cache cannot be used (not writable, full), the server is installed
// directly, as without a cache; an install that fails says why.
func newDataDir(ctx context.Context, bin, dataDir, tmpDir string, root bool) error {
	tool, err := findInstallDB(bin)
	if err != nil {
		return err
	}
	args := installArgs(root)
	cache, ok := cacheDir()
	if !ok {
		return installDB(ctx, tool, args, dataDir, tmpDir)
	}
	key, err := templateKey(bin, tool, args)
	if err != nil {
		return installDB(ctx, tool, args, dataDir, tmpDir)
	}
	tpl := filepath.Join(cache, "datadir-"+key)
	if _, err := os.Stat(filepath.Join(tpl, "mysql")); err != nil {
		if err := makeTemplate(ctx, tool, args, cache, tpl); err != nil {
			if errors.Is(err, ErrStartFailed) || ctx.Err() != nil {
				return err
			}
			return installDB(ctx, tool, args, dataDir, tmpDir) // the cache is not usable
		}
	}
	// The copy is made beside dataDir and renamed into place, so that a
	// copy cut short leaves no data directory that looks whole. What is
	// at dataDir has no system tables (see start): what an install or a
	// copy that was cut short left, of no use.
	tmp := dataDir + ".copy"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := copyTree(tpl, tmp); err != nil {
		os.RemoveAll(tmp)
		return fmt.Errorf("sandbox: copy the pristine data directory %s to %s: %w (%s=off installs each server instead)", tpl, dataDir, err, CacheEnv)
	}
	if err := os.RemoveAll(dataDir); err != nil {
		return err
	}
	return os.Rename(tmp, dataDir)
}

// makeTemplate installs a pristine data directory into a staging
// directory of cache and renames it to tpl. Staging directories left by
// a process that was killed meanwhile are removed once they are an hour
// old.
func makeTemplate(ctx context.Context, tool string, args []string, cache, tpl string) error {
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return err
	}
	old, _ := filepath.Glob(filepath.Join(cache, "staging-*"))
	for _, d := range old {
		if fi, err := os.Stat(d); err == nil && time.Since(fi.ModTime()) > time.Hour {
			os.RemoveAll(d)
		}
	}
	stage, err := os.MkdirTemp(cache, "staging-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(stage)
	tmp := filepath.Join(stage, "tmp")
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return err
	}
	data := filepath.Join(stage, "data")
	if err := installDB(ctx, tool, args, data, tmp); err != nil {
		return err
	}
	if err := os.Rename(data, tpl); err != nil {
		if _, serr := os.Stat(filepath.Join(tpl, "mysql")); serr == nil {
			return nil // another process made it first
		}
		return err
	}
	return nil
}

// copyTree copies the directory src to dst (which must not exist):
// directories, and regular files with their modes. Anything else in src
// is an error: a data directory install-db made has nothing else.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.Mkdir(to, info.Mode().Perm())
		case info.Mode().IsRegular():
			return copyFile(p, to, info.Mode().Perm())
		}
		return fmt.Errorf("%s is not a regular file or directory", p)
	})
}

func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil { // copy_file_range: in the kernel
		out.Close()
		return err
	}
	return out.Close()
}

// installArgs are mariadb-install-db's arguments but for the directories.
func installArgs(root bool) []string {
	args := []string{"--no-defaults", "--auth-root-authentication-method=normal", "--skip-test-db"}
	if root {
		args = append(args, "--user=root")
	}
	return args
}
