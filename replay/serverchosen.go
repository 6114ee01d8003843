package replay

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/tandemdb/tandem/compare"
	"github.com/tandemdb/tandem/sqlinfo"
	"github.com/tandemdb/tandem/targets"
)

// serverChoices is what the targets' schemas make a server choose on its
// own when a statement writes: a column whose DEFAULT calls a function
// whose value each server chooses anew (UUID(), RAND() …:
// sqlinfo.ChoosesValues), a trigger, a stored procedure or a stored
// function that calls one (or calls a routine that does). The statement
// names none of it (INSERT INTO t (a) VALUES (1) into a table whose id
// defaults to UUID(); CALL p(); INSERT … VALUES (mkid())), yet each
// target holds a value of its own afterwards, and every later read of the
// table differed between targets, and from the capture, although no
// engine differed. Such a write counts as one of the statement's own
// chosen values does (captureIndex.noteChosen): reads of the table after
// it are counted apart (compare.ReasonChosenValues). So does a CALL whose
// arguments hold such a value, on the tables its procedure writes.
//
// What each target holds is read at the run's start (loadServerChoices),
// and what the capture itself creates is added as the scan meets it
// (learn); names are the target's, lower-case.
type serverChoices struct {
	// db: each target's database (targets.Target.Database): the schema
	// every captured session's own schema runs in there, "" when each
	// keeps its own.
	db []string
	// tables: by target, "schema.table" → the writes that choose: 'I'
	// (an INSERT, REPLACE or LOAD: a DEFAULT, a BEFORE INSERT trigger),
	// 'U', 'D' (BEFORE UPDATE, DELETE triggers).
	tables []map[string]string
	// also: by target, "schema.table" and event → the tables a choosing
	// trigger's body writes there (all: it writes what it does not name).
	also []map[string]routine
	// procs, funcs: by target, "schema.name" of each stored procedure and
	// function (routine.chooses says which choose).
	procs, funcs []map[string]routine
	// trigs: by target, every trigger read; one applied has marked
	// tables and also. One that chooses only once a routine it calls does
	// is applied when the capture creates that routine (learn).
	trigs [][]trigger
	// modes: by target, "schema.name" of a procedure → its parameters'
	// modes by position (IN, OUT, INOUT).
	modes []map[string][]string
	// anyFunc: some target has a stored function that chooses.
	anyFunc bool
	// what: one line per kind found, for the run's notes; hidden: the
	// routines whose bodies the account cannot read.
	what   []string
	hidden string
}

// trigger is a trigger of a target's: on table ("schema.table") for
// event ev ('I', 'U', 'D'), BEFORE or not, its body r.
type trigger struct {
	name, table string
	ev          byte
	before      bool
	r           routine
	applied     bool
}

// routine is what a stored routine's (or a trigger's) body does.
type routine struct {
	schema string // where it is defined: its unqualified names are there
	// chooses: it calls a function whose value each server chooses anew,
	// or a routine that does.
	chooses bool
	// writes: the tables it writes (with their schema); all: it writes
	// through what it does not name (a CALL, dynamic SQL).
	writes []sqlinfo.Table
	all    bool
	// direct: its own text calls such a function; funcs, procs: the
	// functions and procedures it calls (for the fixed point).
	direct       bool
	funcs, procs []sqlinfo.Table
}

// readRoutine reads a body defined in schema; ok is false when it cannot
// be lexed (what it does is not known).
func readRoutine(schema, body string) (routine, bool) {
	if _, err := sqlinfo.Lex(body); err != nil {
		return routine{}, false
	}
	ws, ok := sqlinfo.BodyWrites(body)
	r := routine{schema: schema, direct: sqlinfo.ChoosesValues(body), all: !ok,
		funcs: sqlinfo.CalledFunctions(body), procs: sqlinfo.BodyCalls(body)}
	for _, w := range ws {
		r.writes = append(r.writes, w.In(schema))
	}
	return r, true
}

