package replay

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tandemdb/tandem/replay/order"
	"github.com/tandemdb/tandem/sandbox/sandboxtest"
	"github.com/tandemdb/tandem/sqlinfo"
	"github.com/tandemdb/tandem/store"
)

// Regrouped under --order capture, a unit waits only for the earlier
// units it depends on (Access). Session 1's UPDATE of t row 1 is held on
// both targets by a lock the test takes for a second, so session 1's
// unit is not done until then. Session 2's read of another table's row
// ended after session 1's COMMIT in the capture but depends on nothing of
// it: it does not wait (before, every unit that ended later waited for
// every change before it: 3 waits). Session 4's read of row 1 waits, and
// reads the updated value as the capture did; session 5's read through a
// view, whose rows no statement names, waits too.
func TestUnitsWaitOnlyForWhatTheyDependOn(t *testing.T) {
	start := time.Now().Truncate(time.Millisecond)
	at := func(ms float64) time.Time { return start.Add(time.Duration(ms * float64(time.Millisecond))) }
	ok := store.Response{Kind: store.RespOK}
	one := store.Response{Kind: store.RespResultSet, Columns: 1, Rows: 1}
	q := func(s uint64, ms float64, sql string, resp store.Response) store.Record {
		return store.Record{Session: s, Start: at(ms), Duration: 500 * time.Microsecond, Kind: store.KindQuery, Schema: "shop", SQL: sql, Resp: resp}
	}
	var recs []store.Record
	for _, s := range []uint64{1, 2, 4, 5} {
		recs = append(recs, store.Record{Session: s, Start: at(float64(s) / 10), Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok})
	}
	capDir := writeRecords(t, append(recs,
		q(1, 1, "BEGIN", ok),
		q(1, 2, "UPDATE t SET v = v + 10 WHERE id = 1", store.Response{Kind: store.RespOK, AffectedRows: 1}),
		q(1, 5, "COMMIT", ok),
		q(2, 20, "SELECT v FROM u WHERE id = 5", one),
		q(4, 21, "SELECT v FROM t WHERE id = 1 AND v = 11", one),
		q(5, 22, "SELECT COUNT(*) FROM vt WHERE v = 11", one),
		store.Record{Session: 1, Start: at(30), Kind: store.KindQuit},
		store.Record{Session: 2, Start: at(30), Kind: store.KindQuit},
		store.Record{Session: 4, Start: at(30), Kind: store.KindQuit},
		store.Record{Session: 5, Start: at(30), Kind: store.KindQuit},
	))
	a, b := heldRowOne(t)
	rep := regroupedInOrder(t, capDir, a, b, 6)
	for _, x := range rep.Targets {
		if x.OrderWaits != 2 || x.OrderReleased != 0 || x.Errors != 0 || x.OrderReruns != 0 {
			t.Errorf("%s: %d waits, %d released, %d reruns, %d errors; want 2 waits (sessions 4 and 5), the rest 0", x.Name, x.OrderWaits, x.OrderReleased, x.OrderReruns, x.Errors)
		}
	}
}

