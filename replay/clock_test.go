package replay

import (
	"slices"
	"strings"
	"testing"

	"github.com/tandemdb/tandem/sqlinfo"
)

// What the capture's own statements change in what writes read of the
// clock: the tables DDL names lose what was read of them at the start,
// and what may create a trigger or function unseen (or name no table)
// leaves every write its captured time.
func TestTheCapturesDDLLeavesTablesTheirClock(t *testing.T) {
	for _, c := range []struct {
		sql string
		all bool
		ddl string // the tables forgotten, comma-separated
	}{
		{"UPDATE t SET n = 1 WHERE id = 1", false, ""},
		{"ALTER TABLE t ADD made DATETIME DEFAULT NOW()", false, "app.t"},
		{"CREATE TABLE other.u LIKE t", false, "app.t,other.u"},
		{"RENAME TABLE t TO t_old, t_new TO t", false, "app.t,app.t_new,app.t_old"},
		{"CREATE INDEX i ON t (a)", false, "app.t"},
		{"DROP TABLE t", false, "app.t"},
		{"CREATE TEMPORARY TABLE t (id INT, at TIMESTAMP)", false, "app.t"},
		{"CREATE DATABASE x", false, ""},
		{"CREATE TRIGGER tr BEFORE INSERT ON t FOR EACH ROW SET NEW.at = NOW()", true, ""},
		{"CREATE DEFINER = CURRENT_USER TRIGGER tr BEFORE INSERT ON t FOR EACH ROW SET NEW.at = NOW()", true, ""},
		{"CREATE FUNCTION f() RETURNS DATETIME RETURN NOW()", true, ""},
		{"CALL p()", true, ""},
		{"EXECUTE stmt", true, ""},
		{"PREPARE stmt FROM 'ALTER TABLE t ADD at TIMESTAMP'", true, ""},
		// A migration sent as one text: its first statement's verb
		// and names do not say what the others do.
		{"CREATE TABLE a (id INT); CREATE TRIGGER tb BEFORE INSERT ON b FOR EACH ROW SET NEW.at = NOW()", true, ""},
		{"UPDATE x SET n = 1; ALTER TABLE t ADD c DATETIME DEFAULT NOW()", true, ""},
		{"SET @x = 1; CALL add_col()", true, ""},
		{"SET @s = 'ALTER TABLE t ADD c TIMESTAMP'; PREPARE p FROM @s; EXECUTE p", true, ""},
		{"SELECT 1; SELECT 2", false, ""},
		{"UPDATE x SET n = 1; UPDATE y SET n = 2", false, ""},
	} {
		x := &captureIndex{}
		x.noteClock(sqlinfo.Analyze(c.sql), c.sql, "app")
		var ddl []string
		for k := range x.clockDDL {
			ddl = append(ddl, k)
		}
		slices.Sort(ddl)
		if x.clockAll != c.all || strings.Join(ddl, ",") != c.ddl {
			t.Errorf("%q: all %v, forgotten %q; want %v, %q", c.sql, x.clockAll, strings.Join(ddl, ","), c.all, c.ddl)
		}
	}
}

// A generated column's expression, as information_schema shows it: MySQL
// 8 escapes its quotes, which the lexer could not read (every table with
// a JSON column's generated one was taken to read the clock); a TIME
// value it makes is its own type, not a date.
func TestGeneratedColumnsReadTheClockOnlyWithTheClock(t *testing.T) {
	for expr, want := range map[string]bool{
		"current_timestamp(6)": true,
		"now()":                true,
		"json_unquote(json_extract(`doc`,_utf8mb4\\'$.status\\'))": false,
		"concat(`a`,_utf8mb4\\'-\\',`b`)":                          false,
		"timediff(`ended_at`,`started_at`)":                        false,
		"concat(`a`,_utf8mb4\\'x\\', now())":                       true,
		"'unclosed now()":                                          true, // not lexed: the clock's names
		"'unclosed":                                                false,
	} {
		if got := exprClock(expr); got != want {
			t.Errorf("exprClock(%q) = %v, want %v", expr, got, want)
		}
	}
}

// A view's mark: reads the clock where its definition does, or may
// (hidden, another view's, a table not known, a stored function).
func TestViewsReadTheClockThroughWhatTheyRead(t *testing.T) {
	clock := map[string]byte{"app.plain": clockFree, "app.virt": clockReads, "app.stamped": clockTakes}
	views := map[string]string{"app.v_base": "select now() AS `at`"}
	funcs := map[string]bool{"f_now": true}
	for def, want := range map[string]byte{
		"select `app`.`plain`.`id` AS `id` from `app`.`plain`":         clockTakes,
		"select `id` from `plain`":                                     clockTakes, // the view's schema
		"select `app`.`stamped`.`n` AS `n` from `app`.`stamped`":       clockTakes, // its writes' clock: not its reads'
		"select `id`, current_timestamp(6) AS `at` from `app`.`plain`": clockReads,
		"select `app`.`virt`.`ref` AS `ref` from `app`.`virt`":         clockReads,
		"select `at` from `app`.`v_base`":                              clockReads,
		"select `id` from `other`.`t`":                                 clockReads, // not known
		"select `app`.`f_now`() AS `f`":                                clockReads,
		"select timediff(`a`,`b`) AS `d` from `app`.`plain`":           clockTakes,
		"": clockReads, // not shown to this account
	} {
		if got := viewClock(def, "app", clock, views, funcs); got != want {
			t.Errorf("viewClock(%q) = %c, want %c", def, got, want)
		}
	}
}

// SET timestamp = DEFAULT or 0 gives the session the server's clock
// back; any other value is a clock of its own.
func TestTimestampOfItsOwn(t *testing.T) {
	for v, want := range map[string]bool{"DEFAULT": false, " default ": false, "0": false, "0.0": false, "1700000000": true, "1700000000.5": true,
		"UNIX_TIMESTAMP('2026-01-01')": true, "@t": true} {
		if got := ownsTime(v); got != want {
			t.Errorf("ownsTime(%q) = %v, want %v", v, got, want)
		}
	}
	for sql, want := range map[string][2]bool{"SET timestamp = 5": {true, true}, "SET @@session.timestamp = DEFAULT": {false, true},
		"SET timestamp = 5, timestamp = 0": {false, true}, "SET sql_mode = ''": {false, false}} {
		if own, set := timestampSet(sql); own != want[0] || set != want[1] {
			t.Errorf("timestampSet(%q) = %v, %v; want %v, %v", sql, own, set, want[0], want[1])
		}
	}
}
