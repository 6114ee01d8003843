// Package synth writes captures of sysbench-style OLTP traffic without a
// server: the statements, statement order, parameter shapes and
// distributions of sysbench 1.0.20's oltp_* workloads and of sysbench 0.4's
// legacy complex and nontrx modes, seeded and reproducible.
//
// Each of --threads sessions behaves as a sysbench thread: it connects,
// prepares every statement of the workload for every table (unless
// --ps-mode=disable), runs events, closes its statements and quits. Sessions
// are merged in start-time order by one generator, so a seed fixes every
// record's bytes. Timing is synthetic: in a closed loop each session sends a
// statement every StmtInterval; with Rate, events arrive as a Poisson process
// and go to the session that is free first. Responses are not known, so
// records carry none (replay compares targets with each other).
package synth

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/tandemdb/tandem/store"
	"github.com/tandemdb/tandem/wire"
)

// Config is what `tandem synth` writes.
type Config struct {
	Dir      string
	Workload string
	Options
	Dist    Dist
	Threads int
	// Events is the number of events (transactions, for the trx workloads)
	// across all sessions; Duration bounds the synthetic timeline instead.
	Events   uint64
	Duration time.Duration
	// Rate, if > 0, is an open-loop arrival rate in events per second.
	Rate float64
	// PSMode is "auto" (prepared statements, as sysbench's default) or
	// "disable" (text queries with the values in them).
	PSMode       string
	Seed         uint64
	Schema, User string
	// StmtInterval spaces a session's statements in the closed loop.
	StmtInterval time.Duration
}

// Check fills defaults and says what is wrong with c.
func (c *Config) Check() error {
	if _, err := lookupWorkload(c.Workload); err != nil {
		return err
	}
	if err := c.Dist.Validate(); err != nil {
		return err
	}
	switch {
	case c.Dir == "":
		return errors.New("synth: no capture directory; give --out DIR")
	case c.Threads < 1:
		return errors.New("synth: --threads must be at least 1")
	case c.Tables < 1:
		return errors.New("synth: --tables must be at least 1")
	case c.TableSize < 1:
		return errors.New("synth: --table-size must be at least 1")
	case c.RangeSize < 1 || c.RangeSize > c.TableSize:
		return fmt.Errorf("synth: --range-size must be 1..%d (the table size)", c.TableSize)
	case c.Events == 0 && c.Duration <= 0:
		return errors.New("synth: give --events or --duration")
	case c.Rate < 0:
		return errors.New("synth: --rate must be positive")
	}
	for _, n := range []int{c.PointSelects, c.SimpleRanges, c.SumRanges, c.OrderRanges, c.DistinctRanges, c.IndexUpdates, c.NonIndexUpdates, c.DeleteInserts} {
		if n < 0 {
			return errors.New("synth: statement counts must not be negative")
		}
	}
	switch c.PSMode {
	case "":
		c.PSMode = "auto"
	case "auto", "disable":
	default:
		return fmt.Errorf("synth: --ps-mode %q: want auto or disable", c.PSMode)
	}
	switch c.NontrxMode {
	case "":
		c.NontrxMode = "select"
	case "select", "update_key", "update_nokey", "insert", "delete":
	default:
		return fmt.Errorf("synth: --nontrx-mode %q: want select, update_key, update_nokey, insert or delete", c.NontrxMode)
	}
	if c.Schema == "" {
		c.Schema = "sbtest"
	}
	if c.User == "" {
		c.User = "sbtest"
	}
	if c.StmtInterval <= 0 {
		c.StmtInterval = 200 * time.Microsecond
	}
	return nil
}

// Stats is what a synth run wrote.
type Stats struct {
	Records    uint64        `json:"records"`
	Statements uint64        `json:"statements"` // queries and executes
	Events     uint64        `json:"events"`
	Sessions   int           `json:"sessions"`
	Span       time.Duration `json:"span_ns"`
	Elapsed    time.Duration `json:"elapsed_ns"`
}

// pendingStmt is one record a session will send.
type pendingStmt struct {
	kind   store.Kind
	stmtID uint32
	sql    string
	params []store.Value
	flags  store.Flags
}

