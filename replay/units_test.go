package replay

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tandemdb/tandem/sqlinfo"
	"github.com/tandemdb/tandem/store"
)

// units renders units as "session:statements|…" with the unit's SET
// state, for comparison.
func unitsText(us []*unit) string {
	var parts []string
	for _, u := range us {
		var stmts []string
		for _, j := range u.jobs {
			s := j.sql
			if j.rec.Kind == store.KindLongData {
				s = "long-data"
			}
			stmts = append(stmts, s)
		}
		var sets []string
		for _, s := range u.sets {
			sets = append(sets, s.text)
		}
		open := ""
		if u.open {
			open = " (open)"
		}
		if u.commitAtEnd {
			open += " (commits at its end)"
		}
		parts = append(parts, fmt.Sprintf("%d@%s[%s]{%s}%s", u.session, u.schema, strings.Join(sets, ";"), strings.Join(stmts, ","), open))
	}
	return strings.Join(parts, " | ")
}

// regroupFeed is a regrouper, a maker of records one millisecond apart in
// schema s0, and add, which feeds one and gathers the units it completes
// in got.
func regroupFeed() (g *regrouper, rec func(session uint64, kind store.Kind, sql string) *store.Record, add func(*store.Record), got *[]*unit) {
	at := time.Unix(0, 0)
	var seq uint64
	rec = func(session uint64, kind store.Kind, sql string) *store.Record {
		seq++
		return &store.Record{Seq: seq, Session: session, Kind: kind, SQL: sql, Start: at.Add(time.Duration(seq) * time.Millisecond),
			Duration: time.Microsecond, Schema: "s0"}
	}
	g = newRegrouper(sqlinfo.NewAnalyzer(), func(r *store.Record, loop int) int64 { return r.Start.UnixNano() })
	got = new([]*unit)
	add = func(r *store.Record) { *got = append(*got, g.add(r, 0, time.Time{})...) }
	return g, rec, add, got
}

// Regrouping keeps each session's transactions whole and in order, ends a
// unit at COMMIT, ROLLBACK, an implicit commit or a statement outside a
// transaction, keeps autocommit=0 statements together up to COMMIT, and
// carries the latest value of each variable, the schema and long data.
func TestRegroup(t *testing.T) {
	g, rec, add, got := regroupFeed()
	add(rec(1, store.KindConnect, ""))
	add(rec(2, store.KindConnect, ""))
	add(rec(1, store.KindQuery, "SET sql_mode = 'A'"))
	add(rec(1, store.KindQuery, "BEGIN"))
	add(rec(2, store.KindQuery, "SELECT 1")) // session 2's unit ends first
	add(rec(1, store.KindQuery, "UPDATE t SET v = 1"))
	add(rec(1, store.KindQuery, "SET sql_mode = 'B'")) // inside: a statement of the unit, and the new state
	add(rec(1, store.KindQuery, "COMMIT"))
	add(rec(1, store.KindQuery, "USE other"))
	add(rec(1, store.KindQuery, "SET @x = 5"))
	add(rec(1, store.KindQuery, "SELECT @x"))
	add(rec(2, store.KindQuery, "SET autocommit = 0"))
	add(rec(2, store.KindQuery, "INSERT INTO t VALUES (1)"))
	add(rec(2, store.KindQuery, "INSERT INTO t VALUES (2)"))
	add(rec(2, store.KindQuery, "CREATE TABLE u (a INT)")) // implicit commit ends the unit
	add(rec(2, store.KindQuery, "DELETE FROM t"))
	p := rec(1, store.KindPrepare, "INSERT INTO b VALUES (?)")
	p.StmtID = 7
	add(p)
	ld := rec(1, store.KindLongData, "")
	ld.StmtID = 7
	add(ld)
	ex := rec(1, store.KindExecute, "")
	ex.StmtID = 7
	add(ex)
	add(rec(1, store.KindQuery, "BEGIN"))
	add(rec(1, store.KindQuery, "SELECT 2"))
	add(rec(1, store.KindQuery, "BEGIN")) // implicitly commits the one before
	add(rec(1, store.KindQuery, "SELECT 3"))
	add(rec(1, store.KindQuit, ""))
	*got = append(*got, g.flush()...)
	want := strings.Join([]string{
		"2@s0[]{SELECT 1}",
		"1@s0[SET sql_mode = 'A']{BEGIN,UPDATE t SET v = 1,SET sql_mode = 'B',COMMIT}",
		"1@other[SET sql_mode = 'B';SET @x = 5]{SELECT @x}",
		"2@s0[SET autocommit = 0]{INSERT INTO t VALUES (1),INSERT INTO t VALUES (2),CREATE TABLE u (a INT)}",
		"1@other[SET sql_mode = 'B';SET @x = 5]{long-data,INSERT INTO b VALUES (?)}",
		"1@other[SET sql_mode = 'B';SET @x = 5]{BEGIN,SELECT 2} (commits at its end)",
		"1@other[SET sql_mode = 'B';SET @x = 5]{BEGIN,SELECT 3} (open)",
		"2@s0[SET autocommit = 0]{DELETE FROM t} (open)",
	}, " | ")
	if g := unitsText(*got); g != want {
		t.Fatalf("units\n got %s\nwant %s", strings.ReplaceAll(g, " | ", "\n     "), strings.ReplaceAll(want, " | ", "\n     "))
	}
	// A unit's interval runs from its first statement's start to its last's end.
	if u := (*got)[1]; u.start != int64(4*time.Millisecond) || u.end != int64(8*time.Millisecond)+int64(time.Microsecond) {
		t.Errorf("unit interval [%d, %d]", u.start, u.end)
	}
	// The state version grows with each SET, so a connection that carries
	// a session's older state applies only what changed.
	if (*got)[2].version <= (*got)[1].version {
		t.Errorf("versions %d then %d", (*got)[1].version, (*got)[2].version)
	}
}

