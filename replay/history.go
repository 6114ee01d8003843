package replay

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/tandemdb/tandem/compare"
	"github.com/tandemdb/tandem/sqlinfo"
	"github.com/tandemdb/tandem/store"
)

// histories index the captured sessions that divergence samples come from:
// each session's prepares, schema changes and transaction boundaries, read
// once, on first need. A sample of an execute needs the SQL its statement
// was prepared with, and reading its session from the start for every
// divergent execute made comparison quadratic (6,300 divergences of a
// target killed mid-replay took two minutes under the race detector).
type histories struct {
	r  *store.Reader
	an *sqlinfo.Analyzer
	// regrouped: the replay ran whole transactions on shared connections
	// (--concurrency), so a statement's result may reflect any commit
	// during its transaction's life, not only before the statement ended.
	regrouped bool
	// ranks, set when the replay kept the server's whole commit order
	// (Config.commitOrdered, commitRanks.complete), and keys, a
	// statement's row keys (runner.rowKeys), tell the statements whose
	// answer that order decides (lockedInOrder).
	ranks *commitRanks
	keys  func(info *sqlinfo.Info, rec *store.Record) []string
	// pks are the tables' primary keys (runner.pks, by captured name):
	// an ORDER BY that holds one leaves no rows tied (TiedOrder).
	pks map[string][]string
	// uniqueKeys: the tables' unique keys of NOT NULL columns
	// (runner.uniqueKeys): one held by an ORDER BY leaves no ties either.
	uniqueKeys map[string][][]string
	// live, for a followed run, reads them as its tables appear (then
	// pks and uniqueKeys are not used).
	live *liveKeys
	// capSpan is the capture's span (runner.capSpan), by which replay's
	// timeline moves each --loop pass: a statement's LoopOffset.
	capSpan int64
	mu      sync.Mutex
	by      map[uint64][]event
}

// event is a prepare (statement id and SQL), a change of schema, or a
// transaction opening (at its first statement's start) or closing.
type event struct {
	seq    uint64
	kind   byte
	stmtID uint32
	text   string
	start  int64
}

const (
	evSchema byte = iota + 1
	evPrepare
	evTrxOpen   // a transaction opens with this record
	evTrxClose  // this record ends its transaction (it belongs to it)
	evTrxBefore // the transaction open before this record ended before it (an implicit commit)
)

func newHistories(r *store.Reader, an *sqlinfo.Analyzer) *histories {
	return &histories{r: r, an: an, by: map[uint64][]event{}}
}

// forget drops what is known of a session, which a live capture has
// added to since.
func (h *histories) forget(id uint64) {
	h.mu.Lock()
	delete(h.by, id)
	h.mu.Unlock()
}

func (h *histories) session(id uint64) []event {
	h.mu.Lock()
	defer h.mu.Unlock()
	if evs, ok := h.by[id]; ok {
		return evs
	}
	var evs []event
	sqlOf := map[uint32]string{}
	var trx sqlinfo.Trx
	for x, err := range h.r.Session(id) {
		if err != nil {
			break
		}
		var sql string
		switch x.Kind {
		case store.KindConnect, store.KindInitDB, store.KindChangeUser:
			if x.Kind != store.KindInitDB && trx.Open() {
				evs = append(evs, event{seq: x.Seq, kind: evTrxBefore})
			}
			if x.Kind != store.KindInitDB {
				trx.Reset()
			}
			evs = append(evs, event{seq: x.Seq, kind: evSchema, text: x.Schema})
			continue
		case store.KindResetConnection:
			if trx.Open() {
				evs = append(evs, event{seq: x.Seq, kind: evTrxBefore})
			}
			trx.Reset()
			continue
		case store.KindOther:
			if x.CommandsLost() && trx.Lost().CommitBefore {
				evs = append(evs, event{seq: x.Seq, kind: evTrxBefore})
			}
			continue
		case store.KindPrepare:
			sqlOf[x.StmtID] = x.SQL
			evs = append(evs, event{seq: x.Seq, kind: evPrepare, stmtID: x.StmtID, text: x.SQL})
			continue
		case store.KindQuery:
			sql = x.SQL
		case store.KindExecute:
			sql = sqlOf[x.StmtID]
		default:
			continue
		}
		info := h.an.Info(sql)
		if info.Use {
			if db, ok := sqlinfo.UseSchema(sql); ok {
				evs = append(evs, event{seq: x.Seq, kind: evSchema, text: db})
			}
		}
		step := trx.Apply(info, capturedError(x))
		if step.CommitBefore {
			evs = append(evs, event{seq: x.Seq, kind: evTrxBefore})
		}
		if step.Opened {
			evs = append(evs, event{seq: x.Seq, kind: evTrxOpen, start: x.Start.UnixNano()})
		}
		if step.End != sqlinfo.EndNone {
			evs = append(evs, event{seq: x.Seq, kind: evTrxClose, start: x.Start.UnixNano() + int64(x.Duration)})
			if info.Chain { // … AND CHAIN: the next one opens with it
				evs = append(evs, event{seq: x.Seq, kind: evTrxOpen, start: x.Start.UnixNano() + int64(x.Duration)})
			}
		}
	}
	h.by[id] = evs
	return evs
}

