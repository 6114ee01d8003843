package replay

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/tandemdb/tandem/capture/synth"
	"github.com/tandemdb/tandem/sandbox/sandboxtest"
	"github.com/tandemdb/tandem/sqlinfo"
	"github.com/tandemdb/tandem/store"
	"github.com/tandemdb/tandem/targets"
)

func TestConcurrencyRegroupsWholeTransactions(t *testing.T) {
	ta, tb, _, _ := twoInnoDB(t)
	prepared(t, 2, 2000, ta, tb)
	capDir := synthCapture(t, "oltp_read_only", func(c *synth.Config) { c.Threads, c.Events = 8, 200 })
	for _, run := range []struct {
		k  int
		io string
	}{{1, IOBlocking}, {3, IOBlocking}, {3, IOPoller}} {
		k := run.k
		t.Run(fmt.Sprintf("concurrency=%d,io=%s", k, run.io), func(t *testing.T) {
			procs := runtime.GOMAXPROCS(0)
			rep := replayRun(t, capDir, func(c *Config) { c.Concurrency, c.IO = k, run.io }, ta, tb)
			if rep.IO != run.io || strings.Contains(strings.Join(rep.Notes, " "), "--io") {
				t.Errorf("report says io %q (%q), want %q", rep.IO, rep.Notes, run.io)
			}
			if got := runtime.GOMAXPROCS(0); got != procs {
				t.Errorf("GOMAXPROCS %d after the replay, %d before", got, procs)
			}
			for _, tr := range rep.Targets {
				// 8 captured sessions on k connections; every transaction and
				// statement once: 200 x (14 reads + BEGIN + COMMIT).
				if tr.Connections != int64(k) || tr.Transactions != 200 || tr.Reads != 200*14 || tr.Other != 400 || tr.Writes != 0 || tr.Errors != 0 {
					t.Errorf("%s: connections %d transactions %d r/w/o %d/%d/%d errors %d", tr.Name, tr.Connections, tr.Transactions, tr.Reads, tr.Writes, tr.Other, tr.Errors)
				}
			}
			// Connects and prepares are not replayed as such with
			// --concurrency: statements are prepared where they run.
			if d := rep.Divergences[0]; d.Compared != 200*16 || d.Total() != 0 || d.Missing != 0 || d.Extra != 0 {
				t.Errorf("compared %d (want 3200), divergent %v, missing %d, extra %d", d.Compared, d.ByClass, d.Missing, d.Extra)
			}
		})
	}
}

// What --io auto reads before a run, on real captures and a real server:
// the capture's statements and its transactions that wrote (the scan),
// and whether the target writes its log at each COMMIT
// (innodb_flush_log_at_trx_commit). A read/write capture then waits on
// the poller, a read-only one blocks, and so does the read/write one on a
// server that writes its log once a second, or over one connection to
// each target.
func TestIOAutoFollowsWriteTransactions(t *testing.T) {
	ta, tb, dba, _ := twoInnoDB(t)
	prepared(t, 2, 2000, ta, tb)
	// 20 transactions of 20 statements (BEGIN, 10 point selects, 4
	// ranges, 2 UPDATEs, a DELETE and an INSERT, COMMIT); 10 of 16
	// read-only ones.
	rw := synthCapture(t, "oltp_read_write", func(c *synth.Config) { c.Threads, c.Events = 2, 20 })
	ro := synthCapture(t, "oltp_read_only", func(c *synth.Config) { c.Threads, c.Events = 2, 10 })
	for _, c := range []struct {
		dir                  string
		statements, writeTrx uint64
	}{{rw, 400, 20}, {ro, 160, 0}} {
		r, err := store.Open(c.dir)
		if err != nil {
			t.Fatal(err)
		}
		x, err := scanCapture(context.Background(), r, sqlinfo.NewAnalyzer(), nil)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		if x.statements != c.statements || x.writeTrx != c.writeTrx {
			t.Errorf("%s: %d statements, %d transactions that wrote; want %d, %d", filepath.Base(filepath.Dir(c.dir)), x.statements, x.writeTrx, c.statements, c.writeTrx)
		}
	}
	if !commitWritesLog(context.Background(), ta, dba) {
		t.Fatal("InnoDB at innodb_flush_log_at_trx_commit=1: not seen to log each COMMIT")
	}
	if commitWritesLog(context.Background(), targets.Target{Name: "x", Engine: "Aria"}, dba) || commitWritesLog(context.Background(), targets.Target{Name: "x", Engine: "rocksdb"}, dba) {
		t.Error("Aria, or RocksDB on a server without it, reported to log each COMMIT")
	}
	mode := func(capDir string, conns int) string {
		t.Helper()
		return replayRun(t, capDir, func(c *Config) { c.Concurrency = conns }, ta, tb).IO
	}
	if got := mode(rw, 2); got != IOPoller {
		t.Errorf("read/write capture: --io auto chose %q, want poller", got)
	}
	// One connection to each target: its COMMITs have none to group with.
	if got := mode(rw, 1); got != IOBlocking {
		t.Errorf("read/write capture, one connection a target: --io auto chose %q, want blocking", got)
	}
	if got := mode(ro, 2); got != IOBlocking {
		t.Errorf("read-only capture: --io auto chose %q, want blocking", got)
	}
	var was int
	if err := dba.QueryRow("SELECT @@global.innodb_flush_log_at_trx_commit").Scan(&was); err != nil {
		t.Fatal(err)
	}
	exec(t, dba, "SET GLOBAL innodb_flush_log_at_trx_commit = 0")
	t.Cleanup(func() { exec(t, dba, fmt.Sprintf("SET GLOBAL innodb_flush_log_at_trx_commit = %d", was)) })
	if got := mode(rw, 2); got != IOBlocking {
		t.Errorf("read/write capture, innodb_flush_log_at_trx_commit=0: --io auto chose %q, want blocking", got)
	}
}

