package synth

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tandemdb/tandem/store"
)

func run(t *testing.T, workload string, mod func(*Config)) (Stats, []store.Record, store.Meta) {
	t.Helper()
	cfg := Config{Dir: filepath.Join(t.TempDir(), "cap"), Workload: workload, Options: DefaultOptions(), Dist: DefaultDist(), Threads: 1, Events: 1, Seed: 1}
	if mod != nil {
		mod(&cfg)
	}
	st, err := Run(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := store.Open(cfg.Dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var recs []store.Record
	for rec, err := range r.Records() {
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, *rec.Clone())
	}
	return st, recs, r.Meta()
}

// values are numbers and quoted strings where a placeholder would stand.
var values = regexp.MustCompile(`(=|BETWEEN |AND |\(|, )(-?[0-9]+|'[0-9-]*')`)

// statements renders one event's statements as templates ("?" for values)
// with their counts, from a capture of one session and one event.
func statements(recs []store.Record) map[string]int {
	prepared := map[uint32]string{}
	out := map[string]int{}
	for _, r := range recs {
		switch r.Kind {
		case store.KindPrepare:
			prepared[r.StmtID] = r.SQL
		case store.KindExecute:
			out[prepared[r.StmtID]]++
		case store.KindQuery:
			out[values.ReplaceAllString(r.SQL, "$1?")]++
		}
	}
	return out
}

func TestWorkloadTemplatesAndCounts(t *testing.T) {
	rw := map[string]int{
		"BEGIN": 1, "COMMIT": 1, "SELECT c FROM sbtest1 WHERE id=?": 10,
		"SELECT c FROM sbtest1 WHERE id BETWEEN ? AND ?":                     1,
		"SELECT SUM(k) FROM sbtest1 WHERE id BETWEEN ? AND ?":                1,
		"SELECT c FROM sbtest1 WHERE id BETWEEN ? AND ? ORDER BY c":          1,
		"SELECT DISTINCT c FROM sbtest1 WHERE id BETWEEN ? AND ? ORDER BY c": 1,
		"UPDATE sbtest1 SET k=k+1 WHERE id=?":                                1, "UPDATE sbtest1 SET c=? WHERE id=?": 1,
		"DELETE FROM sbtest1 WHERE id=?": 1, "INSERT INTO sbtest1 (id, k, c, pad) VALUES (?, ?, ?, ?)": 1,
	}
	pick := func(keys ...string) map[string]int {
		m := map[string]int{}
		for _, k := range keys {
			m[k] = rw[k]
		}
		return m
	}
	ranges := []string{"SELECT c FROM sbtest1 WHERE id BETWEEN ? AND ?", "SELECT SUM(k) FROM sbtest1 WHERE id BETWEEN ? AND ?",
		"SELECT c FROM sbtest1 WHERE id BETWEEN ? AND ? ORDER BY c", "SELECT DISTINCT c FROM sbtest1 WHERE id BETWEEN ? AND ? ORDER BY c"}
	writes := []string{"UPDATE sbtest1 SET k=k+1 WHERE id=?", "UPDATE sbtest1 SET c=? WHERE id=?", "DELETE FROM sbtest1 WHERE id=?", "INSERT INTO sbtest1 (id, k, c, pad) VALUES (?, ?, ?, ?)"}
	legacy := map[string]int{
		"BEGIN": 1, "COMMIT": 1, "SELECT c from sbtest where id=?": 10, "SELECT c from sbtest where id between ? and ?": 1,
		"SELECT SUM(K) from sbtest where id between ? and ?": 1, "SELECT c from sbtest where id between ? and ? order by c": 1,
		"SELECT DISTINCT c from sbtest where id between ? and ? order by c": 1, "UPDATE sbtest set k=k+1 where id=?": 2,
		"UPDATE sbtest set c=? where id=?": 1, "DELETE from sbtest where id=?": 1,
		"INSERT INTO sbtest values(?,0,' ','aaaaaaaaaaffffffffffrrrrrrrrrreeeeeeeeeeyyyyyyyyyy')": 1,
	}
	cases := []struct {
		workload string
		mod      func(*Config)
		want     map[string]int
		total    int
	}{
		{"oltp_read_write", nil, rw, 20},
		{"oltp_read_only", nil, pick(append([]string{"BEGIN", "COMMIT", "SELECT c FROM sbtest1 WHERE id=?"}, ranges...)...), 16},
		{"oltp_write_only", nil, pick(append([]string{"BEGIN", "COMMIT"}, writes...)...), 6},
		{"oltp_point_select", nil, map[string]int{"SELECT c FROM sbtest1 WHERE id=?": 1}, 1},
		{"oltp_update_index", nil, pick(writes[0]), 1},
		{"oltp_update_non_index", nil, pick(writes[1]), 1},
		{"oltp_delete", nil, pick(writes[2]), 1},
		{"oltp_insert", nil, map[string]int{"INSERT INTO sbtest1 (id, k, c, pad) VALUES (?, ?, ?, ?)": 1}, 1},
		{"oltp_read_write", func(c *Config) { c.SkipTrx, c.RangeSelects, c.PointSelects = true, false, 3 },
			map[string]int{"SELECT c FROM sbtest1 WHERE id=?": 3, writes[0]: 1, writes[1]: 1, writes[2]: 1, writes[3]: 1}, 7},
		{"oltp_read_write", func(c *Config) { c.PSMode = "disable" }, rw, 20},
		{"complex", nil, legacy, 21},
		{"nontrx", nil, map[string]int{"SELECT pad from sbtest where id=?": 1}, 1},
		{"nontrx", func(c *Config) { c.NontrxMode = "insert" }, map[string]int{"INSERT INTO sbtest values(?,?,?,?)": 1}, 1},
	}
	for _, c := range cases {
		t.Run(c.workload, func(t *testing.T) {
			st, recs, _ := run(t, c.workload, c.mod)
			got := statements(recs)
			if !reflect.DeepEqual(got, c.want) || st.Statements != uint64(c.total) {
				t.Fatalf("statements (%d):\n got %v\nwant %v", st.Statements, got, c.want)
			}
		})
	}
}

func TestSessionLifecycleLikeSysbench(t *testing.T) {
	st, recs, _ := run(t, "oltp_read_write", func(c *Config) { c.Tables, c.Threads, c.Events = 4, 2, 10 })
	k := map[store.Kind]int{}
	for _, r := range recs {
		k[r.Kind]++
	}
	// Per session: 2 (BEGIN, COMMIT) + 9 statements x 4 tables prepared and closed.
	if k[store.KindConnect] != 2 || k[store.KindPrepare] != 2*38 || k[store.KindClose] != 2*38 || k[store.KindQuit] != 2 || k[store.KindExecute] != 200 || st.Events != 10 {
		t.Fatalf("kinds %v, events %d", k, st.Events)
	}
	// The first execute of a statement binds its types; later ones do not.
	bound := map[[2]uint64]int{}
	for _, r := range recs {
		if r.Kind == store.KindExecute && len(r.Params) > 0 {
			key := [2]uint64{r.Session, uint64(r.StmtID)}
			if r.Flags&store.FlagNewParamsBound != 0 {
				bound[key]++
				if bound[key] > 1 {
					t.Fatalf("statement %v bound twice", key)
				}
			} else if bound[key] == 0 {
				t.Fatalf("statement %v executed before binding types", key)
			}
		}
	}
	for _, r := range recs {
		if r.Kind == store.KindExecute && strings.Contains(fmt.Sprint(r.Params), "Type:254") {
			if l := len(r.Params[0].Bytes); l != 119 && !(len(r.Params) == 4 && (l == 119 || len(r.Params[3].Bytes) == 59)) {
				t.Fatalf("c value of %d bytes", l)
			}
		}
	}
}

func TestSameSeedSameRecordsDifferentSeedDifferent(t *testing.T) {
	encode := func(seed uint64) [][]byte {
		_, recs, meta := run(t, "oltp_read_write", func(c *Config) { c.Threads, c.Events, c.Tables, c.Seed = 4, 50, 3, seed })
		out := make([][]byte, len(recs))
		for i := range recs {
			out[i] = store.AppendRecord(nil, &recs[i], meta.BaseTime)
		}
		return out
	}
	a, b, c := encode(42), encode(42), encode(43)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("the same seed gave different records")
	}
	if len(a) != len(c) {
		t.Fatalf("record counts differ by seed: %d vs %d", len(a), len(c))
	}
	if reflect.DeepEqual(a, c) {
		t.Fatal("different seeds gave the same records")
	}
}

