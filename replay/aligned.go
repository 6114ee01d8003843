package replay

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/tandemdb/tandem/compare"
	"github.com/tandemdb/tandem/gtid"
	"github.com/tandemdb/tandem/serverlog"
	"github.com/tandemdb/tandem/store"
	"github.com/tandemdb/tandem/targets"
)

// checkAligned reads each target's GTID position before the first
// statement, when the capture knows its start point: a target not at it
// holds other rows than the primary did, so every verdict on writes would
// be false. Such targets are refused, with both positions and the command
// that fixes it, unless AllowUnaligned; then they are labelled. The
// reference (production's end state) must be at the capture's end point.
func checkAligned(ctx context.Context, cfg *Config, r *store.Reader, infos []store.RunTarget) ([]string, error) {
	start := r.Meta().Start
	sum, _ := r.Summary()
	if start == nil {
		if cfg.Reference != nil {
			return nil, fmt.Errorf("replay: --reference needs a capture with start and end points (tandem proxy --binlog-user); %s has none", cfg.captureName())
		}
		if strings.HasPrefix(r.Meta().Source, "synth ") {
			return nil, nil // made up: no server's history to start from
		}
		notes := []string{"the capture has no start point (it was taken without tandem proxy --binlog-user): verdicts on writes assume every target held the primary's rows when the capture began, which replay cannot check"}
		if o := r.Meta().Origin; o != nil {
			notes = append(notes, originNotes(o)...)
		}
		return notes, nil
	}
	var bad []string
	var specs []string
	for i, t := range cfg.Targets {
		pos, d, replayed, err := positionOf(ctx, t, start)
		if err != nil {
			return nil, fmt.Errorf("replay: target %s: %w", t.Name, err)
		}
		infos[i].Position = pos
		if replayed != "" {
			infos[i].AlignedNote = "NOT at the capture's start: " + replayed
			bad = append(bad, fmt.Sprintf("%s was replayed onto before (%s): its rows are no longer a start state, whatever its position says; seed it again (from a replica or a dump; drop its database %q) and align it", t.Name, replayed, gtid.MarkerDB))
			specs = append(specs, t.Name+"=DSN")
			continue
		}
		if d.Same {
			infos[i].Aligned = true
			infos[i].AlignedNote = "at the capture's start point " + start.GTID
			continue
		}
		infos[i].AlignedNote = fmt.Sprintf("NOT at the capture's start point: at %s, %s %s", orEmpty(pos), d.Relative(), start.GTID)
		bad = append(bad, fmt.Sprintf("%s is at %s, %s the capture's start %s", t.Name, orEmpty(pos), d.Relative(), start.GTID))
		specs = append(specs, t.Name+"=DSN")
	}
	if cfg.Reference != nil {
		if sum.End == nil {
			return nil, fmt.Errorf("replay: --reference: %s has no end point (its proxy did not close it, or could not read the position at its end)", cfg.captureName())
		}
		pos, d, replayed, err := positionOf(ctx, *cfg.Reference, sum.End)
		if err != nil {
			return nil, fmt.Errorf("replay: reference %s: %w", cfg.Reference.Name, err)
		}
		if replayed != "" {
			return nil, fmt.Errorf("replay: the reference %s was replayed onto (%s): it does not hold production's end state; stop a fresh replica at the capture's end with 'tandem align --end'", cfg.Reference.Name, replayed)
		}
		if !d.Same {
			if !cfg.AllowUnaligned {
				return nil, fmt.Errorf("replay: the reference %s is at %s, %s the capture's end point %s, so it does not hold production's end state; stop it there with 'tandem align --end --capture %s %s=DSN'",
					cfg.Reference.Name, orEmpty(pos), d.Relative(), sum.End.GTID, cfg.Capture, cfg.Reference.Name)
			}
			bad = append(bad, fmt.Sprintf("the reference %s is at %s, %s the capture's end %s", cfg.Reference.Name, orEmpty(pos), d.Relative(), sum.End.GTID))
		}
	}
	if len(bad) == 0 {
		return nil, nil
	}
	if !cfg.AllowUnaligned {
		return nil, fmt.Errorf("replay: targets do not hold the rows the primary held when the capture began: %s. Bring them there with 'tandem align --capture %s %s' (a replica of the primary), or replay anyway with --allow-unaligned (the report then labels every verdict on writes)",
			strings.Join(bad, "; "), cfg.Capture, strings.Join(specs, " ")) // align reads a directory, not an archive
	}
	return []string{fmt.Sprintf("UNALIGNED (--allow-unaligned): %s. Differences on writes there may be the starting rows', not the engines': they are not verdicts", strings.Join(bad, "; "))}, nil
}

