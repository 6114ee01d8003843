package replay

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tandemdb/tandem/sandbox/sandboxtest"
	"github.com/tandemdb/tandem/store"
)

// A capture that changes nothing others see (reads, and the COMMIT of a
// read-only transaction) has nothing to order: under --order capture its
// records take no place at the gate, and the report says why. One write
// among them, and they are ordered again.
func TestReadOnlyCaptureHasNothingToOrder(t *testing.T) {
	db, dsn := sandboxtest.Server(t, "innodb").FreshDB(t)
	exec(t, db, "CREATE TABLE t (id INT PRIMARY KEY, v INT)", "INSERT INTO t VALUES (1, 0), (2, 0)")
	at := time.Now().Truncate(time.Millisecond)
	us := func(n int) time.Time { return at.Add(time.Duration(n) * time.Microsecond) }
	ok := store.Response{Kind: store.RespOK}
	recs := []store.Record{
		{Session: 1, Start: us(0), Duration: time.Microsecond, Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
		{Session: 2, Start: us(1), Duration: time.Microsecond, Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
		{Session: 1, Start: us(2), Duration: time.Microsecond, Kind: store.KindQuery, Schema: "shop", SQL: "BEGIN", Resp: ok},
	}
	const reads = 200
	for i := range reads {
		recs = append(recs, store.Record{Session: uint64(1 + i%2), Start: us(10 + 10*i), Duration: 5 * time.Microsecond, Kind: store.KindQuery, Schema: "shop",
			SQL: "SELECT v FROM t WHERE id = " + string(rune('1'+i%2)), Resp: store.Response{Kind: store.RespResultSet}})
	}
	end := 10 + 10*reads
	tail := []store.Record{
		{Session: 1, Start: us(end), Duration: time.Microsecond, Kind: store.KindQuery, Schema: "shop", SQL: "COMMIT", Resp: ok},
		{Session: 1, Start: us(end + 1), Kind: store.KindQuit},
		{Session: 2, Start: us(end + 2), Kind: store.KindQuit},
	}
	const note = "the capture changes nothing other sessions could see"
	for _, c := range []struct {
		name   string
		write  bool
		order  string
		noted  bool
		writes int64
	}{
		{"read-only, --order capture", false, OrderCapture, true, 0},
		{"read-only, --order none", false, OrderNone, false, 0},
		{"one write, --order capture", true, OrderCapture, false, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			rs := append(slices.Clone(recs), tail...)
			if c.write {
				rs = append(rs, store.Record{Session: 2, Start: us(end - 5), Duration: time.Microsecond, Kind: store.KindQuery, Schema: "shop",
					SQL: "UPDATE t SET v = v WHERE id = 2", Resp: store.Response{Kind: store.RespOK}})
				slices.SortStableFunc(rs, func(a, b store.Record) int { return a.Start.Compare(b.Start) })
			}
			rep := replayRun(t, writeRecords(t, rs), func(cfg *Config) { cfg.Order = c.order }, tgt(t, "a", dsn, ""))
			ra := rep.Targets[0]
			if ra.Errors != 0 || ra.Reads != reads || ra.Writes != c.writes {
				t.Fatalf("%d errors %v, %d reads, %d writes; want 0, %d and %d", ra.Errors, ra.ErrorCodes, ra.Reads, ra.Writes, reads, c.writes)
			}
			if got := strings.Contains(strings.Join(rep.Notes, "\n"), note); got != c.noted {
				t.Errorf("note that nothing needed ordering: %v, want %v (notes %q)", got, c.noted, rep.Notes)
			}
			if !c.write && (ra.OrderWaits != 0 || ra.OrderReleased != 0) {
				t.Errorf("%d waits, %d released at the gate; want 0 and 0", ra.OrderWaits, ra.OrderReleased)
			}
		})
	}
}
