package replay

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tandemdb/tandem/compare"
	"github.com/tandemdb/tandem/store"
)

// A transaction that yields (rolled back so that a statement the gate
// found stuck behind its locks goes first, and run again) lets go of its
// row locks: a change of another session that waited on the server for
// one of them goes on at once, ahead of the transaction's writes that
// came before it in the capture. The data then differs from the
// capture's by replay's doing, and a later difference on those tables
// must be counted apart (replay-order), never as the engine's.
//
// Session 1 updates row 1 (v = 1 → 2: the UPDATE names no single row,
// so the gate cannot rule out that it blocks session 3's), and its next
// statement waits for session 3's UPDATE of row 2, slow on the target
// (0.3 s; 6 ms in the capture): the gate takes it to be stuck behind
// session 1's lock, and session 1 yields. Session 2's UPDATE of row 1
// (v × 10), which in the capture waited for session 1's commit (v = 20),
// is sent once session 1's UPDATE is, and waits for its lock; at the
// rollback it goes first (v = 10), and session 1's rerun makes v = 11.
// Session 4 then reads row 1 where the capture found v = 20. Before, that
// read was counted as a real divergence from the capture: nothing said
// replay had changed the order of the two writes.
//
// The same with --concurrency: the unit yields on the board. There session
// 2's UPDATE is in a transaction of its own (BEGIN … COMMIT): on its own,
// it would wait at the gate for session 1's whole transaction, as a change
// on its own that ended after a COMMIT began does
// (TestRegroupedChangeWaitsForTheLockItWaitedFor). Its UPDATE overtakes
// session 1's rerun at the rollback all the same (v = 10); but its COMMIT
// waits at the gate for session 1's, whose rerun waits for its lock: it
// yields in turn (listed too), and session 1 and then session 2 run again
// in the capture's order. Row 1 ends at 20, as captured, and session 4's
// read agrees with the capture.
//
// Which of these happens depends on timing: under load, session 2's
// UPDATE may not yet wait for the lock when session 1 yields, and then
// goes after its rerun, as in the capture (v = 20, nothing to count
// apart), or a transaction yields once more. Either is true to what ran
// and is checked as such (no divergence, no error, nothing released, the
// row's value and the count apart agreeing); the run is then taken again,
// up to three times, until it went the way this test is about (CI saw
// one such run in about 60 under load, with the code of long before).
func TestYieldingTransactionLabelsWhatOvertookItsLocks(t *testing.T) {
	t.Run("sessions", func(t *testing.T) {
		yieldUntilOvertaken(t, yieldCase{mod: func(*Config) {}, yielded: []uint64{1}, v: 11, apart: 1})
	})
	t.Run("concurrency", func(t *testing.T) {
		yieldUntilOvertaken(t, yieldCase{mod: func(c *Config) { c.Concurrency = 4 }, trx: true, yielded: []uint64{1, 2}, reruns: 2, v: 20})
	})
}

// yieldUntilOvertaken runs tc until a run goes as tc wants (three
// attempts); every attempt must be true to what ran (yieldOvertaken).
func yieldUntilOvertaken(t *testing.T, tc yieldCase) {
	for attempt := 1; ; attempt++ {
		miss := yieldOvertaken(t, tc)
		if miss == "" || t.Failed() {
			return
		}
		if attempt == 3 {
			t.Fatalf("3 attempts, none timed as this test needs; the last: %s", miss)
		}
		t.Logf("attempt %d timed otherwise (%s): again", attempt, miss)
	}
}

// yieldCase is one run of the yield test and what it must give.
type yieldCase struct {
	mod func(*Config)
	// trx: session 2's UPDATE is in a transaction.
	trx bool
	// yielded: the sessions whose transactions are listed as yielded, on
	// shop.t; reruns: how many records ran again (0: any but none; a
	// session's records run again one by one, each counted).
	yielded []uint64
	reruns  int64
	// v: row 1's value at the end; apart: session 4's read counted apart
	// (replay-order), else it agrees with the capture.
	v, apart int
}

