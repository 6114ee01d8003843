package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"github.com/tandemdb/tandem/gtid"
	"github.com/tandemdb/tandem/proxy"
	"github.com/tandemdb/tandem/replay"
	"github.com/tandemdb/tandem/shadow"
	"github.com/tandemdb/tandem/store"
	"github.com/tandemdb/tandem/targets"
)

func newProxyCmd() *cobra.Command {
	var cfg proxy.RunConfig
	var logLevel string
	var procs int
	var sh shadow.Config
	var configFile string
	var binlogUser string
	var shadowReplicas bool
	var keys keyFlag
	cmd := &cobra.Command{
		Use:   "proxy --backend HOST:PORT [--capture DIR]",
		Short: "Relay MySQL clients to a server and record every command exchange",
		Long: `Clients connect to the proxy exactly as they would to the server: the
handshake and authentication are relayed (passwords are never seen in clear
nor stored), then every command and response. With --capture, each exchange is
recorded — command, typed parameters, timing, a summary of the response — into
a new capture directory, for 'tandem inspect' and replay. Recording never slows
clients: when the disk falls behind, records are dropped and counted.

Without --capture the proxy relays and records nothing until asked: a
capture is started and stopped at runtime with 'tandem capture start DIR'
and 'tandem capture stop', while clients stay connected (sessions already
open join it with their state). The capture controls are served on the
metrics address (--metrics-addr, loopback by default); on any other
address they need --admin-token-file, and --admin=false turns them off.
With --capture-root, captures started at runtime must be inside it.
Shadows and --binlog-user attach to every capture, started by flag or at
runtime.

Shadows (--shadow, repeatable) replay the capture as it is written, each on
a server of its own — a copy of the primary on another engine — with the
replay engine (sessions, prepared statements, the capture's order, the
client's deadlock retries), and compare every statement with the primary's
captured response (row checksums are captured automatically). A shadow may
also be a database of the primary's server or another shadow's (never the
same database): its XA transactions get xids of their own (~tandemN in the
branch qualifier), since a server's xids are not a database's. Clients are
served by the primary exactly as without shadows: each shadow runs in a
worker process of its own (its heap, garbage collector and crashes are
not the proxy's), fed the capture's committed records by the proxy, which
only reads the capture log for it; the worker keeps them in a copy,
CAPTURE.shadows/NAME.feed, removed at its end. A shadow whose server goes
down waits and retries with
backoff, then catches up from the log; one further behind than
--shadow-max-lag skips ahead at transaction boundaries and counts what it
skipped (differences on the tables of skipped writes are counted apart).
Every --shadow-status-interval a log line gives each shadow's state, lag,
divergences by class, and p95 latency per class against the primary's; /metrics has tandem_shadow_* and the shadows'
latencies (tandem_replay_*, run="shadow-NAME"). On shutdown each shadow
replays what the capture holds, then its run directory
(CAPTURE.shadows/NAME) is a replay's: 'tandem report' reads it. With
--binlog-user, writes that bypassed the proxy (found in the binary log at
the capture's stop) never reached the shadows: their final comparison
counts the answers on those tables from then on apart (bypassed-write);
the live counters cannot know them before the stop.

With --binlog-user, the capture knows where it starts and ends in the
backend's history (a MariaDB or MySQL server with a binary log and GTIDs):
it records the server's identity and GTID position before the first client
is served and after the last session ends, and (MariaDB) each captured
commit's GTID, asked on the session's own connection (SELECT @@last_gtid,
sent with the client's next command after a transaction that wrote, held
back while that command reads ROW_COUNT(), FOUND_ROWS() or the warnings;
its answer never reaches the client, and what the client reads is what the
server said). At
the end it reads the binary log between the two points and lists the
transactions that did not pass through the proxy (a cron job, an admin
session): 'tandem inspect' shows both points and that list, 'tandem align'
brings targets to the start, and replay checks that they are there. The
account needs REPLICATION SLAVE (reading the binary log) and, for the file
and offset, BINLOG MONITOR; its password comes from the environment
variable TANDEM_BINLOG_PASSWORD, never from the command line.

Shadows that are replicas of the backend (--shadow-replicas, with
--binlog-user) start from the capture's exact start: each is held (its SQL
thread stopped) before the start point is read, then brought to it and its
replication removed, before the first client is served.

Statements that can carry passwords (CREATE/ALTER USER, SET PASSWORD, GRANT …)
have their string literals masked before they are stored.

What clients negotiate is kept as the server offers it, with three kinds of
exception. Compression (zlib, the mariadb CLI's --compress, go-sql-driver's
compress=true) runs on both legs: the proxy reads and records the commands
inside it. MariaDB's bulk execute (COM_STMT_BULK_EXECUTE: Connector/J's
batches, the Node.js connector's batch()) is relayed as one command and
recorded as one execute of all its rows. The greeting loses only what the
proxy cannot parse — ` + proxy.StrippedCaps + `; a client that would use
one runs as against a server without it. SIGINT (Ctrl-C) or SIGTERM stop
accepting, let open sessions finish for --drain-timeout (and shadows catch
up for --shadow-drain-timeout), saying what they wait for, and close the
capture; a second one closes what is still open at once, the capture
closed cleanly all the same.`,
		Example: `  tandem proxy --backend 127.0.0.1:3306 --capture ./capture
  sysbench oltp_read_write --mysql-host=127.0.0.1 --mysql-port=4000 ... run
  tandem proxy --listen 0.0.0.0:4000 --backend db1:3306 --capture ./cap \
      --tls-cert proxy.pem --tls-key proxy.key --capture-results checksum
  # a capture with its start and end points, for tandem align and replay
  TANDEM_BINLOG_PASSWORD=… tandem proxy --backend 127.0.0.1:3306 --capture ./cap --binlog-user repl
  tandem proxy --backend 127.0.0.1:3306 --capture ./cap \
      --shadow myrocks='root@tcp(127.0.0.1:3307)/shop,engine=rocksdb' \
      --shadow zipped='root@tcp(127.0.0.1:3308)/shop,options=ROW_FORMAT=COMPRESSED' --shadow-max-lag 30s
  # the same shadows from a file (shadows: - name, dsn, engine, options; a dsn
  # may name ${ENV} variables, so that no password is on the command line)
  tandem proxy --backend 127.0.0.1:3306 --capture ./capture --config shadows.yaml
  # relay only; capture on demand (tandem capture start|stop|status)
  tandem proxy --backend 127.0.0.1:3306 --capture-root /var/lib/tandem
  tandem capture start /var/lib/tandem/cap1 --duration 15m`,
		Args: noArgs,
		RunE: func(c *cobra.Command, args []string) error {
			var lvl slog.Level
			if err := lvl.UnmarshalText([]byte(logLevel)); err != nil {
				return fmt.Errorf("--log-level %q: want debug, info, warn or error", logLevel)
			}
			cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
			if cfg.Backend == "" {
				return fmt.Errorf("--backend is required; see 'tandem proxy --help'")
			}
			if err := proxyLimits(&cfg); err != nil {
				return err
			}
			cfg.CaptureResults = strings.ToLower(cfg.CaptureResults)
			n, err := proxyProcs(procs, c.Flags().Changed("procs"), cfg.IO)
			if err != nil {
				return err
			}
			if cfg.Key, err = keys.load(); err != nil {
				return err
			}
			sh.Key = cfg.Key
			if configFile != "" {
				if sh.Listed, err = targets.LoadShadows(configFile); err != nil {
					return err
				}
			}
			sh.Replicas = shadowReplicas
			if len(sh.Specs)+len(sh.Listed) > 0 {
				// Every shadow answers, with its engine, before the capture
				// is created: a failed start leaves nothing behind.
				ts, err := sh.Targets(c.Context())
				if err != nil {
					return err
				}
				if !c.Flags().Changed("capture-results") {
					cfg.CaptureResults = proxy.ResultsChecksum // shadows compare rows with the primary's
				}
				// Each shadow runs in a worker process of its own (this
				// executable's hidden shadow-worker command).
				exe, err := os.Executable()
				if err != nil {
					return fmt.Errorf("--shadow: finding tandem's own executable to run the shadows' workers: %w", err)
				}
				sh.Worker = []string{exe, shadow.WorkerCommand, "--log-level", logLevel}
				sh.MinFreeBytes = cfg.CaptureMinFree
				if sh.TargetTimeout == 0 {
					sh.TargetTimeout = -1 // replay.Config: negative is never, 0 its default
				}
				cfg.Shadows = shadowStarter{sh, ts}
				if shadowReplicas {
					if binlogUser == "" {
						return fmt.Errorf("--shadow-replicas needs --binlog-user: the shadows are brought to the capture's start point, which the backend's binary log gives")
					}
					cfg.Shadows = replicaShadows{shadowStarter{sh, ts}}
				}
			} else if shadowReplicas {
				return fmt.Errorf("--shadow-replicas: name the shadows (--shadow NAME=DSN), replicas of the backend")
			}
			if binlogUser != "" {
				cfg.Binlog = &gtid.Account{User: binlogUser, Password: os.Getenv("TANDEM_BINLOG_PASSWORD")}
			}
			runtime.GOMAXPROCS(n)
			cfg.Procs = n
			// The first Ctrl-C (or SIGTERM) drains; a second one closes
			// what is still open at once, the capture closed cleanly.
			force := make(chan struct{})
			cfg.Force = force
			ran := make(chan struct{})
			defer close(ran)
			go func() {
				select {
				case <-c.Context().Done():
				case <-ran:
					return
				}
				ch := make(chan os.Signal, 1)
				signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
				defer signal.Stop(ch)
				select {
				case <-ch:
					close(force)
				case <-ran:
				}
			}()
			err = proxy.Run(c.Context(), cfg, c.OutOrStdout())
			if me := (*mysql.MySQLError)(nil); cfg.Binlog != nil && cfg.Binlog.Password == "" && errors.As(err, &me) && me.Number == 1045 {
				err = fmt.Errorf("%w (the --binlog-user account's password is read from $TANDEM_BINLOG_PASSWORD, which is not set or empty)", err)
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Listen, "listen", "127.0.0.1:4000", "address clients connect to")
	f.StringVar(&cfg.Backend, "backend", "", "the MySQL/MariaDB server, HOST:PORT (required)")
	f.StringVar(&cfg.CaptureDir, "capture", "", "record into this new directory (default: relay only)")
	f.StringVar(&cfg.CaptureResults, "capture-results", proxy.ResultsSummary, "what to record of result sets: summary (columns, rows, bytes) or checksum (also row checksums)")
	f.DurationVar(&cfg.SyncInterval, "sync-interval", 0, "how often the capture is synced to disk: what a crash can lose (default 100ms)")
	f.Int64Var(&cfg.CaptureMaxBytes, "capture-max-bytes", 0, "stop capturing (relaying goes on) once the capture takes this many bytes on disk (0: no budget)")
	f.Int64Var(&cfg.CaptureMinFree, "capture-min-free", 256<<20, "stop capturing (relaying goes on) when the disk has less free space than this many bytes plus what closing the capture still writes, before it fills (0: no floor)")
	f.StringVar(&cfg.TLSCert, "tls-cert", "", "PEM certificate for TLS from clients (with --tls-key)")
	f.StringVar(&cfg.TLSKey, "tls-key", "", "PEM private key for --tls-cert")
	f.BoolVar(&cfg.BackendTLS, "backend-tls", false, "use TLS to the backend")
	f.StringVar(&cfg.BackendCA, "backend-ca", "", "PEM CA to verify the backend's certificate (with --backend-tls)")
	f.BoolVar(&cfg.BackendInsecure, "backend-insecure", false, "with --backend-tls, do not verify the backend's certificate")
	f.IntVar(&procs, "procs", 0, "CPUs that run the proxy's Go code at once (default: with --io poller a quarter of the CPUs, at least 1; with --io blocking all; GOMAXPROCS in the environment also sets it)")
	f.StringVar(&cfg.IO, "io", proxy.IOPoller, "how connections wait for data: poller (Go's network poller, raw non-blocking reads and writes) or blocking (a thread blocked in the kernel per waiting connection; see make bench-proxy)")
	f.IntVar(&cfg.MaxConnections, "max-connections", 1000, "refuse clients beyond this many at once (error 1040)")
	f.IntVar(&cfg.MaxHandshakes, "max-handshakes", 64, "connections authenticating at once; more wait for a slot for up to --handshake-timeout, then get error 1040 (so sockets that never log in cannot hold --max-connections)")
	f.DurationVar(&cfg.HandshakeTimeout, "handshake-timeout", 5*time.Second, "a client that has not logged in this long after connecting is closed (sooner than the server's connect_timeout, 10s by default)")
	f.IntVar(&cfg.MaxRecordBytes, "max-record-bytes", 1<<20, "store at most this much SQL text or data per record; longer is truncated and marked not replayable")
	f.DurationVar(&cfg.DrainTimeout, "drain-timeout", 0, "on shutdown, how long open sessions may finish; at a capture's stop, how long it waits for a command under way, and (with --binlog-user) for a transaction that wrote to end in the capture (default 5s)")
	f.StringVar(&cfg.MetricsAddr, "metrics-addr", "127.0.0.1:9470", "serve Prometheus /metrics here; ':PORT' binds loopback, 'off' disables")
	f.BoolVar(&cfg.Pprof, "pprof", false, "also serve Go's profiles under /debug/pprof/ on the metrics endpoint (they expose memory and stacks: keep it on loopback)")
	f.BoolVar(&cfg.AdminEnabled, "admin", true, "serve the capture controls (tandem capture start|stop|status) on the metrics address")
	f.StringVar(&cfg.AdminTokenFile, "admin-token-file", "", "the capture controls need the bearer token in this `FILE` (16+ characters, mode 600); required when --metrics-addr is not loopback")
	f.StringVar(&cfg.CaptureRoot, "capture-root", "", "captures started at runtime must be inside this `DIR`")
	f.StringVar(&binlogUser, "binlog-user", "", "record the backend's GTID position at the capture's start and end, each commit's GTID, and the writes that bypassed the proxy, reading them as this account (REPLICATION SLAVE; password in $TANDEM_BINLOG_PASSWORD)")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringArrayVar(&sh.Specs, "shadow", nil, "replay each capture live on this server too: "+targetFlagHelp)
	f.StringVar(&configFile, "config", "", "YAML file with a shadows: list (name, dsn, engine, options; a dsn may name ${ENV} variables, so that no password is on the command line)")
	f.DurationVar(&cfg.BinlogTimeout, "binlog-read-timeout", 5*time.Minute, "with --binlog-user, how long reading the binary log between the capture's points may take at its end (what is not read is said so, and the list marked uncertain)")
	f.BoolVar(&shadowReplicas, "shadow-replicas", false, "the shadows are replicas of the backend (GTID replication): each is held before the capture's start point is read and brought exactly to it, its replication removed, before the first client is served (needs --binlog-user)")
	f.StringVar(&sh.Mode, "shadow-mode", shadow.All, "all (every statement: shadows cloned from the primary) or read-only (no writes: shadows with other data)")
	f.DurationVar(&sh.MaxLag, "shadow-max-lag", 0, "a shadow further behind than this skips ahead at transaction boundaries, counting what it skipped (0: never skips)")
	f.DurationVar(&sh.KeepCommits, "shadow-keep-commits", 10*time.Minute, "how long before what it replays a shadow keeps the capture's commits to judge a differing answer (was another session's commit under way?); a difference in a transaction that began earlier is counted order-ambiguous, not judged. Memory: about 32 bytes per commit and table written (10m at 1,000 commits/s on two tables: 38 MB)")
	f.StringVar(&sh.Runs, "shadow-runs", "", "directory for the shadows' run directories (default CAPTURE.shadows)")
	f.DurationVar(&sh.StatusInterval, "shadow-status-interval", 10*time.Second, "how often the shadows' state is logged")
	f.DurationVar(&sh.TargetTimeout, "shadow-target-timeout", replay.DefaultTargetTimeout, "a shadow whose server gives no answer to a call this long is marked failed; the primary and the other shadows go on (0: wait forever, as replay's --target-timeout)")
	f.DurationVar(&cfg.ShadowDrainTimeout, "shadow-drain-timeout", time.Minute, "on shutdown, how long the shadows may take to replay what the capture holds")
	keys.add(f, keyWriteHelp)
	return cmd
}

// shadowStarter starts the --shadow servers' live replays for the proxy,
// on the targets checked before the capture was created.
type shadowStarter struct {
	cfg shadow.Config
	ts  []targets.Target
}

func (s shadowStarter) Start(ctx context.Context, dir string, w *store.Writer, reg prometheus.Registerer, log *slog.Logger) (proxy.ShadowSet, error) {
	set, err := s.cfg.Start(ctx, s.ts, dir, w, reg, log)
	if err != nil {
		return nil, err
	}
	return set, nil
}

// replicaShadows are shadows that replicate from the backend: they are
// held, then aligned to the capture's start point (--shadow-replicas).
type replicaShadows struct{ shadowStarter }

func (r replicaShadows) Hold(ctx context.Context) error {
	for _, t := range r.ts {
		db, err := t.Open()
		if err != nil {
			return err
		}
		_, err = gtid.Hold(ctx, db)
		db.Close()
		if err != nil {
			return fmt.Errorf("shadow %s: %w", t.Name, err)
		}
	}
	return nil
}

func (r replicaShadows) Align(ctx context.Context, start string, out io.Writer) error {
	for _, t := range r.ts {
		db, err := t.Open()
		if err != nil {
			return err
		}
		a, err := gtid.AlignReplica(ctx, db, start, 10*time.Minute, true)
		db.Close()
		if err != nil {
			return fmt.Errorf("shadow %s: %w", t.Name, err)
		}
		fmt.Fprintf(out, "tandem proxy: shadow %s at the capture's start point %s (applied %d transactions); its replication removed\n", t.Name, show(a.Now), a.Applied)
	}
	return nil
}

// proxyProcs is how many CPUs run the proxy's Go code at once. Relaying
// through the poller is mostly system calls: with fewer Ps, the goroutines
// one poll wakes run one after another on a thread instead of waking more
// threads, and the other CPUs stay with the database. On the project's
// 2-CPU machine one P beat two in every round (oltp_read_write 14.8k vs
// 13.5k qps, point selects +2%). Blocking I/O needs a P for each thread
// returning from a read, so it keeps them all. An explicit --procs wins,
// then GOMAXPROCS from the environment.
func proxyProcs(flag int, set bool, io string) (int, error) {
	switch {
	case set && flag < 1:
		return 0, fmt.Errorf("--procs %d: want 1 or more", flag)
	case set:
		return flag, nil
	case os.Getenv("GOMAXPROCS") != "":
		return runtime.GOMAXPROCS(0), nil
	case io == proxy.IOBlocking:
		return runtime.NumCPU(), nil
	}
	return max(1, runtime.NumCPU()/4), nil
}

// newShadowWorkerCmd is the hidden command a proxy starts for each
// --shadow: the shadow's live replay, in a process of its own (package
// shadow). It reads the capture's records on stdin and takes the proxy's
// calls on fd 3.
func newShadowWorkerCmd() *cobra.Command {
	var logLevel string
	cmd := &cobra.Command{
		Use:    shadow.WorkerCommand,
		Short:  "a shadow's worker process (started by tandem proxy --shadow)",
		Hidden: true,
		Args:   noArgs,
		RunE: func(c *cobra.Command, args []string) error {
			var lvl slog.Level
			if err := lvl.UnmarshalText([]byte(logLevel)); err != nil {
				return fmt.Errorf("--log-level %q: want debug, info, warn or error", logLevel)
			}
			// The proxy decides when its shadows end (it drains them): a
			// terminal's Ctrl-C or a service manager's SIGTERM is its.
			signal.Ignore(os.Interrupt, syscall.SIGTERM)
			f := os.NewFile(3, "shadow-control")
			if f == nil {
				return errors.New("shadow-worker is started by tandem proxy --shadow, not by hand")
			}
			conn, err := net.FileConn(f)
			f.Close()
			if err != nil {
				return fmt.Errorf("shadow-worker is started by tandem proxy --shadow, not by hand (fd 3: %v)", err)
			}
			return shadow.Work(conn, os.Stdin, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl})))
		},
	}
	cmd.Flags().StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	return cmd
}

