package replay

import (
	"testing"
	"time"

	"github.com/tandemdb/tandem/sqlinfo"
	"github.com/tandemdb/tandem/store"
)

// Which ends of transactions the order gate sees as changes: those of
// transactions that changed something, and no others.
func TestTrxChangesOrdersEndsOfReadOnlyTransactionsAsReads(t *testing.T) {
	q := func(sql string) (*store.Record, []*sqlinfo.Info) {
		return &store.Record{Kind: store.KindQuery, SQL: sql}, []*sqlinfo.Info{sqlinfo.Analyze(sql)}
	}
	for _, c := range []struct {
		name string
		sqls []string // "" is an execute of an unknown statement; "connect", "lost", "joined": those records
		want []bool
	}{
		{"read-only transaction", []string{"BEGIN", "SELECT c FROM t WHERE id=1", "COMMIT"}, []bool{false, false, false}},
		{"read-write transaction", []string{"BEGIN", "SELECT c FROM t WHERE id=1", "UPDATE t SET c=1 WHERE id=1", "COMMIT", "BEGIN"}, []bool{false, false, true, true, false}},
		{"rollback of a write", []string{"START TRANSACTION", "DELETE FROM t WHERE id=2", "ROLLBACK"}, []bool{false, true, true}},
		{"locking read", []string{"BEGIN", "SELECT c FROM t WHERE id=1 FOR UPDATE", "COMMIT"}, []bool{false, true, true}},
		{"a BEGIN ends a transaction that wrote", []string{"BEGIN", "INSERT INTO t VALUES (1)", "BEGIN", "COMMIT"}, []bool{false, true, true, false}},
		{"autocommit=0, reads only", []string{"SET autocommit=0", "SELECT 1 FROM t", "COMMIT", "SET autocommit=1"}, []bool{false, false, false, false}},
		{"autocommit=0, a write ended by SET autocommit=1", []string{"SET autocommit=0", "UPDATE t SET c=2", "SET autocommit=1"}, []bool{false, true, true}},
		{"DDL commits and changes", []string{"BEGIN", "SELECT 1 FROM t", "CREATE TABLE u (a INT)", "COMMIT"}, []bool{false, false, true, false}},
		{"unknown statement", []string{"BEGIN", "", "COMMIT"}, []bool{false, true, true}},
		{"a reconnect rolls back", []string{"BEGIN", "UPDATE t SET c=3", "connect", "COMMIT"}, []bool{false, true, false, false}},
		{"XA is not read", []string{"XA START 'x'", "XA END 'x'", "XA COMMIT 'x'"}, []bool{true, true, true}},
		{"several statements", []string{"COMMIT; SELECT 1"}, []bool{true}},
		// Commands a packet capture lost end the transaction (replay
		// commits it there): a change when it wrote, and the COMMIT
		// after them ends nothing more.
		{"lost commands after a write", []string{"BEGIN", "UPDATE t SET c=4", "lost", "COMMIT"}, []bool{false, true, true, false}},
		{"lost commands after reads", []string{"BEGIN", "SELECT 1 FROM t", "lost", "COMMIT"}, []bool{false, false, false, false}},
		{"lost before a session joined", []string{"BEGIN", "UPDATE t SET c=5", "joined", "COMMIT"}, []bool{false, true, false, true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var tc trxChanges
			for i, s := range c.sqls {
				var got bool
				switch s {
				case "":
					got = tc.record(&store.Record{Kind: store.KindExecute}, []*sqlinfo.Info{nil})
				case "connect":
					got = tc.record(&store.Record{Kind: store.KindConnect}, nil)
				case "lost":
					got = tc.record(&store.Record{Kind: store.KindOther, Flags: store.FlagLost | store.FlagNotReplayable}, nil)
				case "joined":
					got = tc.record(&store.Record{Kind: store.KindOther, Flags: store.FlagLost | store.FlagNotReplayable | store.FlagOpenAtStart}, nil)
				default:
					got = tc.record(q(s))
				}
				if got != c.want[i] {
					t.Errorf("%q (statement %d): change %v, want %v", s, i+1, got, c.want[i])
				}
			}
		})
	}
}

// orderCapture writes two sessions by hand: session 1 runs a transaction
// whose middle statement sleeps 0.4 s (a read, or after a write), session 2
// connects and reads after session 1's COMMIT ended, in the capture.
func orderCapture(t *testing.T, wrote bool) string {
	t.Helper()
	at := time.Now().Truncate(time.Millisecond)
	ms := func(n int) time.Time { return at.Add(time.Duration(n) * time.Millisecond) }
	ok := store.Response{Kind: store.RespOK}
	row := store.Response{Kind: store.RespResultSet, Columns: 1, Rows: 1}
	q := func(s uint64, start, d int, sql string, resp store.Response) store.Record {
		return store.Record{Session: s, Start: ms(start), Duration: time.Duration(d) * time.Millisecond, Kind: store.KindQuery, Schema: "shop", SQL: sql, Resp: resp}
	}
	recs := []store.Record{
		{Session: 1, Start: at, Duration: time.Millisecond, Kind: store.KindConnect, Schema: "shop", Resp: ok},
		q(1, 2, 1, "BEGIN", ok),
	}
	if wrote {
		recs = append(recs, q(1, 4, 1, "UPDATE t SET c = 'x' WHERE id = 1", store.Response{Kind: store.RespOK, AffectedRows: 1}))
	} else {
		recs = append(recs, q(1, 4, 1, "SELECT c FROM t WHERE id = 1", row))
	}
	// Session 2 begins after session 1's COMMIT ended: nothing of it can
	// wait for anything but that transaction, which the sleep keeps open
	// while session 2 is dispatched (--speed 0).
	recs = append(recs, q(1, 6, 400, "SELECT SLEEP(0.4)", row), q(1, 407, 1, "COMMIT", ok),
		store.Record{Session: 2, Start: ms(410), Duration: time.Millisecond, Kind: store.KindConnect, Schema: "shop", Resp: ok},
		q(2, 412, 1, "SELECT id FROM t WHERE id = 1", row),
		store.Record{Session: 1, Start: ms(420), Kind: store.KindQuit}, store.Record{Session: 2, Start: ms(420), Kind: store.KindQuit})
	return writeRecords(t, recs)
}

// The order gate holds a read back only for an earlier transaction that
// changed something: after a read-only transaction's COMMIT, session 2's
// read goes at once (0 order waits); after a transaction that wrote, it
// waits for that COMMIT (1). So with and without --concurrency. Before,
// every COMMIT was a change, and the read waited in both (1 and 1).
func TestOrderGateWaitsOnlyForTransactionsThatChanged(t *testing.T) {
	ta, _, dba, _ := twoInnoDB(t)
	exec(t, dba, "CREATE TABLE t (id INT PRIMARY KEY, c VARCHAR(20))", "INSERT INTO t VALUES (1, 'one')")
	for _, conc := range []int{0, 2} {
		for _, wrote := range []bool{false, true} {
			rep := replayRun(t, orderCapture(t, wrote), func(c *Config) { c.Concurrency = conc }, ta)
			tg := rep.Targets[0]
			want := int64(0)
			if wrote {
				want = 1
			}
			if tg.OrderWaits != want || tg.Errors != 0 || tg.OrderReleased != 0 {
				t.Errorf("--concurrency %d, transaction that wrote %v: %d order waits, %d errors, %d released; want %d, 0, 0",
					conc, wrote, tg.OrderWaits, tg.Errors, tg.OrderReleased, want)
			}
		}
	}
}
