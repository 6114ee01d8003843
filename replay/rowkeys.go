package replay

import (
	"context"
	"database/sql"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tandemdb/tandem/sqlinfo"
	"github.com/tandemdb/tandem/store"
)

// Row keys tell the ordering gate whether two statements can lock the
// same row: a statement that names its rows by equality on the table's
// primary key (sqlinfo.Point: WHERE pk = ?, pk IN (…), INSERT … VALUES
// with the key's columns) has the keys of those rows, from its captured
// literals and bound parameters; two statements that both have keys
// conflict only if a key is in both. Any other statement on a table
// conflicts with every statement on it. A primary key is read from each
// target (a table the replay creates has none known: table-level). What
// row keys miss — a unique secondary key, a gap lock on a missing row, a
// foreign key check — only makes a stall wait for the gate's in-flight
// bound instead of yielding at once.

// loadPrimaryKeys reads, on the target, the primary key columns of the
// tables the capture touches, by captured name ("schema.table",
// lower-case). Errors leave the map short: those tables are table-level.
func (rn *runner) loadPrimaryKeys(ctx context.Context, tables []string) {
	rn.pks, rn.uniqueKeys = map[string][]string{}, map[string][][]string{}
	if len(tables) == 0 {
		return
	}
	db, err := openDB(rn)
	if err != nil {
		return
	}
	defer db.Close()
	byTarget := map[[2]string]string{}
	schemas := map[string]bool{}
	for _, t := range tables {
		schema, name := rn.targetTable(t)
		byTarget[[2]string{strings.ToLower(schema), strings.ToLower(name)}] = strings.ToLower(t)
		schemas[schema] = true
	}
	rn.autoinc = map[string]string{}
	for schema := range schemas {
		// Each table's primary key columns, in order; then which tables
		// exist, and their AUTO_INCREMENT column ("" none).
		if !primaryKeys(ctx, db, schema, func(tbl, col string) {
			if captured, ok := byTarget[[2]string{strings.ToLower(schema), strings.ToLower(tbl)}]; ok {
				rn.pks[captured] = append(rn.pks[captured], strings.ToLower(col))
			}
		}) {
			continue
		}
		everyPair(ctx, db, "SELECT TABLE_NAME, MAX(CASE WHEN EXTRA LIKE '%auto_increment%' THEN COLUMN_NAME ELSE '' END) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? GROUP BY TABLE_NAME", func(tbl, col string) {
			if captured, ok := byTarget[[2]string{strings.ToLower(schema), strings.ToLower(tbl)}]; ok {
				rn.autoinc[captured] = strings.ToLower(col)
			}
		}, schema)
		uniqueKeys(ctx, db, schema, func(tbl string, cols []string) {
			if captured, ok := byTarget[[2]string{strings.ToLower(schema), strings.ToLower(tbl)}]; ok {
				rn.uniqueKeys[captured] = append(rn.uniqueKeys[captured], cols)
			}
		})
	}
	rn.loadClock(ctx, db, schemas)
	if rn.access {
		rn.loadAccessTables(ctx, db, schemas, byTarget)
	}
}

// primaryKeys reads the primary key columns of a schema's tables, each
// table's in order; false when the query failed.
func primaryKeys(ctx context.Context, db *sql.DB, schema string, f func(table, col string)) bool {
	return everyPair(ctx, db, "SELECT TABLE_NAME, COLUMN_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ? AND INDEX_NAME = 'PRIMARY' ORDER BY TABLE_NAME, SEQ_IN_INDEX", f, schema)
}

// uniqueKeys reads the unique keys of NOT NULL columns of a schema's
// tables: like the primary key, an ORDER BY that holds one leaves no rows
// tied (one with a nullable column does: its NULLs repeat; one with an
// expression, MySQL's functional key part, has no column to hold).
func uniqueKeys(ctx context.Context, db *sql.DB, schema string, f func(table string, cols []string)) bool {
	return everyPair(ctx, db, "SELECT TABLE_NAME, GROUP_CONCAT(LOWER(COLUMN_NAME) ORDER BY SEQ_IN_INDEX SEPARATOR '\\0') FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ? AND NON_UNIQUE = 0 AND INDEX_NAME <> 'PRIMARY' GROUP BY TABLE_NAME, INDEX_NAME HAVING SUM(NULLABLE = 'YES') = 0 AND SUM(COLUMN_NAME IS NULL) = 0", func(tbl, cols string) {
		f(tbl, strings.Split(cols, "\x00"))
	}, schema)
}