type session struct {
	idx    int
	sid    uint64
	o      Options
	w      *workload
	ps     bool
	g      *Rand
	unique *Unique
	legacy uint64
	ids    map[string][]uint32 // key → statement id per table (index 0 for legacy)
	bound  map[uint32]bool     // executed once: types already sent
	keys   []string            // prepared keys in order

	pending []pendingStmt
	n, pos  int
	next    int64 // nanoseconds from the start of the timeline
	phase   int   // 0 connect+prepare, 1 events, 2 close+quit, 3 done
	buf     []byte
}

func (s *session) add() *pendingStmt {
	if s.n == len(s.pending) {
		s.pending = append(s.pending, pendingStmt{})
	}
	p := &s.pending[s.n]
	s.n++
	params := p.params[:0]
	*p = pendingStmt{params: params}
	return p
}

func (s *session) id() uint32 { return s.g.Default(1, uint32(s.o.TableSize)) }

func intv(v int64) store.Value   { return store.Value{Type: pInt, Int: v} }
func intu(v uint32) store.Value  { return store.Value{Type: pInt, Int: int64(v)} }
func charv(b []byte) store.Value { return store.Value{Type: pChar, Bytes: b} }
func nullv() store.Value         { return store.Value{Type: pInt, Null: true} }

func (s *session) def(key string) stmtDef {
	if s.w.legacy {
		return legacyDefs[key]
	}
	return modernDefs[key]
}

func (s *session) sqlFor(key string, table uint32) string {
	d := s.def(key)
	if key == "begin" || key == "commit" || s.w.legacy {
		return d.sql
	}
	return fmt.Sprintf(d.sql, table)
}

// exec sends a prepared statement (an execute, or with --ps-mode=disable
// the text query sysbench would send instead).
func (s *session) exec(key string, table uint32, vals ...store.Value) {
	p := s.add()
	if s.ps {
		perTable := s.ids[key]
		ti := 0
		if key != "begin" && key != "commit" && !s.w.legacy {
			ti = int(table) - 1
		}
		p.kind, p.stmtID = store.KindExecute, perTable[ti]
		p.params = append(p.params, vals...)
		if len(vals) > 0 && !s.bound[p.stmtID] {
			s.bound[p.stmtID] = true
			p.flags = store.FlagNewParamsBound
		}
		return
	}
	p.kind, p.sql = store.KindQuery, substitute(s.buf[:0], s.sqlFor(key, table), vals)
}

// substitute fills a statement's placeholders as sysbench's client-side
// emulation of prepared statements does: numbers as they are, strings quoted.
func substitute(b []byte, sql string, vals []store.Value) string {
	vi := 0
	for i := 0; i < len(sql); i++ {
		if sql[i] != '?' || vi >= len(vals) {
			b = append(b, sql[i])
			continue
		}
		v := vals[vi]
		vi++
		switch {
		case v.Null:
			b = append(b, "NULL"...)
		case v.Type == pChar:
			b = append(append(append(b, '\''), v.Bytes...), '\'')
		default:
			b = strconv.AppendInt(b, v.Int, 10)
		}
	}
	return string(b)
}

func (s *session) text(sql string) {
	p := s.add()
	p.kind, p.sql = store.KindQuery, sql
}

func (s *session) begin() {
	if !s.o.SkipTrx {
		s.exec("begin", 0)
	}
}

func (s *session) commit() {
	if !s.o.SkipTrx {
		s.exec("commit", 0)
	}
}

func (s *session) table() uint32 { return s.g.Uniform(1, uint32(s.o.Tables)) }

func (s *session) pointSelects(n int) {
	t := s.table()
	for i := 0; i < n; i++ {
		s.exec("point_selects", t, intu(s.id()))
	}
}

func (s *session) ranges() {
	if !s.o.RangeSelects {
		return
	}
	for _, r := range []struct {
		key string
		n   int
	}{{"simple_ranges", s.o.SimpleRanges}, {"sum_ranges", s.o.SumRanges}, {"order_ranges", s.o.OrderRanges}, {"distinct_ranges", s.o.DistinctRanges}} {
		t := s.table()
		for i := 0; i < r.n; i++ {
			id := s.id()
			s.exec(r.key, t, intu(id), intv(int64(id)+int64(s.o.RangeSize)-1))
		}
	}
}

func (s *session) indexUpdates() {
	t := s.table()
	for i := 0; i < s.o.IndexUpdates; i++ {
		s.exec("index_updates", t, intu(s.id()))
	}
}

