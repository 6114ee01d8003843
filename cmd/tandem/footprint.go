package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tandemdb/tandem/footprint"
	"github.com/tandemdb/tandem/report"
	"github.com/tandemdb/tandem/store"
	"github.com/tandemdb/tandem/targets"
)

func newFootprintCmd() *cobra.Command {
	var specs, tables []string
	var configFile string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "footprint --target name=DSN --target …",
		Short: "Measure the storage the tables of each target's database take, side by side",
		Long: `Measures the data and index bytes of every base table in each target's
database (the DSN's; --tables limits it), from the best source each engine
offers: InnoDB from information_schema.TABLES after ANALYZE TABLE refreshed
its statistics (compressed tables in compressed pages), MyRocks from
information_schema.TABLES after its memtable was flushed (rows still in the
memtable are in no file yet), TokuDB from
information_schema.TokuDB_fractal_tree_info. Totals are compared with the
baseline target (the first, or the one marked ,baseline).

tandem replay and tandem sweep measure the tables the capture touched
before and after every replay, and their reports show it.`,
		Example: `  tandem footprint --target innodb='root@tcp(127.0.0.1:3306)/sbtest' \
      --target zipped='root@tcp(127.0.0.1:3307)/sbtest' --target myrocks='root@tcp(127.0.0.1:3308)/sbtest'
  tandem footprint --config targets.yaml --tables sbtest1,sbtest2 --json`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			ts, err := loadTargets(configFile, specs)
			if err != nil {
				return err
			}
			base, _ := targets.Baseline(ts) // loadTargets checked the list
			type result struct {
				Target string                 `json:"target"`
				Tables []store.TableFootprint `json:"tables"`
			}
			var results []result
			for _, t := range ts {
				if t.Database() == "" {
					return fmt.Errorf("target %s: its DSN names no database; give one (…/DBNAME) to measure its tables", t.Name)
				}
				db, err := t.Open()
				if err != nil {
					return err
				}
				// A database that is not there measured "0 tables" and
				// exited 0, as did tables named that are not there.
				if err := t.CheckDatabase(c.Context(), db); err != nil {
					db.Close()
					return err // it names the target
				}
				fs, err := footprint.Measure(c.Context(), db, t.Database(), tablesOrNil(tables))
				db.Close()
				if err != nil {
					return fmt.Errorf("target %s: %w", t.Name, err)
				}
				if missing := missingTables(tables, t.Database(), fs); len(missing) > 0 {
					return fmt.Errorf("target %s: no table %s in database %s; --tables names tables of the DSN's database", t.Name, strings.Join(missing, ", "), t.Database())
				}
				results = append(results, result{t.Name, fs})
			}
			out := c.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(results)
			}
			pt := report.Point{}
			for _, r := range results {
				var tg report.Target
				tg.Name, tg.Footprint = r.Target, r.Tables
				pt.Targets = append(pt.Targets, tg)
			}
			var names []string
			for _, r := range results {
				d, x := footprint.Total(r.Tables)
				line := fmt.Sprintf("%s: %d tables, %s data + %s index", r.Target, len(r.Tables), report.Bytes(d), report.Bytes(x))
				if bd, bx := footprint.Total(results[base].Tables); r.Target != results[base].Target && bd+bx > 0 {
					line += fmt.Sprintf(" (%.2fx the baseline's %s)", float64(d+x)/float64(bd+bx), results[base].Target)
				}
				names = append(names, line)
				for _, f := range r.Tables {
					if !slices.Contains([]string{footprint.SourceTables, footprint.SourceRocksDB, footprint.SourceTokuDB}, f.Source) {
						names = append(names, "  "+f.Table+": "+f.Source) // a refresh failed: say so
					}
				}
			}
			fmt.Fprintln(out, strings.Join(names, "\n"))
			report.WriteFootprint(out, &pt, results[base].Target, "storage footprint")
			return nil
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&specs, "target", nil, targetFlagHelp+"; the DSN names the database")
	f.StringVar(&configFile, "config", "", configFlagHelp)
	f.StringSliceVar(&tables, "tables", nil, "only these tables (comma-separated)")
	f.BoolVar(&asJSON, "json", false, "print JSON: [{target, tables: [{table, engine, rows, data_bytes, index_bytes, source}]}]")
	return cmd
}

// missingTables lists the tables of names (--tables) that were not
// measured in database db.
func missingTables(names []string, db string, fs []store.TableFootprint) []string {
	var missing []string
	for _, n := range names {
		found := false
		for _, f := range fs {
			if strings.EqualFold(f.Table, n) || strings.EqualFold(f.Table, db+"."+n) {
				found = true
				break
			}
		}
		if !found {
			missing = append(missing, n)
		}
	}
	return missing
}

func tablesOrNil(t []string) []string {
	if len(t) == 0 {
		return nil
	}
	return t
}

// targetFlagHelp is --target's (and --shadow's) help, the same for every
// command that takes targets.
const targetFlagHelp = "name=DSN[,engine=X][,options=TABLE OPTIONS][,ca=CA.pem][,baseline], repeatable; " +
	"the DSN's tls=true|skip-verify|preferred (or ca=, verified against that CA) and its session variables " +
	"(…/db?innodb_lock_wait_timeout=1) reach every connection to the target"

// configFlagHelp is --config's help, the same for every command that takes
// targets.
const configFlagHelp = "YAML file with a targets: list (name, dsn, engine, options, ca, baseline), read with the --target ones; " +
	"a dsn may name ${ENV} variables, so that no password is on the command line"

// loadTargets reads --config and --target into targets: at least one, no
// two with one name, at most one baseline (targets.Baseline). Replay,
// sweep, footprint and prepare read their targets here.
func loadTargets(configFile string, specs []string) ([]targets.Target, error) {
	var ts []targets.Target
	if configFile != "" {
		l, err := targets.Load(configFile)
		if err != nil {
			return nil, err
		}
		ts = append(ts, l...)
	}
	for _, s := range specs {
		t, err := targets.Parse(s)
		if err != nil {
			return nil, err
		}
		ts = append(ts, t)
	}
	if len(ts) == 0 {
		return nil, fmt.Errorf("no targets; give --target name=DSN (or --config FILE)")
	}
	if _, err := targets.Baseline(ts); err != nil {
		return nil, err
	}
	return ts, nil
}