// What a statement adds to its unit's Access, and when it makes the
// unit's Access unknown (see Access).
func TestStatementAccess(t *testing.T) {
	rn := &runner{access: true,
		pks:      map[string][]string{"shop.t": {"id"}, "shop.w": {"id"}, "shop.s": {"name"}},
		uniq:     map[string][]string{"shop.t": {}, "shop.w": {"email"}, "shop.s": {}},
		intKeyed: map[string]bool{"shop.t": true, "shop.w": true, "shop.s": false},
		tangled:  map[string]bool{"vt": true, "child": true}}
	an := sqlinfo.NewAnalyzer()
	for _, c := range []struct {
		sql              string
		known            bool
		touches, changes []string // keys, or "table" for a whole table
	}{
		{"SELECT v FROM t WHERE id = 1", true, []string{"shop.t\x001"}, nil},
		{"SELECT v FROM t WHERE v = 1", true, []string{"t"}, nil},
		{"SELECT v FROM t WHERE id = '05'", true, []string{"shop.t\x005"}, nil}, // as the server compares it
		{"SELECT v FROM t WHERE id = '5x'", true, []string{"t"}, nil},           // the server's conversion decides
		{"SELECT v FROM s WHERE name = 'a'", true, []string{"s"}, nil},          // a collation may make 'A ' the same row
		{"SELECT v FROM t WHERE id IN (1, 2)", true, []string{"shop.t\x001", "shop.t\x002"}, nil},
		{"UPDATE t SET v = 2 WHERE id = 1", true, []string{"shop.t\x001"}, []string{"shop.t\x001"}},
		{"UPDATE t SET id = 2 WHERE id = 1", true, []string{"t"}, []string{"t"}},          // the row moves
		{"INSERT INTO w (id, email) VALUES (1, 'a')", true, []string{"w"}, []string{"w"}}, // a unique secondary key
		{"INSERT INTO t (id, v) VALUES (3, 3)", true, []string{"shop.t\x003"}, []string{"shop.t\x003"}},
		{"SELECT v FROM t WHERE id = 1 AND v > (SELECT MIN(v) FROM t)", true, []string{"t"}, nil}, // a subquery
		{"SELECT t.v FROM t JOIN w ON w.id = t.id WHERE t.id = 1", true, []string{"t", "w"}, nil},
		{"SELECT v FROM t WHERE id = 1 FOR UPDATE", true, []string{"shop.t\x001"}, []string{"shop.t\x001"}},
		{"BEGIN", true, nil, nil},
		{"COMMIT", true, nil, nil},
		{"SET @a = 1", true, nil, nil},
		{"SET TRANSACTION ISOLATION LEVEL SERIALIZABLE", true, nil, nil}, // leads its transaction's unit
		{"USE other", true, nil, nil},
		{"SELECT 1", true, nil, nil},
		{"SELECT NOW()", false, nil, nil},
		{"SELECT v FROM t LIMIT 1", false, nil, nil},
		{"SELECT * FROM vt", false, nil, nil},
		{"DELETE FROM child WHERE id = 1", false, nil, nil},
		{"SELECT * FROM information_schema.tables", false, nil, nil},
		{"SHOW TABLES", false, nil, nil},
		{"CALL p()", false, nil, nil},
		{"ALTER TABLE t ADD COLUMN x INT", false, nil, nil},
		{"SELECT GET_LOCK('x', 1)", false, nil, nil},
		{"SELECT 1; SELECT 2", false, nil, nil},
	} {
		a := &order.Access{}
		known := rn.addAccess(a, &job{info: an.Info(c.sql), rec: &store.Record{Kind: store.KindQuery, Schema: "shop", SQL: c.sql}})
		if known != c.known {
			t.Errorf("%s: known %v, want %v", c.sql, known, c.known)
			continue
		}
		if !known {
			continue
		}
		for _, f := range []struct {
			name string
			fp   order.Footprint
			want []string
		}{{"touches", a.Touches, c.touches}, {"changes", a.Changes, c.changes}} {
			got := append(append([]string{}, f.fp.Keys...), f.fp.Keyless...)
			if len(got) != len(f.want) {
				t.Errorf("%s: %s %q, want %q", c.sql, f.name, got, f.want)
				continue
			}
			for i := range got {
				if got[i] != f.want[i] {
					t.Errorf("%s: %s %q, want %q", c.sql, f.name, got, f.want)
					break
				}
			}
		}
	}
	rn.access = false
	if a := rn.unitAccess([]job{{rec: &store.Record{Kind: store.KindQuery, Schema: "shop"}, info: an.Info("BEGIN")}}); a != nil {
		t.Error("a run without access (DDL in the capture) gave a unit Access")
	}
}

// heldRowOne gives two copies of t (twoCopiesOfT) with table u (row 5)
// and view vt over t, and holds row 1 of t locked on both for a second
// from now: their DSNs.
func heldRowOne(t *testing.T) (a, b string) {
	t.Helper()
	dba, dbb, a, b := twoCopiesOfT(t)
	for _, db := range []*sql.DB{dba, dbb} {
		exec(t, db, "CREATE TABLE u (id INT PRIMARY KEY, v INT)", "INSERT INTO u VALUES (5, 5)", "CREATE VIEW vt AS SELECT * FROM t")
		c, err := db.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		for _, s := range []string{"BEGIN", "SELECT v FROM t WHERE id = 1 FOR UPDATE"} {
			if _, err := c.ExecContext(context.Background(), s); err != nil {
				t.Fatal(err)
			}
		}
		go func() {
			time.Sleep(time.Second)
			c.ExecContext(context.Background(), "COMMIT")
		}()
	}
	return a, b
}

