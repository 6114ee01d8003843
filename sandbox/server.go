package sandbox

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/tandemdb/tandem/internal/freeport"
)

const stateFile = "sandbox.json"

// Server describes one sandboxed server. It is also what sandbox.json holds.
type Server struct {
	Profile string    `json:"profile"`
	Engine  string    `json:"engine"`
	Dir     string    `json:"dir"`
	Port    int       `json:"port"`
	PID     int       `json:"pid"`
	Started time.Time `json:"started"`
	Version string    `json:"version,omitempty"`
	// Running is filled in by Status and Up; it is not stored.
	Running bool `json:"-"`
}

// Addr is the server's TCP address.
func (s Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)) }

// DSN is a go-sql-driver DSN for root on the server, for database db ("" for none).
func (s Server) DSN(db string) string {
	c := mysql.NewConfig()
	c.User = "root"
	c.Net = "tcp"
	c.Addr = s.Addr()
	c.DBName = db
	return c.FormatDSN()
}

func (s Server) dataDir() string { return filepath.Join(s.Dir, "data") }

// tmpDir is the server's own tmpdir. A MariaDB server deletes every
// "#sql*" file in its tmpdir when it starts (leftover temporary tables, it
// assumes), so servers sharing /tmp delete each other's temporary tables:
// a sandbox starting while another ran mariadb-install-db made that
// install fail ("Unknown table 'mysql.tmp_proxies_priv'").
func (s Server) tmpDir() string    { return filepath.Join(s.Dir, "tmp") }
func (s Server) errorLog() string  { return filepath.Join(s.Dir, "error.log") }
func (s Server) statePath() string { return filepath.Join(s.Dir, stateFile) }

// readState returns the state of the profile directory dir, nil if dir does
// not exist, or ErrForeignDir if dir exists with content but is not ours.
func readState(dir string) (*Server, error) {
	// Servers are started with absolute paths, and running() matches them.
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err == nil {
		var s Server
		if err := json.Unmarshal(b, &s); err != nil {
			return nil, fmt.Errorf("%w: %s has an unreadable %s (%v); move it away or remove it", ErrForeignDir, dir, stateFile, err)
		}
		s.Dir = dir
		return &s, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("sandbox: read %s: %w", filepath.Join(dir, stateFile), err)
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sandbox: read %s: %w", dir, err)
	}
	if len(entries) > 0 {
		return nil, fmt.Errorf("%w: %s is not empty and has no %s, so it was not made by tandem sandbox; choose another --dir or move it away", ErrForeignDir, dir, stateFile)
	}
	return nil, nil
}

func (s Server) writeState() error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := s.statePath() + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("sandbox: write state: %w", err)
	}
	return os.Rename(tmp, s.statePath())
}

// runsAs checks that the running server s listens on port (0: any) and
// was started with every one of opts (its command line holds them; an
// option's name matches with - or _ alike, as the server reads it).
func (s Server) runsAs(port int, opts []string) error {
	if port != 0 && s.Port != port {
		return fmt.Errorf("sandbox: profile %s already runs on port %d (pid %d), not %d as --port asks; stop it first (tandem sandbox down %s) or leave --port out",
			s.Profile, s.Port, s.PID, port, s.Profile)
	}
	if len(opts) == 0 {
		return nil
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", s.PID))
	if err != nil {
		return fmt.Errorf("sandbox: profile %s (pid %d): reading its options: %w", s.Profile, s.PID, err)
	}
	args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	for i := range args {
		args[i] = optionSpelling(args[i])
	}
	for _, o := range opts {
		if !slices.Contains(args, optionSpelling(o)) {
			return fmt.Errorf("sandbox: profile %s already runs (port %d, pid %d) without the server option %s; stop it first (tandem sandbox down %s) to start it with the option",
				s.Profile, s.Port, s.PID, strings.TrimPrefix(o, "--"), s.Profile)
		}
	}
	return nil
}

// optionSpelling is a server option as the server reads it: "_" and "-"
// in its name alike.
func optionSpelling(o string) string {
	name, value, ok := strings.Cut(o, "=")
	name = strings.ReplaceAll(name, "_", "-")
	if !ok {
		return name
	}
	return name + "=" + value
}

// running reports whether the recorded process is alive and is the server
// for this directory (a recycled pid belonging to another program is not).
func (s Server) running() bool {
	if s.PID <= 0 {
		return false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", s.PID))
	if err != nil {
		return false
	}
	if !bytes.Contains(cmdline, []byte("--datadir="+s.dataDir())) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.PID))
	if err != nil {
		return false
	}
	// A zombie (state Z) has exited; it only waits to be reaped.
	if i := bytes.LastIndexByte(stat, ')'); i > 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
		return false
	}
	return true
}

