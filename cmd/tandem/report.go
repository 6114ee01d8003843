package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"github.com/tandemdb/tandem/report"
)

func newReportCmd() *cobra.Command {
	var format, out string
	cmd := &cobra.Command{
		Use:   "report RUN_DIR",
		Short: "Print a replay run's report again, from its run directory",
		Long: `Reads a run directory that 'tandem replay --run DIR' wrote and prints its
report: exactly what replay printed when the run ended, with the same
figures (latency percentiles come from the histograms the run stored), as
text or as JSON (the field names are stable; see the report package).

A run that was interrupted is reported with what it stored, and says so.`,
		Example: `  tandem report .tandem/runs/20261201-090000
  tandem report ./run --format json | jq '.points[0].targets[] | {name, qps, latency}'
  tandem report ./run --format json -o run.json`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("report takes one run directory, got %d arguments; see 'tandem report --help'", len(args))
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			if format != "text" && format != "json" {
				return fmt.Errorf("--format %q: want text or json", format)
			}
			rep, err := report.Load(args[0])
			if err != nil {
				return err
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
			return writeReport(w, rep, format == "json")
		},
	}
	cmd.Flags().StringVar(&format, "format", "text", "text or json")
	cmd.Flags().StringVarP(&out, "output", "o", "", "write to this file instead of standard output")
	return cmd
}

// writeReport prints a run's report; replay and report print alike.
func writeReport(w io.Writer, rep *report.Report, asJSON bool) error {
	if asJSON {
		return printJSON(w, rep)
	}
	return rep.WriteText(w)
}
