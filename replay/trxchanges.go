package replay

import (
	"github.com/tandemdb/tandem/sqlinfo"
	"github.com/tandemdb/tandem/store"
)

// trxChanges follows, for one session in capture order, whether its open
// transaction has changed anything other sessions can see (a write, DDL,
// a locking read, a statement the analysis could not read), so that the
// order gate treats the end of a transaction that changed nothing as the
// read it is: a COMMIT of a read-only transaction releases no row lock
// and publishes no row, so later reads need not wait for it.
//
// Every changing statement marks the session; every end of a transaction
// (COMMIT, ROLLBACK, BEGIN, SET autocommit=1, an implicit commit, a new
// login or reset) clears the mark. It needs no autocommit state and errs
// towards "change": an autocommit write marks the session too, so the
// next BEGIN or COMMIT is ordered as a change, as every one was before.
type trxChanges struct{ changed bool }

// record says whether rec, whose statements infos are (statementOf),
// changes what others see, and moves the session's mark.
func (t *trxChanges) record(rec *store.Record, infos []*sqlinfo.Info) bool {
	switch rec.Kind {
	case store.KindConnect, store.KindQuit, store.KindResetConnection, store.KindChangeUser:
		t.changed = false // the server rolls back what was open
		return false
	case store.KindOther:
		if !rec.CommandsLost() {
			return false
		}
		// Replay commits what was open there (sqlinfo.Trx.Lost): the
		// record stands for that commit, a change when the transaction
		// was one, so that what the capture ran after it sees it.
		c := t.changed
		t.changed = false
		return c
	}
	changes := false
	for _, info := range infos {
		changes = t.statement(info) || changes
	}
	return changes
}

// statement is record's rule for one statement.
func (t *trxChanges) statement(info *sqlinfo.Info) bool {
	if info == nil { // not known (an execute of a statement prepared before): anything
		t.changed = true
		return true
	}
	if info.Verb == "XA" && info.End {
		// XA COMMIT or ROLLBACK: it may end a transaction another
		// session prepared (a recovery), whose writes it publishes or
		// takes back: a change, so that it waits for that session's end
		// (worker.detachXA), and what follows it for it.
		t.changed = false
		return true
	}
	if onlyEnds(info) {
		c := t.changed
		t.changed = false
		return c
	}
	c := info.Changes()
	switch {
	case info.ImplicitCommit && !info.Begin:
		t.changed = false // DDL, LOCK TABLES: commits, then runs on its own (a change itself)
	case c:
		t.changed = true
	}
	return c
}

// onlyEnds reports whether the statement does nothing others can see but
// end (or begin, which ends) a transaction: a change exactly when the
// transaction it ends was one.
func onlyEnds(i *sqlinfo.Info) bool {
	if i.Statements != 1 || i.Unanalysable || i.Class == sqlinfo.ClassWrite || len(i.Writes) > 0 || i.WritesUnknown ||
		i.LockingRead || i.LockTables || i.NamedLock || i.Kill {
		return false
	}
	return i.End || i.Begin || i.Set && i.ImplicitCommit
}

// statementRecord reports whether rec runs a statement (a query or an
// execute): the records whose statements trxChanges follows.
func statementRecord(rec *store.Record) bool {
	return rec.Kind == store.KindQuery || rec.Kind == store.KindExecute
}