// intKeys' fast path (keys already as the server compares them) gives
// what parsing every value gives.
func TestIntKeysAsTheServerComparesThem(t *testing.T) {
	slow := func(keys []string) []string { // every key parsed
		for i, k := range keys {
			table, vals, _ := strings.Cut(k, "\x00")
			var ok bool
			if keys[i], ok = parseInts(table, vals); !ok {
				return nil
			}
		}
		return keys
	}
	vals := []string{"5", "0", "-0", "05", "-5", "+5", " 5", "5 ", "5.0", "5abc", "", "-", "123456789012345678", "9223372036854775807",
		"9223372036854775808", "18446744073709551615", "18446744073709551616", "-9223372036854775808", "00", "1e3"}
	for _, a := range vals {
		for _, b := range append([]string{""}, vals...) {
			k := "s.t\x00" + a
			if b != "" {
				k += "\x01" + b
			}
			got, want := intKeys([]string{k, "s.t\x007"}), slow([]string{k, "s.t\x007"})
			if !slices.Equal(got, want) {
				t.Errorf("%q: %q, want %q", k, got, want)
			}
		}
	}
}

// intKeys rewrites into a copy: its keys are a job's, which the unit's
// ticket, the board and the gate's lock sets use as the statement wrote
// them.
func TestIntKeysLeaveTheirKeysAlone(t *testing.T) {
	keys := []string{"s.t\x0005", "s.t\x007"}
	got := intKeys(keys)
	if want := []string{"s.t\x005", "s.t\x007"}; !slices.Equal(got, want) {
		t.Errorf("intKeys = %q, want %q", got, want)
	}
	if want := []string{"s.t\x0005", "s.t\x007"}; !slices.Equal(keys, want) {
		t.Errorf("intKeys changed its keys to %q, want %q", keys, want)
	}
	canonical := []string{"s.t\x005"}
	if got := intKeys(canonical); &got[0] != &canonical[0] {
		t.Error("intKeys copied keys it did not rewrite")
	}
}

// An account that may not see a schema's triggers (MySQL shows none
// without the TRIGGER privilege, and no error) cannot tell which tables
// they tie together, nor which writes they give the clock: the schema's
// access is not known (units wait for every other) and its tables' clock
// is not known (every write takes the captured time).
func TestWhatHiddenTriggersMayDoIsNotKnown(t *testing.T) {
	srv := sandboxtest.Server(t, "innodb")
	db, dsn := srv.FreshDB(t)
	name := databaseOf(t, db)
	exec(t, db, "CREATE TABLE t (id INT PRIMARY KEY, n INT)")
	user := fmt.Sprintf("notrig_a%d", os.Getpid())
	exec(t, db, "CREATE USER "+user+"@'%' IDENTIFIED BY 'pw'", "GRANT SELECT, INSERT, UPDATE, DELETE ON "+name+".* TO "+user+"@'%'")
	t.Cleanup(func() { _, _ = db.Exec("DROP USER " + user + "@'%'") })
	for _, c := range []struct {
		who, dsn string
		known    bool
	}{{"root", dsn, true}, {"an account without TRIGGER", strings.Replace(dsn, "root@", user+":pw@", 1), false}} {
		rn := &runner{t: tgt(t, "a", c.dsn, ""), cfg: &Config{Logger: slog.New(slog.DiscardHandler)}, access: true}
		sdb, err := openDB(rn)
		if err != nil {
			t.Fatal(err)
		}
		schemas, byTarget := map[string]bool{name: true}, map[[2]string]string{{strings.ToLower(name), "t"}: strings.ToLower(name) + ".t"}
		rn.loadAccessTables(context.Background(), sdb, schemas, byTarget)
		rn.loadClock(context.Background(), sdb, schemas)
		sdb.Close()
		if got := rn.tangled != nil; got != c.known {
			t.Errorf("%s: access known %v, want %v", c.who, got, c.known)
		}
		if got, want := rn.clock[strings.ToLower(name)+".t"], map[bool]byte{true: clockFree, false: clockTakes}[c.known]; got != want {
			t.Errorf("%s: t's clock %q, want %q", c.who, got, want)
		}
	}
}

