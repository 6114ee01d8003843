package replay

import (
	"fmt"
	"iter"
	"slices"
	"sort"
	"strings"

	"github.com/tandemdb/tandem/store"
)

// Divergence classes.
const (
	DivErrorVsOK = "error-vs-ok"
	DivErrorCode = "error-code"
	DivAffected  = "affected-rows"
	DivInsertID  = "insert-id"
	DivRowCount  = "row-count"
	DivContent   = "row-content"
	DivOrder     = "order-only"
	DivWarnings  = "warnings"
)

// DivergenceClasses lists the classes in report order.
var DivergenceClasses = []string{DivErrorVsOK, DivErrorCode, DivAffected, DivInsertID, DivRowCount, DivContent, DivOrder, DivWarnings}

// DivergenceReport is one target's comparison with the baseline.
type DivergenceReport struct {
	Target           string             `json:"target"`
	Compared         int64              `json:"compared"`
	Nondeterministic int64              `json:"nondeterministic"`
	Skipped          int64              `json:"skipped"`
	Missing          int64              `json:"missing_on_target"`
	Extra            int64              `json:"missing_on_baseline"`
	ByClass          map[string]int64   `json:"by_class"`
	Samples          []DivergenceSample `json:"samples"`
}

// Total is the number of divergent statements.
func (d DivergenceReport) Total() int64 {
	var n int64
	for _, v := range d.ByClass {
		n += v
	}
	return n
}

// DivergenceSample shows one divergent statement.
type DivergenceSample struct {
	Class string `json:"class"`
	// Seq is the statement's record in the capture; Loop counts the
	// capture's repetitions before it (--loop, --duration).
	Seq       uint64   `json:"seq"`
	Loop      int      `json:"loop,omitempty"`
	Session   uint64   `json:"session"`
	Digest    string   `json:"digest"`
	Statement string   `json:"statement"`
	Params    []string `json:"params,omitempty"`
	Baseline  string   `json:"baseline"`
	Target    string   `json:"target"`
	// FirstDiff shows the first row that differs, from running the
	// statement again on both sides after the replay (read statements only).
	FirstDiff string `json:"first_differing_row,omitempty"`
}

// classify says how t diverges from b ("" when it does not) and whether
// the statement was nondeterministic.
func classify(b, t *store.Outcome) (string, bool) {
	be, te := b.Flags&store.OutcomeError != 0, t.Flags&store.OutcomeError != 0
	switch {
	case be != te:
		return DivErrorVsOK, false
	case be:
		if b.ErrCode != t.ErrCode {
			return DivErrorCode, false
		}
		return "", false
	}
	if (b.Flags|t.Flags)&store.OutcomeNondeterministic != 0 {
		return "", true
	}
	switch {
	case b.Affected != t.Affected:
		return DivAffected, false
	case b.InsertID != t.InsertID:
		return DivInsertID, false
	case b.Rows != t.Rows:
		return DivRowCount, false
	case b.Unordered != t.Unordered:
		return DivContent, false
	case b.Flags&store.OutcomeOrdered != 0 && b.Ordered != t.Ordered:
		return DivOrder, false
	case b.Warnings != t.Warnings:
		return DivWarnings, false
	}
	return "", false
}

func describe(o *store.Outcome) string {
	if o.Flags&store.OutcomeError != 0 {
		return fmt.Sprintf("error %d", o.ErrCode)
	}
	if o.Flags&store.OutcomeRows != 0 {
		return fmt.Sprintf("%d rows (checksums %016x/%016x), %d warnings", o.Rows, o.Unordered, o.Ordered, o.Warnings)
	}
	return fmt.Sprintf("ok, %d affected, insert id %d, %d warnings", o.Affected, o.InsertID, o.Warnings)
}

