package replay

import (
	"context"
	"database/sql"
	"maps"
	"strings"

	"github.com/tandemdb/tandem/sqlinfo"
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
// conflict-free read/write replay 4.7 % of its throughput (one SET per 13
// statements; 24,259 against 25,402 qps, each run writing values of its
// own), which sysbench never pays.
//
// What is not known takes the clock, as every write did before: a table
// the target does not have at the point's start (the capture creates
// it), one the capture's DDL names (clockDDL), every table once the
// capture creates a trigger or a stored function or runs what may do
// either unseen (clockAll), a statement the analysis cannot read, and a
// followed run (a shadow), whose tables are not known at its start.

//
// A read is sent the captured time where its answer takes the clock from
// what its text does not show (runner.readsClock): a view whose
// definition reads it, a generated column that does (MariaDB allows
// NOW() in a VIRTUAL one), a stored function, a TIME value's date. Its
// answer is compared; at the time a write left on the connection, long
// before or another session's, or at the target's own clock where no
// write set one, it differed from the capture, and between targets.
// (A read whose text reads the clock, NOW(), is not compared: not sent.)

// Values of runner.clock, by the target's table name (lower-case);
// absent: not known (not a base table or view of the target's at the
// start).
const (
	clockFree  byte = 'f' // a base table whose writes cannot read the clock
	clockTakes byte = 'c' // a base table or view whose writes can, whose reads cannot
	// clockReads: reading it reads the clock (and so does writing it): a
	// view whose definition does (or may: one this account cannot read,
	// one that reads another view or calls a stored function), a base
	// table with a generated column that does.
	clockReads byte = 'r'
)

// clockKey is a table's key in runner.clock: the target's schema and
// name, lower-case ("schema.table").
func clockKey(schema, table string) string { return strings.ToLower(schema + "." + table) }

// noteClock marks what a captured statement (of verb info.Verb, run in
// session schema schema) may change in what writes read of the clock
// (see above): the tables DDL names, or all.
func (x *captureIndex) noteClock(info *sqlinfo.Info, sql, schema string) {
	if info.Statements > 1 {
		// Its first statement's verb and names only: a later one may
		// create a trigger or alter a table, or call what does.
		if mayChangeSchema(info) || info.SQLPrepare || laterStatementMayChangeSchema(sql) {
			x.clockAll = true
		}
		return
	}
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

// laterStatementMayChangeSchema reports whether a statement of a
// multi-statement text begins with a verb that may change a table's
// definition or triggers, or run what does (CALL, EXECUTE); true when the
// text cannot be lexed.
func laterStatementMayChangeSchema(sql string) bool {
	toks, err := sqlinfo.Lex(sql)
	if err != nil {
		return true
	}
	for _, st := range sqlinfo.Statements(sql, toks) {
		if len(st) == 0 {
			continue
		}
		for _, v := range []string{"CREATE", "ALTER", "DROP", "RENAME", "CALL", "EXECUTE", "PREPARE"} {
			if st[0].Is(sql, v) {
				return true
			}
		}
	}
	return false
}

// loadClock reads, on the target, which tables of the capture's schemas
// a write or a read can read the clock through (runner.clock, by the
// target's "schema.table", lower-case), and the target's stored
// functions. A query that fails leaves the clock not known: every write
// takes it. So does every base table of a schema whose triggers this
// account may not see (seesTriggers).
func (rn *runner) loadClock(ctx context.Context, db *sql.DB, schemas map[string]bool) {
	rn.clock, rn.funcs = nil, nil
	clock, funcs := map[string]byte{}, map[string]bool{}
	// Every table of the schemas is marked, not only the capture's: a
	// view the capture reads reads others.
	in := func(schema string, mark byte) func(tbl, _ string) {
		return func(tbl, _ string) {
			key := clockKey(schema, tbl)
			switch {
			case clock[key] == 0: // known as a base table first
				if mark == clockFree {
					clock[key] = mark
				}
			case mark == clockReads || clock[key] == clockFree:
				clock[key] = mark
			}
		}
	}
	views := map[string]string{} // the schemas' views, by target name: their definitions
	for schema := range schemas {
		triggers, ok := seesTriggers(ctx, db, schema)
		if !ok {
			return
		}
		ok = everyPair(ctx, db, "SELECT TABLE_NAME, '' FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_TYPE = 'BASE TABLE'", in(schema, clockFree), schema)
		if ok && !triggers {
			rn.cfg.Logger.Info("this account may not see the triggers of a schema (no TRIGGER privilege): every write to its tables is sent its captured time (SET timestamp), one command more on the server",
				"target", rn.t.Name, "schema", schema)
			// Its tables' writes take the clock; their reads, what
			// views and generated columns give.
			prefix := clockKey(schema, "")
			for key, mark := range clock {
				if mark == clockFree && strings.HasPrefix(key, prefix) {
					clock[key] = clockTakes
				}
			}
		}
		ok = ok && (!triggers ||
			// TIMESTAMP: NULL into one is the current time (explicit_defaults_for_timestamp
			// off); TIME: one copied into a DATETIME takes the current date.
			everyPair(ctx, db, "SELECT DISTINCT TABLE_NAME, '' FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND (DATA_TYPE IN ('timestamp', 'time') OR "+
				"COLUMN_DEFAULT LIKE '%(%' OR COLUMN_DEFAULT LIKE '%current%' OR COLUMN_DEFAULT LIKE '%now%' OR "+
				"EXTRA LIKE '%current%' OR EXTRA LIKE '%now%' OR EXTRA LIKE '%DEFAULT_GENERATED%')",
				in(schema, clockTakes), schema) &&
				everyPair(ctx, db, "SELECT DISTINCT EVENT_OBJECT_TABLE, '' FROM information_schema.TRIGGERS WHERE EVENT_OBJECT_SCHEMA = ?", in(schema, clockTakes), schema) &&
				everyPair(ctx, db, "SELECT DISTINCT REFERENCED_TABLE_NAME, '' FROM information_schema.REFERENTIAL_CONSTRAINTS WHERE UNIQUE_CONSTRAINT_SCHEMA = ? AND "+
					"(UPDATE_RULE NOT IN ('RESTRICT', 'NO ACTION') OR DELETE_RULE NOT IN ('RESTRICT', 'NO ACTION'))", in(schema, clockTakes), schema) &&
				// A CHECK that may read the clock (MariaDB allows NOW() in one).
				everyPair(ctx, db, "SELECT DISTINCT tc.TABLE_NAME, '' FROM information_schema.TABLE_CONSTRAINTS tc JOIN information_schema.CHECK_CONSTRAINTS cc "+
					"ON cc.CONSTRAINT_SCHEMA = tc.CONSTRAINT_SCHEMA AND cc.CONSTRAINT_NAME = tc.CONSTRAINT_NAME WHERE tc.CONSTRAINT_SCHEMA = ? AND tc.CONSTRAINT_TYPE = 'CHECK' AND "+
					"(cc.CHECK_CLAUSE LIKE '%now%' OR cc.CHECK_CLAUSE LIKE '%cur%' OR cc.CHECK_CLAUSE LIKE '%date%' OR cc.CHECK_CLAUSE LIKE '%time%' OR cc.CHECK_CLAUSE LIKE '%utc%')",
					in(schema, clockTakes), schema)) &&
			// A generated column's expression: NOW() in a VIRTUAL one
			// (MariaDB). Its COLUMN_DEFAULT is NULL, its EXTRA "VIRTUAL
			// GENERATED": the query above does not see it.
			everyPair(ctx, db, "SELECT TABLE_NAME, GENERATION_EXPRESSION FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND GENERATION_EXPRESSION <> ''", func(tbl, expr string) {
				if exprClock(expr) {
					in(schema, clockReads)(tbl, "")
				}
			}, schema) &&
			everyPair(ctx, db, "SELECT TABLE_NAME, VIEW_DEFINITION FROM information_schema.VIEWS WHERE TABLE_SCHEMA = ?", func(tbl, def string) {
				views[clockKey(schema, tbl)] = def
			}, schema)
		if !ok {
			return
		}
	}
	if !everyPair(ctx, db, "SELECT DISTINCT ROUTINE_NAME, '' FROM information_schema.ROUTINES WHERE ROUTINE_TYPE = 'FUNCTION'", func(f, _ string) {
		funcs[strings.ToLower(f)] = true
	}) {
		return
	}
	marks := make(map[string]byte, len(views))
	for key, def := range views {
		marks[key] = viewClock(def, key[:strings.IndexByte(key, '.')], clock, views, funcs)
	}
	maps.Copy(clock, marks)
	rn.clock, rn.funcs = clock, funcs
}

// exprClock reports whether a generated column's expression, as
// information_schema shows it, reads the clock (a TIME value it makes is
// the column's own type: not a date). MySQL 8 shows it with its quotes
// escaped (_utf8mb4\'x\'), unescaped first; one the lexer still cannot
// read is looked at for the clock's names.
func exprClock(expr string) bool {
	expr = strings.NewReplacer(`\'`, `'`, `\\`, `\`).Replace(expr)
	info := sqlinfo.Analyze("SELECT " + expr)
	if info.LexError == "" {
		return info.Clock
	}
	l := strings.ToLower(expr)
	for _, w := range []string{"now", "current_", "curdate", "curtime", "localtime", "utc_", "unix_timestamp", "sysdate"} {
		if strings.Contains(l, w) {
			return true
		}
	}
	return false
}

// viewClock is the mark of a view (of schema) of definition def, as
// information_schema gives it: clockReads when reading it may read the
// clock — its definition does, or is not shown (MySQL shows it only to
// the view's definer and accounts with SHOW VIEW), or reads a view, a
// table of a generated column that reads it, or a table not known
// (another schema's), or calls a stored function — else clockTakes (a
// write through it: not known). A TIME value it makes is its column's,
// not a date: a read that compares it with one says so itself.
func viewClock(def, schema string, clock map[string]byte, views map[string]string, funcs map[string]bool) byte {
	info := sqlinfo.Analyze(def)
	if strings.TrimSpace(def) == "" || info.Clock || info.LexError != "" || callsStored(info.Calls, funcs) {
		return clockReads
	}
	for _, t := range info.Reads {
		s := t.Schema
		if s == "" {
			s = schema
		}
		k := clockKey(s, t.Name)
		if _, view := views[k]; view || clock[k] == clockReads || clock[k] == 0 {
			return clockReads
		}
	}
	return clockTakes
}

// callsStored reports whether calls (sqlinfo.Info.Calls) hold a function
// of funcs (the target's stored functions, lower-case, of any schema's).
func callsStored(calls []sqlinfo.Table, funcs map[string]bool) bool {
	for _, f := range calls {
		if funcs[strings.ToLower(f.Name)] {
			return true
		}
	}
	return false
}

// seesTriggers reports whether this account sees every trigger of schema
// in information_schema.TRIGGERS: MySQL shows only those of the tables it
// holds the TRIGGER privilege on, and says nothing of the others
// (MariaDB 10.11 shows them all, which is not promised). A grant through
// a role, or on single tables, is not seen: false. ok is false when the
// server could not be asked.
func seesTriggers(ctx context.Context, db *sql.DB, schema string) (sees, ok bool) {
	// The account's own grantee, as information_schema spells it (a user
	// name may hold @).
	const grantee = "CONCAT('''', LEFT(CURRENT_USER(), CHAR_LENGTH(CURRENT_USER()) - CHAR_LENGTH(SUBSTRING_INDEX(CURRENT_USER(), '@', -1)) - 1), " +
		"'''@''', SUBSTRING_INDEX(CURRENT_USER(), '@', -1), '''')"
	ok = everyPair(ctx, db, "SELECT COUNT(*), '' FROM information_schema.USER_PRIVILEGES WHERE PRIVILEGE_TYPE = 'TRIGGER' AND GRANTEE = "+grantee,
		func(n, _ string) { sees = n != "0" }) &&
		(sees || everyPair(ctx, db, "SELECT COUNT(*), '' FROM information_schema.SCHEMA_PRIVILEGES WHERE PRIVILEGE_TYPE = 'TRIGGER' AND GRANTEE = "+grantee+
			// As the server matches a grant's schema (a pattern), in its
			// case: on lower_case_table_names=0, App's grant is not app's.
			" AND CAST(? AS BINARY) LIKE CAST(TABLE_SCHEMA AS BINARY)", func(n, _ string) { sees = n != "0" }, schema))
	return sees, ok
}

// forgetClock drops from rn.clock what the capture's DDL may change
// (captureIndex.noteClock), or all of it.
func (rn *runner) forgetClock(x *captureIndex, followed bool) {
	if followed || x.clockAll {
		rn.clock = nil
		return
	}
	for t := range x.clockDDL {
		schema, name := rn.targetTable(t)
		delete(rn.clock, clockKey(schema, name))
	}
}

// takesClock reports whether a statement that needs the captured time
// when it can read the clock (stampsTime) can, run in session schema
// schema: see above.
func (rn *runner) takesClock(info *sqlinfo.Info, schema string) bool {
	if rn.clock == nil || info.Clock || info.TimeValue || info.Unanalysable || info.WritesUnknown || info.Statements != 1 || len(info.Writes) == 0 {
		return true
	}
	switch info.Verb {
	case "INSERT", "REPLACE", "UPDATE", "DELETE":
	default:
		return true // LOAD, DDL, SET, a SELECT that assigns …
	}
	for _, t := range info.Writes {
		if rn.clockOf(t, schema) != clockFree {
			return true
		}
	}
	for _, t := range info.Reads {
		if rn.clockOf(t, schema) != clockFree {
			return true // a view (NOW() in its definition), a TIME column, or not known
		}
	}
	return callsStored(info.Calls, rn.funcs) // a stored function (of any schema's with that name)
}

// readsClock reports whether a read (one stampsTime leaves alone, whose
// answer is compared) run in session schema schema needs the captured
// time: its text reads the clock where its answer does not show it (a
// TIME value's date, FOR SYSTEM_TIME), or it reads a view or generated
// column that reads the clock, or a table not known (created by the
// capture, qualified on a target whose DSN names a database), or calls a
// stored function. With the clock not known at all (runner.clock nil: a
// shadow, a capture that calls procedures or creates triggers or
// functions, a server whose information_schema could not be read),
// every write takes it, and a read takes what the connection's last
// write left, or the target's own clock before any: as before replay
// told writes apart.
func (rn *runner) readsClock(info *sqlinfo.Info, schema string) bool {
	if info.Clock || info.TimeValue {
		return true
	}
	if rn.clock == nil {
		return false
	}
	for _, t := range info.Reads {
		if m := rn.clockOf(t, schema); m == clockReads || m == 0 {
			return true
		}
	}
	return callsStored(info.Calls, rn.funcs)
}

// clockOf is rn.clock's mark for a table a statement run in session
// schema schema names; 0 when not known. A name qualified with its
// schema on a target whose DSN names a database is not known: the
// statement reaches that schema there, not the DSN's, whose tables
// loadClock read.
func (rn *runner) clockOf(t sqlinfo.Table, schema string) byte {
	switch {
	case t.Schema == "":
		schema = rn.schemaFor(schema)
	case rn.db != "":
		return 0
	default:
		schema = t.Schema
	}
	return rn.clock[clockKey(schema, t.Name)]
}
