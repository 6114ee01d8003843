package store

import (
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// oltpMix generates what a capture of sysbench oltp_read_write looks like:
// per transaction BEGIN, 10 point selects, 4 ranges, 2 updates, a delete,
// an insert and COMMIT, over 16 sessions; half the sessions use prepared
// statements (executes with typed parameters), half text queries. Values
// have sysbench's shapes (c: 119, pad: 59 random digits and dashes).
type oltpMix struct {
	rng   *rand.Rand
	now   int64
	i     int
	stmt  int
	texts []string
}

func newOLTPMix(seed uint64) *oltpMix {
	return &oltpMix{rng: rand.New(rand.NewPCG(seed, seed)), now: time.Now().UnixNano()}
}

func (m *oltpMix) digits(groups int) []byte {
	b := make([]byte, 0, groups*12)
	for g := 0; g < groups; g++ {
		if g > 0 {
			b = append(b, '-')
		}
		for d := 0; d < 11; d++ {
			b = append(b, byte('0'+m.rng.IntN(10)))
		}
	}
	return b
}

var oltpTemplates = [...]string{
	"BEGIN", "SELECT c FROM sbtest%d WHERE id=%d", "SELECT c FROM sbtest%d WHERE id BETWEEN %d AND %d",
	"SELECT SUM(k) FROM sbtest%d WHERE id BETWEEN %d AND %d", "SELECT c FROM sbtest%d WHERE id BETWEEN %d AND %d ORDER BY c",
	"SELECT DISTINCT c FROM sbtest%d WHERE id BETWEEN %d AND %d ORDER BY c", "UPDATE sbtest%d SET k=k+1 WHERE id=%d",
	"UPDATE sbtest%d SET c='%s' WHERE id=%d", "DELETE FROM sbtest%d WHERE id=%d",
	"INSERT INTO sbtest%d (id, k, c, pad) VALUES (%d, %d, '%s', '%s')", "COMMIT",
}

// next fills r with the next record of the mix.
func (m *oltpMix) next(r *Record) {
	// Statement index within the 20-statement transaction → template.
	pos := m.i % 20
	var tmpl int
	switch {
	case pos == 0:
		tmpl = 0
	case pos <= 10:
		tmpl = 1
	case pos <= 14:
		tmpl = pos - 9 // 2..5
	case pos == 19:
		tmpl = 10
	default:
		tmpl = pos - 9 // 6..9
	}
	session := uint64(m.i/20%16) + 1
	m.i++
	m.now += int64(20_000 + m.rng.IntN(40_000))
	table := 1 + m.rng.IntN(4)
	id := 1 + m.rng.IntN(20000)
	*r = Record{Session: session, Start: time.Unix(0, m.now), Duration: time.Duration(50_000 + m.rng.IntN(400_000)), Schema: "sbtest"}
	resp := Response{Kind: RespOK}
	switch {
	case tmpl >= 1 && tmpl <= 5:
		rows := uint64(1)
		if tmpl > 1 {
			rows = 100
		}
		resp = Response{Kind: RespResultSet, Columns: 1, Rows: rows, Bytes: rows*125 + 60}
	case tmpl >= 6 && tmpl <= 9:
		resp = Response{Kind: RespOK, AffectedRows: 1}
	}
	r.Resp = resp
	if session <= 8 && tmpl != 0 && tmpl != 10 {
		r.Kind = KindExecute
		r.StmtID = uint32(tmpl*4 + table)
		p := []Value{{Type: TypeLong, Int: int64(id)}}
		switch tmpl {
		case 2, 3, 4, 5:
			p = append(p, Value{Type: TypeLong, Int: int64(id + 99)})
		case 7:
			p = []Value{{Type: TypeString, Bytes: m.digits(10)}, {Type: TypeLong, Int: int64(id)}}
		case 9:
			p = append(p, Value{Type: TypeLong, Int: int64(m.rng.IntN(20000))}, Value{Type: TypeString, Bytes: m.digits(10)}, Value{Type: TypeString, Bytes: m.digits(5)})
		}
		r.Params = p
		return
	}
	r.Kind = KindQuery
	t := strconv.Itoa(table)
	ids := strconv.Itoa(id)
	switch tmpl {
	case 0:
		r.SQL = "BEGIN"
	case 10:
		r.SQL = "COMMIT"
	case 1:
		r.SQL = "SELECT c FROM sbtest" + t + " WHERE id=" + ids
	case 2:
		r.SQL = "SELECT c FROM sbtest" + t + " WHERE id BETWEEN " + ids + " AND " + strconv.Itoa(id+99)
	case 3:
		r.SQL = "SELECT SUM(k) FROM sbtest" + t + " WHERE id BETWEEN " + ids + " AND " + strconv.Itoa(id+99)
	case 4:
		r.SQL = "SELECT c FROM sbtest" + t + " WHERE id BETWEEN " + ids + " AND " + strconv.Itoa(id+99) + " ORDER BY c"
	case 5:
		r.SQL = "SELECT DISTINCT c FROM sbtest" + t + " WHERE id BETWEEN " + ids + " AND " + strconv.Itoa(id+99) + " ORDER BY c"
	case 6:
		r.SQL = "UPDATE sbtest" + t + " SET k=k+1 WHERE id=" + ids
	case 7:
		r.SQL = "UPDATE sbtest" + t + " SET c='" + string(m.digits(10)) + "' WHERE id=" + ids
	case 8:
		r.SQL = "DELETE FROM sbtest" + t + " WHERE id=" + ids
	case 9:
		r.SQL = "INSERT INTO sbtest" + t + " (id, k, c, pad) VALUES (" + ids + ", " + strconv.Itoa(m.rng.IntN(20000)) + ", '" + string(m.digits(10)) + "', '" + string(m.digits(5)) + "')"
	}
}

// BenchmarkAppend measures sustained appends of the oltp_read_write mix
// with the default (synced) group commit, and the bytes each record takes
// on disk once the capture is closed.
func BenchmarkAppend(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts WriterOptions
	}{
		{"sync", WriterOptions{}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			recs := make([]Record, 100_000)
			mix := newOLTPMix(1)
			for i := range recs {
				mix.next(&recs[i])
			}
			dir := filepath.Join(b.TempDir(), "cap")
			w, err := Create(dir, bc.opts)
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := w.Append(&recs[i%len(recs)]); err != nil {
					b.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			size, _ := dirSize(dir)
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
			b.ReportMetric(float64(size)/float64(b.N), "disk-B/record")
		})
	}
}

// BenchmarkScan measures a full scan, in global order, of a closed capture.
func BenchmarkScan(b *testing.B) {
	const n = 1_000_000
	dir := filepath.Join(b.TempDir(), "cap")
	w, err := Create(dir, WriterOptions{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	mix := newOLTPMix(2)
	var rec Record
	for i := 0; i < n; i++ {
		mix.next(&rec)
		if _, err := w.Append(&rec); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	r, err := Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	b.ResetTimer()
	var total int
	for i := 0; i < b.N; i++ {
		for _, err := range r.Records() {
			if err != nil {
				b.Fatal(err)
			}
			total++
		}
	}
	b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkAppendParallel is BenchmarkAppend with concurrent producers, as
// a proxy's connections append: 8 goroutines per core.
func BenchmarkAppendParallel(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "cap")
	w, err := Create(dir, WriterOptions{})
	if err != nil {
		b.Fatal(err)
	}
	var seed atomic.Uint64
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		mix := newOLTPMix(seed.Add(1))
		var rec Record
		for pb.Next() {
			mix.next(&rec)
			if _, err := w.Append(&rec); err != nil {
				b.Error(err)
				return
			}
		}
	})
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}
