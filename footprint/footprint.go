// Package footprint measures how much storage tables take on a server,
// from the best source each engine offers:
//
//   - InnoDB (and any other engine): information_schema.TABLES after
//     ANALYZE TABLE refreshed the statistics (data = clustered index,
//     index = secondary indexes, in allocated pages; compressed tables in
//     compressed pages).
//   - MyRocks: information_schema.TABLES after the memtable was flushed
//     (SET GLOBAL rocksdb_force_flush_memtable_now=1): rows still in the
//     memtable are in no SST file and count nowhere, so a size read right
//     after a load would be 0.
//   - TokuDB: information_schema.TokuDB_fractal_tree_info, bytes allocated
//     per dictionary (main = data, key-* = indexes).
package footprint

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/tandemdb/tandem/store"
)

// Sources, as TableFootprint.Source names them.
const (
	SourceTables        = "information_schema.TABLES after ANALYZE TABLE"
	SourceRocksDB       = "information_schema.TABLES after a MyRocks memtable flush"
	SourceRocksNoFlush  = "information_schema.TABLES (MyRocks memtable not flushed: %s)"
	SourceTokuDB        = "information_schema.TokuDB_fractal_tree_info"
	sourceTablesNoStats = "information_schema.TABLES (statistics not refreshed: %s)"
)

// Measure returns the footprint of schema's base tables on db, sorted by
// name; tables limits it to those names (nil: all).
func Measure(ctx context.Context, db *sql.DB, schema string, tables []string) ([]store.TableFootprint, error) {
	type row struct {
		name, engine string
		rows         int64
	}
	q := `SELECT TABLE_NAME, COALESCE(ENGINE, ''), COALESCE(TABLE_ROWS, 0) FROM information_schema.TABLES
		WHERE TABLE_SCHEMA = ? AND TABLE_TYPE = 'BASE TABLE' ORDER BY TABLE_NAME`
	rs, err := db.QueryContext(ctx, q, schema)
	if err != nil {
		return nil, fmt.Errorf("footprint: list tables of %s: %w", schema, err)
	}
	var list []row
	for rs.Next() {
		var r row
		if err := rs.Scan(&r.name, &r.engine, &r.rows); err != nil {
			rs.Close()
			return nil, err
		}
		if tables == nil || slices.Contains(tables, r.name) {
			list = append(list, r)
		}
	}
	rs.Close()
	if err := rs.Err(); err != nil {
		return nil, err
	}
	if len(list) == 0 {
		return nil, nil
	}

	// Refresh what each engine needs refreshed.
	rocksSource := SourceRocksDB
	flushed := false
	source := map[string]string{}
	for _, r := range list {
		switch strings.ToUpper(r.engine) {
		case "ROCKSDB":
			if !flushed {
				flushed = true
				if _, err := db.ExecContext(ctx, "SET GLOBAL rocksdb_force_flush_memtable_now = 1"); err != nil {
					rocksSource = fmt.Sprintf(SourceRocksNoFlush, err)
				}
			}
			source[r.name] = rocksSource
		case "TOKUDB":
			source[r.name] = SourceTokuDB
		default:
			source[r.name] = SourceTables
			if _, err := db.ExecContext(ctx, "ANALYZE TABLE "+quoteIdent(schema)+"."+quoteIdent(r.name)); err != nil {
				source[r.name] = fmt.Sprintf(sourceTablesNoStats, err)
			}
		}
	}

	out := make([]store.TableFootprint, 0, len(list))
	for _, r := range list {
		f := store.TableFootprint{Table: r.name, Engine: r.engine, Source: source[r.name]}
		var err error
		if f.Source == SourceTokuDB {
			err = tokudb(ctx, db, schema, &f)
		} else {
			err = db.QueryRowContext(ctx, `SELECT COALESCE(TABLE_ROWS, 0), COALESCE(DATA_LENGTH, 0), COALESCE(INDEX_LENGTH, 0)
				FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?`, schema, r.name).Scan(&f.Rows, &f.DataBytes, &f.IndexBytes)
		}
		if err != nil {
			return nil, fmt.Errorf("footprint: %s.%s: %w", schema, r.name, err)
		}
		out = append(out, f)
	}
	return out, nil
}

// tokudb fills f from TokuDB's fractal tree statistics.
func tokudb(ctx context.Context, db *sql.DB, schema string, f *store.TableFootprint) error {
	rs, err := db.QueryContext(ctx, `SELECT dictionary_name, COALESCE(bt_size_allocated, 0) FROM information_schema.TokuDB_fractal_tree_info
		WHERE table_schema = ? AND table_name = ?`, schema, f.Table)
	if err != nil {
		return err
	}
	defer rs.Close()
	for rs.Next() {
		var dict string
		var n int64
		if err := rs.Scan(&dict, &n); err != nil {
			return err
		}
		if strings.HasSuffix(dict, "-main") || strings.HasSuffix(dict, "main") {
			f.DataBytes += n
		} else if strings.Contains(dict, "key-") {
			f.IndexBytes += n
		}
	}
	if err := rs.Err(); err != nil {
		return err
	}
	return db.QueryRowContext(ctx, `SELECT COALESCE(TABLE_ROWS, 0) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?`,
		schema, f.Table).Scan(&f.Rows)
}

func quoteIdent(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

// Total sums a footprint.
func Total(fs []store.TableFootprint) (data, index int64) {
	for _, f := range fs {
		data += f.DataBytes
		index += f.IndexBytes
	}
	return data, index
}
