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
// unit (--concurrency: a transaction, or a statement on its own; in
// session mode a record, as trxAccess tells) whose reads and changes are
// all known waits only for the earlier units it depends on — one of the two changes a row the other reads or changes
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
// Rows are named by primary key (rowKeys) only where the keys hold: an
// integer key (intKeys), one table, no subquery, and for a change, no
// assignment to a key column
// (the row moves) and no INSERT or REPLACE into a table with a unique
// secondary key (it may clash with a row of another key); else the
// statement touches its whole tables.

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
		ok := everyPair(ctx, db, "SELECT TABLE_NAME, '' FROM information_schema.VIEWS WHERE TABLE_SCHEMA = ?", one, schema) &&
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
	for _, j := range jobs {
		if statementRecord(j.rec) && !rn.addAccess(a, j.info, j.rec) {
			return nil
		}
	}
	return a
}

// addAccess adds what one statement reads and changes to a, and reports
// whether it is all known.
func (rn *runner) addAccess(a *order.Access, info *sqlinfo.Info, rec *store.Record) bool {
	if info == nil || info.Unanalysable || info.LexError != "" || info.WritesUnknown || info.Statements != 1 ||
		info.PinsSession() || info.Kill || info.Nondeterministic || info.ImplicitCommit && !info.Begin {
		return false
	}
	switch info.Verb {
	case "SELECT", "INSERT", "REPLACE", "UPDATE", "DELETE", "BEGIN", "START", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE":
	case "SET":
		if !info.Set {
			return false
		}
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
	keys := rn.accessKeys(info, rec, tables)
	a.Touches.Add(tables, keys, false)
	if info.Changes() {
		a.Changes.Add(tables, keys, false)
	}
	return true
}

// accessKeys are the row keys of a statement on tables when they name
// every row it reads or changes (see Access), else nil.
func (rn *runner) accessKeys(info *sqlinfo.Info, rec *store.Record, tables []string) []string {
	p := info.Point
	if len(tables) != 1 || p == nil || p.Subquery {
		return nil
	}
	table := strings.ToLower(p.Table.In(rec.Schema).String())
	if !rn.intKeyed[table] {
		return nil
	}
	keys := intKeys(rn.rowKeys(info, rec))
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
func intKeys(keys []string) []string {
	for i, k := range keys {
		table, vals, ok := strings.Cut(k, "\x00")
		if !ok {
			return nil
		}
		parts := strings.Split(vals, "\x01")
		for j, v := range parts {
			v = strings.TrimSpace(v)
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				parts[j] = strconv.FormatInt(n, 10)
			} else if u, err := strconv.ParseUint(v, 10, 64); err == nil {
				parts[j] = strconv.FormatUint(u, 10)
			} else {
				return nil
			}
		}
		keys[i] = table + "\x00" + strings.Join(parts, "\x01")
	}
	return keys
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

// trxAccess follows one session in capture order (session mode: a ticket
// per record) for Access: what its open transaction has changed, which
// the record that ends the transaction makes visible and carries as its
// Access, and whether the transaction has taken its read view.
//
// A record on its own (autocommit) carries its statement's Access: what
// it changes is seen as it ends. In a transaction, the first statement on
// data takes the read view every later read of the transaction sees (a
// REPEATABLE READ snapshot, of every table): it touches every table, so
// it waits for every change before it, as every record did before (what
// waits for it is what depends on its own changes). Later
// statements carry their own (a read sees the snapshot, or with READ
// COMMITTED the rows as they are; a change locks and reads the rows as
// they are: both depend on the changes of the rows they name). What the
// transaction changed is made visible by its end (COMMIT, ROLLBACK, an
// implicit commit, the next BEGIN), whose Access is that, for both what
// it touches and what it changes: the reads of those rows before it stay
// before it, those after it wait for it.
//
// Whether a statement runs on its own is what the capture's server said
// after the session's previous statement (its status flags: a
// transaction open, autocommit on); where it said nothing (a new
// session, whose server may set autocommit off at login; an error; a
// synthesized capture), the state is followed from BEGIN, COMMIT and SET
// autocommit, and autocommit counts as off until a SET or the server says
// otherwise: the first statement on data after a login or an end then
// counts as taking a read view. A transaction that changed more than
// maxTrxKeys rows by key counts as changing anything.
type trxAccess struct {
	open     bool // a transaction is open
	auto     bool // autocommit is known to be on
	snapshot bool // the open transaction has taken its read view
	changed  order.Footprint
	unknown  bool // it may have changed what changed does not say
}

const maxTrxKeys = 256

// Status flags of the server's answers (the protocol's
// SERVER_STATUS_IN_TRANS and SERVER_STATUS_AUTOCOMMIT).
const (
	statusInTrans    = 0x0001
	statusAutocommit = 0x0002
)

// recordAccess is rec's Access (nil: not all of it is known), infos its
// statements (statementOf); it moves the session's state.
func (rn *runner) recordAccess(ta *trxAccess, rec *store.Record, infos []*sqlinfo.Info) *order.Access {
	if !rn.access || rn.tangled == nil {
		return nil
	}
	switch rec.Kind {
	case store.KindQuit:
		*ta = trxAccess{} // the server rolls back what was open: nothing becomes visible
		return &order.Access{}
	case store.KindConnect, store.KindResetConnection, store.KindChangeUser:
		// As at a quit; but a login waits for every change before it,
		// as before (nothing waits for it): logins let go early opened,
		// at --speed 0, every connection of a connect-per-request
		// capture at once (200 where the capture had 1), past the
		// server's max_connections.
		*ta = trxAccess{}
		return &order.Access{AfterChanges: true}
	case store.KindOther:
		if rec.CommandsLost() {
			return ta.end() // replay commits what was open there
		}
		return &order.Access{}
	case store.KindQuery, store.KindExecute:
	default:
		return &order.Access{} // a prepare, a ping: nothing on data
	}
	a := rn.statementAccess(ta, rec, infos)
	if st := rec.Resp.Status; st != 0 && rec.Resp.Kind != store.RespError && len(rec.Resp.More) == 0 {
		// What the server said: a transaction it rolled back (a
		// deadlock) made nothing visible; one it says is open is.
		if st&statusInTrans == 0 && ta.open {
			ta.end()
		}
		ta.open, ta.auto = st&statusInTrans != 0, st&statusAutocommit != 0
	}
	if len(ta.changed.Keys) > maxTrxKeys {
		ta.unknown = true
		ta.changed = order.Footprint{}
	}
	return a
}

// statementAccess is recordAccess for a statement.
func (rn *runner) statementAccess(ta *trxAccess, rec *store.Record, infos []*sqlinfo.Info) *order.Access {
	var info *sqlinfo.Info
	if len(infos) == 1 {
		info = infos[0]
	}
	switch {
	case rec.Session >= store.BypassedSessionBase: // placed by its GTID, not by when it ran
		return nil
	case info == nil || info.Statements != 1:
		ta.open, ta.unknown, ta.snapshot = true, true, true
		return nil
	case info.Begin:
		a := ta.end()
		ta.open = true
		switch {
		case info.Verb != "BEGIN" && info.Verb != "START": // XA
			ta.unknown, ta.snapshot = true, true
			return nil
		case strings.Contains(strings.ToUpper(info.Digest.Text), "CONSISTENT"):
			ta.snapshot = true // takes the read view at once
			return readView(a)
		}
		return a
	case info.End:
		a := ta.end()
		if info.Verb != "COMMIT" && info.Verb != "ROLLBACK" {
			a = nil // XA
		}
		ta.open = info.Chain
		return a
	case info.Set && info.ImplicitCommit: // SET autocommit = 1 commits what was open
		ta.auto = true
		return ta.end()
	case info.ImplicitCommit:
		ta.end()
		return nil // DDL, LOCK TABLES: not all known (the run has no Access then anyway)
	}
	if info.SetAutocommit == '0' {
		ta.auto = false
	}
	own := &order.Access{}
	known := rn.addAccess(own, info, rec)
	if !known {
		own = nil
	}
	onData := !known
	switch info.Verb {
	case "SELECT", "INSERT", "REPLACE", "UPDATE", "DELETE":
		onData = true
	}
	if !ta.open && ta.auto {
		return own // on its own
	}
	if onData {
		ta.open = true
	}
	switch {
	case !known:
		ta.unknown = ta.unknown || info.Changes()
	case info.Changes():
		ta.changed.Merge(&own.Changes)
	}
	if onData && !ta.snapshot {
		ta.snapshot = true
		return readView(own) // takes the read view of the whole transaction
	}
	return own
}

// readView is the Access of a statement that takes its transaction's
// read view and otherwise has Access a (nil: not known): it touches
// every table; what it changes is a's.
func readView(a *order.Access) *order.Access {
	if a == nil {
		return nil
	}
	return &order.Access{Touches: order.Footprint{Any: true}, Changes: a.Changes}
}

// end ends the open transaction: the Access of what ends it (nil: what it
// changed is not all known).
func (ta *trxAccess) end() *order.Access {
	var a *order.Access
	if !ta.unknown {
		a = &order.Access{Touches: ta.changed, Changes: ta.changed}
	}
	ta.open, ta.snapshot, ta.unknown, ta.changed = false, false, false, order.Footprint{}
	return a
}
