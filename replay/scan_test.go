package replay

import (
	"slices"
	"testing"
	"time"

	"github.com/tandemdb/tandem/sqlinfo"
	"github.com/tandemdb/tandem/store"
)

// The tables a capture created are those still there at its end: one
// dropped again, and a temporary one (gone with its session, in no
// server's list of tables), are counted apart. A temporary table used to
// be listed as created, and the report then printed it "(not there) (not
// InnoDB!)" on every target.
func TestScanCreatedTables(t *testing.T) {
	sc := newScanner(sqlinfo.NewAnalyzer())
	at := time.Unix(1, 0)
	for i, q := range []string{
		"CREATE TABLE kept (id INT PRIMARY KEY)",
		"CREATE TABLE gone (id INT PRIMARY KEY)",
		"DROP TABLE gone",
		"CREATE TEMPORARY TABLE scratch (id INT)",
		"INSERT INTO scratch VALUES (1)",
		"CREATE TEMPORARY TABLE kept (id INT)", // shadows a real one: that stays created
	} {
		sc.add(&store.Record{Seq: uint64(i + 1), Session: 1, Kind: store.KindQuery, SQL: q, Schema: "s", Start: at.Add(time.Duration(i) * time.Millisecond),
			Resp: store.Response{Kind: store.RespOK}})
	}
	sc.finish()
	if !slices.Equal(sc.x.created, []string{"s.kept"}) || sc.x.createdDropped != 2 {
		t.Errorf("created %v, gone again %d; want [s.kept] and 2 (s.gone dropped, s.scratch temporary)", sc.x.created, sc.x.createdDropped)
	}
}
