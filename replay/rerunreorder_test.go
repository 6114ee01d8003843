package replay

import (
	"bytes"
	"slices"
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
// The same with --concurrency: the unit yields on the board.
func TestYieldingTransactionLabelsWhatOvertookItsLocks(t *testing.T) {
	for _, mode := range []struct {
		name string
		mod  func(*Config)
	}{{"sessions", func(*Config) {}}, {"concurrency", func(c *Config) { c.Concurrency = 4 }}} {
		t.Run(mode.name, func(t *testing.T) { yieldOvertaken(t, mode.mod) })
	}
}

func yieldOvertaken(t *testing.T, mod func(*Config)) {
	rep, dbs := lockStep(t, func(q func(uint64, float64, string) store.Record, at func(float64) time.Time) []store.Record {
		ok := store.Response{Kind: store.RespOK}
		slow := q(3, 1.5, "UPDATE t SET v = v + 0 * SLEEP(0.3) WHERE id = 2")
		slow.Duration = 6 * time.Millisecond
		waits := q(2, 5, "UPDATE t SET v = v * 10 WHERE id = 1")
		waits.Duration = 7 * time.Millisecond
		return []store.Record{
			{Session: 1, Start: at(0), Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
			{Session: 2, Start: at(0.1), Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
			{Session: 3, Start: at(0.2), Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
			{Session: 4, Start: at(0.3), Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
			q(1, 1, "BEGIN"),
			slow,
			q(1, 2, "UPDATE t SET v = v + 1 WHERE id BETWEEN 1 AND 1"),
			waits,
			q(1, 10, "SELECT v FROM t WHERE id = 2"),
			q(1, 11, "COMMIT"),
			q(4, 20, "SELECT v FROM t WHERE id = 1 AND v = 20"),
			{Session: 4, Start: at(21), Kind: store.KindQuit},
			{Session: 3, Start: at(22), Kind: store.KindQuit},
			{Session: 2, Start: at(23), Kind: store.KindQuit},
			{Session: 1, Start: at(24), Kind: store.KindQuit},
		}
	}, mod)
	for i, tr := range rep.Targets {
		if tr.OrderReruns == 0 || tr.OrderReleased != 0 || tr.Errors != 0 {
			t.Errorf("%s: %d reruns, %d released, %d errors; want session 1's transaction to yield (a rerun), nothing released, no error",
				tr.Name, tr.OrderReruns, tr.OrderReleased, tr.Errors)
		}
		yielded := 0
		for _, r := range tr.Reorders {
			if r.Kind == store.ReorderYielded && r.Session == 1 && slices.Equal(r.Tables, []string{"shop.t"}) {
				yielded++
			}
		}
		if yielded == 0 || tr.Reordered != 0 {
			t.Errorf("%s: reorders %+v, %d changes sent ahead; want session 1's transaction listed as yielded on shop.t, nothing sent ahead", tr.Name, tr.Reorders, tr.Reordered)
		}
		c := rep.VsCapture[i]
		if c.Total() != 0 || c.Ambiguous != 1 || c.AmbiguousBy[compare.ReasonReplayOrder] != 1 {
			t.Errorf("%s vs capture: divergent %v, counted apart %v; want 0 divergent, session 4's read counted apart (replay-order)", tr.Name, c.ByClass, c.AmbiguousBy)
		}
	}
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "that replay rolled back on a and ran again, to let a statement stuck behind their locks through: 1; a change that waited on the server for those locks went on at the rollback, ahead of their writes, so shop.t may differ from then on") {
		t.Errorf("the report does not say which tables the yield left to replay's order:\n%s", text.String())
	}
	for _, db := range dbs {
		if v := valueOf(t, db, 1); v != 11 {
			t.Errorf("row 1 holds %d, want 11 (session 2's UPDATE went ahead of session 1's rerun)", v)
		}
	}
}
