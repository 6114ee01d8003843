package gtid

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	driver "github.com/go-sql-driver/mysql"
)

// A replay writes to its targets, and a target's GTID position does not
// move with them (a replica keeps no binary log of its own, or logs them
// under its own server id): after one replay, a target still reads as "at
// the capture's start" while its rows are not. So replay leaves a mark on
// every target before its first statement, in a database of its own, and
// align and replay refuse a target that has one.
const (
	MarkerDB    = "tandem"
	markerTable = "`" + MarkerDB + "`.`replays`"
)

// Replayed returns what the mark on db says ("" when there is none): the
// run that replayed onto it, when, and which capture.
func Replayed(ctx context.Context, db *sql.DB) (string, error) {
	var run, capture, at, startGTID string
	err := db.QueryRowContext(ctx, "SELECT run_id, capture, DATE_FORMAT(started, '%Y-%m-%dT%H:%i:%SZ'), start_gtid FROM "+markerTable+" ORDER BY started DESC LIMIT 1").Scan(&run, &capture, &at, &startGTID)
	var me *driver.MySQLError
	switch {
	case errors.Is(err, sql.ErrNoRows), errors.As(err, &me) && (me.Number == 1146 || me.Number == 1049):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("gtid: reading %s: %w", markerTable, err)
	}
	return fmt.Sprintf("run %s replayed %s (start point %s) onto it at %s", run, capture, show(startGTID), at), nil
}

// MarkReplayed leaves the mark of run, a replay of capture from start.
func MarkReplayed(ctx context.Context, db *sql.DB, run, capture, start string) error {
	for _, q := range []string{
		"CREATE DATABASE IF NOT EXISTS `" + MarkerDB + "`",
		"CREATE TABLE IF NOT EXISTS " + markerTable + " (run_id VARCHAR(128) NOT NULL, capture VARCHAR(1024) NOT NULL, started DATETIME(6) NOT NULL, start_gtid VARCHAR(1024) NOT NULL)",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("gtid: marking the target replayed: %w", err)
		}
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO "+markerTable+" VALUES (?, ?, UTC_TIMESTAMP(6), ?)", run, capture, start); err != nil {
		return fmt.Errorf("gtid: marking the target replayed: %w", err)
	}
	return nil
}
