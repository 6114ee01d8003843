package replay

import "testing"

func TestAnalyze(t *testing.T) {
	a := newAnalyzer()
	cases := []struct {
		sql                         string
		class                       Class
		nondet, ordered, ddl, begin bool
	}{
		{"SELECT c FROM sbtest1 WHERE id=5", ClassRead, false, false, false, false},
		{"SELECT c FROM sbtest1 WHERE id BETWEEN 1 AND 100 ORDER BY c", ClassRead, false, true, false, false},
		{"SELECT c FROM t LIMIT 10", ClassRead, true, false, false, false},
		{"SELECT c FROM t ORDER BY id LIMIT 10", ClassRead, false, true, false, false},
		{"INSERT INTO t VALUES (NOW(), 1)", ClassWrite, true, false, false, false},
		{"UPDATE t SET v = RAND() WHERE id = 1", ClassWrite, true, false, false, false},
		{"SELECT UUID()", ClassRead, true, false, false, false},
		{"SELECT CONNECTION_ID()", ClassRead, true, false, false, false},
		{"DELETE FROM t WHERE id = 3", ClassWrite, false, false, false, false},
		{"BEGIN", ClassOther, false, false, false, true},
		{"CREATE TABLE t (id INT PRIMARY KEY) ENGINE=InnoDB", ClassOther, false, false, true, false},
		{"/* app */ select 1", ClassRead, false, false, false, false},
	}
	for _, c := range cases {
		si := a.info(c.sql)
		if si.Class != c.class || si.Nondeterministic != c.nondet || si.Ordered != c.ordered || si.TableDDL != c.ddl || si.Begin != c.begin {
			t.Errorf("%q: %+v", c.sql, *si)
		}
	}
	if !a.info("COMMIT").End || !a.info("rollback").End {
		t.Error("COMMIT/ROLLBACK not recognized as transaction ends")
	}
}

func TestRewriteEngine(t *testing.T) {
	cases := []struct{ in, engine, opts, want string }{
		{"CREATE TABLE t (id INT PRIMARY KEY) ENGINE=InnoDB", "ROCKSDB", "",
			"CREATE TABLE `t` (`id` INT PRIMARY KEY) ENGINE = ROCKSDB"},
		{"create table t (id int)", "ROCKSDB", "",
			"CREATE TABLE `t` (`id` INT) ENGINE = ROCKSDB"},
		{"CREATE TABLE t (id INT) ENGINE=MyISAM ROW_FORMAT=DYNAMIC", "InnoDB", "ROW_FORMAT=COMPRESSED KEY_BLOCK_SIZE=8",
			"CREATE TABLE `t` (`id` INT) ENGINE = InnoDB ROW_FORMAT = COMPRESSED KEY_BLOCK_SIZE = 8"},
		{"ALTER TABLE t ENGINE=InnoDB", "TokuDB", "", "ALTER TABLE `t` ENGINE = TokuDB"},
		{"ALTER TABLE t ADD COLUMN v INT", "TokuDB", "", "ALTER TABLE `t` ADD COLUMN `v` INT"},
	}
	for _, c := range cases {
		got, ok := rewriteEngine(c.in, c.engine, c.opts)
		if !ok || got != c.want {
			t.Errorf("rewriteEngine(%q, %s, %q) = %q, %v; want %q", c.in, c.engine, c.opts, got, ok, c.want)
		}
	}
	if got, ok := rewriteEngine("CREATE TABLE (((", "InnoDB", ""); ok || got != "CREATE TABLE (((" {
		t.Errorf("unparsable DDL: %q, %v", got, ok)
	}
}

func TestUseSchema(t *testing.T) {
	cases := []struct {
		sql, db string
		ok      bool
	}{
		{"USE shop", "shop", true},
		{"use `my``db`;", "my`db", true},
		{"  Use analytics ; ", "analytics", true},
		{"/* routed */ USE shop", "shop", true},
		{"USER()", "", false},
		{"SELECT 1", "", false},
		{"use", "", false},
	}
	for _, c := range cases {
		db, ok := useSchema(c.sql)
		if db != c.db || ok != c.ok {
			t.Errorf("useSchema(%q) = %q, %v; want %q, %v", c.sql, db, ok, c.db, c.ok)
		}
	}
}
