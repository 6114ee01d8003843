package proxy

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
	driver "github.com/go-sql-driver/mysql"
	"github.com/tandemdb/tandem/sandbox/sandboxtest"
	"github.com/tandemdb/tandem/store"
)

// With Commits the proxy asks the backend for the GTID of every
// transaction that wrote, on the session's own connection, and the capture
// holds it on the record that ended the transaction: exactly the binary
// log's transactions of the session, with clients that read EOF packets
// and clients that do not (the question's answer has the client's shape).
func TestProxyAsksEachWrittenTransactionsGTID(t *testing.T) {
	srv := sandboxtest.Server(t, "primary")
	for _, eof := range []bool{false, true} {
		t.Run(fmt.Sprintf("eof=%v", eof), func(t *testing.T) {
			db, dsn := srv.FreshDB(t)
			cfg, _ := driver.ParseDSN(dsn)
			if _, err := db.Exec("CREATE TABLE t (id INT PRIMARY KEY, v INT)"); err != nil {
				t.Fatal(err)
			}
			pos := func() int {
				var p string
				if err := db.QueryRow("SELECT @@gtid_binlog_pos").Scan(&p); err != nil {
					t.Fatal(err)
				}
				n, _ := strconv.Atoi(p[strings.LastIndex(p, "-")+1:])
				return n
			}
			tp := startProxy(t, srv.Addr(), true, func(c *Config) { c.Commits = true })
			if eof {
				rawCapsOverride = rawCaps &^ uint64(mysql.CLIENT_DEPRECATE_EOF)
				defer func() { rawCapsOverride = 0 }()
			}
			c := dialRaw(t, tp.Addr().String(), "root", cfg.DBName)
			before := pos()
			// The statement that ends each transaction that wrote, in order.
			ends := []string{}
			for _, q := range []struct {
				sql  string
				ends bool
			}{
				{"INSERT INTO t VALUES (1, 1)", true},
				{"UPDATE t SET v = 5 WHERE id = 99", false}, // changes nothing: not logged
				{"BEGIN", false},
				{"UPDATE t SET v = 2 WHERE id = 1", false},
				{"INSERT INTO t VALUES (2, 2)", false},
				{"COMMIT", true},
				{"BEGIN", false},
				{"UPDATE t SET v = 3 WHERE id = 1", false},
				{"BEGIN", true}, // commits the one before
				{"COMMIT", false},
				{"SET autocommit = 0", false},
				{"DELETE FROM t WHERE id = 2", false},
				{"COMMIT", true},
				{"SET autocommit = 1", false},
				{"CREATE TABLE u (a INT)", true},
				{"DROP TABLE u", true},
			} {
				if _, err := c.query(t, q.sql); err != nil {
					t.Fatalf("%s: %v", q.sql, err)
				}
				if q.ends {
					ends = append(ends, q.sql)
				}
			}
			after := pos()
			recs := tp.records(t)
			r, err := store.Open(tp.dir)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			gtids, err := r.GTIDs()
			if err != nil {
				t.Fatal(err)
			}
			if after-before != len(ends) {
				t.Fatalf("the binary log holds %d transactions of the session, the test expects %d", after-before, len(ends))
			}
			bySeq := map[uint64]store.Record{}
			for _, rec := range recs {
				bySeq[rec.Seq] = rec
			}
			var got []string
			for n := before + 1; n <= after; n++ {
				want := fmt.Sprintf("0-1-%d", n)
				found := false
				for seq, g := range gtids {
					if g == want {
						got = append(got, bySeq[seq].SQL)
						found = true
					}
				}
				if !found {
					t.Errorf("GTID %s is not in the capture (it holds %v)", want, gtids)
				}
			}
			if strings.Join(got, "; ") != strings.Join(ends, "; ") {
				t.Errorf("GTIDs on records %q, want on %q", got, ends)
			}
			if len(gtids) != len(ends) {
				t.Errorf("%d GTIDs in the capture, want %d", len(gtids), len(ends))
			}
		})
	}
}