func (s *session) nonIndexUpdates() {
	t := s.table()
	for i := 0; i < s.o.NonIndexUpdates; i++ {
		c := s.g.String(nil, CTemplate)
		s.exec("non_index_updates", t, charv(c), intu(s.id()))
	}
}

func (s *session) deleteInserts() {
	t := s.table()
	for i := 0; i < s.o.DeleteInserts; i++ {
		id, k := s.id(), s.id()
		c := s.g.String(nil, CTemplate)
		pad := s.g.String(nil, PadTemplate)
		s.exec("deletes", t, intu(id))
		s.exec("inserts", t, intu(id), intu(k), charv(c), charv(pad))
	}
}

// legacyString is sysbench 0.4's "%lu-%lu-…" of n random() values, cut to limit.
func (s *session) legacyString(n, limit int) []byte {
	b := make([]byte, 0, limit+12)
	for i := 0; i < n; i++ {
		if i > 0 {
			b = append(b, '-')
		}
		b = strconv.AppendUint(b, uint64(s.g.r.Uint32()>>1), 10)
	}
	return b[:min(len(b), limit)]
}

// SysbenchCaps are the capability flags sysbench 1.0 on MariaDB
// Connector/C 3.3 (Debian 12's) asks for at login, as a capture through
// tandem proxy records them: protocol 4.1 with multi-statements, multi-results
// and LOCAL INFILE, and MariaDB's bulk execute, extended metadata and
// metadata caching. A synthetic session is that client: replay asks a
// target for what the captured client asked for, so a target answers a
// synthetic capture's executes as it answers sysbench's (without the column
// definitions it sent at prepare).
const SysbenchCaps = uint64(mysql.CLIENT_LONG_FLAG|mysql.CLIENT_CONNECT_WITH_DB|mysql.CLIENT_LOCAL_FILES|
	mysql.CLIENT_PROTOCOL_41|mysql.CLIENT_TRANSACTIONS|mysql.CLIENT_SECURE_CONNECTION|
	mysql.CLIENT_MULTI_STATEMENTS|mysql.CLIENT_MULTI_RESULTS|mysql.CLIENT_PS_MULTI_RESULTS|
	mysql.CLIENT_PLUGIN_AUTH|mysql.CLIENT_CONNECT_ATTRS|mysql.CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA|
	mysql.CLIENT_SESSION_TRACK) |
	wire.MariaDBClientStmtBulkOps | wire.MariaDBClientExtendedMetadata | wire.MariaDBClientCacheMetadata

// legacyUnique is sysbench 0.4's get_unique_random_id.
func (s *session) legacyUnique() int64 {
	v := int64(s.legacy%uint64(s.o.TableSize)) + 1
	s.legacy += 15485863
	return v
}

// startRecords queues the connect and the prepares.
func (s *session) startRecords() {
	p := s.add()
	p.kind = store.KindConnect
	if !s.ps {
		return
	}
	id := uint32(0)
	for _, key := range s.keys {
		tables := 1
		if !s.w.legacy && key != "begin" && key != "commit" {
			tables = s.o.Tables
		}
		for t := 1; t <= tables; t++ {
			id++
			s.ids[key] = append(s.ids[key], id)
			p := s.add()
			p.kind, p.stmtID, p.sql = store.KindPrepare, id, s.sqlFor(key, uint32(t))
		}
	}
}

// endRecords queues closes, table by table then BEGIN and COMMIT (as
// sysbench's close_statements), and the quit.
func (s *session) endRecords() {
	if s.ps {
		var tail []uint32
		for t := 0; t < s.o.Tables; t++ {
			for _, key := range s.keys {
				ids := s.ids[key]
				if key == "begin" || key == "commit" {
					if t == 0 {
						tail = append(tail, ids[0])
					}
					continue
				}
				if t < len(ids) {
					p := s.add()
					p.kind, p.stmtID = store.KindClose, ids[t]
				}
			}
		}
		for _, id := range tail {
			p := s.add()
			p.kind, p.stmtID = store.KindClose, id
		}
	}
	p := s.add()
	p.kind = store.KindQuit
}

// sessionHeap orders sessions by their next statement time, then index.
type sessionHeap []*session

func (h sessionHeap) Len() int { return len(h) }
func (h sessionHeap) Less(i, j int) bool {
	return h[i].next < h[j].next || h[i].next == h[j].next && h[i].idx < h[j].idx
}
func (h sessionHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *sessionHeap) Push(x any)   { *h = append(*h, x.(*session)) }
func (h *sessionHeap) Pop() any {
	old := *h
	s := old[len(old)-1]
	*h = old[:len(old)-1]
	return s
}

