package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	driver "github.com/go-sql-driver/mysql"
	"github.com/tandemdb/tandem/report"
	"github.com/tandemdb/tandem/sandbox/sandboxtest"
	"github.com/tandemdb/tandem/store"
)

// A MariaDB Connector/C client reading through server-side cursors
// (COM_STMT_EXECUTE with CURSOR_TYPE_READ_ONLY, then COM_STMT_FETCH two
// rows at a time; one cursor read to its end, one closed early) sees
// through the proxy what it sees directly; the capture holds the cursor
// executes and each fetch with its rows; replay opens the cursors and
// fetches as captured, so each fetch is compared: 0 differences on a copy
// of the data, and exactly the fetches that carry a changed row on a
// target where one row differs. Before, nothing tested this path end to
// end (MaxScale's MXS-5059 is this gap).
func TestCursorFetchReplaysAsCaptured(t *testing.T) {
	if testing.Short() {
		t.Skip("needs MariaDB and Connector/C; skipped with -short")
	}
	cfg, err := exec.Command("mariadb_config", "--cflags", "--libs").Output()
	if err != nil {
		t.Fatalf("mariadb_config (package libmariadb-dev; make deps installs it): %v", err)
	}
	client := filepath.Join(t.TempDir(), "cursor")
	args := append([]string{"-o", client, "testdata/cursor.c"}, strings.Fields(string(cfg))...)
	if out, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
		t.Fatalf("gcc (make deps installs it): %v\n%s", err, out)
	}
	srv := sandboxtest.Server(t, "innodb")
	load := func(changed bool) string {
		db, dsn := srv.FreshDB(t)
		mustExec(t, db, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))")
		for i := 1; i <= 9; i++ {
			v := fmt.Sprintf("v%d", i)
			if changed && i == 6 {
				v = "changed"
			}
			mustExec(t, db, fmt.Sprintf("INSERT INTO t VALUES (%d, '%s')", i, v))
		}
		return dsn
	}
	runClient := func(addr, dsn string) string {
		t.Helper()
		host, port, _ := net.SplitHostPort(addr)
		c, _ := driver.ParseDSN(dsn)
		out, err := exec.Command(client, host, port, c.DBName, "2").CombinedOutput()
		if err != nil {
			t.Fatalf("cursor client via %s: %v\n%s", addr, err, out)
		}
		return string(out)
	}
	src := load(false)
	direct := runClient(srv.Addr(), src)
	if want := "1 v1\n2 v2\n3 v3\n4 v4\n5 v5\n6 v6\n7 v7\n8 v8\n9 v9\n3 v3\n4 v4\n5 v5\ndone\n"; direct != want {
		t.Fatalf("directly the client printed\n%s", direct)
	}

	dir := t.TempDir()
	capDir := filepath.Join(dir, "capture")
	listen := freeAddr(t)
	p, _ := startProc(t, tandemBin, "proxy", "--listen", listen, "--backend", srv.Addr(), "--capture", capDir, "--capture-results", "checksum", "--metrics-addr", "off")
	waitTCP(t, listen)
	if via := runClient(listen, src); via != direct {
		t.Fatalf("through the proxy the client printed\n%s\ndirectly\n%s", via, direct)
	}
	p.Process.Signal(os.Interrupt)
	if err := p.Wait(); err != nil {
		t.Fatalf("proxy: %v", err)
	}

	// The capture: two cursor executes, and fetches of two rows each: the
	// first cursor's 9 rows in 5, the second's first 3 in 2.
	r, err := store.Open(capDir)
	if err != nil {
		t.Fatal(err)
	}
	var cursors int
	var fetched []uint64
	for rec, err := range r.Records() {
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case rec.Kind == store.KindExecute && rec.CursorType != 0:
			cursors++
		case rec.Kind == store.KindFetch:
			if rec.FetchRows != 2 {
				t.Errorf("fetch of %d rows, the client asked for 2", rec.FetchRows)
			}
			fetched = append(fetched, rec.Resp.Rows)
		}
	}
	r.Close()
	if cursors != 2 || fmt.Sprint(fetched) != "[2 2 2 2 1 2 2]" {
		t.Fatalf("capture: %d cursor executes, fetches returned %v rows; want 2 and [2 2 2 2 1 2 2]", cursors, fetched)
	}

	same, changed := load(false), load(true)
	rep := replayJSON(t, capDir, "--speed", "0", "--target", "same="+same, "--target", "changed="+changed)
	a, b := rep.Points[0].Targets[0], rep.Points[0].Targets[1]
	for _, tg := range []report.Target{a, b} {
		if tg.Errors != 0 || tg.Skipped != 0 {
			t.Errorf("%s: %d errors %v, %d skipped %v", tg.Name, tg.Errors, tg.ErrorCodes, tg.Skipped, tg.SkippedBy)
		}
	}
	// Compared with the capture: 2 executes and 7 fetches (and the
	// table's CREATE and INSERTs are not in it: loaded directly).
	if vc := a.VsCapture; vc == nil || vc.Compared != 9 || vc.Total() != 0 || vc.Ambiguous != 0 {
		t.Errorf("same data vs the capture: %+v", vc)
	}
	// id 6 is in the first cursor's third fetch (5, 6) and the second
	// cursor's second (5, 6): exactly those two differ.
	vb := b.VsBaseline
	if vb == nil || vb.Total() != 2 || vb.ByClass["row-content"] != 2 || b.VsCapture.Total() != 2 {
		t.Fatalf("changed row vs baseline: %+v; vs capture %+v", vb, b.VsCapture)
	}
	for _, s := range vb.Samples {
		if !strings.Contains(s.Statement, "SELECT id, v FROM t") {
			t.Errorf("sample %+v is not the cursor's statement", s)
		}
	}
}
