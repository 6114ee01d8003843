package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/tandemdb/tandem/capture/synth"
	"github.com/tandemdb/tandem/report"
)

// onOff is a boolean flag that also takes sysbench's on/off.
type onOff struct{ v *bool }

func (o onOff) String() string {
	if o.v != nil && *o.v {
		return "on"
	}
	return "off"
}

func (o onOff) Set(s string) error {
	switch strings.ToLower(s) {
	case "on", "true", "1", "yes":
		*o.v = true
	case "off", "false", "0", "no":
		*o.v = false
	default:
		return fmt.Errorf("want on or off, got %q", s)
	}
	return nil
}

func (o onOff) Type() string { return "on|off" }

// sysbenchSeconds is a duration flag that also takes sysbench's plain
// seconds (--time=60).
type sysbenchSeconds struct{ d *time.Duration }

func (s sysbenchSeconds) String() string {
	if s.d == nil || *s.d == 0 {
		return ""
	}
	return s.d.String()
}

func (s sysbenchSeconds) Set(v string) error {
	if n, err := strconv.ParseUint(v, 10, 32); err == nil {
		*s.d = time.Duration(n) * time.Second
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return errors.New("want whole seconds (as sysbench takes them) or a duration such as 90s")
	}
	*s.d = d
	return nil
}

func (s sysbenchSeconds) Type() string { return "seconds" }

func boolFlag(f *pflag.FlagSet, p *bool, name string, def bool, usage string) {
	*p = def
	f.Var(onOff{p}, name, usage)
	f.Lookup(name).NoOptDefVal = "on"
}