// A SET for the session's next statement only (SET TRANSACTION without
// SESSION, SET insert_id) goes with that statement, in its unit, with
// the SETs and USE between them, and no later unit carries it; a SET of
// state among them is still carried. The unit that holds such a SET and
// an autocommit change is a lone change. Before, each SET TRANSACTION
// was a unit of its own, run on whatever connection was free, and
// insert_id was set again before every later unit of the session on
// another connection.
func TestRegroupGivesOneShotSetsToTheirStatement(t *testing.T) {
	_, rec, add, got := regroupFeed()
	add(rec(1, store.KindConnect, ""))
	add(rec(1, store.KindQuery, "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE"))
	add(rec(1, store.KindQuery, "SET TRANSACTION READ ONLY"))
	add(rec(1, store.KindQuery, "SET @a = 1")) // state, between them: a job, and carried
	add(rec(1, store.KindQuery, "START TRANSACTION"))
	add(rec(1, store.KindQuery, "SELECT 1"))
	add(rec(1, store.KindQuery, "COMMIT"))
	add(rec(1, store.KindQuery, "SET insert_id = 100"))
	add(rec(1, store.KindQuery, "USE other"))
	add(rec(1, store.KindQuery, "INSERT INTO t (v) VALUES (1)"))
	add(rec(1, store.KindQuery, "INSERT INTO t (v) VALUES (2)"))
	add(rec(1, store.KindQuery, "SET SESSION TRANSACTION READ ONLY")) // state: carried
	add(rec(1, store.KindQuery, "BEGIN"))
	add(rec(1, store.KindQuery, "SET TRANSACTION READ WRITE")) // inside: a statement of the transaction (the server refuses it)
	add(rec(1, store.KindQuery, "COMMIT"))
	add(rec(1, store.KindQuery, "SET TRANSACTION READ ONLY"))
	add(rec(1, store.KindQuit, ""))
	want := strings.Join([]string{
		"1@s0[]{SET TRANSACTION ISOLATION LEVEL SERIALIZABLE,SET TRANSACTION READ ONLY,SET @a = 1,START TRANSACTION,SELECT 1,COMMIT}",
		"1@s0[SET @a = 1]{SET insert_id = 100,USE other,INSERT INTO t (v) VALUES (1)}",
		"1@other[SET @a = 1]{INSERT INTO t (v) VALUES (2)}",
		"1@other[SET @a = 1;SET SESSION TRANSACTION READ ONLY]{BEGIN,SET TRANSACTION READ WRITE,COMMIT}",
		"1@other[SET @a = 1;SET SESSION TRANSACTION READ ONLY]{SET TRANSACTION READ ONLY} (open)",
	}, " | ")
	if g := unitsText(*got); g != want {
		t.Fatalf("units\n got %s\nwant %s", strings.ReplaceAll(g, " | ", "\n     "), strings.ReplaceAll(want, " | ", "\n     "))
	}
	if u := (*got)[0]; u.lead != 3 || u.jobs[2].setVersion != u.version+1 {
		t.Errorf("first unit: lead %d, SET @a's version %d over the unit's %d; want 3, one more", u.lead, u.jobs[2].setVersion, u.version)
	}
	if u := (*got)[1]; u.lead != 2 || !u.lone || u.commitStart != u.end {
		t.Errorf("insert_id's unit: lead %d, lone %v, commit start %d, end %d; want 2, a lone change committing at its end", u.lead, u.lone, u.commitStart, u.end)
	}
}

