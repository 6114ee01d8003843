package replay

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/tandemdb/tandem/sqlinfo"
	"github.com/tandemdb/tandem/targets"
)

// serverChoices is what the targets' schemas make a server choose on its
// own when a statement writes: a column whose DEFAULT calls a function
// whose value each server chooses anew (UUID(), RAND() …:
// sqlinfo.ChoosesValues), a trigger that calls one, a stored procedure
// that does. The statement names none of it (INSERT INTO t (a) VALUES (1)
// into a table whose id defaults to UUID(); CALL p()), yet each target
// holds a value of its own afterwards, and every later read of the table
// differed between targets, and from the capture, although no engine
// differed. Such a write counts as one of the statement's own chosen
// values does (captureIndex.noteChosen): reads of the table after it are
// counted apart (compare.ReasonChosenValues).
//
// What each target holds is read at the run's start (loadServerChoices);
// names are the target's, lower-case.
type serverChoices struct {
	// db: each target's database (targets.Target.Database): the schema
	// every captured schema runs in there, "" when each keeps its own.
	db []string
	// tables: by target, "schema.table" → the writes that choose: 'I'
	// (an INSERT, REPLACE or LOAD: a DEFAULT, an INSERT trigger), 'U',
	// 'D' (an UPDATE or DELETE trigger).
	tables []map[string]string
	// also: by target, "schema.table" and event → the tables a choosing
	// trigger's body writes there (with their schema).
	also []map[string][]sqlinfo.Table
	// procs: by target, "schema.name" of a procedure whose body chooses
	// → the tables it writes (with their schema); nil when the body
	// writes through what it does not name (then every table the run
	// writes).
	procs []map[string][]sqlinfo.Table
	// modes: by target, "schema.name" of a procedure → its parameters'
	// modes by position (IN, OUT, INOUT).
	modes []map[string][]string
	// funcs: by target, "schema.name" of the stored functions whose
	// value each server chooses anew (their body calls UUID() …, or
	// such a function); anyFunc: some target has one.
	funcs   []map[string]bool
	anyFunc bool
	// what: one line per kind found, for the run's notes; hidden: the
	// procedures whose bodies the account cannot read.
	what   []string
	hidden string
}

// notes are what the run's notes say of sc.
func (sc *serverChoices) notes() []string {
	if sc == nil {
		return nil
	}
	var ns []string
	if len(sc.what) > 0 {
		ns = append(ns, fmt.Sprintf("the targets' schemas give rows values each server chooses on its own (%s): a write that reaches them leaves each target values of its own, so reads of those tables after it are counted apart (nondeterministic-write), against the capture and between targets; what the capture creates itself is not read", strings.Join(sc.what, "; ")))
	}
	if sc.hidden != "" {
		ns = append(ns, fmt.Sprintf("this account cannot read the bodies of the stored routines %s (their definer's, or SHOW_ROUTINE's on MySQL): values they choose on their own are not known, and a difference after a write that calls one may be those values, not the engine's", sc.hidden))
	}
	return ns
}

// systemSchemas are the server's own schemas: never a capture's tables.
const systemSchemas = "('mysql', 'information_schema', 'performance_schema', 'sys')"