// Two captured sessions in different schemas, one with a SET that changes
// what its statements return: regrouped onto fewer connections, each
// statement still sees its own session's schema and settings. The capture's
// responses (through the proxy, with row checksums) are the reference.
func TestConcurrencyCarriesSessionState(t *testing.T) {
	srv := sandboxtest.Server(t, "innodb")
	one, oneDSN := srv.FreshDB(t)
	two, twoDSN := srv.FreshDB(t)
	exec(t, one, "CREATE TABLE t (v INT)", "INSERT INTO t VALUES (1)")
	exec(t, two, "CREATE TABLE t (v INT)", "INSERT INTO t VALUES (2)")
	via, finish := captureProxy(t)
	conns, dbs := make([]*sql.Conn, 2), make([]*sql.DB, 2)
	for i, dsn := range []string{oneDSN, twoDSN} {
		var err error
		if dbs[i], err = sql.Open("mysql", via(dsn)); err != nil {
			t.Fatal(err)
		}
		if conns[i], err = dbs[i].Conn(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	q := func(c *sql.Conn, query string, args ...any) {
		t.Helper()
		rs, err := c.QueryContext(ctx, query, args...)
		drain(t, rs, err)
	}
	// With ANSI_QUOTES "v" names the column (1); without, it is the string 'v'.
	q(conns[0], "SET SESSION sql_mode = 'ANSI_QUOTES'")
	for i := 0; i < 3; i++ {
		q(conns[0], `SELECT "v" FROM t`)
		q(conns[1], `SELECT "v" FROM t`)
		q(conns[0], `SELECT v FROM t WHERE v = ?`, 1)
		q(conns[1], `SELECT v FROM t WHERE v = ?`, 2)
		q(conns[1], `SELECT "v", v + ? FROM t`, 10)
	}
	for i := range conns {
		conns[i].Close()
		dbs[i].Close()
	}
	capDir := finish()

	// The target is the same server, without a database in its DSN, so each
	// session's captured schema is used; the statements only read.
	root := srv.DSN("")
	for _, k := range []int{0, 1, 2} {
		t.Run(fmt.Sprint("concurrency=", k), func(t *testing.T) {
			rep := replayRun(t, capDir, func(c *Config) { c.Concurrency = k }, tgt(t, "same", root, ""))
			tr, d := rep.Targets[0], rep.VsCapture[0]
			if tr.Errors != 0 || tr.Reads != 15 {
				t.Errorf("errors %d, reads %d; want 0, 15", tr.Errors, tr.Reads)
			}
			// Sessions replay their SET as a statement; --concurrency
			// re-applies it as session state instead.
			want := int64(15)
			if k == 0 {
				want = 16
			}
			if d.Compared != want || d.Total() != 0 {
				t.Errorf("vs capture: compared %d (want %d), divergent %v %+v", d.Compared, want, d.ByClass, d.Samples)
			}
		})
	}
}
