package replay

import (
	"testing"

	"github.com/tandemdb/tandem/sandbox/sandboxtest"
	"github.com/tandemdb/tandem/store"
)

// The long data of an execute replay does not send (here one the
// capture's server answered with a deadlock, whose client sent it again)
// is dropped on the target. It used to stay on the target's statement
// and go with the next execute: the row held "AAABBB", not "BBB".
func TestLongDataOfAnExecuteNotSentIsDropped(t *testing.T) {
	modes := []struct {
		name string
		mod  func(*Config)
	}{{"sessions", nil}, {"--concurrency 1", func(c *Config) { c.Concurrency = 1 }}} // one connection: the same statement
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			srv := sandboxtest.Server(t, "innodb")
			db, dsn := srv.FreshDB(t)
			exec(t, db, "CREATE TABLE d (id INT PRIMARY KEY, doc BLOB)")
			at, _ := session1()
			ok := store.Response{Kind: store.RespOK}
			deadlock := store.Response{Kind: store.RespError, ErrCode: 1213, SQLState: "40001", Message: "Deadlock found when trying to get lock; try restarting transaction"}
			params := []store.Value{{Type: store.TypeLong, Int: 1}, {Type: store.TypeBlob, LongData: true}}
			rec := func(ms float64, kind store.Kind, r store.Record) store.Record {
				r.Session, r.Start, r.Kind, r.Schema, r.StmtID = 1, at(ms), kind, "shop", 1
				return r
			}
			capDir := writeRecords(t, []store.Record{
				{Session: 1, Start: at(0), Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
				rec(1, store.KindPrepare, store.Record{SQL: "INSERT INTO d (id, doc) VALUES (?, ?)", Resp: ok}),
				rec(2, store.KindLongData, store.Record{ParamIndex: 1, Data: []byte("AAA")}),
				rec(3, store.KindExecute, store.Record{Params: params, Resp: deadlock}),
				rec(4, store.KindLongData, store.Record{ParamIndex: 1, Data: []byte("BBB")}),
				rec(5, store.KindExecute, store.Record{Params: params, Resp: store.Response{Kind: store.RespOK, AffectedRows: 1}}),
				rec(6, store.KindClose, store.Record{}),
				{Session: 1, Start: at(7), Kind: store.KindQuit},
			})
			rep := replayRun(t, capDir, m.mod, tgt(t, "a", dsn, ""))
			var doc string
			if err := db.QueryRow("SELECT GROUP_CONCAT(CONCAT(id, ':', doc)) FROM d").Scan(&doc); err != nil {
				t.Fatal(err)
			}
			if doc != "1:BBB" {
				t.Errorf("rows %q; want 1:BBB", doc)
			}
			if d := rep.VsCapture[0]; d.Total() != 0 {
				t.Errorf("vs capture: divergent %v %+v", d.ByClass, d.Samples)
			}
		})
	}
}

// A truncated long data chunk is remembered per session, not per
// statement id: one regrouped connection serves many sessions, and their
// statement ids repeat. Session 1's client went away after a chunk the
// capture cut; session 2 later sent whole long data to its own statement
// 1. Keyed by the id alone, the cut chunk's mark stayed on the worker and
// skipped session 2's execute: its row was missing.
func TestTruncatedLongDataOfOneSessionLeavesAnotherAlone(t *testing.T) {
	srv := sandboxtest.Server(t, "innodb")
	db, dsn := srv.FreshDB(t)
	exec(t, db, "CREATE TABLE d (id INT PRIMARY KEY, doc BLOB)")
	at, _ := session1()
	ok := store.Response{Kind: store.RespOK}
	params := []store.Value{{Type: store.TypeLong, Int: 2}, {Type: store.TypeBlob, LongData: true}}
	rec := func(session uint64, ms float64, kind store.Kind, r store.Record) store.Record {
		r.Session, r.Start, r.Kind, r.Schema, r.StmtID = session, at(ms), kind, "shop", 1
		return r
	}
	capDir := writeRecords(t, []store.Record{
		{Session: 1, Start: at(0), Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
		rec(1, 1, store.KindPrepare, store.Record{SQL: "INSERT INTO d (id, doc) VALUES (?, ?)", Resp: ok}),
		rec(1, 2, store.KindLongData, store.Record{ParamIndex: 1, Data: []byte("AAA"), Flags: store.FlagTruncated}),
		{Session: 1, Start: at(3), Kind: store.KindQuit},
		{Session: 2, Start: at(4), Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
		rec(2, 5, store.KindPrepare, store.Record{SQL: "INSERT INTO d (id, doc) VALUES (?, ?)", Resp: ok}),
		rec(2, 6, store.KindLongData, store.Record{ParamIndex: 1, Data: []byte("BBB")}),
		rec(2, 7, store.KindExecute, store.Record{Params: params, Resp: store.Response{Kind: store.RespOK, AffectedRows: 1}}),
		{Session: 2, Start: at(8), Kind: store.KindQuit},
	})
	rep := replayRun(t, capDir, func(c *Config) { c.Concurrency = 1 }, tgt(t, "a", dsn, ""))
	var doc string
	if err := db.QueryRow("SELECT COALESCE(GROUP_CONCAT(CONCAT(id, ':', doc)), '') FROM d").Scan(&doc); err != nil {
		t.Fatal(err)
	}
	if doc != "2:BBB" {
		t.Errorf("rows %q; want 2:BBB (session 2's execute run)", doc)
	}
	if d := rep.VsCapture[0]; d.Total() != 0 {
		t.Errorf("vs capture: divergent %v %+v", d.ByClass, d.Samples)
	}
}