// loadServerChoices reads what each target's schemas choose on their own
// (see serverChoices). nil when none does; an error when a target could
// not be asked (the run cannot tell which differences are the engines').
func loadServerChoices(ctx context.Context, ts []targets.Target, dbs []*sql.DB) (*serverChoices, error) {
	sc := &serverChoices{}
	var defaults, triggers, procs, fnames, hidden []string
	found := false
	for i, db := range dbs {
		tables, also, ps, modes := map[string]string{}, map[string][]sqlinfo.Table{}, map[string][]sqlinfo.Table{}, map[string][]string{}
		key := func(schema, name string) string { return strings.ToLower(schema + "." + name) }
		mark := func(k string, ev byte) {
			if !strings.ContainsRune(tables[k], rune(ev)) {
				tables[k] += string(ev)
			}
		}
		// Stored functions first: a trigger, procedure or function that
		// calls one that chooses chooses too.
		fns, bodies := map[string]bool{}, map[string][2]string{}
		err := eachRow(ctx, db, "SELECT ROUTINE_SCHEMA, ROUTINE_NAME, COALESCE(ROUTINE_DEFINITION, '') FROM information_schema.ROUTINES "+
			"WHERE ROUTINE_TYPE = 'FUNCTION' AND ROUTINE_SCHEMA NOT IN "+systemSchemas,
			func(f []string) {
				if f[2] == "" {
					hidden = appendOnce(hidden, f[0]+"."+f[1])
					return
				}
				bodies[key(f[0], f[1])] = [2]string{f[0], f[2]}
			})
		// chooses reports whether body, of a routine in schema, calls a
		// function whose value each server chooses anew.
		chooses := func(body, schema string) bool {
			if sqlinfo.ChoosesValues(body) {
				return true
			}
			for _, f := range sqlinfo.CalledFunctions(body) {
				if fns[key(f.In(schema).Schema, f.Name)] {
					return true
				}
			}
			return false
		}
		for changed := true; changed; { // to a fixed point: f calls g calls UUID()
			changed = false
			for k, b := range bodies {
				if !fns[k] && chooses(b[1], b[0]) {
					fns[k], changed = true, true
				}
			}
		}
		for k := range fns {
			fnames = appendOnce(fnames, k)
		}
		slices.Sort(fnames)
		var version string
		if err == nil {
			err = db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version)
		}
		mariadb := strings.Contains(strings.ToLower(version), "mariadb")
		if err == nil {
			err = eachRow(ctx, db, "SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME, COLUMN_DEFAULT, EXTRA FROM information_schema.COLUMNS "+
				"WHERE COLUMN_DEFAULT IS NOT NULL AND (COLUMN_DEFAULT LIKE '%(%' OR COLUMN_DEFAULT LIKE '%current\\_%') AND TABLE_SCHEMA NOT IN "+systemSchemas,
				func(f []string) {
					// An expression, not a literal: MariaDB quotes a
					// literal default ('uuid()' is a string); MySQL shows
					// it bare and marks an expression DEFAULT_GENERATED.
					expr := mariadb && !strings.HasPrefix(f[3], "'") || strings.Contains(f[4], "DEFAULT_GENERATED")
					if expr && sqlinfo.ChoosesValues(f[3]) {
						mark(key(f[0], f[1]), 'I')
						defaults = appendOnce(defaults, fmt.Sprintf("%s.%s.%s DEFAULT %s", f[0], f[1], f[2], f[3]))
					}
				})
		}
		if err == nil {
			err = eachRow(ctx, db, "SELECT TRIGGER_SCHEMA, TRIGGER_NAME, EVENT_OBJECT_SCHEMA, EVENT_OBJECT_TABLE, EVENT_MANIPULATION, ACTION_STATEMENT, ACTION_TIMING "+
				"FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA NOT IN "+systemSchemas,
				func(f []string) {
					if !chooses(f[5], f[0]) || f[4] == "" {
						return
					}
					k, ev := key(f[2], f[3]), f[4][0] // INSERT, UPDATE, DELETE
					if f[6] == "BEFORE" {
						mark(k, ev) // it may set the row's columns (NEW.id = UUID()); an AFTER trigger cannot
					} else if _, ok := tables[k]; !ok {
						tables[k] = "" // found: what its body writes is in also
					}
					ws, _ := sqlinfo.BodyWrites(f[5])
					for _, w := range ws {
						also[k+string(ev)] = append(also[k+string(ev)], w.In(f[0]))
					}
					triggers = appendOnce(triggers, fmt.Sprintf("%s.%s (%s on %s.%s)", f[0], f[1], f[4], f[2], f[3]))
				})
		}
		if err == nil {
			err = eachRow(ctx, db, "SELECT ROUTINE_SCHEMA, ROUTINE_NAME, COALESCE(ROUTINE_DEFINITION, '') FROM information_schema.ROUTINES "+
				"WHERE ROUTINE_TYPE = 'PROCEDURE' AND ROUTINE_SCHEMA NOT IN "+systemSchemas,
				func(f []string) {
					if f[2] == "" {
						// NULL: not this account's to read (its definer's,
						// or SHOW_ROUTINE's on MySQL).
						hidden = appendOnce(hidden, f[0]+"."+f[1])
						return
					}
					if !chooses(f[2], f[0]) {
						return
					}
					ws, ok := sqlinfo.BodyWrites(f[2])
					for j := range ws {
						ws[j] = ws[j].In(f[0])
					}
					if !ok {
						ws = nil
					} else if ws == nil {
						ws = []sqlinfo.Table{} // writes nothing
					}
					ps[key(f[0], f[1])] = ws
					procs = appendOnce(procs, f[0]+"."+f[1])
				})
		}
		if err == nil {
			err = eachRow(ctx, db, "SELECT SPECIFIC_SCHEMA, SPECIFIC_NAME, COALESCE(PARAMETER_MODE, '') FROM information_schema.PARAMETERS "+
				"WHERE ROUTINE_TYPE = 'PROCEDURE' AND SPECIFIC_SCHEMA NOT IN "+systemSchemas+" ORDER BY SPECIFIC_SCHEMA, SPECIFIC_NAME, ORDINAL_POSITION",
				func(f []string) {
					k := key(f[0], f[1])
					modes[k] = append(modes[k], strings.ToUpper(f[2]))
				})
		}
		if err != nil {
			return nil, fmt.Errorf("target %s: reading its schemas' defaults, triggers and procedures (to tell values each server chooses from the engines' differences): %w", ts[i].Name, err)
		}
		found = found || len(tables) > 0 || len(ps) > 0 || len(modes) > 0 || len(fns) > 0
		sc.db = append(sc.db, strings.ToLower(ts[i].Database()))
		sc.modes, sc.funcs = append(sc.modes, modes), append(sc.funcs, fns)
		sc.anyFunc = sc.anyFunc || len(fns) > 0
		sc.tables, sc.also, sc.procs = append(sc.tables, tables), append(sc.also, also), append(sc.procs, ps)
	}
	if len(hidden) > 0 {
		sc.hidden = examples(hidden)
	}
	if !found && len(hidden) == 0 {
		return nil, nil
	}
	var what []string
	for _, l := range []struct {
		what  string
		names []string
	}{{"column defaults", defaults}, {"triggers", triggers}, {"procedures", procs}, {"functions", fnames}} {
		if len(l.names) > 0 {
			what = append(what, fmt.Sprintf("%s %s", l.what, examples(l.names)))
		}
	}
	sc.what = what
	return sc, nil
}

