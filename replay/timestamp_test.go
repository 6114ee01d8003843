package replay

import (
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/tandemdb/tandem/store"
)

// A write's NOW(), and the columns that default to CURRENT_TIMESTAMP or
// are updated with it, hold the captured statement's time on every target
// (replay sends SET timestamp with the write). They held each target's own
// clock at replay: reads of those rows then differed from the capture, and
// between targets that ran the write in different seconds — each counted
// as an engine difference.
func TestWritesHoldTheCapturedTime(t *testing.T) {
	ta, tb, dba, dbb := twoInnoDB(t)
	for _, db := range []*sql.DB{dba, dbb} {
		exec(t, db, "CREATE TABLE stamps (id INT PRIMARY KEY, n INT NOT NULL DEFAULT 0, made DATETIME(6) DEFAULT CURRENT_TIMESTAMP(6), "+
			"changed TIMESTAMP(6) NULL DEFAULT NULL ON UPDATE CURRENT_TIMESTAMP(6), said DATETIME(6))")
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)
	ok := store.Response{Kind: store.RespOK, AffectedRows: 1}
	q := func(d time.Duration, sql string) store.Record {
		return store.Record{Session: 1, Start: at.Add(d), Kind: store.KindQuery, SQL: sql, Resp: ok}
	}
	capDir := writeRecords(t, []store.Record{
		{Session: 1, Start: at, Kind: store.KindConnect, User: "app", Resp: store.Response{Kind: store.RespOK}},
		q(time.Millisecond, "INSERT INTO stamps (id) VALUES (1)"),
		q(2*time.Second, "UPDATE stamps SET n = n + 1 WHERE id = 1"),
		q(3*time.Second+250*time.Microsecond, "INSERT INTO stamps (id, said) VALUES (2, NOW(6))"),
		// A variable read from what the last statement left: no SET of
		// replay's own goes before it (ROW_COUNT() would then be its).
		q(3500*time.Millisecond, "UPDATE stamps SET n = n + 1 WHERE id IN (1, 2)"),
		q(3600*time.Millisecond, "SET @changed = ROW_COUNT()"),
		q(3700*time.Millisecond, "INSERT INTO stamps (id, n) VALUES (3, @changed)"),
		// The session's own clock (a restore of mysqlbinlog's output)
		// stays its own.
		q(3800*time.Millisecond, "SET timestamp = 1000000000"),
		q(3900*time.Millisecond, "INSERT INTO stamps (id) VALUES (4)"),
		{Session: 1, Start: at.Add(4 * time.Second), Kind: store.KindQuit},
	})
	for _, mode := range bothModes {
		for _, db := range []*sql.DB{dba, dbb} {
			exec(t, db, "DELETE FROM stamps")
		}
		rep := replayRun(t, capDir, mode.mod, ta, tb)
		for i, db := range []*sql.DB{dba, dbb} {
			if r := rep.Targets[i]; r.Errors != 0 || r.Writes != 6 {
				t.Fatalf("%s, target %d: %d errors %v, %d writes; want 0 and 6", mode.name, i, r.Errors, r.ErrorCodes, r.Writes)
			}
			var got string
			if err := db.QueryRow(`SELECT GROUP_CONCAT(CONCAT_WS(' ', id, UNIX_TIMESTAMP(made), IFNULL(UNIX_TIMESTAMP(changed), '-'), IFNULL(UNIX_TIMESTAMP(said), '-')) ORDER BY id SEPARATOR ', ') FROM stamps WHERE id <= 2`).Scan(&got); err != nil {
				t.Fatal(err)
			}
			s := func(d time.Duration) string {
				x := at.Add(d)
				return fmt.Sprintf("%d.%06d", x.Unix(), x.Nanosecond()/1000)
			}
			want := fmt.Sprintf("1 %s %s -, 2 %s %s %s", s(time.Millisecond), s(3500*time.Millisecond), s(3*time.Second+250*time.Microsecond), s(3500*time.Millisecond), s(3*time.Second+250*time.Microsecond))
			if got != want {
				t.Errorf("%s, target %d: id made changed said = %s; want %s (the captured statements' times)", mode.name, i, got, want)
			}
			var changed, own string
			if err := db.QueryRow(`SELECT (SELECT n FROM stamps WHERE id = 3), (SELECT UNIX_TIMESTAMP(made) FROM stamps WHERE id = 4)`).Scan(&changed, &own); err != nil {
				t.Fatal(err)
			}
			// With --concurrency too: a session that sets a variable to a
			// value of what it did (ROW_COUNT()) keeps its connection.
			// (It used to run the SET as a unit of its own, on any
			// connection, reading what that one did last.)
			if changed != "2" || own != "1000000000.000000" {
				t.Errorf("%s, target %d: ROW_COUNT() kept %s, the session's own clock gave %s; want 2 and 1000000000.000000", mode.name, i, changed, own)
			}
		}
	}
}
