package replay

import (
	"context"
	"database/sql"
	"slices"
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
// Rows are named by primary key (rowKeys) only where the keys hold: one
// table, no subquery, and for a change, no assignment to a key column
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
	tangled := map[string]bool{}
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
			}, schema)
		if !ok {
			return
		}
	}
	rn.tangled, rn.uniq = tangled, uniq
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
	keys := rn.rowKeys(info, rec)
	if keys == nil || !info.Changes() {
		return keys
	}
	table := strings.ToLower(p.Table.In(rec.Schema).String())
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
	case "CREATE", "ALTER", "DROP", "RENAME", "TRUNCATE":
		return true
	}
	return info.TableDDL || info.Unanalysable && info.Class != sqlinfo.ClassRead || info.WritesUnknown
}
