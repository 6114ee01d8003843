package replay

import (
	"database/sql"
	"fmt"
	"os"
	"strings"
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
		// Set back to the server's clock: the captured time again (left
		// to the session, its writes held each target's clock).
		q(3950*time.Millisecond, "SET @@session.timestamp = DEFAULT"),
		q(3970*time.Millisecond, "INSERT INTO stamps (id) VALUES (5)"),
		{Session: 1, Start: at.Add(4 * time.Second), Kind: store.KindQuit},
	})
	for _, mode := range bothModes {
		for _, db := range []*sql.DB{dba, dbb} {
			exec(t, db, "DELETE FROM stamps")
		}
		rep := replayRun(t, capDir, mode.mod, ta, tb)
		for i, db := range []*sql.DB{dba, dbb} {
			if r := rep.Targets[i]; r.Errors != 0 || r.Writes != 7 {
				t.Fatalf("%s, target %d: %d errors %v, %d writes; want 0 and 7", mode.name, i, r.Errors, r.ErrorCodes, r.Writes)
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
			var changed, own, back string
			if err := db.QueryRow(`SELECT (SELECT n FROM stamps WHERE id = 3), (SELECT UNIX_TIMESTAMP(made) FROM stamps WHERE id = 4), (SELECT UNIX_TIMESTAMP(made) FROM stamps WHERE id = 5)`).Scan(&changed, &own, &back); err != nil {
				t.Fatal(err)
			}
			if back != s(3970*time.Millisecond) {
				t.Errorf("%s, target %d: a write after SET timestamp = DEFAULT holds %s; want %s (its captured time)", mode.name, i, back, s(3970*time.Millisecond))
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

// The captured time goes only before the writes that can read the clock:
// through their text, their table's columns, a trigger, a view, a stored
// function, a cascading foreign key, or DDL the capture ran on the table
// before them. Each SET is a command of its own on the server; sent before
// every write, it cost a conflict-free read/write replay 4.7 % of its
// throughput. Every write that can read the clock still holds the
// captured time on every target.
func TestWritesTakeTheClockOnlyWhereTheyCanReadIt(t *testing.T) {
	ta, tb, dba, dbb := twoInnoDB(t)
	for _, db := range []*sql.DB{dba, dbb} {
		exec(t, db,
			"CREATE TABLE plain (id INT PRIMARY KEY, n INT NOT NULL DEFAULT 0, d DATETIME(6) NULL)",
			"CREATE TABLE stamped (id INT PRIMARY KEY, n INT, changed TIMESTAMP(6) NULL DEFAULT NULL ON UPDATE CURRENT_TIMESTAMP(6))",
			"CREATE TABLE trig_src (id INT PRIMARY KEY, n INT)",
			"CREATE TABLE trig_log (id INT, at DATETIME(6))",
			"CREATE TRIGGER trig_src_u AFTER UPDATE ON trig_src FOR EACH ROW INSERT INTO trig_log VALUES (NEW.id, NOW(6))",
			"CREATE VIEW v_now AS SELECT id, NOW(6) AS at FROM plain",
			"CREATE TABLE copied (id INT PRIMARY KEY, at DATETIME(6))",
			"CREATE FUNCTION f_now() RETURNS DATETIME(6) RETURN NOW(6)",
			"CREATE TABLE parent (id INT PRIMARY KEY)",
			"CREATE TABLE child (id INT PRIMARY KEY, pid INT, FOREIGN KEY (pid) REFERENCES parent (id) ON UPDATE CASCADE)",
			"CREATE TABLE late (id INT PRIMARY KEY, n INT)",
			// MariaDB allows NOW() in a VIRTUAL column: no DEFAULT, no
			// ON UPDATE, and the clock is read.
			"CREATE TABLE virt (id INT PRIMARY KEY, seen DATETIME(6) NULL, ref DATETIME(6) AS (NOW(6)) VIRTUAL)",
			"CREATE TABLE appt (id INT PRIMARY KEY, at DATETIME(6) NULL)",
			"CREATE VIEW v_plain AS SELECT id, d FROM plain",
			"CREATE VIEW v_over AS SELECT id, at FROM v_now",
			"CREATE TABLE metrics (id INT PRIMARY KEY, time TIME)",
		)
	}
	names := [2]string{databaseOf(t, dba), databaseOf(t, dbb)}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ok := store.Response{Kind: store.RespOK, AffectedRows: 1}
	var recs []store.Record
	// stamped: the statements sent the captured time; blind: those sent
	// it by an account that cannot see the triggers (every write, and the
	// same reads: the views and generated columns it sees).
	stamped, blind := 0, 0
	q := func(clock bool, sql string) {
		blind++
		if clock {
			stamped++
		}
		recs = append(recs, store.Record{Session: 1, Schema: "app", Start: at.Add(time.Duration(len(recs)) * time.Second), Kind: store.KindQuery, SQL: sql, Resp: ok})
	}
	// read: a compared read whose answer takes the clock from what its
	// text does not show (clock).
	read := func(clock bool, sql string) {
		if clock {
			stamped++
			blind++
		}
		recs = append(recs, store.Record{Session: 1, Schema: "app", Start: at.Add(time.Duration(len(recs)) * time.Second), Kind: store.KindQuery, SQL: sql,
			Resp: store.Response{Kind: store.RespResultSet}})
	}
	recs = append(recs, store.Record{Session: 1, Schema: "app", Start: at, Kind: store.KindConnect, User: "app", Resp: store.Response{Kind: store.RespOK}})
	q(false, "UPDATE plain SET n = n + 1 WHERE id = 1")
	q(true, "INSERT INTO plain (id, d) VALUES (2, NOW(6))")             // 2 s
	q(true, "UPDATE stamped SET n = 1 WHERE id = 1")                    // 3 s: ON UPDATE CURRENT_TIMESTAMP
	q(true, "UPDATE trig_src SET n = 1 WHERE id = 1")                   // 4 s: its trigger's NOW()
	q(true, "INSERT INTO copied SELECT id, at FROM v_now WHERE id = 1") // 5 s: the view's NOW()
	q(true, "INSERT INTO copied VALUES (2, f_now())")                   // 6 s: the function's
	q(true, "UPDATE parent SET id = 10 WHERE id = 1")                   // cascades to child
	q(false, "DELETE FROM plain WHERE id = 3")
	q(false, "INSERT INTO plain (id) VALUES (4)")
	q(true, "ALTER TABLE late ADD at DATETIME(6) DEFAULT CURRENT_TIMESTAMP(6)")
	q(true, "INSERT INTO late (id) VALUES (1)")                     // 11 s: a default the capture gave it
	q(true, "UPDATE virt SET seen = ref WHERE id = 1")              // 12 s: its VIRTUAL column's NOW(6)
	read(true, "SELECT id, at FROM v_now WHERE id = 1")             // the view's NOW(6), compared
	read(true, "SELECT at FROM v_over WHERE id = 1")                // a view of that view
	read(true, "SELECT ref FROM virt WHERE id = 1")                 // the VIRTUAL column's
	read(true, "SELECT f_now()")                                    // the function's
	read(true, "SELECT id FROM appt WHERE at < MAKETIME(12, 0, 0)") // today's noon
	read(false, "SELECT id, d FROM v_plain WHERE id = 1")           // a view of no clock
	read(false, "SELECT id, NOW(6) FROM plain WHERE id = 1")        // not compared: not sent
	read(false, "SELECT id, time FROM metrics WHERE id = 1")        // a column named time
	read(false, "SELECT n FROM plain WHERE id = 1")
	// Prepared statements: by what their text names, as queries.
	prep := func(id uint32, sql string) {
		recs = append(recs, store.Record{Session: 1, Schema: "app", Start: at.Add(time.Duration(len(recs)) * time.Second), Kind: store.KindPrepare, StmtID: id, SQL: sql,
			Resp: store.Response{Kind: store.RespOK}})
	}
	execute := func(clock bool, id uint32, ps ...store.Value) {
		blind++
		if clock {
			stamped++
		}
		recs = append(recs, store.Record{Session: 1, Schema: "app", Start: at.Add(time.Duration(len(recs)) * time.Second), Kind: store.KindExecute, StmtID: id, Params: ps, Resp: ok})
	}
	i64 := func(n int64) store.Value { return store.Value{Type: store.TypeLongLong, Int: n} }
	prep(1, "UPDATE plain SET n = n + ? WHERE id = ?")
	execute(false, 1, i64(1), i64(1))
	prep(2, "UPDATE stamped SET n = ? WHERE id = ?")
	execute(true, 2, i64(5), i64(1)) // 25 s
	recs = append(recs, store.Record{Session: 1, Schema: "app", Start: at.Add(time.Duration(len(recs)) * time.Second), Kind: store.KindQuit})
	// A session of its own, whose connection no write sent a time before
	// (session mode): a TIME value into a DATETIME takes the day of the
	// session's clock, the captured one only if sent.
	recs = append(recs, store.Record{Session: 2, Schema: "app", Start: at.Add(time.Duration(len(recs)) * time.Second), Kind: store.KindConnect, User: "app", Resp: store.Response{Kind: store.RespOK}})
	q(true, "UPDATE appt SET at = MAKETIME(9, 0, 0) WHERE id = 1")
	recs[len(recs)-1].Session = 2
	prep(3, "UPDATE appt SET at = ? WHERE id = ?")
	recs[len(recs)-1].Session = 2
	// A TIME bound (JDBC's setTime: 10:30:00) into a DATETIME: that day, 10:30.
	execute(true, 3, store.Value{Type: store.TypeTime, Bytes: []byte{0, 0, 0, 0, 0, 10, 30, 0}}, i64(2))
	recs[len(recs)-1].Session = 2
	recs = append(recs, store.Record{Session: 2, Schema: "app", Start: at.Add(time.Duration(len(recs)) * time.Second), Kind: store.KindQuit})
	capDir := writeRecords(t, recs)

	logged := func(db *sql.DB, name string) int {
		var n int
		if err := db.QueryRow("SELECT COUNT(*) FROM mysql.general_log WHERE command_type = 'Query' AND argument LIKE 'SET %timestamp = %' AND thread_id IN "+
			"(SELECT thread_id FROM mysql.general_log WHERE command_type = 'Connect' AND argument LIKE CONCAT('% on ', ?, ' %'))", name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	exec(t, dba, "SET GLOBAL log_output = 'TABLE'", "SET GLOBAL general_log = 1")
	t.Cleanup(func() {
		_, _ = dba.Exec("SET GLOBAL general_log = 0")
		_, _ = dba.Exec("SET GLOBAL log_output = 'FILE'")
	})
	s := func(sec int) string { return fmt.Sprintf("%d.000000", at.Add(time.Duration(sec)*time.Second).Unix()) }
	reset := func() {
		for _, db := range []*sql.DB{dba, dbb} {
			exec(t, db, "DELETE FROM child", "DELETE FROM parent", "DELETE FROM plain", "DELETE FROM stamped", "DELETE FROM trig_src", "DELETE FROM trig_log",
				"DELETE FROM copied", "DROP TABLE late", "CREATE TABLE late (id INT PRIMARY KEY, n INT)", "DELETE FROM virt", "DELETE FROM appt",
				"INSERT INTO virt (id) VALUES (1)", "INSERT INTO appt VALUES (1, NULL), (2, NULL)",
				"INSERT INTO plain (id) VALUES (1), (3)", "INSERT INTO stamped (id) VALUES (1)", "INSERT INTO trig_src VALUES (1, 0)",
				"INSERT INTO parent VALUES (1)", "INSERT INTO child VALUES (1, 1)")
		}
		exec(t, dba, "TRUNCATE TABLE mysql.general_log")
	}
	// check: what each target was sent (want, by target) and holds.
	check := func(name string, rep *testReport, want [2]int) {
		t.Helper()
		for i, db := range []*sql.DB{dba, dbb} {
			if r := rep.Targets[i]; r.Errors != 0 {
				t.Fatalf("%s, target %d: %d errors %v", name, i, r.Errors, r.ErrorCodes)
			}
			if n := logged(dba, names[i]); n != want[i] {
				t.Errorf("%s, target %d: %d statements were sent the captured time; want %d", name, i, n, want[i])
			}
			var got string
			if err := db.QueryRow(`SELECT CONCAT_WS(' ', (SELECT UNIX_TIMESTAMP(d) FROM plain WHERE id = 2), (SELECT UNIX_TIMESTAMP(changed) FROM stamped WHERE id = 1),
				(SELECT UNIX_TIMESTAMP(at) FROM trig_log WHERE id = 1), (SELECT GROUP_CONCAT(UNIX_TIMESTAMP(at) ORDER BY id) FROM copied),
				(SELECT UNIX_TIMESTAMP(at) FROM late WHERE id = 1), (SELECT pid FROM child WHERE id = 1))`).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if want := fmt.Sprintf("%s %s %s %s,%s %s 10", s(2), s(25), s(4), s(5), s(6), s(11)); got != want {
				t.Errorf("%s, target %d: NOW(6), ON UPDATE, trigger, view, function, DEFAULT gave %s; want %s (the captured statements' times)", name, i, got, want)
			}
			if err := db.QueryRow(`SELECT CONCAT_WS(' ', (SELECT UNIX_TIMESTAMP(seen) FROM virt WHERE id = 1),
				(SELECT GROUP_CONCAT(DATE_FORMAT(at, '%Y-%m-%d %H:%i') ORDER BY id) FROM appt))`).Scan(&got); err != nil {
				t.Fatal(err)
			}
			day := at.In(time.Local).Format("2006-01-02") // the server's zone, the test's
			if want := fmt.Sprintf("%s %s 09:00,%s 10:30", s(12), day, day); got != want {
				t.Errorf("%s, target %d: VIRTUAL NOW(6), MAKETIME, a TIME parameter gave %s; want %s (the captured day)", name, i, got, want)
			}
		}
	}
	for _, mode := range bothModes {
		reset()
		check(mode.name, replayRun(t, capDir, mode.mod, ta, tb), [2]int{stamped, stamped})
	}
	// An account without the TRIGGER privilege sees no trigger in
	// MySQL's information_schema (and no error; MariaDB 10.11 shows them,
	// unpromised): it cannot tell a table's triggers, so all its writes
	// take the clock.
	user := fmt.Sprintf("notrig%d", os.Getpid())
	exec(t, dba, "CREATE USER "+user+"@'%' IDENTIFIED BY 'pw'",
		"GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, ALTER, INDEX, REFERENCES, CREATE VIEW, SHOW VIEW, EXECUTE ON "+names[0]+".* TO "+user+"@'%'")
	t.Cleanup(func() { _, _ = dba.Exec("DROP USER " + user + "@'%'") })
	reset()
	restricted := tgt(t, "a", strings.Replace(ta.DSN, "root@", user+":pw@", 1), "")
	check("without TRIGGER", replayRun(t, capDir, nil, restricted, tb), [2]int{blind, stamped})
}