// yieldOvertaken runs tc once. What no timing excuses is an error: a
// divergence, an error, a record released, a row value the count apart
// does not explain, a report that does not name the yield. A run that
// went another true way (see TestYieldingTransactionLabelsWhatOvertookItsLocks)
// is returned as a miss.
func yieldOvertaken(t *testing.T, tc yieldCase) (miss string) {
	trx := tc.trx
	rep, dbs := lockStep(t, func(q func(uint64, float64, string) store.Record, at func(float64) time.Time) []store.Record {
		ok := store.Response{Kind: store.RespOK}
		slow := q(3, 1.5, "UPDATE t SET v = v + 0 * SLEEP(0.3) WHERE id = 2")
		slow.Duration = 6 * time.Millisecond
		waits := q(2, 5, "UPDATE t SET v = v * 10 WHERE id = 1")
		waits.Duration = 7 * time.Millisecond
		recs := []store.Record{
			{Session: 1, Start: at(0), Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
			{Session: 2, Start: at(0.1), Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
			{Session: 3, Start: at(0.2), Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
			{Session: 4, Start: at(0.3), Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
			q(1, 1, "BEGIN"),
			slow,
			q(1, 2, "UPDATE t SET v = v + 1 WHERE id BETWEEN 1 AND 1"),
		}
		if trx {
			recs = append(recs, q(2, 4.5, "BEGIN"))
		}
		recs = append(recs, waits,
			q(1, 10, "SELECT v FROM t WHERE id = 2"),
			q(1, 11, "COMMIT"))
		if trx {
			recs = append(recs, q(2, 12.5, "COMMIT"))
		}
		return append(recs,
			q(4, 20, "SELECT v FROM t WHERE id = 1 AND v = 20"),
			store.Record{Session: 4, Start: at(21), Kind: store.KindQuit},
			store.Record{Session: 3, Start: at(22), Kind: store.KindQuit},
			store.Record{Session: 2, Start: at(23), Kind: store.KindQuit},
			store.Record{Session: 1, Start: at(24), Kind: store.KindQuit},
		)
	}, tc.mod)
	const captured = 20 // row 1 at the capture's end
	var misses []string
	for i, tr := range rep.Targets {
		if tr.OrderReruns == 0 || tr.OrderReleased != 0 || tr.Errors != 0 {
			t.Errorf("%s: %d reruns, %d released, %d errors; want sessions %v to yield, nothing released, no error",
				tr.Name, tr.OrderReruns, tr.OrderReleased, tr.Errors, tc.yielded)
		}
		var yielded []uint64
		for _, r := range tr.Reorders {
			if r.Kind == store.ReorderYielded && slices.Equal(r.Tables, []string{"shop.t"}) {
				yielded = append(yielded, r.Session)
			}
		}
		slices.Sort(yielded)
		if len(yielded) == 0 || len(tr.Reorders) != len(yielded) || tr.Reordered != 0 {
			t.Errorf("%s: reorders %+v, %d changes sent ahead; want sessions listed as yielded on shop.t, nothing sent ahead", tr.Name, tr.Reorders, tr.Reordered)
		}
		c := rep.VsCapture[i]
		v := valueOf(t, dbs[i], 1)
		apart := c.AmbiguousBy[compare.ReasonReplayOrder]
		// Session 4's read differs from the capture exactly when row 1
		// does, and is then counted apart, never as the engine's.
		if c.Total() != 0 || c.Ambiguous != apart || (v == captured) != (apart == 0) || (v != captured && v != tc.v) {
			t.Errorf("%s: row 1 holds %d; vs capture: divergent %v, counted apart %v; want 0 divergent, and 1 counted apart (replay-order) if row 1 is not %d (want %d)",
				tr.Name, v, c.ByClass, c.AmbiguousBy, captured, tc.v)
		}
		switch {
		case v != tc.v || apart != int64(tc.apart):
			misses = append(misses, fmt.Sprintf("%s: row 1 holds %d, %d counted apart, want %d and %d", tr.Name, v, apart, tc.v, tc.apart))
		case !slices.Equal(yielded, tc.yielded) || tc.reruns > 0 && tr.OrderReruns != tc.reruns:
			misses = append(misses, fmt.Sprintf("%s: sessions %v yielded, %d records ran again, want %v and %d", tr.Name, yielded, tr.OrderReruns, tc.yielded, tc.reruns))
		}
	}
	if len(misses) > 0 {
		return strings.Join(misses, "; ")
	}
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "that replay rolled back on a and ran again, to let a statement stuck behind their locks through: "+strconv.Itoa(len(tc.yielded))+"; a change that waited on the server for those locks went on at the rollback, ahead of their writes, so shop.t may differ from then on") {
		t.Errorf("the report does not say which tables the yield left to replay's order:\n%s", text.String())
	}
	return ""
}
