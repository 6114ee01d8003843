package replay

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/tandemdb/tandem/compare"
	"github.com/tandemdb/tandem/sandbox/sandboxtest"
	"github.com/tandemdb/tandem/store"
)

// When replay cannot keep the capture's order — the longest wait
// (--order-timeout) runs out, or two records wait for each other — a
// record goes ahead. Replayed onto two identical InnoDB copies, nothing
// the engines do differs, so every difference is replay's: none may be
// reported as a divergence. The ones replay causes are of three kinds,
// each labelled here: what the record that went ahead saw, what the
// records it overtook (and the rest of their transactions, whose snapshot
// came later) saw, and — when a change overtook a conflicting change —
// the data itself, which differs from then on, and at the end.
//
// Old code (before the overtaken flags and store.Reorder) reported 96
// row-content divergences in the session mode with a 1 ms order timeout,
// and 436 with --concurrency 8, end states differing without a cause.
func TestTruthWhenReplayCannotKeepOrder(t *testing.T) {
	// Parallel: its databases are its own, and what it checks are labels,
	// not bounds tuned to an idle CPU (as TestTruthIdenticalInnoDBCopies'
	// are: that one runs alone).
	t.Parallel()
	srv := sandboxtest.Server(t, "innodb")
	dba, a := srv.FreshDB(t)
	dbb, b := srv.FreshDB(t)
	ta, tb := tgt(t, "a", a, ""), tgt(t, "b", b, "")
	capDir := truthCapture(t, 4)
	for _, mode := range []struct {
		name string
		mod  func(*Config)
		// forced: the mode must release records (else it proves nothing).
		forced bool
	}{
		{"sessions, order-timeout 1ms", func(c *Config) { c.Speed, c.OrderTimeout = 0, time.Millisecond }, true},
		// The board (regrouped statements' order) gives up at once: the
		// gate still orders whole transactions.
		{"concurrency=8, board 1us", func(c *Config) { c.Speed, c.Concurrency, c.boardWait = 0, 8, time.Microsecond }, false},
		{"concurrency=8, order-timeout 1ms", func(c *Config) { c.Speed, c.Concurrency, c.OrderTimeout = 0, 8, time.Millisecond }, true},
	} {
		t.Run(mode.name, func(t *testing.T) {
			prepareTruth(t, ta, tb)
			rep := replayRun(t, capDir, mode.mod, ta, tb)
			d := rep.Divergences[0]
			ra, rb := rep.Targets[0], rep.Targets[1]
			t.Logf("compared %d: divergent %d, ambiguous %d %v; released %d/%d, reordered %d/%d, reruns %d/%d", d.Compared, d.Total(), d.Ambiguous,
				d.AmbiguousBy, ra.OrderReleased, rb.OrderReleased, ra.Reordered, rb.Reordered, ra.OrderReruns, rb.OrderReruns)
			if d.Total() != 0 {
				for _, s := range d.Samples {
					if !s.Ambiguous {
						t.Logf("divergent [%s] seq %d session %d: %s (%s vs %s)", s.Class, s.Seq, s.Session, s.Statement, s.Baseline, s.Target)
					}
				}
				t.Errorf("%d divergences %v on identical copies: replay's own reordering reported as the engine's", d.Total(), d.ByClass)
			}
			if d.Compared == 0 || d.Missing != 0 || d.Extra != 0 {
				t.Errorf("compared %d, missing %d, extra %d: want every record on both sides", d.Compared, d.Missing, d.Extra)
			}
			if mode.forced && ra.OrderReleased+rb.OrderReleased == 0 {
				t.Fatalf("no record was released: the mode does not test what it is for")
			}
			sentAhead := func(rs []store.Reorder) (n int64) {
				for _, r := range rs {
					if r.Kind == "" {
						n++
					}
				}
				return n
			}
			if sentAhead(ra.Reorders) != ra.Reordered || sentAhead(rb.Reorders) != rb.Reordered {
				t.Errorf("changes sent ahead listed %d/%d, counted %d/%d", sentAhead(ra.Reorders), sentAhead(rb.Reorders), ra.Reordered, rb.Reordered)
			}
			if ra.Reordered+rb.Reordered > 0 && d.AmbiguousBy[compare.ReasonReplayOrder] == 0 {
				t.Errorf("%d changes out of order, and no difference labelled %s", ra.Reordered+rb.Reordered, compare.ReasonReplayOrder)
			}
			same := checksums(t, dba) == checksums(t, dbb)
			if same != rb.EndState.Same {
				t.Errorf("CHECKSUM TABLE equal %v, report's end state same %v", same, rb.EndState.Same)
			}
			for _, ts := range rb.EndState.Tables {
				if ts.Differs && !strings.Contains(ts.Because, "ahead of a conflicting change") && !strings.Contains(ts.Because, "went on at the rollback, ahead of its writes") {
					t.Errorf("end state: %s differs and nothing explains it (%q)", ts.Table, ts.Because)
				}
			}
			if !same && len(ra.Reorders)+len(rb.Reorders) == 0 {
				t.Errorf("end states differ, no change went out of order")
			}
			var text bytes.Buffer
			if err := rep.WriteText(&text); err != nil {
				t.Fatal(err)
			}
			if has := strings.Contains(text.String(), "changes out of order"); has != (ra.Reordered+rb.Reordered > 0) {
				t.Errorf("text report names changes out of order: %v, counted %d/%d\n%s", has, ra.Reordered, rb.Reordered, text.String())
			}
		})
	}
}
