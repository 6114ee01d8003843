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
// errors, and the replay ends on time.
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
	// 4 sessions at 300 read-only transactions/s for 2 s, replayed as captured.
	capDir := synthCapture(t, "oltp_read_only", func(c *synth.Config) {
		c.Threads, c.Events, c.Rate, c.Duration = 4, 0, 300, 2*time.Second
	})
	go func() {
		time.Sleep(800 * time.Millisecond)
		syscall.Kill(victims[0].PID, syscall.SIGKILL)
	}()
	start := time.Now()
	rep := replayRun(t, capDir, func(c *Config) { c.Speed = 1 }, ta, tb, tk)
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
	if rk.Reads+rk.Other+lost != ra.Reads+ra.Other || rk.FailedTransactions == 0 || lost == 0 {
		t.Errorf("killed: r/o %d/%d and %d skipped with %d transactions whose connection was lost, want %d statements in all",
			rk.Reads, rk.Other, lost, rk.FailedTransactions, ra.Reads+ra.Other)
	}
	for code := range rk.FailedByCode {
		if !strings.HasPrefix(code, "2013 ") && !strings.HasPrefix(code, "2003 ") {
			t.Errorf("killed: a transaction failed with %s, want a lost or refused connection", code)
		}
	}
	if rk.Errors == 0 || rk.Errors >= rk.Reads+rk.Other || rk.ConnectFailures == 0 {
		t.Errorf("killed: errors %d of %d statements, connect failures %d", rk.Errors, rk.Reads+rk.Other, rk.ConnectFailures)
	}
	// Sessions connected and prepared before the kill: the divergences are
	// exactly the failed statements.
	if dk.Unavailable != rk.Errors || dk.Total() != 0 || dk.Missing != 0 {
		t.Errorf("killed vs a: %d unanswered (errors %d), divergent %v, missing %d", dk.Unavailable, rk.Errors, dk.ByClass, dk.Missing)
	}
	t.Logf("killed target: %d of %d statements failed, %d failed connects; %d unanswered, divergences %v", rk.Errors, rk.Reads+rk.Other, rk.ConnectFailures, dk.Unavailable, dk.ByClass)
}
