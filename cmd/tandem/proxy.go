package main

import (
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strings"

	"github.com/spf13/cobra"
	"github.com/tandemdb/tandem/proxy"
)

func newProxyCmd() *cobra.Command {
	var cfg proxy.RunConfig
	var logLevel string
	var procs int
	cmd := &cobra.Command{
		Use:   "proxy --backend HOST:PORT [--capture DIR]",
		Short: "Relay MySQL clients to a server and record every command exchange",
		Long: `Clients connect to the proxy exactly as they would to the server: the
handshake and authentication are relayed (passwords are never seen in clear
nor stored), then every command and response. With --capture, each exchange is
recorded — command, typed parameters, timing, a summary of the response — into
a new capture directory, for 'tandem inspect' and replay. Recording never slows
clients: when the disk falls behind, records are dropped and counted.

Statements that can carry passwords (CREATE/ALTER USER, SET PASSWORD, GRANT …)
have their string literals masked before they are stored. Compression is
refused (clients connect without it). SIGINT or SIGTERM stop accepting, let
open sessions finish for --drain-timeout, and flush the capture.`,
		Example: `  tandem proxy --backend 127.0.0.1:3306 --capture ./capture
  sysbench oltp_read_write --mysql-host=127.0.0.1 --mysql-port=4000 ... run
  tandem proxy --listen 0.0.0.0:4000 --backend db1:3306 --capture ./cap \
      --tls-cert proxy.pem --tls-key proxy.key --capture-results checksum`,
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
			cfg.CaptureResults = strings.ToLower(cfg.CaptureResults)
			n, err := proxyProcs(procs, c.Flags().Changed("procs"), cfg.IO)
			if err != nil {
				return err
			}
			runtime.GOMAXPROCS(n)
			cfg.Procs = n
			return proxy.Run(c.Context(), cfg, c.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Listen, "listen", "127.0.0.1:4000", "address clients connect to")
	f.StringVar(&cfg.Backend, "backend", "", "the MySQL/MariaDB server, HOST:PORT (required)")
	f.StringVar(&cfg.CaptureDir, "capture", "", "record into this new directory (default: relay only)")
	f.StringVar(&cfg.CaptureResults, "capture-results", proxy.ResultsSummary, "what to record of result sets: summary (columns, rows, bytes) or checksum (also row checksums)")
	f.DurationVar(&cfg.SyncInterval, "sync-interval", 0, "how often the capture is synced to disk: what a crash can lose (default 100ms)")
	f.Int64Var(&cfg.CaptureMaxBytes, "capture-max-bytes", 0, "stop capturing (relaying goes on) once the capture takes this many bytes on disk (0: no budget)")
	f.Int64Var(&cfg.CaptureMinFree, "capture-min-free", 256<<20, "stop capturing (relaying goes on) when the disk has less free space than this many bytes, before it fills (0: no floor)")
	f.StringVar(&cfg.TLSCert, "tls-cert", "", "PEM certificate for TLS from clients (with --tls-key)")
	f.StringVar(&cfg.TLSKey, "tls-key", "", "PEM private key for --tls-cert")
	f.BoolVar(&cfg.BackendTLS, "backend-tls", false, "use TLS to the backend")
	f.StringVar(&cfg.BackendCA, "backend-ca", "", "PEM CA to verify the backend's certificate (with --backend-tls)")
	f.BoolVar(&cfg.BackendInsecure, "backend-insecure", false, "with --backend-tls, do not verify the backend's certificate")
	f.IntVar(&procs, "procs", 0, "CPUs that run the proxy's Go code at once (default: with --io poller a quarter of the CPUs, at least 1; with --io blocking all; GOMAXPROCS in the environment also sets it)")
	f.StringVar(&cfg.IO, "io", proxy.IOPoller, "how connections wait for data: poller (Go's network poller, raw non-blocking reads and writes) or blocking (a thread blocked in the kernel per waiting connection; see make bench-proxy)")
	f.IntVar(&cfg.MaxConnections, "max-connections", 1000, "refuse clients beyond this many at once (error 1040)")
	f.IntVar(&cfg.MaxRecordBytes, "max-record-bytes", 1<<20, "store at most this much SQL text or data per record; longer is truncated and marked not replayable")
	f.DurationVar(&cfg.DrainTimeout, "drain-timeout", 0, "on shutdown, how long open sessions may finish (default 5s)")
	f.StringVar(&cfg.MetricsAddr, "metrics-addr", "127.0.0.1:9470", "serve Prometheus /metrics here; ':PORT' binds loopback, 'off' disables")
	f.BoolVar(&cfg.Pprof, "pprof", false, "also serve Go's profiles under /debug/pprof/ on the metrics endpoint (they expose memory and stacks: keep it on loopback)")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	return cmd
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