// CheckNotApplying refuses a target whose server is a replica with its
// SQL thread running: it applies its source's changes while replay
// writes, so its rows change under the run, replay's writes and
// replication's mix, and every verdict there compares that mixture. (A
// replica held by 'tandem align --hold' receives without applying; one
// aligned has its replication stopped.) An account that may not ask is
// not refused. what names the target in the message: "target" (replay's,
// which 'tandem align' can stop at a capture's start) or "shadow".
func CheckNotApplying(ctx context.Context, what string, t targets.Target, db *sql.DB) error {
	srcs, err := gtid.Applying(ctx, db)
	if err != nil {
		return fmt.Errorf("%s %s: reading its replication state: %w", what, t.Name, err)
	}
	if len(srcs) == 0 {
		return nil
	}
	var from, stop []string
	alignable := what == "target" // a shadow's capture is yet to come
	for _, s := range srcs {
		from = append(from, s.String())
		stop = append(stop, s.Stop())
		alignable = alignable && s.MariaDB && s.Connection == ""
	}
	fix := fmt.Sprintf("stop its replication (%s) once it holds the rows the capture began with", strings.Join(stop, "; "))
	if alignable {
		fix = fmt.Sprintf("stop it at the capture's start point with 'tandem align --capture DIR %s=DSN' (a capture taken with tandem proxy --binlog-user), or %s", t.Name, fix)
	}
	return fmt.Errorf("%s %s is a replica applying the changes of %s as they come (its SQL thread runs): its rows would change under the replay and mix with replay's writes, and no verdict there would be the engine's. %s",
		what, t.Name, strings.Join(from, ", "), strings.ToUpper(fix[:1])+fix[1:])
}

// CheckWritable refuses a target whose server refuses this account's
// writes because it is read-only (@@read_only, MySQL's super_read_only;
// a replica stopped by 'tandem align' keeps it): each write would fail
// with 1290, fast, and that failure be timed and compared as the
// engine's answer. The probe is a DELETE of no row from a table of a
// schema that does not exist: a read-only server refuses it for that
// before it looks for the table (1290), any other answers that the
// table is not there; nothing is written either way. A server started
// with innodb_read_only, and a session read-only by its DSN, are refused
// too. what names the target in the message ("target", "shadow").
func CheckWritable(ctx context.Context, what string, t targets.Target, db *sql.DB) error {
	// The session itself may be read-only: the DSN's transaction_read_only
	// (MariaDB before 11.1, MySQL before 8.0.3: tx_read_only), whose
	// refusal (1792) comes only once a write touches a table. One
	// connection for both questions: the session variable is the DSN's.
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, t.Name, err)
	}
	defer conn.Close()
	for _, v := range []string{"transaction_read_only", "tx_read_only"} {
		var ro sql.NullInt64
		if conn.QueryRowContext(ctx, "SELECT @@session."+v).Scan(&ro) != nil {
			continue // unknown here (1193): the other name
		}
		if ro.Int64 == 1 {
			return fmt.Errorf("%s %s refuses writes: its session is read-only (%s=1, from its DSN or the server's default); every write the capture holds would fail there (1792) and its failure be compared and timed as the engine's answer. Leave %s out of the DSN, or set it to 0",
				what, t.Name, v, v)
		}
		break
	}
	// innodb_read_only (a start option) leaves the probe alone: every
	// write to an InnoDB table fails (1036) on any account.
	var innoRO sql.NullInt64
	if conn.QueryRowContext(ctx, "SELECT @@global.innodb_read_only").Scan(&innoRO) == nil && innoRO.Int64 == 1 && (t.Engine == "" || t.Engine == "InnoDB") {
		return fmt.Errorf("%s %s refuses writes to InnoDB tables: its server was started with innodb_read_only; every write the capture holds to an InnoDB table would fail there (1036) and its failure be compared and timed as the engine's answer. Start that server without --innodb-read-only",
			what, t.Name)
	}
	_, err = conn.ExecContext(ctx, "DELETE FROM tandem_no_such_schema.tandem_read_only_probe WHERE 1=0")
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1290 {
		return nil
	}
	return fmt.Errorf("%s %s refuses this account's writes: the server is read-only (%s); every write the capture holds would fail there and its failure be compared and timed as the engine's answer. Turn it off on that server (SET GLOBAL read_only = OFF: a replica stopped by 'tandem align' keeps it on), or connect as an account that may write on a read-only server (MariaDB: the READ ONLY ADMIN privilege)",
		what, t.Name, me.Message)
}

// positionOf reads t's GTID position against want, and the mark of an
// earlier replay onto it.
func positionOf(ctx context.Context, t targets.Target, want *store.Position) (string, gtid.Diff, string, error) {
	db, err := t.Open()
	if err != nil {
		return "", gtid.Diff{}, "", err
	}
	defer db.Close()
	replayed, err := gtid.Replayed(ctx, db)
	if err != nil {
		return "", gtid.Diff{}, "", err
	}
	flavor, pos, _, err := gtid.Applied(ctx, db)
	if err != nil {
		return "", gtid.Diff{}, "", err
	}
	if flavor != want.Flavor {
		return pos, gtid.Diff{Diverged: []string{fmt.Sprintf("a %s server, the capture's is %s", flavor, want.Flavor)}}, replayed, nil
	}
	d, err := gtid.Compare(flavor, want.GTID, pos)
	return pos, d, replayed, err
}

