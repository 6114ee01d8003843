package replay

import (
	"context"
	"database/sql"
	"slices"
	"strconv"
	"strings"

	"github.com/tandemdb/tandem/replay/order"
	"github.com/tandemdb/tandem/sqlinfo"
	"github.com/tandemdb/tandem/store"
)

// Access: which earlier units a unit waits for. Under --order capture a
// unit (--concurrency: a transaction, or a statement on its own) whose
// reads and changes are all known waits only for the earlier units it
// depends on — one of the two changes a row the other reads or changes
// (order.Access) — not for every unit that ended before it began. Two
// units that depend on neither's rows leave the same data and read the
// same rows in either order, so the order between them is the target's
// to choose, as it is between units that overlapped in the capture.
//
// What is known is what the statements name, so a unit has no Access
// (it waits for everything before it, as every unit did before) when
// one of its statements may touch rows they do not name:
//   - a statement replay cannot analyse, several in one text, a CALL, a
//     DDL, LOCK TABLES, a named lock, KILL, a temporary table, anything
//     but SELECT, INSERT, REPLACE, UPDATE, DELETE and the transaction's
//     own BEGIN, COMMIT, ROLLBACK, SAVEPOINT and SET of session variables;
//   - a nondeterministic one (NOW(), RAND(), a sequence's NEXTVAL, LIMIT
//     without ORDER BY: its rows or values depend on when it runs);
//   - a table of a system schema, a view, a table with a trigger, or one
//     on either side of a foreign key, on the target at the start (a
//     cascade or a trigger changes rows no statement names; a view reads
//     them);
//   - and the whole run, when the capture may change a table's definition
//     on the way (DDL, or a statement replay cannot read), or is followed
//     (its records to come are unknown).
//
// Session mode (a connection per captured session, a ticket per record)
// gives Access to a statement that ran on its own (autocommit: a
// transaction of one statement, as a unit of one is) and to a prepare, a
// statement's close or reset and a ping (they read and change no row),
// once the session's login is seen (recordAccess); a statement inside a
// transaction has none, and every other record none (a login, a quit). Without it, an
// application whose driver prepares and closes each statement (Go's
// database/sql without interpolateParams) replayed at its captured pace
// under --order capture: each change waited for every record before it,
// reads of other tables, prepares and closes of every session included
// (two sessions' point reads and autocommit updates of another table,
// 0.66 of --order none). Inside transactions it was tried (commit
// 95f5acb: a statement on its own carried its rows, the statement that
// takes a transaction's read view touched every table, the COMMIT what
// the transaction changed): it kept the truth tests at 0 divergences and
// halved the gate's waits, but gained no time on sysbench read/write,
// whose range reads make nearly every transaction depend on every change
// before it; narrowing the read view to the transaction's rows broke the
// order-entry invariants on MyRocks (lock wait timeouts, records let go
// at --order-timeout).
//
// Rows are named by primary key (rowKeys) only where the keys hold: an
// integer key (intKeys), one table, no subquery, and for a change, no
// assignment to a key column (the row moves) and no INSERT or REPLACE
// into a table with a unique secondary key (it may clash with a row of
// another key); else the statement touches its whole tables.

// loadAccessTables reads, on the target, what makes a table's rows change or
// be read without a statement naming them, and the unique secondary keys,
// for the capture's schemas (see Access). Any error leaves the run
// without Access (rn.tangled nil).
//
// byTarget gives the captured name ("schema.table", lower-case) of the
// capture's tables by their schema and name on the target.
func (rn *runner) loadAccessTables(ctx context.Context, db *sql.DB, schemas map[string]bool, byTarget map[[2]string]string) {
	tangled, intKeyed := map[string]bool{}, map[string]bool{}
	uniq := map[string][]string{}
	for schema := range schemas {
		one := func(tbl, _ string) { tangled[strings.ToLower(tbl)] = true }
		// A trigger this account may not see would leave its table out
		// of the tangled ones: the schema's access is not known then.
		sees, ok := seesTriggers(ctx, db, schema)
		ok = ok && sees &&
			everyPair(ctx, db, "SELECT TABLE_NAME, '' FROM information_schema.VIEWS WHERE TABLE_SCHEMA = ?", one, schema) &&
			everyPair(ctx, db, "SELECT EVENT_OBJECT_TABLE, '' FROM information_schema.TRIGGERS WHERE EVENT_OBJECT_SCHEMA = ?", one, schema) &&
			everyPair(ctx, db, "SELECT TABLE_NAME, REFERENCED_TABLE_NAME FROM information_schema.REFERENTIAL_CONSTRAINTS WHERE CONSTRAINT_SCHEMA = ? OR UNIQUE_CONSTRAINT_SCHEMA = ?", func(tbl, ref string) {
				tangled[strings.ToLower(tbl)] = true
				tangled[strings.ToLower(ref)] = true
			}, schema, schema) &&
			everyPair(ctx, db, "SELECT TABLE_NAME, '' FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?", func(tbl, _ string) {
				if captured, ok := byTarget[[2]string{strings.ToLower(schema), strings.ToLower(tbl)}]; ok {
					uniq[captured] = []string{}
				}
			}, schema) &&
			everyPair(ctx, db, "SELECT TABLE_NAME, COLUMN_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ? AND NON_UNIQUE = 0 AND INDEX_NAME <> 'PRIMARY'", func(tbl, col string) {
				if captured, ok := byTarget[[2]string{strings.ToLower(schema), strings.ToLower(tbl)}]; ok {
					uniq[captured] = append(uniq[captured], strings.ToLower(col))
				}
			}, schema) &&
			everyPair(ctx, db, "SELECT s.TABLE_NAME, c.DATA_TYPE FROM information_schema.STATISTICS s JOIN information_schema.COLUMNS c "+
				"ON c.TABLE_SCHEMA = s.TABLE_SCHEMA AND c.TABLE_NAME = s.TABLE_NAME AND c.COLUMN_NAME = s.COLUMN_NAME "+
				"WHERE s.TABLE_SCHEMA = ? AND s.INDEX_NAME = 'PRIMARY'", func(tbl, typ string) {
				captured, ok := byTarget[[2]string{strings.ToLower(schema), strings.ToLower(tbl)}]
				if !ok {
					return
				}
				if _, seen := intKeyed[captured]; !seen {
					intKeyed[captured] = true
				}
				switch strings.ToLower(typ) {
				case "tinyint", "smallint", "mediumint", "int", "integer", "bigint":
				default:
					intKeyed[captured] = false
				}
			}, schema)
		if !ok {
			return
		}
	}
	rn.tangled, rn.uniq, rn.intKeyed = tangled, uniq, intKeyed
}

