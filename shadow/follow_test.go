package shadow

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tandemdb/tandem/replay"
	"github.com/tandemdb/tandem/store"
	"github.com/tandemdb/tandem/targets"
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

// A lagging shadow runs what assigns user variables, as it runs SETs: a
// SELECT … INTO @pid left out kept the variable's old value on the
// shadow, and the INSERT that read it after the lag wrote that value (a
// live divergence the scan, which took the variable as assigned, called
// the engine's).
func TestLaggingShadowRunsWhatAssignsVariables(t *testing.T) {
	f := replay.NewFeed()
	l := newFollower("s", follow{})
	var got []string
	for i, q := range []string{"SELECT id INTO @pid FROM parents WHERE k = 1", "SELECT @n := COUNT(*) FROM parents", "UPDATE t1 SET v = 1", "SELECT v FROM t1"} {
		l.lagging.Store(true)
		rec := &store.Record{Seq: uint64(i + 1), Session: 1, Kind: store.KindQuery, SQL: q, Schema: "s"}
		f.Index(rec)
		mark := "run "
		if l.skip(f, rec) {
			mark = "skip"
		}
		got = append(got, mark+" "+q)
	}
	want := []string{"run  SELECT id INTO @pid FROM parents WHERE k = 1", "run  SELECT @n := COUNT(*) FROM parents", "skip UPDATE t1 SET v = 1", "skip SELECT v FROM t1"}
	if g, w := strings.Join(got, "\n"), strings.Join(want, "\n"); g != w {
		t.Errorf("got\n%s\nwant\n%s", g, w)
	}
}

// A lagging shadow that leaves out an execute which opened a cursor
// leaves out its fetches too: the target has no cursor to fetch from, and
// the error (or another cursor's rows) was counted as a divergence. An
// execute that runs again makes its fetches run.
func TestLaggingShadowLeavesOutTheFetchesOfAnExecuteItLeftOut(t *testing.T) {
	f := replay.NewFeed()
	l := newFollower("s", follow{})
	var seq uint64
	var got []string
	feed := func(lagging bool, kind store.Kind) {
		l.lagging.Store(lagging)
		seq++
		rec := &store.Record{Seq: seq, Session: 1, Kind: kind, StmtID: 1, Schema: "s"}
		if kind == store.KindPrepare {
			rec.SQL = "SELECT v FROM t WHERE id > ?"
		}
		f.Index(rec)
		mark := "run "
		if l.skip(f, rec) {
			mark = "skip"
		}
		got = append(got, mark+" "+kind.String())
	}
	feed(false, store.KindPrepare)
	feed(true, store.KindExecute) // a read on its own while lagging: left out
	feed(false, store.KindFetch)  // the lag ended: its fetch still has no cursor
	feed(false, store.KindFetch)
	feed(false, store.KindExecute)
	feed(false, store.KindFetch)
	feed(true, store.KindExecute) // left out again, then closed: nothing of it is kept
	feed(false, store.KindClose)
	want := []string{"run  " + store.KindPrepare.String(), "skip " + store.KindExecute.String(), "skip " + store.KindFetch.String(),
		"skip " + store.KindFetch.String(), "run  " + store.KindExecute.String(), "run  " + store.KindFetch.String(),
		"skip " + store.KindExecute.String(), "run  " + store.KindClose.String()}
	if g, w := strings.Join(got, "\n"), strings.Join(want, "\n"); g != w {
		t.Errorf("got\n%s\nwant\n%s", g, w)
	}
	if l.skipped.Load() != 4 || len(l.cursorLeftOut[1]) != 0 {
		t.Errorf("skipped %d, statements kept %v; want 4 and none", l.skipped.Load(), l.cursorLeftOut)
	}
}