// readyNext runs a later unit of a connection's batch while the first
// waits for another connection's unit, only one that need not wait up to
// its COMMIT, depends on none of the units it goes ahead of and is of
// none of their sessions; a unit whose Access is not known stops the
// look.
func TestReadyNextGoesAheadOnlyOfWhatItDoesNotDependOn(t *testing.T) {
	g := order.NewGate(time.Hour, time.Hour)
	rn := &runner{access: true, gate: g}
	acc := func(changes bool, table, key string) *order.Access {
		a := &order.Access{}
		k := []string{table + "\x00" + key}
		a.Touches.Add([]string{table}, k, false)
		if changes {
			a.Changes.Add([]string{table}, k, false)
		}
		return a
	}
	var n int64
	u := func(changes bool, a *order.Access) *unit {
		n += 10
		return &unit{session: uint64(n), t: g.Add(&order.Ticket{Start: 100 + n, End: 105 + n, Changes: changes, Access: a}, nil)}
	}
	w1 := g.Add(&order.Ticket{Start: 0, End: 10, Changes: true, Access: acc(true, "s.t1", "1")}, nil) // another connection's
	reads1 := u(false, acc(false, "s.t1", "1"))                                                       // waits for w1
	reads1b := u(false, acc(false, "s.t1", "1"))                                                      // waits for w1 too
	writes1 := u(true, acc(true, "s.t1", "1"))                                                        // depends on the reads before it
	writes5 := u(true, acc(true, "s.t2", "5"))                                                        // on nothing
	sameSession := u(true, acc(true, "s.t2", "6"))                                                    // on nothing, but reads1's session's
	sameSession.session = reads1.session
	// Another connection's change of t3 row 9 that committed while
	// writes9 ran, before writes9's COMMIT: free at its start, not at its
	// COMMIT.
	g.Add(&order.Ticket{Start: 195, End: 205, Changes: true, Access: acc(true, "s.t3", "9")}, nil)
	writes9 := &unit{session: 99, t: g.Add(&order.Ticket{Start: 200, End: 210, Changes: true, Access: acc(true, "s.t3", "9")}, nil)}
	blind := &unit{session: 98, t: g.Add(&order.Ticket{Start: 300, End: 305}, nil)} // Access not known
	for _, c := range []struct {
		name  string
		rest  []*unit
		want  int
		ready bool
	}{
		{"first waits, a later one is free", []*unit{reads1, reads1b, writes1, writes5}, 3, true},
		{"free only past a unit of unknown access", []*unit{reads1, blind, writes5}, 0, false},
		{"nothing free", []*unit{reads1, reads1b, writes1}, 0, false},
		{"free but of the first's session", []*unit{reads1, sameSession}, 0, false},
		{"free at its start, not at its COMMIT", []*unit{reads1, writes9}, 0, false},
		{"one unit", []*unit{reads1}, 0, false},
		{"first free", []*unit{writes5, reads1}, 0, true},
	} {
		if got, ready := rn.readyNext(c.rest); got != c.want || ready != c.ready {
			t.Errorf("%s: readyNext = %d, %v; want %d, %v", c.name, got, ready, c.want, c.ready)
		}
	}
	far := []*unit{reads1}
	for range readyAhead {
		far = append(far, reads1b)
	}
	if got, ready := rn.readyNext(append(far, writes5)); got != 0 || ready {
		t.Errorf("a free unit past readyAhead: readyNext = %d, %v; want 0, false", got, ready)
	}
	g.Finish(w1)
	if got, ready := rn.readyNext([]*unit{reads1, writes5}); got != 0 || !ready {
		t.Errorf("w1 done: readyNext = %d, %v; want 0, true (the first runs)", got, ready)
	}
}
