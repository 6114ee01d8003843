package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/tandemdb/tandem/report"
)

func newInspectCmd() *cobra.Command {
	var opts report.InspectOptions
	var asJSON bool
	var unpackDir string
	cmd := &cobra.Command{
		Use:   "inspect CAPTURE_DIR|FILE.tar.zst",
		Short: "Summarize a capture: time span, sessions, records by kind, errors, top statements, size",
		Long: `Reads a capture once, in order, and prints what it holds: the time span,
sessions, records by kind, responses and error codes, the most frequent
statement shapes (literals replaced by ?, prepared and text statements
together) with their average latency as captured, and bytes on disk.

A capture whose writer did not close (a crash) is readable up to its last sync;
inspect says so, and counts and names the records lost in the middle (found by
their sequence numbers). A packed capture (tandem pack) is unpacked once and
checked against the archive's checksums.`,
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
			dir, err := captureDir(args[0], unpackDir)
			if err != nil {
				return err
			}
			rep, err := report.Inspect(c.Context(), dir, opts)
			if err != nil {
				return err
			}
			if dir != args[0] {
				rep.Dir = args[0] + " (unpacked into " + dir + ")"
			}
			if asJSON {
				return printJSON(c.OutOrStdout(), rep)
			}
			return rep.WriteText(c.OutOrStdout())
		},
	}
	cmd.Flags().IntVar(&opts.Top, "top", 10, "how many statement digests to list")
	cmd.Flags().StringVar(&unpackDir, "unpack-dir", "", "where a packed capture (FILE.tar.zst, tandem pack) is unpacked once (default $TMPDIR)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
