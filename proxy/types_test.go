package proxy

import (
	"database/sql"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/tandemdb/tandem/internal/typestest"
	"github.com/tandemdb/tandem/sandbox/sandboxtest"
	"github.com/tandemdb/tandem/store"
)

// readAll reads every row of q as strings (nil for NULL).
func readAll(t *testing.T, db *sql.DB, q string, args ...any) [][]*string {
	t.Helper()
	rows, err := db.Query(q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out [][]*string
	for rows.Next() {
		raw := make([]sql.RawBytes, len(cols))
		ptrs := make([]any, len(cols))
		for i := range raw {
			ptrs[i] = &raw[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		row := make([]*string, len(cols))
		for i, b := range raw {
			if b != nil {
				s := string(b)
				row[i] = &s
			}
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func show(rows [][]*string) string {
	var b strings.Builder
	for _, r := range rows {
		for _, c := range r {
			if c == nil {
				b.WriteString("NULL|")
			} else {
				fmt.Fprintf(&b, "%q|", *c)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// expectedParam is how go-sql-driver (v1.10) binds v, as the store keeps
// it: float32 widened to DOUBLE, time.Time sent as a string.
func expectedParam(v any) store.Value {
	switch x := v.(type) {
	case nil:
		return store.Value{Type: mysql.MYSQL_TYPE_NULL, Null: true}
	case int64:
		return store.Value{Type: mysql.MYSQL_TYPE_LONGLONG, Int: x}
	case uint64:
		return store.Value{Type: mysql.MYSQL_TYPE_LONGLONG, Unsigned: true, Int: int64(x)}
	case float32:
		return store.Value{Type: mysql.MYSQL_TYPE_DOUBLE, Float: float64(x)}
	case float64:
		return store.Value{Type: mysql.MYSQL_TYPE_DOUBLE, Float: x}
	case bool:
		if x {
			return store.Value{Type: mysql.MYSQL_TYPE_TINY, Int: 1}
		}
		return store.Value{Type: mysql.MYSQL_TYPE_TINY}
	case string:
		return store.Value{Type: mysql.MYSQL_TYPE_STRING, Bytes: []byte(x)}
	case []byte:
		return store.Value{Type: mysql.MYSQL_TYPE_STRING, Bytes: x}
	case time.Time:
		return store.Value{Type: mysql.MYSQL_TYPE_STRING, Bytes: []byte(x.Format("2006-01-02 15:04:05.999999"))}
	}
	panic(fmt.Sprintf("no expectation for %T", v))
}

func TestGoSQLDriverEveryTypeTextAndPrepared(t *testing.T) {
	srv := sandboxtest.Server(t, "innodb")
	direct, dsn := srv.FreshDB(t)
	tp := startProxy(t, srv.Addr(), true, func(c *Config) { c.CaptureResults = ResultsChecksum })
	via := openDB(t, dsnVia(t, dsn, tp.Addr().String(), nil))
	if _, err := via.Exec(typestest.Table); err != nil {
		t.Fatal(err)
	}
	rows := typestest.Rows()
	for _, r := range rows {
		if _, err := via.Exec(typestest.Insert, r...); err != nil {
			t.Fatalf("insert through the proxy: %v", err)
		}
	}

	const q = "SELECT * FROM types ORDER BY id"
	textVia, textDirect := readAll(t, via, q), readAll(t, direct, q)
	if len(textVia) != 3 || !reflect.DeepEqual(textVia, textDirect) {
		t.Fatalf("text protocol differs\nproxy:\n%s\ndirect:\n%s", show(textVia), show(textDirect))
	}
	const pq = "SELECT * FROM types WHERE id >= ? ORDER BY id"
	binVia, binDirect := readAll(t, via, pq, 1), readAll(t, direct, pq, 1)
	if len(binVia) != 3 || !reflect.DeepEqual(binVia, binDirect) {
		t.Fatalf("binary protocol differs\nproxy:\n%s\ndirect:\n%s", show(binVia), show(binDirect))
	}
	// Spot-check that the values are what was sent, not only equal both ways.
	if got := *textVia[0][11]; got != "-123456789012345678.123456" {
		t.Errorf("decimal = %s", got)
	}
	if got := *textVia[0][10]; got != "18446744073709551615" {
		t.Errorf("bigint unsigned = %s", got)
	}
	if got := *textVia[0][17]; got != "2026-11-30 12:34:56.789012" {
		t.Errorf("timestamp = %s", got)
	}

	var executes []store.Record
	var selectText *store.Record
	for _, r := range tp.records(t) {
		if r.Kind == store.KindExecute && len(r.Params) == 30 {
			executes = append(executes, r)
		}
		if r.Kind == store.KindQuery && r.SQL == q {
			selectText = &r
		}
	}
	if len(executes) != 3 {
		t.Fatalf("recorded %d inserts with 30 parameters, want 3", len(executes))
	}
	for i, rec := range executes {
		for j, v := range rows[i] {
			want, got := expectedParam(v), rec.Params[j]
			if len(got.Bytes) == 0 && len(want.Bytes) == 0 {
				got.Bytes, want.Bytes = nil, nil
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("row %d param %d (%T %v): recorded %+v, want %+v", i+1, j, v, v, got, want)
			}
		}
	}
	if selectText == nil || selectText.Resp.Rows != 3 || selectText.Resp.Columns != 30 || !selectText.Resp.HasChecksums || selectText.Resp.Unordered == 0 {
		t.Fatalf("text select recorded as %+v", selectText)
	}
}

func TestSecretsNeverReachTheCapture(t *testing.T) {
	srv := sandboxtest.Server(t, "innodb")
	_, dsn := srv.FreshDB(t)
	tp := startProxy(t, srv.Addr(), true, nil)
	via := openDB(t, dsnVia(t, dsn, tp.Addr().String(), nil))
	if _, err := via.Exec("CREATE USER IF NOT EXISTS 'masktest'@'%' IDENTIFIED BY 'hunter2'"); err != nil {
		t.Fatal(err)
	}
	if _, err := via.Exec("SET PASSWORD FOR 'masktest'@'%' = PASSWORD('hunter3')"); err != nil {
		t.Fatal(err)
	}
	// A secret statement with a typo: the server's message quotes the
	// password back ("… near 'IDENTIFEID BY 'hunter4''"); it must not be
	// stored.
	if _, err := via.Exec("CREATE USER 'masktest2'@'%' IDENTIFEID BY 'hunter4'"); err == nil || !strings.Contains(err.Error(), "hunter4") {
		t.Fatalf("the typo: %v (want the server's 1064 quoting it)", err)
	}
	// Multi-statement, executable comment, PREPARE … FROM and EXECUTE
	// IMMEDIATE forms.
	for _, q := range []string{"/*!CREATE USER IF NOT EXISTS 'masktest3'@'%' IDENTIFIED BY 'hunter5' */",
		"PREPARE ps FROM 'SET PASSWORD FOR ''masktest3''@''%'' = PASSWORD(''hunter6'')'",
		"EXECUTE IMMEDIATE 'SET PASSWORD FOR ''masktest3''@''%'' = PASSWORD(''hunter7'')'"} {
		if _, err := via.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// Secrets where a statement begins inside another, the password
	// functions, a prepared statement's parameter, a statement built in
	// a string, a table's CONNECTION.
	for _, q := range []string{"CREATE PROCEDURE masktest_p() SET PASSWORD FOR 'masktest'@'%' = PASSWORD('hunter8')",
		"BEGIN NOT ATOMIC SET PASSWORD FOR 'masktest'@'%' = PASSWORD('hunter9'); END",
		"SET STATEMENT max_statement_time=10 FOR SET PASSWORD FOR 'masktest'@'%' = PASSWORD('hunter10')",
		"EXECUTE IMMEDIATE CONCAT('SET PASSWORD FOR ''masktest''@''%'' = PASSWORD(', QUOTE('hunter13'), ')')",
		"CREATE TABLE masktest_ft (id int) CONNECTION='mysql://u:hunter14@127.0.0.1:1/db/t'",
		"DROP TABLE masktest_ft", "DROP PROCEDURE masktest_p"} {
		if _, err := via.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	var hash string
	if err := via.QueryRow("SELECT PASSWORD('hunter11')").Scan(&hash); err != nil || hash == "" {
		t.Fatalf("PASSWORD(): %q %v", hash, err)
	}
	if err := via.QueryRow("SELECT PASSWORD(?)", "hunter12").Scan(&hash); err != nil || hash == "" { // prepared: binary protocol
		t.Fatalf("PASSWORD(?): %q %v", hash, err)
	}
	via.Exec("DROP USER 'masktest'@'%'")
	via.Exec("DROP USER 'masktest3'@'%'")
	var masked int
	for _, r := range tp.records(t) {
		all := fmt.Sprintf("%+v", r)
		if strings.Contains(all, "hunter") {
			t.Fatalf("a secret reached the capture: %s", all)
		}
		if r.Flags&store.FlagMasked != 0 {
			masked++
		}
	}
	// CREATE USER, SET PASSWORD, the typo, the comment, PREPARE and
	// EXECUTE IMMEDIATE; the procedure, the compound statement, SET
	// STATEMENT, EXECUTE IMMEDIATE CONCAT, the CONNECTION, PASSWORD() and
	// the prepared PASSWORD(?)'s execute (its prepare has nothing to
	// mask); DROP USER carries no secret.
	if masked != 13 {
		t.Fatalf("%d records marked masked, want 13", masked)
	}
}

func TestMetricsLint(t *testing.T) {
	srv := sandboxtest.Server(t, "innodb")
	tp := startProxy(t, srv.Addr(), true, nil)
	c := dialRaw(t, tp.Addr().String(), "root", "")
	if _, err := c.query(t, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	problems, err := testutil.GatherAndLint(tp.reg)
	if err != nil || len(problems) != 0 {
		t.Fatalf("lint: %v %+v", err, problems)
	}
	if n := testutil.ToFloat64(tp.metrics.commands.WithLabelValues("query")); n != 1 {
		t.Fatalf("tandem_proxy_commands_total{kind=query} = %v, want 1", n)
	}
	// The round trip of that query, and every failure reason from the start.
	if n, err := testutil.GatherAndCount(tp.reg, "tandem_proxy_connection_failures_total"); err != nil || n != 10 {
		t.Errorf("failure reasons: %d series, %v; want 10", n, err)
	}
	// (observed once the reply is flushed to the client, which may have
	// read it a moment before)
	n := 0
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if n = testutil.CollectAndCount(tp.metrics.roundtrip, "tandem_proxy_backend_duration_seconds"); n > 0 {
			break
		}
	}
	if n != 1 {
		t.Errorf("backend round trip: %d series, want 1 (kind query)", n)
	}
}
