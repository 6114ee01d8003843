package sqlinfo

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestLex(t *testing.T) {
	cases := []struct {
		sql  string
		want string // kind:text, space separated; "!" marks exec-comment tokens
	}{
		{"SELECT `a``b`, 'it''s', \"x\\\"y\" FROM t WHERE id = ?", "I:SELECT Q:`a``b` P:, S:'it''s' P:, S:\"x\\\"y\" I:FROM I:t I:WHERE I:id P:= ?:?"},
		{"/* c */ SELECT 1 -- tail\n# hash\n+ 2e-3", "I:SELECT N:1 P:+ N:2e-3"},
		{"/*!40101 SET @x := 1 */;", "!I:SET !V:@x !P::= !N:1 P:;"},
		{"/*M!100100 SELECT 2 */", "!I:SELECT !N:2"},
		{"SELECT @@session.sql_mode, @`u v`, 0x1F, 12abc, 1.5", "I:SELECT V:@@session.sql_mode P:, V:@`u v` P:, N:0x1F P:, I:12abc P:, N:1.5"},
		{"a<=>b->>'$.x'", "I:a P:<=> I:b P:->> S:'$.x'"},
	}
	kinds := map[TokKind]string{TokIdent: "I", TokQuotedIdent: "Q", TokString: "S", TokNumber: "N", TokVariable: "V", TokParam: "?", TokPunct: "P"}
	for _, c := range cases {
		toks, err := Lex(c.sql)
		if err != nil {
			t.Errorf("Lex(%q): %v", c.sql, err)
			continue
		}
		var got []string
		for _, tk := range toks {
			s := kinds[tk.Kind] + ":" + tk.Text(c.sql)
			if tk.Exec {
				s = "!" + s
			}
			got = append(got, s)
		}
		if strings.Join(got, " ") != c.want {
			t.Errorf("Lex(%q)\n got %s\nwant %s", c.sql, strings.Join(got, " "), c.want)
		}
	}
	for _, bad := range []string{"SELECT 'open", "SELECT /* open", "SELECT `open", "/*! SELECT 1"} {
		if _, err := Lex(bad); !errors.Is(err, ErrLex) {
			t.Errorf("Lex(%q): err %v, want ErrLex", bad, err)
		}
	}
}

