package gtid

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// ErrNotAligned: a server is not at the position asked for and cannot
// be brought there by replication.
var ErrNotAligned = errors.New("gtid: not at the capture's point")

// Aligned is what AlignReplica did.
type Aligned struct {
	// Was and Now are the replica's positions before and after.
	Was, Now string
	// Applied counts the transactions it applied to get there.
	Applied uint64
	// Detached: its replication was stopped and removed (RESET SLAVE ALL).
	Detached bool
}

// AlignReplica brings a MariaDB replica to exactly want: it lets its
// replication run until that position (START SLAVE UNTIL
// master_gtid_pos), checks the position reached, and with detach stops
// and removes its replication, so that replay's writes never meet the
// primary's. A replica already past want, or one that does not
// replicate, is ErrNotAligned with what to do.
func AlignReplica(ctx context.Context, db *sql.DB, want string, timeout time.Duration, detach bool) (Aligned, error) {
	var a Aligned
	flavor, have, version, err := Applied(ctx, db)
	if err != nil {
		return a, err
	}
	if flavor != MariaDB {
		return a, fmt.Errorf("%w: %s is MySQL: align it by hand with STOP REPLICA; START REPLICA UNTIL SQL_AFTER_GTIDS='%s'; then check @@gtid_executed and RESET REPLICA ALL", ErrNotAligned, version, want)
	}
	a.Was = have
	if replayed, err := Replayed(ctx, db); err != nil {
		return a, err
	} else if replayed != "" {
		return a, fmt.Errorf("%w: %s; its rows are no longer the primary's, whatever its position says: seed it again (from the primary's replica or a dump; drop its database %q) and align it", ErrNotAligned, replayed, MarkerDB)
	}
	st, err := slaveStatus(ctx, db)
	if err != nil {
		return a, err
	}
	d, err := Compare(MariaDB, want, have)
	if err != nil {
		return a, err
	}
	if d.Same && st != nil && st["Slave_SQL_Running"] == "Yes" {
		// At the point but still applying: stop, then look again.
		if _, err := db.ExecContext(ctx, "STOP SLAVE"); err != nil {
			return a, fmt.Errorf("STOP SLAVE: %w", err)
		}
		if _, have, _, err = Applied(ctx, db); err != nil {
			return a, err
		}
		if d, err = Compare(MariaDB, want, have); err != nil {
			return a, err
		}
	}
	switch {
	case d.Ahead > 0 || len(d.Diverged) > 0:
		return a, fmt.Errorf("%w: it is at %s, the point is %s (%s); a server cannot go back: restore it from a backup or a dump (mariadb-dump --gtid) taken before the point, start its replication, and align it again", ErrNotAligned, show(have), show(want), d)
	case d.Behind > 0 && st == nil:
		return a, fmt.Errorf("%w: it is at %s, %s the point %s, and does not replicate: CHANGE MASTER TO master_host=…, master_use_gtid=slave_pos; then align it again", ErrNotAligned, show(have), d.Relative(), show(want))
	case d.Behind > 0:
		if g := st["Using_Gtid"]; !strings.EqualFold(g, "Slave_Pos") && !strings.EqualFold(g, "Current_Pos") {
			return a, fmt.Errorf("%w: it replicates by file and offset (Using_Gtid %s), so it cannot stop at a GTID: CHANGE MASTER TO master_use_gtid=slave_pos; then align it again", ErrNotAligned, g)
		}
		for _, q := range []string{"STOP SLAVE", "START SLAVE UNTIL master_gtid_pos='" + want + "'"} {
			if _, err := db.ExecContext(ctx, q); err != nil {
				return a, fmt.Errorf("%s: %w", q, err)
			}
		}
		if err := waitStopped(ctx, db, timeout); err != nil {
			return a, err
		}
		if _, have, _, err = Applied(ctx, db); err != nil {
			return a, err
		}
		if d, err = Compare(MariaDB, want, have); err != nil {
			return a, err
		}
		if !d.Same {
			return a, fmt.Errorf("%w: replication stopped at %s, not at the point %s (%s); see SHOW SLAVE STATUS", ErrNotAligned, show(have), show(want), d)
		}
	}
	a.Now = have
	if was, err := Compare(MariaDB, have, a.Was); err == nil {
		a.Applied = was.Behind
	}
	if detach && st != nil {
		for _, q := range []string{"STOP SLAVE", "RESET SLAVE ALL"} {
			if _, err := db.ExecContext(ctx, q); err != nil {
				return a, fmt.Errorf("%s: %w", q, err)
			}
		}
		a.Detached = true
	}
	return a, nil
}