// A shadow holds a statement's long data until its execute comes, and
// leaves it out with an execute it leaves out. It used to send the long
// data at once: the execute left out, the data stayed on the target's
// statement and went with its next execute, whose parameter then held
// both. Held long data of other statements waits for its own execute; a
// reset or close, or the session's end, gets it sent as captured.
func TestLaggingShadowLeavesOutTheLongDataOfAnExecuteItLeftOut(t *testing.T) {
	f := replay.NewFeed()
	l := newFollower("s", follow{})
	var seq uint64
	var got []string
	lost := false
	feed := func(lagging bool, kind store.Kind, stmt uint32) {
		l.lagging.Store(lagging)
		seq++
		rec := &store.Record{Seq: seq, Session: 1, Kind: kind, StmtID: stmt, Schema: "s"}
		if lost {
			rec.Flags |= store.FlagLost
		}
		switch kind {
		case store.KindPrepare:
			rec.SQL = "INSERT INTO t (doc) VALUES (?)"
		case store.KindLongData:
			rec.Data = []byte(fmt.Sprint("chunk ", seq))
		}
		f.Index(rec)
		var sent []string
		for _, r := range l.admit(f, rec) {
			sent = append(sent, fmt.Sprint(r.Seq))
		}
		got = append(got, fmt.Sprintf("%d:[%s]", seq, strings.Join(sent, " ")))
	}
	feed(false, store.KindPrepare, 1)  // 1
	feed(false, store.KindPrepare, 2)  // 2
	feed(true, store.KindLongData, 1)  // 3: held
	feed(true, store.KindLongData, 1)  // 4: held
	feed(true, store.KindLongData, 2)  // 5: held, another statement's
	feed(true, store.KindExecute, 1)   // 6: left out, 3 and 4 with it
	feed(false, store.KindLongData, 1) // 7: held
	feed(false, store.KindExecute, 1)  // 8: runs, with 7 only
	feed(false, store.KindExecute, 2)  // 9: runs, with 5
	feed(false, store.KindLongData, 1) // 10: held
	feed(false, store.KindReset, 1)    // 11: sent with it, as captured
	feed(false, store.KindLongData, 2) // 12: held
	feed(false, store.KindQuit, 0)     // 13: sent before the end
	feed(false, store.KindLongData, 1) // 14: held
	lost = true
	feed(true, store.KindLongData, 1) // 15: commands lost before it: sent (the transaction moved past them), after 14
	want := "1:[1] 2:[2] 3:[] 4:[] 5:[] 6:[] 7:[] 8:[7 8] 9:[5 9] 10:[] 11:[10 11] 12:[] 13:[12 13] 14:[] 15:[14 15]"
	if g := strings.Join(got, " "); g != want {
		t.Errorf("sent\n got %s\nwant %s", g, want)
	}
	if l.skipped.Load() != 3 || len(l.longData) != 0 {
		t.Errorf("skipped %d, held %v; want 3 and none", l.skipped.Load(), l.longData)
	}
}

// A shadow runs as long as its proxy: it lets go of the capture's commits
// that ended keepCommits before the oldest record it has not finished (or
// the newest it saw), and no sooner. Before, it kept every commit it ever
// saw: 32 bytes per commit and table, 68 KB a second under sysbench
// oltp_write_only at 970 transactions a second.
func TestShadowLetsGoOfCommitsItNoLongerNeeds(t *testing.T) {
	f := replay.NewFeed()
	l := newFollower("s", follow{keepCommits: time.Second})
	at := func(sec int) time.Time { return time.Unix(1_800_000_000+int64(sec), 0) }
	var recs []*store.Record
	for i := range 10 { // one write a second, each its own commit on two tables
		rec := &store.Record{Seq: uint64(i + 1), Session: uint64(i%3 + 1), Kind: store.KindQuery, Schema: "s",
			SQL: "UPDATE t1 JOIN t2 ON t1.id = t2.id SET t1.v = 1, t2.v = 2", Start: at(i), Duration: time.Millisecond,
			Resp: store.Response{Kind: store.RespOK, AffectedRows: 2}}
		f.Index(rec)
		l.dispatched(rec)
		recs = append(recs, rec)
	}
	for _, r := range recs {
		if r.Seq != 4 {
			l.Finished(r.Seq) // all but the write at 3 s
		}
	}
	// The oldest unfinished began at 3 s: the commits that ended before 2 s go.
	if n := l.forgetCommits(f, recs[9]); n != 4 {
		t.Errorf("with the write at 3 s unfinished: let %d entries go, want 4 (2 commits on 2 tables)", n)
	}
	l.Finished(4)
	// Now the newest, at 9 s: those that ended before 8 s go too.
	if n := l.forgetCommits(f, recs[9]); n != 12 {
		t.Errorf("with all finished: let %d entries go, want 12", n)
	}
	if n := l.forgetCommits(f, recs[9]); n != 0 {
		t.Errorf("again: let %d entries go, want 0", n)
	}
}

// A shadow whose run ends in an error before it replays anything shows
// down with the reason at once, and says so in the log. It showed "up",
// with nothing compared and the lag growing, until the capture stopped
// and the error came out (seen with a run directory left from an earlier
// run; here its server does not answer at the start).
func TestShadowThatStoppedShowsDown(t *testing.T) {
	dir := t.TempDir()
	w, err := store.Create(filepath.Join(dir, "capture"), store.WriterOptions{Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var logged strings.Builder
	cfg := replay.Config{Capture: filepath.Join(dir, "capture"), RunDir: filepath.Join(dir, "run"), RunID: "shadow-s",
		Targets: []targets.Target{{Name: "s", DSN: "root@tcp(127.0.0.1:1)/db"}},
		Logger:  slog.New(slog.NewTextHandler(&logged, nil))}
	fl := startFollower(context.Background(), cfg, follow{reader: w.Live()})
	select {
	case <-fl.done:
	case <-time.After(time.Minute):
		t.Fatal("the shadow did not stop")
	}
	st := fl.stats()
	if st.Up || !strings.HasPrefix(st.Down, "stopped: ") || !strings.Contains(st.Down, "connection refused") {
		t.Errorf("stats: up %v, down %q; want down, stopped: connection refused", st.Up, st.Down)
	}
	if !strings.Contains(logged.String(), "shadow stopped") {
		t.Errorf("log: %q; want the stop said", logged.String())
	}
}
