package main

import (
	"database/sql"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	driver "github.com/go-sql-driver/mysql"

	"github.com/tandemdb/tandem/report"
	"github.com/tandemdb/tandem/sandbox/sandboxtest"
)

// A mariadb-dump of a schema with JSON, CHECK, COMPRESSED columns and a
// system-versioned table, imported by the mariadb CLI through a capturing
// proxy, replays with 0 errors onto InnoDB and onto MyRocks, every table
// in its target's engine (asked of information_schema here). With a
// PERSISTENT generated and an INVISIBLE column added, two InnoDB targets
// still replay it with 0 errors; MyRocks, which has no generated columns,
// answers the CREATE with 1910 and then 1146 on exactly the statements of
// that table: one engine difference, the CREATE's error-vs-ok; the
// failures that follow from it are counted apart (not-replayed), as
// following from it.
func TestMariaDBDumpImportReplays(t *testing.T) {
	inno, rocks := sandboxtest.Server(t, "innodb"), sandboxtest.Server(t, "rocksdb")
	srcDB, src := inno.FreshDB(t)
	for _, q := range []string{
		"CREATE TABLE j (id INT PRIMARY KEY, js JSON, CHECK (id > 0))",
		"CREATE TABLE c (id INT PRIMARY KEY, body TEXT COMPRESSED)",
		"CREATE TABLE v (id INT PRIMARY KEY, x INT) WITH SYSTEM VERSIONING",
		`INSERT INTO j VALUES (1, '{"a":1}'), (2, '[1,2]')`,
		"INSERT INTO c VALUES (1, REPEAT('z', 500))",
		"INSERT INTO v VALUES (1, 1)", "UPDATE v SET x = 2",
	} {
		mustExec(t, srcDB, q)
	}
	scfg, _ := driver.ParseDSN(src)
	host, port, _ := net.SplitHostPort(scfg.Addr)
	dump := func() string {
		out, err := exec.Command("mariadb-dump", "--protocol=tcp", "-h", host, "-P", port, "-u", "root", "--skip-ssl", scfg.DBName).Output()
		if err != nil {
			t.Fatalf("mariadb-dump: %v", err)
		}
		return string(out)
	}
	importAndReplay := func(sqlText string, targets ...string) report.Report {
		t.Helper()
		dir := t.TempDir()
		_, dst := inno.FreshDB(t)
		dcfg, _ := driver.ParseDSN(dst)
		listen := freeAddr(t)
		capDir := filepath.Join(dir, "cap")
		p, _ := startProc(t, tandemBin, "proxy", "--listen", listen, "--backend", scfg.Addr, "--capture", capDir, "--metrics-addr", "off")
		waitTCP(t, listen)
		lh, lp, _ := net.SplitHostPort(listen)
		cmd := exec.Command("mariadb", "--protocol=tcp", "-h", lh, "-P", lp, "-u", "root", "--skip-ssl", dcfg.DBName)
		cmd.Stdin = strings.NewReader(sqlText)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("import through the proxy: %v\n%s", err, out)
		}
		p.Process.Signal(os.Interrupt)
		p.Wait()
		args := []string{"replay", capDir, "--speed", "0", "--json", "--run", filepath.Join(dir, "run"), "--metrics-addr", "off"}
		for _, tg := range targets {
			args = append(args, "--target", tg)
		}
		out, stderr, code := run(t, nil, args...)
		if code != 0 {
			t.Fatalf("replay: %s", stderr)
		}
		var rep report.Report
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		return rep
	}
	engines := func(db *sql.DB) map[string]string {
		rows, err := db.Query("SELECT TABLE_NAME, ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		m := map[string]string{}
		for rows.Next() {
			var n, e string
			rows.Scan(&n, &e)
			m[n] = e
		}
		return m
	}

	idb, i := inno.FreshDB(t)
	rdb, r := rocks.FreshDB(t)
	rep := importAndReplay(dump(), "innodb="+i, "myrocks="+r+",engine=rocksdb")
	for _, tg := range rep.Points[0].Targets {
		if tg.Errors != 0 || tg.Skipped != 0 {
			t.Errorf("%s: %d errors %v, %d skipped", tg.Name, tg.Errors, tg.ErrorCodes, tg.Skipped)
		}
	}
	if e := engines(idb); len(e) != 3 || e["j"] != "InnoDB" || e["c"] != "InnoDB" || e["v"] != "InnoDB" {
		t.Errorf("InnoDB target's tables: %v", e)
	}
	if e := engines(rdb); len(e) != 3 || e["j"] != "ROCKSDB" || e["c"] != "ROCKSDB" || e["v"] != "ROCKSDB" {
		t.Errorf("MyRocks target's tables: %v", e)
	}

	mustExec(t, srcDB, "CREATE TABLE g (id INT PRIMARY KEY, a INT, b INT AS (a*2) PERSISTENT, h INT INVISIBLE DEFAULT 7)",
		"INSERT INTO g (id, a) VALUES (1, 5), (2, 6)")
	_, i1 := inno.FreshDB(t)
	_, i2 := inno.FreshDB(t)
	_, r2 := rocks.FreshDB(t)
	rep = importAndReplay(dump(), "a="+i1, "b="+i2, "myrocks="+r2+",engine=rocksdb")
	ta, tb, tm := rep.Points[0].Targets[0], rep.Points[0].Targets[1], rep.Points[0].Targets[2]
	if ta.Errors != 0 || tb.Errors != 0 || tb.VsBaseline.Total() != 0 {
		t.Errorf("two InnoDB targets: errors %d/%d, b vs a %v", ta.Errors, tb.Errors, tb.VsBaseline.ByClass)
	}
	if tm.ErrorCodes["1910"] != 1 || tm.ErrorCodes["1146"] != tm.Errors-1 || tm.VsBaseline.ByClass["error-vs-ok"] != 1 || tm.VsBaseline.Total() != 1 ||
		tm.VsBaseline.AmbiguousBy["not-replayed"] != tm.Errors-1 || tm.VsBaseline.Ambiguous != tm.Errors-1 {
		t.Errorf("MyRocks: errors %v, divergences %v, apart %v; want the CREATE's 1910 as the one error-vs-ok, the 1146s on g's statements apart (not-replayed)",
			tm.ErrorCodes, tm.VsBaseline.ByClass, tm.VsBaseline.AmbiguousBy)
	}
	for _, s := range tm.VsBaseline.Samples {
		if !strings.Contains(s.Statement, "`g`") {
			t.Errorf("a divergence outside table g: %s", s.Statement)
		}
	}
}