// liveKeys are a followed run's (a shadow's) keys, read as its tables
// appear: the shadow starts before the capture holds a record, when
// loadPrimaryKeys knows no table, and without a table's keys no ORDER BY
// on it can be told to leave rows tied, so the tied rows' order, the
// server's choice, counted as the engine's difference. The keys of a
// captured schema's tables are read from the target at the first
// statement compared on one of them, once (a table created later in the
// schema is then not known: its differences count as ever).
type liveKeys struct {
	rn *runner
	mu sync.Mutex
	// read: captured schemas read (or tried); pks and uks by captured
	// name, as runner.pks and runner.uniqueKeys.
	read map[string]bool
	pks  map[string][]string
	uks  map[string][][]string
}

func newLiveKeys(rn *runner) *liveKeys {
	return &liveKeys{rn: rn, read: map[string]bool{}, pks: map[string][]string{}, uks: map[string][][]string{}}
}

// of returns a captured table's primary key and unique keys of NOT NULL
// columns, reading its schema's first.
// table is qualified as the statement names it, in its case: a server
// with case-sensitive names (lower_case_table_names=0) knows the schema
// only so.
func (k *liveKeys) of(table string) ([]string, [][]string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	captured, _, _ := strings.Cut(table, ".")
	if !k.read[captured] {
		k.read[captured] = true
		k.load(captured)
	}
	table = strings.ToLower(table)
	return k.pks[table], k.uks[table]
}

// load reads the keys of the target's tables in the schema that captured
// maps to; a target that does not answer within 5 s leaves them unknown
// (also after the run, for its final comparison: not the run's context).
func (k *liveKeys) load(captured string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	db, err := openDB(k.rn)
	if err != nil {
		return
	}
	defer db.Close()
	schema := k.rn.schemaFor(captured)
	name := func(tbl string) string { return strings.ToLower(captured + "." + tbl) }
	primaryKeys(ctx, db, schema, func(tbl, col string) {
		k.pks[name(tbl)] = append(k.pks[name(tbl)], strings.ToLower(col))
	})
	uniqueKeys(ctx, db, schema, func(tbl string, cols []string) {
		k.uks[name(tbl)] = append(k.uks[name(tbl)], cols)
	})
}

// generates reports whether rec's INSERT (info) can generate an
// AUTO_INCREMENT value: its table has such a column (or is unknown: a
// table the traffic creates) and some row leaves it out, NULL or 0. An
// INSERT that gives every row its id needs no SET insert_id.
func (rn *runner) generates(info *sqlinfo.Info, rec *store.Record) bool {
	p := info.Point
	if p == nil || p.Rows == nil {
		return true
	}
	col, known := rn.autoinc[strings.ToLower(p.Table.In(rec.Schema).String())]
	switch {
	case !known:
		return true
	case col == "":
		return false
	}
	i := slices.Index(p.Cols, col)
	if i < 0 {
		return true
	}
	for _, row := range p.Rows {
		v := row[i]
		s, ok := v.Lit, true
		if v.Param >= 0 {
			if v.Param >= len(rec.Params) {
				return true
			}
			s, ok = keyText(&rec.Params[v.Param])
		}
		if !ok || s == "0" || strings.EqualFold(s, "NULL") || s == "<nil>" {
			return true
		}
	}
	return false
}

// rowKeys are the keys of the rows rec's statement (info) names, nil when
// it does not name them all (see loadPrimaryKeys).
func (rn *runner) rowKeys(info *sqlinfo.Info, rec *store.Record) []string {
	if info == nil || info.Point == nil {
		return nil
	}
	return rn.rowKeysIn(info, rec, strings.ToLower(info.Point.Table.In(rec.Schema).String()))
}

// jobKeys is rowKeys of j's statement, worked out once for the job.
// The keys are shared: callers do not change them.
func (rn *runner) jobKeys(j *job) []string {
	if !j.keyed {
		j.keys, j.keyed = rn.rowKeys(j.info, j.rec), true
	}
	return j.keys
}

// rowKeysIn is rowKeys on info.Point's table, table (as rowKeys names it).
func (rn *runner) rowKeysIn(info *sqlinfo.Info, rec *store.Record, table string) []string {
	pk := rn.pks[table]
	if pk == nil {
		return nil
	}
	return info.Point.Keys(table, pk, func(i int) (string, bool) {
		if i >= len(rec.Params) {
			return "", false
		}
		return keyText(&rec.Params[i])
	})
}

// keyText renders a bound value as the literal of it would read in a key
// (false for NULL or long data: no key).
func keyText(v *store.Value) (string, bool) {
	switch {
	case v.Null || v.LongData:
		return "", false
	case v.Bytes != nil:
		return string(v.Bytes), true
	case v.Type == store.TypeFloat || v.Type == store.TypeDouble:
		return strconv.FormatFloat(v.Float, 'g', -1, 64), true
	case v.Unsigned:
		return strconv.FormatUint(uint64(v.Int), 10), true
	}
	return strconv.FormatInt(v.Int, 10), true
}
