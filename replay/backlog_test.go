package replay

import (
	"fmt"
	"testing"
	"time"

	"github.com/tandemdb/tandem/sandbox/sandboxtest"
	"github.com/tandemdb/tandem/store"
)

// With --order none each session runs as fast as the target lets it,
// and the reader hands each session its records. Session B's UPDATE
// waits on the server for the row lock of A's open transaction, and B
// has many records after it before A's COMMIT comes in the capture.
// Before, each session's queue held 1,024 records and the reader waited
// for B's to have room: A's COMMIT was never read, and B's UPDATE failed
// at the target's lock wait timeout (1205), an error production never
// had. Now the reader waits only for the backlog of all sessions, so A's
// COMMIT goes, and B's UPDATE runs once A has committed.
func TestReaderNeverWaitsForOneStuckSession(t *testing.T) {
	db, dsn := sandboxtest.Server(t, "innodb").FreshDB(t)
	if _, err := db.Exec("CREATE TABLE t (id INT PRIMARY KEY, v INT)"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("INSERT INTO t VALUES (1, 0)"); err != nil {
		t.Fatal(err)
	}
	at := time.Now().Truncate(time.Millisecond)
	us := func(n int) time.Time { return at.Add(time.Duration(n) * time.Microsecond) }
	ok := store.Response{Kind: store.RespOK}
	one := store.Response{Kind: store.RespOK, AffectedRows: 1}
	recs := []store.Record{
		{Session: 1, Start: us(0), Duration: time.Microsecond, Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
		{Session: 2, Start: us(1), Duration: time.Microsecond, Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
		{Session: 1, Start: us(2), Duration: time.Microsecond, Kind: store.KindQuery, Schema: "shop", SQL: "BEGIN", Resp: ok},
		{Session: 1, Start: us(3), Duration: time.Microsecond, Kind: store.KindQuery, Schema: "shop", SQL: "UPDATE t SET v = v + 1 WHERE id = 1", Resp: one},
		{Session: 2, Start: us(4), Duration: time.Microsecond, Kind: store.KindQuery, Schema: "shop", SQL: "UPDATE t SET v = v + 10 WHERE id = 1", Resp: one},
	}
	const after = 1100 // more than a session's queue held before
	for i := range after {
		recs = append(recs, store.Record{Session: 2, Start: us(10 + i), Duration: time.Microsecond, Kind: store.KindQuery, Schema: "shop",
			SQL: "SELECT v FROM t WHERE id = 2", Resp: store.Response{Kind: store.RespResultSet}})
	}
	recs = append(recs,
		store.Record{Session: 1, Start: us(2000), Duration: time.Microsecond, Kind: store.KindQuery, Schema: "shop", SQL: "COMMIT", Resp: ok},
		store.Record{Session: 1, Start: us(2001), Kind: store.KindQuit},
		store.Record{Session: 2, Start: us(2002), Kind: store.KindQuit},
	)
	capDir := writeRecords(t, recs)
	rep := replayRun(t, capDir, func(c *Config) { c.Order = OrderNone }, tgt(t, "a", dsn+"?innodb_lock_wait_timeout=2", ""))
	ra := rep.Targets[0]
	var v int
	if err := db.QueryRow("SELECT v FROM t WHERE id = 1").Scan(&v); err != nil {
		t.Fatal(err)
	}
	if ra.Errors != 0 || v != 11 {
		t.Fatalf("%d errors %v, v = %d; want no error and both UPDATEs (v = 11)", ra.Errors, ra.ErrorCodes, v)
	}
	if got := ra.Reads + ra.Writes + ra.Other; got != after+4 {
		t.Errorf("%d statements replayed, want %d", got, after+4)
	}
}

// The reader's backlog grows with the sessions open, 64 records each,
// between 4,096 and 16,384: a 64-session replay held some 12,000 records
// read ahead under the fixed 16,384 once it had run for a few seconds.
func TestBacklogGrowsWithTheSessions(t *testing.T) {
	for _, c := range []struct {
		sessions int
		want     int64
	}{{0, 4096}, {1, 4096}, {64, 4096}, {65, 4160}, {100, 6400}, {256, 16384}, {1024, 16384}, {100000, 16384}} {
		if got := backlogFor(c.sessions); got != c.want {
			t.Errorf("backlogFor(%d) = %d, want %d", c.sessions, got, c.want)
		}
	}
}

// The reader waits once the backlog passes its limit, and goes on when
// the workers have brought it down to 7/8 of it, not before.
func TestBacklogWaitsForRoomBelowItsLimit(t *testing.T) {
	var b backlog
	b.setLimit(16)
	for range 16 {
		b.add() // room for each: does not wait
	}
	added := make(chan struct{})
	go func() { b.add(); close(added) }() // the 17th waits
	for !b.waiting.Load() {
		time.Sleep(time.Millisecond)
	}
	for i := 17; i > 15; i-- { // 17 → 15: still above 14 (7/8 of 16)
		b.done()
		select {
		case <-added:
			t.Fatalf("the reader went on with %d records in the backlog, above 14", i-1)
		default:
		}
	}
	b.done() // 14
	<-added
	if n := b.n.Load(); n != 14 {
		t.Errorf("backlog holds %d records, want 14", n)
	}
}

// A job queue emptied after a deep moment lets its room go, so that a
// replay's sessions do not each keep the room of their deepest moment; a
// shallow one keeps it, for the next records.
func TestFifoLetsGoOfTheRoomOfADeepMoment(t *testing.T) {
	var q fifo[job]
	for range 1000 {
		q.items = append(q.items, job{loop: 1})
	}
	for range 1000 {
		q.pop()
	}
	if c := cap(q.items); c > fifoKeep || q.len() != 0 {
		t.Errorf("emptied after 1,000 jobs: room for %d, %d left; want at most %d and 0", c, q.len(), fifoKeep)
	}
	for range 10 {
		q.items = append(q.items, job{loop: 2})
	}
	c := cap(q.items)
	for range 10 {
		if j := q.pop(); j.loop != 2 {
			t.Fatalf("popped loop %d, want 2", j.loop)
		}
	}
	if cap(q.items) != c || c > fifoKeep {
		t.Errorf("emptied after 10 jobs: room for %d (was %d), want it kept and at most %d", cap(q.items), c, fifoKeep)
	}
}

// A queue that never empties keeps room for what it holds, not for the
// hundreds of items that went through it: each session of a replay has
// one, and busy ones rarely empty.
func TestFifoRoomFollowsItsDepth(t *testing.T) {
	for _, depth := range []int{3, 40, 200, 1000} {
		var q fifo[job]
		next, want := 0, 0
		most := 0
		for range 20000 {
			for q.len() < depth {
				q.items = append(q.items, job{loop: next})
				next++
			}
			most = max(most, cap(q.items))
			if j := q.pop(); j.loop != want {
				t.Fatalf("depth %d: popped %d, want %d", depth, j.loop, want)
			}
			want++
		}
		if limit := max(4*depth, fifoKeep); most > limit {
			t.Errorf("depth %d: room for %d items at most, want at most %d", depth, most, limit)
		}
		// Then shallower: the room shrinks with it.
		for range 20000 {
			for q.len() < 2 {
				q.items = append(q.items, job{loop: next})
				next++
			}
			if j := q.pop(); j.loop != want {
				t.Fatalf("depth %d then 2: popped %d, want %d", depth, j.loop, want)
			}
			want++
		}
		if c := cap(q.items); c > fifoKeep {
			t.Errorf("depth %d then 2: room for %d, want at most %d", depth, c, fifoKeep)
		}
	}
}

// A reader that waits for room while no record at all is done makes room:
// every session may be waiting for a lock whose holder's next record is
// not read yet, and nothing would end before the server's lock wait
// timeout. Once the backlog has drained below its limit, the room goes
// back to it. With records being done, it only waits.
func TestBacklogMakesRoomWhenNothingIsDone(t *testing.T) {
	defer func(d time.Duration) { backlogStall = d }(backlogStall)
	backlogStall = 20 * time.Millisecond
	var b backlog
	var told []string // what grew was told (by the reader: add's goroutine)
	b.grew = func(to int64, idle time.Duration) { told = append(told, fmt.Sprintf("%d after %s", to, idle)) }
	b.setLimit(16)
	for range 17 {
		b.add() // the 17th waits, nothing is done: the room doubles
	}
	if b.stalls.Load() != 1 || b.max() != 32 {
		t.Fatalf("after a stall: grew %d times, room for %d; want 1 and 32", b.stalls.Load(), b.max())
	}
	if want := "[32 after 20ms]"; fmt.Sprint(told) != want {
		t.Errorf("told %v, want %s", told, want)
	}
	for range 15 {
		b.add() // 32 in all: room for each
	}
	for range 17 {
		b.done() // 15 left: below the limit of 16
	}
	if b.max() != 16 {
		t.Errorf("drained to %d: room for %d, want 16 again", b.n.Load(), b.max())
	}
	// Records being done, slowly: the reader waits for room, and the room
	// does not grow.
	for b.n.Load() < 16 {
		b.add()
	}
	backlogStall = time.Second // far longer than between two records done
	added := make(chan struct{})
	go func() { b.add(); close(added) }()
	for i := 0; ; i++ {
		select {
		case <-added:
			if b.stalls.Load() != 1 || b.max() != 16 || len(told) != 1 {
				t.Errorf("with records done: grew %d times (told %v), room for %d; want 1 and 16", b.stalls.Load(), told, b.max())
			}
			return
		case <-time.After(10 * time.Millisecond):
			b.done()
		}
	}
}
