package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tandemdb/tandem/store"
)

func newPackCmd() *cobra.Command {
	var out string
	var crashed bool
	var keys keyFlag
	cmd := &cobra.Command{
		Use:   "pack CAPTURE_DIR -o FILE" + store.ArchiveSuffix,
		Short: "Write a closed capture as one compressed archive, to ship to replayers",
		Long: `Writes a closed capture as one zstd-compressed tar archive. tandem replay,
sweep and inspect accept the archive wherever they accept a capture
directory: they unpack it once into a local directory (under $TMPDIR, or
--unpack-dir) and reuse it afterwards. On Kubernetes, put the archive on a
ReadOnlyMany volume or fetch it in an init container (deploy/kubernetes).

The capture is read whole first: a damaged one (a file that fails its
checksum, records missing) is refused, as is one still being written or whose
writer was killed. The archive carries each file's SHA-256; unpacking checks
them, and a damaged archive fails to unpack, leaving nothing behind.

A crashed capture (its proxy or synth was killed, the machine went down, the
writer failed) is packed with --crashed: it is sealed first — every record
read, and the summary a clean close would have written is added to the
capture, saying that it was sealed, why, and which records are lost — then
packed. Sealing changes the capture directory once; a capture with a
damaged file cannot be sealed ('tandem inspect --verify' says which). Replay
refuses a sealed capture that lost records unless --skip-damaged, as it does
the directory.

An encrypted capture (tandem proxy --encrypt-key-file) is verified with its
key (--encrypt-key-file, or $TANDEM_ENCRYPT_KEY_FILE) and packed as it is:
the archive holds its encrypted files, and replay and inspect open it with
the same key.`,
		Example: `  tandem pack ./capture -o capture.tar.zst
  tandem pack --crashed ./capture-of-a-killed-proxy -o capture.tar.zst
  tandem replay capture.tar.zst --shard 0/4 --run-id nightly --target …`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("pack takes one capture directory; see 'tandem pack --help'")
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			if out == "" {
				return fmt.Errorf("give the archive to write: -o FILE%s", store.ArchiveSuffix)
			}
			if !strings.HasSuffix(out, store.ArchiveSuffix) {
				return fmt.Errorf("-o %s: name the archive …%s, so that replay knows it", out, store.ArchiveSuffix)
			}
			if _, err := os.Stat(out); err == nil {
				return fmt.Errorf("-o %s exists already; name a new file", out)
			}
			key, err := keys.load()
			if err != nil {
				return err
			}
			if crashed {
				sum, err := store.Seal(args[0], store.WithKey(key))
				switch {
				case err == nil:
					lost := "none lost"
					if sum.Lost != "" {
						lost = "LOST " + sum.Lost + " (replay refuses it unless --skip-damaged)"
					}
					fmt.Fprintf(c.OutOrStdout(), "tandem pack: sealed %s: %s; it holds %d records (seq %d to %d) of %d sessions and %d commits with their GTID; records %s\n",
						args[0], sum.Sealed, sum.Records, sum.FirstSeq, sum.LastSeq, sum.Sessions, sum.Commits, lost)
				case errors.Is(err, store.ErrAlreadyClosed):
					fmt.Fprintf(c.OutOrStdout(), "tandem pack: %s was closed cleanly; packing it as it is\n", args[0])
				default:
					return err
				}
			}
			f, err := os.OpenFile(out, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
			if err != nil {
				return err
			}
			n, err := store.Pack(args[0], f, store.WithKey(key))
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				os.Remove(out)
				return err
			}
			st, _ := os.Stat(out)
			fmt.Fprintf(c.OutOrStdout(), "tandem pack: %s: %d files, %d bytes\n", out, n, st.Size())
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "the archive to write (FILE"+store.ArchiveSuffix+"; must not exist)")
	cmd.Flags().BoolVar(&crashed, "crashed", false, "seal a capture whose writer was killed (read every record, write its summary into the capture), then pack it")
	keys.add(cmd.Flags(), "verify and seal an encrypted capture (it is packed encrypted, as it is)")
	return cmd
}

// captureDir returns a capture's directory: path itself, or where a packed
// capture (tandem pack) was unpacked (key: an encrypted one's).
func captureDir(path, unpackDir string, key *store.Key) (string, error) {
	if !strings.HasSuffix(path, store.ArchiveSuffix) {
		return path, nil
	}
	return store.Unpack(path, unpackDir, store.WithKey(key))
}