// markReplayed leaves the mark of this run on every target (the capture
// has a start point): from its first statement on, a target no longer
// holds the start state, and the next replay or align must know it.
func markReplayed(ctx context.Context, cfg *Config, r *store.Reader) error {
	start := r.Meta().Start
	if start == nil {
		return nil
	}
	for _, t := range cfg.Targets {
		db, err := t.Open()
		if err != nil {
			return err
		}
		err = gtid.MarkReplayed(ctx, db, cfg.RunID, cfg.captureName(), start.GTID)
		db.Close()
		if err != nil {
			return fmt.Errorf("replay: target %s: %w", t.Name, err)
		}
	}
	return nil
}

func orEmpty(pos string) string {
	if pos == "" {
		return "the empty position"
	}
	return pos
}

// bypassedOf places each table's first write that bypassed the proxy on
// the capture's clock (compare.PlaceBypassed), from the GTIDs the capture
// holds for its commits. Nil when the capture lists none.
func bypassedOf(r *store.Reader) (*compare.Bypassed, error) {
	sum, ok := r.Summary()
	if !ok || sum.Bypassed == nil || len(sum.Bypassed.Tables) == 0 {
		return nil, nil
	}
	gtids, err := r.GTIDs()
	if err != nil {
		return nil, err
	}
	var commits []compare.CommitStart
	for seq, g := range gtids {
		id, err := gtid.ParseGTID(g)
		if err != nil {
			continue
		}
		rec, ok, err := r.Get(seq)
		if err != nil {
			return nil, err
		}
		if ok {
			commits = append(commits, compare.CommitStart{Domain: id.Domain, Seq: id.Seq, Start: rec.Start.UnixNano()})
		}
	}
	start := r.Meta().BaseTime
	if p := r.Meta().Start; p != nil {
		start = p.At.UnixNano()
	}
	return compare.PlaceBypassed(gtid.BypassedTables(sum.Bypassed), start, commits), nil
}

// applyBypassed makes r yield the capture's bypassed transactions among
// its records (--apply-bypassed) and says what it applies; a capture that
// holds none of those it lists, or not all, is refused with why.
func applyBypassed(cfg *Config, r *store.Reader) (string, error) {
	sum, ok := r.Summary()
	if !ok || sum.Bypassed == nil {
		return "", fmt.Errorf("replay: --apply-bypassed: %s lists no writes that bypassed the proxy (it was captured without --binlog-user, or did not close)", cfg.captureName())
	}
	b := sum.Bypassed
	if b.Error != "" {
		return "", fmt.Errorf("replay: --apply-bypassed: the capture's list of writes that bypassed the proxy is incomplete (%s); replay without it", b.Error)
	}
	if b.Unasked > 0 {
		return "", fmt.Errorf("replay: --apply-bypassed: %d captured transactions have GTIDs the proxy could not ask for (see inspect), so up to %d of the transactions listed as bypassing it are captured ones: applying them would run those twice; replay without it", b.Unasked, b.Unasked)
	}
	if b.Applicable < b.Transactions {
		why := b.NotApplicable
		if why == "" {
			why = "they were not stored"
		}
		return "", fmt.Errorf("replay: --apply-bypassed: only %d of the %d transactions that bypassed the proxy can be applied: %s; replay without it (their tables' differences are then counted apart)", b.Applicable, b.Transactions, why)
	}
	n, err := r.ApplyBypassed()
	if err != nil {
		return "", err
	}
	switch {
	case n == 0 && b.Applicable == 0:
		return "no transaction bypassed the proxy during the capture (its binary-log check lists none): --apply-bypassed had nothing to apply", nil
	case n == 0:
		return "", fmt.Errorf("%w: %s: its summary counts %d bypassed transactions stored, and it holds none", store.ErrCorrupt, cfg.captureName(), b.Applicable)
	}
	return fmt.Sprintf("applied the %d transactions (%d rows) that bypassed the proxy, rebuilt from the binary log's row images, one after another on one connection as a replica applies them, each where the server ran it among the captured ones (--apply-bypassed)", b.Applicable, b.Rows), nil
}

// originNotes says what a capture taken without a proxy lacks, and so
// what the report cannot claim.
func originNotes(o *store.Origin) []string {
	var notes []string
	switch {
	case o.NoResults && o.Kind == serverlog.OriginKind(serverlog.Audit):
		notes = append(notes, fmt.Sprintf("the capture was read from a server's %s and holds no answers but the errors statements ended with: targets are compared with each other, and with production by those errors only", o.Kind))
	case o.NoResults:
		notes = append(notes, fmt.Sprintf("the capture was read from a server's %s and holds no answers: targets are compared with each other only, never with production", o.Kind))
	}
	if o.TimePrecision >= time.Millisecond {
		notes = append(notes, fmt.Sprintf("the capture's times are as precise as its source (%v): statements logged in the same %v keep the log's order, and their overlaps are not known", o.TimePrecision, o.TimePrecision))
	}
	return notes
}
