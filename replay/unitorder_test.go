package replay

import (
	"testing"
	"time"
)

// Regrouped (--concurrency), a change on its own that waited in the
// capture for another transaction's lock runs after that transaction, as
// it did there.
//
// Session 1 updates row 1 (v = 1 → 2) and row 2 in a transaction whose
// COMMIT starts at 11 ms; session 2's UPDATE of row 1 (v × 10) began at
// 5 ms, waited for session 1's lock and ended at 12 ms (v = 20). Before,
// the UPDATE went to both targets first: units went out in the order of
// their COMMITs' starts, and a statement on its own counted as committing
// as it started (5 ms, ahead of session 1's 11), so it waited at the gate
// for nothing. Row 1 ended at 11 on both targets, and session 4's read
// differed from the capture's, unlabelled, on both.
func TestRegroupedChangeWaitsForTheLockItWaitedFor(t *testing.T) {
	capDir := waitedForCapture(t, "")
	dba, dbb, a, b := twoCopiesOfT(t)
	rep := regroupedInOrder(t, capDir, a, b, 6)
	for _, x := range rep.Targets {
		if x.OrderReleased != 0 || x.Errors != 0 || x.OrderReruns != 0 {
			t.Errorf("%s: %d released, %d reruns, %d errors; want 0", x.Name, x.OrderReleased, x.OrderReruns, x.Errors)
		}
	}
	if va, vb := valueOf(t, dba, 1), valueOf(t, dbb, 1); va != 20 || vb != 20 {
		t.Errorf("row 1 holds %d on a and %d on b; want 20 on both (session 2's UPDATE after session 1's)", va, vb)
	}
}

// regroupedInOrder replays capDir onto the targets at DSNs a and b,
// --concurrency 4, --order capture, and checks that the capture's
// compared statements (want of them) all agree with the capture.
func regroupedInOrder(t *testing.T, capDir, a, b string, want int64) *testReport {
	t.Helper()
	rep := replayRun(t, capDir, func(cfg *Config) {
		cfg.Order = OrderCapture
		cfg.OrderTimeout = 30 * time.Second
		cfg.Concurrency = 4
	}, tgt(t, "a", a, ""), tgt(t, "b", b, ""))
	for i, x := range rep.Targets {
		if c := rep.VsCapture[i]; c.Total() != 0 || c.Compared != want {
			t.Errorf("%s vs capture: %d compared, divergent %v, counted apart %v; want the %d statements compared, 0 divergent", x.Name, c.Compared, c.ByClass, c.AmbiguousBy, want)
		}
	}
	return rep
}
