package replay

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tandemdb/tandem/compare"
	"github.com/tandemdb/tandem/store"
)

// gtidCapture writes a hand-made capture of transactions the server
// committed in GTID order, whose timestamps (as a proxy's clock has them
// when an answer is read late) do not show that order. Row 1: U, a write
// outside a transaction, adds 1 and commits; T then doubles the row. U's
// answer was read late, so on the capture's clock T ended first, inside
// U's interval: the clock says T locked the row first; the GTIDs say U
// committed first: production holds 22.
// Row 2 (an injected difference: b starts at 20, a at 10): P adds 1 and
// commits; Q's UPDATE, matching v = 11, overlapped P's COMMIT; a plain
// read of row 2 overlapped Q's COMMIT.
func gtidCapture(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "cap")
	w, err := store.Create(dir, store.WriterOptions{NoSync: true, Source: "proxy 127.0.0.1:3306"})
	if err != nil {
		t.Fatal(err)
	}
	base := time.Now().Add(-time.Minute)
	ms := func(f float64) time.Time { return base.Add(time.Duration(f * float64(time.Millisecond))) }
	ok := func(n uint64) store.Response { return store.Response{Kind: store.RespOK, AffectedRows: n} }
	type rec struct {
		session  uint64
		from, to float64
		kind     store.Kind
		sql      string
		resp     store.Response
		gtid     string
	}
	recs := []rec{
		{1, 0, 0.1, store.KindConnect, "", store.Response{}, ""}, // T
		{2, 0, 0.1, store.KindConnect, "", store.Response{}, ""}, // U
		{3, 0, 0.1, store.KindConnect, "", store.Response{}, ""}, // P
		{4, 0, 0.1, store.KindConnect, "", store.Response{}, ""}, // Q
		{5, 0, 0.1, store.KindConnect, "", store.Response{}, ""}, // a reader
		// Each its own commit; U's answer was read late.
		{2, 1, 5, store.KindQuery, "UPDATE t SET v = v + 1 WHERE id = 1", ok(1), "0-1-101"},
		{1, 2, 3, store.KindQuery, "UPDATE t SET v = v * 2 WHERE id = 1", ok(1), "0-1-102"},
		{3, 20, 20.1, store.KindQuery, "BEGIN", ok(0), ""},
		{3, 20.2, 20.4, store.KindQuery, "UPDATE t SET v = v + 1 WHERE id = 2", ok(1), ""},
		{4, 20.3, 20.4, store.KindQuery, "BEGIN", ok(0), ""},
		{3, 21, 23, store.KindQuery, "COMMIT", ok(0), "0-1-103"},
		{4, 22, 24, store.KindQuery, "UPDATE t SET v = v * 2 WHERE id = 2 AND v = 11", ok(1), ""},
		{4, 25, 27, store.KindQuery, "COMMIT", ok(0), "0-1-104"},
		{5, 26, 26.5, store.KindQuery, "SELECT v FROM t WHERE id = 2", store.Response{Kind: store.RespResultSet, Columns: 1, Rows: 1}, ""},
	}
	for s := uint64(1); s <= 5; s++ {
		recs = append(recs, rec{s, 40, 40.1, store.KindQuit, "", store.Response{}, ""})
	}
	// Written as a proxy writes them: as they end.
	for i := range recs {
		for j := i + 1; j < len(recs); j++ {
			if recs[j].to < recs[i].to {
				recs[i], recs[j] = recs[j], recs[i]
			}
		}
	}
	for _, r := range recs {
		sr := store.Record{Session: r.session, Start: ms(r.from), Duration: ms(r.to).Sub(ms(r.from)), Kind: r.kind, SQL: r.sql, Resp: r.resp}
		if r.kind == store.KindConnect {
			sr.User, sr.Schema = "app", "shop"
		}
		seq, err := w.Append(&sr)
		if err != nil {
			t.Fatal(err)
		}
		if r.gtid != "" {
			w.AddGTID(seq, r.gtid)
		}
	}
	w.SetEnd(&store.Position{Flavor: "mariadb", ServerID: 1, GTID: "0-1-104", At: ms(41)}, &store.Bypassed{})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func valueOf(t *testing.T, db *sql.DB, id int) int {
	t.Helper()
	var v int
	if err := db.QueryRow("SELECT v FROM t WHERE id = ?", id).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// With --commit-order gtid, replay commits in the server's order where
// the capture's clock cannot tell it: row 1 ends as production's (22) on
// both targets, where ordering commits by the clock left 21 on both —
// two identical targets agreeing on a state production never had, with
// nothing labelled. And a write whose answer that order decides is a
// verdict where it overlapped another session's commit: the UPDATE of
// row 2 that matches on a and not on b is an affected-rows divergence,
// where the clock's rule counted it order-ambiguous; the plain read
// that overlapped a commit stays ambiguous under both rules.
func TestCommitOrderFromGTIDs(t *testing.T) {
	capDir := gtidCapture(t)
	for _, c := range []struct {
		order                 string
		row1                  int
		divergent, ambiguous  int64
		affected, overlapping int64
		note                  string
	}{
		{CommitOrderGTID, 22, 1, 1, 1, 1, "commits kept the server's order (the capture's 4 GTIDs"},
		{CommitOrderTime, 21, 0, 2, 0, 2, "commits were ordered by the capture's clock (--commit-order time), not by the 4 GTIDs"},
	} {
		t.Run(c.order, func(t *testing.T) {
			ta, tb, dba, dbb := twoInnoDB(t)
			exec(t, dba, "CREATE TABLE t (id INT PRIMARY KEY, v INT)", "INSERT INTO t VALUES (1, 10), (2, 10)")
			exec(t, dbb, "CREATE TABLE t (id INT PRIMARY KEY, v INT)", "INSERT INTO t VALUES (1, 10), (2, 20)")
			rep := replayRun(t, capDir, func(cfg *Config) {
				cfg.CommitOrder = c.order
				// Q's UPDATE waits for P's row lock here as in the
				// capture: on a loaded machine (CI runs three packages
				// at once) that wait passed the 50 ms in-flight bound
				// once, and the rerun it set off is no subject of this
				// test.
				cfg.OrderInflight = 5 * time.Second
			}, ta, tb)
			for _, db := range []*sql.DB{dba, dbb} {
				if v := valueOf(t, db, 1); v != c.row1 {
					t.Errorf("row 1 holds %d, want %d", v, c.row1)
				}
			}
			for _, tr := range rep.Targets {
				if tr.OrderReleased != 0 || tr.OrderReruns != 0 {
					t.Errorf("%s: %d released, %d reruns; want none (nothing here needs either)", tr.Target, tr.OrderReleased, tr.OrderReruns)
				}
			}
			d := rep.Divergences[0]
			if d.Total() != c.divergent || d.ByClass[compare.Affected] != c.affected || d.Ambiguous != c.ambiguous || d.AmbiguousBy[compare.ReasonCommitOverlap] != c.overlapping {
				t.Errorf("between a and b: %d divergent (%v), %d ambiguous (%v); want %d divergent (%d affected-rows), %d ambiguous (%d commit-overlap)",
					d.Total(), d.ByClass, d.Ambiguous, d.AmbiguousBy, c.divergent, c.affected, c.ambiguous, c.overlapping)
			}
			if !strings.Contains(strings.Join(rep.Notes, "\n"), c.note) {
				t.Errorf("notes %q lack %q", rep.Notes, c.note)
			}
		})
	}
}

// --apply-bypassed on a capture whose binary-log check found no write
// around the proxy (a short capture) replays it, and says there was
// nothing to apply: it was refused as corrupt ("its summary counts 0
// bypassed transactions stored, and it holds none").
func TestApplyBypassedWithNoneToApply(t *testing.T) {
	capDir := gtidCapture(t)
	ta, tb, dba, dbb := twoInnoDB(t)
	for _, db := range []*sql.DB{dba, dbb} {
		exec(t, db, "CREATE TABLE t (id INT PRIMARY KEY, v INT)", "INSERT INTO t VALUES (1, 10), (2, 10)")
	}
	rep := replayRun(t, capDir, func(cfg *Config) { cfg.ApplyBypassed = true }, ta, tb)
	if !strings.Contains(strings.Join(rep.Notes, "\n"), "--apply-bypassed had nothing to apply") {
		t.Errorf("notes %q lack that nothing bypassed the proxy", rep.Notes)
	}
	for _, db := range []*sql.DB{dba, dbb} {
		if v := valueOf(t, db, 1); v != 22 {
			t.Errorf("row 1 holds %d, want 22 (the capture replayed)", v)
		}
	}
}
