package proxy

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

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
// The questions change nothing the client reads: ROW_COUNT() after each
// statement is what the server said, asked directly; a transaction whose
// GTID cannot be asked for without changing it (the next statement reads
// the count and writes) is counted as unasked, not guessed. The session's
// last question is asked as it ends: by COM_QUIT, or by the proxy closing
// a client that stays connected.
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
			// The statement that ends each transaction that wrote, in order,
			// and what a statement reads.
			const lost = "INSERT INTO t VALUES (4, 4)"
			ends := []string{}
			for _, q := range []struct {
				sql  string
				ends bool
				rows string // what a query returns
			}{
				{"INSERT INTO t VALUES (1, 1), (3, 3)", true, ""},
				{"SELECT ROW_COUNT()", false, "2"},
				{"UPDATE t SET v = 5 WHERE id = 99", false, ""}, // changes nothing: not logged
				{"SELECT ROW_COUNT()", false, "0"},
				{"BEGIN", false, ""},
				{"UPDATE t SET v = 2 WHERE id = 1", false, ""},
				{"INSERT INTO t VALUES (2, 2)", false, ""},
				{"COMMIT", true, ""},
				{"SELECT ROW_COUNT()", false, "0"},
				{"BEGIN", false, ""},
				{"UPDATE t SET v = 3 WHERE id = 1", false, ""},
				{"BEGIN", true, ""}, // commits the one before
				{"COMMIT", false, ""},
				{"SET autocommit = 0", false, ""},
				{"DELETE FROM t WHERE id = 2", false, ""},
				{"COMMIT", true, ""},
				{"SET autocommit = 1", false, ""},
				// XA PREPARE logs the transaction under a GTID, its XA
				// COMMIT under another; ONE PHASE under one.
				{"XA START 'x'", false, ""},
				{"UPDATE t SET v = 6 WHERE id = 3", false, ""},
				{"XA END 'x'", false, ""},
				{"XA PREPARE 'x'", true, ""},
				{"XA COMMIT 'x'", true, ""},
				{"XA START 'y'", false, ""},
				{"INSERT INTO t VALUES (5, 5)", false, ""},
				{"XA END 'y'", false, ""},
				{"XA COMMIT 'y' ONE PHASE", true, ""},
				{lost, false, ""}, // the next statement reads its count and writes
				{"INSERT INTO t VALUES (7, ROW_COUNT())", true, ""},
				{"SELECT v FROM t WHERE id = 7", false, "1"},
				{"CREATE TABLE u (a INT)", true, ""},
				{"SHOW WARNINGS", false, ""},
				{"DROP TABLE u", true, ""},
			} {
				rows, err := c.query(t, q.sql)
				if err != nil {
					t.Fatalf("%s: %v", q.sql, err)
				}
				if got := strings.Join(rows, ","); got != q.rows {
					t.Errorf("%s through the proxy: %q, want %q", q.sql, got, q.rows)
				}
				if q.ends {
					ends = append(ends, q.sql)
				}
			}
			if eof {
				c.send(t, 0, []byte{mysql.COM_QUIT}) // the other stays connected: the proxy closes it
			}
			after := pos()
			recs := tp.records(t)
			gtids := captureGTIDs(t, tp.dir)
			if after-before != len(ends)+1 {
				t.Fatalf("the binary log holds %d transactions of the session, the test expects %d", after-before, len(ends)+1)
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
					got = append(got, "(none)")
				}
			}
			want := strings.Join(ends, "; ")
			want = strings.Replace(want, "INSERT INTO t VALUES (7", "(none); INSERT INTO t VALUES (7", 1)
			if strings.Join(got, "; ") != want {
				t.Errorf("GTIDs in the binary log's order on records\n%q,\nwant on\n%q", strings.Join(got, "; "), want)
			}
			if len(gtids) != len(ends) {
				t.Errorf("%d GTIDs in the capture, want %d", len(gtids), len(ends))
			}
			if n := tp.live.Load().unasked.Load(); n != 1 {
				t.Errorf("%d transactions counted as unasked, want 1 (%s)", n, lost)
			}
		})
	}
}

