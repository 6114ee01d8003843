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
