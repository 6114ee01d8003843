package replay

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/tandemdb/tandem/sandbox/sandboxtest"
	"github.com/tandemdb/tandem/store"
)

// An application that connects per request makes a session per
// statement. Each closed session's worker hands its lists to its runner
// and is forgotten (its statistics are in its target's shards): the
// runner ends with no worker left, and every count adds up, in the
// totals and the intervals alike. Before, every worker stayed to the end
// of the run (200 here; millions for a day of such an application), with
// its statistics, maps and buffers.
func TestClosedSessionsLeaveNoWorkerBehind(t *testing.T) {
	db, dsn := sandboxtest.Server(t, "innodb").FreshDB(t)
	if _, err := db.Exec("CREATE TABLE t (id INT PRIMARY KEY, v INT)"); err != nil {
		t.Fatal(err)
	}
	at := time.Now().Truncate(time.Millisecond)
	ms := func(n int) time.Time { return at.Add(time.Duration(n) * time.Millisecond) }
	ok := store.Response{Kind: store.RespOK}
	const sessions = 200
	var recs []store.Record
	for s := range sessions {
		id := uint64(s + 1)
		recs = append(recs,
			store.Record{Session: id, Start: ms(3 * s), Duration: time.Microsecond, Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
			store.Record{Session: id, Start: ms(3*s + 1), Duration: time.Microsecond, Kind: store.KindQuery, Schema: "shop",
				SQL: fmt.Sprintf("INSERT INTO t VALUES (%d, 1)", id), Resp: store.Response{Kind: store.RespOK, AffectedRows: 1}},
			store.Record{Session: id, Start: ms(3*s + 2), Kind: store.KindQuit},
		)
	}
	capDir := writeRecords(t, recs)
	var left, records []int64
	runnersDone = func(rs []*runner) {
		for _, rn := range rs {
			rn.mu.Lock()
			left = append(left, int64(len(rn.mu.workers)))
			rn.mu.Unlock()
			var tt totals
			var n int64
			rn.mergeInto(&tt, &n)
			records = append(records, n)
		}
	}
	t.Cleanup(func() { runnersDone = nil })
	rep := replayRun(t, capDir, nil, tgt(t, "a", dsn, ""))
	ra := rep.Targets[0]
	if len(left) != 1 || left[0] != 0 || records[0] != 3*sessions {
		t.Fatalf("workers left %v, records counted %v; want 0 and %d", left, records, 3*sessions)
	}
	if ra.Writes != sessions || ra.Errors != 0 || ra.Connections != sessions {
		t.Errorf("writes %d errors %d connections %d; want %d, 0, %d", ra.Writes, ra.Errors, ra.Connections, sessions, sessions)
	}
	var inIntervals float64 // writes per second times each interval's length
	for _, iv := range ra.Intervals {
		inIntervals += iv.Writes * iv.Length
	}
	if math.Round(inIntervals) != sessions {
		t.Errorf("intervals hold %.2f writes, want %d", inIntervals, sessions)
	}
	var rows int
	if err := db.QueryRow("SELECT COUNT(*) FROM t").Scan(&rows); err != nil || rows != sessions {
		t.Errorf("%d rows (%v), want %d", rows, err, sessions)
	}
}
