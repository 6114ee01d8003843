package shadow

import (
	"strings"
	"testing"

	"github.com/tandemdb/tandem/replay"
	"github.com/tandemdb/tandem/store"
)

// A shadow that falls behind skips ahead at transaction boundaries, and an
// autocommit=0 session's transactions (JDBC's: no BEGIN, each opened by
// its first statement) stay whole: one open when the lag began runs to its
// end; one that begins while lagging is left out to its end, even when the
// lag ends in its middle. (Before, skip followed only BEGIN: it left out
// such a session's statements one by one and ran the rest of a
// transaction once the lag ended — a transaction cut in two — and it
// left out SET autocommit=1, so the session's work after it was never
// committed.)
func TestLaggingShadowKeepsAutocommitOffTransactionsWhole(t *testing.T) {
	f := replay.NewFeed()
	l := newFollower("s", follow{})
	var seq uint64
	var got []string
	feed := func(lagging bool, stmts ...string) {
		l.lagging.Store(lagging)
		for _, q := range stmts {
			seq++
			rec := &store.Record{Seq: seq, Session: 1, Kind: store.KindQuery, SQL: q, Schema: "s"}
			mark := "run "
			f.Index(rec)
			if l.skip(f, rec) {
				mark = "skip"
			}
			got = append(got, mark+" "+q)
		}
	}
	feed(false, "SET autocommit = 0", "UPDATE t1 SET v = 1")
	feed(true, "UPDATE t2 SET v = 1", "COMMIT")  // open before the lag: runs to its end
	feed(true, "UPDATE t1 SET v = 2")            // begins while lagging: left out
	feed(false, "UPDATE t2 SET v = 2", "COMMIT") // the lag ended: still left out, to its end
	feed(false, "UPDATE t3 SET v = 3", "COMMIT") // after: runs
	feed(true, "SET autocommit = 1")             // session state: always runs
	feed(true, "BEGIN", "UPDATE t1 SET v = 4")   // an explicit one while lagging: left out
	feed(false, "COMMIT", "UPDATE t2 SET v = 5") // its end too; then one on its own runs
	want := []string{
		"run  SET autocommit = 0", "run  UPDATE t1 SET v = 1",
		"run  UPDATE t2 SET v = 1", "run  COMMIT",
		"skip UPDATE t1 SET v = 2",
		"skip UPDATE t2 SET v = 2", "skip COMMIT",
		"run  UPDATE t3 SET v = 3", "run  COMMIT",
		"run  SET autocommit = 1",
		"skip BEGIN", "skip UPDATE t1 SET v = 4",
		"skip COMMIT", "run  UPDATE t2 SET v = 5",
	}
	if g, w := strings.Join(got, "\n"), strings.Join(want, "\n"); g != w {
		t.Errorf("got\n%s\nwant\n%s", g, w)
	}
	if l.skipped.Load() != 6 || l.skipWrites.Load() != 3 {
		t.Errorf("skipped %d, of them writes %d; want 6 and 3", l.skipped.Load(), l.skipWrites.Load())
	}
}