// The held units leave in the order of their COMMIT's start, those with
// the same start in the order they came, also across the queue's reuse
// of its front.
func TestUnitQueueOrdersByCommitStart(t *testing.T) {
	var q unitQueue
	seq := 0
	var got []int
	push := func(start int64) {
		seq++
		q.push(&unit{commitStart: start, start: int64(seq)})
	}
	popUpTo := func(upTo int64) {
		for q.len() > 0 && q.front().commitStart < upTo {
			u := q.pop()
			got = append(got, int(u.commitStart)*10000+int(u.start%10000))
		}
	}
	// Mostly in order; every 7th late by 3 positions, every 5th the same
	// start as the one before.
	var want []int
	type item struct{ start int64 }
	var all []item
	for i := range 5000 {
		s := int64(3 * i)
		switch {
		case i%7 == 6:
			s -= 8 // closed after units whose COMMIT started after its own
		case i%5 == 4:
			s = int64(3 * (i - 1)) // the same start as the one before
		}
		all = append(all, item{s})
	}
	for i, it := range all {
		push(it.start)
		if i%100 == 99 {
			popUpTo(int64(3*i) - 50)
		}
	}
	popUpTo(1 << 40)
	// want: sorted by start, stably (by arrival).
	idx := make([]int, len(all))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(all[a].start, all[b].start) })
	for _, i := range idx {
		want = append(want, int(all[i].start)*10000+(i+1)%10000)
	}
	if q.len() != 0 || len(got) != len(want) {
		t.Fatalf("%d left, %d popped, want 0 and %d", q.len(), len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("pop %d: %d, want %d", i, got[i], want[i])
		}
	}
}

// The units left at a replay's end go out as at most one batch per
// connection, in order, of sizes that differ by at most one (they went as
// one batch, on one connection).
func TestSpreadCutsTheLastUnitsAcrossConnections(t *testing.T) {
	mk := func(n int) []*unit {
		us := make([]*unit, n)
		for i := range us {
			us[i] = &unit{start: int64(i)}
		}
		return us
	}
	for _, c := range []struct {
		units, conns int
		sizes        []int
	}{
		{0, 8, nil},
		{1, 8, []int{1}},
		{5, 8, []int{1, 1, 1, 1, 1}},
		{31, 8, []int{3, 4, 4, 4, 4, 4, 4, 4}},
		{8, 8, []int{1, 1, 1, 1, 1, 1, 1, 1}},
		{7, 1, []int{7}},
		{3, 0, []int{3}},
	} {
		us := mk(c.units)
		bs := spread(us, c.conns)
		var sizes []int
		next := 0
		for _, b := range bs {
			sizes = append(sizes, len(b))
			for _, u := range b {
				if u.start != int64(next) {
					t.Fatalf("%d units over %d: unit %d where %d comes next", c.units, c.conns, u.start, next)
				}
				next++
			}
		}
		if !slices.Equal(sizes, c.sizes) || next != c.units {
			t.Errorf("%d units over %d connections: batches %v (%d units), want %v", c.units, c.conns, sizes, next, c.sizes)
		}
	}
}