func TestUnquote(t *testing.T) {
	for in, want := range map[string]string{"'it''s'": "it's", `"a\"b\n"`: "a\"b\n", "`x``y`": "x`y", "@'v'": "v", "@@x": "x", "plain": "plain"} {
		if got := Unquote(in); got != want {
			t.Errorf("Unquote(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestAnalyze(t *testing.T) {
	type facts struct {
		class                      Class
		nondet, ordered, ddl       bool
		begin, end, implicitCommit bool
		reads, writes              string
		pins                       bool
	}
	cases := []struct {
		sql  string
		want facts
	}{
		{"SELECT c FROM sbtest1 WHERE id=5", facts{class: ClassRead, reads: "sbtest1"}},
		{"SELECT c FROM sbtest1 WHERE id BETWEEN 1 AND 100 ORDER BY c", facts{class: ClassRead, ordered: true, reads: "sbtest1"}},
		{"SELECT c FROM t LIMIT 10", facts{class: ClassRead, nondet: true, reads: "t"}},
		{"SELECT c FROM t ORDER BY id LIMIT 10", facts{class: ClassRead, ordered: true, reads: "t"}},
		{"SELECT a.x FROM shop.a JOIN b ON a.id = b.id", facts{class: ClassRead, reads: "shop.a b"}},
		{"INSERT INTO t VALUES (NOW(), 1)", facts{class: ClassWrite, nondet: true, reads: "t", writes: "t"}},
		{"INSERT INTO t SELECT * FROM src", facts{class: ClassWrite, reads: "src t", writes: "t"}},
		{"UPDATE t SET v = RAND() WHERE id = 1", facts{class: ClassWrite, nondet: true, reads: "t", writes: "t"}},
		{"DELETE FROM t WHERE id = 3", facts{class: ClassWrite, reads: "t", writes: "t"}},
		{"SELECT UUID()", facts{class: ClassRead, nondet: true}},
		{"SELECT CONNECTION_ID()", facts{class: ClassRead, nondet: true}},
		{"BEGIN", facts{begin: true, implicitCommit: true}},
		{"START TRANSACTION READ ONLY", facts{begin: true, implicitCommit: true}},
		{"COMMIT", facts{end: true}},
		{"rollback work", facts{end: true}},
		{"ROLLBACK TO SAVEPOINT s1", facts{}},
		{"CREATE TABLE t (id INT PRIMARY KEY) ENGINE=InnoDB", facts{ddl: true, implicitCommit: true, reads: "t", writes: "t"}},
		{"CREATE TEMPORARY TABLE tmp (id INT)", facts{ddl: true, reads: "tmp", writes: "tmp", pins: true}},
		{"DROP TEMPORARY TABLE IF EXISTS tmp", facts{reads: "tmp", writes: "tmp", pins: true}},
		{"DROP TABLE t", facts{implicitCommit: true, reads: "t", writes: "t"}},
		{"/* app */ select 1", facts{class: ClassRead}},
		{"LOCK TABLES t WRITE", facts{implicitCommit: true, reads: "t", pins: true}},
		{"SELECT GET_LOCK('x', 1)", facts{class: ClassRead, nondet: true, pins: true}},
		{"SELECT @n := COUNT(*) FROM t", facts{class: ClassRead, nondet: true, reads: "t", pins: true}},
		// MariaDB syntax the TiDB parser rejects: the lexer's view.
		{"CREATE OR REPLACE TABLE t (a INT INVISIBLE) WITH SYSTEM VERSIONING", facts{ddl: true, implicitCommit: true, reads: "t", writes: "t"}},
		{"SET @x = 1", facts{}},
		{"CALL p(1)", facts{}},
		// Server state: the connection's TLS, counters, threads.
		{"SHOW STATUS LIKE 'Ssl_cipher'", facts{class: ClassOther, nondet: true}},
		{"SHOW GLOBAL STATUS", facts{class: ClassOther, nondet: true}},
		{"SHOW FULL PROCESSLIST", facts{class: ClassOther, nondet: true}},
		{"SHOW ENGINE INNODB STATUS", facts{class: ClassOther, nondet: true}},
		{"SHOW VARIABLES LIKE 'max_allowed_packet'", facts{class: ClassOther}},
	}
	names := func(ts []Table) string {
		var s []string
		for _, x := range ts {
			s = append(s, x.String())
		}
		return strings.Join(s, " ")
	}
	a := NewAnalyzer()
	for _, c := range cases {
		i := a.Info(c.sql)
		got := facts{i.Class, i.Nondeterministic, i.Ordered, i.TableDDL, i.Begin, i.End, i.ImplicitCommit, names(i.Reads), names(i.Writes), i.PinsSession()}
		if got != c.want {
			t.Errorf("%q:\n got %+v\nwant %+v", c.sql, got, c.want)
		}
	}
	if i := a.Info("CALL p(1)"); !i.WritesUnknown || i.Verb != "CALL" {
		t.Errorf("CALL: writes unknown %v, verb %q", i.WritesUnknown, i.Verb)
	}
	if i := a.Info("CREATE OR REPLACE TABLE t (a INT INVISIBLE) WITH SYSTEM VERSIONING"); !i.Unanalysable || names(i.Created) != "t" {
		t.Errorf("MariaDB DDL: unanalysable %v, created %v", i.Unanalysable, i.Created)
	}
	if i := a.Info("SELECT 1; SELECT 2"); i.Statements != 2 {
		t.Errorf("multi-statement: %d statements", i.Statements)
	}
	for sql, changes := range map[string]bool{"SELECT c FROM t WHERE id = 1": false, "SELECT c FROM t WHERE id = 1 FOR UPDATE": true,
		"SELECT c FROM t LOCK IN SHARE MODE": true, "UPDATE t SET c = 1": true, "COMMIT": true, "BEGIN": false, "CALL p()": true, "SET @x = 1": false} {
		if got := a.Info(sql).Changes(); got != changes {
			t.Errorf("%q: Changes() = %v, want %v", sql, got, changes)
		}
	}
	if i := a.Info("SET autocommit = 0"); !i.Set || i.SetAutocommit != '0' {
		t.Errorf("SET autocommit=0: set %v, value %q", i.Set, i.SetAutocommit)
	}
}

// A write whose values the server chooses on each run (ChosenValues):
// the tables it writes hold, from then on, values replay cannot give the
// targets as the captured server had them. A read's own nondeterminism is
// Nondeterministic's, not this.
func TestChosenValuesAreTheWritesReplayCannotRepeat(t *testing.T) {
	for sql, want := range map[string]bool{
		"INSERT INTO t (id, u) VALUES (1, UUID())":                       true,
		"INSERT INTO t (id, u) VALUES (1, uuid_short())":                 true,
		"UPDATE t SET v = RAND() WHERE id = 1":                           true,
		"UPDATE t SET v = RAND(7) WHERE id = 1":                          false, // seeded: the same on every server
		"UPDATE t SET v = FLOOR(RAND( ) * 10) WHERE id = 1":              true,
		"INSERT INTO t VALUES (1, SYSDATE())":                            true,
		"INSERT INTO t VALUES (1, NOW())":                                false, // follows SET timestamp
		"INSERT INTO t VALUES (1, CURRENT_TIMESTAMP)":                    false,
		"INSERT INTO audit (who) VALUES (CURRENT_USER)":                  true,
		"INSERT INTO audit (who) VALUES (CURRENT_USER())":                true,
		"INSERT INTO audit (who, conn) VALUES (USER(), CONNECTION_ID())": true,
		"INSERT INTO t2 SELECT id, UUID() FROM t":                        true,
		"REPLACE INTO t VALUES (1, SYS_GUID())":                          true,
		"INSERT INTO t SELECT * FROM src":                                false,
		"SELECT UUID()":                                                  false, // writes nothing
		"SELECT RAND() FROM t":                                           false,
		"SET @u = UUID()":                                                false,
		"DELETE FROM t WHERE id = 3":                                     false,
		"INSERT INTO t VALUES (1, 'uuid()')":                             false, // a string, no call
		"INSERT INTO user (id, name) VALUES (1, 'a')":                    false, // a table named user
		"REPLACE INTO app.uuid(id) VALUES (1)":                           false,
		"UPDATE user SET name = 'b' WHERE id = 1":                        false,
		"INSERT INTO user (id, who) VALUES (1, USER())":                  true,
		"CREATE TABLE copy AS SELECT id, UUID() AS u FROM t":             true,
	} {
		if got := Analyze(sql).ChosenValues; got != want {
			t.Errorf("%q: ChosenValues = %v, want %v", sql, got, want)
		}
	}
}

// Clock says which texts read the session's clock themselves: replay
// sends SET timestamp before those (and before writes whose schema reads
// it), and no other.
func TestClockIsWhatReadsTheSessionsTime(t *testing.T) {
	for sql, want := range map[string]bool{
		"INSERT INTO t VALUES (1, NOW())":                                     true,
		"INSERT INTO t VALUES (1, now(6))":                                    true,
		"INSERT INTO t VALUES (1, CURRENT_TIMESTAMP)":                         true,
		"INSERT INTO t VALUES (1, current_timestamp(3))":                      true,
		"UPDATE t SET d = CURDATE() WHERE id = 1":                             true,
		"UPDATE t SET d = CURRENT_DATE WHERE id = 1":                          true,
		"UPDATE t SET d = LOCALTIME WHERE id = 1":                             true,
		"UPDATE t SET d = localtimestamp() WHERE id = 1":                      true,
		"DELETE FROM t WHERE made < UTC_TIMESTAMP() - INTERVAL 1 DAY":         true,
		"DELETE FROM t WHERE made < UTC_TIMESTAMP - INTERVAL 1 DAY":           true,
		"INSERT INTO t VALUES (1, UTC_DATE, utc_time)":                        true,
		"DELETE FROM t WHERE made < FROM_UNIXTIME(UNIX_TIMESTAMP() - 60)":     true,
		"INSERT INTO t VALUES (1, SYSDATE())":                                 true,
		"INSERT INTO t VALUES (1, @@timestamp)":                               true,
		"INSERT INTO t VALUES (1, @@session.TIMESTAMP)":                       true,
		"INSERT INTO h SELECT * FROM t FOR SYSTEM_TIME AS OF '2026-01-01'":    true,
		"/*!50000 INSERT INTO t VALUES (1, NOW()) */":                         true,
		"SELECT c FROM sbtest1 WHERE id=?":                                    false,
		"UPDATE sbtest1 SET c=? WHERE id=?":                                   false,
		"UPDATE sbtest1 SET k=k+1 WHERE id=?":                                 false,
		"INSERT INTO t VALUES (1, 'now()')":                                   false, // a string
		"INSERT INTO t (id, `now`) VALUES (1, 2)":                             false, // a column
		"INSERT INTO t VALUES (1, @timestamp)":                                false, // a user variable
		"INSERT INTO t VALUES (1, FROM_UNIXTIME(1700000000))":                 false,
		"INSERT INTO t (id, current_timestamp_copy) VALUES (1, '2026-01-01')": false,
		"DELETE FROM t WHERE id = 3":                                          false,
		// A TIME value into or against a DATETIME takes the current date.
		"UPDATE appt SET starts_at = MAKETIME(9, 0, 0) WHERE id = 1":               true,
		"UPDATE appt SET starts_at = SEC_TO_TIME(?) WHERE id = 1":                  true,
		"DELETE FROM appt WHERE starts_at < TIMEDIFF(?, ?)":                        true,
		"UPDATE appt SET starts_at = TIME '09:00' WHERE id = 1":                    true,
		"UPDATE appt SET starts_at = CAST(? AS TIME) WHERE id = 1":                 true,
		"UPDATE appt SET starts_at = CONVERT(?, TIME) WHERE id = 1":                true,
		"UPDATE appt SET starts_at = STR_TO_DATE(?, '%H:%i') WHERE id = 1":         true,
		"UPDATE appt SET starts_at = TIMESTAMP('2026-01-01') WHERE id = 1":         true,  // TIMESTAMP(expr) of a TIME converts it
		"UPDATE appt SET starts_at = TIMESTAMP '2026-01-01 09:00:00' WHERE id = 1": false, // a literal
		"UPDATE appt SET starts_at = '09:00:00' WHERE id = 1":                      false, // a string: not a time of today (2009-00-00)
		"INSERT INTO log (id, time) VALUES (1, ?)":                                 false, // a column named time
		"UPDATE metrics SET a = 1, time = ? WHERE id = 1":                          false,
		"INSERT INTO log SELECT id, x AS time FROM t":                              false, // an alias
		"INSERT INTO log SELECT id, CAST(CONCAT(h, ':00') AS TIME(3)) FROM t":      true,
		"INSERT INTO log SELECT id, CONVERT(IF(a, b, c), TIME) FROM t":             true,
	} {
		// What replay sends the captured time for (runner.takesClock).
		if i := Analyze(sql); (i.Clock || i.TimeValue) != want {
			t.Errorf("%q: Clock %v, TimeValue %v; want either to be %v", sql, i.Clock, i.TimeValue, want)
		}
	}
}

// A read whose answer shows the clock is not compared, written with
// parentheses or without, read by the parser or only by the lexer (the
// LIMIT ROWS EXAMINED and the RETURNING are MariaDB's, which the parser
// does not read); a TIME value's date does not show in the answer.
func TestClockWordsMakeAnswersNondeterministic(t *testing.T) {
	for sql, want := range map[string]bool{
		"SELECT id FROM t WHERE d = CURRENT_DATE ORDER BY id":                          true,
		"SELECT id FROM t WHERE d = CURRENT_DATE ORDER BY id LIMIT ROWS EXAMINED 1000": true,
		"SELECT id, LOCALTIMESTAMP FROM t ORDER BY id LIMIT ROWS EXAMINED 1000":        true,
		"SELECT id, NOW() FROM t ORDER BY id LIMIT ROWS EXAMINED 1000":                 true,
		"DELETE FROM t WHERE d < CURRENT_DATE RETURNING id":                            true,
		"SELECT id FROM t FOR SYSTEM_TIME ALL ORDER BY id":                             false,
		"SELECT id FROM t WHERE d = MAKETIME(9, 0, 0) ORDER BY id":                     false,
	} {
		if got := Analyze(sql).Nondeterministic; got != want {
			t.Errorf("%q: Nondeterministic = %v, want %v", sql, got, want)
		}
	}
}

// MariaDB's compound statement is not a transaction's BEGIN: replay took
// it for one (the session's next statements in a transaction it never
// had, its writes unknown but not said so) and never sent it the
// captured time.
func TestCompoundStatementIsNoBegin(t *testing.T) {
	i := Analyze("BEGIN NOT ATOMIC INSERT INTO t VALUES (NOW()); UPDATE u SET n = 1; END")
	if i.Begin || i.ImplicitCommit || !i.WritesUnknown {
		t.Errorf("compound statement: Begin %v, ImplicitCommit %v, WritesUnknown %v; want false, false, true", i.Begin, i.ImplicitCommit, i.WritesUnknown)
	}
	// A block in it is no transaction either (the text's pieces end at
	// every semicolon).
	if i := Analyze("BEGIN NOT ATOMIC DECLARE x INT; BEGIN INSERT INTO t VALUES (1); END; END"); i.Begin || i.ImplicitCommit || !i.WritesUnknown {
		t.Errorf("nested block: Begin %v, ImplicitCommit %v, WritesUnknown %v; want false, false, true", i.Begin, i.ImplicitCommit, i.WritesUnknown)
	}
	for _, sql := range []string{"BEGIN", "BEGIN WORK", "START TRANSACTION"} {
		if i := Analyze(sql); !i.Begin || i.WritesUnknown {
			t.Errorf("%q: Begin %v, WritesUnknown %v; want true, false", sql, i.Begin, i.WritesUnknown)
		}
	}
}

// The TiDB parser panics on some inputs MariaDB accepts (an 87-digit
// integer from MariaDB's own test suite): analysis recovers and says the
// statement is unanalysable.
func TestAnalyzeSurvivesParserPanics(t *testing.T) {
	sql := "SELECT " + strings.Repeat("9", 87) + " FROM t"
	i := Analyze(sql)
	if i.Class != ClassRead || len(i.Reads) != 1 || i.Reads[0].Name != "t" {
		t.Errorf("%+v", i)
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
		{"USE a; SELECT 1", "", false},
	}
	for _, c := range cases {
		db, ok := UseSchema(c.sql)
		if db != c.db || ok != c.ok {
			t.Errorf("UseSchema(%q) = %q, %v; want %q, %v", c.sql, db, ok, c.db, c.ok)
		}
	}
}

func TestSetAssignments(t *testing.T) {
	cases := []struct {
		sql  string
		want string // name=value|text;…, or "-" for not a session SET
	}{
		{"SET SESSION sql_mode = 'ANSI_QUOTES'", "sql_mode='ANSI_QUOTES'|SET SESSION sql_mode = 'ANSI_QUOTES'"},
		{"set @@autocommit=0, @x := (1+2), names_x = 3", "autocommit=0|SET @@autocommit=0;@x=(1+2)|SET @x := (1+2);names_x=3|SET names_x = 3"},
		{"SET NAMES utf8mb4 COLLATE utf8mb4_bin", "names=utf8mb4 COLLATE utf8mb4_bin|SET NAMES utf8mb4 COLLATE utf8mb4_bin"},
		{"SET CHARACTER SET latin1", "names=latin1|SET CHARACTER SET latin1"},
		{"SET @@session.max_heap_table_size = 1024*1024", "max_heap_table_size=1024*1024|SET @@session.max_heap_table_size = 1024*1024"},
		{"SET GLOBAL max_connections = 10", "-"},
		{"SET @@global.x = 1", "-"},
		{"SET PASSWORD = PASSWORD('x')", "-"},
		{"SET STATEMENT max_statement_time=1 FOR SELECT 1", "-"},
		{"SET TRANSACTION ISOLATION LEVEL READ COMMITTED", "-"},
		{"SELECT 1", "-"},
	}
	for _, c := range cases {
		as, ok := SetAssignments(c.sql)
		got := "-"
		if ok {
			var parts []string
			for _, a := range as {
				parts = append(parts, a.Name+"="+a.Value+"|"+a.Text)
			}
			got = strings.Join(parts, ";")
		}
		if got != c.want {
			t.Errorf("SetAssignments(%q)\n got %s\nwant %s", c.sql, got, c.want)
		}
	}
}

// The filter's table finds every hint by its first letter in either case.
func TestSecretHints(t *testing.T) {
	for _, h := range secretHints {
		if h[0] < 'a' || h[0] > 'z' {
			t.Fatalf("hint %q does not begin with a lower-case letter (hintsByFirst files it by both cases)", h)
		}
		for _, text := range []string{"x " + h + " y", strings.ToUpper(h)} {
			if !mayCarrySecret(text) {
				t.Errorf("mayCarrySecret(%q) = false", text)
			}
		}
	}
	if mayCarrySecret("SELECT c FROM sbtest1 WHERE id = 5") {
		t.Error("a point select passes the filter")
	}
}

func TestMaskSecrets(t *testing.T) {
	cases := []struct{ in, want string }{
		{"CREATE USER 'app'@'%' IDENTIFIED BY 's3cr3t'", "CREATE USER '***'@'***' IDENTIFIED BY '***'"},
		{"alter user app identified by 'it''s \\' hidden'", "alter user app identified by '***'"},
		{"SET PASSWORD FOR u = PASSWORD(\"pw\")", "SET PASSWORD FOR u = PASSWORD('***')"},
		{"/* admin */ GRANT\n ALL ON *.* TO u IDENTIFIED BY 'pw'", "/* admin */ GRANT\n ALL ON *.* TO u IDENTIFIED BY '***'"},
		{"CHANGE MASTER TO MASTER_PASSWORD='pw'", "CHANGE MASTER TO MASTER_PASSWORD='***'"},
		{"create user u identified via ed25519 using PASSWORD('pw')", "create user u identified via ed25519 using PASSWORD('***')"},
		{"CREATE USER 'unterminated", "CREATE USER '***'"},
		// Issue 14: every statement of a multi-statement text, executable
		// comments, SQL held in strings, and a typo after the secret's start.
		{"SELECT 1; CREATE USER u IDENTIFIED BY 'S3cret'", "SELECT 1; CREATE USER u IDENTIFIED BY '***'"},
		{"DO 1; SET PASSWORD FOR u = PASSWORD('S3cret')", "DO 1; SET PASSWORD FOR u = PASSWORD('***')"},
		{"/*!CREATE USER u IDENTIFIED BY 'S3cret' */", "/*!CREATE USER u IDENTIFIED BY '***' */"},
		{"PREPARE s FROM 'CREATE USER u IDENTIFIED BY ''S3cret'''", "PREPARE s FROM '***'"},
		{"EXECUTE IMMEDIATE 'ALTER USER u IDENTIFIED BY \"S3cret\"'", "EXECUTE IMMEDIATE '***'"},
		{"SET @q = 'CREATE USER u IDENTIFIED BY \\'S3cret\\''", "SET @q = '***'"},
		{"CREATE USER u IDENTIFEID BY 'S3cret'", "CREATE USER u IDENTIFEID BY '***'"},
		// SET PASSWORD wherever a statement can begin inside another: stored
		// programs' bodies, compound statements, SET STATEMENT … FOR.
		{"CREATE DEFINER=app@'%' PROCEDURE p() SET PASSWORD FOR u = PASSWORD('S3cret')", "CREATE DEFINER=app@'***' PROCEDURE p() SET PASSWORD FOR u = PASSWORD('***')"},
		{"CREATE EVENT e ON SCHEDULE AT CURRENT_TIMESTAMP DO SET PASSWORD FOR u = 'S3cret'", "CREATE EVENT e ON SCHEDULE AT CURRENT_TIMESTAMP DO SET PASSWORD FOR u = '***'"},
		{"BEGIN NOT ATOMIC SET PASSWORD FOR u = PASSWORD('S3cret'); END", "BEGIN NOT ATOMIC SET PASSWORD FOR u = PASSWORD('***'); END"},
		{"SET STATEMENT max_statement_time=10 FOR SET PASSWORD FOR u = 'S3cret'", "SET STATEMENT max_statement_time=10 FOR SET PASSWORD FOR u = '***'"},
		{"CREATE TRIGGER tr BEFORE INSERT ON t FOR EACH ROW SET PASSWORD FOR u = 'S3cret'", "CREATE TRIGGER tr BEFORE INSERT ON t FOR EACH ROW SET PASSWORD FOR u = '***'"},
		{"IF 1 THEN SET PASSWORD FOR u = 'S3cret'; END IF", "IF 1 THEN SET PASSWORD FOR u = '***'; END IF"},
		{"lbl: LOOP SET PASSWORD = 'S3cret'; END LOOP", "lbl: LOOP SET PASSWORD = '***'; END LOOP"},
		// The password functions anywhere, and credentials of other kinds.
		{"SELECT PASSWORD('S3cret')", "SELECT PASSWORD('***')"},
		{"SELECT user FROM t WHERE h = OLD_PASSWORD ('S3cret')", "SELECT user FROM t WHERE h = OLD_PASSWORD ('***')"},
		{"CREATE TABLE ft (id int) ENGINE=FEDERATED CONNECTION='mysql://app:S3cret@127.0.0.1:3306/db/t'", "CREATE TABLE ft (id int) ENGINE=FEDERATED CONNECTION='***'"},
		{"ALTER TABLE ct CONNECTION 'mysql://app:S3cret@h/db/t'", "ALTER TABLE ct CONNECTION '***'"},
		{"SET GLOBAL wsrep_sst_auth='u:S3cret'", "SET GLOBAL wsrep_sst_auth='***'"},
		{`INSERT INTO mysql.global_priv VALUES ('%','u','{"authentication_string":"S3cret"}')`, "INSERT INTO mysql.global_priv VALUES ('***','***','***')"},
		{"UPDATE `mysql`.`user` SET plugin='x', authentication_string='S3cret' WHERE user='u'", "UPDATE `mysql`.`user` SET plugin='***', authentication_string='***' WHERE user='***'"},
		// A statement held in a string makes every string of its statement
		// secret: the arguments go with it.
		{"EXECUTE IMMEDIATE 'CREATE USER u IDENTIFIED BY ?' USING 'S3cret'", "EXECUTE IMMEDIATE '***' USING '***'"},
		{"EXECUTE IMMEDIATE CONCAT('CREATE USER u IDENTIFIED BY ', QUOTE('S3cret'))", "EXECUTE IMMEDIATE CONCAT('***', QUOTE('***'))"},
		{"EXECUTE IMMEDIATE CONCAT('CREATE USER u IDENTIFIED BY ''S3c', 'ret''')", "EXECUTE IMMEDIATE CONCAT('***', '***')"},
		// A review's further forms: the @@variable, SET STATEMENT … FOR before
		// DDL, CONNECT's and Spider's options and function, mysql.servers,
		// ed25519_password(), a string of SQL with a placeholder, SET
		// PASSWORD after routine characteristics or a handler, a server's
		// OPTIONS in an event, a text that does not lex.
		{"SET @@global.wsrep_sst_auth = 'sst:S3cret'", "SET @@global.wsrep_sst_auth = '***'"},
		{"SET STATEMENT max_statement_time=60 FOR ALTER TABLE t CONNECTION='mysql://app:S3cret@h/db/t'", "SET STATEMENT max_statement_time=60 FOR ALTER TABLE t CONNECTION='***'"},
		{"CREATE TABLE t (a int) ENGINE=CONNECT TABLE_TYPE=MYSQL OPTION_LIST='host=h,user=app,password=S3cret'", "CREATE TABLE t (a int) ENGINE=CONNECT TABLE_TYPE=MYSQL OPTION_LIST='***'"},
		{`CREATE TABLE t (a int) ENGINE=SPIDER COMMENT='wrapper "mysql", host "h", user "app", password "S3cret"'`, "CREATE TABLE t (a int) ENGINE=SPIDER COMMENT='***'"},
		{`SELECT spider_direct_sql('SELECT 1', 'tmp', 'host "h", user "app", password "S3cret"')`, "SELECT spider_direct_sql('***', '***', '***')"},
		{"INSERT INTO mysql.servers VALUES ('s','h','db','app','S3cret',3306,'','mysql','')", "INSERT INTO mysql.servers VALUES ('***','***','***','***','***',3306,'***','***','***')"},
		{"SELECT ed25519_password('S3cret')", "SELECT ed25519_password('***')"},
		{"EXECUTE IMMEDIATE 'SELECT PASSWORD(?)' USING 'S3cret'", "EXECUTE IMMEDIATE '***' USING '***'"},
		{"CREATE PROCEDURE p() MODIFIES SQL DATA SET PASSWORD FOR u = 'S3cret'", "CREATE PROCEDURE p() MODIFIES SQL DATA SET PASSWORD FOR u = '***'"},
		{"DECLARE CONTINUE HANDLER FOR SQLEXCEPTION SET PASSWORD FOR u = 'S3cret'", "DECLARE CONTINUE HANDLER FOR SQLEXCEPTION SET PASSWORD FOR u = '***'"},
		{"CREATE EVENT e ON SCHEDULE EVERY 1 DAY DO CREATE SERVER s FOREIGN DATA WRAPPER mysql OPTIONS (USER 'app', PASSWORD 'S3cret')", "CREATE EVENT e ON SCHEDULE EVERY 1 DAY DO CREATE SERVER s FOREIGN DATA WRAPPER mysql OPTIONS (USER '***', PASSWORD '***')"},
		{"SET GLOBAL wsrep_sst_auth='sst:S3cret' /* trailing", "SET GLOBAL wsrep_sst_auth='***'"},
	}
	for _, c := range cases {
		got, masked := MaskSecrets(c.in)
		if got != c.want || !masked {
			t.Errorf("MaskSecrets(%q) = %q, %v; want %q", c.in, got, masked, c.want)
		}
		for _, secret := range []string{"pw", "s3cr3t", "S3cret", "hidden"} {
			if strings.Contains(got, secret) {
				t.Errorf("secret %q survived in %q", secret, got)
			}
		}
		if !CarriesSecret(c.in) {
			t.Errorf("CarriesSecret(%q) = false", c.in)
		}
	}
	// Placeholders: nothing to mask, and yet the parameters are the
	// password (a prepared statement's executes must not be recorded).
	for _, prepared := range []string{"SET PASSWORD FOR x = PASSWORD(?)", "ALTER USER u IDENTIFIED BY ?", "CREATE USER u@h IDENTIFIED VIA ed25519 USING PASSWORD(?)", "SELECT PASSWORD(?)"} {
		if got, masked := MaskSecrets(prepared); got != prepared || masked || !CarriesSecret(prepared) {
			t.Errorf("%q: MaskSecrets %q %v, CarriesSecret %v; want unchanged and carrying a secret", prepared, got, masked, CarriesSecret(prepared))
		}
	}
	for _, plain := range []string{"SELECT ?", "UPDATE users SET name = ? WHERE id = ?", "SELECT user FROM t WHERE password = ?",
		"UPDATE users u JOIN a ON (a.id = u.id) SET password = ? WHERE a.id = ?", "INSERT INTO emails (body) VALUES ('choose a new password (valid 1h)')"} {
		if CarriesSecret(plain) {
			t.Errorf("CarriesSecret(%q) = true", plain)
		}
	}
	for _, keep := range []string{"SELECT 'IDENTIFIED BY' FROM t", "INSERT INTO users (password) VALUES ('x')",
		"UPDATE t SET c='x' WHERE id=1", "SELECT user, password FROM accounts WHERE user = 'bob'", "PREPARE s FROM 'SELECT 1'",
		// A column named password in an UPDATE's or INSERT's SET, whatever
		// comes before it; a key or index on it; a CONNECTION column; prose
		// in strings.
		"UPDATE users u JOIN accounts a ON (a.id = u.account_id) SET password = 'hash1' WHERE a.name = 'bob'",
		"UPDATE users FORCE INDEX (PRIMARY) SET password = 'hash1' WHERE id = 5", "INSERT INTO users SET password = 'x', name = 'bob'",
		"SET STATEMENT max_statement_time=1 FOR UPDATE users SET password = 'x'",
		"CREATE TABLE accounts (id INT, password VARCHAR(64), status ENUM('active','locked') DEFAULT 'active', KEY password (password))",
		"CREATE INDEX ix ON users (password(10))", "CREATE TABLE devices (connection VARCHAR(10) DEFAULT 'wifi')",
		"CREATE TABLE users (id INT, pw CHAR(60) COMMENT 'bcrypt password hash') COMMENT='accounts: password hashes'",
		"CREATE VIEW offline AS SELECT * FROM devices WHERE connection = 'offline'",
		"CREATE TRIGGER tr BEFORE INSERT ON devices FOR EACH ROW SET NEW.connection = 'wifi'",
		`INSERT INTO emails (subject, body) VALUES ('Reset', 'Click "Reset" to choose a new password (the link is valid 1h)')`,
		"INSERT INTO log (msg) VALUES ('row copied from mysql.user, host \"h\"')",
		// An application's own columns and tables: not MariaDB's credentials.
		"UPDATE users SET password = 'x' WHERE id = 1", "UPDATE users u SET password = 'x'", "UPDATE t SET connection = 'x'",
		"SELECT * FROM app.user WHERE name = 'bob'", "SELECT 'a password' FROM t"} {
		if got, masked := MaskSecrets(keep); got != keep || masked {
			t.Errorf("MaskSecrets(%q) changed an ordinary statement: %q", keep, got)
		}
	}
}

func TestRewriteEngine(t *testing.T) {
	cases := []struct{ in, engine, opts, want string }{
		{"CREATE TABLE t (id INT PRIMARY KEY) ENGINE=InnoDB", "ROCKSDB", "",
			"CREATE TABLE t (id INT PRIMARY KEY) ENGINE=ROCKSDB"},
		{"create table t (id int)", "ROCKSDB", "", "create table t (id int) ENGINE=ROCKSDB"},
		{"CREATE TABLE t (id INT) ENGINE=MyISAM ROW_FORMAT=DYNAMIC", "InnoDB", "ROW_FORMAT=COMPRESSED KEY_BLOCK_SIZE=8",
			"CREATE TABLE t (id INT) ENGINE=InnoDB ROW_FORMAT=COMPRESSED KEY_BLOCK_SIZE=8"},
		{"ALTER TABLE t ENGINE=InnoDB", "TokuDB", "", "ALTER TABLE t ENGINE=TokuDB"},
		{"ALTER TABLE t ADD COLUMN v INT", "TokuDB", "", "ALTER TABLE t ADD COLUMN v INT"},
		{"ALTER TABLE t ADD COLUMN engine VARCHAR(10), ENGINE InnoDB", "ROCKSDB", "", "ALTER TABLE t ADD COLUMN engine VARCHAR(10), ENGINE ROCKSDB"},
		{"CREATE TABLE t2 LIKE t1", "ROCKSDB", "", "CREATE TABLE t2 LIKE t1"},
		// mariadb-slap ends its queries with a NUL: the clause goes before it
		// (after it, the server answered 1064 and slap's replay failed).
		{"CREATE TABLE `t1` (intcol1 INT(32) ,charcol1 VARCHAR(128))\x00", "InnoDB", "", "CREATE TABLE `t1` (intcol1 INT(32) ,charcol1 VARCHAR(128)) ENGINE=InnoDB\x00"},
		{"CREATE TABLE t2 SELECT * FROM t1", "ROCKSDB", "", "CREATE TABLE t2 ENGINE=ROCKSDB SELECT * FROM t1"},
		{"CREATE TABLE t2 (a INT) AS SELECT 1 AS a", "ROCKSDB", "", "CREATE TABLE t2 (a INT) ENGINE=ROCKSDB AS SELECT 1 AS a"},
		{"CREATE TABLE IF NOT EXISTS `s`.`t` (`engine` VARCHAR(8)) ENGINE = InnoDB DEFAULT CHARSET=utf8mb4", "ROCKSDB", "",
			"CREATE TABLE IF NOT EXISTS `s`.`t` (`engine` VARCHAR(8)) ENGINE = ROCKSDB DEFAULT CHARSET=utf8mb4"},
		// MariaDB syntax (issue 13): only the engine changes; nothing is reprinted.
		{"CREATE TABLE `j` (\n  `js` longtext CHECK (json_valid(`js`)),\n  `c` blob COMPRESSED\n) ENGINE=InnoDB DEFAULT CHARSET=latin1",
			"ROCKSDB", "", "CREATE TABLE `j` (\n  `js` longtext CHECK (json_valid(`js`)),\n  `c` blob COMPRESSED\n) ENGINE=ROCKSDB DEFAULT CHARSET=latin1"},
		{"CREATE OR REPLACE TABLE v (a INT, b INT AS (a+1) PERSISTENT, c INT INVISIBLE) WITH SYSTEM VERSIONING", "ROCKSDB", "",
			"CREATE OR REPLACE TABLE v (a INT, b INT AS (a+1) PERSISTENT, c INT INVISIBLE) ENGINE=ROCKSDB WITH SYSTEM VERSIONING"},
		{"CREATE TABLE p (a INT) ENGINE=InnoDB PARTITION BY RANGE (a) (PARTITION p0 VALUES LESS THAN (10) ENGINE = InnoDB, PARTITION p1 VALUES LESS THAN MAXVALUE ENGINE=InnoDB)",
			"ROCKSDB", "", "CREATE TABLE p (a INT) ENGINE=ROCKSDB PARTITION BY RANGE (a) (PARTITION p0 VALUES LESS THAN (10) ENGINE = ROCKSDB, PARTITION p1 VALUES LESS THAN MAXVALUE ENGINE=ROCKSDB)"},
		{"CREATE TABLE q (a INT) COMMENT='x, y'", "InnoDB", "COMMENT='a, b'", "CREATE TABLE q (a INT) COMMENT='a, b' ENGINE=InnoDB"},
		{"/*!40101 SET NAMES utf8 */; CREATE TABLE m (a INT) ENGINE=MyISAM; INSERT INTO m VALUES (1)", "InnoDB", "",
			"/*!40101 SET NAMES utf8 */; CREATE TABLE m (a INT) ENGINE=InnoDB; INSERT INTO m VALUES (1)"},
		{"SELECT 'CREATE TABLE t (a INT) ENGINE=MyISAM'", "InnoDB", "", "SELECT 'CREATE TABLE t (a INT) ENGINE=MyISAM'"},
	}
	for _, c := range cases {
		got, err := RewriteEngine(c.in, c.engine, c.opts)
		if err != nil || got != c.want {
			t.Errorf("RewriteEngine(%q, %s, %q)\n got %q, %v\nwant %q", c.in, c.engine, c.opts, got, err, c.want)
		}
	}
	for _, bad := range []struct{ sql, opts string }{{"CREATE TABLE (((", ""}, {"CREATE TABLE t (a INT", ""}, {"CREATE TABLE t (a VARCHAR(3) DEFAULT 'x", ""}, {"CREATE TABLE t (a INT)", "ROW_FORMAT"}} {
		if got, err := RewriteEngine(bad.sql, "InnoDB", bad.opts); !errors.Is(err, ErrUnrewritable) || got != bad.sql {
			t.Errorf("RewriteEngine(%q, %q) = %q, %v; want the text unchanged and ErrUnrewritable", bad.sql, bad.opts, got, err)
		}
	}
}

func TestDigest(t *testing.T) {
	cases := []struct {
		a, b string
		same bool
	}{
		{"SELECT c FROM sbtest1 WHERE id=5", "select c from sbtest1 where id = ?", true},
		{"SELECT c FROM sbtest1 WHERE id=5", "SELECT c FROM sbtest1 WHERE id=99999", true},
		{"UPDATE sbtest3 SET c='12-34' WHERE id=1", "UPDATE sbtest3 SET c=? WHERE id=?", true},
		{"SELECT c FROM sbtest1 WHERE id=5", "SELECT c FROM sbtest2 WHERE id=5", false},
		{"BEGIN", "COMMIT", false},
	}
	for _, c := range cases {
		da, db := DigestOf(c.a), DigestOf(c.b)
		if (da.ID == db.ID) != c.same {
			t.Errorf("DigestOf(%q)=%s/%q, DigestOf(%q)=%s/%q: same=%v, want %v", c.a, da.Short(), da.Text, c.b, db.Short(), db.Text, da.ID == db.ID, c.same)
		}
	}
	// COUNT(*) reads as it was written; COUNT(1) keeps the digester's
	// text; both are one digest.
	for sql, want := range map[string]string{
		"SELECT COUNT(*) FROM t WHERE id = 3":    "select count ( * ) from `t` where `id` = ?",
		"select count( * ), c from t group by c": "select count ( * ) , `c` from `t` group by `c`",
		"SELECT COUNT(1) FROM t WHERE id = 3":    "select count ( ? ) from `t` where `id` = ?",
		"SELECT COUNT(*), COUNT(1) FROM t":       "select count ( ? ) , count ( ? ) from `t`",
		"SELECT account(*) FROM t WHERE id = 3":  "select account ( ? ) from `t` where `id` = ?",
		"SELECT account(*), COUNT(*) FROM t":     "select account ( ? ) , count ( * ) from `t`",
	} {
		if d := DigestOf(sql); d.Text != want {
			t.Errorf("DigestOf(%q).Text = %q, want %q", sql, d.Text, want)
		}
	}
	if a, b := DigestOf("SELECT COUNT(*) FROM t"), DigestOf("SELECT COUNT(1) FROM t"); a.ID != b.ID {
		t.Errorf("COUNT(*) and COUNT(1): digests %s and %s, want one", a.Short(), b.Short())
	}
	d := DigestOf("SELECT c FROM sbtest1 WHERE id=5")
	if d.Text != "select `c` from `sbtest1` where `id` = ?" || len(d.ID) != 64 || len(d.Short()) != 16 {
		t.Errorf("DigestOf = %+v", d)
	}
}

func FuzzLex(f *testing.F) {
	for _, s := range []string{"SELECT 'a''b' FROM `t` -- x", "/*!1 SET @x:=1*/", "0x1f 1e+5 .5 @@a.b ?", "'", "/*", "\"\\", "@'"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sql string) {
		toks, _ := Lex(sql)
		prev := 0
		for _, tk := range toks {
			if tk.Start < prev || tk.End <= tk.Start || tk.End > len(sql) {
				t.Fatalf("token %+v out of order or bounds (prev end %d, len %d)", tk, prev, len(sql))
			}
			prev = tk.End
		}
	})
}

func FuzzAnalyze(f *testing.F) {
	for _, s := range []string{"SELECT 1", "CREATE TABLE t (a INT) ENGINE=InnoDB", "SET @x = 1, SESSION y = 2", "USE `d`",
		"CREATE USER u IDENTIFIED BY 'p'; SELECT 1", "SELECT " + strings.Repeat("9", 87)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sql string) {
		Analyze(sql)
		UseSchema(sql)
		SetAssignments(sql)
		if masked, ok := MaskSecrets(sql); ok && CarriesSecret(masked) && masked == sql {
			t.Fatalf("masked text unchanged: %q", sql)
		}
		if out, err := RewriteEngine(sql, "ROCKSDB", "ROW_FORMAT=COMPRESSED"); err == nil && out != sql {
			// A rewrite keeps the text outside the edits: it still lexes
			// to as many statements.
			a, _ := Lex(sql)
			b, _ := Lex(out)
			if len(Statements(sql, a)) != len(Statements(out, b)) {
				t.Fatalf("rewrite changed the statements: %q -> %q", sql, out)
			}
		}
		_ = fmt.Sprint(IsLoadDataLocal(sql))
	})
}

// A SET's value sent again on a new connection must give what it gave the
// session.
func TestReevaluable(t *testing.T) {
	for v, want := range map[string]bool{
		"1": true, "-5": true, "'ANSI_QUOTES'": true, "ON": true, "DEFAULT": true, "utf8mb4": true, "1.5e3": true,
		"CONCAT(CONCAT(@@sql_mode, ',STRICT_ALL_TABLES'), ',NO_AUTO_VALUE_ON_ZERO')": true, "REPLACE(@@sql_mode, 'ONLY_FULL_GROUP_BY', '')": true,
		"NEXTVAL(s)": false, "@n + 1": false, "LAST_INSERT_ID()": false, "?": false, "(SELECT MAX(id) FROM t)": false,
		"CURRENT_TIMESTAMP": false, "UUID()": false, "CONCAT('a', @x)": false, "": false,
	} {
		if got := Reevaluable(v); got != want {
			t.Errorf("Reevaluable(%q) = %v, want %v", v, got, want)
		}
	}
}

// What an ORDER BY names, for telling whether it can leave rows tied.
func TestOrderColumns(t *testing.T) {
	for sql, want := range map[string]string{
		"SELECT id, k FROM t ORDER BY k":                            "k",
		"SELECT id FROM t ORDER BY t.k DESC, id LIMIT 5":            "k id +limit",
		"SELECT c FROM sbtest1 WHERE id BETWEEN 1 AND 9 ORDER BY c": "c",
		"SELECT id FROM t ORDER BY k + 1":                           "",
		"SELECT id FROM t ORDER BY 1":                               "",
		"SELECT id FROM t":                                          "",
		"SELECT id FROM t LIMIT 3":                                  "+limit",
		"SELECT id AS user_id FROM t ORDER BY user_id":              "id",
		"SELECT k + 1 AS kk FROM t ORDER BY kk":                     "",
		"SELECT a.id FROM t a JOIN t b ON a.g = b.g ORDER BY a.id":  "",
		"SELECT k, COUNT(*) FROM t GROUP BY k ORDER BY k":           "",
		"SELECT DISTINCT k FROM t ORDER BY k":                       "",
	} {
		i := Analyze(sql)
		got := strings.Join(i.OrderColumns, " ")
		if i.Limit {
			got = strings.TrimSpace(got + " +limit")
		}
		if got != want {
			t.Errorf("%q: order columns %q; want %q", sql, got, want)
		}
	}
}
