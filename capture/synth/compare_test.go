package synth_test

import (
	"context"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tandemdb/tandem/capture"
	"github.com/tandemdb/tandem/capture/synth"
	"github.com/tandemdb/tandem/proxy"
	"github.com/tandemdb/tandem/sandbox/sandboxtest"
	"github.com/tandemdb/tandem/sqlinfo"
	"github.com/tandemdb/tandem/store"
)

func TestMain(m *testing.M) { os.Exit(sandboxtest.Main(m)) }

// digestShares reads a capture and returns each statement digest's share of
// the queries and executes.
func digestShares(t *testing.T, dir string) (map[string]float64, int) {
	t.Helper()
	r, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	prepared := map[[2]uint64]string{}
	counts := map[string]int{}
	total := 0
	for rec, err := range r.Records() {
		if err != nil {
			t.Fatal(err)
		}
		switch rec.Kind {
		case store.KindPrepare:
			prepared[[2]uint64{rec.Session, uint64(rec.StmtID)}] = sqlinfo.DigestOf(rec.SQL).Text
		case store.KindExecute:
			counts[prepared[[2]uint64{rec.Session, uint64(rec.StmtID)}]]++
			total++
		case store.KindQuery:
			counts[sqlinfo.DigestOf(rec.SQL).Text]++
			total++
		}
	}
	shares := map[string]float64{}
	for d, n := range counts {
		shares[d] = float64(n) / float64(total)
	}
	return shares, total
}

// Sysbench through the proxy and synth with the same workload and options
// give the same statement digests, each within 3 percentage points of the
// same share (2000 transactions over 2 tables; the table a statement group
// uses is random in both, so shares differ by sampling alone).
func TestSynthMatchesSysbenchThroughProxy(t *testing.T) {
	srv := sandboxtest.Server(t, "innodb")
	_, dsn := srv.FreshDB(t)
	db := dsn[strings.LastIndex(dsn, "/")+1:]
	common := []string{"--db-driver=mysql", "--mysql-host=127.0.0.1", "--mysql-user=root", "--mysql-db=" + db, "--tables=2", "--table-size=1000"}
	if out, err := exec.Command("sysbench", append([]string{"oltp_read_write", fmt.Sprintf("--mysql-port=%d", srv.Port)}, append(common, "prepare")...)...).CombinedOutput(); err != nil {
		t.Fatalf("sysbench prepare: %v\n%s", err, out)
	}
	for _, mode := range []string{"auto", "disable"} {
		t.Run(mode, func(t *testing.T) {
			capDir := filepath.Join(t.TempDir(), "sysbench")
			w, err := store.Create(capDir, store.WriterOptions{NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			p, err := proxy.New(proxy.Config{Listen: "127.0.0.1:0", Backend: srv.Addr(), Recorder: capture.NewRecorder(w, nil)})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- p.Serve(ctx) }()
			_, port, _ := net.SplitHostPort(p.Addr().String())
			args := append([]string{"oltp_read_write", "--mysql-port=" + port, "--threads=2", "--events=2000", "--time=0", "--db-ps-mode=" + mode}, common...)
			out, err := exec.Command("sysbench", append(args, "run")...).CombinedOutput()
			cancel()
			<-done
			w.Close()
			if err != nil {
				t.Fatalf("sysbench run: %v\n%s", err, out)
			}

			synthDir := filepath.Join(t.TempDir(), "synth")
			cfg := synth.Config{Dir: synthDir, Workload: "oltp_read_write", Options: synth.DefaultOptions(), Dist: synth.DefaultDist(),
				Threads: 2, Events: 2000, PSMode: mode, Seed: uint64(time.Now().UnixNano())}
			cfg.Tables, cfg.TableSize = 2, 1000
			if _, err := synth.Run(context.Background(), cfg, nil); err != nil {
				t.Fatal(err)
			}

			real, nReal := digestShares(t, capDir)
			syn, nSyn := digestShares(t, synthDir)
			// sysbench re-runs a transaction that hit a deadlock, so it may
			// send more; synth sends exactly 20 per transaction.
			if nSyn != 2000*20 || nReal < nSyn {
				t.Errorf("statements: sysbench %d, synth %d; want synth 40000 and sysbench at least that", nReal, nSyn)
			}
			if len(real) != len(syn) || len(real) != 20 {
				t.Errorf("digests: sysbench %d, synth %d, want 20 (BEGIN, COMMIT, 9 statements x 2 tables)", len(real), len(syn))
			}
			for d, share := range real {
				if diff := math.Abs(share - syn[d]); diff > 0.03 {
					t.Errorf("%s: sysbench %.2f%%, synth %.2f%%", d, 100*share, 100*syn[d])
				}
			}
		})
	}
}
