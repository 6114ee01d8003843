package replay

import (
	"context"
	"database/sql"
	"strings"

	"github.com/tandemdb/tandem/sqlinfo"
	"github.com/tandemdb/tandem/store"
)

// The captured time goes to the target (SET timestamp, worker.before)
// before a write only when the write can read the session's clock: its
// text does (sqlinfo.Info.Clock), or its table's schema does — a column
// whose DEFAULT or ON UPDATE is an expression such as CURRENT_TIMESTAMP,
// a TIMESTAMP column (NULL into one is the current time when
// explicit_defaults_for_timestamp is off), a trigger, system versioning,
// a foreign key whose ON UPDATE or ON DELETE changes other tables' rows
// — or a view or stored function it reads through. Each SET is a command
// of its own on the server: sent before every write, it cost a
// conflict-free read/write replay 13 % of its throughput (one SET per 13
// statements), which sysbench never pays.
//
// What is not known takes the clock, as every write did before: a table
// the target does not have at the point's start (the capture creates
// it), one the capture's DDL names (clockDDL), every table once the
// capture creates a trigger or a stored function or runs what may do
// either unseen (clockAll), a statement the analysis cannot read, and a
// followed run (a shadow), whose tables are not known at its start.

// Values of runner.clock, by captured table name (lower-case); absent:
// not known (not a base table of the target's at the start, or a view).
const (
	clockFree  byte = 'f' // a base table whose writes cannot read the clock
	clockTakes byte = 'c' // a base table whose writes can
)

// noteClock marks what a captured statement (of verb info.Verb, run in
// session schema schema) may change in what writes read of the clock
// (see above): the tables DDL names, or all.
func (x *captureIndex) noteClock(info *sqlinfo.Info, sql, schema string) {
	switch info.Verb {
	case "CALL", "EXECUTE", "PREPARE":
		// A procedure or dynamic SQL may create a trigger or alter a table.
		x.clockAll = true
		return
	case "CREATE", "ALTER", "DROP", "RENAME":
	default:
		return
	}
	if info.Verb == "CREATE" {
		toks, err := sqlinfo.Lex(sql)
		if err != nil {
			x.clockAll = true
			return
		}
		for _, t := range toks[:min(len(toks), 12)] {
			if t.Is(sql, "TRIGGER") || t.Is(sql, "FUNCTION") {
				x.clockAll = true
				return
			}
		}
	}
	names := qualify(info.Reads, schema, qualify(info.Created, schema, qualify(info.Writes, schema, nil)))
	if len(names) == 0 && (info.TableDDL || info.Verb == "RENAME" || info.Unanalysable && info.Verb != "DROP") {
		x.clockAll = true
		return
	}
	if x.clockDDL == nil {
		x.clockDDL = map[string]bool{}
	}
	for _, n := range names {
		x.clockDDL[strings.ToLower(n)] = true
	}
}

// loadClock reads, on the target, which of the capture's tables a write
// can read the clock through (runner.clock), and the target's stored
// functions; byTarget maps each target table (schema, name, lower-case)
// to its captured name. A query that fails leaves the clock not known:
// every write takes it.
func (rn *runner) loadClock(ctx context.Context, db *sql.DB, schemas map[string]bool, byTarget map[[2]string]string) {
	rn.clock, rn.funcs = nil, nil
	clock, funcs := map[string]byte{}, map[string]bool{}
	in := func(schema string, mark byte) func(tbl, _ string) {
		return func(tbl, _ string) {
			if captured, ok := byTarget[[2]string{strings.ToLower(schema), strings.ToLower(tbl)}]; ok && (mark == clockFree || clock[captured] != 0) {
				clock[captured] = mark
			}
		}
	}
	for schema := range schemas {
		ok := everyPair(ctx, db, "SELECT TABLE_NAME, '' FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_TYPE = 'BASE TABLE'", in(schema, clockFree), schema) &&
			everyPair(ctx, db, "SELECT DISTINCT TABLE_NAME, '' FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND (DATA_TYPE = 'timestamp' OR "+
				"COLUMN_DEFAULT LIKE '%(%' OR COLUMN_DEFAULT LIKE '%current%' OR COLUMN_DEFAULT LIKE '%now%' OR "+
				"EXTRA LIKE '%current%' OR EXTRA LIKE '%now%' OR EXTRA LIKE '%DEFAULT_GENERATED%' OR EXTRA LIKE '%ROW START%' OR EXTRA LIKE '%ROW END%')",
				in(schema, clockTakes), schema) &&
			everyPair(ctx, db, "SELECT DISTINCT EVENT_OBJECT_TABLE, '' FROM information_schema.TRIGGERS WHERE EVENT_OBJECT_SCHEMA = ?", in(schema, clockTakes), schema) &&
			everyPair(ctx, db, "SELECT DISTINCT REFERENCED_TABLE_NAME, '' FROM information_schema.REFERENTIAL_CONSTRAINTS WHERE UNIQUE_CONSTRAINT_SCHEMA = ? AND "+
				"(UPDATE_RULE NOT IN ('RESTRICT', 'NO ACTION') OR DELETE_RULE NOT IN ('RESTRICT', 'NO ACTION'))", in(schema, clockTakes), schema)
		if !ok {
			return
		}
	}
	if !everyPair(ctx, db, "SELECT DISTINCT ROUTINE_NAME, '' FROM information_schema.ROUTINES WHERE ROUTINE_TYPE = 'FUNCTION'", func(f, _ string) {
		funcs[strings.ToLower(f)] = true
	}) {
		return
	}
	rn.clock, rn.funcs = clock, funcs
}

// forgetClock drops from rn.clock what the capture's DDL may change
// (captureIndex.noteClock), or all of it.
func (rn *runner) forgetClock(x *captureIndex, followed bool) {
	if followed || x.clockAll {
		rn.clock = nil
		return
	}
	for t := range x.clockDDL {
		delete(rn.clock, t)
	}
}

// takesClock reports whether a statement that needs the captured time
// when it can read the clock (stampsTime) can: see above.
func (rn *runner) takesClock(info *sqlinfo.Info, sql string, rec *store.Record) bool {
	if rn.clock == nil || info.Clock || info.Unanalysable || info.WritesUnknown || info.Statements != 1 || len(info.Writes) == 0 {
		return true
	}
	switch info.Verb {
	case "INSERT", "REPLACE", "UPDATE", "DELETE":
	default:
		return true // LOAD, DDL, SET, a SELECT that assigns …
	}
	for _, t := range info.Writes {
		if rn.clock[strings.ToLower(t.In(rec.Schema).String())] != clockFree {
			return true
		}
	}
	for _, t := range info.Reads {
		if rn.clock[strings.ToLower(t.In(rec.Schema).String())] == 0 {
			return true // a view (NOW() in its definition), or not known
		}
	}
	if len(rn.funcs) > 0 && strings.IndexByte(sql, '(') >= 0 {
		for _, f := range sqlinfo.CalledFunctions(sql) {
			if rn.funcs[strings.ToLower(f.Name)] {
				return true // a stored function (of any schema's with that name)
			}
		}
	}
	return false
}
