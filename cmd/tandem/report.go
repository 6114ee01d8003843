package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/tandemdb/tandem/report"
	"github.com/tandemdb/tandem/store"
)

func newReportCmd() *cobra.Command {
	var format, out, chartsDir string
	var keys keyFlag
	cmd := &cobra.Command{
		Use:   "report RUN_DIR [RUN_DIR…]",
		Short: "Render replay and sweep runs again from their run directories: text, JSON, HTML with charts, CSV",
		Long: `Reads run directories that 'tandem replay --run DIR' or 'tandem sweep' wrote
and renders them. text (the default) is exactly what replay printed when the
run ended, with the same figures (latency percentiles come from the
histograms the run stored); json has stable field names (see the report
package); csv is one row per point per target.

html is one self-contained file — no script, nothing fetched, charts inline
as SVG — that opens offline and attached to an email: run metadata, the
targets side by side, queries per second and p95 over time per target, the
latency distribution, the top statements' p95 ratio to the baseline, the
divergences with samples, the storage footprint, and for a sweep
throughput and p95 against threads (log2 axis). Several run directories
(the same capture on different days, the shards of a run) are rendered
side by side first, then each in full (html, csv). The run directories of
the shards of one run ('tandem replay --shard I/N', one --run-id) are
merged into one report in every format: counts add up, latency histograms
merge (percentiles of all statements, never averaged), divergences join.

--charts DIR also writes every chart as SVG and PNG files.

A run that was interrupted is reported with what it stored, and says so.`,
		Example: `  tandem report .tandem/runs/20261201-090000
  tandem report ./run --format html -o run.html --charts ./charts
  tandem report ./monday ./tuesday --format html -o week.html
  tandem report ./shard-0 ./shard-1 ./shard-2 ./shard-3          # one sharded run, merged
  tandem report ./run --format json | jq '.points[0].targets[] | {name, qps, latency}'
  tandem report ./sweep --format csv -o sweep.csv`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return fmt.Errorf("report takes one or more run directories; see 'tandem report --help'")
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			switch format {
			case "text", "json", "html", "csv":
			default:
				return fmt.Errorf("--format %q: want text, json, html or csv", format)
			}
			key, err := keys.load()
			if err != nil {
				return err
			}
			var reps []*report.Report
			for _, dir := range args {
				rep, err := report.Load(dir, store.WithKey(key))
				if err != nil {
					return err
				}
				reps = append(reps, rep)
			}
			// The shards of one run merge into one report; other runs go
			// side by side (html, csv).
			if len(reps) > 1 {
				if merged, err := report.Merge(reps); err == nil {
					reps = []*report.Report{merged}
				} else if format == "text" || format == "json" {
					return err
				}
			}
			if chartsDir != "" {
				if err := writeCharts(chartsDir, reps); err != nil {
					return err
				}
			}
			w := c.OutOrStdout()
			if out != "" {
				f, err := os.Create(out)
				if err != nil {
					return err
				}
				defer f.Close()
				w = f
			}
			switch format {
			case "html":
				return report.WriteHTML(w, reps)
			case "csv":
				return report.WriteCSV(w, reps)
			}
			return writeReport(w, reps[0], format == "json")
		},
	}
	cmd.Flags().StringVar(&format, "format", "text", "text, json, html or csv")
	cmd.Flags().StringVarP(&out, "output", "o", "", "write to this file instead of standard output")
	cmd.Flags().StringVar(&chartsDir, "charts", "", "also write each chart as SVG and PNG into this directory")
	keys.add(cmd.Flags(), keyRunsHelp)
	return cmd
}

// writeCharts writes every run's charts as NAME.svg and NAME.png (prefixed
// with the run id when there are several runs).
func writeCharts(dir string, reps []*report.Report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, rep := range reps {
		charts, err := rep.Charts()
		if err != nil {
			return err
		}
		for _, ch := range charts {
			name := ch.Name
			if len(reps) > 1 {
				name = rep.RunID + "-" + name
			}
			for _, kind := range []string{"svg", "png"} {
				render := ch.SVG
				if kind == "png" {
					render = ch.PNG
				}
				b, err := render()
				if err != nil {
					return fmt.Errorf("chart %s: %w", ch.Name, err)
				}
				if err := os.WriteFile(filepath.Join(dir, name+"."+kind), b, 0o644); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// writeReport prints a run's report; replay and report print alike.
func writeReport(w io.Writer, rep *report.Report, asJSON bool) error {
	if asJSON {
		return printJSON(w, rep)
	}
	return rep.WriteText(w)
}