// everyPair runs query with args and calls f with each row's two
// columns; false if any of it failed.
func everyPair(ctx context.Context, db *sql.DB, query string, f func(a, b string), args ...any) bool {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return false
	}
	defer rows.Close()
	for rows.Next() {
		var a, b sql.NullString
		if rows.Scan(&a, &b) != nil {
			return false
		}
		f(a.String, b.String)
	}
	return rows.Err() == nil
}

// unitAccess is what a unit's statements read and change (nil: not all
// of it is known; see Access).
func (rn *runner) unitAccess(jobs []job) *order.Access {
	if !rn.access || rn.tangled == nil {
		return nil
	}
	a := &order.Access{}
	for i := range jobs {
		j := &jobs[i]
		if a.Touches.Keys == nil && j.info != nil && j.info.Point != nil {
			a.Touches.Grow(len(jobs) - i) // keys likely: room for the unit's
		}
		if statementRecord(j.rec) && !rn.addAccess(a, j) {
			return nil
		}
	}
	return a
}

// sessionTrx is a session's transaction as its records are dispatched
// (session mode), for their Access: the worker's own state machine
// (worker.handle), fed the same records in the same order; known once a
// login, change of user or reset was seen (a packet capture's session
// found open starts unknown).
type sessionTrx struct {
	trx   sqlinfo.Trx
	known bool
}

// recordAccess is what rec reads and changes, for its ticket in session
// mode (see Access; nil: not known), and moves st past it. keys are the
// statement's row keys when dispatch built them (a change), else nil.
func (rn *runner) recordAccess(st *sessionTrx, rec *store.Record, infos []*sqlinfo.Info, keys []string) *order.Access {
	var info *sqlinfo.Info
	if len(infos) == 1 && statementRecord(rec) {
		info = infos[0]
	}
	step := trxStep(&st.trx, rec, info)
	switch {
	case info != nil:
	case rec.Kind == store.KindConnect || rec.Kind == store.KindChangeUser || rec.Kind == store.KindResetConnection || rec.Kind == store.KindQuit:
		// No Access: a login waits, as before, for the changes before
		// it, so that sessions that followed each other in the capture
		// (an application that connects per request) do not all open at
		// once (200 logins at --speed 0 went past max_connections).
		st.known = rec.Kind != store.KindQuit
		return nil
	case rec.CommandsLost():
		return nil
	}
	if !rn.access || rn.tangled == nil || !st.known {
		return nil
	}
	switch rec.Kind {
	case store.KindPrepare, store.KindClose, store.KindReset, store.KindPing:
		return &order.Access{}
	case store.KindQuery, store.KindExecute:
		if info == nil || step.In || step.CommitBefore {
			return nil // a transaction's: its read view and locks are the transaction's
		}
		j := &job{rec: rec, info: info}
		if keys != nil {
			j.keys, j.keyed = keys, true
		}
		a := &order.Access{}
		if !rn.addAccess(a, j) {
			return nil
		}
		return a
	}
	return nil
}