// compare merge-joins each target's outcomes with the baseline's.
func compare(run *store.RunStore, ss *sessions, an *analyzer, cfg Config, rep *Report) error {
	base := cfg.baseline()
	for i, t := range cfg.Targets {
		if i == base {
			continue
		}
		d := DivergenceReport{Target: t.Name, ByClass: map[string]int64{}}
		samples := map[string]int{}
		nextB, stopB := iter.Pull2(run.Outcomes(base))
		nextT, stopT := iter.Pull2(run.Outcomes(i))
		bo, berr, bok := nextB()
		to, terr, tok := nextT()
		var err error
		for err == nil && (bok || tok) {
			if berr != nil || terr != nil {
				err = cmpOr(berr, terr)
				break
			}
			switch {
			case tok && (!bok || to.Seq < bo.Seq):
				d.Extra++
				to, terr, tok = nextT()
				continue
			case bok && (!tok || bo.Seq < to.Seq):
				d.Missing++
				bo, berr, bok = nextB()
				continue
			}
			if (bo.Flags|to.Flags)&store.OutcomeSkipped != 0 {
				d.Skipped++
			} else {
				d.Compared++
				class, nondet := classify(bo, to)
				if nondet {
					d.Nondeterministic++
				}
				if class != "" {
					d.ByClass[class]++
					if s, ok := sampleAgainst(ss, an, class, bo.Seq, describe(bo), to); ok && samples[s.Digest+class] < cfg.Samples {
						samples[s.Digest+class]++
						d.Samples = append(d.Samples, s)
					}
				}
			}
			bo, berr, bok = nextB()
			to, terr, tok = nextT()
		}
		stopB()
		stopT()
		if err != nil {
			return err
		}
		rep.Divergences = append(rep.Divergences, d)
	}
	return nil
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// sampleAgainst builds a divergence sample of the statement at seq (an
// outcome key) from the captured record; base describes the side compared
// against (the baseline's outcome or the captured response).
func sampleAgainst(ss *sessions, an *analyzer, class string, seq uint64, base string, t *store.Outcome) (DivergenceSample, bool) {
	loop := int(seq >> 40)
	seq &= 1<<40 - 1
	rec, ok, err := ss.r.Get(seq)
	if err != nil || !ok {
		return DivergenceSample{}, false
	}
	sql := rec.SQL
	if rec.Kind == store.KindExecute {
		_, sql = ss.before(rec)
	}
	s := DivergenceSample{Class: class, Seq: seq, Loop: loop, Session: rec.Session, Digest: an.info(sql).Digest.ID, Statement: sql,
		Baseline: base, Target: describe(t)}
	for _, p := range rec.Params {
		s.Params = append(s.Params, valueText(p))
	}
	return s, true
}

// sessions indexes the captured sessions that samples come from: each
// session's prepares and schema changes, read once. A sample of an execute
// needs the SQL its statement was prepared with, and reading its session
// from the start for every divergent execute made the comparison quadratic
// (6,300 divergences of a target killed mid-replay took two minutes under
// the race detector).
type sessions struct {
	r    *store.Reader
	byID map[uint64][]sessionEvent
}

// sessionEvent is a prepare (its statement id and SQL) or a change of
// schema (a connect, COM_INIT_DB or change of user).
type sessionEvent struct {
	seq     uint64
	prepare bool
	stmtID  uint32
	text    string
}

func newSessions(r *store.Reader) *sessions {
	return &sessions{r: r, byID: map[uint64][]sessionEvent{}}
}

// before returns what rec's session had set up before rec: the schema it
// was in and, for an execute, the SQL its statement was prepared with.
func (ss *sessions) before(rec *store.Record) (schema, preparedSQL string) {
	evs, ok := ss.byID[rec.Session]
	if !ok {
		for x, err := range ss.r.Session(rec.Session) {
			if err != nil {
				break
			}
			switch x.Kind {
			case store.KindConnect, store.KindInitDB, store.KindChangeUser:
				evs = append(evs, sessionEvent{seq: x.Seq, text: x.Schema})
			case store.KindPrepare:
				evs = append(evs, sessionEvent{seq: x.Seq, prepare: true, stmtID: x.StmtID, text: x.SQL})
			}
		}
		ss.byID[rec.Session] = evs
	}
	schema, preparedSQL = rec.Schema, fmt.Sprintf("(statement %d)", rec.StmtID)
	haveSchema, haveSQL := false, false
	for i := sort.Search(len(evs), func(i int) bool { return evs[i].seq >= rec.Seq }) - 1; i >= 0 && !(haveSchema && haveSQL); i-- {
		switch e := &evs[i]; {
		case !e.prepare && !haveSchema:
			schema, haveSchema = e.text, true
		case e.prepare && !haveSQL && e.stmtID == rec.StmtID:
			preparedSQL, haveSQL = e.text, true
		}
	}
	return schema, preparedSQL
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

// WriteText writes the report for people: per target side by side, then
// divergences by class with samples.
func (rep *Report) WriteText(w interface{ Write([]byte) (int, error) }) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p("replay of %s against %d targets in %.1fs (baseline %s; --io %s; run directory %s)\n", rep.Capture, len(rep.Targets), rep.Elapsed, rep.Baseline, rep.IO, rep.RunDir)
	if rep.IONote != "" {
		p("note: %s\n", rep.IONote)
	}
	p("\n")
	cols := make([]string, len(rep.Targets))
	for i, t := range rep.Targets {
		cols[i] = t.Name
	}
	row := func(label string, f func(t TargetReport) string) {
		p("  %-26s", label)
		for _, t := range rep.Targets {
			p(" %22s", f(t))
		}
		p("\n")
	}
	row("", func(t TargetReport) string { return t.Name })
	row("engine", func(t TargetReport) string { return strings.TrimSpace(t.Engine + " " + t.Options) })
	row("version", func(t TargetReport) string { return strings.SplitN(t.Version, "-", 3)[0] })
	row("transactions", func(t TargetReport) string { return fmt.Sprintf("%d (%.1f/s)", t.Transactions, t.TPS) })
	row("queries (r/w/o)", func(t TargetReport) string { return fmt.Sprintf("%d/%d/%d", t.Reads, t.Writes, t.Other) })
	row("queries/s", func(t TargetReport) string { return fmt.Sprintf("%.1f", t.QPS) })
	row("errors (deadlocks)", func(t TargetReport) string { return fmt.Sprintf("%d (%d)", t.Errors, t.Deadlocks) })
	row("skipped", func(t TargetReport) string { return fmt.Sprint(t.Skipped) })
	row("connections (failed)", func(t TargetReport) string { return fmt.Sprintf("%d (%d)", t.Connections, t.ConnectFailures) })
	for _, q := range []struct {
		n string
		f func(l LatencySummary) float64
	}{{"min", func(l LatencySummary) float64 { return l.Min }}, {"avg", func(l LatencySummary) float64 { return l.Avg }},
		{"p50", func(l LatencySummary) float64 { return l.P50 }}, {"p95", func(l LatencySummary) float64 { return l.P95 }},
		{"p99", func(l LatencySummary) float64 { return l.P99 }}, {"max", func(l LatencySummary) float64 { return l.Max }}} {
		row("latency ms "+q.n, func(t TargetReport) string { return fmt.Sprintf("%.3f", q.f(t.Latency)) })
	}
	// Paced replays: how late statements went out against the captured
	// pacing (from the intended send instant to the last packet).
	row("lag ms p50/p95/p99/max", func(t TargetReport) string {
		if t.Lag.Count == 0 {
			return "- (unpaced)"
		}
		return fmt.Sprintf("%.2f/%.2f/%.2f/%.1f", t.Lag.P50, t.Lag.P95, t.Lag.P99, t.Lag.Max)
	})
	var divByTarget = map[string]DivergenceReport{}
	for _, d := range rep.Divergences {
		divByTarget[d.Target] = d
	}
	row("compared with baseline", func(t TargetReport) string {
		if t.Name == rep.Baseline {
			return "baseline"
		}
		return fmt.Sprint(divByTarget[t.Name].Compared)
	})
	row("nondeterministic", func(t TargetReport) string {
		if t.Name == rep.Baseline {
			return "-"
		}
		return fmt.Sprint(divByTarget[t.Name].Nondeterministic)
	})
	for _, c := range DivergenceClasses {
		row("divergent: "+c, func(t TargetReport) string {
			if t.Name == rep.Baseline {
				return "-"
			}
			return fmt.Sprint(divByTarget[t.Name].ByClass[c])
		})
	}
	vsCap := map[string]DivergenceReport{}
	captured := false
	for _, d := range rep.VsCapture {
		vsCap[d.Target] = d
		captured = captured || d.Compared > 0
	}
	if captured {
		row("compared with capture", func(t TargetReport) string { return fmt.Sprint(vsCap[t.Name].Compared) })
		row("differs from capture", func(t TargetReport) string { return classSummary(vsCap[t.Name]) })
	}
	// Per-digest latency, baseline order, with ratios.
	base := rep.Targets[0]
	for _, t := range rep.Targets {
		if t.Name == rep.Baseline {
			base = t
		}
	}
	p("\nstatements by count on %s: p95 latency ms (ratio to %s)\n", rep.Baseline, rep.Baseline)
	for _, d := range base.TopDigests[:min(10, len(base.TopDigests))] {
		text := d.Text
		if len(text) > 60 {
			text = text[:59] + "…"
		}
		p("  %-62s", text)
		for _, t := range rep.Targets {
			i := slices.IndexFunc(t.TopDigests, func(x DigestLatency) bool { return x.Digest == d.Digest })
			if i < 0 {
				p(" %16s", "-")
				continue
			}
			x := t.TopDigests[i]
			p(" %8.3f (%4.2fx)", x.Latency.P95, x.RatioP95)
		}
		p("\n")
	}
	printSamples := func(d DivergenceReport, from, fromLabel string) {
		if len(d.Samples) == 0 {
			return
		}
		shown := d.Samples[:min(len(d.Samples), 8)]
		p("\ndivergences of %s from %s (%d); %d of %d samples (all in --json and the run directory):\n", d.Target, from, d.Total(), len(shown), len(d.Samples))
		for _, s := range shown {
			loop := ""
			if s.Loop > 0 {
				loop = fmt.Sprintf(" (loop %d)", s.Loop+1)
			}
			p("  [%s] seq %d%s session %d: %s", s.Class, s.Seq, loop, s.Session, s.Statement)
			if len(s.Params) > 0 {
				p("  params (%s)", strings.Join(s.Params, ", "))
			}
			p("\n      %s: %s\n      %s: %s\n", fromLabel, s.Baseline, d.Target, s.Target)
			if s.FirstDiff != "" {
				p("      %s\n", s.FirstDiff)
			}
		}
	}
	for _, d := range rep.Divergences {
		printSamples(d, rep.Baseline, rep.Baseline)
	}
	for _, d := range rep.VsCapture {
		printSamples(d, "the captured responses", "captured")
	}
}

// classSummary is "0", or a total with its classes: "3 (row-content 2, warnings 1)".
func classSummary(d DivergenceReport) string {
	total := d.Total()
	if total == 0 {
		return "0"
	}
	var parts []string
	for _, c := range DivergenceClasses {
		if n := d.ByClass[c]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", c, n))
		}
	}
	return fmt.Sprintf("%d (%s)", total, strings.Join(parts, ", "))
}

