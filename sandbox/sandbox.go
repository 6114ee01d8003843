// Package sandbox starts, inspects and stops local MariaDB servers for
// Tandem's tests and demo: one server per profile (see Profile), each in its
// own directory under a sandbox directory, listening on a loopback port, with
// root logging in without a password.
//
// Layout of a sandbox directory:
//
//	DIR/PROFILE/sandbox.json   the marker and state file (this package's, always present)
//	DIR/PROFILE/data/          the server's data directory
//	DIR/PROFILE/mysqld.sock    its socket
//	DIR/PROFILE/mysqld.pid     its pid file
//	DIR/PROFILE/error.log      its error log
//
// A profile directory that exists without sandbox.json belongs to something
// else and is never touched. Servers run in their own session (setsid), so
// they outlive the command that started them; Down stops them with SIGTERM,
// which MariaDB treats as a clean shutdown.
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Sentinel errors. Callers test them with errors.Is.
var (
	ErrUnknownProfile = errors.New("sandbox: unknown profile")
	ErrNoServer       = errors.New("sandbox: no MariaDB server binary")
	ErrPortInUse      = errors.New("sandbox: port already in use")
	ErrForeignDir     = errors.New("sandbox: directory belongs to something else")
	ErrStartFailed    = errors.New("sandbox: server did not start")
	ErrNotRunning     = errors.New("sandbox: not running")
)

// DefaultDir is where the CLI keeps its sandbox unless told otherwise.
const DefaultDir = ".tandem/sandbox"

// Config says which servers to start and how.
type Config struct {
	// Dir holds one sub-directory per profile.
	Dir string
	// Profiles to act on; empty means DefaultProfiles.
	Profiles []string
	// Port is the first profile's port; the next profiles take the following
	// ports. Zero picks a free loopback port for each.
	Port int
	// ServerOptions are extra mariadbd options, each "OPTION" (all profiles)
	// or "PROFILE:OPTION" (that profile only); a leading "--" may be omitted.
	ServerOptions []string
	// Server is the mariadbd binary; empty means looking up mariadbd, then
	// mysqld, on PATH.
	Server string
	// StartTimeout bounds how long a server may take to answer; zero means 60s.
	StartTimeout time.Duration
}

func (c Config) profiles() ([]Profile, error) {
	names := c.Profiles
	if len(names) == 0 {
		names = DefaultProfiles
	}
	seen := map[string]bool{}
	var out []Profile
	for _, n := range names {
		p, err := LookupProfile(n)
		if err != nil {
			return nil, err
		}
		if !seen[p.Name] {
			seen[p.Name] = true
			out = append(out, p)
		}
	}
	return out, nil
}

// optionsFor returns the user's extra options that apply to profile p.
func (c Config) optionsFor(p Profile) ([]string, error) {
	var out []string
	for _, o := range c.ServerOptions {
		opt := o
		if i := strings.Index(o, ":"); i > 0 && !strings.HasPrefix(o, "-") {
			prof, err := LookupProfile(o[:i])
			if err != nil {
				return nil, fmt.Errorf("--server-option %q: %w", o, err)
			}
			if prof.Name != p.Name {
				continue
			}
			opt = o[i+1:]
		}
		if opt == "" {
			return nil, fmt.Errorf("sandbox: empty --server-option %q", o)
		}
		if !strings.HasPrefix(opt, "--") {
			opt = "--" + opt
		}
		out = append(out, opt)
	}
	return out, nil
}

// Up starts every configured profile that is not already running and waits
// until each answers a query. Servers already running are reported as they
// are, unless cfg asks for another port or options than they run with: that
// is an error. On error, servers this call started are stopped again.
func Up(ctx context.Context, cfg Config) ([]Server, error) {
	profs, err := cfg.profiles()
	if err != nil {
		return nil, err
	}
	bin, err := findServer(cfg.Server)
	if err != nil {
		return nil, err
	}
	// Validate every profile's options before starting anything.
	opts := make([][]string, len(profs))
	for i, p := range profs {
		if opts[i], err = cfg.optionsFor(p); err != nil {
			return nil, err
		}
	}
	if err := checkNotDataDir(cfg.Dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("sandbox: create %s: %w", cfg.Dir, err)
	}
	var started, all []Server
	fail := func(err error) ([]Server, error) {
		for _, s := range started {
			_ = s.stop(context.Background())
		}
		return nil, err
	}
	for i, p := range profs {
		pdir := filepath.Join(cfg.Dir, p.Name)
		st, err := readState(pdir)
		if err != nil {
			return fail(err)
		}
		port := 0
		if cfg.Port != 0 {
			port = cfg.Port + i
		}
		if st != nil && st.running() {
			// Reported as it is, unless asked for another port or
			// options: a server said to be started with them that runs
			// without them is a silent surprise later.
			if err := st.runsAs(port, opts[i]); err != nil {
				return fail(err)
			}
			st.Running = true
			all = append(all, *st)
			continue
		}
		timeout := cfg.StartTimeout
		if timeout == 0 {
			timeout = 60 * time.Second
		}
		s, err := start(ctx, bin, p, pdir, port, opts[i], timeout)
		if err != nil {
			return fail(err)
		}
		started = append(started, s)
		all = append(all, s)
	}
	return all, nil
}

// Status reports every profile found in dir, running or not.
func Status(ctx context.Context, dir string) ([]Server, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sandbox: read %s: %w", dir, err)
	}
	var out []Server
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		st, err := readState(filepath.Join(dir, e.Name()))
		if err != nil || st == nil {
			continue // not ours; Status never claims foreign directories
		}
		st.Running = st.running()
		if st.Running {
			if v, err := queryVersion(ctx, st.DSN("")); err == nil {
				st.Version = v
			}
		}
		out = append(out, *st)
	}
	return out, nil
}

// Down stops the running servers of the given profiles (all found in dir when
// profiles is empty) and waits for them to exit. With purge, their
// directories, data included, are removed too.
func Down(ctx context.Context, dir string, profiles []string, purge bool) ([]Server, error) {
	var want map[string]bool
	if len(profiles) > 0 {
		want = map[string]bool{}
		for _, n := range profiles {
			p, err := LookupProfile(n)
			if err != nil {
				return nil, err
			}
			want[p.Name] = true
		}
	}
	all, err := Status(ctx, dir)
	if err != nil {
		return nil, err
	}
	var out []Server
	var errs []error
	for _, s := range all {
		if want != nil && !want[s.Profile] {
			continue
		}
		if err := s.stop(ctx); err != nil {
			errs = append(errs, err)
			continue
		}
		if purge {
			if err := os.RemoveAll(s.Dir); err != nil {
				errs = append(errs, fmt.Errorf("sandbox: purge %s: %w", s.Dir, err))
				continue
			}
		}
		s.Running = false
		out = append(out, s)
	}
	if purge && want == nil && len(errs) == 0 {
		// Remove the sandbox directory itself if nothing else is in it.
		_ = os.Remove(dir)
	}
	return out, errors.Join(errs...)
}

// checkNotDataDir refuses a sandbox directory that is itself some server's
// data directory: the sandbox would litter it, and a later --purge must never
// come near it.
func checkNotDataDir(dir string) error {
	for _, name := range []string{"mysql", "ibdata1", "aria_log_control", "ib_logfile0"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return fmt.Errorf("%w: %s looks like a MariaDB/MySQL data directory (it has %s); give tandem sandbox a directory of its own with --dir", ErrForeignDir, dir, name)
		}
	}
	return nil
}
