package prepare

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/tandemdb/tandem/capture/synth"
	"github.com/tandemdb/tandem/sandbox/sandboxtest"
	"github.com/tandemdb/tandem/targets"
)

func TestMain(m *testing.M) { os.Exit(sandboxtest.Main(m)) }

func spec(t *testing.T, name, dsn, extra string) targets.Target {
	t.Helper()
	tg, err := targets.Parse(name + "=" + dsn + extra)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

func columns(t *testing.T, db *sql.DB, schema, table string) string {
	t.Helper()
	rows, err := db.Query("SELECT COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, COALESCE(COLUMN_DEFAULT,'-'), EXTRA FROM information_schema.COLUMNS WHERE TABLE_SCHEMA=? AND TABLE_NAME=? ORDER BY ORDINAL_POSITION", schema, table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n, ty, null, def, extra string
		rows.Scan(&n, &ty, &null, &def, &extra)
		out = append(out, strings.TrimSpace(fmt.Sprintf("%s %s %s %s %s", n, ty, null, def, extra)))
	}
	return strings.Join(out, "; ")
}

func TestPrepareInnoDBCompressedAndMyRocks(t *testing.T) {
	inno := sandboxtest.Server(t, "innodb")
	rocks := sandboxtest.Server(t, "rocksdb")
	idb, idsn := inno.FreshDB(t)
	cdb, cdsn := inno.FreshDB(t)
	rdb, rdsn := rocks.FreshDB(t)
	cfg := Config{Tables: 2, TableSize: 3000, Threads: 3, AutoInc: true, CreateSecondary: true, Dist: synth.DefaultDist(), BatchRows: 700,
		Targets: []targets.Target{
			spec(t, "innodb", idsn, ""),
			spec(t, "compressed", cdsn, ",engine=innodb,options=ROW_FORMAT=COMPRESSED KEY_BLOCK_SIZE=8"),
			spec(t, "myrocks", rdsn, ",engine=myrocks"),
		}}
	var lastDone, lastTotal int64
	cfg.Progress = func(done, total int64) { lastDone, lastTotal = done, total }
	reps, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Progress ends at every row of every table of every target.
	if lastDone != 3*2*3000 || lastTotal != 3*2*3000 {
		t.Errorf("last progress %d of %d rows, want 18000 of 18000", lastDone, lastTotal)
	}
	wantCols := "id int(11) NO - auto_increment; k int(11) NO 0; c char(120) NO ''; pad char(60) NO ''"
	for i, c := range []struct {
		db       *sql.DB
		engine   string
		rowFmt   string
		wantSize bool
	}{{idb, "InnoDB", "Dynamic", true}, {cdb, "InnoDB", "Compressed", true}, {rdb, "ROCKSDB", "Fixed", true}} {
		schema := cfg.Targets[i].Database()
		for n := 1; n <= 2; n++ {
			tbl := fmt.Sprintf("sbtest%d", n)
			var engine, rowFmt string
			if err := c.db.QueryRow("SELECT ENGINE, ROW_FORMAT FROM information_schema.TABLES WHERE TABLE_SCHEMA=? AND TABLE_NAME=?", schema, tbl).Scan(&engine, &rowFmt); err != nil {
				t.Fatal(err)
			}
			if engine != c.engine || rowFmt != c.rowFmt {
				t.Errorf("%s.%s: engine %s row format %s, want %s %s", cfg.Targets[i].Name, tbl, engine, rowFmt, c.engine, c.rowFmt)
			}
			if got := columns(t, c.db, schema, tbl); got != wantCols {
				t.Errorf("%s.%s columns:\n got %s\nwant %s", cfg.Targets[i].Name, tbl, got, wantCols)
			}
			var idx string
			if err := c.db.QueryRow("SELECT GROUP_CONCAT(DISTINCT CONCAT(INDEX_NAME,'(',COLUMN_NAME,')') ORDER BY INDEX_NAME) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA=? AND TABLE_NAME=?", schema, tbl).Scan(&idx); err != nil {
				t.Fatal(err)
			}
			if want := fmt.Sprintf("k_%d(k),PRIMARY(id)", n); idx != want { // case-insensitive order
				t.Errorf("%s.%s indexes %s, want %s", cfg.Targets[i].Name, tbl, idx, want)
			}
			var cnt, lo, hi, clen, plen int
			if err := c.db.QueryRow(fmt.Sprintf("SELECT COUNT(*), MIN(id), MAX(id), MIN(LENGTH(c)), MAX(LENGTH(pad)) FROM %s", tbl)).Scan(&cnt, &lo, &hi, &clen, &plen); err != nil {
				t.Fatal(err)
			}
			if cnt != 3000 || lo != 1 || hi != 3000 || clen != 119 || plen != 59 {
				t.Errorf("%s.%s: %d rows, ids %d..%d, c %d bytes, pad %d bytes", cfg.Targets[i].Name, tbl, cnt, lo, hi, clen, plen)
			}
		}
		r := reps[i]
		if len(r.Tables) != 2 || r.Tables[0].Rows != 3000 || r.Tables[0].DataBytes <= 0 || !strings.Contains(r.Version, "MariaDB") {
			t.Errorf("report %+v", r)
		}
	}
	// Compression shows in the sizes it reports.
	if reps[1].Tables[0].DataBytes >= reps[0].Tables[0].DataBytes {
		t.Errorf("compressed InnoDB %d bytes, plain %d", reps[1].Tables[0].DataBytes, reps[0].Tables[0].DataBytes)
	}

	// Again: refused before anything changes; then cleanup drops them.
	if _, err := Run(context.Background(), cfg); !errors.Is(err, ErrTableExists) {
		t.Fatalf("second prepare: err = %v, want ErrTableExists", err)
	}
	cfg.Cleanup = true
	if _, err := Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	var n int
	rdb.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA=?", cfg.Targets[2].Database()).Scan(&n)
	if n != 0 {
		t.Fatalf("%d tables left after cleanup", n)
	}
}

func TestMissingEngineFailsBeforeCreatingAnything(t *testing.T) {
	inno := sandboxtest.Server(t, "innodb")
	rocks := sandboxtest.Server(t, "rocksdb")
	idb, idsn := inno.FreshDB(t)
	_, rdsn := rocks.FreshDB(t)
	cfg := Config{Tables: 1, TableSize: 10, Threads: 1, CreateSecondary: true,
		Targets: []targets.Target{spec(t, "myrocks", rdsn, ",engine=rocksdb"), spec(t, "tokudb", idsn, ",engine=tokudb")}}
	_, err := Run(context.Background(), cfg)
	if !errors.Is(err, targets.ErrEngineMissing) {
		t.Fatalf("err = %v, want ErrEngineMissing", err)
	}
	msg := err.Error()
	for _, want := range []string{"target tokudb: engine TokuDB is not available on 10.11", "(available: InnoDB", "Aria"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "ROCKSDB") {
		t.Errorf("the InnoDB server's list names ROCKSDB: %q", msg)
	}
	// Nothing was created on either target, not even on the valid one.
	for _, c := range []struct {
		db     *sql.DB
		schema string
	}{{idb, cfg.Targets[1].Database()}} {
		var n int
		c.db.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA=?", c.schema).Scan(&n)
		if n != 0 {
			t.Errorf("%d tables created in %s", n, c.schema)
		}
	}
	rdb, _ := sql.Open("mysql", rocks.DSN(""))
	defer rdb.Close()
	var n int
	rdb.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA=?", cfg.Targets[0].Database()).Scan(&n)
	if n != 0 {
		t.Errorf("%d tables created on the MyRocks target although the TokuDB one failed", n)
	}
}
