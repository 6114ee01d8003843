package replay

import (
	"strconv"
	"testing"
	"time"

	"github.com/tandemdb/tandem/sandbox/sandboxtest"
	"github.com/tandemdb/tandem/store"
)

// In session mode a statement that runs on its own (autocommit) waits at
// the gate only for the earlier records it depends on, and a prepare or a
// statement's close for none: two sessions whose driver prepares, runs
// and closes each statement (Go's database/sql), one updating rows of t,
// the other reading and updating rows of u, replay under --order capture
// with no wait but for a login, the rows as captured. Before, each change waited for
// every record before it (the other session's reads, prepares and
// closes included), and such a capture replayed at its captured pace
// (0.66 of --order none). Statements inside a transaction still wait for
// every record before them: the same traffic with session 1's updates in
// one transaction waits. (The records' responses are not the server's:
// what is checked is the rows.)
func TestSessionStatementsOnTheirOwnWaitOnlyForWhatTheyDependOn(t *testing.T) {
	db, dsn := sandboxtest.Server(t, "innodb").FreshDB(t)
	at := msClock()
	ok := store.Response{Kind: store.RespOK}
	const n = 60
	build := func(trx bool) []store.Record {
		recs := []store.Record{
			{Session: 1, Start: at(0), Kind: store.KindConnect, User: "app", Resp: ok},
			{Session: 2, Start: at(1), Kind: store.KindConnect, User: "app", Resp: ok},
		}
		if trx {
			recs = append(recs, store.Record{Session: 1, Start: at(2), Duration: time.Microsecond, Kind: store.KindQuery, SQL: "BEGIN", Resp: ok})
		}
		for i := range n {
			s, id := uint64(1+i%2), uint32(10+i)
			var sql string
			switch {
			case s == 1:
				sql = "UPDATE t SET v = v + 1 WHERE id = " + strconv.Itoa(1+i%5)
			case i%4 == 1:
				sql = "SELECT v FROM u WHERE id = " + strconv.Itoa(1+i%5)
			default:
				sql = "UPDATE u SET v = v + 1 WHERE id = " + strconv.Itoa(1+i%5)
			}
			resp := ok
			if sql[0] == 'S' {
				resp = store.Response{Kind: store.RespResultSet}
			}
			ms := 10 + 4*i
			recs = append(recs,
				store.Record{Session: s, Start: at(ms), Duration: time.Microsecond, Kind: store.KindPrepare, StmtID: id, SQL: sql, Resp: ok},
				store.Record{Session: s, Start: at(ms + 1), Duration: time.Microsecond, Kind: store.KindExecute, StmtID: id, Resp: resp},
				store.Record{Session: s, Start: at(ms + 2), Kind: store.KindClose, StmtID: id})
		}
		end := 10 + 4*n
		if trx {
			recs = append(recs, store.Record{Session: 1, Start: at(end), Duration: time.Microsecond, Kind: store.KindQuery, SQL: "COMMIT", Resp: ok})
		}
		return recs // open at the end: a quit waits for the changes before it (a login's place; see recordAccess)
	}
	for _, c := range []struct {
		name        string
		trx         bool
		least, most int64
	}{
		// A login has no Access (recordAccess): the records after it
		// wait until it is done, a wait at most per session.
		{"autocommit", false, 0, 2},
		{"session 1 in a transaction", true, n / 2, n + 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			exec(t, db, "DROP TABLE IF EXISTS t, u", "CREATE TABLE t (id INT PRIMARY KEY, v INT)", "CREATE TABLE u (id INT PRIMARY KEY, v INT)",
				"INSERT INTO t SELECT seq, 0 FROM seq_1_to_5", "INSERT INTO u SELECT seq, 0 FROM seq_1_to_5")
			rep := replayRun(t, writeRecords(t, build(c.trx)), func(cfg *Config) { cfg.Order = OrderCapture }, tgt(t, "a", dsn, ""))
			r := rep.Targets[0]
			if r.Errors != 0 || r.Writes != n/2+n/4 || r.Reads != n/4 {
				t.Fatalf("%d errors %v, %d writes, %d reads; want 0, %d, %d", r.Errors, r.ErrorCodes, r.Writes, r.Reads, n/2+n/4, n/4)
			}
			if r.OrderWaits < c.least || r.OrderWaits > c.most {
				t.Errorf("%d waits at the gate; want %d to %d", r.OrderWaits, c.least, c.most)
			}
			var sum int
			if err := db.QueryRow("SELECT (SELECT SUM(v) FROM t) * 1000 + (SELECT SUM(v) FROM u)").Scan(&sum); err != nil {
				t.Fatal(err)
			}
			if want := n/2*1000 + n/4; sum != want {
				t.Errorf("sum of t's values * 1000 + u's: %d, want %d", sum, want)
			}
		})
	}
}