// notes are what the run's notes say of sc.
func (sc *serverChoices) notes() []string {
	if sc == nil {
		return nil
	}
	var ns []string
	if len(sc.what) > 0 {
		ns = append(ns, fmt.Sprintf("the targets' schemas give rows values each server chooses on its own (%s): a write that reaches them leaves each target values of its own, so reads of those tables after it are counted apart (nondeterministic-write), against the capture and between targets; what the capture creates itself counts from its CREATE on", strings.Join(sc.what, "; ")))
	}
	if sc.hidden != "" {
		ns = append(ns, fmt.Sprintf("the bodies of the stored routines %s cannot be read (their definer's, SHOW_ROUTINE's on MySQL, or not lexed): values they choose on their own are not known, and a difference after a write that calls one may be those values, not the engine's", sc.hidden))
	}
	return ns
}

// systemSchemas are the server's own schemas: never a capture's tables.
const systemSchemas = "('mysql', 'information_schema', 'performance_schema', 'sys')"

func nameKey(schema, name string) string { return strings.ToLower(schema + "." + name) }

// loadServerChoices reads what each target's schemas choose on their own
// (see serverChoices); an error when a target could not be asked (the
// run cannot tell which differences are the engines').
func loadServerChoices(ctx context.Context, ts []targets.Target, dbs []*sql.DB) (*serverChoices, error) {
	sc := &serverChoices{}
	var defaults, triggers, procNames, funcNames, hidden []string
	for i, db := range dbs {
		tables, also, modes := map[string]string{}, map[string]routine{}, map[string][]string{}
		var trigs []trigger
		procs, funcs := map[string]routine{}, map[string]routine{}
		mark := func(k string, ev byte) {
			if !strings.ContainsRune(tables[k], rune(ev)) {
				tables[k] += string(ev)
			}
		}
		// Stored routines first: a trigger or routine that calls one that
		// chooses chooses too.
		err := eachRow(ctx, db, "SELECT ROUTINE_SCHEMA, ROUTINE_NAME, ROUTINE_TYPE, COALESCE(ROUTINE_DEFINITION, '') FROM information_schema.ROUTINES "+
			"WHERE ROUTINE_SCHEMA NOT IN "+systemSchemas,
			func(f []string) {
				r, ok := readRoutine(f[0], f[3])
				if f[3] == "" || !ok {
					// NULL: not this account's to read (its definer's, or
					// SHOW_ROUTINE's on MySQL); or not lexed.
					hidden = append(hidden, f[0]+"."+f[1])
					r = routine{schema: f[0], all: true}
				}
				if strings.EqualFold(f[2], "FUNCTION") {
					funcs[nameKey(f[0], f[1])] = r
				} else {
					procs[nameKey(f[0], f[1])] = r
				}
			})
		sc.procs, sc.funcs = append(sc.procs, procs), append(sc.funcs, funcs)
		sc.settle(i)
		for k, r := range funcs {
			if r.chooses {
				funcNames = append(funcNames, k)
			}
		}
		for k, r := range procs {
			if r.chooses {
				procNames = append(procNames, k)
			}
		}
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
						mark(nameKey(f[0], f[1]), 'I')
						defaults = append(defaults, fmt.Sprintf("%s.%s.%s DEFAULT %s", f[0], f[1], f[2], f[3]))
					}
				})
		}
		if err == nil {
			err = eachRow(ctx, db, "SELECT TRIGGER_SCHEMA, TRIGGER_NAME, EVENT_OBJECT_SCHEMA, EVENT_OBJECT_TABLE, EVENT_MANIPULATION, ACTION_STATEMENT, ACTION_TIMING "+
				"FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA NOT IN "+systemSchemas,
				func(f []string) {
					r, ok := readRoutine(f[0], f[5])
					if !ok {
						hidden = append(hidden, f[0]+"."+f[1])
						return
					}
					if f[4] == "" {
						return
					}
					trigs = append(trigs, trigger{name: fmt.Sprintf("%s.%s (%s on %s.%s)", f[0], f[1], f[4], f[2], f[3]),
						table: nameKey(f[2], f[3]), ev: f[4][0], before: f[6] == "BEFORE", r: r}) // INSERT, UPDATE, DELETE
				})
		}
		if err == nil {
			err = eachRow(ctx, db, "SELECT SPECIFIC_SCHEMA, SPECIFIC_NAME, COALESCE(PARAMETER_MODE, '') FROM information_schema.PARAMETERS "+
				"WHERE ROUTINE_TYPE = 'PROCEDURE' AND SPECIFIC_SCHEMA NOT IN "+systemSchemas+" ORDER BY SPECIFIC_SCHEMA, SPECIFIC_NAME, ORDINAL_POSITION",
				func(f []string) {
					k := nameKey(f[0], f[1])
					modes[k] = append(modes[k], strings.ToUpper(f[2]))
				})
		}
		if err != nil {
			return nil, fmt.Errorf("target %s: reading its schemas' defaults, triggers and stored routines (to tell values each server chooses from the engines' differences): %w", ts[i].Name, err)
		}
		sc.db = append(sc.db, strings.ToLower(ts[i].Database()))
		sc.tables, sc.also, sc.modes, sc.trigs = append(sc.tables, tables), append(sc.also, also), append(sc.modes, modes), append(sc.trigs, trigs)
		triggers = append(triggers, sc.applyTriggers(i)...)
	}
	// Each list holds what every target has (sorted, once each): a
	// server may have tens of thousands of tables.
	if len(hidden) > 0 {
		sc.hidden = examples(sortedOnce(hidden))
	}
	for _, l := range []struct {
		what  string
		names []string
	}{{"column defaults", defaults}, {"triggers", triggers}, {"procedures", procNames}, {"functions", funcNames}} {
		if len(l.names) > 0 {
			sc.what = append(sc.what, fmt.Sprintf("%s %s", l.what, examples(sortedOnce(l.names))))
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

// sortedOnce sorts names and drops repeats.
func sortedOnce(names []string) []string {
	slices.Sort(names)
	return slices.Compact(names)
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
// may delete; DDL none (an ALTER that adds a column filled with chosen
// values is learn's); a statement of another verb (unknown) any.
func events(verb string) string {
	switch verb {
	case "CREATE", "ALTER", "DROP", "TRUNCATE", "RENAME":
		return ""
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

// schemaOn gives a routine's or table's schema on target i, as a
// statement run in session schema schema names it (named: as written, ""
// when unqualified): an unqualified name is in the session's schema,
// which a target whose DSN names a database runs in that one
// (runner.schemaFor); a qualified one in the schema it names.
func (sc *serverChoices) schemaOn(i int, named, schema string) string {
	switch {
	case named != "":
		return strings.ToLower(named)
	case sc.db[i] != "":
		return sc.db[i]
	}
	return strings.ToLower(schema)
}

// fnCalls is what the stored functions a statement calls do, on some
// target: chooses, a value each server chooses anew; writes, the tables
// their bodies write (captured names); all, tables they do not name.
type fnCalls struct {
	chooses, all bool
	writes       []string
}

// calledFunctions is what the stored functions sql (run in session
// schema schema) calls do, on any target (see fnCalls).
func (sc *serverChoices) calledFunctions(sql, schema string) fnCalls {
	var fc fnCalls
	if sc == nil || !sc.anyFunc {
		return fc
	}
	fs := sqlinfo.CalledFunctions(sql)
	for i, funcs := range sc.funcs {
		for _, f := range fs {
			r, ok := funcs[sc.schemaOn(i, f.Schema, schema)+"."+strings.ToLower(f.Name)]
			if !ok || !r.chooses {
				continue
			}
			fc.chooses = true
			fc.all = fc.all || r.all
			for _, w := range r.writes {
				fc.writes = appendOnce(fc.writes, sc.back(i, w, f.Schema, schema))
			}
		}
	}
	return fc
}

// back names a table of target i's (with its schema) as the capture
// does: in the session's schema when it is the one the session's
// unqualified names run in there (named, the routine's schema as the
// statement wrote it, is "").
func (sc *serverChoices) back(i int, t sqlinfo.Table, named, schema string) string {
	if named == "" && strings.EqualFold(t.Schema, sc.schemaOn(i, "", schema)) {
		return sqlinfo.Table{Schema: schema, Name: t.Name}.String()
	}
	return t.String()
}

// written returns the captured tables ("schema.name", as qualify gives
// them) where a statement of verb, writing writes (as the statement names
// them) in session schema schema, makes some target choose values of its
// own, and the tables its triggers then write. For a CALL (no writes
// named): the tables the procedure writes, when it chooses or when its
// arguments hold such a value (args). all: every table may hold such
// values (a procedure or trigger that writes what it does not name, or
// one the targets do not have).
func (sc *serverChoices) written(verb, sql, schema string, writes []sqlinfo.Table, args bool) (chosen []string, all bool) {
	if sc == nil {
		return nil, false
	}
	for i := range sc.tables {
		if verb == "CALL" {
			s, n, _, ok := sqlinfo.CallArguments(sql)
			if !ok {
				continue
			}
			r, known := sc.procs[i][sc.schemaOn(i, s, schema)+"."+strings.ToLower(n)]
			switch {
			case !known && args:
				return nil, true
			case !known || !r.chooses && !args:
				continue
			case r.all:
				return nil, true
			}
			for _, w := range r.writes {
				chosen = appendOnce(chosen, sc.back(i, w, s, schema))
			}
			continue
		}
		for _, w := range writes {
			k := sc.schemaOn(i, w.Schema, schema) + "." + strings.ToLower(w.Name)
			evs := sc.tables[i][k]
			for _, ev := range events(verb) {
				if strings.ContainsRune(evs, ev) {
					chosen = appendOnce(chosen, w.In(schema).String())
				}
				a, ok := sc.also[i][k+string(ev)]
				if !ok {
					continue
				}
				if a.all {
					return nil, true
				}
				for _, t := range a.writes {
					chosen = appendOnce(chosen, sc.back(i, t, w.Schema, schema))
				}
			}
		}
	}
	return chosen, false
}

// inOnly are the user variables a CALL passes only as IN parameters of
// the procedure, as every target that has it defines it: the routine
// cannot assign them (sqlinfo.UserVarFlow takes every variable passed
// whole as assigned). nil when no target knows the procedure.
func (sc *serverChoices) inOnly(sql, schema string) map[string]bool {
	if sc == nil {
		return nil
	}
	s, n, args, ok := sqlinfo.CallArguments(sql)
	if !ok {
		return nil
	}
	var in map[string]bool
	out := map[string]bool{}
	for i := range sc.modes {
		modes, known := sc.modes[i][sc.schemaOn(i, s, schema)+"."+strings.ToLower(n)]
		if _, proc := sc.procs[i][sc.schemaOn(i, s, schema)+"."+strings.ToLower(n)]; !known && !proc {
			continue
		}
		if in == nil {
			in = map[string]bool{}
		}
		for j, a := range args {
			switch {
			case a == "":
			case j < len(modes) && modes[j] == "IN":
				in[a] = true
			default:
				out[a] = true // OUT, INOUT, or not as the CALL passes it
			}
		}
	}
	for a := range out {
		delete(in, a)
	}
	return in
}

// markChosen adds what sc says a statement makes the targets choose
// (written, calledFunctions' writes) to x's index.
func (x *captureIndex) markChosen(sc *serverChoices, session uint64, start int64, info *sqlinfo.Info, sql, schema string, args bool, fc fnCalls) {
	ts, all := sc.written(info.Verb, sql, schema, info.Writes, args)
	if all || fc.all {
		ts = []string{compare.AnyTable}
	} else {
		for _, w := range fc.writes {
			ts = appendOnce(ts, w)
		}
	}
	if len(ts) > 0 {
		x.chosen.Add(session, start, ts)
	}
}

// learn adds what a DDL statement of the capture, run in session schema
// schema, makes the targets choose from then on (every target runs it
// alike): a CREATE or ALTER TABLE that gives a column a DEFAULT calling a
// function each server chooses anew (inserts choose; an ALTER that ADDs
// such a column fills the rows already there, so the table holds such
// values at once: now), CREATE TABLE … LIKE one that does, a CREATE
// TRIGGER, PROCEDURE or FUNCTION. A CREATE or DROP TABLE starts its table
// afresh (its triggers go with it); what a DROP of a routine removes
// stays known (a later call is counted apart).
func (sc *serverChoices) learn(info *sqlinfo.Info, sql, schema string) (now []string) {
	if sc == nil || info.Verb != "CREATE" && info.Verb != "ALTER" && info.Verb != "DROP" {
		return nil
	}
	toks, err := sqlinfo.Lex(sql)
	if err != nil {
		return nil
	}
	kind, at := "", -1
	for j, t := range toks[:min(len(toks), 12)] {
		for _, k := range []string{"TABLE", "TRIGGER", "PROCEDURE", "FUNCTION"} {
			if kind == "" && t.Is(sql, k) {
				kind, at = k, j
			}
		}
	}
	if kind != "TABLE" && info.Verb != "CREATE" {
		return nil // ALTER PROCEDURE changes its characteristics, not its body; DROP: see above
	}
	for i := range sc.tables {
		switch kind {
		case "TABLE":
			if !info.TableDDL && info.Verb != "DROP" {
				return nil
			}
			defaults := sqlinfo.DefaultsChoose(sql)
			var like string // CREATE TABLE t LIKE u: u's defaults
			if j := slices.IndexFunc(toks, func(t sqlinfo.Token) bool { return t.Is(sql, "LIKE") }); info.Verb == "CREATE" && j > 0 {
				if u, _, ok := sqlinfo.TableNameAt(sql, toks, j+1); ok {
					like = sc.tables[i][sc.schemaOn(i, u.Schema, schema)+"."+strings.ToLower(u.Name)]
				}
			}
			for _, t := range append(slices.Clone(info.Created), info.Writes...) {
				k := sc.schemaOn(i, t.Schema, schema) + "." + strings.ToLower(t.Name)
				if info.Verb != "ALTER" {
					sc.forget(i, k) // a new table, or none
				}
				if like != "" && strings.ContainsRune(like, 'I') || defaults && info.Verb != "DROP" {
					if !strings.ContainsRune(sc.tables[i][k], 'I') {
						sc.tables[i][k] += "I"
					}
				}
				if info.Verb == "ALTER" && defaults && sqlinfo.AfterWords(sql, toks, 0, "ADD") >= 0 {
					now = appendOnce(now, t.In(schema).String())
				}
			}
		case "TRIGGER":
			// TRIGGER [IF NOT EXISTS] name {BEFORE|AFTER} {INSERT|UPDATE|DELETE} ON table FOR EACH ROW body
			j := at + 1
			for j < len(toks) && !toks[j].Is(sql, "BEFORE") && !toks[j].Is(sql, "AFTER") {
				j++
			}
			if j+3 >= len(toks) || !toks[j+2].Is(sql, "ON") {
				return nil
			}
			timing, ev := strings.ToUpper(toks[j].Text(sql)), strings.ToUpper(toks[j+1].Text(sql))
			tbl, next, ok := sqlinfo.TableNameAt(sql, toks, j+3)
			if !ok || ev == "" {
				return nil
			}
			body := sql
			if e := sqlinfo.AfterWords(sql, toks, next, "FOR", "EACH", "ROW"); e >= 0 {
				body = sql[e:]
			}
			home := sc.schemaOn(i, tbl.Schema, schema)
			r, ok := readRoutine(home, body)
			if !ok {
				continue
			}
			sc.trigs[i] = append(sc.trigs[i], trigger{table: home + "." + strings.ToLower(tbl.Name), ev: ev[0], before: timing == "BEFORE", r: r})
			sc.applyTriggers(i)
		case "PROCEDURE", "FUNCTION":
			name, next, ok := sqlinfo.TableNameAt(sql, toks, at+1)
			if !ok {
				return nil
			}
			// The body: after the parameter list (the routine's own
			// name, before it, is no call of itself).
			body := sql
			if e := sqlinfo.AfterParens(sql, toks, next); e >= 0 {
				body = sql[e:]
			}
			home := sc.schemaOn(i, name.Schema, schema)
			r, ok := readRoutine(home, body)
			if !ok {
				continue
			}
			k := home + "." + strings.ToLower(name.Name)
			if kind == "PROCEDURE" {
				sc.procs[i][k] = r
			} else {
				sc.funcs[i][k] = r
			}
			// The routines and triggers that call it (made before it, or
			// calling one that does) may choose from now on.
			sc.settle(i)
			sc.applyTriggers(i)
		}
	}
	return now
}

// forget lets go of what target i knew of table k (created or dropped
// anew): its defaults' and triggers' choices.
func (sc *serverChoices) forget(i int, k string) {
	delete(sc.tables[i], k)
	for _, ev := range "IUD" {
		delete(sc.also[i], k+string(ev))
	}
	sc.trigs[i] = slices.DeleteFunc(sc.trigs[i], func(t trigger) bool { return t.table == k })
}

// settle takes target i's routines to a fixed point: f calls g, which
// calls UUID(), so f chooses too (each routine's chooses from false to
// true only: one made again without the call keeps what its callers
// learnt, which can only count more apart); and what they write
// through the procedures they call. anyFunc follows.
func (sc *serverChoices) settle(i int) {
	funcs, procs := sc.funcs[i], sc.procs[i]
	for changed := true; changed; {
		changed = false
		for _, m := range []map[string]routine{funcs, procs} {
			for k, r := range m {
				if !r.chooses && sc.calls(i, r) {
					r.chooses, changed = true, true
					m[k] = r
				}
			}
		}
	}
	for changed := true; changed; {
		changed = false
		for _, m := range []map[string]routine{funcs, procs} {
			for k, r := range m {
				if c := sc.closeWrites(i, r); c.all != r.all || len(c.writes) != len(r.writes) {
					m[k], changed = c, true
				}
			}
		}
	}
	for _, r := range funcs {
		sc.anyFunc = sc.anyFunc || r.chooses
	}
}

// applyTriggers marks, on target i, what each trigger not yet applied
// that chooses (by itself, or through a routine it calls) does: a BEFORE
// trigger may set its row's columns (NEW.id = UUID()), so its table's
// writes of its event choose (an AFTER trigger cannot); the tables its
// body writes hold chosen values after that event. It returns the
// names of those it applied.
func (sc *serverChoices) applyTriggers(i int) (names []string) {
	for j := range sc.trigs[i] {
		t := &sc.trigs[i][j]
		if t.applied || !sc.calls(i, t.r) {
			continue
		}
		t.applied = true
		if t.before && !strings.ContainsRune(sc.tables[i][t.table], rune(t.ev)) {
			sc.tables[i][t.table] += string(t.ev)
		}
		r := sc.closeWrites(i, t.r)
		k := t.table + string(t.ev)
		a := sc.also[i][k]
		a.writes, a.all = append(a.writes, r.writes...), a.all || r.all
		sc.also[i][k] = a
		if t.name != "" {
			names = append(names, t.name)
		}
	}
	return names
}

// calls reports whether r calls a function each server chooses anew, or
// a routine target i has that does.
func (sc *serverChoices) calls(i int, r routine) bool {
	if r.direct {
		return true
	}
	for _, f := range r.funcs {
		if g, ok := sc.funcs[i][nameKey(f.In(r.schema).Schema, f.Name)]; ok && g.chooses {
			return true
		}
	}
	for _, p := range r.procs {
		if q, ok := sc.procs[i][nameKey(p.In(r.schema).Schema, p.Name)]; ok && q.chooses {
			return true
		}
	}
	return false
}

// closeWrites adds to r's writes those of the procedures it calls on
// target i; a call of one the target does not have writes anything.
func (sc *serverChoices) closeWrites(i int, r routine) routine {
	for _, p := range r.procs {
		q, ok := sc.procs[i][nameKey(p.In(r.schema).Schema, p.Name)]
		if !ok || q.all {
			r.all = true
		}
		for _, w := range q.writes {
			if !slices.Contains(r.writes, w) {
				r.writes = append(r.writes, w)
			}
		}
	}
	return r
}
