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
	// what: one line per kind found, for the run's notes.
	what []string
}

// systemSchemas are the server's own schemas: never a capture's tables.
const systemSchemas = "('mysql', 'information_schema', 'performance_schema', 'sys')"

// loadServerChoices reads what each target's schemas choose on their own
// (see serverChoices). nil when none does; an error when a target could
// not be asked (the run cannot tell which differences are the engines').
func loadServerChoices(ctx context.Context, ts []targets.Target, dbs []*sql.DB) (*serverChoices, error) {
	sc := &serverChoices{}
	var defaults, triggers, procs []string
	found := false
	for i, db := range dbs {
		tables, also, ps := map[string]string{}, map[string][]sqlinfo.Table{}, map[string][]sqlinfo.Table{}
		key := func(schema, name string) string { return strings.ToLower(schema + "." + name) }
		mark := func(k string, ev byte) {
			if !strings.ContainsRune(tables[k], rune(ev)) {
				tables[k] += string(ev)
			}
		}
		err := eachRow(ctx, db, "SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME, COLUMN_DEFAULT FROM information_schema.COLUMNS "+
			"WHERE COLUMN_DEFAULT IS NOT NULL AND (COLUMN_DEFAULT LIKE '%(%' OR COLUMN_DEFAULT LIKE '%current\\_%') AND TABLE_SCHEMA NOT IN "+systemSchemas,
			func(f []string) {
				if sqlinfo.ChoosesValues(f[3]) {
					mark(key(f[0], f[1]), 'I')
					defaults = appendOnce(defaults, fmt.Sprintf("%s.%s.%s DEFAULT %s", f[0], f[1], f[2], f[3]))
				}
			})
		if err == nil {
			err = eachRow(ctx, db, "SELECT TRIGGER_SCHEMA, TRIGGER_NAME, EVENT_OBJECT_SCHEMA, EVENT_OBJECT_TABLE, EVENT_MANIPULATION, ACTION_STATEMENT "+
				"FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA NOT IN "+systemSchemas,
				func(f []string) {
					if !sqlinfo.ChoosesValues(f[5]) {
						return
					}
					k, ev := key(f[2], f[3]), f[4][0] // INSERT, UPDATE, DELETE
					mark(k, ev)
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
					if !sqlinfo.ChoosesValues(f[2]) {
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
		if err != nil {
			return nil, fmt.Errorf("target %s: reading its schemas' defaults, triggers and procedures (to tell values each server chooses from the engines' differences): %w", ts[i].Name, err)
		}
		found = found || len(tables) > 0 || len(ps) > 0
		sc.db = append(sc.db, strings.ToLower(ts[i].Database()))
		sc.tables, sc.also, sc.procs = append(sc.tables, tables), append(sc.also, also), append(sc.procs, ps)
	}
	if !found {
		return nil, nil
	}
	for _, l := range []struct {
		what  string
		names []string
	}{{"column defaults", defaults}, {"triggers", triggers}, {"procedures", procs}} {
		if len(l.names) > 0 {
			sc.what = append(sc.what, fmt.Sprintf("%s %s", l.what, examples(l.names)))
		}
	}
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
// them) on which a statement of verb that writes writes (in captured
// schema schema) makes some target choose values of its own, and the
// tables its triggers then write; for a CALL (writes empty), those of
// the procedure called. all: a procedure that chooses and writes what it
// does not name (every table may hold such values).
func (sc *serverChoices) written(verb, sql, schema string, writes []string) (chosen []string, all bool) {
	if sc == nil {
		return nil, false
	}
	for i := range sc.tables {
		// A captured table's name on this target.
		target := func(captured string) (string, string) {
			s, n, ok := strings.Cut(captured, ".")
			if !ok {
				s, n = schema, captured
			}
			if sc.db[i] != "" {
				s = sc.db[i]
			}
			return strings.ToLower(s), strings.ToLower(n)
		}
		// A table named on the target, as the capture names it: in the
		// captured schema when the target runs every schema in one.
		captured := func(t sqlinfo.Table, capturedSchema string) string {
			if sc.db[i] != "" && strings.EqualFold(t.Schema, sc.db[i]) {
				return sqlinfo.Table{Schema: capturedSchema, Name: t.Name}.String()
			}
			return t.String()
		}
		if verb == "CALL" {
			s, n, ok := calledProcedure(sql)
			if !ok {
				continue
			}
			if s == "" {
				s = schema
			}
			ts, s2 := target(sqlinfo.Table{Schema: s, Name: n}.String())
			ws, chooses := sc.procs[i][ts+"."+s2]
			if !chooses {
				continue
			}
			if ws == nil {
				return nil, true
			}
			for _, w := range ws {
				chosen = appendOnce(chosen, captured(w, s))
			}
			continue
		}
		for _, w := range writes {
			ts, tn := target(w)
			k := ts + "." + tn
			evs := sc.tables[i][k]
			capturedSchema := schema
			if s, _, ok := strings.Cut(w, "."); ok {
				capturedSchema = s
			}
			for _, ev := range events(verb) {
				if !strings.ContainsRune(evs, ev) {
					continue
				}
				chosen = appendOnce(chosen, w)
				for _, t := range sc.also[i][k+string(ev)] {
					chosen = appendOnce(chosen, captured(t, capturedSchema))
				}
			}
		}
	}
	return chosen, false
}

// calledProcedure reads CALL's [schema.]name.
func calledProcedure(sql string) (schema, name string, ok bool) {
	toks, err := sqlinfo.Lex(sql)
	if err != nil || len(toks) < 2 || !toks[0].Is(sql, "CALL") {
		return "", "", false
	}
	part := func(t sqlinfo.Token) string { return sqlinfo.Unquote(t.Text(sql)) }
	if len(toks) >= 4 && toks[2].IsPunct(sql, ".") {
		return part(toks[1]), part(toks[3]), true
	}
	return "", part(toks[1]), true
}