// classifyCaptured says how a target's outcome t diverges from the response
// the capture recorded for the same statement ("" when it does not), and
// whether the statement was nondeterministic. Row checksums are compared
// when the capture has them (proxy --capture-results=checksum) for a
// single result; a multi-result statement is compared on errors and its
// total row count. Warnings are compared for OK responses only.
func classifyCaptured(resp *store.Response, t *store.Outcome) (string, bool) {
	last := resp
	rows := resp.Rows
	for i := range resp.More {
		last = &resp.More[i]
		rows += last.Rows
	}
	ce, te := resp.Kind == store.RespError || last.Kind == store.RespError, t.Flags&store.OutcomeError != 0
	switch {
	case ce != te:
		return DivErrorVsOK, false
	case ce:
		if last.ErrCode != t.ErrCode {
			return DivErrorCode, false
		}
		return "", false
	}
	if t.Flags&store.OutcomeNondeterministic != 0 {
		return "", true
	}
	single := len(resp.More) == 0
	switch {
	case single && resp.Kind == store.RespOK && t.Flags&store.OutcomeRows == 0 && resp.AffectedRows != t.Affected:
		return DivAffected, false
	case single && resp.Kind == store.RespOK && t.Flags&store.OutcomeRows == 0 && resp.InsertID != t.InsertID:
		return DivInsertID, false
	case rows != t.Rows:
		return DivRowCount, false
	case single && resp.HasChecksums && resp.Unordered != t.Unordered:
		return DivContent, false
	case single && resp.HasChecksums && t.Flags&store.OutcomeOrdered != 0 && resp.Ordered != t.Ordered:
		return DivOrder, false
	case single && resp.Kind == store.RespOK && t.Flags&store.OutcomeRows == 0 && resp.Warnings != t.Warnings:
		return DivWarnings, false
	}
	return "", false
}

