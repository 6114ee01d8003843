package main

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/tandemdb/tandem/replay"
	"github.com/tandemdb/tandem/target"
)

func newReplayCmd() *cobra.Command {
	var cfg replay.Config
	var specs []string
	var configFile string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "replay CAPTURE_DIR --target name=DSN[,engine=X] --target …",
		Short: "Replay a capture against several targets at once and compare them",
		Long: `Replays a capture against every target at once — each on its own connections,
so a slow target never slows another — measures every statement's latency per
target, and compares every statement's outcome (error, affected rows, insert
id, row count, row checksums, warnings) with the baseline target: the first,
or the one marked ,baseline — and, for a capture made by tandem proxy, with
the response the capture holds (row checksums when the proxy ran with
--capture-results checksum). Samples of row differences show the first
differing row, from running the read statement again on both sides after
the replay.

Every target is checked first: reachable, its engine present (a missing
engine, e.g. TokuDB, stops the replay before any statement runs). CREATE and
ALTER TABLE in the traffic are rewritten to each target's engine and options.
Credentials come from the targets, never from the capture; a target whose DSN
names a database runs every session in it.

Modes: each captured session on its own connection, paced by --speed (1 as
captured, 0 as fast as possible); or --concurrency K, whole transactions
regrouped onto K connections per target, each connection carrying the
schema and SET statements of the session it serves. Latency is service time and, when
paced, time from the intended send instant. Statements that cannot be
deterministic (NOW(), RAND(), LIMIT without ORDER BY …) are counted apart.
Results are stored in --run DIR.`,
		Example: `  tandem replay ./capture --speed 0 \
      --target innodb='root@tcp(127.0.0.1:3306)/sbtest' \
      --target myrocks='root@tcp(127.0.0.1:3307)/sbtest,engine=rocksdb'
  tandem replay ./capture --config targets.yaml --concurrency 16 --duration 60s --report-interval 10s`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("replay takes one capture directory; see 'tandem replay --help'")
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			cfg.Capture = args[0]
			if configFile != "" {
				ts, err := target.Load(configFile)
				if err != nil {
					return err
				}
				cfg.Targets = append(cfg.Targets, ts...)
			}
			for _, s := range specs {
				t, err := target.Parse(s)
				if err != nil {
					return err
				}
				cfg.Targets = append(cfg.Targets, t)
			}
			if cfg.RunDir == "" {
				cfg.RunDir = filepath.Join(".tandem", "runs", time.Now().UTC().Format("20060102-150405"))
			}
			rep, err := replay.Run(c.Context(), cfg, c.ErrOrStderr())
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(c.OutOrStdout(), rep)
			}
			rep.WriteText(c.OutOrStdout())
			return nil
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&specs, "target", nil, "name=DSN[,engine=X][,options=TABLE OPTIONS][,baseline], repeatable")
	f.StringVar(&configFile, "config", "", "YAML file with a targets: list (name, dsn, engine, options, baseline)")
	f.StringVar(&cfg.RunDir, "run", "", "new directory for the run's results (default .tandem/runs/TIMESTAMP)")
	f.Float64Var(&cfg.Speed, "speed", 1, "pacing: 1 as captured, 2 twice as fast, 0 no waiting")
	f.IntVar(&cfg.Concurrency, "concurrency", 0, "regroup transactions onto this many connections per target (0: one per captured session)")
	f.IntVar(&cfg.Loop, "loop", 1, "replay the capture this many times")
	f.DurationVar(&cfg.Duration, "duration", 0, "keep looping the capture until this much time has passed")
	f.DurationVar(&cfg.ReportInterval, "report-interval", 0, "print a sysbench-style line per target this often (to stderr)")
	f.IntVar(&cfg.Samples, "samples", 3, "divergence samples kept per statement digest and class")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	f.StringVar(&cfg.IO, "io", replay.IOBlocking, "how connections wait for replies: blocking (a thread each, waiting in the kernel as a C client does; replay raises GOMAXPROCS by the connections it opens) or poller (Go's poller: fewer threads, more scheduler hand-offs, slower)")
	return cmd
}
