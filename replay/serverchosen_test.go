package replay

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tandemdb/tandem/sqlinfo"
)

// What the capture's DDL teaches, read without a server: which tables'
// inserts choose, which tables hold chosen values at once, and what is
// not a default (an index named uuid, CREATE … SELECT UUID()).
func TestLearnFromTheCapturesDDL(t *testing.T) {
	sc := &serverChoices{db: []string{""}, tables: []map[string]string{{}}, also: []map[string]routine{{}},
		procs: []map[string]routine{{}}, funcs: []map[string]routine{{}}, modes: []map[string][]string{{}}, trigs: [][]trigger{nil}}
	an := sqlinfo.NewAnalyzer()
	learn := func(sql string) []string { return sc.learn(an.Info(sql), sql, "app") }
	for _, c := range []struct{ sql, now, tables string }{
		{"CREATE TABLE d (id INT, u CHAR(36) DEFAULT (UUID()))", "[]", "map[app.d:I]"},
		{"ALTER TABLE dev ADD INDEX uuid (uuid)", "[]", "map[app.d:I]"},
		{"CREATE TABLE s AS SELECT id, UUID() u FROM d", "[]", "map[app.d:I]"},
		{"CREATE TABLE d2 LIKE d", "[]", "map[app.d:I app.d2:I]"},
		{"ALTER TABLE e ADD COLUMN u CHAR(36) DEFAULT uuid()", "[app.e]", "map[app.d:I app.d2:I app.e:I]"},
		{"DROP TABLE d2", "[]", "map[app.d:I app.e:I]"},
		{"CREATE TABLE e (id INT)", "[]", "map[app.d:I]"},
		{"CREATE TRIGGER shop.tg BEFORE UPDATE ON t FOR EACH ROW FOLLOWS other SET NEW.u = UUID()", "[]", "map[app.d:I app.t:U]"},
		{"CREATE TRIGGER tg2 AFTER INSERT ON t FOR EACH ROW INSERT INTO log VALUES (NEW.id)", "[]", "map[app.d:I app.t:U]"},
	} {
		now := learn(c.sql)
		if got := fmt.Sprint(now); got != c.now {
			t.Errorf("%q: holds chosen values at once: %s, want %s", c.sql, got, c.now)
		}
		if got := fmt.Sprint(sc.tables[0]); got != c.tables {
			t.Errorf("%q: then tables %s, want %s", c.sql, got, c.tables)
		}
	}
	// A function made again without choosing is no longer one that does;
	// its own name before its parameters is no call of itself.
	learn("CREATE FUNCTION mkid() RETURNS CHAR(36) NOT DETERMINISTIC RETURN UUID()")
	if !sc.funcs[0]["app.mkid"].chooses {
		t.Error("mkid() returning UUID(): not taken as choosing")
	}
	learn("CREATE OR REPLACE FUNCTION mkid() RETURNS INT DETERMINISTIC RETURN 1")
	if sc.funcs[0]["app.mkid"].chooses {
		t.Error("mkid() made again returning 1: still taken as choosing")
	}
	// Routines and triggers may call what does not exist yet: they
	// choose once the capture creates what they call, however deep.
	learn("CREATE PROCEDURE later() INSERT INTO logl VALUES (lg())")
	learn("CREATE TRIGGER tl BEFORE INSERT ON tl FOR EACH ROW SET NEW.u = lg()")
	learn("CREATE TRIGGER tl2 AFTER DELETE ON tl FOR EACH ROW CALL later()")
	learn("CREATE FUNCTION lg() RETURNS CHAR(36) RETURN lf()")
	if sc.procs[0]["app.later"].chooses || sc.funcs[0]["app.lg"].chooses || strings.Contains(sc.tables[0]["app.tl"], "I") {
		t.Fatal("later(), lg() or tl choose before anything they call does")
	}
	learn("CREATE FUNCTION lf() RETURNS CHAR(36) NOT DETERMINISTIC RETURN UUID()")
	if !sc.procs[0]["app.later"].chooses || !sc.funcs[0]["app.lg"].chooses {
		t.Errorf("later() and lg() call lf() through lg(), which returns UUID(): chooses %v, %v", sc.procs[0]["app.later"].chooses, sc.funcs[0]["app.lg"].chooses)
	}
	if got := sc.tables[0]["app.tl"]; got != "I" {
		t.Errorf("tl's BEFORE INSERT trigger sets NEW.u = lg(): tl's writes that choose %q, want I", got)
	}
	if a := sc.also[0]["app.tlD"]; fmt.Sprint(a.writes) != "[app.logl]" {
		t.Errorf("tl2 calls later(), which writes logl: a delete on tl writes %v, want [app.logl]", a.writes)
	}
	learn("DROP TABLE tl")
	learn("CREATE TABLE tl (id INT, u CHAR(36))")
	if got, a := sc.tables[0]["app.tl"], sc.also[0]["app.tlD"]; got != "" || len(a.writes) != 0 {
		t.Errorf("tl made again (its triggers gone with it): still marked %q, %v", got, a.writes)
	}
	// ALTER PROCEDURE changes no body.
	learn("CREATE PROCEDURE p() INSERT INTO t VALUES (RAND())")
	learn("ALTER PROCEDURE p COMMENT 'x'")
	if r := sc.procs[0]["app.p"]; !r.chooses || fmt.Sprint(r.writes) != "[app.t]" {
		t.Errorf("p after ALTER PROCEDURE: %+v, want choosing, writing app.t", r)
	}
}
