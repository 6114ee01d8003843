package footprint

import (
	"context"
	"database/sql"
	"os"
	"testing"

	"github.com/tandemdb/tandem/sandbox/sandboxtest"
)

func TestMain(m *testing.M) { os.Exit(sandboxtest.Main(m)) }

func load(t *testing.T, db *sql.DB, options string) {
	t.Helper()
	for _, q := range []string{
		"CREATE TABLE t (id INT PRIMARY KEY, k INT NOT NULL, c CHAR(120) NOT NULL, KEY k (k)) " + options,
		"INSERT INTO t SELECT seq, seq % 100, REPEAT('abcdefgh', 15) FROM seq_1_to_30000",
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// The same rows take less room compressed than not, and MyRocks reports
// sizes right after a load (the memtable flushed first).
func TestFootprintByEngine(t *testing.T) {
	ctx := context.Background()
	inno := sandboxtest.Server(t, "innodb")
	plainDB, plain := inno.FreshDB(t)
	zipDB, zip := inno.FreshDB(t)
	rocksDB, rocks := sandboxtest.Server(t, "rocksdb").FreshDB(t)
	load(t, plainDB, "ENGINE=InnoDB")
	load(t, zipDB, "ENGINE=InnoDB ROW_FORMAT=COMPRESSED KEY_BLOCK_SIZE=4")
	load(t, rocksDB, "ENGINE=ROCKSDB")
	measure := func(db *sql.DB, dsn string) (data, index, rows int64, source string) {
		t.Helper()
		fs, err := Measure(ctx, db, dbName(t, dsn), nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(fs) != 1 || fs[0].Table != "t" {
			t.Fatalf("footprint %+v, want table t alone", fs)
		}
		return fs[0].DataBytes, fs[0].IndexBytes, fs[0].Rows, fs[0].Source
	}
	pd, pi, pr, ps := measure(plainDB, plain)
	zd, zi, _, zs := measure(zipDB, zip)
	rd, ri, rr, rs := measure(rocksDB, rocks)
	t.Logf("InnoDB %d+%d (%d rows), compressed %d+%d, MyRocks %d+%d (%d rows)", pd, pi, pr, zd, zi, rd, ri, rr)
	if ps != SourceTables || zs != SourceTables || rs != SourceRocksDB {
		t.Errorf("sources %q, %q, %q", ps, zs, rs)
	}
	if pd <= 0 || pi <= 0 || zd <= 0 || zd >= pd {
		t.Errorf("compressed data %d bytes, uncompressed %d: want smaller and non-zero", zd, pd)
	}
	if rd <= 0 || ri <= 0 || rr != 30000 {
		t.Errorf("MyRocks after a load: %d data, %d index bytes, %d rows; want non-zero sizes and 30000 rows", rd, ri, rr)
	}
	// Limited to named tables: none of those here.
	if fs, err := Measure(ctx, plainDB, dbName(t, plain), []string{"other"}); err != nil || len(fs) != 0 {
		t.Errorf("--tables other: %+v, %v", fs, err)
	}
}

func dbName(t *testing.T, dsn string) string {
	t.Helper()
	for i := len(dsn) - 1; i >= 0; i-- {
		if dsn[i] == '/' {
			name := dsn[i+1:]
			for j := range name {
				if name[j] == '?' {
					return name[:j]
				}
			}
			return name
		}
	}
	t.Fatalf("no database in %s", dsn)
	return ""
}