// findServer resolves the mariadbd binary.
func findServer(explicit string) (string, error) {
	if explicit != "" {
		p, err := exec.LookPath(explicit)
		if err != nil {
			return "", fmt.Errorf("%w: %s: %v", ErrNoServer, explicit, err)
		}
		return p, nil
	}
	for _, name := range []string{"mariadbd", "mysqld"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: neither mariadbd nor mysqld is on PATH; install the Debian packages mariadb-server and mariadb-plugin-rocksdb (make deps does it), or add /usr/sbin to PATH", ErrNoServer)
}

// findInstallDB finds mariadb-install-db next to the server or on PATH.
func findInstallDB(server string) (string, error) {
	var tried []string
	for _, name := range []string{"mariadb-install-db", "mysql_install_db"} {
		for _, dir := range []string{filepath.Dir(server), filepath.Join(filepath.Dir(server), "..", "bin"), filepath.Join(filepath.Dir(server), "..", "scripts")} {
			p := filepath.Join(dir, name)
			tried = append(tried, p)
			if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
				return p, nil
			}
		}
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: mariadb-install-db not found on PATH nor in %s; install the Debian package mariadb-server", ErrNoServer, strings.Join(tried, ", "))
}

// freePort picks a free loopback port outside the ephemeral range, so
// that no client's outgoing connection takes it while the server is
// initialised and started (see package freeport).
func freePort() (int, error) {
	p, err := freeport.Port()
	if err != nil {
		return 0, fmt.Errorf("sandbox: %w", err)
	}
	return p, nil
}

func checkPortFree(port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("%w: 127.0.0.1:%d is taken (%v); pick another --port or leave it out to get a free one", ErrPortInUse, port, err)
	}
	return l.Close()
}

// start initialises pdir if needed and starts profile p's server in it.
func start(ctx context.Context, bin string, p Profile, pdir string, port int, extra []string, timeout time.Duration) (Server, error) {
	s := Server{Profile: p.Name, Engine: p.Engine, Dir: pdir}
	abs, err := filepath.Abs(pdir)
	if err != nil {
		return s, err
	}
	s.Dir = abs
	if port == 0 {
		if port, err = freePort(); err != nil {
			return s, err
		}
	} else if err := checkPortFree(port); err != nil {
		return s, err
	}
	s.Port = port
	// Claim the directory before anything else goes into it.
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return s, fmt.Errorf("sandbox: create %s: %w", s.Dir, err)
	}
	if err := s.writeState(); err != nil {
		return s, err
	}

	root := os.Geteuid() == 0
	if err := os.MkdirAll(s.tmpDir(), 0o755); err != nil {
		return s, err
	}
	if _, err := os.Stat(filepath.Join(s.dataDir(), "mysql")); errors.Is(err, os.ErrNotExist) {
		if err := newDataDir(ctx, bin, s.dataDir(), s.tmpDir(), root); err != nil {
			return s, err
		}
	}

	args := []string{
		"--no-defaults",
		"--datadir=" + s.dataDir(),
		"--tmpdir=" + s.tmpDir(),
		"--port=" + strconv.Itoa(port),
		"--bind-address=127.0.0.1",
		"--socket=" + filepath.Join(s.Dir, "mysqld.sock"),
		"--pid-file=" + filepath.Join(s.Dir, "mysqld.pid"),
		"--log-error=" + s.errorLog(),
		"--max-allowed-packet=256M",
		"--character-set-server=utf8mb4",
		"--collation-server=utf8mb4_general_ci",
	}
	if root {
		args = append([]string{args[0], "--user=root"}, args[1:]...)
	}
	tlsArgs, err := s.tlsOptions()
	if err != nil {
		return s, err
	}
	args = append(args, tlsArgs...)
	args = append(args, p.Options...)
	args = append(args, extra...)

	logf, err := os.OpenFile(s.errorLog(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return s, fmt.Errorf("sandbox: open error log: %w", err)
	}
	defer logf.Close()
	logStart, _ := logf.Seek(0, 2)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return s, fmt.Errorf("%w: %s: %v", ErrStartFailed, bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }() // reaps the server if it exits while we own it
	s.PID = cmd.Process.Pid
	s.Started = time.Now().UTC()

	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		v, qerr := queryVersion(ctx, s.DSN(""))
		if qerr == nil {
			s.Version = v
			break
		}
		select {
		case werr := <-exited:
			tail := tailFrom(s.errorLog(), logStart, 12)
			// The server's own [ERROR] says what was wrong (an unknown
			// --server-option was "is mariadb-server installed?").
			why := serverError(tail)
			if why == "" || strings.Contains(why, "shared library") || strings.Contains(why, "plugin") {
				why += fmt.Sprintf("; is %s installed?", p.Package)
			}
			return s, fmt.Errorf("%w: profile %s exited (%v): %s; last lines of %s:\n%s",
				ErrStartFailed, p.Name, werr, strings.TrimPrefix(why, "; "), s.errorLog(), tail)
		case <-ctx.Done():
			_ = cmd.Process.Signal(syscall.SIGTERM)
			return s, fmt.Errorf("%w: profile %s did not answer on %s within %s (last error: %v); see %s",
				ErrStartFailed, p.Name, s.Addr(), timeout, qerr, s.errorLog())
		case <-time.After(50 * time.Millisecond):
		}
	}
	if err := s.writeState(); err != nil {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		return s, err
	}
	s.Running = true
	return s, nil
}

