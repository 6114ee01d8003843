package capture

import (
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/tandemdb/tandem/gtid"
	"github.com/tandemdb/tandem/store"
)

// BypassedUser is the user of the sessions that carry the transactions
// that bypassed the proxy (replay connects with the target's own).
const BypassedUser = "(bypassed the proxy)"

// BypassedRecords turns one transaction that bypassed the proxy, read from
// the binary log, into records of session id, which carries them all one
// after another in the server's order, as a replica's applier does: BEGIN,
// one statement per row change (gtid.Trx.Statements), COMMIT; with first,
// the session's connect and the settings the rebuilt values need before
// them. The server committed it after lo (the end of the captured commit
// before it in its order) and before hi (the end of the one after it):
// its records start at lo, k nanoseconds apart, and take no time, so that
// replay runs them where the capture's records ending after lo come, and
// sends its writes ahead of a conflicting captured one that waited for
// its locks (the gate orders conflicting writes by their ends). Its
// COMMIT names hi: replay counts differences of captured statements that
// overlapped [lo, hi] on its tables apart (commit-overlap), since the
// capture cannot say which side of the commit they saw. Each statement's
// answer is the one the server gave it: OK, its rows. The session's quit
// is BypassedQuit.
func BypassedRecords(t gtid.Trx, tables map[string]*gtid.Table, session uint64, lo, hi time.Time, first bool) ([]*store.Record, error) {
	stmts, err := t.Statements(tables)
	if err != nil {
		return nil, err
	}
	schema := t.StatementSchema
	if schema == "" && len(t.Changes) > 0 {
		schema = t.Changes[0].Schema
	}
	var out []*store.Record
	add := func(kind store.Kind, sql string, affected uint64, status uint16) {
		r := &store.Record{Session: session, Start: lo.Add(time.Duration(len(out))), Kind: kind, Schema: schema, SQL: sql,
			Resp: store.Response{Kind: store.RespOK, AffectedRows: affected, Status: status}}
		if kind == store.KindConnect {
			r.User = BypassedUser
		}
		if kind == store.KindQuit {
			r.Resp = store.Response{}
		}
		out = append(out, r)
	}
	const auto, inTrx = mysql.SERVER_STATUS_AUTOCOMMIT, mysql.SERVER_STATUS_AUTOCOMMIT | mysql.SERVER_STATUS_IN_TRANS
	if first {
		add(store.KindConnect, "", 0, auto)
		add(store.KindQuery, "SET time_zone = '+00:00', foreign_key_checks = 0", 0, auto) // TIMESTAMPs in the images are UTC; row images apply as replication applies them
	}
	if t.Statement != "" {
		add(store.KindQuery, stmts[0], 0, auto) // DDL commits on its own; its place is certain enough
	} else {
		add(store.KindQuery, "BEGIN", 0, inTrx)
		for _, s := range stmts {
			add(store.KindQuery, s, 1, inTrx)
		}
		add(store.KindQuery, store.BypassedCommit(t.GTID.String(), hi), 0, auto)
	}
	return out, nil
}

// BypassedQuit ends the session of BypassedRecords, at at.
func BypassedQuit(session uint64, at time.Time) *store.Record {
	return &store.Record{Session: session, Start: at, Kind: store.KindQuit}
}
