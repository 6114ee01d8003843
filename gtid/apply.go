package gtid

import (
	"context"
	"database/sql"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Table is what rebuilding a table's row changes as SQL needs: its
// columns in order (generated ones cannot be written) and its primary key.
type Table struct {
	Schema, Name string
	Columns      []string
	Generated    []bool
	Key          []int // the primary key's columns (indexes into Columns)
}

// ReadTables reads the columns and primary keys of the named tables
// ("schema.name") from information_schema.
func ReadTables(ctx context.Context, db *sql.DB, names []string) (map[string]*Table, error) {
	out := map[string]*Table{}
	for _, n := range names {
		schema, name, ok := strings.Cut(n, ".")
		if !ok {
			continue
		}
		rows, err := db.QueryContext(ctx, "SELECT COLUMN_NAME, COLUMN_KEY, EXTRA FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION", schema, name)
		if err != nil {
			return nil, fmt.Errorf("gtid: columns of %s: %w", n, err)
		}
		t := &Table{Schema: schema, Name: name}
		for rows.Next() {
			var col, key, extra string
			if err := rows.Scan(&col, &key, &extra); err != nil {
				rows.Close()
				return nil, err
			}
			if key == "PRI" {
				t.Key = append(t.Key, len(t.Columns))
			}
			t.Columns = append(t.Columns, col)
			t.Generated = append(t.Generated, strings.Contains(strings.ToUpper(extra), "GENERATED") || strings.Contains(strings.ToUpper(extra), "VIRTUAL") || strings.Contains(strings.ToUpper(extra), "PERSISTENT"))
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		if len(t.Columns) > 0 {
			out[n] = t
		}
	}
	return out, nil
}

// Statements rebuilds the transaction's row changes as SQL statements, in
// order: INSERT for an insert, UPDATE … WHERE its primary key (all its
// columns without one) for an update, DELETE … WHERE likewise for a
// delete; a DDL transaction is its statement. An error names what cannot
// be rebuilt (a table gone, an image without every column).
func (t Trx) Statements(tables map[string]*Table) ([]string, error) {
	if t.Statement != "" {
		return []string{t.Statement}, nil
	}
	out := make([]string, 0, len(t.Changes))
	for _, c := range t.Changes {
		tb := tables[c.Schema+"."+c.Table]
		if tb == nil {
			return nil, fmt.Errorf("table %s.%s is not on the server any more", c.Schema, c.Table)
		}
		for _, img := range [][]any{c.Before, c.After} {
			if img != nil && len(img) != len(tb.Columns) {
				return nil, fmt.Errorf("%s.%s: a row image of %d columns, the table has %d (binlog_row_image must be FULL)", c.Schema, c.Table, len(img), len(tb.Columns))
			}
		}
		name := quoteName(c.Schema) + "." + quoteName(c.Table)
		switch c.Kind {
		case 'i':
			var cols, vals []string
			for i, v := range c.After {
				if !tb.Generated[i] {
					cols = append(cols, quoteName(tb.Columns[i]))
					vals = append(vals, Literal(v))
				}
			}
			out = append(out, fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s)", name, strings.Join(cols, ", "), strings.Join(vals, ", ")))
		case 'u':
			var set []string
			for i, v := range c.After {
				if !tb.Generated[i] {
					set = append(set, quoteName(tb.Columns[i])+" = "+Literal(v))
				}
			}
			out = append(out, fmt.Sprintf("UPDATE %s SET %s WHERE %s", name, strings.Join(set, ", "), where(tb, c.Before)))
		case 'd':
			out = append(out, fmt.Sprintf("DELETE FROM %s WHERE %s", name, where(tb, c.Before)))
		}
	}
	return out, nil
}

// where selects the row of image img by its primary key, or by every
// column (NULL-safe, one row) without one. A key's columns are never
// NULL: "=" there, the form replay's row keys read (a write that names
// its rows conflicts, in the order gate, only with writes of those rows).
func where(tb *Table, img []any) string {
	var conds []string
	if len(tb.Key) > 0 {
		for _, i := range tb.Key {
			op := " = "
			if img[i] == nil {
				op = " <=> "
			}
			conds = append(conds, quoteName(tb.Columns[i])+op+Literal(img[i]))
		}
		return strings.Join(conds, " AND ")
	}
	for i, v := range img {
		if !tb.Generated[i] {
			conds = append(conds, quoteName(tb.Columns[i])+" <=> "+Literal(v))
		}
	}
	return strings.Join(conds, " AND ") + " LIMIT 1"
}

func quoteName(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

// Literal writes a value decoded from a row image as SQL: numbers as
// numbers, strings and bytes as CAST(X'…' AS BINARY) — their bytes
// exactly, in any character set and sql_mode, and a string (not a hex
// number) in a numeric or temporal context: a DECIMAL arrives as its
// text — NULL as NULL. ENUM and SET columns carry
// their index and bit mask, which the server takes as such.
func Literal(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case int8:
		return strconv.FormatInt(int64(x), 10)
	case int16:
		return strconv.FormatInt(int64(x), 10)
	case int32:
		return strconv.FormatInt(int64(x), 10)
	case int64:
		return strconv.FormatInt(x, 10)
	case int:
		return strconv.Itoa(x)
	case uint8:
		return strconv.FormatUint(uint64(x), 10)
	case uint16:
		return strconv.FormatUint(uint64(x), 10)
	case uint32:
		return strconv.FormatUint(uint64(x), 10)
	case uint64:
		return strconv.FormatUint(x, 10)
	case float32:
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return "NULL"
		}
		return strconv.FormatFloat(float64(x), 'g', -1, 32)
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return "NULL"
		}
		return strconv.FormatFloat(x, 'g', -1, 64)
	case string:
		return hexLiteral([]byte(x))
	case []byte:
		return hexLiteral(x)
	}
	return hexLiteral([]byte(fmt.Sprint(v)))
}

func hexLiteral(b []byte) string {
	if len(b) == 0 {
		return "''"
	}
	return "CAST(X'" + hex.EncodeToString(b) + "' AS BINARY)"
}
