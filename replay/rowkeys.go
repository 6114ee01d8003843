package replay

import (
	"context"
	"slices"
	"strconv"
	"strings"

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
		if !everyPair(ctx, db, "SELECT TABLE_NAME, COLUMN_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ? AND INDEX_NAME = 'PRIMARY' ORDER BY TABLE_NAME, SEQ_IN_INDEX", func(tbl, col string) {
			if captured, ok := byTarget[[2]string{strings.ToLower(schema), strings.ToLower(tbl)}]; ok {
				rn.pks[captured] = append(rn.pks[captured], strings.ToLower(col))
			}
		}, schema) {
			continue
		}
		everyPair(ctx, db, "SELECT TABLE_NAME, MAX(CASE WHEN EXTRA LIKE '%auto_increment%' THEN COLUMN_NAME ELSE '' END) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? GROUP BY TABLE_NAME", func(tbl, col string) {
			if captured, ok := byTarget[[2]string{strings.ToLower(schema), strings.ToLower(tbl)}]; ok {
				rn.autoinc[captured] = strings.ToLower(col)
			}
		}, schema)
		// Unique keys of NOT NULL columns: like the primary key, an
		// ORDER BY that holds one leaves no rows tied (one with a
		// nullable column does: its NULLs repeat; one with an expression,
		// MySQL's functional key part, has no column to hold).
		everyPair(ctx, db, "SELECT TABLE_NAME, GROUP_CONCAT(LOWER(COLUMN_NAME) ORDER BY SEQ_IN_INDEX SEPARATOR '\\0') FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ? AND NON_UNIQUE = 0 AND INDEX_NAME <> 'PRIMARY' GROUP BY TABLE_NAME, INDEX_NAME HAVING SUM(NULLABLE = 'YES') = 0 AND SUM(COLUMN_NAME IS NULL) = 0", func(tbl, cols string) {
			if captured, ok := byTarget[[2]string{strings.ToLower(schema), strings.ToLower(tbl)}]; ok {
				rn.uniqueKeys[captured] = append(rn.uniqueKeys[captured], strings.Split(cols, "\x00"))
			}
		}, schema)
	}
	if rn.access {
		rn.loadAccessTables(ctx, db, schemas, byTarget)
	}
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
	table := strings.ToLower(info.Point.Table.In(rec.Schema).String())
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
