package replay

import (
	"context"
	"database/sql"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tandemdb/tandem/capture/synth"
	"github.com/tandemdb/tandem/report"
	"github.com/tandemdb/tandem/sandbox"
	"github.com/tandemdb/tandem/store"
)

// A target whose server is killed in the middle of a replay: the other
// targets finish with correct results, the killed one is reported with its
// errors — which are not queries, transactions or latencies (a dead
// target looked the fastest: 498.6 tps against InnoDB's 277.2, p50 0.000
// ms) — and once no connection can be made for --target-timeout it is
// marked failed; the replay ends on time.
func TestTargetKilledMidReplay(t *testing.T) {
	ta, tb, _, _ := twoInnoDB(t)

	// The victim has a server of its own, so killing it harms no other test.
	ctx := context.Background()
	dir := t.TempDir()
	victims, err := sandbox.Up(ctx, sandbox.Config{Dir: dir, Profiles: []string{"innodb"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sandbox.Down(context.Background(), dir, nil, true) })
	root, err := sql.Open("mysql", victims[0].DSN(""))
	if err != nil {
		t.Fatal(err)
	}
	exec(t, root, "CREATE DATABASE victim")
	root.Close()

	tk := tgt(t, "killed", victims[0].DSN("victim"), "")
	prepared(t, 2, 2000, ta, tb, tk)
	// 4 sessions at 300 read-only transactions/s for 3 s, replayed as captured.
	capDir := synthCapture(t, "oltp_read_only", func(c *synth.Config) {
		c.Threads, c.Events, c.Rate, c.Duration = 4, 0, 300, 3*time.Second
	})
	// Killed once it has run 300 executes: every session connected and
	// prepared its statements before (they do so first), so each failure
	// after is a statement's. (A fixed 0.8 s, on a loaded machine, once
	// fell among the prepares: one failed prepare is no statement, and
	// the sum below was off by one.)
	go func() {
		watch, err := sql.Open("mysql", victims[0].DSN(""))
		if err != nil {
			return
		}
		defer watch.Close()
		for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
			var name string
			var n int
			if watch.QueryRow("SHOW GLOBAL STATUS LIKE 'Com_stmt_execute'").Scan(&name, &n); n >= 300 {
				break
			}
		}
		syscall.Kill(victims[0].PID, syscall.SIGKILL)
	}()
	start := time.Now()
	// Refused from the kill on: failed about a second later, well before
	// the capture's 3 s end.
	rep := replayRun(t, capDir, func(c *Config) { c.Speed, c.TargetTimeout = 1, time.Second }, ta, tb, tk)
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("replay took %v after the kill", took)
	}
	ra, rb, rk := rep.Targets[0], rep.Targets[1], rep.Targets[2]
	for _, tr := range []report.Target{ra, rb} {
		if tr.Errors != 0 || tr.ConnectFailures != 0 || tr.Transactions == 0 || tr.Reads != tr.Transactions*14 {
			t.Errorf("%s: errors %d, connect failures %d, transactions %d, reads %d", tr.Name, tr.Errors, tr.ConnectFailures, tr.Transactions, tr.Reads)
		}
	}
	if rb.Transactions != ra.Transactions || rep.Divergences[0].Total() != 0 || rep.Divergences[0].Missing != 0 {
		t.Errorf("b vs a: transactions %d vs %d, divergent %v, missing %d", rb.Transactions, ra.Transactions, rep.Divergences[0].ByClass, rep.Divergences[0].Missing)
	}
	// Every statement was attempted on the killed target, or skipped with
	// the rest of its transaction once that transaction's connection was
	// lost (run on a new connection, it would have committed in part);
	// those attempted after the kill failed (lost connection, then
	// refused), and the comparison counts exactly those as unanswered: no
	// server gave them an outcome, so they are not divergences.
	dk := rep.Divergences[1]
	lost := rk.SkippedBy[store.SkipReasonText(store.SkipTrxFailed)]
	after := rk.SkippedBy[store.SkipReasonText(store.SkipTargetFailed)]
	if rk.Reads+rk.Other+rk.Errors+lost+after != ra.Reads+ra.Other || rk.FailedTransactions == 0 || lost == 0 || after == 0 {
		t.Errorf("killed: r/o %d/%d answered, %d unanswered, %d skipped with %d transactions whose connection was lost, %d after it failed; want %d statements in all",
			rk.Reads, rk.Other, rk.Errors, lost, rk.FailedTransactions, after, ra.Reads+ra.Other)
		t.Logf("killed: skipped by %v; a: skipped by %v", rk.SkippedBy, ra.SkippedBy)
	}
	if !strings.Contains(rk.Failed, "no connection could be made for") || !strings.Contains(rk.Failed, "--target-timeout 1s") {
		t.Errorf("killed: failed %q, want no connection for longer than --target-timeout", rk.Failed)
	}
	if rk.Latency.Count != rk.Reads+rk.Writes+rk.Other || rk.Transactions >= ra.Transactions || rk.TPS >= ra.TPS {
		t.Errorf("killed: latency of %d statements (answered %d), %d transactions (%.1f/s) against a's %d (%.1f/s): what no server answered counted",
			rk.Latency.Count, rk.Reads+rk.Writes+rk.Other, rk.Transactions, rk.TPS, ra.Transactions, ra.TPS)
	}
	for code := range rk.FailedByCode {
		if !strings.HasPrefix(code, "2013 ") && !strings.HasPrefix(code, "2003 ") {
			t.Errorf("killed: a transaction failed with %s, want a lost or refused connection", code)
		}
	}
	if rk.Errors == 0 || rk.ConnectFailures == 0 {
		t.Errorf("killed: errors %d of %d statements, connect failures %d", rk.Errors, rk.Reads+rk.Other, rk.ConnectFailures)
	}
	// Sessions connected and prepared before the kill: the divergences are
	// exactly the failed statements.
	if dk.Unavailable != rk.Errors || dk.Total() != 0 || dk.Missing != 0 {
		t.Errorf("killed vs a: %d unanswered (errors %d), divergent %v, missing %d", dk.Unavailable, rk.Errors, dk.ByClass, dk.Missing)
	}
	t.Logf("killed target: %d of %d statements failed, %d failed connects; %d unanswered, divergences %v", rk.Errors, rk.Reads+rk.Other, rk.ConnectFailures, dk.Unavailable, dk.ByClass)
}
