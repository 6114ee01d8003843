// Package typestest holds a table with a column of every type MariaDB has,
// and rows that reach each type's edges, for the tests that carry typed
// values through the proxy and through replay.
package typestest

import (
	"math"
	"strings"
	"time"
)

// Table creates the table "types".
const Table = `CREATE TABLE types (
	id INT PRIMARY KEY,
	ti TINYINT, tu TINYINT UNSIGNED, si SMALLINT, su SMALLINT UNSIGNED, mi MEDIUMINT, mu MEDIUMINT UNSIGNED,
	i INT, iu INT UNSIGNED, bi BIGINT, bu BIGINT UNSIGNED,
	de DECIMAL(24,6), f FLOAT, d DOUBLE,
	dt DATE, tm TIME(6), dtm DATETIME(6), ts TIMESTAMP(6) NULL, y YEAR,
	c CHAR(10), vc VARCHAR(100), tx TEXT, bl BLOB, bn BINARY(4), vb VARBINARY(10),
	en ENUM('a','b','c'), st SET('x','y','z'), js JSON, bt BIT(12), bo BOOL)`

// Insert inserts one row of Rows, as a prepared statement.
const Insert = `INSERT INTO types VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`

// Time is the DATETIME and TIMESTAMP value of the first row.
var Time = time.Date(2026, 11, 30, 12, 34, 56, 789012000, time.UTC)

// Rows are the rows Insert inserts (ids 1, 2, 3), as Go values go-sql-driver
// binds: the edges of every type, then zeros and empties, then NULLs.
func Rows() [][]any {
	return [][]any{
		{int64(1), int64(-128), uint64(255), int64(-32768), uint64(65535), int64(-8388608), uint64(16777215),
			int64(math.MinInt32), uint64(math.MaxUint32), int64(math.MinInt64), uint64(math.MaxUint64),
			"-123456789012345678.123456", float32(1.5), math.Pi,
			"2026-11-30", "-838:59:59.000000", Time, Time, int64(2026),
			"char", "varchar ünïcødé", strings.Repeat("text ", 100), []byte{0, 1, 2, 0xff}, []byte("bin4"), []byte{0xde, 0xad},
			"b", "x,z", `{"k": [1, 2, {"n": null}]}`, []byte{0x0f, 0xff}, true},
		{int64(2), int64(127), uint64(0), int64(32767), uint64(0), int64(8388607), uint64(0),
			int64(math.MaxInt32), uint64(0), int64(math.MaxInt64), uint64(0),
			"0.000001", float32(-0.25), -1e-300,
			"1000-01-01", "00:00:00.000001", time.Date(1970, 1, 1, 0, 0, 1, 0, time.UTC), nil, int64(1901),
			"", "", "", []byte{}, []byte{0, 0, 0, 0}, []byte{},
			"a", "", `[]`, []byte{0, 0}, false},
		{int64(3), nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil,
			nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil},
	}
}
