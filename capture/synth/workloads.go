package synth

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Options are sysbench's OLTP options (oltp_common.lua; legacy: oltp.c).
type Options struct {
	Tables          int
	TableSize       int
	RangeSize       int
	PointSelects    int
	SimpleRanges    int
	SumRanges       int
	OrderRanges     int
	DistinctRanges  int
	IndexUpdates    int
	NonIndexUpdates int
	DeleteInserts   int
	RangeSelects    bool
	SkipTrx         bool
	AutoInc         bool
	// NontrxMode is the legacy nontrx workload's statement: select,
	// update_key, update_nokey, insert or delete.
	NontrxMode string
}

// DefaultOptions are sysbench 1.0.20's defaults.
func DefaultOptions() Options {
	return Options{Tables: 1, TableSize: 10000, RangeSize: 100, PointSelects: 10, SimpleRanges: 1, SumRanges: 1,
		OrderRanges: 1, DistinctRanges: 1, IndexUpdates: 1, NonIndexUpdates: 1, DeleteInserts: 1,
		RangeSelects: true, AutoInc: true, NontrxMode: "select"}
}

// Parameter types as sysbench binds them: DB_TYPE_INT is MYSQL_TYPE_LONG,
// DB_TYPE_CHAR is MYSQL_TYPE_STRING.
const (
	pInt  byte = 0x03
	pChar byte = 0xfe
)

// stmtDef is a prepared statement of a workload; %d in SQL is the table number.
type stmtDef struct {
	sql   string
	types []byte
}

// Statement definitions of sysbench 1.0.20's oltp_common.lua.
var modernDefs = map[string]stmtDef{
	"begin":             {"BEGIN", nil},
	"commit":            {"COMMIT", nil},
	"point_selects":     {"SELECT c FROM sbtest%d WHERE id=?", []byte{pInt}},
	"simple_ranges":     {"SELECT c FROM sbtest%d WHERE id BETWEEN ? AND ?", []byte{pInt, pInt}},
	"sum_ranges":        {"SELECT SUM(k) FROM sbtest%d WHERE id BETWEEN ? AND ?", []byte{pInt, pInt}},
	"order_ranges":      {"SELECT c FROM sbtest%d WHERE id BETWEEN ? AND ? ORDER BY c", []byte{pInt, pInt}},
	"distinct_ranges":   {"SELECT DISTINCT c FROM sbtest%d WHERE id BETWEEN ? AND ? ORDER BY c", []byte{pInt, pInt}},
	"index_updates":     {"UPDATE sbtest%d SET k=k+1 WHERE id=?", []byte{pInt}},
	"non_index_updates": {"UPDATE sbtest%d SET c=? WHERE id=?", []byte{pChar, pInt}},
	"deletes":           {"DELETE FROM sbtest%d WHERE id=?", []byte{pInt}},
	"inserts":           {"INSERT INTO sbtest%d (id, k, c, pad) VALUES (?, ?, ?, ?)", []byte{pInt, pInt, pChar, pChar}},
}

// Statement definitions of sysbench 0.4's oltp test (one table, sbtest).
var legacyDefs = map[string]stmtDef{
	"begin":            {"BEGIN", nil},
	"commit":           {"COMMIT", nil},
	"point":            {"SELECT c from sbtest where id=?", []byte{pInt}},
	"point_pad":        {"SELECT pad from sbtest where id=?", []byte{pInt}},
	"range":            {"SELECT c from sbtest where id between ? and ?", []byte{pInt, pInt}},
	"range_sum":        {"SELECT SUM(K) from sbtest where id between ? and ?", []byte{pInt, pInt}},
	"range_order":      {"SELECT c from sbtest where id between ? and ? order by c", []byte{pInt, pInt}},
	"range_distinct":   {"SELECT DISTINCT c from sbtest where id between ? and ? order by c", []byte{pInt, pInt}},
	"update_index":     {"UPDATE sbtest set k=k+1 where id=?", []byte{pInt}},
	"update_non_index": {"UPDATE sbtest set c=? where id=?", []byte{pChar, pInt}},
	"delete":           {"DELETE from sbtest where id=?", []byte{pInt}},
	"insert":           {"INSERT INTO sbtest values(?,0,' ','aaaaaaaaaaffffffffffrrrrrrrrrreeeeeeeeeeyyyyyyyyyy')", []byte{pInt}},
	"insert_nontrx":    {"INSERT INTO sbtest values(?,?,?,?)", []byte{pInt, pInt, pChar, pChar}},
}

