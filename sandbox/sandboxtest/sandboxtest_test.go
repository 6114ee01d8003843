package sandboxtest

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

func TestServerIsSharedAndDatabasesAreFresh(t *testing.T) {
	a := Server(t, "rocksdb")
	b := Server(t, "rocksdb")
	if a != b {
		t.Fatalf("Server started the profile twice: %+v and %+v", a.Server, b.Server)
	}
	db1, _ := a.FreshDB(t)
	db2, dsn2 := a.FreshDB(t)
	if _, err := db1.Exec("CREATE TABLE t (id INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	if _, err := db1.Exec("INSERT INTO t VALUES (1),(2),(3)"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db2.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()").Scan(&n); err != nil || n != 0 {
		t.Fatalf("second database has %d tables (%v), want 0; dsn %s", n, err, dsn2)
	}
	var engine string
	if err := db1.QueryRow("SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME='t'").Scan(&engine); err != nil || engine != "ROCKSDB" {
		t.Fatalf("engine = %q (%v), want ROCKSDB", engine, err)
	}
}