// installDB runs the install tool with args into dataDir.
func installDB(ctx context.Context, tool string, args []string, dataDir, tmpDir string) error {
	// --tmpdir goes through to the bootstrap server (see Server.tmpDir).
	args = append(args[:len(args):len(args)], "--datadir="+dataDir, "--tmpdir="+tmpDir)
	out, err := exec.CommandContext(ctx, tool, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%w: %s failed: %v\n%s", ErrStartFailed, tool, err, installErrors(string(out)))
	}
	return nil
}

// queryVersion connects and returns SELECT VERSION().
func queryVersion(ctx context.Context, dsn string) (string, error) {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return "", err
	}
	defer db.Close()
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var v string
	err = db.QueryRowContext(cctx, "SELECT VERSION()").Scan(&v)
	return v, err
}

// stop sends SIGTERM and waits for the process to go away.
func (s Server) stop(ctx context.Context) error {
	if !s.running() {
		s.PID = 0
		return s.writeState()
	}
	proc, err := os.FindProcess(s.PID)
	if err != nil {
		return err
	}
	if err := proc.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("sandbox: stop %s (pid %d): %w", s.Profile, s.PID, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for s.running() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("sandbox: %s (pid %d) still running after SIGTERM; see %s", s.Profile, s.PID, s.errorLog())
		case <-time.After(20 * time.Millisecond):
		}
	}
	s.PID = 0
	return s.writeState()
}

func tailFrom(path string, off int64, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if off > 0 && off <= int64(len(b)) {
		b = b[off:]
	}
	return lastLines(string(b), n)
}

// installErrors picks from mariadb-install-db's output what says why it
// failed: the server's [ERROR] lines (its last lines are a generic footer
// about bug reports), or the last lines when there are none.
func installErrors(out string) string {
	var errs []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "[ERROR]") || strings.HasPrefix(strings.TrimSpace(l), "ERROR") {
			errs = append(errs, l)
		}
	}
	if len(errs) == 0 {
		return lastLines(out, 12)
	}
	return lastLines(strings.Join(errs, "\n"), 12)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + strings.Join(lines, "\n  ")
}

// serverError is the first [ERROR] of a server's log lines that says
// something ("Aborting" does not), without its time stamp, or "".
func serverError(tail string) string {
	for _, l := range strings.Split(tail, "\n") {
		_, msg, ok := strings.Cut(l, "[ERROR] ")
		if ok && strings.TrimSpace(msg) != "Aborting" {
			return strings.TrimSpace(msg)
		}
	}
	return ""
}
