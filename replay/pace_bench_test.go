package replay

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/tandemdb/tandem/report"

	"github.com/tandemdb/tandem/internal/invariant"
	"github.com/tandemdb/tandem/sandbox/sandboxtest"
	"github.com/tandemdb/tandem/store"
)

// BenchmarkPacedReplayKeepsUp captures each invariant workload through the
// proxy from 8 connections (BENCH_SECS, default 10 s), replays it at
// --speed 1 onto two identical InnoDB copies, and reports each target's
// replay time over the capture's span (1.00 = kept the captured pace; the
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
				if err := w.Setup(ctx, dba, "InnoDB"); err != nil {
					b.Fatal(err)
				}
				if err := w.Setup(ctx, dbb, "InnoDB"); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				rep := replayRun(b, capDir, func(c *Config) { c.Speed = 1 }, ta, tc)
				b.StopTimer()
				records := float64(rep.Targets[0].Reads+rep.Targets[0].Writes+rep.Targets[0].Other) + 1
				for i, x := range rep.Targets {
					lag := 0.0
					if x.Lag != nil {
						lag = x.Lag.P95
					}
					suffix := []string{"a", "b"}[i]
					b.ReportMetric(x.Elapsed/span, "replay/span-"+suffix)
					b.ReportMetric(lag, "lag-p95-ms-"+suffix)
					b.ReportMetric(float64(x.OrderReruns), "reruns-"+suffix)
					b.ReportMetric(1e4*float64(x.OrderReleased)/records, "released/10k-"+suffix)
				}
				b.Logf("%s: capture span %.2fs; a %.2fs (lag p95 %.0f ms), b %.2fs; divergent %d, order-ambiguous %d of %d",
					w.Name(), span, rep.Targets[0].Elapsed, lagOf(rep.Targets[0].Lag), rep.Targets[1].Elapsed, rep.Divergences[0].Total(),
					rep.Divergences[0].Ambiguous, rep.Divergences[0].Compared)
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
