package main

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/tandemdb/tandem/gtid"
	"github.com/tandemdb/tandem/store"
	"github.com/tandemdb/tandem/targets"
)

func newAlignCmd() *cobra.Command {
	var capDir, dump string
	var keys keyFlag
	var end, keep, hold bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "align --capture DIR [--end] NAME=DSN... | --capture DIR --dump FILE | --hold NAME=DSN...",
		Short: "Bring replicas exactly to a capture's start (or end) point, or check a dump against it",
		Long: `A replay's verdicts on writes hold only if each target starts with exactly the
rows the primary held when the capture began: every write applied once, by
replication up to the capture's start point or by the replay after it, never
both and never neither. A capture taken with 'tandem proxy --binlog-user' knows
that point (its GTID position; 'tandem inspect' shows it).

For each replica named (NAME=DSN, a MariaDB server replicating from the primary
with GTIDs, master_use_gtid=slave_pos), align lets replication run until the
point (START SLAVE UNTIL master_gtid_pos), checks the position reached, and
stops and removes its replication (RESET SLAVE ALL; --keep-replication leaves
it configured, stopped), so that replay's writes never meet the primary's. Its
tables keep their engine: a MyRocks replica stays MyRocks. A replica already
past the point cannot go back: align says so, with both positions.

--end stops a replica at the capture's end point instead: its data is then
production's end state, for replay's --reference.

A target that a replay already wrote to carries its mark (replay leaves one
in a database named tandem before its first statement) and is refused: its
rows are no longer a start state, whatever its position says; seed it again.

A replica must not be past the point when align runs: hold it before the
capture begins (--hold stops its SQL thread: it keeps receiving the primary's
binary log and applies nothing), or use a delayed replica (CHANGE MASTER TO
master_delay=N).

--dump FILE checks a dump (mariadb-dump --single-transaction --gtid
--master-data=2) against the start point: at it, the dump can seed targets;
before or after it, align says how many transactions lie between and exits 1.`,
		Example: `  tandem align --hold innodb='root@tcp(127.0.0.1:3307)/' myrocks='root@tcp(127.0.0.1:3308)/'
  TANDEM_BINLOG_PASSWORD=… tandem proxy --backend 127.0.0.1:3306 --capture ./cap --binlog-user repl   # …then stop it
  tandem align --capture ./cap innodb='root@tcp(127.0.0.1:3307)/' myrocks='root@tcp(127.0.0.1:3308)/'
  tandem align --capture ./cap --end production='root@tcp(127.0.0.1:3309)/'
  tandem align --capture ./cap --dump app.sql`,
		RunE: func(c *cobra.Command, args []string) error {
			if hold {
				// --hold comes before a capture exists: a capture's flags
				// with it would be ignored, the user believing the
				// replicas aligned.
				for _, n := range []string{"capture", "end", "dump", "keep-replication", "timeout"} {
					if c.Flags().Changed(n) {
						return fmt.Errorf("--hold only stops the replicas' SQL threads, before a capture begins; --%s belongs to the later call that aligns them (tandem align --capture DIR NAME=DSN...)", n)
					}
				}
				return holdReplicas(c, args)
			}
			if capDir == "" {
				return errors.New("--capture DIR is required: align brings targets to that capture's start point")
			}
			if dump != "" && len(args) > 0 {
				return errors.New("--dump checks a dump file; name replicas in a separate call")
			}
			if dump == "" && len(args) == 0 {
				return errors.New("name the replicas to align (NAME=DSN), or give --dump FILE; see 'tandem align --help'")
			}
			key, err := keys.load()
			if err != nil {
				return err
			}
			r, err := store.Open(capDir, store.WithKey(key))
			if err != nil {
				return err
			}
			meta := r.Meta()
			sum, closed := r.Summary()
			r.Close()
			if meta.Start == nil {
				return fmt.Errorf("%s has no start point: it was captured without --binlog-user, so nothing says which rows the targets must hold; capture again with tandem proxy --binlog-user USER", capDir)
			}
			point, what := meta.Start, "start"
			if end {
				if !closed || sum.End == nil {
					return fmt.Errorf("%s has no end point (its proxy did not close it, or could not read the position at its end)", capDir)
				}
				point, what = sum.End, "end"
			}
			out := c.OutOrStdout()
			if dump != "" {
				f, err := os.Open(dump)
				if err != nil {
					return err
				}
				defer f.Close()
				flavor, pos, err := gtid.DumpPosition(f)
				if err != nil {
					return fmt.Errorf("%s: %w", dump, err)
				}
				d, err := gtid.Compare(flavor, point.GTID, pos)
				if err != nil {
					return err
				}
				switch {
				case d.Same:
					fmt.Fprintf(out, "%s is at the capture's %s point %s: load it into each target (its tables' ENGINE rewritten for the target's engine), and replay\n", dump, what, point.GTID)
					return nil
				case d.Behind > 0 && d.Ahead == 0 && len(d.Diverged) == 0:
					return fmt.Errorf("%s was taken at %s, %s the capture's %s point %s: those transactions are in neither the dump nor the capture; load the dump into a replica, replicate and 'tandem align' it, or dump again right at the point", dump, pos, d.Relative(), what, point.GTID)
				default:
					return fmt.Errorf("%s was taken at %s, %s the capture's %s point %s: the dump holds writes the replay will make again; take a dump before the capture began, or align a replica", dump, pos, d.Relative(), what, point.GTID)
				}
			}
			return eachReplica(c, args, "aligned", func(t targets.Target, db *sql.DB) (string, error) {
				a, err := gtid.AlignReplica(c.Context(), db, point.GTID, timeout, !keep)
				if err != nil {
					return "", err
				}
				how := "replication stopped and removed: replay may write to it"
				if end {
					how = "replication stopped and removed: it holds production's end state (replay --reference " + t.Name + "=DSN)"
				}
				switch {
				case keep:
					how = "replication stopped, still configured (--keep-replication): RESET SLAVE ALL before replaying onto it"
				case !a.Detached:
					how = "it does not replicate"
				}
				return fmt.Sprintf("at the capture's %s point %s (was %s: applied %d transactions); %s", what, show(a.Now), show(a.Was), a.Applied, how), nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&capDir, "capture", "", "the capture whose point to align to (taken with tandem proxy --binlog-user)")
	f.BoolVar(&end, "end", false, "align to the capture's end point: the replica then holds production's end state (replay --reference)")
	f.StringVar(&dump, "dump", "", "check this dump's GTID position against the capture's start instead")
	f.BoolVar(&hold, "hold", false, "stop the replicas' SQL threads now, before a capture begins, so that none is past its start point")
	f.BoolVar(&keep, "keep-replication", false, "stop the replicas at the point but keep their replication configured")
	f.DurationVar(&timeout, "timeout", 10*time.Minute, "how long a replica may take to reach the point")
	keys.add(f, keyReadHelp)
	return cmd
}

// holdReplicas stops each replica's SQL thread (align --hold).
func holdReplicas(c *cobra.Command, args []string) error {
	if len(args) == 0 {
		return errors.New("--hold: name the replicas (NAME=DSN)")
	}
	return eachReplica(c, args, "held", func(t targets.Target, db *sql.DB) (string, error) {
		pos, err := gtid.Hold(c.Context(), db)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("held at %s (its SQL thread stopped; it still receives the binary log): start the capture, then align it", show(pos)), nil
	})
}

// eachReplica runs f on every replica named (NAME=DSN) once its server
// answers (an unreachable one is said as such), printing "NAME: what f
// says" or the error, and fails if any failed.
func eachReplica(c *cobra.Command, specs []string, done string, f func(targets.Target, *sql.DB) (string, error)) error {
	var failed int
	for _, spec := range specs {
		t, err := targets.Parse(spec)
		if err != nil {
			return err
		}
		db, err := t.Open()
		if err != nil {
			return err
		}
		msg := ""
		if _, err = t.Check(c.Context(), db); err == nil {
			msg, err = f(t, db)
		}
		db.Close()
		if err != nil {
			failed++
			fmt.Fprintf(c.ErrOrStderr(), "tandem align: %s: %v\n", t.Name, err)
			continue
		}
		fmt.Fprintf(c.OutOrStdout(), "%s: %s\n", t.Name, msg)
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d not %s (above)", failed, len(specs), done)
	}
	return nil
}

func show(pos string) string {
	if pos == "" {
		return "the empty position"
	}
	return pos
}
