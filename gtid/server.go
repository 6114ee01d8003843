package gtid

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tandemdb/tandem/store"
)

// ErrNoBinlog: the server keeps no binary log (or no GTIDs), so a capture
// cannot know where it starts.
var ErrNoBinlog = errors.New("gtid: the server has no binary log with GTIDs")

// FlavorOf says from a server's VERSION() which GTIDs it speaks.
func FlavorOf(version string) string {
	if strings.Contains(strings.ToLower(version), "mariadb") {
		return MariaDB
	}
	return MySQL
}

// Read returns the server's position now: its identity and the GTIDs its
// binary log holds. A server without a binary log (log_bin=OFF), or a MySQL
// server without gtid_mode=ON, is ErrNoBinlog, with what to change.
func Read(ctx context.Context, db *sql.DB) (*store.Position, error) {
	var p store.Position
	var logBin int
	if err := db.QueryRowContext(ctx, "SELECT VERSION(), @@server_id, @@log_bin").Scan(&p.Version, &p.ServerID, &logBin); err != nil {
		return nil, fmt.Errorf("gtid: reading the server's identity: %w", err)
	}
	p.Flavor = FlavorOf(p.Version)
	if logBin == 0 {
		return nil, fmt.Errorf("%w: log_bin is OFF on %s; start it with --log-bin --server-id=N --binlog-format=ROW (MariaDB: also --gtid-strict-mode=ON; MySQL: --gtid-mode=ON --enforce-gtid-consistency)", ErrNoBinlog, p.Version)
	}
	// Stamped before the question, not after the answer: a transaction
	// the position does not hold committed after the server read it,
	// later than this — and under load the answer can take milliseconds
	// to be read, during which such a transaction has committed and
	// captured statements that waited for its locks have ended. A later
	// stamp placed the writes that bypassed the proxy after statements
	// that had waited for them, and replay then deadlocked on them.
	p.At = time.Now().UTC()
	switch p.Flavor {
	case MariaDB:
		if err := db.QueryRowContext(ctx, "SELECT @@gtid_binlog_pos").Scan(&p.GTID); err != nil {
			return nil, fmt.Errorf("gtid: reading @@gtid_binlog_pos: %w", err)
		}
	default:
		var mode string
		if err := db.QueryRowContext(ctx, "SELECT @@server_uuid, @@gtid_mode, @@gtid_executed").Scan(&p.ServerUUID, &mode, &p.GTID); err != nil {
			return nil, fmt.Errorf("gtid: reading @@gtid_executed: %w", err)
		}
		if !strings.EqualFold(mode, "ON") {
			return nil, fmt.Errorf("%w: gtid_mode is %s; set --gtid-mode=ON --enforce-gtid-consistency", ErrNoBinlog, mode)
		}
		p.GTID = strings.ReplaceAll(p.GTID, "\n", "")
	}
	// The file and offset are for the record; reading them needs BINLOG
	// MONITOR (MariaDB) or REPLICATION CLIENT, which the GTIDs do not.
	if st, err := showRow(ctx, db, "SHOW MASTER STATUS"); err == nil && st != nil {
		p.BinlogFile = st["File"]
		fmt.Sscan(st["Position"], &p.BinlogPos)
	}
	return &p, nil
}

// Applied returns the GTID position of the data a server holds: what a
// replica has applied (MariaDB @@gtid_current_pos: its replicated position,
// or its own binary log's where it wrote itself; MySQL @@gtid_executed),
// with the server's flavor and version.
func Applied(ctx context.Context, db *sql.DB) (flavor, pos, version string, err error) {
	if err = db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		return "", "", "", fmt.Errorf("gtid: reading the server's version: %w", err)
	}
	flavor = FlavorOf(version)
	q := "SELECT @@gtid_current_pos"
	if flavor == MySQL {
		q = "SELECT @@gtid_executed"
	}
	if err = db.QueryRowContext(ctx, q).Scan(&pos); err != nil {
		return "", "", "", fmt.Errorf("gtid: reading the server's position (%s): %w", q, err)
	}
	return flavor, strings.ReplaceAll(pos, "\n", ""), version, nil
}
