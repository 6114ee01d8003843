package serverlog

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tandemdb/tandem/store"
)

type recs []store.Record

func (r *recs) Record(x *store.Record) { *r = append(*r, *x.Clone()) }

// read writes text to a file and reads it as a log of format f (UTC).
func read(t *testing.T, f, text string) (recs, *Stats) {
	t.Helper()
	return readWith(t, f, text, Options{})
}

// readWith is read with options o (their Loc: UTC).
func readWith(t *testing.T, f, text string, o Options) (recs, *Stats) {
	t.Helper()
	path := filepath.Join(t.TempDir(), f+".log")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	var out recs
	o.Loc = time.UTC
	st, err := Read(context.Background(), []string{path}, f, o, &out)
	if err != nil {
		t.Fatal(err)
	}
	return out, st
}

// brief is a record in one line: session, time (ms past 20:15), kind,
// flags, schema, user, SQL.
func brief(r store.Record) string {
	at := r.Start.Sub(time.Date(2026, 12, 4, 20, 15, 0, 0, time.UTC))
	return fmt.Sprintf("%d %.3f %s %d %s %s %q", r.Session, at.Seconds(), r.Kind, r.Flags, r.Schema, r.User, r.SQL)
}

func check(t *testing.T, got recs, want ...string) {
	t.Helper()
	var g []string
	for _, r := range got {
		g = append(g, brief(r))
	}
	if strings.Join(g, "\n") != strings.Join(want, "\n") {
		t.Errorf("records:\n%s\nwant:\n%s", strings.Join(g, "\n"), strings.Join(want, "\n"))
	}
}

func TestGeneralLog(t *testing.T) {
	out, st := read(t, General, `/usr/sbin/mariadbd, Version: 10.11.19-MariaDB-0+deb12u1 (Debian 12). started with:
Tcp port: 36407  Unix socket: /tmp/sock
Time		    Id Command	Argument
261204 20:15:10	   307 Query	SET GLOBAL general_log=1
		   307 Quit	
		   308 Connect	root@localhost on sbtest using TCP/IP
		   308 Prepare	SELECT c FROM sbtest1 WHERE id=?
		   308 Execute	SELECT c FROM sbtest1 WHERE id=1002
261204 20:15:11	   308 Query	select 'a
b', 'it''s'
		   308 Init DB	other
		   308 Close stmt	
		   309 Connect	app@10.0.0.1 as anonymous on  using TCP/IP
		   309 Query	CREATE USER u IDENTIFIED BY 'secret'
		   308 Quit	
`)
	// The events of a second spread evenly over it (4 in 20:15:10, 5 in
	// :11); a statement's record lasts until its session's next event,
	// and is written then.
	check(t, out,
		`1 10.125 connect 16   ""`, // 307: no connect in the log
		`1 10.125 query 513   "SET GLOBAL general_log=1"`,
		`1 10.375 quit 0   ""`,
		`2 10.625 connect 0 sbtest root ""`,
		`2 10.875 query 0 sbtest  "SELECT c FROM sbtest1 WHERE id=1002"`,
		`2 11.100 query 0 sbtest  "select 'a\nb', 'it''s'"`,
		`3 11.500 connect 0  app ""`,
		`2 11.300 init-db 0 other  ""`,
		`2 11.900 quit 0   ""`,
		`3 11.700 query 2   "CREATE USER u IDENTIFIED BY '***'"`,
		`3 11.900 quit 64   ""`,
	)
	if out[4].Duration != 225*time.Millisecond || out[1].Duration != 250*time.Millisecond {
		t.Errorf("durations %v and %v, want each until the session's next event (225ms, 250ms)", out[4].Duration, out[1].Duration)
	}
	if st.Sessions != 3 || st.FoundOpen != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestAuditLog(t *testing.T) {
	out, st := read(t, Audit, `20261204 20:15:10,vm,root,localhost,308,0,CONNECT,sbtest,,0
20261204 20:15:10,vm,root,localhost,308,140594,QUERY,sbtest,'BEGIN',0
20261204 20:15:10,vm,root,localhost,308,140595,QUERY,sbtest,'SELECT c FROM sbtest1 WHERE id=1002',0
20261204 20:15:10,vm,root,localhost,308,140596,READ,sbtest,sbtest1,
20261204 20:15:10,vm,root,localhost,308,140597,QUERY,sbtest,'UPDATE sbtest1 SET k=k+1 WHERE id=1002',1213
20261204 20:15:11,vm,root,localhost,310,140676,QUERY,,'select \'a\nb\', \'it\'\'s\', \'x,y\'',0
20261204 20:15:11,vm,bob,localhost,311,0,FAILED_CONNECT,,,1045
20261204 20:15:11,vm,root,localhost,308,0,DISCONNECT,,,0
`)
	// The audit log writes a statement as it ends: its record begins at
	// its session's previous event.
	check(t, out,
		`1 10.125 connect 0 sbtest root ""`,
		`1 10.125 query 0 sbtest  "BEGIN"`,
		`1 10.375 query 0 sbtest  "SELECT c FROM sbtest1 WHERE id=1002"`,
		`1 10.625 query 0 sbtest  "UPDATE sbtest1 SET k=k+1 WHERE id=1002"`,
		`2 11.167 connect 16  root ""`,
		`2 11.167 query 0   "select 'a\nb', 'it''s', 'x,y'"`,
		`1 11.833 quit 0   ""`,
		`2 11.833 quit 64   ""`,
	)
	if d := out[2].Duration.Round(time.Millisecond); d != 250*time.Millisecond {
		t.Errorf("the SELECT lasts %v, want from the BEGIN's end to its own (250ms)", d)
	}
	// RETCODE is kept: the deadlock the UPDATE ended with is its captured
	// answer; a statement that succeeded has none (the log says nothing
	// more of it).
	if r := out[3].Resp; r.Kind != store.RespError || r.ErrCode != 1213 {
		t.Errorf("the UPDATE's answer %+v, want error 1213", r)
	}
	if r := out[2].Resp; r.Kind != store.RespNone {
		t.Errorf("the SELECT's answer %+v, want none", r)
	}
	if st.Undecoded != 1 || !strings.Contains(st.Samples["undecoded"], "error 1045") {
		t.Errorf("the refused connect: %+v", st)
	}
	if _, _, err := readOne(t, Audit, "20261204 20:15:11,vm,root,localhost,310,1,QUERY,,'cut short\n"); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("a cut line: %v", err)
	}
}

