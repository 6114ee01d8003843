package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/tandemdb/tandem/report"
)

func newInspectCmd() *cobra.Command {
	var opts report.InspectOptions
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "inspect CAPTURE_DIR",
		Short: "Summarize a capture: time span, sessions, records by kind, errors, top statements, size",
		Long: `Reads a capture once, in order, and prints what it holds: the time span,
sessions, records by kind, responses and error codes, the most frequent
statement shapes (literals replaced by ?, prepared and text statements
together) with their average latency as captured, and bytes on disk.

A capture whose writer did not close (a crash) is readable up to its last sync;
inspect says so.`,
		Example: `  tandem inspect ./capture
  tandem inspect ./capture --top 25
  tandem inspect ./capture --json | jq .top_digests`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("inspect takes one capture directory, got %d arguments; see 'tandem inspect --help'", len(args))
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			rep, err := report.Inspect(c.Context(), args[0], opts)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(c.OutOrStdout(), rep)
			}
			return rep.WriteText(c.OutOrStdout())
		},
	}
	cmd.Flags().IntVar(&opts.Top, "top", 10, "how many statement digests to list")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
