package main

import (
	"fmt"
	"github.com/tandemdb/tandem/store"
	"io"

	"github.com/spf13/cobra"
	"github.com/tandemdb/tandem/report"
)

func newInspectCmd() *cobra.Command {
	var opts report.InspectOptions
	var asJSON bool
	var unpackDir string
	var verify bool
	var keys keyFlag
	cmd := &cobra.Command{
		Use:   "inspect CAPTURE_DIR|FILE.tar.zst",
		Short: "Summarize a capture: time span, sessions, records by kind, errors, top statements, size",
		Long: `Reads a capture once, in order, and prints what it holds: the time span,
sessions, records by kind, responses and error codes, the most frequent
statement shapes (literals replaced by ?, prepared and text statements
together) with their average latency as captured, and bytes on disk.

A capture started or stopped on a proxy that was already relaying holds
sessions that were open at its start (they enter it through synthetic
records that rebuild their state: connect, SETs, an open transaction,
prepared statements) and sessions still open at its stop (a synthetic end).
Inspect says how many sessions began and ended each way, and counts the
synthetic records apart from those clients sent.

A capture whose writer did not close (a crash) is readable up to its last sync;
inspect says so, and counts and names the records lost in the middle (found by
their sequence numbers). A packed capture (tandem pack) is unpacked once and
checked against the archive's checksums.

An encrypted capture (tandem proxy --encrypt-key-file) opens with its key
only (--encrypt-key-file, or $TANDEM_ENCRYPT_KEY_FILE); inspect says that it
is encrypted.`,
		Example: `  tandem inspect ./capture
  tandem inspect ./capture --top 25
  tandem inspect ./capture --json | jq .top_digests
  tandem inspect ./capture --verify`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("inspect takes one capture directory, got %d arguments; see 'tandem inspect --help'", len(args))
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			if err := atLeast1("--top", opts.Top); err != nil {
				return err
			}
			key, err := keys.load()
			if err != nil {
				return err
			}
			opts.Key = key
			dir, err := captureDir(args[0], unpackDir, key)
			if err != nil {
				return err
			}
			if verify {
				return verifyCapture(c.OutOrStdout(), args[0], dir, key)
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
	cmd.Flags().StringVar(&unpackDir, "unpack-dir", "", "where a packed capture (FILE.tar.zst, tandem pack) is unpacked once, made if missing (default $TMPDIR)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&verify, "verify", false, "read every record, past damaged files, and say what is readable, which files are damaged (and the records they held) and which records are lost; exit 1 if anything is")
	keys.add(cmd.Flags(), keyReadHelp)
	return cmd
}

// verifyCapture prints what store.Verify found in the capture at dir
// (named name), and fails if anything is damaged or lost.
func verifyCapture(w io.Writer, name, dir string, key *store.Key) error {
	r, err := store.Open(dir, store.WithKey(key))
	if err != nil {
		return err
	}
	defer r.Close()
	v, err := r.Verify()
	if err != nil {
		if v != nil {
			fmt.Fprintf(w, "%s: %d records readable before what follows\n", name, v.Readable)
		}
		return err
	}
	fmt.Fprintf(w, "%s: %d records readable\n", name, v.Readable)
	for _, d := range v.Damaged {
		fmt.Fprintf(w, "damaged: %s, which holds %s (those from its damaged block on are not read): %s\n", d.File, d.Held, d.Detail)
	}
	if lost := v.Lost.String(); lost != "" {
		fmt.Fprintf(w, "lost: %s\n", lost)
	}
	if s, ok := r.Summary(); ok && len(v.Damaged) == 0 && v.Lost.Missing == 0 && v.Readable != s.Records {
		fmt.Fprintf(w, "lost: %d records after the last one read (its summary counts %d)\n", s.Records-v.Readable, s.Records)
		return fmt.Errorf("%s: records are missing", name)
	}
	switch {
	case len(v.Damaged) > 0:
		return fmt.Errorf("%s is damaged: restore it from a good copy (replay refuses it; replay --skip-damaged replays the records that are readable)", name)
	case v.Lost.Missing > 0:
		return fmt.Errorf("%s lacks records: replay refuses it; --skip-damaged replays what is there", name)
	}
	if _, ok := r.Summary(); !ok {
		// No summary to count against: records lost after the last one
		// read (the last WAL emptied or cut) leave no trace.
		fmt.Fprintf(w, "%s: no record missing up to the last one read; its writer did not close, so records after it may be lost without a trace\n", name)
		return nil
	}
	fmt.Fprintf(w, "%s: whole\n", name)
	return nil
}
