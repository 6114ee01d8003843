package replay

import (
	"fmt"
	"testing"
	"time"

	"github.com/tandemdb/tandem/sandbox/sandboxtest"
	"github.com/tandemdb/tandem/store"
)

// A transaction run again after a lock error of the target's own runs
// under the SET TRANSACTION (no scope) it began under: the first try used
// it up. Session 1's SERIALIZABLE transaction meets, on the target only,
// an outside lock on row 3 until its UPDATE of it has timed out once;
// replay retries it. Its last INSERT writes row 7 only in a SERIALIZABLE
// transaction (as the target's InnoDB lists it): the retry used to run at
// the session's level, and row 7 was missing.
func TestARetriedTransactionKeepsItsSetTransaction(t *testing.T) {
	for _, m := range bothModes {
		t.Run(m.name, func(t *testing.T) {
			srv := sandboxtest.Server(t, "innodb")
			db, dsn := tableU(t, srv)
			exec(t, db, "CREATE TABLE r (id INT PRIMARY KEY)")
			at, q := session1()
			ok, upd := store.Response{Kind: store.RespOK}, store.Response{Kind: store.RespOK, AffectedRows: 1}
			capDir := writeRecords(t, []store.Record{
				{Session: 1, Start: at(0), Kind: store.KindConnect, User: "app", Schema: "shop", Resp: ok},
				q(0.5, "SET SESSION innodb_lock_wait_timeout = 1", ok),
				q(1, "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE", ok),
				q(2, "BEGIN", ok),
				q(3, "UPDATE u SET v = v + 1 WHERE id = 1", upd),
				q(4, "UPDATE u SET v = v + 100 WHERE id = 3", upd),
				q(5, "INSERT INTO r SELECT 7 FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = CONNECTION_ID() AND trx_isolation_level = 'SERIALIZABLE'", upd),
				q(6, "COMMIT", ok),
				{Session: 1, Start: at(7), Kind: store.KindQuit},
			})
			released := holdRow3UntilTimedOut(t, db, "UPDATE u SET v = v + 100 WHERE id = 3")
			rep := replayRun(t, capDir, func(c *Config) {
				c.Order = OrderCapture
				c.OrderTimeout = 30 * time.Second
				c.Retries = 3
				if m.mod != nil {
					m.mod(c)
				}
			}, tgt(t, "a", dsn, ""))
			if why := <-released; why != "" {
				t.Fatal(why)
			}
			tr := rep.Targets[0]
			if tr.ErrorCodes["1205"] != 1 || tr.Retries != 1 || tr.RetriesSucceeded != 1 {
				t.Errorf("errors %v, %d retries (%d succeeded); want one 1205, retried once with success", tr.ErrorCodes, tr.Retries, tr.RetriesSucceeded)
			}
			if got, rows := rowsOfU(t, db), rowsOf(t, db, "r"); got != "2,2,103" || rows != "7" {
				t.Errorf("u %s, r %q; want 2,2,103 and 7 (written in a SERIALIZABLE transaction)", got, rows)
			}
			if d := rep.VsCapture[0]; d.Total() != 0 {
				t.Errorf("vs capture: divergent %v %s", d.ByClass, fmt.Sprint(d.Samples))
			}
		})
	}
}