func TestOpenLoopRate(t *testing.T) {
	const rate, secs = 500.0, 20
	st, recs, meta := run(t, "oltp_point_select", func(c *Config) { c.Threads, c.Events, c.Rate, c.Duration = 8, 0, rate, secs*time.Second })
	// Poisson: the count is within 4 standard deviations of rate x duration.
	want, sd := rate*secs, math.Sqrt(rate*secs)
	if math.Abs(float64(st.Events)-want) > 4*sd {
		t.Fatalf("%d events in %ds at rate %v, want %v ± %.0f", st.Events, secs, rate, want, 4*sd)
	}
	var last int64
	for _, r := range recs {
		if r.Kind == store.KindExecute {
			last = max(last, r.Start.UnixNano()-meta.BaseTime)
		}
	}
	if last >= secs*1e9 || last < (secs-1)*1e9 {
		t.Fatalf("last execute at %v, want within the last second of %ds", time.Duration(last), secs)
	}
}

// moments draws n values and returns their mean and standard deviation.
func moments(n int, f func() uint32) (float64, float64) {
	var s, s2 float64
	for i := 0; i < n; i++ {
		v := float64(f())
		s += v
		s2 += v * v
	}
	m := s / float64(n)
	return m, math.Sqrt(s2/float64(n) - m*m)
}

