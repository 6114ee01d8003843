package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/tandemdb/tandem/internal/clitest"
	"github.com/tandemdb/tandem/replay"
	"github.com/tandemdb/tandem/sandbox/sandboxtest"
	"github.com/tandemdb/tandem/store"
)

var tandemBin string

// TestMain builds the real binary once; the tests run it as a user would.
func TestMain(m *testing.M) { os.Exit(clitest.Main(m, ".", &tandemBin)) }

// run runs tandem and returns stdout, stderr and the exit code.
func run(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(tandemBin, args...)
	cmd.Env = append(os.Environ(), env...)
	return runCmd(t, cmd)
}

// runCmd runs cmd and returns its stdout, stderr and exit status.
func runCmd(t *testing.T, cmd *exec.Cmd) (string, string, int) {
	t.Helper()
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

// runRefused runs a tandem command that must end by itself, refused
// (a proxy or replay): if it still runs after a minute, it is killed and
// the test fails, rather than hang until the test binary's timeout.
func runRefused(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, errs, code := runCmd(t, exec.CommandContext(ctx, tandemBin, args...))
	if ctx.Err() != nil {
		t.Fatalf("tandem %s: still running after a minute, not refused\n%s%s", strings.Join(args, " "), out, errs)
	}
	return out, errs, code
}

func TestCLIErrors(t *testing.T) {
	empty := t.TempDir()
	conf := t.TempDir()
	confFile := func(name, body string) string {
		p := filepath.Join(conf, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	replayConf := confFile("replay.yaml", "targets:\n  - name: x\n    dsn: root@tcp(127.0.0.1:1)/db\n")
	baselineConf := confFile("baseline.yaml", "shadows:\n  - name: x\n    dsn: root@tcp(127.0.0.1:1)/db\n    baseline: true\n")
	unreachableConf := confFile("shadows.yaml", "shadows:\n  - name: fromfile\n    dsn: root@tcp(127.0.0.1:1)/db\n    engine: rocksdb\n")
	hold, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	taken := hold.Addr().String()
	typoConf := confFile("typo.yaml", "targets:\n  - name: x\n    dsn: root@tcp(127.0.0.1:1)/db\n    enigne: rocksdb\n")
	synthCap := filepath.Join(t.TempDir(), "synth")
	if _, stderr, code := run(t, nil, "synth", "oltp_point_select", "--out", synthCap, "--events", "10"); code != 0 {
		t.Fatalf("synth: %s", stderr)
	}
	cases := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"unknown flag", nil, []string{"sandbox", "up", "--bogus"}, "unknown flag: --bogus; see 'tandem sandbox up --help'"},
		// It printed the help with exit status 0 (the servers stayed up).
		{"sandbox stop", nil, []string{"sandbox", "stop"}, `unknown command "stop" for "tandem sandbox" (did you mean "down"?); its commands: down, env, replicate, status, up`},
		{"sandbox typo", nil, []string{"sandbox", "statuss"}, `unknown command "statuss" for "tandem sandbox" (did you mean "status"?)`},
		{"unknown profile", nil, []string{"sandbox", "up", "--dir", t.TempDir(), "tokudb"}, `unknown profile "tokudb" (known profiles: innodb, innodb-lower-case, primary, reference, replica-innodb, replica-rocksdb, replica-zstd, rocksdb)`},
		{"no server", []string{"PATH=" + empty}, []string{"sandbox", "up", "--dir", t.TempDir()}, "install the Debian packages mariadb-server and mariadb-plugin-rocksdb"},
		{"status takes no args", nil, []string{"sandbox", "status", "extra"}, `unexpected argument "extra"`},
		{"env without servers", nil, []string{"sandbox", "env", "--dir", t.TempDir()}, "start them with 'tandem sandbox up'"},
		{"unknown command", nil, []string{"frobnicate"}, `unknown command "frobnicate"`},
		{"synth unknown workload", nil, []string{"synth", "tpcc", "--out", t.TempDir() + "/c", "--events", "1"}, `unknown workload "tpcc" (known: complex, nontrx, oltp_delete`},
		{"synth bad on/off", nil, []string{"synth", "oltp_read_write", "--out", t.TempDir() + "/c", "--skip-trx=maybe"}, "want on or off"},
		{"synth needs events", nil, []string{"synth", "oltp_read_write", "--out", t.TempDir() + "/c"}, "give --events or --duration"},
		{"synth two names of one setting", nil, []string{"synth", "oltp_read_write", "--out", t.TempDir() + "/c", "--duration", "5s", "--time", "10"}, "--duration and --time are one setting (--time is sysbench's name for it): give one"},
		{"synth bad time", nil, []string{"synth", "oltp_read_write", "--out", t.TempDir() + "/c", "--time", "2x"}, `invalid argument "2x" for "--time" flag: want whole seconds (as sysbench takes them) or a duration such as 90s; see 'tandem synth --help'`},
		{"synth seed twice", nil, []string{"synth", "oltp_read_write", "--out", t.TempDir() + "/c", "--events", "1", "--seed", "2", "--rand-seed", "3"}, "--seed and --rand-seed are one setting"},
		{"help unknown topic", nil, []string{"help", "replya"}, `unknown command "replya" for "tandem" (did you mean "replay"?); its commands: align, capture,`},
		{"help unknown subcommand", nil, []string{"help", "sandbox", "stop"}, `unknown command "stop" for "tandem sandbox" (did you mean "down"?)`},
		{"completion unknown shell", nil, []string{"completion", "nushell"}, `unknown command "nushell" for "tandem completion"; its commands: bash, fish, powershell, zsh; see 'tandem completion --help'`},
		{"prepare bad target", nil, []string{"prepare", "--target", "nodsn"}, "want name=DSN[,engine=X]"},
		{"prepare no targets", nil, []string{"prepare"}, "no targets; give --target"},
		{"prepare unreachable", nil, []string{"prepare", "--target", "x=root@tcp(127.0.0.1:1)/db"}, "target x: cannot query 127.0.0.1:1"},
		// prepare reads the file replay reads (it had no --config).
		{"prepare config unreachable", nil, []string{"prepare", "--config", replayConf}, "target x: cannot query 127.0.0.1:1"},
		{"prepare config and target share a name", nil, []string{"prepare", "--config", replayConf, "--target", "x=root@tcp(127.0.0.1:2)/db"},
			`two targets are named "x"; give each its own name (name=DSN)`},
		// footprint took the last of two baselines, silently.
		{"footprint two baselines", nil, []string{"footprint", "--target", "a=root@tcp(127.0.0.1:1)/db,baseline", "--target", "b=root@tcp(127.0.0.1:1)/db,baseline"},
			"targets a and b are both marked baseline; mark one"},
		{"align needs a capture", nil, []string{"align", "x=root@tcp(127.0.0.1:1)/db"}, "--capture DIR is required"},
		{"align a capture without a start point", nil, []string{"align", "--capture", synthCap, "x=root@tcp(127.0.0.1:1)/db"}, "has no start point: it was captured without --binlog-user"},
		{"align end of a capture without one", nil, []string{"align", "--capture", synthCap, "--end", "x=root@tcp(127.0.0.1:1)/db"}, "has no start point"},
		{"align names nothing", nil, []string{"align", "--capture", synthCap}, "name the replicas to align (NAME=DSN), or give --dump FILE"},
		{"align hold names nothing", nil, []string{"align", "--hold"}, "--hold: name the replicas (NAME=DSN)"},
		{"align hold with a capture", nil, []string{"align", "--hold", "--capture", synthCap, "--end", "x=root@tcp(127.0.0.1:1)/db"}, "--hold only stops the replicas' SQL threads, before a capture begins; --capture belongs to the later call that aligns them (tandem align --capture DIR NAME=DSN...)"},
		{"proxy shadow-replicas without shadows", nil, []string{"proxy", "--backend", "127.0.0.1:1", "--capture", empty + "/c9", "--shadow-replicas", "--metrics-addr", "off"},
			"--shadow-replicas: name the shadows"},
		{"sandbox bad topology", nil, []string{"sandbox", "up", "--dir", t.TempDir(), "--topology", "ring"}, `--topology "ring": the one topology is replication`},
		{"sandbox replicate without primary", nil, []string{"sandbox", "replicate", "--dir", t.TempDir(), "--databases", "sbtest"}, "has no running primary; start it with 'tandem sandbox up --topology replication'"},
		{"proxy needs backend", nil, []string{"proxy", "--metrics-addr", "off"}, "--backend is required"},
		{"proxy bad backend", nil, []string{"proxy", "--backend", "nohost", "--metrics-addr", "off"}, `backend "nohost" is not HOST:PORT`},
		{"proxy bad io", nil, []string{"proxy", "--backend", "127.0.0.1:1", "--io", "epoll", "--metrics-addr", "off"}, `--io "epoll": want poller or blocking`},
		{"proxy bad procs", nil, []string{"proxy", "--backend", "127.0.0.1:1", "--procs", "0", "--metrics-addr", "off"}, "--procs 0: want 1 or more"},
		// Shadows attach to every capture, started by flag or at runtime
		// (tandem capture start): without --capture they are still checked.
		{"proxy shadow without capture", nil, []string{"proxy", "--backend", "127.0.0.1:1", "--listen", "127.0.0.1:0", "--shadow", "x=root@tcp(127.0.0.1:1)/db", "--metrics-addr", "off"},
			"shadow x: target: unreachable: target x: cannot query 127.0.0.1:1"},
		{"proxy bad shadow", nil, []string{"proxy", "--backend", "127.0.0.1:1", "--capture", empty + "/c1", "--shadow", "nodsn", "--metrics-addr", "off"},
			`--shadow: target: bad target "nodsn": want name=DSN`},
		{"proxy bad shadow mode", nil, []string{"proxy", "--backend", "127.0.0.1:1", "--capture", empty + "/c2", "--shadow", "x=root@tcp(127.0.0.1:1)/db",
			"--shadow-mode", "sometimes", "--metrics-addr", "off"}, `--shadow-mode "sometimes": want all or read-only`},
		{"proxy unreachable shadow", nil, []string{"proxy", "--backend", "127.0.0.1:1", "--listen", "127.0.0.1:0", "--capture", empty + "/c3",
			"--shadow", "x=root@tcp(127.0.0.1:1)/db", "--metrics-addr", "off"}, "shadow x: target: unreachable: target x: cannot query 127.0.0.1:1"},
		{"proxy config without shadows", nil, []string{"proxy", "--backend", "127.0.0.1:1", "--capture", empty + "/c1", "--config", replayConf, "--metrics-addr", "off"},
			replayConf + " has no shadows: list; see 'tandem proxy --help'"},
		{"proxy config baseline shadow", nil, []string{"proxy", "--backend", "127.0.0.1:1", "--capture", empty + "/c1", "--config", baselineConf, "--metrics-addr", "off"},
			"shadow x: a shadow cannot be the baseline (the primary is)"},
		{"proxy config shadows without capture", nil, []string{"proxy", "--backend", "127.0.0.1:1", "--listen", "127.0.0.1:0", "--config", unreachableConf, "--metrics-addr", "off"},
			"shadow fromfile: target: unreachable: target fromfile: cannot query 127.0.0.1:1"},
		{"proxy config unreachable shadow", nil, []string{"proxy", "--backend", "127.0.0.1:1", "--listen", "127.0.0.1:0", "--capture", empty + "/c3",
			"--config", unreachableConf, "--metrics-addr", "off"}, "shadow fromfile: target: unreachable: target fromfile: cannot query 127.0.0.1:1"},
		{"replay without capture", nil, []string{"replay"}, "replay takes one capture directory"},
		{"replay without targets", nil, []string{"replay", empty}, "no targets; give --target"},
		{"replay missing capture", nil, []string{"replay", empty + "/nope", "--target", "x=root@tcp(127.0.0.1:1)/db"}, "not a tandem capture: " + empty + "/nope does not exist"},
		{"replay foreign directory", nil, []string{"replay", empty, "--target", "x=root@tcp(127.0.0.1:1)/db"}, "not a tandem capture: " + empty + " holds no Pebble store"},
		{"replay unknown io", nil, []string{"replay", empty, "--io", "epoll", "--target", "x=root@tcp(127.0.0.1:1)/db"}, `--io "epoll": want auto, blocking or poller`},
		{"replay negative speed", nil, []string{"replay", empty, "--speed", "-1", "--target", "x=root@tcp(127.0.0.1:1)/db"}, "--speed must not be negative"},
		// Values that were accepted silently (#29 item 11).
		{"replay NaN speed", nil, []string{"replay", synthCap, "--speed", "NaN", "--target", "x=root@tcp(127.0.0.1:1)/db"}, "--speed NaN: want 0 (no clock waits) or a factor from 0.001 to 1000"},
		{"replay tiny speed", nil, []string{"replay", synthCap, "--speed", "1e-300", "--target", "x=root@tcp(127.0.0.1:1)/db"}, "--speed 1e-300: want 0"},
		{"replay negative duration", nil, []string{"replay", synthCap, "--duration", "-1s", "--target", "x=root@tcp(127.0.0.1:1)/db"}, "--duration -1s must not be negative"},
		{"replay negative loop", nil, []string{"replay", synthCap, "--loop", "-2", "--target", "x=root@tcp(127.0.0.1:1)/db"}, "--loop -2: want 1 or more (passes over the capture)"},
		{"replay negative retries", nil, []string{"replay", synthCap, "--retries", "-1", "--target", "x=root@tcp(127.0.0.1:1)/db"}, "--retries -1 must not be negative (0: never retry)"},
		{"replay negative samples", nil, []string{"replay", synthCap, "--samples", "-1", "--target", "x=root@tcp(127.0.0.1:1)/db"}, "--samples -1 must not be negative"},
		{"replay negative target timeout", nil, []string{"replay", synthCap, "--target-timeout", "-1s", "--target", "x=root@tcp(127.0.0.1:1)/db"}, "--target-timeout -1s must not be negative (0: wait forever)"},
		{"replay blank engine", nil, []string{"replay", synthCap, "--target", "x=root@tcp(127.0.0.1:1)/db,engine="}, "engine= names no engine"},
		// --loop 1 (the default) given was refused as if no --loop came.
		{"sweep loop 1", nil, []string{"sweep", synthCap, "--loop", "1", "--metrics-addr", "off", "--target", "x=root@tcp(127.0.0.1:1)/db"}, "target x: cannot query 127.0.0.1:1"},
		{"sweep in its own words", nil, []string{"sweep", synthCap, "--loop", "1", "--order", "bogus", "--metrics-addr", "off", "--target", "x=root@tcp(127.0.0.1:1)/db"}, `tandem: sweep: --order "bogus": want capture or none`},
		{"sweep no length", nil, []string{"sweep", synthCap, "--target", "x=root@tcp(127.0.0.1:1)/db"}, "give --duration D (each point loops the capture that long) or --loop N"},
		{"sweep zero duration", nil, []string{"sweep", synthCap, "--duration", "0s", "--target", "x=root@tcp(127.0.0.1:1)/db"}, "--duration 0s: want how long each point runs, more than 0"},
		{"replay loop 0", nil, []string{"replay", synthCap, "--loop", "0", "--target", "x=root@tcp(127.0.0.1:1)/db"}, "--loop 0: want 1 or more"},
		// A wrong interface or ring left an empty capture in c4 behind
		// (checked below), and the retry was refused.
		{"capture unknown interface", nil, []string{"capture", "--interface", "tandem-nosuch0", empty + "/c4"}, `interface "tandem-nosuch0": route ip+net: no such network interface (ip link lists them`},
		{"capture ring too large", nil, []string{"capture", "--interface", "lo", "--ring-mb", "999999999", "--duration", "1s", empty + "/c4"}, "the kernel refused a packet ring of 999999999 MiB (--ring-mb; the default is 64)"},
		// "--auto-inc off" took on and made "off" an argument: the
		// message said to name a workload.
		{"on|off after a space", nil, []string{"synth", "oltp_read_only", "--out", empty + "/s1", "--events", "10", "--auto-inc", "off"}, `unexpected argument "off": --auto-inc takes its value with '=': --auto-inc=off (alone it means on)`},
		// Counts and durations out of range ran as the default before.
		{"prepare zero threads", nil, []string{"prepare", "--threads", "0", "--target", "x=root@tcp(127.0.0.1:1)/db"}, "--threads 0: want 1 or more"},
		{"prepare negative batch", nil, []string{"prepare", "--batch-rows", "-5", "--target", "x=root@tcp(127.0.0.1:1)/db"}, "--batch-rows -5: want 1 or more"},
		{"inspect top 0", nil, []string{"inspect", synthCap, "--top", "0"}, "--top 0: want 1 or more"},
		{"synth negative interval", nil, []string{"synth", "oltp_point_select", "--out", empty + "/s2", "--events", "10", "--stmt-interval", "-1s"}, "--stmt-interval -1s: want 0 or more"},
		{"replay negative report interval", nil, []string{"replay", synthCap, "--report-interval", "-1s", "--target", "x=root@tcp(127.0.0.1:1)/db"}, "--report-interval -1s: want 0 or more"},
		{"sweep zero prepare threads", nil, []string{"sweep", synthCap, "--duration", "1s", "--prepare-threads", "0", "--target", "x=root@tcp(127.0.0.1:1)/db"}, "--prepare-threads 0: want 1 or more"},
		// Said "not a tandem run: store: not a tandem capture" for all three.
		{"report missing", nil, []string{"report", empty + "/nope"}, "not a tandem run: " + empty + "/nope does not exist"},
		{"report empty", nil, []string{"report", empty}, "not a tandem run: " + empty + " holds no Pebble store"},
		{"report file", nil, []string{"report", replayConf}, "not a tandem run: " + replayConf + " is a file; a run is a directory"},
		{"root unknown flag", nil, []string{"--bogus"}, "unknown flag: --bogus; see 'tandem --help'"},
		{"sandbox bad port", nil, []string{"sandbox", "up", "--dir", empty + "/sb", "--port", "70000"}, "--port 70000 is not a TCP port (1-65535; 0: free ports)"},
		{"replay negative shards", nil, []string{"replay", synthCap, "--shards", "-1", "--target", "x=root@tcp(127.0.0.1:1)/db"}, "--shards -1: want the number of shards, 1 or more"},
		// Accepted and ignored before.
		{"proxy backend CA without TLS", nil, []string{"proxy", "--backend", "127.0.0.1:1", "--backend-ca", empty + "/ca.pem", "--metrics-addr", "off"}, "--backend-ca and --backend-insecure apply to TLS to the backend: give --backend-tls too"},
		{"log capture with a port", nil, []string{"capture", "--from-log", replayConf, "--format", "general", "--port", "3307", empty + "/c5"}, "--port applies to --from-pcap and --interface only"},
		// A request that could not succeed was sent; a token file others
		// can read was taken (the proxy refuses it).
		{"capture status off loopback", nil, []string{"capture", "status", "--proxy", "192.0.2.1:9470"}, "--proxy 192.0.2.1:9470 is not a loopback address: off loopback a proxy's capture controls need its token; give --admin-token-file FILE"},
		{"capture status open token", nil, []string{"capture", "status", "--admin-token-file", replayConf}, "--admin-token-file " + replayConf + " can be read by others than its owner (mode 0644); make it private: chmod 600"},
		// It said "synth: unknown distribution" to prepare.
		{"prepare rand type", nil, []string{"prepare", "--rand-type", "bogus", "--target", "x=root@tcp(127.0.0.1:1)/db"}, `--rand-type "bogus": want uniform, gaussian, special, pareto or zipfian`},
		// A run directory that is a file, or holds something: said of a
		// run (Pebble's "mkdir …: not a directory", a "capture directory").
		{"replay run is a file", nil, []string{"replay", synthCap, "--run", replayConf, "--target", "x=root@tcp(127.0.0.1:1)/db"}, "store: directory not empty: " + replayConf + " is a file; a run is a directory: choose a new one"},
		// It asked "is mariadb-server installed?" for the server's own
		// refusal of an option.
		{"sandbox bad server option", nil, []string{"sandbox", "up", "innodb", "--dir", t.TempDir(), "--server-option", "tandem-bogus-opt=1"}, "mariadbd: unknown variable 'tandem-bogus-opt=1'; last lines of "},
		{"sweep zero table size", nil, []string{"sweep", synthCap, "--duration", "1s", "--prepare-tables", "1", "--prepare-table-size", "0", "--target", "x=root@tcp(127.0.0.1:1)/db"},
			"--prepare-table-size 0: want at least 1 row per table"},
		{"prepare zero table size", nil, []string{"prepare", "--table-size", "0", "--target", "x=root@tcp(127.0.0.1:1)/db"}, "--table-size 0: want at least 1 row per table"},
		// A proxy that cannot start leaves no capture (#29 item 6: the
		// retry then failed with "already holds a capture").
		{"proxy port taken", nil, []string{"proxy", "--backend", "127.0.0.1:1", "--listen", taken, "--capture", empty + "/c1", "--metrics-addr", "off"}, "address already in use"},
		{"proxy metrics port taken", nil, []string{"proxy", "--backend", "127.0.0.1:1", "--listen", "127.0.0.1:0", "--capture", empty + "/c2", "--metrics-addr", taken},
			"metrics endpoint: listen tcp " + taken},
		{"proxy missing certificate", nil, []string{"proxy", "--backend", "127.0.0.1:1", "--listen", "127.0.0.1:0", "--capture", empty + "/c3", "--metrics-addr", "off",
			"--tls-cert", empty + "/nope.pem", "--tls-key", empty + "/nope.key"}, "load --tls-cert/--tls-key: open " + empty + "/nope.pem"},
		{"replay config unknown key", nil, []string{"replay", synthCap, "--config", typoConf}, `line 4: unknown key "enigne" (a target has name, dsn, engine, options, ca, baseline`},
	}
	if os.Geteuid() != 0 { // the ring is asked for only with CAP_NET_RAW
		cases = slices.DeleteFunc(cases, func(c struct {
			name string
			env  []string
			args []string
			want string
		}) bool {
			return c.name == "capture ring too large"
		})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stdout, stderr, code := run(t, c.env, c.args...)
			// A proxy that refuses to start leaves no capture behind.
			for _, d := range []string{"c1", "c2", "c3", "c4"} {
				if _, err := os.Stat(filepath.Join(empty, d)); err == nil {
					t.Errorf("%s: a capture directory %s was left behind", c.name, d)
				}
			}
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
	for _, args := range [][]string{{"sandbox", "up"}, {"sandbox", "down"}, {"sandbox", "env"}, {"sandbox", "status"}, {"inspect"}, {"proxy"}, {"synth"}, {"prepare"}, {"replay"}, {"report"}, {"sweep"}, {"footprint"}, {"pack"}, {"align"}, {"sandbox", "replicate"}, {"capture"}, {"capture", "start"}, {"capture", "stop"}, {"capture", "status"}} {
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
	var margs, ca string
	for _, l := range strings.Split(env, "\n") {
		if v, ok := strings.CutPrefix(l, "TANDEM_INNODB_MARIADB="); ok {
			margs = strings.Trim(v, "'")
		}
		if v, ok := strings.CutPrefix(l, "TANDEM_INNODB_CA="); ok {
			ca = strings.Trim(v, "'")
		}
	}
	q, err := exec.Command("mariadb", append(strings.Fields(margs), "-N", "-e", "SELECT @@default_storage_engine")...).CombinedOutput()
	if err != nil || strings.TrimSpace(string(q)) != "InnoDB" {
		t.Fatalf("mariadb %s: %q %v", margs, q, err)
	}
	// The server offers TLS, verified against the CA the sandbox printed.
	q, err = exec.Command("mariadb", append(strings.Fields(margs), "--ssl-ca="+ca, "--ssl-verify-server-cert", "-N", "-e", "SHOW STATUS LIKE 'Ssl_version'")...).CombinedOutput()
	if err != nil || !strings.Contains(string(q), "TLSv1.3") {
		t.Fatalf("mariadb with TLS verified by %q: %q %v", ca, q, err)
	}
	out, _, code = run(t, nil, "sandbox", "down", "--dir", dir, "--purge")
	if code != 0 || strings.TrimSpace(out) != "innodb: stopped and purged" {
		t.Fatalf("down: exit %d, %q", code, out)
	}
	out, _, _ = run(t, nil, "sandbox", "status", "--dir", dir)
	if !strings.Contains(out, "no sandbox in") {
		t.Fatalf("status after purge: %q", out)
	}
	// Nothing left to stop is said (it printed nothing), and is no failure.
	out, _, code = run(t, nil, "sandbox", "down", "--dir", dir)
	if code != 0 || out != "no sandbox in "+dir+": nothing to stop\n" {
		t.Fatalf("down again: exit %d, %q", code, out)
	}
	out, _, code = run(t, nil, "sandbox", "down", "rocksdb", "--dir", dir)
	if code != 0 || out != "rocksdb: not in the sandbox in "+dir+": nothing to stop\n" {
		t.Fatalf("down rocksdb: exit %d, %q", code, out)
	}
}

func TestCLIInspect(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cap")
	w, err := store.Create(dir, store.WriterOptions{Source: "cli-test", NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for i := 0; i < 30; i++ {
		rec := store.Record{Session: uint64(i % 3), Start: now.Add(time.Duration(i) * time.Millisecond), Kind: store.KindQuery,
			SQL: fmt.Sprintf("SELECT %d", i), Resp: store.Response{Kind: store.RespResultSet, Rows: 1}}
		if _, err := w.Append(&rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := run(t, nil, "inspect", dir, "--json")
	if code != 0 {
		t.Fatalf("inspect --json: exit %d: %s", code, stderr)
	}
	var rep struct {
		Records    uint64 `json:"records"`
		Sessions   int    `json:"sessions"`
		Source     string `json:"source"`
		TopDigests []struct {
			Text  string `json:"text"`
			Count uint64 `json:"count"`
		} `json:"top_digests"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("inspect --json printed invalid JSON: %v\n%s", err, out)
	}
	if rep.Records != 30 || rep.Sessions != 3 || rep.Source != "cli-test" || len(rep.TopDigests) != 1 || rep.TopDigests[0].Count != 30 || rep.TopDigests[0].Text != "select ?" {
		t.Fatalf("inspect --json = %+v", rep)
	}
	out, _, code = run(t, nil, "inspect", dir)
	if code != 0 || !strings.Contains(out, "30 in 3 sessions, 1 statement digest\n") {
		t.Fatalf("inspect: exit %d\n%s", code, out)
	}

	foreign := t.TempDir()
	os.WriteFile(filepath.Join(foreign, "x"), nil, 0o644)
	_, stderr, code = run(t, nil, "inspect", foreign)
	if code != 1 || !strings.Contains(stderr, "not a tandem capture") {
		t.Fatalf("inspect of a foreign dir: exit %d, %q", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(foreign, "LOCK")); err == nil {
		t.Fatalf("inspect left a LOCK file in a foreign directory")
	}
}

// The replay command as a user runs it: a paced synth capture against two
// identical InnoDB databases, the side-by-side text and the same as JSON.
func TestCLIReplay(t *testing.T) {
	srv := sandboxtest.Server(t, "innodb")
	_, a := srv.FreshDB(t)
	_, b := srv.FreshDB(t)
	targets := []string{"--target", "a=" + a, "--target", "b=" + b}
	if _, stderr, code := run(t, nil, append([]string{"prepare", "--tables", "1", "--table-size", "500"}, targets...)...); code != 0 {
		t.Fatalf("prepare: %s", stderr)
	}
	capDir := filepath.Join(t.TempDir(), "cap")
	if _, stderr, code := run(t, nil, "synth", "oltp_read_only", "--out", capDir, "--tables", "1", "--table-size", "500",
		"--threads", "2", "--rate", "100", "--duration", "1s"); code != 0 {
		t.Fatalf("synth: %s", stderr)
	}
	stdout, stderr, code := run(t, nil, append([]string{"replay", capDir, "--run", filepath.Join(t.TempDir(), "run"), "--report-interval", "500ms"}, targets...)...)
	if code != 0 {
		t.Fatalf("replay: exit %d: %s", code, stderr)
	}
	// Events arrive as a Poisson process: count them from the capture.
	inspect, _, _ := run(t, nil, "inspect", capDir, "--json")
	var summary struct {
		ByKind []struct {
			Kind  string `json:"kind"`
			Count int64  `json:"count"`
		} `json:"by_kind"`
	}
	if err := json.Unmarshal([]byte(inspect), &summary); err != nil {
		t.Fatalf("inspect --json: %v\n%s", err, inspect)
	}
	kinds := map[string]int64{}
	for _, k := range summary.ByKind {
		kinds[k.Kind] = k.Count
	}
	statements := kinds["execute"]
	trx := statements / 16 // oltp_read_only: BEGIN, 14 reads, COMMIT
	if statements == 0 || statements%16 != 0 || kinds["connect"] != 2 || kinds["prepare"] != 14 {
		t.Fatalf("capture kinds %v", kinds)
	}
	for _, want := range []string{
		"against 2 targets",
		"--io blocking;",
		fmt.Sprintf("%d (", trx), // transactions (per second)
		"lag ms p50/p95/p99/max",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("replay output lacks %q:\n%s", want, stdout)
		}
	}
	// Cells, not columns: a column is as wide as its widest cell, and the
	// lag row's cells grow on a slower machine.
	for label, want := range map[string]string{
		// Sessions replay their connects and prepares too.
		"compared with baseline": fmt.Sprintf("baseline|%d", statements+2+14),
		"divergent: row-content": "-|0",
	} {
		if got := strings.Join(reportCells(stdout, label), "|"); got != want {
			t.Errorf("replay output's row %q: cells %q, want %q:\n%s", label, got, want, stdout)
		}
	}
	if !strings.Contains(stderr, "] a thds: ") || !strings.Contains(stderr, "] b thds: ") {
		t.Errorf("no progress lines per target on stderr:\n%s", stderr)
	}
	if strings.Contains(stdout, "- (unpaced)") {
		t.Errorf("a paced replay shows no lag:\n%s", stdout)
	}

	stdout, stderr, code = run(t, nil, append([]string{"replay", capDir, "--speed", "0", "--concurrency", "2", "--io", "poller", "--json", "--run", filepath.Join(t.TempDir(), "run")}, targets...)...)
	if code != 0 {
		t.Fatalf("replay --json: exit %d: %s", code, stderr)
	}
	var rep struct {
		Points []struct {
			IO      string `json:"io"`
			Targets []struct {
				Name         string `json:"name"`
				Transactions int64  `json:"transactions"`
				Reads        int64  `json:"reads"`
				Connections  int64  `json:"connections"`
				Errors       int64  `json:"errors"`
				VsBaseline   *struct {
					Compared int64            `json:"compared"`
					ByClass  map[string]int64 `json:"by_class"`
				} `json:"divergences_from_baseline"`
			} `json:"targets"`
		} `json:"points"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || len(rep.Points) != 1 || len(rep.Points[0].Targets) != 2 {
		t.Fatalf("replay --json: %v\n%s", err, stdout)
	}
	pt := rep.Points[0]
	for _, tr := range pt.Targets {
		if tr.Transactions != trx || tr.Reads != trx*14 || tr.Connections != 2 || tr.Errors != 0 {
			t.Errorf("%+v; want %d transactions, %d reads, 2 connections, no errors", tr, trx, trx*14)
		}
	}
	if d := pt.Targets[1].VsBaseline; pt.Targets[0].VsBaseline != nil || d == nil || d.Compared != statements || len(d.ByClass) != 0 {
		t.Errorf("divergences %+v; want %d compared, none divergent", d, statements)
	}
	if pt.IO != "poller" {
		t.Errorf("report io %q, want poller (--io poller)", pt.IO)
	}
}

func TestProxyProcs(t *testing.T) {
	t.Setenv("GOMAXPROCS", "")
	os.Unsetenv("GOMAXPROCS")
	cpus := runtime.NumCPU()
	cases := []struct {
		flag int
		set  bool
		io   string
		want int
	}{
		{3, true, "poller", 3},
		{3, true, "blocking", 3},
		{0, false, "poller", max(1, cpus/4)},
		{0, false, "blocking", cpus},
	}
	for _, c := range cases {
		if got, err := proxyProcs(c.flag, c.set, c.io); err != nil || got != c.want {
			t.Errorf("proxyProcs(%d, %v, %s) = %d, %v; want %d", c.flag, c.set, c.io, got, err, c.want)
		}
	}
	if _, err := proxyProcs(0, true, "poller"); err == nil {
		t.Error("--procs 0 accepted")
	}
	t.Setenv("GOMAXPROCS", "5")
	if got, _ := proxyProcs(0, false, "poller"); got != runtime.GOMAXPROCS(0) {
		t.Errorf("with GOMAXPROCS set: %d, want the runtime's %d", got, runtime.GOMAXPROCS(0))
	}
}

// A run is a document: `tandem report RUN` prints exactly what `tandem
// replay` printed when the run ended, as JSON and as text, here for two
// targets that diverge (one row differs on b).
func TestCLIReportEqualsReplay(t *testing.T) {
	srv := sandboxtest.Server(t, "innodb")
	_, a := srv.FreshDB(t)
	dbb, b := srv.FreshDB(t)
	targets := []string{"--target", "a=" + a, "--target", "b=" + b}
	if _, stderr, code := run(t, nil, append([]string{"prepare", "--tables", "1", "--table-size", "200"}, targets...)...); code != 0 {
		t.Fatalf("prepare: %s", stderr)
	}
	if _, err := dbb.Exec("UPDATE sbtest1 SET c = 'changed' WHERE id % 2 = 0"); err != nil {
		t.Fatal(err)
	}
	capDir := filepath.Join(t.TempDir(), "cap")
	if _, stderr, code := run(t, nil, "synth", "oltp_read_only", "--out", capDir, "--tables", "1", "--table-size", "200",
		"--threads", "1", "--events", "40", "--seed", "3"); code != 0 {
		t.Fatalf("synth: %s", stderr)
	}
	runDir := filepath.Join(t.TempDir(), "run")
	replayJSON, stderr, code := run(t, nil, append([]string{"replay", capDir, "--speed", "0", "--json", "--run", runDir}, targets...)...)
	if code != 0 {
		t.Fatalf("replay: exit %d: %s", code, stderr)
	}
	reportJSON, stderr, code := run(t, nil, "report", runDir, "--format", "json")
	if code != 0 {
		t.Fatalf("report: exit %d: %s", code, stderr)
	}
	if replayJSON != reportJSON {
		t.Fatalf("report --format json differs from replay --json:\n--- replay\n%s\n--- report\n%s", replayJSON, reportJSON)
	}
	var rep struct {
		Points []struct {
			Targets []struct {
				VsBaseline *struct {
					ByClass map[string]int64 `json:"by_class"`
				} `json:"divergences_from_baseline"`
			} `json:"targets"`
		} `json:"points"`
	}
	if err := json.Unmarshal([]byte(reportJSON), &rep); err != nil {
		t.Fatal(err)
	}
	if d := rep.Points[0].Targets[1].VsBaseline; d == nil || d.ByClass["row-content"] == 0 {
		t.Fatalf("no row-content divergences to compare: %+v", d)
	}
	// Text too: a second replay's text and its report's text agree.
	runDir2 := filepath.Join(t.TempDir(), "run")
	replayText, _, code := run(t, nil, append([]string{"replay", capDir, "--speed", "0", "--run", runDir2}, targets...)...)
	reportText, _, code2 := run(t, nil, "report", runDir2)
	if code != 0 || code2 != 0 || replayText != reportText {
		t.Fatalf("report text differs from replay text:\n--- replay\n%s\n--- report\n%s", replayText, reportText)
	}
	for _, bad := range [][]string{{"report"}, {"report", capDir}, {"report", runDir, "--format", "yaml"}} {
		_, stderr, code := run(t, nil, bad...)
		if code != 1 || !strings.HasPrefix(stderr, "tandem: ") {
			t.Errorf("tandem %v: exit %d, %q", bad, code, stderr)
		}
	}
	if _, stderr, _ := run(t, nil, "report", capDir); !strings.Contains(stderr, "is a capture; 'tandem report' reads the run directories") {
		t.Errorf("report of a capture: %q", stderr)
	}
}

// The flags replay and sweep share are one definition: same defaults,
// same help, and those defaults are what a zero replay.Config runs (so a
// shadow, which sets none of them, runs the same gate). The proxy's
// --shadow-target-timeout means what --target-timeout means.
func TestSharedFlagsAgree(t *testing.T) {
	rp, sw, px := newReplayCmd().Flags(), newSweepCmd().Flags(), newProxyCmd().Flags()
	for _, name := range []string{"order-inflight", "order-timeout", "retries", "target-timeout", "on-unrewritable", "skip-damaged", "target", "config", "order", "unpack-dir", "run-id", "report-interval", "metrics-addr", "metrics-linger", "pprof", "json"} {
		a, b := rp.Lookup(name), sw.Lookup(name)
		if a == nil || b == nil {
			t.Errorf("--%s: replay has it %v, sweep %v", name, a != nil, b != nil)
			continue
		}
		if a.DefValue != b.DefValue {
			t.Errorf("--%s: default %q in replay, %q in sweep", name, a.DefValue, b.DefValue)
		}
	}
	for name, want := range map[string]string{"order-inflight": replay.DefaultOrderInflight.String(), "order-timeout": replay.DefaultOrderTimeout.String(),
		"retries": fmt.Sprint(replay.DefaultRetries), "target-timeout": replay.DefaultTargetTimeout.String()} {
		if got := rp.Lookup(name).DefValue; got != want {
			t.Errorf("--%s defaults to %s, a zero replay.Config to %s", name, got, want)
		}
	}
	// Every command that takes targets reads them the same way.
	for _, cmd := range []*cobra.Command{newSweepCmd(), newFootprintCmd(), newPrepareCmd()} {
		for _, name := range []string{"target", "config"} {
			a, b := rp.Lookup(name), cmd.Flags().Lookup(name)
			if b == nil || !strings.HasPrefix(b.Usage, a.Usage) || b.DefValue != a.DefValue { // a command may add what it needs of the DSN
				t.Errorf("%s --%s: %v; want replay's %q", cmd.Name(), name, b, a.Usage)
			}
		}
	}
	st := px.Lookup("shadow-target-timeout")
	if st.DefValue != rp.Lookup("target-timeout").DefValue || !strings.Contains(st.Usage, "0: wait forever") {
		t.Errorf("--shadow-target-timeout %s %q; --target-timeout %s", st.DefValue, st.Usage, rp.Lookup("target-timeout").DefValue)
	}
	var g gateFlags
	c := replay.Config{}
	if err := g.apply(&c); err != nil {
		t.Fatal(err)
	}
	if c.Retries != -1 || c.TargetTimeout != -1 {
		t.Errorf("--retries 0 --target-timeout 0 give Config.Retries %d, TargetTimeout %v: want never (-1) and forever (-1)", c.Retries, c.TargetTimeout)
	}
}

// inspect --verify reads past a damaged file and says what is readable,
// which file is damaged and the records it holds; a whole capture is
// whole. (Before: one flipped byte panicked every reader.)
func TestInspectVerify(t *testing.T) {
	capDir := filepath.Join(t.TempDir(), "cap")
	if _, stderr, code := run(t, nil, "synth", "oltp_read_write", "--out", capDir, "--threads", "4", "--events", "20000"); code != 0 {
		t.Fatalf("synth: %s", stderr)
	}
	out, stderr, code := run(t, nil, "inspect", capDir, "--verify")
	if code != 0 || !strings.Contains(out, ": 400096 records readable") || !strings.Contains(out, ": whole") {
		t.Fatalf("whole capture: exit %d %s\n%s", code, stderr, out)
	}
	ssts, _ := filepath.Glob(filepath.Join(capDir, "*.sst"))
	if len(ssts) < 3 {
		t.Fatalf("%d table files, want several", len(ssts))
	}
	b, err := os.ReadFile(ssts[1])
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(ssts[1], b, 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, code = run(t, nil, "inspect", capDir, "--verify")
	// The damaged file may hold the last records (and the index after
	// them): "records N to the last".
	m := regexp.MustCompile(`: (\d+) records readable\ndamaged: ` + regexp.QuoteMeta(filepath.Base(ssts[1])) + `, which holds records (\d+) to (\d+|the last) `).FindStringSubmatch(out)
	if code != 1 || m == nil || !strings.Contains(stderr, "is damaged: restore it from a good copy (replay refuses it; replay --skip-damaged") {
		t.Fatalf("damaged capture: exit %d %s\n%s", code, stderr, out)
	}
	readable, _ := strconv.Atoi(m[1])
	from, _ := strconv.Atoi(m[2])
	to, err := strconv.Atoi(m[3])
	toLast := err != nil
	if toLast {
		to = 400096 // the last: records are numbered from 1
	}
	// Everything outside the damaged file is read, and some of it too.
	if outside := 400096 - (to - from + 1); readable < outside || readable >= 400096 {
		t.Errorf("%d records readable, with %d outside the damaged file", readable, outside)
	}
	if _, stderr, code := run(t, nil, "inspect", capDir); code != 1 || !strings.Contains(stderr, "is damaged (") || strings.Contains(stderr, "panic") {
		t.Errorf("plain inspect of a damaged capture: exit %d %s", code, stderr)
	}
	// A reader that passes damage (replay --skip-damaged) reads exactly
	// what Verify could, and names the file it passed over.
	r, err := store.Open(capDir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.PassDamaged()
	var n int
	var gaps store.SeqGaps
	for rec, err := range r.Records() {
		if err != nil {
			t.Fatalf("passing damage, after %d records: %v", n, err)
		}
		gaps.Note(rec.Seq)
		n++
	}
	// Passing a file that held the records to the last, reading ends
	// there: no gap after it, and no seq for its last record.
	wantTo, wantMissing := uint64(to), uint64(400096-readable)
	if toLast {
		wantTo, wantMissing = 0, 0
	}
	if d := r.Damaged(); n != readable || len(d) != 1 || d[0].File != filepath.Base(ssts[1]) || d[0].To != wantTo || d[0].ToLast != toLast || gaps.Missing != wantMissing {
		t.Errorf("passing damage: %d records (want %d), %d lost, damaged %+v", n, readable, gaps.Missing, d)
	}
}

// reportCells is the cells of the text report's row labelled label (the
// first such row): what follows the label, split at runs of two or more
// spaces; nil without such a row.
func reportCells(out, label string) []string {
	for line := range strings.Lines(out) {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), label)
		if !ok || rest == "" || !strings.HasPrefix(rest, "  ") {
			continue
		}
		var cells []string
		for c := range strings.SplitSeq(strings.TrimSpace(rest), "  ") {
			if c = strings.TrimSpace(c); c != "" {
				cells = append(cells, c)
			}
		}
		return cells
	}
	return nil
}

// footprint measured "0 tables" with exit status 0 for a database, or
// tables, that are not there; now each is an error that names it. A
// refused login is said to be one.
func TestFootprintRefusesWhatIsNotThere(t *testing.T) {
	t.Parallel()
	srv := sandboxtest.Server(t, "innodb")
	_, dsn := srv.FreshDB(t)
	if _, stderr, code := run(t, nil, "prepare", "--tables", "1", "--table-size", "10", "--target", "a="+dsn); code != 0 {
		t.Fatalf("prepare: %s", stderr)
	}
	out, stderr, code := run(t, nil, "footprint", "--target", "a="+dsn, "--tables", "sbtest1")
	if code != 0 || !strings.HasPrefix(out, "a: 1 tables, ") {
		t.Fatalf("footprint: exit %d: %s%s", code, out, stderr)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--target", "a=" + srv.DSN("tandem_no_such_db")}, `tandem: target: no such database: target a: database "tandem_no_such_db" does not exist on `},
		{[]string{"--target", "a=" + dsn, "--tables", "sbtest1,nosuch"}, "tandem: target a: no table nosuch in database "},
		// A refused login was "unreachable", pointing at the network.
		{[]string{"--target", "a=" + strings.Replace(dsn, "root@", "root:Pw_Wrong_1@", 1)}, "tandem: target: login refused: target a: " + srv.Addr() + " refused the login: Error 1045 (28000): Access denied for user 'root'@'localhost' (using password: YES); check the DSN's user and password"},
	} {
		_, stderr, code := run(t, nil, append([]string{"footprint"}, c.args...)...)
		if code != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("footprint %v: exit %d, %q; want %q", c.args, code, stderr, c.want)
		}
	}
}

// proxy --binlog-user without $TANDEM_BINLOG_PASSWORD: the server's 1045
// says "using password: NO", and the error says where the password is
// read from (before, only the server's words).
func TestBinlogUserWithoutPasswordSaysWhere(t *testing.T) {
	t.Parallel()
	srv := sandboxtest.Server(t, "innodb")
	dir := filepath.Join(t.TempDir(), "cap")
	_, stderr, code := run(t, []string{"TANDEM_BINLOG_PASSWORD="}, "proxy", "--backend", srv.Addr(), "--listen", "127.0.0.1:0", "--metrics-addr", "off", "--capture", dir, "--binlog-user", "tandem_no_such_repl")
	want := "(using password: NO) (the --binlog-user account's password is read from $TANDEM_BINLOG_PASSWORD, which is not set or empty)"
	if code != 1 || !strings.Contains(stderr, want) {
		t.Fatalf("exit %d, %q; want %q", code, stderr, want)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("a capture was left in %s", dir)
	}
}

// go-sql-driver's notes lose the driver's source position and say who
// speaks.
func TestDriverLogLine(t *testing.T) {
	for in, want := range map[string]string{
		"packets.go:58 read tcp 127.0.0.1:1->127.0.0.1:2: read: connection reset by peer": "read tcp 127.0.0.1:1->127.0.0.1:2: read: connection reset by peer",
		"busy buffer": "busy buffer",
	} {
		if got := driverPos.ReplaceAllString(in, ""); got != want {
			t.Errorf("%q → %q, want %q", in, got, want)
		}
	}
}

// synth's --time is sysbench's: whole seconds (a Go duration too); it was
// a Go duration only, and sysbench's --time=3 was refused.
func TestSynthTimeTakesSysbenchSeconds(t *testing.T) {
	for _, c := range []struct {
		arg  string
		want string
	}{{"3", "synthetic timeline 3.000s"}, {"1500ms", "synthetic timeline 1.500s"}} {
		out, stderr, code := run(t, nil, "synth", "oltp_point_select", "--out", filepath.Join(t.TempDir(), "c"), "--time", c.arg)
		if code != 0 || !strings.Contains(out, c.want) {
			t.Errorf("synth --time %s: exit %d, %q%s; want %q", c.arg, code, out, stderr, c.want)
		}
	}
}

// tandem help completes command names and lists --help, as cobra's own
// help command did before Tandem's replaced it (to refuse unknown topics).
func TestHelpCompletesAndListsHelpFlag(t *testing.T) {
	out, _, code := run(t, nil, "__complete", "help", "sa")
	if code != 0 || !strings.HasPrefix(out, "sandbox\tStart, show and stop") {
		t.Errorf("__complete help sa: exit %d, %q; want sandbox", code, out)
	}
	out, _, code = run(t, nil, "help", "replay")
	if code != 0 || !strings.Contains(out, "-h, --help") {
		t.Errorf("help replay: exit %d, no -h, --help line in %q", code, out)
	}
}