// before returns what rec's session had set up before rec: the schema, the
// SQL an execute's statement was prepared with, and the start of rec's
// transaction (rec's own start outside one).
func (h *histories) before(rec *store.Record) (schema, preparedSQL string, trxStart int64) {
	evs := h.session(rec.Session)
	schema, preparedSQL, trxStart = rec.Schema, fmt.Sprintf("(statement %d)", rec.StmtID), rec.Start.UnixNano()
	haveSchema, haveSQL, haveTrx := false, rec.Kind != store.KindExecute && rec.Kind != store.KindFetch && rec.Kind != store.KindReset, false
	for i := sort.Search(len(evs), func(i int) bool { return evs[i].seq > rec.Seq }) - 1; i >= 0 && !(haveSchema && haveSQL && haveTrx); i-- {
		switch e := &evs[i]; {
		case e.kind == evSchema && !haveSchema:
			schema, haveSchema = e.text, true
		case e.kind == evPrepare && !haveSQL && e.stmtID == rec.StmtID && e.seq < rec.Seq:
			preparedSQL, haveSQL = e.text, true
		case e.kind == evTrxOpen && !haveTrx && !(e.seq == rec.Seq && e.start > rec.Start.UnixNano()):
			// (one that opens after rec's end, at rec, is an AND CHAIN's:
			// rec belongs to the one before)
			trxStart, haveTrx = e.start, true
		case e.kind == evTrxClose && !haveTrx:
			haveTrx = true // rec opens no transaction: its own start
			if e.seq == rec.Seq {
				haveTrx = false // rec itself closes the transaction: it belongs to it
			}
		case e.kind == evTrxBefore && !haveTrx:
			haveTrx = true // what was open ended before rec (or at it): rec's own start
		}
	}
	return schema, preparedSQL, trxStart
}

// trxEnd is the end of the statement that closes rec's transaction (0 if
// the capture has none after rec).
func (h *histories) trxEnd(rec *store.Record) int64 {
	evs := h.session(rec.Session)
	for i := sort.Search(len(evs), func(i int) bool { return evs[i].seq >= rec.Seq }); i < len(evs); i++ {
		if evs[i].kind == evTrxClose {
			return evs[i].start
		}
	}
	return 0
}

// commitOf returns the seq of the record that commits rec's transaction:
// rec itself outside a transaction or when it ends one, else the
// statement that ends it; 0 when none does (an implicit commit by DDL,
// whose GTID is the DDL's, or the capture's end).
func (h *histories) commitOf(rec *store.Record) uint64 {
	evs := h.session(rec.Session)
	i := sort.Search(len(evs), func(i int) bool { return evs[i].seq > rec.Seq })
	in := false
back:
	for j := i - 1; j >= 0; j-- {
		switch e := &evs[j]; e.kind {
		case evTrxOpen:
			if e.seq == rec.Seq && e.start > rec.Start.UnixNano() {
				continue // an AND CHAIN's: it opens after rec
			}
			in = true
			break back
		case evTrxClose:
			if e.seq == rec.Seq {
				return rec.Seq // rec ends its transaction
			}
			break back
		case evTrxBefore:
			break back // what was open ended before rec (or at it)
		}
	}
	if !in {
		return rec.Seq
	}
	for ; i < len(evs); i++ {
		switch evs[i].kind {
		case evTrxClose:
			return evs[i].seq
		case evTrxBefore, evTrxOpen:
			return 0
		}
	}
	return 0
}