func newSynthCmd() *cobra.Command {
	cfg := synth.Config{Options: synth.DefaultOptions(), Dist: synth.DefaultDist()}
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "synth WORKLOAD --out DIR (--events N | --duration D)",
		Short: "Write a capture of sysbench OLTP traffic, no server needed",
		Long: `Writes the statements sysbench 1.0.20 would send — same texts, same order per
transaction, same parameter shapes and id distributions — into a new capture,
seeded and reproducible. Each of --threads sessions acts as a sysbench thread:
connect, prepare every statement for every table, events, close, quit.

Workloads: ` + strings.Join(synth.Workloads(), ", ") + `.
complex and nontrx are sysbench 0.4's legacy modes (one table named sbtest;
nontrx sends the statement --nontrx-mode names).

Options keep sysbench's names and defaults (booleans take on/off); --time,
--rand-seed and --db-ps-mode are accepted as sysbench spells them. Timing is
synthetic: closed loop, a statement every --stmt-interval per session; with
--rate, events arrive as a Poisson process, as with sysbench --rate.`,
		Example: `  tandem synth oltp_read_write --out ./cap --tables 4 --table-size 20000 --threads 8 --events 10000
  tandem synth oltp_point_select --out ./cap --rate 2000 --duration 60s --seed 7
  tandem synth complex --out ./legacy --events 1000 --db-ps-mode disable`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) != 1 {
				if hint := onOffHint(c, args); hint != "" {
					return errors.New(hint)
				}
				return fmt.Errorf("synth takes one workload (%s); see 'tandem synth --help'", strings.Join(synth.Workloads(), ", "))
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			if err := notNegative("--stmt-interval", cfg.StmtInterval); err != nil {
				return err
			}
			// Two names of one setting: given both, one would silently win.
			for _, p := range [][2]string{{"duration", "time"}, {"ps-mode", "db-ps-mode"}, {"seed", "rand-seed"}} {
				if c.Flags().Changed(p[0]) && c.Flags().Changed(p[1]) {
					return fmt.Errorf("--%s and --%s are one setting (--%s is sysbench's name for it): give one", p[0], p[1], p[1])
				}
			}
			cfg.Workload = args[0]
			st, err := synth.Run(c.Context(), cfg, c.OutOrStdout())
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(c.OutOrStdout(), st)
			}
			fmt.Fprintf(c.OutOrStdout(), "synth %s: %d events, %d statements (%d records) in %s into %s\n",
				cfg.Workload, st.Events, st.Statements, st.Records, report.Count(st.Sessions, "session"), cfg.Dir)
			fmt.Fprintf(c.OutOrStdout(), "synthetic timeline %.3fs; written in %.3fs (%.0f statements/s)\n",
				st.Span.Seconds(), st.Elapsed.Seconds(), float64(st.Statements)/st.Elapsed.Seconds())
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Dir, "out", "", "new capture directory (required)")
	f.IntVar(&cfg.Threads, "threads", 1, "sessions (sysbench threads)")
	f.Uint64Var(&cfg.Events, "events", 0, "events (transactions) across all sessions")
	f.DurationVar(&cfg.Duration, "duration", 0, "length of the synthetic timeline (instead of or with --events)")
	f.Var(sysbenchSeconds{&cfg.Duration}, "time", "sysbench's name for --duration, in `SECONDS` as sysbench takes it (or a duration: 90s, 5m)")
	f.Float64Var(&cfg.Rate, "rate", 0, "open-loop arrival rate, events per second (0: closed loop)")
	f.StringVar(&cfg.PSMode, "ps-mode", "auto", "auto: prepared statements; disable: text queries")
	f.StringVar(&cfg.PSMode, "db-ps-mode", "auto", "sysbench's name for --ps-mode")
	f.Uint64Var(&cfg.Seed, "seed", 1, "seed: the same seed gives the same records")
	f.Uint64Var(&cfg.Seed, "rand-seed", 1, "sysbench's name for --seed")
	f.DurationVar(&cfg.StmtInterval, "stmt-interval", 0, "closed loop: time between a session's statements (default 200µs)")
	f.StringVar(&cfg.Schema, "mysql-db", "sbtest", "schema the sessions use")
	f.StringVar(&cfg.User, "mysql-user", "sbtest", "user recorded on connect")
	f.IntVar(&cfg.Tables, "tables", cfg.Tables, "number of tables")
	f.IntVar(&cfg.TableSize, "table-size", cfg.TableSize, "rows per table")
	f.IntVar(&cfg.RangeSize, "range-size", cfg.RangeSize, "range size of range SELECTs")
	f.IntVar(&cfg.PointSelects, "point-selects", cfg.PointSelects, "point SELECTs per transaction")
	f.IntVar(&cfg.SimpleRanges, "simple-ranges", cfg.SimpleRanges, "simple range SELECTs per transaction")
	f.IntVar(&cfg.SumRanges, "sum-ranges", cfg.SumRanges, "SELECT SUM() ranges per transaction")
	f.IntVar(&cfg.OrderRanges, "order-ranges", cfg.OrderRanges, "SELECT ORDER BY ranges per transaction")
	f.IntVar(&cfg.DistinctRanges, "distinct-ranges", cfg.DistinctRanges, "SELECT DISTINCT ranges per transaction")
	f.IntVar(&cfg.IndexUpdates, "index-updates", cfg.IndexUpdates, "UPDATEs of the indexed column per transaction")
	f.IntVar(&cfg.NonIndexUpdates, "non-index-updates", cfg.NonIndexUpdates, "UPDATEs of a non-indexed column per transaction")
	f.IntVar(&cfg.DeleteInserts, "delete-inserts", cfg.DeleteInserts, "DELETE/INSERT pairs per transaction")
	boolFlag(f, &cfg.RangeSelects, "range-selects", true, "range SELECTs on or off")
	boolFlag(f, &cfg.SkipTrx, "skip-trx", false, "no BEGIN/COMMIT")
	boolFlag(f, &cfg.AutoInc, "auto-inc", true, "tables use AUTO_INCREMENT ids (oltp_insert sends id 0; legacy insert NULL)")
	f.StringVar(&cfg.NontrxMode, "nontrx-mode", "select", "legacy nontrx statement: select, update_key, update_nokey, insert, delete")
	f.StringVar(&cfg.Dist.Kind, "rand-type", cfg.Dist.Kind, "id distribution: uniform, gaussian, special, pareto, zipfian")
	f.IntVar(&cfg.Dist.SpecIter, "rand-spec-iter", cfg.Dist.SpecIter, "special/gaussian: uniforms summed per value")
	f.IntVar(&cfg.Dist.SpecPct, "rand-spec-pct", cfg.Dist.SpecPct, "special: percentage of the range holding the special values")
	f.IntVar(&cfg.Dist.SpecRes, "rand-spec-res", cfg.Dist.SpecRes, "special: percentage of values that are special")
	f.Float64Var(&cfg.Dist.ParetoH, "rand-pareto-h", cfg.Dist.ParetoH, "pareto: shape h")
	f.Float64Var(&cfg.Dist.ZipfExp, "rand-zipfian-exp", cfg.Dist.ZipfExp, "zipfian: exponent")
	f.BoolVar(&asJSON, "json", false, "print the summary as JSON")
	return cmd
}
