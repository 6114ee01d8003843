package sqlinfo

import (
	"fmt"
	"testing"
)

func TestChoosesValues(t *testing.T) {
	for text, want := range map[string]bool{
		"uuid()":              true, // a DEFAULT as MariaDB shows it
		"'abc'":               false,
		"current_timestamp()": false, // follows SET timestamp
		"SET NEW.id = UUID()": true,
		"SET NEW.r = RAND(7)": false,
		"BEGIN INSERT INTO log VALUES (RAND()); END": true,
		"SET NEW.who = CURRENT_USER":                 true,
		"INSERT INTO uuid (a) VALUES (1)":            false, // a table named uuid
		"SET x = 'unterminated":                      true,
	} {
		if got := ChoosesValues(text); got != want {
			t.Errorf("ChoosesValues(%q) = %v, want %v", text, got, want)
		}
	}
}

func TestBodyWrites(t *testing.T) {
	for _, c := range []struct{ body, writes string }{
		{"SET NEW.id = UUID()", "[] true"},
		{"BEGIN INSERT INTO audit (id) VALUES (UUID()); UPDATE shop.stock SET n = n - 1 WHERE id = NEW.item; END", "[audit shop.stock] true"},
		{"INSERT IGNORE log SELECT * FROM t ON DUPLICATE KEY UPDATE n = n + 1", "[log] true"},
		{"BEGIN DELETE FROM old WHERE id = OLD.id; REPLACE INTO cache VALUES (1); END", "[old cache] true"},
		{"BEGIN CALL other(); INSERT INTO x VALUES (1); END", "[x] true"},
		{"BEGIN PREPARE s FROM @q; EXECUTE s; END", "[] false"},
	} {
		w, ok := BodyWrites(c.body)
		if got := fmt.Sprintf("%v %v", w, ok); got != c.writes {
			t.Errorf("BodyWrites(%q) = %s, want %s", c.body, got, c.writes)
		}
	}
}

func TestCalledFunctions(t *testing.T) {
	for text, want := range map[string]string{
		"INSERT INTO t VALUES (next_code(), shop.mk_id(1), `Q`(2), CONCAT('a', 'b'))": "[next_code shop.mk_id Q CONCAT]",
		"INSERT INTO t (a) VALUES (1)":                                         "[]",
		"SELECT * FROM f (x)":                                                  "[]", // a table, not a call
		"SELECT 'g(1)'":                                                        "[]",
		"INSERT INTO shop.token (v) VALUES (1)":                                "[]",
		"INSERT t (a) SELECT n FROM (SELECT 1) AS d (n)":                       "[]",
		"WITH c (n) AS (SELECT 1) SELECT shop.f(n) FROM c":                     "[shop.f]",
		"CREATE TABLE x (a INT, KEY k (a), FOREIGN KEY (a) REFERENCES p (id))": "[]",
	} {
		if got := fmt.Sprint(CalledFunctions(text)); got != want {
			t.Errorf("CalledFunctions(%q) = %s, want %s", text, got, want)
		}
	}
}

func TestBodyCalls(t *testing.T) {
	if got := fmt.Sprint(BodyCalls("BEGIN CALL inner(1); CALL shop.other; SELECT 'CALL x'; END")); got != "[inner shop.other]" {
		t.Errorf("BodyCalls = %s, want [inner shop.other]", got)
	}
}

func TestDefaultsChoose(t *testing.T) {
	for sql, want := range map[string]bool{
		"CREATE TABLE t (id INT, u VARCHAR(40) DEFAULT (UUID()), KEY k (id))": true,
		"ALTER TABLE t ADD COLUMN u CHAR(36) DEFAULT uuid()":                  true,
		"ALTER TABLE dev ADD INDEX uuid (uuid)":                               false,
		"CREATE TABLE t (id INT, KEY user (user_id))":                         false,
		"CREATE TABLE t AS SELECT id, UUID() u FROM s":                        false,
		"CREATE TABLE t (a INT DEFAULT 1, b DATETIME DEFAULT NOW())":          false,
		"CREATE TABLE t (a INT DEFAULT 1, r DOUBLE DEFAULT (RAND()))":         true,
	} {
		if got := DefaultsChoose(sql); got != want {
			t.Errorf("DefaultsChoose(%q) = %v, want %v", sql, got, want)
		}
	}
}
