package replay

import (
	"context"
	"database/sql"
	"path/filepath"
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
	// Killed once it has run 300 executes, wherever a loaded machine has
	// the replay then (a fixed 0.8 s once came before most sessions had
	// prepared their statements).
	// The watcher ends with the test (it must not signal a pid the
	// sandbox's cleanup has stopped and the system may have reused).
	wctx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	t.Cleanup(func() { stopWatch(); <-watched })
	go func() {
		defer close(watched)
		watch, err := sql.Open("mysql", victims[0].DSN(""))
		if err != nil {
			return
		}
		defer watch.Close()
		for end := time.Now().Add(20 * time.Second); time.Now().Before(end) && wctx.Err() == nil; time.Sleep(5 * time.Millisecond) {
			var name string
			var n int
			if err := watch.QueryRowContext(wctx, "SHOW GLOBAL STATUS LIKE 'Com_stmt_execute'").Scan(&name, &n); err == nil && n >= 300 {
				break
			}
		}
		if wctx.Err() == nil {
			syscall.Kill(victims[0].PID, syscall.SIGKILL)
		}
	}()
	start := time.Now()
	// Refused from the kill on: failed about a second later, well before
	// the capture's 3 s end.
	runDir := filepath.Join(t.TempDir(), "run")
	rep := replayRun(t, capDir, func(c *Config) { c.Speed, c.TargetTimeout, c.RunDir = 1, time.Second, runDir }, ta, tb, tk)
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
	// Read record by record from the run, and the report's counters said
	// the same: a statement answered is a read or other, one unanswered is
	// an error (as is a connect or prepare that failed: errors count every
	// failed run of a command), one skipped is under its reason.
	dk := rep.Divergences[1]
	lost := rk.SkippedBy[store.SkipReasonText(store.SkipTrxFailed)]
	after := rk.SkippedBy[store.SkipReasonText(store.SkipTargetFailed)]
	per := outcomesByKind(t, capDir, runDir, 2)
	stmts := per["statement answered"] + per["statement unanswered"] + per["statement skipped: "+store.SkipReasonText(store.SkipTrxFailed)] + per["statement skipped: "+store.SkipReasonText(store.SkipTargetFailed)]
	if stmts != ra.Reads+ra.Other || per["statement answered"] != rk.Reads+rk.Other || per["statement unanswered"]+per["command unanswered"] != rk.Errors ||
		per["statement skipped: "+store.SkipReasonText(store.SkipTrxFailed)] != lost || per["statement skipped: "+store.SkipReasonText(store.SkipTargetFailed)] != after ||
		rk.FailedTransactions == 0 || lost == 0 || after == 0 {
		t.Errorf("killed: r/o %d/%d answered, %d unanswered, %d skipped with %d transactions whose connection was lost, %d after it failed; its %d statements (a's %d) record by record: %v",
			rk.Reads, rk.Other, rk.Errors, lost, rk.FailedTransactions, after, stmts, ra.Reads+ra.Other, per)
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

// outcomesByKind counts target k's outcomes in runDir by what their
// records are (a statement: query or execute; else a command) and what
// became of them.
func outcomesByKind(t *testing.T, capDir, runDir string, k int) map[string]int64 {
	t.Helper()
	r, err := store.Open(capDir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	stmt := map[uint64]bool{}
	for rec, err := range r.Records() {
		if err != nil {
			t.Fatal(err)
		}
		stmt[rec.Seq] = rec.Kind == store.KindQuery || rec.Kind == store.KindExecute
	}
	rr, err := store.OpenRun(runDir)
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Close()
	out := map[string]int64{}
	for o, err := range rr.Outcomes(0, k) {
		if err != nil {
			t.Fatal(err)
		}
		what := "command"
		if seq, _ := store.SplitOutcomeSeq(o.Seq); stmt[seq] {
			what = "statement"
		}
		switch {
		case o.Flags&store.OutcomeSkipped != 0:
			what += " skipped: " + store.SkipReasonText(o.SkipReason)
		case o.Flags&store.OutcomeClientError != 0:
			what += " unanswered"
		default:
			what += " answered"
		}
		out[what]++
	}
	return out
}