// Hold stops a replica's SQL thread (STOP SLAVE SQL_THREAD): it goes on
// receiving the primary's binary log but applies nothing more, so it stays
// before a capture about to begin, for AlignReplica to bring it forward.
// It returns the replica's position.
func Hold(ctx context.Context, db *sql.DB) (string, error) {
	st, err := slaveStatus(ctx, db)
	if err != nil {
		return "", err
	}
	if st == nil {
		return "", fmt.Errorf("%w: it does not replicate, so there is nothing to hold", ErrNotAligned)
	}
	if _, err := db.ExecContext(ctx, "STOP SLAVE SQL_THREAD"); err != nil {
		return "", fmt.Errorf("STOP SLAVE SQL_THREAD: %w", err)
	}
	_, pos, _, err := Applied(ctx, db)
	return pos, err
}

// waitStopped waits for the replica's SQL thread to stop (its UNTIL
// reached) and fails on a replication error.
func waitStopped(ctx context.Context, db *sql.DB, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		st, err := slaveStatus(ctx, db)
		if err != nil {
			return err
		}
		if st == nil {
			return errors.New("gtid: the replica's replication went away while aligning")
		}
		if e := st["Last_SQL_Errno"]; e != "" && e != "0" {
			return fmt.Errorf("%w: replication failed while aligning: %s %s", ErrNotAligned, e, st["Last_SQL_Error"])
		}
		if e := st["Last_IO_Errno"]; e != "" && e != "0" {
			return fmt.Errorf("%w: the replica cannot read the primary's binary log: %s %s", ErrNotAligned, e, st["Last_IO_Error"])
		}
		if st["Slave_SQL_Running"] == "No" {
			return nil
		}
		if time.Now().After(deadline) {
			db.ExecContext(ctx, "STOP SLAVE")
			return fmt.Errorf("%w: the replica did not reach the point within %s (at %s); a larger --timeout waits longer", ErrNotAligned, timeout, st["Gtid_IO_Pos"])
		}
		select {
		case <-ctx.Done():
			db.ExecContext(context.Background(), "STOP SLAVE")
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// slaveStatus returns SHOW SLAVE STATUS's row by column, nil when the
// server does not replicate.
func slaveStatus(ctx context.Context, db *sql.DB) (map[string]string, error) {
	return showRow(ctx, db, "SHOW SLAVE STATUS")
}

// showRow returns the first row of a SHOW statement by column name, nil
// when it has none.
func showRow(ctx context.Context, db *sql.DB, show string) (map[string]string, error) {
	rows, err := showRows(ctx, db, show)
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	return rows[0], nil
}

func show(pos string) string {
	if pos == "" {
		return "the empty position"
	}
	return pos
}

var (
	mariadbDumpPos = regexp.MustCompile(`(?i)^(?:--\s*)?SET\s+GLOBAL\s+gtid_slave_pos\s*=\s*'([^']*)'`)
	mysqlDumpPos   = regexp.MustCompile(`(?i)^(?:--\s*)?SET\s+@@GLOBAL\.GTID_PURGED\s*=\s*(?:/\*!80000\s*'\+'\s*\*/\s*)?'([^']*)'`)
)

// DumpPosition finds the GTID position a dump was taken at, from the line
// mariadb-dump --gtid --master-data writes (at the end of the file: "the
// deferred gtid setting"), or mysqldump's GTID_PURGED near its top. A dump
// without one is an error that says how to take one.
func DumpPosition(r io.Reader) (flavor, pos string, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<30)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 || line[0] != '-' && line[0] != 'S' && line[0] != 's' {
			continue // data and DDL: cheap to pass over
		}
		if m := mariadbDumpPos.FindSubmatch(line); m != nil {
			return MariaDB, string(m[1]), nil
		}
		if m := mysqlDumpPos.FindSubmatch(line); m != nil {
			return MySQL, strings.ReplaceAll(string(m[1]), "\\n", ""), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", "", fmt.Errorf("gtid: reading the dump: %w", err)
	}
	return "", "", errors.New("gtid: the dump says nothing of its GTID position: take it with mariadb-dump --single-transaction --gtid --master-data=2 (MySQL: mysqldump --single-transaction --set-gtid-purged=ON)")
}

// Source is a replication connection of a server whose SQL thread runs:
// the server applies the changes of Host:Port as they come.
type Source struct {
	Connection string // MariaDB's connection name, MySQL's channel ("" the default)
	Host, Port string
	MariaDB    bool // the replica is a MariaDB server (else MySQL's statements)
}

func (s Source) String() string {
	if s.Connection == "" {
		return s.Host + ":" + s.Port
	}
	return fmt.Sprintf("%s:%s (connection %q)", s.Host, s.Port, s.Connection)
}

// Stop is the statement that stops this connection's replication.
func (s Source) Stop() string {
	q := func(n string) string { return "'" + strings.ReplaceAll(n, "'", "''") + "'" }
	switch {
	case s.MariaDB && s.Connection == "":
		return "STOP SLAVE"
	case s.MariaDB:
		return "STOP SLAVE " + q(s.Connection)
	case s.Connection == "":
		return "STOP REPLICA"
	}
	return "STOP REPLICA FOR CHANNEL " + q(s.Connection)
}

// Applying lists db's server's replication connections whose SQL thread
// runs (MariaDB's SHOW ALL SLAVES STATUS; MySQL's SHOW REPLICA STATUS,
// or SHOW SLAVE STATUS before 8.0.22): none when the server would not
// say (the account lacks the privilege to ask, or the server knows none
// of the three).
func Applying(ctx context.Context, db *sql.DB) ([]Source, error) {
	var rows []map[string]string
	var err error
	shows := []string{"SHOW ALL SLAVES STATUS", "SHOW REPLICA STATUS", "SHOW SLAVE STATUS"}
	var me *mysql.MySQLError
	i := 0
	for ; i < len(shows); i++ {
		// 1064 (a syntax error), 1235 or 1047 (not supported): another
		// server's statement; the next is tried.
		if rows, err = showRows(ctx, db, shows[i]); err == nil || !errors.As(err, &me) || me.Number != 1064 && me.Number != 1235 && me.Number != 1047 {
			break
		}
	}
	switch {
	case i == len(shows):
		return nil, nil
	case errors.As(err, &me) && (me.Number == 1227 || me.Number == 1142):
		return nil, nil // access denied: cannot tell
	case err != nil:
		return nil, err
	}
	pick := func(r map[string]string, names ...string) string {
		for _, n := range names {
			if v, ok := r[n]; ok {
				return v
			}
		}
		return ""
	}
	var srcs []Source
	for _, r := range rows {
		if pick(r, "Slave_SQL_Running", "Replica_SQL_Running") != "Yes" {
			continue
		}
		srcs = append(srcs, Source{Connection: pick(r, "Connection_name", "Channel_Name", "Channel_name"),
			Host: pick(r, "Master_Host", "Source_Host"), Port: pick(r, "Master_Port", "Source_Port"), MariaDB: i == 0})
	}
	return srcs, nil
}

// showRows returns every row of a SHOW statement, by column name.
func showRows(ctx context.Context, db *sql.DB, show string) ([]map[string]string, error) {
	rows, err := db.QueryContext(ctx, show)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", show, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	var out []map[string]string
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		m := make(map[string]string, len(cols))
		for i, c := range cols {
			m[c] = vals[i].String
		}
		out = append(out, m)
	}
	return out, rows.Err()
}