// examples lists up to three names, and how many more.
func examples(names []string) string {
	if len(names) <= 3 {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:3], ", "), len(names)-3)
}

func appendOnce(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// eachRow runs query and calls f with each row's columns as strings (NULL
// as "").
func eachRow(ctx context.Context, db *sql.DB, query string, f func([]string)) error {
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		return err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return err
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	out := make([]string, len(cols))
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		for i, v := range vals {
			out[i] = v.String
		}
		f(out)
	}
	return rows.Err()
}

// events are the trigger events a statement of verb fires on the tables
// it writes: an INSERT … ON DUPLICATE KEY UPDATE may update, a REPLACE
// may delete; a statement of another verb (DDL, unknown) any.
func events(verb string) string {
	switch verb {
	case "INSERT", "LOAD":
		return "IU"
	case "REPLACE":
		return "ID"
	case "UPDATE":
		return "U"
	case "DELETE":
		return "D"
	}
	return "IUD"
}

// written returns the captured tables ("schema.name", as qualify gives
// them) where a statement of verb, writing writes (as the statement names
// them) in session schema schema, makes some target choose values of its
// own, and the tables its triggers then write; for a CALL (no writes
// named), those of the procedure called. all: a procedure that chooses
// and writes what it does not name (every table may hold such values).
//
// Names: a table the statement names without a schema is in the
// session's, which a target whose DSN names a database runs in that
// one (runner.schemaFor); one it qualifies is that schema's there too.
func (sc *serverChoices) written(verb, sql, schema string, writes []sqlinfo.Table) (chosen []string, all bool) {
	if sc == nil {
		return nil, false
	}
	for i := range sc.tables {
		// on gives a named table's schema on this target.
		on := func(named string) string {
			if named == "" {
				if sc.db[i] != "" {
					return sc.db[i]
				}
				return strings.ToLower(schema)
			}
			return strings.ToLower(named)
		}
		// back names a table of the target's as the capture does: in the
		// session's schema when it is the one the session runs in there.
		back := func(t sqlinfo.Table, named string) string {
			if named == "" && strings.EqualFold(t.Schema, on("")) {
				return sqlinfo.Table{Schema: schema, Name: t.Name}.String()
			}
			return t.String()
		}
		if verb == "CALL" {
			s, n, _, ok := sqlinfo.CallArguments(sql)
			if !ok {
				continue
			}
			ws, chooses := sc.procs[i][on(s)+"."+strings.ToLower(n)]
			if !chooses {
				continue
			}
			if ws == nil {
				return nil, true
			}
			for _, w := range ws {
				chosen = appendOnce(chosen, back(w, s))
			}
			continue
		}
		for _, w := range writes {
			k := on(w.Schema) + "." + strings.ToLower(w.Name)
			evs := sc.tables[i][k]
			for _, ev := range events(verb) {
				if strings.ContainsRune(evs, ev) {
					chosen = appendOnce(chosen, w.In(schema).String())
				}
				for _, t := range sc.also[i][k+string(ev)] {
					chosen = appendOnce(chosen, back(t, w.Schema))
				}
			}
		}
	}
	return chosen, false
}