// Value templates of sysbench's c and pad columns: '#' is a random digit.
const (
	CTemplate   = "###########-###########-###########-###########-###########-###########-###########-###########-###########-###########"
	PadTemplate = "###########-###########-###########-###########-###########"
)

// workload says which statements a session prepares and what one event sends.
type workload struct {
	legacy bool
	// prepare lists the statement keys in the order sysbench prepares them;
	// modern keys other than begin and commit are prepared once per table.
	prepare func(o Options) []string
	event   func(s *session)
}

// Workloads lists the workload names synth knows.
func Workloads() []string {
	names := make([]string, 0, len(workloads))
	for n := range workloads {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func lookupWorkload(name string) (*workload, error) {
	w, ok := workloads[name]
	if !ok {
		return nil, fmt.Errorf("synth: unknown workload %q (known: %s)", name, strings.Join(Workloads(), ", "))
	}
	return w, nil
}

func trx(o Options, keys ...string) []string {
	if o.SkipTrx {
		return keys
	}
	return append([]string{"begin", "commit"}, keys...)
}

func ranges(o Options) []string {
	if !o.RangeSelects {
		return nil
	}
	return []string{"simple_ranges", "sum_ranges", "order_ranges", "distinct_ranges"}
}

var workloads = map[string]*workload{
	"oltp_read_write": {
		prepare: func(o Options) []string {
			keys := append([]string{"point_selects"}, ranges(o)...)
			return trx(o, append(keys, "index_updates", "non_index_updates", "deletes", "inserts")...)
		},
		event: func(s *session) {
			s.begin()
			s.pointSelects(s.o.PointSelects)
			s.ranges()
			s.indexUpdates()
			s.nonIndexUpdates()
			s.deleteInserts()
			s.commit()
		},
	},
	"oltp_read_only": {
		prepare: func(o Options) []string {
			keys := []string{"point_selects"}
			if !o.SkipTrx {
				keys = append(keys, "begin", "commit")
			}
			return append(keys, ranges(o)...)
		},
		event: func(s *session) {
			s.begin()
			s.pointSelects(s.o.PointSelects)
			s.ranges()
			s.commit()
		},
	},
	"oltp_write_only": {
		prepare: func(o Options) []string {
			return trx(o, "index_updates", "non_index_updates", "deletes", "inserts")
		},
		event: func(s *session) {
			s.begin()
			s.indexUpdates()
			s.nonIndexUpdates()
			s.deleteInserts()
			s.commit()
		},
	},
	// oltp_point_select forces --point-selects=1.
	"oltp_point_select": {
		prepare: func(Options) []string { return []string{"point_selects"} },
		event:   func(s *session) { s.pointSelects(1) },
	},
	// oltp_insert sends text queries whatever the ps mode.
	"oltp_insert": {
		prepare: func(Options) []string { return nil },
		event: func(s *session) {
			table := s.g.Uniform(1, uint32(s.o.Tables))
			k := s.g.Default(1, uint32(s.o.TableSize))
			id := int64(0)
			if !s.o.AutoInc {
				id = int64(s.unique.Next()) - 2147483648
			}
			s.buf = append(s.buf[:0], "INSERT INTO sbtest"...)
			s.buf = strconv.AppendUint(s.buf, uint64(table), 10)
			s.buf = append(s.buf, " (id, k, c, pad) VALUES ("...)
			s.buf = strconv.AppendInt(s.buf, id, 10)
			s.buf = append(s.buf, ", "...)
			s.buf = strconv.AppendUint(s.buf, uint64(k), 10)
			s.buf = append(s.buf, ", '"...)
			s.buf = s.g.String(s.buf, CTemplate)
			s.buf = append(s.buf, "', '"...)
			s.buf = s.g.String(s.buf, PadTemplate)
			s.buf = append(s.buf, "')"...)
			s.text(string(s.buf))
		},
	},
	"oltp_update_index": {
		prepare: func(Options) []string { return []string{"index_updates"} },
		event:   func(s *session) { s.indexUpdates() },
	},
	"oltp_update_non_index": {
		prepare: func(Options) []string { return []string{"non_index_updates"} },
		event:   func(s *session) { s.nonIndexUpdates() },
	},
	"oltp_delete": {
		prepare: func(Options) []string { return []string{"deletes"} },
		event: func(s *session) {
			t := s.g.Uniform(1, uint32(s.o.Tables))
			s.exec("deletes", t, intu(s.id()))
		},
	},
	// Legacy sysbench 0.4 "--oltp-test-mode=complex".
	"complex": {
		legacy: true,
		prepare: func(o Options) []string {
			keys := []string{"point", "range", "range_sum", "range_order", "range_distinct", "update_index", "update_non_index", "delete", "insert"}
			if !o.SkipTrx {
				keys = append(keys, "begin", "commit")
			}
			return keys
		},
		event: legacyComplex,
	},
	// Legacy sysbench 0.4 "--oltp-test-mode=nontrx --oltp-nontrx-mode=…".
	"nontrx": {
		legacy: true,
		prepare: func(o Options) []string {
			return []string{"point_pad", "update_index", "update_non_index", "delete", "insert_nontrx"}
		},
		event: legacyNontrx,
	},
}

func legacyComplex(s *session) {
	if !s.o.SkipTrx {
		s.exec("begin", 0)
	}
	for i := 0; i < s.o.PointSelects; i++ {
		s.exec("point", 0, intu(s.id()))
	}
	legacyRange := func(key string, n int, end int64) {
		for i := 0; i < n; i++ {
			from := int64(s.id())
			if from+int64(s.o.RangeSize) > int64(s.o.TableSize) {
				from = int64(s.o.TableSize - s.o.RangeSize)
			}
			from = max(from, 1)
			s.exec(key, 0, intv(from), intv(from+int64(s.o.RangeSize)+end))
		}
	}
	legacyRange("range", s.o.SimpleRanges, -1)
	legacyRange("range_sum", s.o.SumRanges, -1)
	legacyRange("range_order", s.o.OrderRanges, -1)
	legacyRange("range_distinct", s.o.DistinctRanges, 0) // 0.4 used from+range_size here
	for i := 0; i < s.o.IndexUpdates; i++ {
		s.exec("update_index", 0, intu(s.id()))
	}
	for i := 0; i < s.o.NonIndexUpdates; i++ {
		s.exec("update_non_index", 0, charv(s.legacyString(10, 119)), intu(s.id()))
	}
	id := s.id()
	s.exec("update_index", 0, intu(id))
	s.exec("delete", 0, intu(id))
	s.exec("insert", 0, intu(id))
	if !s.o.SkipTrx {
		s.exec("commit", 0)
	}
}

func legacyNontrx(s *session) {
	switch s.o.NontrxMode {
	case "select":
		s.exec("point_pad", 0, intu(s.id()))
	case "update_key":
		s.exec("update_index", 0, intu(s.id()))
	case "update_nokey":
		s.exec("update_non_index", 0, charv(s.legacyString(10, 119)), intu(s.id()))
	case "insert":
		k := intu(s.id())
		c, pad := charv(s.legacyString(10, 119)), charv(s.legacyString(5, 59))
		if s.o.AutoInc {
			s.exec("insert_nontrx", 0, nullv(), k, c, pad)
		} else {
			s.exec("insert_nontrx", 0, intv(s.legacyUnique()), k, c, pad)
		}
	case "delete":
		s.exec("delete", 0, intv(s.legacyUnique()))
	}
}
