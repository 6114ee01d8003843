package replay

import (
	"fmt"
	"os"
	execpkg "os/exec"
	"strings"
	"testing"

	driver "github.com/go-sql-driver/mysql"
	"github.com/tandemdb/tandem/sandbox/sandboxtest"
	"github.com/tandemdb/tandem/store"
)

// connectorJ is Debian's MariaDB Connector/J (libmariadb-java, in make deps).
const connectorJ = "/usr/share/java/mariadb-java-client.jar"

// runBulkBatch runs testdata/java/BulkBatch.java against dsn's server and
// database with Connector/J's bulk statements on, and returns its output.
func runBulkBatch(t *testing.T, dsn string, opts string) string {
	t.Helper()
	cfg, err := driver.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("jdbc:mariadb://%s/%s?user=%s&useBulkStmts=true&useServerPrepStmts=true%s", cfg.Addr, cfg.DBName, cfg.User, opts)
	cmd := execpkg.Command("java", "-cp", connectorJ, "testdata/java/BulkBatch.java", url)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("java BulkBatch %s: %v\n%s", url, err, out)
	}
	return string(out)
}

// Connector/J's batches through the proxy are what they are directly: one
// COM_STMT_BULK_EXECUTE each (1,000 SUCCESS_NO_INFO counts, -2, not 1,000
// single executes), with and without compression. The capture holds each
// as one execute of all its rows, and replay sends it as one: both
// targets end with the application's rows and every response as captured.
func TestConnectorJBulkBatchesRelayRecordAndReplay(t *testing.T) {
	if _, err := os.Stat(connectorJ); err != nil {
		t.Fatalf("Connector/J is not installed (%v): make deps installs libmariadb-java", err)
	}
	_, direct := sandboxtest.Server(t, "innodb").FreshDB(t)
	want := runBulkBatch(t, direct, "")
	for _, line := range []string{"insert batch: 1000 results {-2=1000}", "update batch: 100 results {-2=100}", "duplicate batch: error 1062",
		"table: 1100 rows, ids 605550, n 1085 / "} {
		if !strings.Contains(want, line) {
			t.Fatalf("directly, Connector/J printed no %q (is bulk execute in use?):\n%s", line, want)
		}
	}
	for _, compress := range []bool{false, true} {
		t.Run(fmt.Sprintf("compress=%v", compress), func(t *testing.T) {
			opts := ""
			if compress {
				opts = "&useCompression=true"
			}
			via, finish := captureProxy(t)
			_, dsn := sandboxtest.Server(t, "innodb").FreshDB(t)
			if got := runBulkBatch(t, via(dsn), opts); got != want {
				t.Fatalf("through the proxy Connector/J printed\n%s\ndirectly\n%s", got, want)
			}
			capDir := finish()

			r, err := store.Open(capDir)
			if err != nil {
				t.Fatal(err)
			}
			var bulk []string
			for rec, err := range r.Records() {
				if err != nil {
					t.Fatal(err)
				}
				if rec.IsBulk() {
					bulk = append(bulk, fmt.Sprintf("%s affected=%d err=%d replayable=%v", rec.Resp.Kind, rec.Resp.AffectedRows, rec.Resp.ErrCode,
						rec.Flags&store.FlagNotReplayable == 0))
				}
			}
			r.Close()
			wantBulk := []string{"ok affected=1000 err=0 replayable=true", "ok affected=100 err=0 replayable=true", "error affected=0 err=1062 replayable=true"}
			if strings.Join(bulk, "; ") != strings.Join(wantBulk, "; ") {
				t.Fatalf("the capture's bulk executes: %q, want %q", bulk, wantBulk)
			}

			ta, tb, dba, _ := twoInnoDB(t)
			rep := replayRun(t, capDir, nil, ta, tb)
			for _, tr := range rep.Targets {
				if tr.Errors != 1 || tr.Skipped != 0 { // the duplicate batch's 1062, as captured
					t.Errorf("%s: errors %d skipped %d, want 1 and 0", tr.Name, tr.Errors, tr.Skipped)
				}
			}
			for _, d := range rep.VsCapture {
				if d.Total() != 0 {
					t.Errorf("vs capture: divergent %v %+v", d.ByClass, d.Samples)
				}
			}
			var rows, ids, nulls int
			if err := dba.QueryRow("SELECT COUNT(*), SUM(id), COUNT(*) - COUNT(n) FROM b").Scan(&rows, &ids, &nulls); err != nil {
				t.Fatal(err)
			}
			if rows != 1100 || ids != 605550 || nulls != 15 {
				t.Fatalf("target a after replay: %d rows, ids summing to %d, %d NULLs; want 1100, 605550, 15", rows, ids, nulls)
			}
		})
	}
}