// inOnly are the user variables a CALL passes only as IN parameters of
// the procedure, as the targets define it: the routine cannot assign
// them (sqlinfo.UserVarFlow takes every variable passed whole as
// assigned). nil when the procedure is not known.
func (sc *serverChoices) inOnly(sql, schema string) map[string]bool {
	if sc == nil {
		return nil
	}
	s, n, args, ok := sqlinfo.CallArguments(sql)
	if !ok {
		return nil
	}
	for i := range sc.modes {
		on := strings.ToLower(s)
		if s == "" {
			on = strings.ToLower(schema)
			if sc.db[i] != "" {
				on = sc.db[i]
			}
		}
		modes, known := sc.modes[i][on+"."+strings.ToLower(n)]
		if !known || len(modes) != len(args) && !(len(modes) == 0 && len(args) == 1 && args[0] == "") {
			continue
		}
		in, out := map[string]bool{}, map[string]bool{}
		for j, a := range args {
			if a == "" {
				continue
			}
			if j < len(modes) && modes[j] == "IN" {
				in[a] = true
			} else {
				out[a] = true
			}
		}
		for a := range out {
			delete(in, a)
		}
		return in
	}
	return nil
}

// callsChosen reports whether sql, run in session schema schema, calls a
// stored function whose value some target chooses on its own.
func (sc *serverChoices) callsChosen(sql, schema string) bool {
	if sc == nil || !sc.anyFunc {
		return false
	}
	fs := sqlinfo.CalledFunctions(sql)
	for i, fns := range sc.funcs {
		for _, f := range fs {
			s := f.Schema
			if s == "" {
				s = schema
				if sc.db[i] != "" {
					s = sc.db[i]
				}
			}
			if fns[strings.ToLower(s+"."+f.Name)] {
				return true
			}
		}
	}
	return false
}
