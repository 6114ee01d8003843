package store

import (
	"fmt"
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

// benchKey encrypts the encrypted benchmarks' captures.
var benchKey = func() *Key {
	k, err := ParseKey([]byte("6b3a1f09d2c4e8577a10ff3c9e2b4d6a0c8e1f2a3b4c5d6e7f8091a2b3c4d5e6"))
	if err != nil {
		panic(err)
	}
	return k
}()

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
	r := scanCapture(b, nil)
	defer r.Close()
	b.ResetTimer()
	var total int
	for i := 0; i < b.N; i++ {
		total += scanAll(b, r)
	}
	b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "records/s")
}

// scanCapture writes a closed capture of a million records of the mix,
// encrypted with key if it is not nil, and opens it.
func scanCapture(b *testing.B, key *Key) *Reader {
	const n = 1_000_000
	dir := filepath.Join(b.TempDir(), "cap")
	w, err := Create(dir, WriterOptions{NoSync: true, Key: key})
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
	r, err := Open(dir, WithKey(key))
	if err != nil {
		b.Fatal(err)
	}
	return r
}

// scanAll reads every record of r and counts them.
func scanAll(b *testing.B, r *Reader) int {
	n := 0
	for _, err := range r.Records() {
		if err != nil {
			b.Fatal(err)
		}
		n++
	}
	return n
}

// BenchmarkEncryptedAppend measures what encryption at rest costs the
// append path, side by side: in 4 rounds, a capture in clear and one
// encrypted each take a quarter of the records, synced as
// BenchmarkAppend, from create to close (a writer's flushes and
// compactions run in the background and would be charged to the other
// one if both were open at once); the order alternates.
func BenchmarkEncryptedAppend(b *testing.B) {
	const rounds = 4
	per := max(b.N/rounds, 1)
	recs := make([]Record, 10_000)
	mix := newOLTPMix(1)
	for i := range recs {
		mix.next(&recs[i])
	}
	var took [2]time.Duration
	var size int64
	b.ResetTimer()
	for round := range rounds {
		for k := range 2 {
			i := (k + round) % 2 // 0: in clear, 1: encrypted
			key := []*Key{nil, benchKey}[i]
			dir := filepath.Join(b.TempDir(), fmt.Sprintf("cap-%d-%d", round, i))
			start := time.Now()
			w, err := Create(dir, WriterOptions{Key: key})
			if err != nil {
				b.Fatal(err)
			}
			for j := range per {
				if _, err := w.Append(&recs[j%len(recs)]); err != nil {
					b.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
			took[i] += time.Since(start)
			if i == 1 {
				n, _ := dirSize(dir)
				size += n
			}
		}
	}
	b.StopTimer()
	n := float64(per * rounds)
	plain, enc := n/took[0].Seconds(), n/took[1].Seconds()
	b.ReportMetric(plain, "plain-records/s")
	b.ReportMetric(enc, "encrypted-records/s")
	b.ReportMetric(enc/plain, "ratio")
	b.ReportMetric(float64(size)/n, "encrypted-disk-B/record")
}

// BenchmarkEncryptedScan measures what encryption at rest costs a full
// scan, side by side: each iteration scans a capture in clear, then the
// same records encrypted.
func BenchmarkEncryptedScan(b *testing.B) {
	rs := [2]*Reader{scanCapture(b, nil), scanCapture(b, benchKey)}
	defer rs[0].Close()
	defer rs[1].Close()
	var took [2]time.Duration
	var total int
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j, r := range rs {
			start := time.Now()
			n := scanAll(b, r)
			took[j] += time.Since(start)
			if j == 0 {
				total += n
			}
		}
	}
	b.StopTimer()
	plain, enc := float64(total)/took[0].Seconds(), float64(total)/took[1].Seconds()
	b.ReportMetric(plain, "plain-records/s")
	b.ReportMetric(enc, "encrypted-records/s")
	b.ReportMetric(enc/plain, "ratio")
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
