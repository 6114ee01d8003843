package replay

import (
	"testing"

	"github.com/tandemdb/tandem/sandbox/sandboxtest"
	"github.com/tandemdb/tandem/store"
)

// A session whose connection the target closed (here its wait_timeout
// of 1 s, during a 2.5 s pause of the captured session) goes on, on a new
// connection, with the variables its SETs had given it, as the captured
// session kept them: autocommit off (row 2 is rolled back), its isolation
// level, set apart from its access mode, which was set after it (row 3 is
// written only at READ COMMITTED), the sql_mode a CONCAT of @@sql_mode
// made (row 4). A SET whose value depends on what the session did is not
// evaluated again: NEXTVAL(s) advanced the sequence once. The new
// connection used to run with the server's autocommit (row 2 committed at
// once and the ROLLBACK undid nothing); a first fix lost the isolation
// level to the access mode and ran NEXTVAL again.
func TestAReconnectKeepsTheSessionsVariables(t *testing.T) {
	srv := sandboxtest.Server(t, "innodb")
	db, dsn := srv.FreshDB(t)
	exec(t, db, "CREATE TABLE r (id INT PRIMARY KEY)", "CREATE SEQUENCE s")
	at, q := session1()
	ok, ins := store.Response{Kind: store.RespOK}, store.Response{Kind: store.RespOK, AffectedRows: 1}
	capDir := writeRecords(t, []store.Record{
		{Session: 1, Start: at(0), Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
		q(1, "SET autocommit = 0", ok),
		q(1.2, "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED", ok),
		q(1.4, "SET SESSION TRANSACTION READ WRITE", ok),
		q(1.6, "SET @id = NEXTVAL(s)", ok),
		q(1.8, "SET @@SESSION.sql_mode = CONCAT(@@sql_mode, ',NO_AUTO_VALUE_ON_ZERO')", ok),
		q(2, "INSERT INTO r VALUES (1)", ins),
		q(3, "COMMIT", ok),
		q(2500, "SET @x = 1", ok),
		q(2510, "INSERT INTO r VALUES (2)", ins),
		q(2520, "ROLLBACK", ok),
		q(2530, "INSERT INTO r SELECT 3 FROM DUAL WHERE @@tx_isolation = 'READ-COMMITTED'", ins),
		q(2535, "INSERT INTO r SELECT 4 FROM DUAL WHERE @@sql_mode LIKE '%NO_AUTO_VALUE_ON_ZERO%'", ins),
		q(2540, "COMMIT", ok),
		{Session: 1, Start: at(2550), Kind: store.KindQuit},
	})
	rep := replayRun(t, capDir, func(c *Config) { c.Speed = 1 }, tgt(t, "a", dsn+"?wait_timeout=1", ""))
	if tr := rep.Targets[0]; tr.Connections < 2 {
		t.Fatalf("%d connections; want the target to have closed the first during the pause", tr.Connections)
	}
	var rows string
	if err := db.QueryRow("SELECT IFNULL(GROUP_CONCAT(id ORDER BY id), '') FROM r").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != "1,3,4" {
		t.Errorf("rows %q; want 1,3,4: row 2 rolled back (autocommit off), row 3 written (READ COMMITTED), row 4 (the sql_mode its CONCAT made)", rows)
	}
	var next int
	if err := db.QueryRow("SELECT NEXTVAL(s)").Scan(&next); err != nil {
		t.Fatal(err)
	}
	if next != 2 {
		t.Errorf("the sequence's next value is %d; want 2: the session's NEXTVAL ran once", next)
	}
}