func describeResponse(p *store.Response) string {
	if len(p.More) > 0 { // a CALL's result sets and final OK, compared by their total rows
		rows, last := p.Rows, p
		for i := range p.More {
			rows, last = rows+p.More[i].Rows, &p.More[i]
		}
		if last.Kind == store.RespError {
			return fmt.Sprintf("error %d after %d results", last.ErrCode, len(p.More))
		}
		return fmt.Sprintf("%d rows in %d results", rows, len(p.More)+1)
	}
	switch {
	case p.Kind == store.RespError:
		return fmt.Sprintf("error %d", p.ErrCode)
	case p.Kind == store.RespResultSet && p.HasChecksums:
		return fmt.Sprintf("%d rows (checksums %016x/%016x)", p.Rows, p.Unordered, p.Ordered)
	case p.Kind == store.RespResultSet:
		return fmt.Sprintf("%d rows (captured without checksums)", p.Rows)
	}
	return fmt.Sprintf("ok, %d affected, insert id %d, %d warnings", p.AffectedRows, p.InsertID, p.Warnings)
}

// compareCaptured merge-joins each target's outcomes of the capture's first
// pass with the responses in the capture. Only statements (queries and
// executes) whose capture has a response are compared.
func compareCaptured(run *store.RunStore, ss *sessions, an *analyzer, cfg Config, rep *Report) error {
	for i, t := range cfg.Targets {
		d := DivergenceReport{Target: t.Name, ByClass: map[string]int64{}}
		samples := map[string]int{}
		nextR, stopR := iter.Pull2(ss.r.Records())
		rec, rerr, rok := nextR()
		var err error
		for o, oerr := range run.Outcomes(i) {
			if oerr != nil {
				err = oerr
				break
			}
			if o.Seq >= 1<<40 {
				break // later loops: the capture answered the first pass only
			}
			for rok && rerr == nil && rec.Seq < o.Seq {
				rec, rerr, rok = nextR()
			}
			if rerr != nil {
				err = rerr
				break
			}
			if !rok || rec.Seq != o.Seq || rec.Resp.Kind == store.RespNone ||
				rec.Kind != store.KindQuery && rec.Kind != store.KindExecute {
				continue
			}
			if o.Flags&store.OutcomeSkipped != 0 {
				d.Skipped++
				continue
			}
			d.Compared++
			class, nondet := classifyCaptured(&rec.Resp, o)
			if nondet {
				d.Nondeterministic++
			}
			if class == "" {
				continue
			}
			d.ByClass[class]++
			if s, ok := sampleAgainst(ss, an, class, o.Seq, describeResponse(&rec.Resp), o); ok && samples[s.Digest+class] < cfg.Samples {
				samples[s.Digest+class]++
				d.Samples = append(d.Samples, s)
			}
		}
		stopR()
		if err != nil {
			return err
		}
		rep.VsCapture = append(rep.VsCapture, d)
	}
	return nil
}
