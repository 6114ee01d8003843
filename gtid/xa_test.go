package gtid

import (
	"context"
	"database/sql"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tandemdb/tandem/sandbox/sandboxtest"
)

func TestMain(m *testing.M) { os.Exit(sandboxtest.Main(m)) }

// MariaDB logs an XA PREPARE as a group of its own, ended by an
// XA_PREPARE event go-mysql does not parse, and the XA COMMIT of the
// prepared transaction as another group, its rows in the PREPARE's.
//   - The PREPARE's group ended only at the next GTID: a capture that
//     stopped with a transaction left prepared on an idle server read the
//     binary log until its timeout, and its list of transactions that
//     bypassed the proxy was cut and marked uncertain.
//   - The groups were read as statements (XA END, XA COMMIT), which
//     --apply-bypassed would have run, losing the rows; and a COMMIT that
//     bypassed the proxy named no table.
func TestBinaryLogXATransactions(t *testing.T) {
	srv := sandboxtest.Server(t, "primary")
	db, _ := srv.FreshDB(t)
	if _, err := db.Exec("CREATE TABLE t (id INT PRIMARY KEY, v INT)"); err != nil {
		t.Fatal(err)
	}
	pos := func() string {
		var p string
		if err := db.QueryRow("SELECT @@gtid_binlog_pos").Scan(&p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t.Cleanup(func() { db.Exec("XA ROLLBACK 'pay-1'") }) // left prepared if the test stops early
	exec := func(c interface {
		ExecContext(context.Context, string, ...any) (sql.Result, error)
	}, qs ...string) {
		t.Helper()
		for _, q := range qs {
			if _, err := c.ExecContext(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}
	start := pos()
	exec(conn, "XA START 'pay-1'", "INSERT INTO t VALUES (1, 1)", "XA END 'pay-1'", "XA PREPARE 'pay-1'")
	prepared := pos()
	acc := Account{Addr: srv.Addr(), User: "root"}
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	began := time.Now()
	b, _ := Bypassed(rctx, acc, start, prepared, nil, true)
	cancel()
	if b.Error != "" || b.Transactions != 1 || time.Since(began) > 10*time.Second {
		t.Fatalf("up to the PREPARE: %d transactions, error %q, %v; want 1 at once", b.Transactions, b.Error, time.Since(began))
	}
	exec(conn, "XA COMMIT 'pay-1'")
	end := pos()
	var got []Trx
	if err := Between(ctx, acc, start, end, false, func(x Trx) bool { got = append(got, x); return true }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].XAPhase != 'p' || got[1].XAPhase != 'c' || got[0].XA != got[1].XA || got[0].XA == "" ||
		got[0].Statement != "" || got[1].Statement != "" || got[0].Rows != 1 {
		t.Fatalf("groups %+v; want the PREPARE's (1 row) and the COMMIT's, one xid, no statement", got)
	}
	// The PREPARE went through the proxy, the COMMIT around it (a
	// recovery): the COMMIT is listed on the PREPARE's table, and nothing
	// is given to apply.
	b, trxs := Bypassed(ctx, acc, start, end, map[string]bool{got[0].GTID.String(): true}, true)
	var tables []string
	for _, bt := range b.Tables {
		tables = append(tables, bt.Table)
	}
	if b.Transactions != 1 || len(tables) != 1 || !strings.HasSuffix(tables[0], ".t") || len(trxs) != 0 || !strings.Contains(b.NotApplicable, "XA transactions") {
		t.Errorf("bypassed %d on %v, %d to apply, not applicable %q; want the COMMIT on t, none to apply, and why", b.Transactions, tables, len(trxs), b.NotApplicable)
	}
}