func readOne(t *testing.T, f, text string) (recs, *Stats, error) {
	path := filepath.Join(t.TempDir(), f+".log")
	os.WriteFile(path, []byte(text), 0o644)
	var out recs
	st, err := Read(context.Background(), []string{path}, f, Options{Loc: time.UTC}, &out)
	return out, st, err
}

func TestSlowLog(t *testing.T) {
	out, st := read(t, Slow, `/usr/sbin/mariadbd, Version: 10.11.19-MariaDB-0+deb12u1 (Debian 12). started with:
Tcp port: 36407  Unix socket: /tmp/sock
Time		    Id Command	Argument
# Time: 261204 20:15:10
# User@Host: root[root] @ localhost [127.0.0.1]
# Thread_id: 308  Schema: sbtest  QC_hit: No
# Query_time: 0.250000  Lock_time: 0.000000  Rows_sent: 0  Rows_examined: 0
# Rows_affected: 0  Bytes_sent: 0
use `+"`sbtest`"+`;
SET timestamp=1796415310;
BEGIN;
# User@Host: root[root] @ localhost [127.0.0.1]
# Thread_id: 308  Schema: sbtest  QC_hit: No
# Query_time: 0.000100  Lock_time: 0.000024  Rows_sent: 1  Rows_examined: 1
# Rows_affected: 0  Bytes_sent: 0
SET timestamp=1796415310;
select 'a
b';
# Time: 261204 20:15:11
# User@Host: root[root] @ localhost [127.0.0.1]
# Thread_id: 309  Schema:   QC_hit: No
# Query_time: 0.000010  Lock_time: 0.000000  Rows_sent: 0  Rows_examined: 0
SET timestamp=1796415311;
# administrator command: Quit;
`)
	// Two statements end in 20:15:10, at .25 and .75; each starts its
	// Query_time before. Connection 309's quit (a session the log never
	// showed) is the log's last event: 308 ends there, unseen.
	check(t, out,
		`1 10.000 connect 16 sbtest root ""`,
		`1 10.000 query 0 sbtest  "BEGIN"`,
		`1 10.750 query 0 sbtest  "select 'a\nb'"`,
		`1 11.500 quit 64   ""`,
	)
	if out[1].Duration != 250*time.Millisecond || out[2].Duration != 100*time.Microsecond {
		t.Errorf("durations %v %v", out[1].Duration, out[2].Duration)
	}
	if st.Sessions != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestFirstTimeAndPrecision(t *testing.T) {
	path := filepath.Join(t.TempDir(), "g.log")
	os.WriteFile(path, []byte("Time\t\t    Id Command\tArgument\n2026-12-04T20:15:10.123456Z\t   12 Query\tSELECT 1\n"), 0o644)
	at, prec, err := FirstTime(path, General, time.UTC)
	if err != nil || !at.Equal(time.Date(2026, 12, 4, 20, 15, 10, 0, time.UTC)) || prec != time.Microsecond {
		t.Errorf("MySQL's general log: %v %v %v", at, prec, err)
	}
	os.WriteFile(path, []byte("nothing of a log\n"), 0o644)
	if _, _, err := FirstTime(path, Audit, time.UTC); err == nil || !strings.Contains(err.Error(), "is --format audit right?") {
		t.Errorf("not a log: %v", err)
	}
}

// The general log's table form: mysql.general_log's own CSV file, and the
// table exported with mariadb -B; times to the microsecond, \-escapes.
func TestGeneralLogTable(t *testing.T) {
	want := []string{
		`1 18.222 connect 0 sbtest root ""`,
		`1 18.227 query 0 sbtest  "select 'a\nb', 'it''s \"q\" \\\\ x'"`,
		`1 18.227 quit 0   ""`,
	}
	csv, _ := read(t, General, `"2026-12-04 20:15:18.156419","root[root] @ localhost [127.0.0.1]",526,1,"Quit",""
"2026-12-04 20:15:18.222172","[root] @ localhost [127.0.0.1]",527,1,"Connect","root@localhost on sbtest using SSL/TLS"
"2026-12-04 20:15:18.226680","root[root] @ localhost [127.0.0.1]",527,1,"Query","select 'a\nb', 'it''s \"q\" \\\\ x'"
"2026-12-04 20:15:18.226808","root[root] @ localhost [127.0.0.1]",527,1,"Quit",""
`)
	check(t, csv, want...)
	tsv, _ := read(t, General, "event_time\tuser_host\tthread_id\tserver_id\tcommand_type\targument\n"+
		"2026-12-04 20:15:18.222172\t[root] @ localhost [127.0.0.1]\t527\t1\tConnect\troot@localhost on sbtest using SSL/TLS\n"+
		"2026-12-04 20:15:18.226680\troot[root] @ localhost [127.0.0.1]\t527\t1\tQuery\tselect 'a\\nb', 'it''s \"q\" \\\\\\\\ x'\n"+
		"2026-12-04 20:15:18.226808\troot[root] @ localhost [127.0.0.1]\t527\t1\tQuit\t\n")
	check(t, tsv, want...)
	if d := csv[1].Duration; d != 128*time.Microsecond {
		t.Errorf("the query lasts %v, want until its quit (128µs)", d)
	}
}

// Whatever a log holds — a line cut short, a byte flipped, another
// format — reading it gives records or an error, never a panic.
func FuzzLogs(f *testing.F) {
	f.Add("261204 20:15:10\t   307 Query\tSELECT 1\n\t\t   307 Quit\t\n", 0)
	f.Add("20261204 20:15:10,vm,root,localhost,308,1,QUERY,sbtest,'BEGIN',0\n", 2)
	f.Add("# Time: 261204 20:15:10\n# Thread_id: 308  Schema: s\n# Query_time: 0.1\nSELECT 1;\n", 1)
	f.Add("\"2026-12-04 20:15:18.222172\",\"x\",527,1,\"Query\",\"a\\\"b\"\n", 0)
	f.Fuzz(func(t *testing.T, text string, format int) {
		path := filepath.Join(t.TempDir(), "log")
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		var out recs
		f := Formats[(format%len(Formats)+len(Formats))%len(Formats)]
		_, _ = Read(context.Background(), []string{path}, f, Options{Loc: time.UTC}, &out)
		_, _, _ = FirstTime(path, f, time.UTC)
	})
}

// A statement stamped with an earlier second than one logged before it (the
// audit plugin stamps a statement when it began and writes it when it
// ended) keeps the log's order: it is taken as of the second being read, so
// that no session's records go back in time. Spread over its own second
// again, session 1's UPDATE would have started before its SELECT ended,
// and replay's order gate, which queues a session's records in order and
// waits by their times, found a cycle for every record after it.
func TestLogTimesNeverGoBackInASession(t *testing.T) {
	out, _ := read(t, Audit, `20261204 20:15:10,vm,root,localhost,308,0,CONNECT,sbtest,,0
20261204 20:15:10,vm,root,localhost,308,1,QUERY,sbtest,'BEGIN',0
20261204 20:15:11,vm,root,localhost,308,2,QUERY,sbtest,'SELECT c FROM sbtest1 WHERE id=1',0
20261204 20:15:11,vm,root,localhost,309,3,QUERY,sbtest,'SELECT 1',0
20261204 20:15:10,vm,root,localhost,308,4,QUERY,sbtest,'UPDATE sbtest1 SET k=k+1 WHERE id=1',0
20261204 20:15:11,vm,root,localhost,308,5,QUERY,sbtest,'COMMIT',0
`)
	check(t, out,
		`1 10.250 connect 0 sbtest root ""`,
		`1 10.250 query 0 sbtest  "BEGIN"`,
		`1 10.750 query 0 sbtest  "SELECT c FROM sbtest1 WHERE id=1"`,
		`2 11.375 connect 16 sbtest root ""`,
		`2 11.375 query 0 sbtest  "SELECT 1"`,
		`1 11.125 query 0 sbtest  "UPDATE sbtest1 SET k=k+1 WHERE id=1"`,
		`1 11.625 query 0 sbtest  "COMMIT"`,
		`1 11.875 quit 64   ""`,
		`2 11.875 quit 64   ""`,
	)
	last := map[uint64]time.Time{}
	for _, r := range out {
		if end := r.Start.Add(r.Duration); end.Before(last[r.Session]) || r.Start.Before(last[r.Session]) {
			t.Errorf("session %d goes back in time at %q: [%v, %v] after %v", r.Session, r.SQL, r.Start, end, last[r.Session])
		} else {
			last[r.Session] = end
		}
	}
}

// The slow log as MariaDB 10.11 writes it (lines taken from a real one):
// a statement line that begins with "# " is the statement's, not a new
// entry (before, "DELETE FROM t" alone was recorded, deleting every row,
// and the rest went to a connection 0); the log's own SET line may name
// last_insert_id and insert_id before the timestamp (before, glued onto
// the statement); a client's own SET timestamp after it is a statement;
// "Schema:   QC_hit" is no schema (before, the schema "QC_hit:"); an
// entry in another schema than its session's last changed it by a
// COM_INIT_DB the log leaves out (a synthetic Init DB, which replay
// runs); an administrator command Quit ends its session; a header after
// entries that no FLUSH of the logs wrote (the slow log writes the FLUSH
// after the header, when it ended) ends the sessions open then.
func TestSlowLogAsTheServerWritesIt(t *testing.T) {
	entry := func(thread, schema, sql string) string {
		return "# User@Host: root[root] @ localhost [127.0.0.1]\n# Thread_id: " + thread + "  Schema: " + schema + "  QC_hit: No\n" +
			"# Query_time: 0.000100  Lock_time: 0.000017  Rows_sent: 0  Rows_examined: 0\n# Rows_affected: 1  Bytes_sent: 0\n" + sql + "\n"
	}
	header := "/usr/sbin/mariadbd, Version: 10.11.19-MariaDB-0+deb12u1 (Debian 12). started with:\nTcp port: 21154  Unix socket: /tmp/mysqld.sock\nTime\t\t    Id Command\tArgument\n"
	out, st := read(t, Slow, header+"# Time: 261204 20:15:10\n"+
		entry("5", "logt", "use `logt`;\nSET insert_id=7,timestamp=1796629452;\nINSERT INTO t (v) VALUES ('y');")+
		entry("5", "logt", "SET last_insert_id=7,timestamp=1796629452;\nSELECT LAST_INSERT_ID();")+
		entry("5", "logt", "SET timestamp=1796629452;\nDELETE FROM t\n# keep the last\nWHERE id > 1000;")+
		entry("5", "logt", "SET timestamp=1796629452;\nSET timestamp=1000000000;")+
		entry("7", "", "SET timestamp=1796629452;\nSELECT DATABASE();")+
		entry("7", "logt", "SET timestamp=1796629452;\nselect count(*) from t;")+
		entry("5", "logt", "SET timestamp=1796629452;\n# administrator command: Quit;")+
		header+
		"# Time: 261204 20:15:13\n"+
		entry("8", "logt", "SET timestamp=1796629455;\nSELECT 'after restart';")+
		header+
		entry("8", "logt", "SET timestamp=1796629455;\nFLUSH LOGS;")+
		entry("8", "logt", "SET timestamp=1796629455;\nSELECT 1;"))
	check(t, out,
		`1 10.062 connect 16 logt root ""`,
		`1 10.062 query 0 logt  "INSERT INTO t (v) VALUES ('y')"`,
		`1 10.187 query 0 logt  "SELECT LAST_INSERT_ID()"`,
		`1 10.312 query 0 logt  "DELETE FROM t\n# keep the last\nWHERE id > 1000"`,
		`1 10.437 query 0 logt  "SET timestamp=1000000000"`,
		`2 10.562 connect 16  root ""`,
		`2 10.562 query 0   "SELECT DATABASE()"`,
		`2 10.687 init-db 0 logt  ""`,
		`2 10.687 query 0 logt  "select count(*) from t"`,
		`1 10.812 quit 0   ""`,
		`2 10.938 quit 64   ""`,
		`3 13.167 connect 16 logt root ""`,
		`3 13.167 query 0 logt  "SELECT 'after restart'"`,
		`3 13.500 query 0 logt  "FLUSH LOGS"`,
		`3 13.833 query 0 logt  "SELECT 1"`,
		`3 13.833 quit 64   ""`,
	)
	// The slow log writes FLUSH LOGS when it has ended, after the header
	// it made: that header is no gap.
	if st.Gaps != 1 || !strings.Contains(st.Samples["gaps"], "after 2026-12-04T20:15:10Z") || !strings.Contains(st.Samples["gaps"], "1 sessions open then end there") {
		t.Errorf("gaps %d %q: want the reopen after 20:15:10, not after a FLUSH, and none at FLUSH LOGS", st.Gaps, st.Samples["gaps"])
	}
}

// MySQL's slow log names no schema in its entries: it writes "use db;"
// when the schema differs from the last one it wrote, for any session.
// An entry without one runs where the log last said.
func TestSlowLogOfMySQLKeepsTheLastUse(t *testing.T) {
	entry := func(id, lines string) string {
		return "# Time: 2026-12-04T20:15:10.250000Z\n# User@Host: app[app] @ localhost []  Id:     " + id + "\n" +
			"# Query_time: 0.000100  Lock_time: 0.000000 Rows_sent: 1  Rows_examined: 1\n" + lines
	}
	out, _ := read(t, Slow, entry("8", "use shop;\nSET timestamp=1796415310;\nSELECT 1;\n")+
		entry("9", "SET timestamp=1796415310;\nSELECT 2;\n"))
	check(t, out,
		`1 10.250 connect 16 shop app ""`,
		`1 10.250 query 0 shop  "SELECT 1"`,
		`2 10.250 connect 16 shop app ""`,
		`2 10.250 query 0 shop  "SELECT 2"`,
		`1 10.250 quit 64   ""`,
		`2 10.250 quit 64   ""`,
	)
}

// The general log as MariaDB 10.11 writes it (lines from a real one): a
// refused login logs its attempt, then its refusal (before, a session
// that connected); EXECUTE s USING … logs the EXECUTE, then the
// statement it ran with its values (before, both ran: two inserts); a
// statement line that starts like a row of the table's CSV file is the
// statement's, and the next lines of a prepare the log does not replay
// are not the statement's before it; the header after FLUSH LOGS loses
// nothing (another session's entry may come between), the one after
// general_log was off ends the sessions open (their statements while it
// was off are not in the log); entries before the file's first time take
// it (before, 1970).
func TestGeneralLogAsTheServerWritesIt(t *testing.T) {
	header := "/usr/sbin/mariadbd, Version: 10.11.19-MariaDB-0+deb12u1 (Debian 12). started with:\nTcp port: 21154  Unix socket: /tmp/mysqld.sock\nTime\t\t    Id Command\tArgument\n"
	out, st := read(t, General, "\t\t     4 Query\tSELECT 'before the first time'\n"+
		"261204 20:15:10\t     4 Query\tINSERT INTO t (d, v) VALUES\n"+
		"\"2026-01-01\", 5)\n"+
		"\t\t     4 Query\tPREPARE s FROM 'INSERT INTO t (v) VALUES (?)'\n"+
		"\t\t     4 Prepare\tINSERT INTO t (v) VALUES (?)\n"+
		"\t\t     4 Query\tEXECUTE s USING @a\n"+
		"\t\t     8 Query\tEXECUTE s USING @b\n"+ // fails: no statement follows
		"\t\t     4 Execute\tINSERT INTO t (v) VALUES ('x')\n"+
		"\t\t     8 Query\tSELECT 'after the failed execute'\n"+
		"\t\t     6 Connect\troot@localhost on  using TCP/IP\n"+
		"\t\t     6 Connect\tAccess denied for user 'root'@'localhost' (using password: YES)\n"+
		"\t\t     4 Query\tFLUSH LOGS\n"+
		"\t\t     9 Query\tSELECT 'between'\n"+
		header+
		"\t\t     4 Query\tSELECT 'after flush'\n"+
		"\t\t     4 Query\tSET GLOBAL general_log=0\n"+
		header+
		"261204 20:15:11\t     4 Query\tSELECT 'back on'\n"+
		"\t\t    12 Prepare\tSELECT *\nFROM t\nWHERE id = ?\n")
	check(t, out,
		`1 10.042 connect 16   ""`,
		`1 10.042 query 513   "SELECT 'before the first time'"`,
		`1 10.125 query 513   "INSERT INTO t (d, v) VALUES\n\"2026-01-01\", 5)"`,
		`1 10.208 query 513   "PREPARE s FROM 'INSERT INTO t (v) VALUES (?)'"`,
		`2 10.375 connect 16   ""`,
		`2 10.375 query 513   "EXECUTE s USING @b"`,
		`1 10.292 query 513   "INSERT INTO t (v) VALUES ('x')"`,
		`3 10.708 connect 16   ""`,
		`1 10.625 query 513   "FLUSH LOGS"`,
		`1 10.792 query 513   "SELECT 'after flush'"`,
		`1 10.875 query 513   "SET GLOBAL general_log=0"`,
		`1 10.958 quit 64   ""`,
		`2 10.458 query 513   "SELECT 'after the failed execute'"`,
		`2 10.958 quit 64   ""`,
		`3 10.708 query 513   "SELECT 'between'"`,
		`3 10.958 quit 64   ""`,
		`4 11.500 connect 16   ""`,
		`4 11.500 query 513   "SELECT 'back on'"`,
		`4 11.500 quit 64   ""`,
	)
	// Twelve events in 20:15:10 (the refused login and the reopen among
	// them), one in 20:15:11: the prepare of connection 12, on three
	// lines, is no statement of connection 4. Connection 4's EXECUTE is
	// replayed as the statement it ran, though connection 8's entry
	// came between; connection 8's, which ran none, as logged.
	if st.Undecoded != 1 || !strings.Contains(st.Samples["undecoded"], "Access denied") || st.Sessions != 4 {
		t.Errorf("sessions %d, refused %d %q: want 4 sessions and the refused login counted once", st.Sessions, st.Undecoded, st.Samples["undecoded"])
	}
	if st.Gaps != 1 || st.Untimed != 1 {
		t.Errorf("gaps %d, untimed %d: want 1 reopen (general_log was off) and 1 entry before the first time", st.Gaps, st.Untimed)
	}
	if _, _, err := readOne(t, General, "\t\t     4 Query\tSELECT 1\n"); err == nil || !strings.Contains(err.Error(), "no time in the log") {
		t.Errorf("a log without a time: %v", err)
	}
}

// The audit log as MariaDB 10.11's server_audit writes it (lines from a
// real one): a change of user is CHANGEUSER (before, dropped); a prepare
// the server refused is written with its ? marks and its error (before,
// replayed as a statement: 1064 on every target, against production's
// 1146); a statement written as long as the plugin writes any (1024
// bytes) may be cut (before, replayed as if whole); \b and \f are
// escapes; a password the plugin masked leaves no statement to run; a
// schema changed by COM_INIT_DB (which the plugin does not write) shows
// in the next event's DATABASE (before, the session stayed where it
// was), and a USE the plugin did not follow (a comment before it) leaves
// its DATABASE behind: no change back.
func TestAuditLogAsTheServerWritesIt(t *testing.T) {
	long := `SELECT \'` + strings.Repeat("x", 1024-9)
	out, st := read(t, Audit, `20261204 20:15:10,vm,root,localhost,5,0,CONNECT,logt,,0
20261204 20:15:10,vm,root,localhost,5,34,QUERY,logt,'INSERT INTO missing (v) VALUES (?)',1146
20261204 20:15:10,vm,root,localhost,5,36,QUERY,logt,'INSERT INTO t (id, v) VALUES (1, \'dup\')',1062
20261204 20:15:10,vm,root,localhost,5,37,QUERY,logt,'`+long+`',0
20261204 20:15:10,vm,root,localhost,5,38,QUERY,logt,'SELECT \'a\bb\fc\\\\d\'',0
20261204 20:15:10,vm,root,localhost,5,39,QUERY,logt,'CREATE USER u1 IDENTIFIED BY *****',0
20261204 20:15:10,vm,bob,localhost,5,0,CHANGEUSER,logt,,0
20261204 20:15:11,vm,bob,localhost,5,0,CHANGEUSER,logt,,1045
20261204 20:15:11,vm,bob,localhost,5,42,QUERY,mysql,'select 2',0
20261204 20:15:11,vm,bob,localhost,5,43,QUERY,mysql,'/* app */ USE logt',0
20261204 20:15:11,vm,bob,localhost,5,44,QUERY,mysql,'select 3',0
20261204 20:15:11,vm,bob,localhost,5,0,DISCONNECT,mysql,,0
`)
	check(t, out,
		`1 10.071 connect 0 logt root ""`,
		`1 10.071 query 1 logt  "INSERT INTO missing (v) VALUES (?)"`,
		`1 10.214 query 0 logt  "INSERT INTO t (id, v) VALUES (1, 'dup')"`,
		`1 10.357 query 5 logt  "SELECT '`+strings.Repeat("x", 1024-9)+`"`,
		`1 10.500 query 0 logt  "SELECT 'a\bb\fc\\\\d'"`,
		`1 10.643 query 2 logt  "CREATE USER u1 IDENTIFIED BY *****"`,
		`1 10.786 change-user 0 logt bob ""`,
		`1 10.929 init-db 0 mysql  ""`,
		`1 10.929 query 0 mysql  "select 2"`,
		`1 11.300 query 0 mysql  "/* app */ USE logt"`,
		`1 11.500 query 0 logt  "select 3"`,
		`1 11.900 quit 0   ""`,
	)
	if st.FailedPrepares != 1 || st.Truncated != 1 || st.Undecoded != 1 {
		t.Errorf("failed prepares %d, truncated %d, refused %d: want 1 each (%v)", st.FailedPrepares, st.Truncated, st.Undecoded, st.Samples)
	}
}

// An EXECUTE over two lines is held whole, and the statement it ran
// replaces it even when a FLUSH LOGS's header comes between (nothing was
// lost there); it takes the EXECUTE's time, when it arrived. Before, the
// EXECUTE's second line was dropped, and the FLUSH released it: both it
// and the statement it ran were replayed.
func TestGeneralLogExecuteAcrossLinesAndAFlush(t *testing.T) {
	header := "/usr/sbin/mariadbd, Version: 10.11.19-MariaDB-0+deb12u1 (Debian 12). started with:\nTcp port: 21154  Unix socket: /tmp/mysqld.sock\nTime\t\t    Id Command\tArgument\n"
	out, st := read(t, General, "261204 20:15:10\t     4 Query\tEXECUTE s\n"+
		"USING @a\n"+
		"\t\t     5 Query\tFLUSH LOGS\n"+
		header+
		"261204 20:15:11\t     4 Execute\tINSERT INTO t (v) VALUES ('x')\n")
	// Held, connection 4's statement comes after connection 5's FLUSH in
	// the capture, within the same second (the EXECUTE's).
	check(t, out,
		`1 10.250 connect 16   ""`,
		`2 10.750 connect 16   ""`,
		`1 10.250 query 513   "FLUSH LOGS"`,
		`1 10.750 quit 64   ""`,
		`2 10.750 query 513   "INSERT INTO t (v) VALUES ('x')"`,
		`2 10.750 quit 64   ""`,
	)
	if st.Gaps != 0 {
		t.Errorf("gaps %d: want none (the header is FLUSH LOGS's)", st.Gaps)
	}
}

// An EXECUTE held before the log's first time is still counted as given
// that time when it is let go (before, it lost the label).
func TestGeneralLogUntimedExecuteKeepsItsLabel(t *testing.T) {
	out, st := read(t, General, "\t\t     4 Query\tEXECUTE s USING @a\n"+
		"261204 20:15:10\t     4 Query\tSELECT 1\n")
	check(t, out,
		`1 10.250 connect 16   ""`,
		`1 10.250 query 513   "EXECUTE s USING @a"`,
		`1 10.750 query 513   "SELECT 1"`,
		`1 10.750 quit 64   ""`,
	)
	if st.Untimed != 1 {
		t.Errorf("untimed %d, want 1 (the EXECUTE)", st.Untimed)
	}
}

// A session the log finds open (its connect, which names its schema, is
// not in it) whose schema the log does not say: the general log writes
// none with a statement. Its statements are not replayed until it names
// one (before, they ran in whatever schema the target's DSN named, where
// same-named tables of another schema may stand); --schema gives one.
// The audit and MariaDB slow logs say it with every entry.
func TestSessionsFoundOpenWithoutASchema(t *testing.T) {
	log := `Time		    Id Command	Argument
261204 20:15:10	     5 Query	SELECT * FROM t
		     5 Query	use app
		     5 Query	SELECT * FROM t
		     6 Init DB	shop
		     6 Query	SELECT 1
`
	out, st := read(t, General, log)
	check(t, out,
		`1 10.100 connect 16   ""`,
		`1 10.100 query 513   "SELECT * FROM t"`,
		`1 10.300 query 0   "use app"`,
		`2 10.700 connect 16 shop  ""`, // its first entry names it
		`2 10.700 init-db 0 shop  ""`,
		`1 10.500 query 0 app  "SELECT * FROM t"`,
		`1 10.900 quit 64   ""`,
		`2 10.900 query 0 shop  "SELECT 1"`,
		`2 10.900 quit 64   ""`,
	)
	if st.FoundOpen != 2 || st.SchemaUnknown != 1 || st.Samples["schema_unknown"] != "connection 5 at 2026-12-04T20:15:10Z: SELECT * FROM t" {
		t.Errorf("found open %d, schema unknown %d (%q); want 2, 1 with connection 5's statement", st.FoundOpen, st.SchemaUnknown, st.Samples["schema_unknown"])
	}
	if l := strings.Join(st.Lines(""), "\n"); !strings.Contains(l, "1 statements of such sessions in a schema the log does not say, before they named one: not replayed (give --schema); e.g. connection 5") {
		t.Errorf("capture's lines say nothing of it:\n%s", l)
	}

	out, st = readWith(t, General, log, Options{Schema: "sb"})
	if brief(out[0]) != `1 10.100 connect 16 sb  ""` || brief(out[1]) != `1 10.100 query 0 sb  "SELECT * FROM t"` || st.SchemaUnknown != 0 {
		t.Errorf("with a schema given: %s, %s, %d unknown; want both in sb, none unknown", brief(out[0]), brief(out[1]), st.SchemaUnknown)
	}

	// A pool's ping is the first the log shows of a session: its schema
	// is still not said.
	out, st = read(t, General, "Time\t\t    Id Command\tArgument\n261204 20:15:10\t     7 Ping\t\n\t\t     7 Query\tUPDATE t SET v = 2\n")
	if len(out) < 3 || brief(out[2]) != `1 10.750 query 513   "UPDATE t SET v = 2"` || st.SchemaUnknown != 1 {
		t.Errorf("a session first seen at a ping: %v, %d unknown; want its statement not replayable, 1 unknown", out, st.SchemaUnknown)
	}

	// The audit log names the schema (none here: the session has none).
	out, st = read(t, Audit, "20261204 20:15:10,vm,app,localhost,9,1,QUERY,,'SELECT 3',0\n")
	if len(out) < 2 || out[1].Flags != 0 || st.SchemaUnknown != 0 {
		t.Errorf("audit log: %v, %d unknown; want the statement as it is, none unknown", out, st.SchemaUnknown)
	}
}