// proxyLimits refuses a limit given out of its range, and TLS settings
// for the backend without TLS to it. The library takes 0 (and below) for
// its default, so without this --max-connections 0 let every client in,
// and a negative --drain-timeout or byte budget passed as if it made
// sense.
func proxyLimits(cfg *proxy.RunConfig) error {
	switch {
	case cfg.MaxConnections < 1:
		return fmt.Errorf("--max-connections %d: want 1 or more clients at once", cfg.MaxConnections)
	case cfg.MaxHandshakes < 1:
		return fmt.Errorf("--max-handshakes %d: want 1 or more logins at once", cfg.MaxHandshakes)
	case cfg.HandshakeTimeout <= 0:
		return fmt.Errorf("--handshake-timeout %v: want a positive time", cfg.HandshakeTimeout)
	case cfg.DrainTimeout < 0:
		return fmt.Errorf("--drain-timeout %v: want a positive time (0: the default, 5s)", cfg.DrainTimeout)
	case cfg.SyncInterval < 0:
		return fmt.Errorf("--sync-interval %v: want a positive time (0: the default, 100ms)", cfg.SyncInterval)
	case cfg.MaxRecordBytes < 1:
		return fmt.Errorf("--max-record-bytes %d must be positive", cfg.MaxRecordBytes)
	case cfg.CaptureMaxBytes < 0:
		return fmt.Errorf("--capture-max-bytes %d: want a number of bytes (0: no budget)", cfg.CaptureMaxBytes)
	case cfg.CaptureMinFree < 0:
		return fmt.Errorf("--capture-min-free %d: want a number of bytes (0: no floor)", cfg.CaptureMinFree)
	case (cfg.BackendCA != "" || cfg.BackendInsecure) && !cfg.BackendTLS:
		// They did nothing: the backend was spoken to in clear.
		return errors.New("--backend-ca and --backend-insecure apply to TLS to the backend: give --backend-tls too")
	}
	return nil
}
