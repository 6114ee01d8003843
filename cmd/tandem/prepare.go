package main

import (
	"cmp"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/tandemdb/tandem/capture/synth"
	"github.com/tandemdb/tandem/prepare"
)

func newPrepareCmd() *cobra.Command {
	cfg := prepare.Config{Dist: synth.DefaultDist()}
	var specs []string
	var configFile string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "prepare --target name=DSN[,engine=X][,options=…] [--target …] | --config FILE",
		Short: "Create and load sysbench's sbtest tables on each target with its engine",
		Long: `Creates sbtest1..N exactly as sysbench 1.0 does (id INTEGER primary key,
AUTO_INCREMENT unless --auto-inc=off; k INTEGER; c CHAR(120); pad CHAR(60);
index k_N built after loading) with each target's engine and create options,
and loads --table-size rows per table with sysbench's value shapes, every
target at once, --threads connections each, in large multi-row INSERTs.

Every target is checked before anything is created: reachable, its engine in
SHOW ENGINES, the tables not already there. Then it reports rows, time, and
each table's data and index size from information_schema (MyRocks' memtable is
flushed first so that its sizes count). --cleanup drops the tables.`,
		Example: `  tandem prepare --tables 4 --table-size 20000 --threads 4 \
      --target innodb='root@tcp(127.0.0.1:3306)/sbtest' \
      --target compressed='root@tcp(127.0.0.1:3306)/sbtest_c,engine=innodb,options=ROW_FORMAT=COMPRESSED KEY_BLOCK_SIZE=8' \
      --target myrocks='root@tcp(127.0.0.1:3307)/sbtest,engine=rocksdb'
  tandem prepare --tables 4 --config targets.yaml   # the file replay and sweep read
  tandem prepare --cleanup --tables 4 --target innodb='root@tcp(127.0.0.1:3306)/sbtest'`,
		Args: noArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if err := cmp.Or(atLeast1("--threads", cfg.Threads), atLeast1("--batch-rows", cfg.BatchRows)); err != nil {
				return err
			}
			ts, err := loadTargets(configFile, specs)
			if err != nil {
				return err
			}
			cfg.Targets = ts
			cfg.Progress = rowsProgress(c.ErrOrStderr(), "loading rows")
			reps, err := prepare.Run(c.Context(), cfg)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(c.OutOrStdout(), reps)
			}
			if err := prepare.WriteText(c.OutOrStdout(), reps, cfg.Cleanup); err != nil {
				return fmt.Errorf("print report: %w", err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&specs, "target", nil, targetFlagHelp)
	f.StringVar(&configFile, "config", "", configFlagHelp)
	f.IntVar(&cfg.Tables, "tables", 1, "number of tables")
	f.IntVar(&cfg.TableSize, "table-size", 10000, "rows per table")
	f.IntVar(&cfg.Threads, "threads", 1, "connections loading each target at once")
	boolFlag(f, &cfg.AutoInc, "auto-inc", true, "id is AUTO_INCREMENT")
	boolFlag(f, &cfg.Secondary, "secondary", false, "id is a secondary KEY instead of the PRIMARY KEY")
	boolFlag(f, &cfg.CreateSecondary, "create-secondary", true, "build index k_N on k after loading")
	f.StringVar(&cfg.Dist.Kind, "rand-type", cfg.Dist.Kind, "distribution of k values: uniform, gaussian, special, pareto, zipfian")
	f.Uint64Var(&cfg.Seed, "seed", 1, "seed for the generated values")
	f.IntVar(&cfg.BatchRows, "batch-rows", 2000, "rows per INSERT")
	f.BoolVar(&cfg.Cleanup, "cleanup", false, "drop the tables instead")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