// Statement describes the captured statement of an outcome key, for a
// sample and the ambiguity check (compare.Source).
func (h *histories) Statement(key uint64) (compare.Statement, bool) {
	seq, loop := store.SplitOutcomeSeq(key)
	rec, ok, err := h.r.Get(seq)
	if err != nil || !ok {
		return compare.Statement{}, false
	}
	schema, prepared, from := h.before(rec)
	sql := rec.SQL
	switch rec.Kind {
	case store.KindExecute, store.KindFetch, store.KindReset:
		sql = prepared
	case store.KindQuery, store.KindPrepare:
	default:
		sql = "(" + rec.Kind.String() + ")"
	}
	info := h.an.Info(sql)
	st := compare.Statement{Session: rec.Session, SQL: sql, Digest: info.Digest.ID, From: from, To: rec.Start.UnixNano() + int64(rec.Duration),
		BeforeStart: rec.Flags&store.FlagBeforeStart != 0, LoopOffset: loopShift(h.capSpan, loop)}
	if h.regrouped && from != rec.Start.UnixNano() {
		st.To = max(st.To, h.trxEnd(rec))
	}
	if h.ranks != nil && h.keys != nil {
		in := *rec
		in.Schema = schema
		st.Locked = lockedInOrder(info, h.keys(info, &in)) && h.ranks.has(h.commitOf(rec))
	}
	st.Tables = qualify(info.Reads, schema, nil)
	if info.Ordered {
		st.TiedOrder, st.Limited = h.mayTie(info, st.Tables), info.Limit
	}
	st.Tables = qualify(info.Writes, schema, st.Tables)
	for _, p := range rec.Params {
		st.Params = append(st.Params, valueText(p))
	}
	if rec.IsBulk() {
		st.Params = append(st.Params, "(a bulk execute: many rows of parameters in one command)")
	}
	return st, true
}

// mayTie reports whether a statement's ORDER BY, over the one table it
// reads (tables, qualified), can leave rows tied: it names columns only,
// and they do not hold the table's primary key, as read from the target.
// Where either is not known (an expression, a join, a table without a
// known key) it says no, and differences in order count as ever.
func (h *histories) mayTie(info *sqlinfo.Info, tables []string) bool {
	if len(tables) != 1 || len(info.OrderColumns) == 0 {
		return false
	}
	table := strings.ToLower(tables[0])
	pk, uks := h.pks[table], h.uniqueKeys[table]
	if h.live != nil {
		pk, uks = h.live.of(tables[0])
	}
	if len(pk) == 0 {
		return false
	}
	holds := func(key []string) bool {
		for _, c := range key {
			if !slices.Contains(info.OrderColumns, c) {
				return false
			}
		}
		return true
	}
	return !holds(pk) && !slices.ContainsFunc(uks, holds)
}

func valueText(v store.Value) string {
	switch {
	case v.Null:
		return "NULL"
	case v.Type == store.TypeFloat || v.Type == store.TypeDouble:
		return fmt.Sprint(v.Float)
	case v.Type == store.TypeTiny || v.Type == store.TypeShort || v.Type == store.TypeLong || v.Type == store.TypeLongLong || v.Type == store.TypeInt24 || v.Type == store.TypeYear:
		if v.Unsigned {
			return fmt.Sprint(uint64(v.Int))
		}
		return fmt.Sprint(v.Int)
	}
	s := string(v.Bytes)
	if len(s) > 64 {
		s = s[:61] + "…"
	}
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}