func TestDistributionsMatchReferenceFormulas(t *testing.T) {
	const a, b, n = 1, 100000, 400000
	d := DefaultDist()
	span := float64(b - a + 1)
	tt := float64(b - a)
	// special: a mixture of a gaussian (weight 1-res) over the range and a
	// uniform (weight res) on [t/2 - t*pct/200 + u(d+1)], u in [1-res, 1).
	res, pct := float64(d.SpecRes)/100, float64(d.SpecPct)/100
	dd := tt * pct
	lo := (1 - res) * (dd + 1)
	hi := dd + 1
	m1, v1 := a+tt/2, tt*tt/(12*float64(d.SpecIter))
	m2, v2 := a+tt/2-tt*pct/2+(lo+hi)/2-0.5, (hi-lo)*(hi-lo)/12
	specMean := (1-res)*m1 + res*m2
	specVar := (1-res)*(v1+m1*m1) + res*(v2+m2*m2) - specMean*specMean
	p := math.Log(d.ParetoH) / math.Log(1-d.ParetoH)
	paretoMean := a + span/(p+1) - 0.5
	paretoSD := span * math.Sqrt(1/(2*p+1)-1/((p+1)*(p+1)))
	// zipfian: P(k) ∝ k^-e on [1, span].
	var z, zk, zk2 float64
	for k := 1.0; k <= span; k++ {
		w := math.Pow(k, -d.ZipfExp)
		z, zk, zk2 = z+w, zk+w*k, zk2+w*k*k
	}
	zipfMean := a - 1 + zk/z
	zipfSD := math.Sqrt(zk2/z - (zk/z)*(zk/z))
	cases := []struct {
		kind     string
		mean, sd float64
	}{
		{"uniform", a + span/2 - 0.5, span / math.Sqrt(12)},
		{"gaussian", a + span/2 - 0.5, span / math.Sqrt(12*float64(d.SpecIter))},
		{"special", specMean, math.Sqrt(specVar)},
		{"pareto", paretoMean, paretoSD},
		{"zipfian", zipfMean, zipfSD},
	}
	for _, c := range cases {
		dist := d
		dist.Kind = c.kind
		g := NewRand(dist, 7, 7)
		mean, sd := moments(n, func() uint32 { return g.Default(a, b) })
		// Stated tolerance: the mean within 1% of the range, the spread within 3%.
		if math.Abs(mean-c.mean) > 0.01*span || math.Abs(sd-c.sd) > 0.03*c.sd {
			t.Errorf("%s: mean %.1f sd %.1f, reference %.1f and %.1f", c.kind, mean, sd, c.mean, c.sd)
		}
		g = NewRand(dist, 7, 8)
		for i := 0; i < 10000; i++ {
			if v := g.Default(a, b); v < a || v > b {
				t.Fatalf("%s: %d outside [%d, %d]", c.kind, v, a, b)
			}
		}
	}
}

func TestBadConfig(t *testing.T) {
	base := func() Config {
		return Config{Dir: t.TempDir() + "/c", Workload: "oltp_read_write", Options: DefaultOptions(), Dist: DefaultDist(), Threads: 1, Events: 1}
	}
	cases := map[string]func(*Config){
		"unknown workload":      func(c *Config) { c.Workload = "tpcc" },
		"unknown distribution":  func(c *Config) { c.Dist.Kind = "normal" },
		"no events or duration": func(c *Config) { c.Events = 0 },
		"range > table":         func(c *Config) { c.RangeSize = c.TableSize + 1 },
		"ps mode":               func(c *Config) { c.PSMode = "on" },
		"zero threads":          func(c *Config) { c.Threads = 0 },
		"nontrx mode":           func(c *Config) { c.NontrxMode = "upsert" },
	}
	for name, mod := range cases {
		c := base()
		mod(&c)
		if _, err := Run(context.Background(), c, nil); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func BenchmarkSynth(b *testing.B) {
	cfg := Config{Dir: filepath.Join(b.TempDir(), "cap"), Workload: "oltp_read_write", Options: DefaultOptions(), Dist: DefaultDist(), Threads: 8, Events: uint64(b.N/20 + 1), Seed: 1}
	cfg.Tables = 4
	b.ResetTimer()
	st, err := Run(context.Background(), cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(st.Statements)/st.Elapsed.Seconds(), "statements/s")
}

func TestStringDigitsAreUniform(t *testing.T) {
	g := NewRand(DefaultDist(), 3, 3)
	var counts [10]int
	var b []byte
	for i := 0; i < 2000; i++ {
		b = g.String(b[:0], CTemplate)
		if len(b) != 119 || b[11] != '-' {
			t.Fatalf("c value %q", b)
		}
		for _, c := range b {
			if c != '-' {
				counts[c-'0']++
			}
		}
	}
	// 220,000 digits: each within 2% of a tenth.
	for d, n := range counts {
		if math.Abs(float64(n)-22000) > 440 {
			t.Errorf("digit %d drawn %d times, want 22000 ± 440", d, n)
		}
	}
}
