package replay

import (
	"context"
	"database/sql"
	"os"
	execpkg "os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/tandemdb/tandem/report"

	"github.com/tandemdb/tandem/internal/invariant"
	"github.com/tandemdb/tandem/sandbox/sandboxtest"
	"github.com/tandemdb/tandem/store"
	"github.com/tandemdb/tandem/targets"
)

// BenchmarkPacedReplayKeepsUp captures each invariant workload through the
// proxy from 8 connections (BENCH_SECS, default 10 s), replays it at
// --speed 1 onto each of two identical InnoDB copies in turn, and reports
// each one's replay time over the capture's span (1.00 = kept the captured pace; the
// target is ≤ 1.10), its lag p95 behind the captured schedule, its reruns
// and its releases at --order-timeout per 10,000 records. Run with
// -benchtime=1x (make bench-replay does).
func BenchmarkPacedReplayKeepsUp(b *testing.B) {
	srv := sandboxtest.Server(b, "innodb")
	secs := benchSeconds(10)
	ctx := context.Background()
	for _, w := range []invariant.Workload{invariant.Bank{}, invariant.Orders{}} {
		b.Run(w.Name(), func(b *testing.B) {
			origin, originDSN := srv.FreshDB(b)
			if err := w.Setup(ctx, origin, "InnoDB"); err != nil {
				b.Fatal(err)
			}
			capDir := captureWorkload(b, w, srv, originDSN, 8, time.Duration(secs)*time.Second)
			if keep := os.Getenv("BENCH_KEEP_CAPTURES"); keep != "" { // to replay it again by hand
				if out, err := execpkg.Command("cp", "-r", capDir, filepath.Join(keep, w.Name())).CombinedOutput(); err != nil {
					b.Fatalf("keeping the capture: %v: %s", err, out)
				}
			}
			r, err := store.Open(capDir)
			if err != nil {
				b.Fatal(err)
			}
			first, last, _, _ := r.StartSpan()
			r.Close()
			span := last.Sub(first).Seconds()
			dba, a := srv.FreshDB(b)
			dbb, c := srv.FreshDB(b)
			ta, tc := tgt(b, "a", a, ""), tgt(b, "b", c, "")
			for range b.N {
				// One copy at a time: each has the machine the capture had
				// (replaying both at once on these CPUs halves each one's).
				for i, t := range []struct {
					db  *sql.DB
					tgt targets.Target
				}{{dba, ta}, {dbb, tc}} {
					if err := w.Setup(ctx, t.db, "InnoDB"); err != nil {
						b.Fatal(err)
					}
					settle(b, t.db)
					rep := replayRun(b, capDir, func(c *Config) { c.Speed = 1 }, t.tgt)
					x := rep.Targets[0]
					records := float64(x.Reads+x.Writes+x.Other) + 1
					suffix := []string{"a", "b"}[i]
					b.ReportMetric(x.Elapsed/span, "replay/span-"+suffix)
					b.ReportMetric(lagOf(x.Lag), "lag-p95-ms-"+suffix)
					b.ReportMetric(float64(x.OrderReruns), "reruns-"+suffix)
					b.ReportMetric(1e4*float64(x.OrderReleased)/records, "released/10k-"+suffix)
					b.Logf("%s onto %s: capture span %.2fs, replay %.2fs (lag p95 %.0f ms), reruns %d, released %d", w.Name(), suffix, span, x.Elapsed,
						lagOf(x.Lag), x.OrderReruns, x.OrderReleased)
				}
				if err := w.Setup(ctx, dba, "InnoDB"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchSeconds reads BENCH_SECS (default def).
func benchSeconds(def int) int {
	if n, err := strconv.Atoi(os.Getenv("BENCH_SECS")); err == nil && n > 0 {
		return n
	}
	return def
}

func lagOf(l *report.Summary) float64 {
	if l == nil {
		return 0
	}
	return l.P95
}

// settle waits (up to 30 s) until InnoDB has purged what the capture and
// the reload left (history list under 1,000): a purge running in the
// background takes the CPUs a paced replay needs, and the capture had
// none behind it.
func settle(b *testing.B, db *sql.DB) {
	b.Helper()
	for range 60 {
		var n int64
		if err := db.QueryRow("SELECT count FROM information_schema.INNODB_METRICS WHERE name = 'trx_rseg_history_len'").Scan(&n); err != nil || n < 1000 {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
}
