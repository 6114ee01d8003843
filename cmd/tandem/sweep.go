package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tandemdb/tandem/prepare"
	"github.com/tandemdb/tandem/replay"
	"github.com/tandemdb/tandem/targets"
)

func newSweepCmd() *cobra.Command {
	var cfg replay.Config
	var unpackDir string
	var keys keyFlag
	var sw replay.Sweep
	var specs []string
	var configFile, metricsAddr string
	var asJSON bool
	var linger time.Duration
	var prep prepare.Config
	var gate gateFlags
	cmd := &cobra.Command{
		Use:   "sweep CAPTURE_DIR --threads 1,2,4,… --duration D --target name=DSN …",
		Short: "Replay a capture at several thread counts per target: throughput and latency against threads",
		Long: `Replays a capture with --concurrency set to each of --threads in turn (whole
transactions regrouped onto that many connections per target, as 'tandem
replay --concurrency' does), each point looping the capture for --duration.
By default targets take turns at each point, so that on one machine none
competes with another for CPU and disk; --together replays them all at once.

--prepare-tables N loads the starting data again before every point
(sysbench's sbtestN tables, as 'tandem prepare' does, after dropping them),
so each point starts from the same rows.

Start state. A capture that knows its start point (tandem proxy
--binlog-user) is checked as replay checks it: every target must be at that
point before the first statement (tandem align), or --allow-unaligned labels
them; the targets are then marked as replayed onto, so that a later replay
or align knows their rows are no start state any more. From the second
point on, each target holds what the earlier points wrote: differences
from the captured responses on writes there are not verdicts, and the
report says so; differences between targets still are (every target ran
the same points). With --prepare-tables the rows are the sweep's own.

Everything goes into one run directory (--run): 'tandem report DIR' prints
it again, 'tandem report DIR --format html' draws QPS and p95 against
threads (log2 axis, one line per target). Order between sessions, retries,
metrics, the footprint and the exit status (2: a target failed during
the sweep; 130: interrupted) work as in 'tandem replay'.`,
		Example: `  tandem sweep ./capture --threads 1,2,4,8,16,32,64,128 --duration 60s \
      --target innodb='root@tcp(127.0.0.1:3306)/sbtest' \
      --target myrocks='root@tcp(127.0.0.1:3307)/sbtest,engine=rocksdb' \
      --prepare-tables 4 --prepare-table-size 100000`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("sweep takes one capture directory; see 'tandem sweep --help'")
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			// --loop 1 given was once taken for no --loop (its default).
			fl := c.Flags()
			switch {
			case !fl.Changed("duration") && !fl.Changed("loop"):
				return errors.New("give --duration D (each point loops the capture that long) or --loop N (each point replays it N times)")
			case fl.Changed("duration") && cfg.Duration <= 0:
				return fmt.Errorf("--duration %v: want how long each point runs, more than 0", cfg.Duration)
			case cfg.Loop < 1:
				return fmt.Errorf("--loop %d: want 1 or more (passes over the capture per point)", cfg.Loop)
			case prep.Tables < 0:
				return fmt.Errorf("--prepare-tables %d: want a number of tables (0: load none)", prep.Tables)
			}
			if err := atLeast1("--prepare-threads", prep.Threads); err != nil {
				return err
			}
			if err := cmp.Or(notNegative("--report-interval", cfg.ReportInterval), notNegative("--metrics-linger", linger)); err != nil {
				return err
			}
			tuneReplayGC()
			var err error
			if cfg.Key, err = keys.load(); err != nil {
				return err
			}
			dir, err := captureDir(args[0], unpackDir, cfg.Key)
			if err != nil {
				return err
			}
			cfg.Capture = dir
			if dir != args[0] {
				cfg.CaptureName = args[0] // the archive, not its unpacked copy
			}
			ts, err := loadTargets(configFile, specs)
			if err != nil {
				return err
			}
			cfg.Targets = ts
			if err := gate.apply(&cfg); err != nil {
				return err
			}
			if cfg.RunDir == "" {
				cfg.RunDir = filepath.Join(".tandem", "runs", "sweep-"+time.Now().UTC().Format("20060102-150405"))
			}
			if prep.Tables > 0 && prep.TableSize < 1 {
				return fmt.Errorf("--prepare-table-size %d: want at least 1 row per table", prep.TableSize)
			}
			if prep.Tables > 0 {
				sw.Before = func(ctx context.Context, ts []targets.Target) error {
					p := prep
					p.Targets = ts
					p.Cleanup = true
					if _, err := prepare.Run(ctx, p); err != nil {
						return err
					}
					p.Cleanup = false
					_, err := prepare.Run(ctx, p)
					return err
				}
			}
			return sweepWords(runReplay(c, &cfg, metricsAddr, linger, asJSON, func(cfg replay.Config) (replay.Result, error) {
				return replay.RunSweep(c.Context(), cfg, sw, c.ErrOrStderr())
			}))
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&specs, "target", nil, targetFlagHelp)
	f.StringVar(&configFile, "config", "", configFlagHelp)
	f.IntSliceVar(&sw.Threads, "threads", []int{1, 2, 4, 8, 16, 32, 64, 128}, "thread counts (connections per target), in order")
	f.DurationVar(&cfg.Duration, "duration", 0, "how long each point runs (the capture loops); required unless --loop")
	f.IntVar(&cfg.Loop, "loop", 1, "replay the capture this many times per point")
	f.BoolVar(&sw.Together, "together", false, "replay all targets at once at each point (default: one target at a time)")
	f.StringVar(&cfg.RunDir, "run", "", "new directory for the run (default .tandem/runs/sweep-TIMESTAMP); refused when its disk has under 64 MiB free, and the run stops with an error if it falls under that")
	f.StringVar(&unpackDir, "unpack-dir", "", "where a packed capture (FILE.tar.zst, tandem pack) is unpacked once, made if missing (default $TMPDIR)")
	keys.add(f, keyRunHelp)
	f.StringVar(&cfg.RunID, "run-id", "", "name of the run (default: the time and a random suffix)")
	f.Float64Var(&cfg.Speed, "speed", 0, "pacing: 0 no clock waits (a sweep measures capacity), 1 as captured")
	f.StringVar(&cfg.Order, "order", "", "capture or none (default: capture, or none for a synthesized capture)")
	f.BoolVar(&cfg.AllowUnaligned, "allow-unaligned", false, "sweep targets that are not at the capture's start point (refused otherwise, as by replay); the report labels their verdicts on writes")
	gate.add(f, &cfg)
	f.DurationVar(&cfg.ReportInterval, "report-interval", 0, "print a sysbench-style line per target this often (to stderr)")
	f.IntVar(&prep.Tables, "prepare-tables", 0, "before every point, drop and load this many sbtest tables again (0: don't)")
	f.IntVar(&prep.TableSize, "prepare-table-size", 10000, "rows per table with --prepare-tables")
	f.IntVar(&prep.Threads, "prepare-threads", 4, "connections loading each target with --prepare-tables")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	f.StringVar(&metricsAddr, "metrics-addr", defaultReplayMetrics, "serve Prometheus /metrics here; 'off' disables")
	f.Bool("pprof", false, "also serve Go's profiles under /debug/pprof/ on the metrics endpoint")
	f.DurationVar(&linger, "metrics-linger", 0, "after the sweep, keep /metrics up this long")
	cfg.Samples = 3
	prep.AutoInc, prep.CreateSecondary, prep.Seed = true, true, 1 // as tandem prepare's defaults
	return cmd
}

// sweepWords puts an error from the replay library, which a sweep runs,
// in the sweep's words: "replay: --order ..." read as if another command
// had failed.
func sweepWords(err error) error {
	if err == nil || !strings.HasPrefix(err.Error(), "replay: ") {
		return err
	}
	return renamed{"sweep: " + strings.TrimPrefix(err.Error(), "replay: "), err}
}

// renamed is err with another message; errors.Is and As still see err.
type renamed struct {
	msg string
	err error
}

func (r renamed) Error() string { return r.msg }
func (r renamed) Unwrap() error { return r.err }