// addAccess adds what one statement (j's) reads and changes to a, and
// reports whether it is all known.
func (rn *runner) addAccess(a *order.Access, j *job) bool {
	info, rec := j.info, j.rec
	if info == nil || info.Unanalysable || info.LexError != "" || info.WritesUnknown || info.Statements != 1 ||
		info.PinsSession() || info.Kill || info.Nondeterministic || info.ImplicitCommit && !info.Begin {
		return false
	}
	switch info.Verb {
	case "SELECT", "INSERT", "REPLACE", "UPDATE", "DELETE", "BEGIN", "START", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE":
	case "SET":
		if !info.Set && !info.SetNext { // SET TRANSACTION (for the next one) touches no table either
			return false
		}
	case "USE": // with the statement it leads (regrouper.addTo): tables are qualified by each record's schema
	default:
		return false
	}
	var tables []string
	for _, ts := range [][]sqlinfo.Table{info.Reads, info.Writes} {
		for _, tb := range ts {
			schema := tb.Schema
			if schema == "" {
				schema = rec.Schema
			}
			n := strings.ToLower(tb.Name)
			if systemSchema(schema) || rn.tangled[n] {
				return false
			}
			if !slices.Contains(tables, n) {
				tables = append(tables, n)
			}
		}
	}
	keys := rn.accessKeys(j, tables)
	a.Touches.Add(tables, keys, false)
	if info.Changes() {
		a.Changes.Add(tables, keys, false)
	}
	return true
}

// accessKeys are the row keys of a statement on tables when they name
// every row it reads or changes (see Access), else nil.
func (rn *runner) accessKeys(j *job, tables []string) []string {
	info, rec := j.info, j.rec
	p := info.Point
	if len(tables) != 1 || p == nil || p.Subquery {
		return nil
	}
	table := strings.ToLower(p.Table.In(rec.Schema).String())
	if !rn.intKeyed[table] {
		return nil
	}
	keys := intKeys(rn.jobKeys(j)) // rowKeys' table is table
	if keys == nil || !info.Changes() {
		return keys
	}
	uniq, known := rn.uniq[table]
	if !known || p.Rows != nil && len(uniq) > 0 {
		return nil
	}
	for _, c := range p.Set {
		if slices.Contains(rn.pks[table], c) || slices.Contains(uniq, c) {
			return nil
		}
	}
	return keys
}

// intKeys writes keys on an integer primary key as the server compares
// them ('05', 5 and '5' name one row), or returns nil when a value is not
// an integer as written (5.0, '5abc': the server's conversion decides
// the row). Keys on other types are not used at all: a collation can
// make two texts one row ('a' and 'A ').
//
// keys are not changed (they may be a job's: runner.jobKeys): a key
// rewritten goes into a copy.
func intKeys(keys []string) []string {
	out, copied := keys, false
	for i, k := range keys {
		table, vals, ok := strings.Cut(k, "\x00")
		if !ok {
			return nil
		}
		if canonicalInts(vals) {
			continue // as the server compares them already (a bound integer's)
		}
		if !copied {
			out, copied = slices.Clone(keys), true
		}
		if out[i], ok = parseInts(table, vals); !ok {
			return nil
		}
	}
	return out
}

// parseInts is table's key of vals, each value parsed and written as the
// server compares integers; false when one is not an integer.
func parseInts(table, vals string) (string, bool) {
	parts := strings.Split(vals, "\x01")
	for j, v := range parts {
		v = strings.TrimSpace(v)
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			parts[j] = strconv.FormatInt(n, 10)
		} else if u, err := strconv.ParseUint(v, 10, 64); err == nil {
			parts[j] = strconv.FormatUint(u, 10)
		} else {
			return "", false
		}
	}
	return table + "\x00" + strings.Join(parts, "\x01"), true
}

// canonicalInts reports whether every \x01-separated value of vals is an
// integer written as strconv.FormatInt would write it (no sign but a
// minus, no leading zero, no blank) and within int64: intKeys leaves
// such a key as it is.
func canonicalInts(vals string) bool {
	for {
		v, rest, more := strings.Cut(vals, "\x01")
		d := v
		if len(d) > 0 && d[0] == '-' {
			d = d[1:]
		}
		if len(d) == 0 || len(d) > 18 || d[0] == '0' && (len(d) > 1 || len(v) > 1) {
			return false // empty, maybe past int64 (the slow path decides), 05, -0
		}
		for i := 0; i < len(d); i++ {
			if d[i] < '0' || d[i] > '9' {
				return false
			}
		}
		if !more {
			return true
		}
		vals = rest
	}
}

// systemSchema: the server's own schemas, whose tables show the state of
// every other.
func systemSchema(s string) bool {
	switch strings.ToLower(s) {
	case "information_schema", "performance_schema", "mysql", "sys":
		return true
	}
	return false
}

// mayChangeSchema reports whether a statement may change a table's
// definition, its views, triggers or keys (see Access).
func mayChangeSchema(info *sqlinfo.Info) bool {
	switch info.Verb {
	case "CREATE", "ALTER", "DROP", "RENAME", "TRUNCATE", "GRANT", "REVOKE":
		return true
	}
	return info.ImplicitCommit && !info.Begin && !info.Set || info.TableDDL || info.Unanalysable && info.Class != sqlinfo.ClassRead || info.WritesUnknown
}