// A transaction manager's recovery commits an XA transaction another
// session prepared and left: the XA COMMIT is logged under a GTID of its
// own, and the proxy asks for it, though the recovering session wrote
// nothing itself. Neither it nor the XA PREPARE's was asked for, so the
// capture's end listed both as transactions that bypassed the proxy.
func TestProxyAsksTheGTIDsOfARecoveredXATransaction(t *testing.T) {
	srv := sandboxtest.Server(t, "primary")
	db, dsn := srv.FreshDB(t)
	cfg, _ := driver.ParseDSN(dsn)
	if _, err := db.Exec("CREATE TABLE t (id INT PRIMARY KEY, v INT)"); err != nil {
		t.Fatal(err)
	}
	var before string
	if err := db.QueryRow("SELECT @@gtid_binlog_pos").Scan(&before); err != nil {
		t.Fatal(err)
	}
	tp := startProxy(t, srv.Addr(), true, func(c *Config) { c.Commits = true })
	tm := dialRaw(t, tp.Addr().String(), "root", cfg.DBName)
	for _, q := range []string{"XA START 'r'", "INSERT INTO t VALUES (1, 1)", "XA END 'r'", "XA PREPARE 'r'"} {
		if _, err := tm.query(t, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	tm.send(t, 0, []byte{mysql.COM_QUIT}) // the server keeps it prepared
	rec := dialRaw(t, tp.Addr().String(), "root", cfg.DBName)
	var err error
	for try := 0; try < 200; try++ { // until the server has let the first session's go
		if _, err = rec.query(t, "XA COMMIT 'r'"); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("XA COMMIT 'r': %v", err)
	}
	if _, err := rec.query(t, "SELECT 1"); err != nil { // the question goes ahead of it
		t.Fatal(err)
	}
	var after string
	if err := db.QueryRow("SELECT @@gtid_binlog_pos").Scan(&after); err != nil {
		t.Fatal(err)
	}
	recs := tp.records(t)
	bySeq := map[uint64]string{}
	for _, r := range recs {
		bySeq[r.Seq] = r.SQL
	}
	got := map[string]string{}
	for seq, g := range captureGTIDs(t, tp.dir) {
		got[g] = bySeq[seq]
	}
	n := func(pos string) int { v, _ := strconv.Atoi(pos[strings.LastIndex(pos, "-")+1:]); return v }
	prepare, commit := fmt.Sprintf("0-1-%d", n(before)+1), fmt.Sprintf("0-1-%d", n(before)+2)
	if n(after) != n(before)+2 || got[prepare] != "XA PREPARE 'r'" || got[commit] != "XA COMMIT 'r'" || len(got) != 2 {
		t.Errorf("binary log %s to %s; GTIDs on records %v; want %s on the XA PREPARE and %s on the XA COMMIT", before, after, got, prepare, commit)
	}
}

// A backend that will not say a GTID (here: the question names a variable
// it does not have) stops the questions for the session, and every
// transaction that wrote from then on is counted as unasked, so the list
// of what bypassed the proxy is labelled uncertain; the client reads what
// the server said all the same.
func TestProxyCountsCommitsItCouldNotAskFor(t *testing.T) {
	srv := sandboxtest.Server(t, "primary")
	db, dsn := srv.FreshDB(t)
	cfg, _ := driver.ParseDSN(dsn)
	if _, err := db.Exec("CREATE TABLE t (id INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	save := lastGTIDPacket
	lastGTIDPacket = append([]byte{mysql.COM_QUERY}, "SELECT @@tandem_no_such_variable"...)
	defer func() { lastGTIDPacket = save }()
	tp := startProxy(t, srv.Addr(), true, func(c *Config) { c.Commits = true })
	c := dialRaw(t, tp.Addr().String(), "root", cfg.DBName)
	for _, q := range []struct{ sql, rows string }{
		{"INSERT INTO t VALUES (1), (2)", ""},
		{"SELECT ROW_COUNT()", "2"},
		{"INSERT INTO t VALUES (3)", ""}, // the question goes ahead of it, and is refused
		{"INSERT INTO t VALUES (4)", ""},
		{"SELECT COUNT(*) FROM t", "4"},
	} {
		rows, err := c.query(t, q.sql)
		if err != nil {
			t.Fatalf("%s: %v", q.sql, err)
		}
		if got := strings.Join(rows, ","); got != q.rows {
			t.Errorf("%s through the proxy: %q, want %q", q.sql, got, q.rows)
		}
	}
	tp.records(t)
	gtids := captureGTIDs(t, tp.dir)
	if len(gtids) != 0 || tp.live.Load().unasked.Load() != 3 {
		t.Errorf("%d GTIDs in the capture, %d unasked; want 0 and 3 (each INSERT)", len(gtids), tp.live.Load().unasked.Load())
	}
}

// captureGTIDs returns the GTIDs the capture in dir holds, by record seq.
func captureGTIDs(t *testing.T, dir string) map[uint64]string {
	t.Helper()
	r, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	gtids, err := r.GTIDs()
	if err != nil {
		t.Fatal(err)
	}
	return gtids
}