// Run writes the capture and reports what it wrote.
func Run(ctx context.Context, cfg Config, out io.Writer) (Stats, error) {
	if err := cfg.Check(); err != nil {
		return Stats{}, err
	}
	w, err := store.Create(cfg.Dir, store.WriterOptions{Source: fmt.Sprintf("synth %s seed %d", cfg.Workload, cfg.Seed), NoSync: true})
	if err != nil {
		return Stats{}, err
	}
	begin := time.Now()
	st, genErr := generate(ctx, cfg, w)
	if err := w.Close(); err != nil && genErr == nil {
		genErr = err
	}
	st.Elapsed = time.Since(begin) // the final flush included
	return st, genErr
}

func generate(ctx context.Context, cfg Config, w *store.Writer) (Stats, error) {
	wl, _ := lookupWorkload(cfg.Workload)
	base := w.Meta().BaseTime
	arrivals := NewRand(cfg.Dist, cfg.Seed, 1<<32)
	var arrival float64 // seconds, open loop
	h := make(sessionHeap, 0, cfg.Threads)
	for i := 0; i < cfg.Threads; i++ {
		stream := uint64(i + 1)
		s := &session{idx: i, sid: uint64(i + 1), o: cfg.Options, w: wl, ps: cfg.PSMode == "auto" && cfg.Workload != "oltp_insert",
			g: NewRand(cfg.Dist, cfg.Seed, stream), unique: NewUnique(cfg.Seed ^ stream*0x9e3779b97f4a7c15),
			legacy: cfg.Seed + stream*7919, ids: map[string][]uint32{}, bound: map[uint32]bool{}}
		s.keys = wl.prepare(cfg.Options)
		h = append(h, s)
	}
	heap.Init(&h)
	var st Stats
	st.Sessions = cfg.Threads
	interval := int64(cfg.StmtInterval)
	limit := int64(cfg.Duration)
	var rec store.Record
	for h.Len() > 0 {
		s := h[0]
		if s.pos == s.n {
			s.n, s.pos = 0, 0
			switch s.phase {
			case 0:
				s.startRecords()
				s.phase = 1
			case 1:
				start := s.next
				more := cfg.Events == 0 || st.Events < cfg.Events
				if cfg.Rate > 0 {
					arrival += -logUniform(arrivals) / cfg.Rate
					at := int64(arrival * 1e9)
					more = more && (limit == 0 || at < limit)
					start = max(start, at)
				} else {
					more = more && (limit == 0 || start < limit)
				}
				if more {
					st.Events++
					s.next = start
					wl.event(s)
				} else {
					s.endRecords()
					s.phase = 2
				}
			default:
				heap.Pop(&h)
				continue
			}
			if s.n == 0 {
				heap.Fix(&h, 0)
				continue
			}
		}
		p := &s.pending[s.pos]
		s.pos++
		rec = store.Record{Session: s.sid, Start: time.Unix(0, base+s.next), Kind: p.kind, Schema: cfg.Schema,
			SQL: p.sql, StmtID: p.stmtID, Params: p.params, Flags: p.flags}
		if p.kind == store.KindConnect {
			rec.User, rec.ClientCaps = cfg.User, SysbenchCaps
		}
		if p.kind == store.KindQuery || p.kind == store.KindExecute {
			// A statement occupies its slot of the session's loop: sessions'
			// statements overlap as concurrent threads' do, so replay's
			// ordering holds a session back only for what truly came
			// before it.
			rec.Duration = time.Duration(interval)
		}
		if _, err := w.Append(&rec); err != nil {
			return st, err
		}
		st.Records++
		if p.kind == store.KindQuery || p.kind == store.KindExecute {
			st.Statements++
			s.next += interval
		}
		st.Span = max(st.Span, time.Duration(s.next))
		if s.pos == s.n && s.phase == 2 {
			s.phase = 3
		}
		if st.Records%65536 == 0 && ctx.Err() != nil {
			return st, ctx.Err()
		}
		heap.Fix(&h, 0)
	}
	return st, nil
}

// logUniform is log(U) for U uniform in (0, 1].
func logUniform(g *Rand) float64 {
	return math.Log(1 - g.Float())
}
