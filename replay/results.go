package replay

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/go-sql-driver/mysql"
	"github.com/tandemdb/tandem/compare"
	"github.com/tandemdb/tandem/footprint"
	"github.com/tandemdb/tandem/sqlinfo"
	"github.com/tandemdb/tandem/store"
)

// storeResults writes a point's results: each target's histograms and
// counters, its comparison with the baseline and with the capture, the end
// state of the tables the capture touched, and the engines of the tables
// it created.
func storeResults(ctx context.Context, cfg *Config, rs *runState, point int, runners []*runner, r *store.Reader, an *sqlinfo.Analyzer,
	x *captureIndex, run *store.RunWriter, reg *digestRegistry) ([]*store.TargetResult, error) {
	results := make([]*store.TargetResult, len(runners))
	for k, rn := range runners {
		t := rn.totals()
		if err := putHistograms(run, point, rn.idx, t, reg); err != nil {
			return results, err
		}
		res := &store.TargetResult{Target: rn.t.Name, Elapsed: rn.end.Sub(rn.start).Seconds(), Transactions: t.c.trx,
			Reads: t.c.queries[sqlinfo.ClassRead], Writes: t.c.queries[sqlinfo.ClassWrite], Other: t.c.queries[sqlinfo.ClassOther],
			Errors: t.c.errors, Deadlocks: t.c.deadlocks, Retries: t.c.retries, RetriesSucceeded: t.c.retriesOK,
			CaptureRollbacks: t.c.captureRollbacks, Connections: t.c.connections, ConnectFailures: t.c.connectFailures,
			Skipped: t.c.skipped, OrderWaits: t.c.orderWaits, OrderReruns: t.c.orderReruns, OrderReleased: t.c.orderReleased,
			PinnedSessions: rn.pinned.Load(), Failed: rn.failed(), Reexecuted: t.c.reexecuted, FailedTransactions: t.c.failedTrx}
		if len(t.errCodes) > 0 {
			res.ErrorCodes = t.errCodes
		}
		if len(t.failedBy) > 0 {
			res.FailedByCode = t.failedBy
		}
		if fs := rn.failures(); len(fs) > 0 {
			res.Failures = fs[:min(len(fs), store.MaxFailures)]
		}
		res.Reordered = t.c.reordered
		if rs := rn.reorders(); len(rs) > 0 {
			res.Reorders = rs[:min(len(rs), store.MaxFailures)]
		}
		if len(t.skippedBy) > 0 {
			res.SkippedBy = t.skippedBy
		}
		results[k] = res
	}
	reg.mu.RLock()
	for i, id := range reg.ids {
		if err := run.PutDigest(id, reg.list[i]); err != nil {
			reg.mu.RUnlock()
			return results, err
		}
	}
	reg.mu.RUnlock()

	h := newHistories(r, an)
	h.regrouped = cfg.Concurrency > 0
	h.capSpan = x.last - x.first // as runner.capSpan
	if len(runners) > 0 {
		h.pks, h.uniqueKeys, h.live = runners[0].pks, runners[0].uniqueKeys, runners[0].live
	}
	if cfg.commitOrdered(x) && x.ranks.complete && len(runners) > 0 {
		h.ranks, h.keys = x.ranks, runners[0].rowKeys
	}
	baseK := -1
	for k, rn := range runners {
		if rn.idx == cfg.baseline() {
			baseK = k
		}
	}
	if baseK >= 0 && len(runners) > 1 {
		base := runners[baseK]
		for k, rn := range runners {
			if k == baseK {
				continue
			}
			tl := compare.NewTally(cfg.Samples, x.commits, h)
			if cfg.Order == OrderNone {
				tl.Free = x.writers
			}
			tl.Failed = failuresOf(map[string]*store.TargetResult{base.t.Name: results[baseK], rn.t.Name: results[k]})
			tl.Coarse = coarseTimes(r.Meta().Origin)
			tl.Chosen = x.chosen
			if x.lostCmds.Len() > 0 {
				// A session whose bytes a packet capture lost ran on in an
				// unknown transaction state: what others read after it may
				// differ between targets by the order replay gave them.
				tl.Gaps = x.lostCmds
			}
			err := compare.Join(run.Outcomes(point, base.idx), run.Outcomes(point, rn.idx), &tl.D, func(b, t *store.Outcome) {
				if compare.Skipped(b, t) || (b.Flags|t.Flags)&store.OutcomeCaptureRollback != 0 {
					tl.D.Skipped++
					return
				}
				if (b.Flags|t.Flags)&store.OutcomeClientError != 0 {
					tl.D.Unavailable++
					return
				}
				class, nondet := compare.Classify(b, t)
				tl.Note(b.Seq, class, nondet, compare.OrderOf(b, t), compare.Describe(b), compare.Describe(t))
			})
			if err != nil {
				return results, err
			}
			addFirstDiffs(ctx, h, an, base, rn, &tl.D)
			results[k].VsBaseline = &tl.D
		}
	}
	// Where writes that bypassed the proxy had changed each table: one
	// reading of the capture for every target. Applied, they ran where the
	// server ran them, and nothing is set apart for them.
	var byp *compare.Bypassed
	switch {
	case cfg.ApplyBypassed:
	case cfg.Bypassed != nil:
		byp = cfg.Bypassed()
	default:
		var err error
		if byp, err = bypassedOf(r); err != nil {
			return results, err
		}
	}
	for k, rn := range runners {
		d, err := compareCaptured(r, byp, run.Outcomes(point, rn.idx), cfg.Samples, x, h,
			failuresOf(map[string]*store.TargetResult{rn.t.Name: results[k]}), cfg.Order == OrderNone)
		if err != nil {
			return results, err
		}
		results[k].VsCapture = d
	}
	endStates(ctx, runners, baseK, x, results, cfg.Order == OrderNone)
	if cfg.Reference != nil && !rs.src.followed() {
		var byp *store.Bypassed
		if sum, ok := r.Summary(); ok && !cfg.ApplyBypassed {
			byp = sum.Bypassed
		}
		vsReference(ctx, &runner{t: *cfg.Reference, db: cfg.Reference.Database()}, runners, x, results, byp)
	}
	for k, rn := range runners {
		results[k].FootprintBefore = rn.footprintBefore
		if rn.failed() == "" {
			fp, err := footprints(ctx, rn, x.tables)
			results[k].Footprint = fp
			if err != nil {
				results[k].FootprintError = err.Error()
			}
		}
	}
	for k, rn := range runners {
		if len(x.created) > 0 && rn.failed() == "" {
			results[k].Created = createdTables(ctx, rn, x.created)
			results[k].CreatedDropped = x.createdDropped
		}
		if err := run.PutResult(point, rn.idx, results[k]); err != nil {
			return results, err
		}
	}
	return results, nil
}

func putHistograms(run *store.RunWriter, point, target int, t *totals, reg *digestRegistry) error {
	if err := run.PutHistogram(point, target, store.SeriesService, "", &t.service); err != nil {
		return err
	}
	if t.lag.Count() > 0 {
		if err := run.PutHistogram(point, target, store.SeriesLag, "", &t.lag); err != nil {
			return err
		}
	}
	for c, s := range map[sqlinfo.Class]store.Series{sqlinfo.ClassRead: store.SeriesRead, sqlinfo.ClassWrite: store.SeriesWrite, sqlinfo.ClassOther: store.SeriesOther} {
		if err := run.PutHistogram(point, target, s, "", &t.byClass[c]); err != nil {
			return err
		}
	}
	reg.mu.RLock()
	defer reg.mu.RUnlock()
	for i, dh := range t.digests {
		if err := run.PutHistogram(point, target, store.SeriesDigest, reg.ids[i], dh); err != nil {
			return err
		}
	}
	return nil
}

// coarseTimes says, for a capture whose times are coarser than its
// statements (a server log's), why the order its sessions took locks in
// is not known ("" for a capture with precise times).
func coarseTimes(o *store.Origin) string {
	if o == nil || o.TimePrecision < time.Millisecond {
		return ""
	}
	return fmt.Sprintf("the capture's times are to %v (its %s), so the order its sessions took locks in is not known, and such a failure is replay's order", o.TimePrecision, o.Kind)
}

// compareCaptured merge-joins a target's outcomes of the capture's first
// pass with the responses the capture holds. Only statements (queries and
// executes) and fetches whose capture has a response are compared.
func compareCaptured(r *store.Reader, byp *compare.Bypassed, outcomes iter.Seq2[*store.Outcome, error], samples int, x *captureIndex, h *histories, failed *compare.Failures, free bool) (*store.Divergences, error) {
	tl := compare.NewTally(samples, x.commits, h)
	tl.Gaps, tl.Failed, tl.Bypassed, tl.BeforeStart, tl.Chosen = x.gaps, failed, byp, true, x.chosen
	if free {
		tl.Free = x.writers
	}
	nextR, stopR := iter.Pull2(r.CapturedRecords()) // in seq order, as the outcomes
	defer stopR()
	rec, rerr, rok := nextR()
	for o, oerr := range outcomes {
		if oerr != nil {
			return nil, oerr
		}
		if o.Seq >= 1<<40 {
			break // later passes: the capture answered the first only
		}
		for rok && rerr == nil && rec.Seq < o.Seq {
			rec, rerr, rok = nextR()
		}
		if rerr != nil {
			return nil, rerr
		}
		if !rok || rec.Seq != o.Seq {
			continue
		}
		switch vsCapture(rec, o) {
		case capturedOpenAtStart:
			// Run to rebuild a session open at the capture's start; the
			// capture holds no answer for it. A failure is the target's
			// (counted in its errors too) and leaves the session in
			// another state than the captured one.
			tl.D.OpenAtStart++
			if o.Flags&store.OutcomeError != 0 {
				tl.D.OpenAtStartFailed++
			}
		case capturedSkipped:
			tl.D.Skipped++
		case capturedUnanswered:
			tl.D.Unavailable++
		case capturedCompared:
			class, nondet := compare.ClassifyCaptured(&rec.Resp, o)
			tl.Note(o.Seq, class, nondet, compare.OrderOf(o), compare.DescribeResponse(&rec.Resp), compare.Describe(o))
		}
	}
	return &tl.D, nil
}

// How an outcome stands against the response the capture holds (vsCapture).
const (
	capturedNone       = iota // nothing to compare: not a statement, or no captured response
	capturedSkipped           // not run, or rolled back as the capture had it
	capturedUnanswered        // the target gave no answer (refused, reset, timed out)
	capturedCompared
	// capturedOpenAtStart: a synthetic record that rebuilt a session open
	// at the capture's start (store.FlagOpenAtStart), run and not
	// compared: nothing was sent for it, so no answer was captured.
	capturedOpenAtStart
)

// vsCapture says whether and how o is compared with rec's captured
// response: the rule replay's comparison with the capture and a shadow's
// live one share.
func vsCapture(rec *store.Record, o *store.Outcome) int {
	switch {
	case rec.Flags&store.FlagOpenAtStart != 0:
		if o.Flags&(store.OutcomeSkipped|store.OutcomeCaptureRollback) != 0 {
			return capturedNone // not run (the target had failed, a masked prepare …)
		}
		return capturedOpenAtStart
	case rec.Resp.Kind == store.RespNone || rec.Kind != store.KindQuery && rec.Kind != store.KindExecute && rec.Kind != store.KindFetch:
		return capturedNone
	case o.Flags&(store.OutcomeSkipped|store.OutcomeCaptureRollback) != 0:
		return capturedSkipped
	case o.Flags&store.OutcomeClientError != 0:
		return capturedUnanswered
	}
	return capturedCompared
}

// openDB opens a database/sql handle on a runner's target (no schema).
func openDB(rn *runner) (*sql.DB, error) {
	db, err := rn.t.Open()
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(2)
	return db, nil
}

// targetTable maps a captured table ("schema.name") to the target's.
func (rn *runner) targetTable(t string) (schema, name string) {
	schema, name, _ = strings.Cut(t, ".")
	return rn.schemaFor(schema), name
}

func quoteName(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

// footprints measures the tables the capture touched on rn's target
// (package footprint), named as in the capture ("schema.table"), so that
// targets whose DSNs name other databases line up.
func footprints(ctx context.Context, rn *runner, tables []string) ([]store.TableFootprint, error) {
	if len(tables) == 0 {
		return nil, nil
	}
	db, err := openDB(rn)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	bySchema := map[string][]string{}
	captured := map[[2]string]string{}
	var schemas []string
	for _, t := range tables {
		schema, name := rn.targetTable(t)
		if _, ok := bySchema[schema]; !ok {
			schemas = append(schemas, schema)
		}
		bySchema[schema] = append(bySchema[schema], name)
		captured[[2]string{schema, name}] = t
	}
	var out []store.TableFootprint
	for _, schema := range schemas {
		fs, err := footprint.Measure(ctx, db, schema, bySchema[schema])
		if err != nil {
			return out, err
		}
		for i := range fs {
			onTarget := schema + "." + fs[i].Table
			fs[i].Table = captured[[2]string{schema, fs[i].Table}]
			if onTarget != fs[i].Table {
				fs[i].Measured = onTarget
			}
		}
		out = append(out, fs...)
	}
	return out, nil
}

// endStates checksums every table the capture touched on every target and
// compares each with the baseline's.
func endStates(ctx context.Context, runners []*runner, baseK int, x *captureIndex, results []*store.TargetResult, free bool) {
	if len(x.tables) == 0 {
		return
	}
	states := make([][]store.TableState, len(runners))
	for k, rn := range runners {
		if rn.failed() != "" {
			results[k].EndState = &store.EndState{Error: "the target failed during the replay"}
			continue
		}
		st, err := tableStates(ctx, rn, x.tables)
		if err != nil {
			results[k].EndState = &store.EndState{Error: err.Error()}
			continue
		}
		states[k] = st
	}
	// Tables that exist on no target (a CTE's name, a table the capture
	// dropped) say nothing.
	keep := make([]bool, len(x.tables))
	for i := range x.tables {
		for k := range runners {
			if states[k] != nil && states[k][i].Exists {
				keep[i] = true
			}
		}
	}
	for k, rn := range runners {
		if states[k] == nil {
			continue
		}
		es := &store.EndState{Same: true}
		var fs *compare.Failures
		if baseK >= 0 && k != baseK {
			fs = failuresOf(map[string]*store.TargetResult{runners[baseK].t.Name: results[baseK], rn.t.Name: results[k]})
		}
		for i, ts := range states[k] {
			if !keep[i] {
				continue
			}
			if baseK >= 0 && states[baseK] != nil && k != baseK {
				b := states[baseK][i]
				ts.Differs = b.Exists != ts.Exists || b.Rows != ts.Rows || b.Checksum != ts.Checksum
				if ts.Differs {
					// A transaction that failed for good on one side and
					// wrote the table explains the difference; so does a
					// change replay sent out of the capture's order, and
					// free order (--order none) on a table several
					// sessions write; then a transaction rolled back and
					// run again, which only may have lost the order.
					ts.Because = fs.ExplainCertain(x.tables[i])
					if ts.Because == "" && free && x.writers.Several(x.tables[i]) {
						ts.Because = "sessions ran freely (--order none) and several write it: its rows depend on the order replay gave their writes"
					}
					if ts.Because == "" {
						ts.Because = fs.Explain(x.tables[i])
					}
				}
			}
			if ts.Differs {
				es.Same = false
			}
			es.Tables = append(es.Tables, ts)
		}
		if baseK < 0 || states[baseK] == nil {
			es.Same = false
		}
		results[k].EndState = es
	}
}

// vsReference compares every target's end state with the reference's:
// production's end state (a replica stopped at the capture's end point).
// A table the writes that bypassed the proxy changed on production says
// so: replay could not repeat them, and its difference is theirs.
func vsReference(ctx context.Context, ref *runner, runners []*runner, x *captureIndex, results []*store.TargetResult, byp *store.Bypassed) {
	if len(x.tables) == 0 {
		return
	}
	refStates, err := tableStates(ctx, ref, x.tables)
	bypassed := map[string]store.BypassedTable{}
	if byp != nil {
		for _, t := range byp.Tables {
			bypassed[compare.TableKey(t.Table)] = t // the binary log's spelling
		}
	}
	for k := range runners {
		es := results[k].EndState
		if es == nil || es.Error != "" {
			continue
		}
		es.Reference = ref.t.Name
		if err != nil {
			es.ReferenceError = err.Error()
			continue
		}
		es.SameAsReference = true
		for i := range es.Tables {
			ts := &es.Tables[i]
			j := slices.IndexFunc(x.tables, func(t string) bool {
				s, n := runners[k].targetTable(t)
				return s+"."+n == ts.Table
			})
			if j < 0 {
				continue
			}
			rs := refStates[j]
			ts.ReferenceRows = rs.Rows
			ts.VsReference = rs.Exists != ts.Exists || rs.Rows != ts.Rows || rs.Checksum != ts.Checksum
			if !ts.VsReference {
				continue
			}
			es.SameAsReference = false
			if b, ok := bypassed[compare.TableKey(x.tables[j])]; ok {
				ts.Bypassed = fmt.Sprintf("%d transactions that bypassed the proxy changed %d rows of it on production (first %s): replay could not repeat them", b.Transactions, b.Rows, b.FirstGTID)
			}
			ts.ReferenceBecause = failuresOf(map[string]*store.TargetResult{runners[k].t.Name: results[k]}).Explain(x.tables[j])
		}
	}
}

// failuresOf indexes the failed transactions, and the changes sent out
// of the capture's order, of each side named.
func failuresOf(by map[string]*store.TargetResult) *compare.Failures {
	fs := compare.NewFailures()
	// A write every side lacks (it failed, or was not sent, on each)
	// leaves them alike: no cause of a difference between them.
	type lack struct {
		session, seq uint64
		loop         int
	}
	lacking := func(r store.Reorder) bool { return r.Kind == store.ReorderFailed || r.Kind == store.ReorderUnsent }
	sides := map[lack]int{}
	if len(by) > 1 {
		for _, res := range by {
			seen := map[lack]bool{}
			for _, r := range res.Reorders {
				if k := (lack{r.Session, r.Seq, r.Loop}); lacking(r) && !seen[k] {
					seen[k] = true
					sides[k]++
				}
			}
		}
	}
	for side, res := range by {
		for _, f := range res.Failures {
			fs.Add(side, f)
		}
		for _, r := range res.Reorders {
			if len(by) > 1 && lacking(r) && sides[lack{r.Session, r.Seq, r.Loop}] == len(by) {
				continue
			}
			fs.AddReorder(side, r)
		}
	}
	return fs
}

// tableStates reads a checksum of each table's rows (a multiset of the
// rows' text form, so the engine's row order does not matter).
func tableStates(ctx context.Context, rn *runner, tables []string) ([]store.TableState, error) {
	db, err := openDB(rn)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	out := make([]store.TableState, len(tables))
	for i, t := range tables {
		schema, name := rn.targetTable(t)
		ts := store.TableState{Table: schema + "." + name}
		rows, err := db.QueryContext(ctx, "SELECT * FROM "+quoteName(schema)+"."+quoteName(name))
		if err != nil {
			var me *mysql.MySQLError
			if errors.As(err, &me) && (me.Number == 1146 || me.Number == 1049) {
				out[i] = ts // no such table (or schema) here
				continue
			}
			return nil, fmt.Errorf("reading %s: %w", ts.Table, err)
		}
		cols, _ := rows.Columns()
		vals := make([]sql.RawBytes, len(cols))
		ptrs := make([]any, len(cols))
		for j := range vals {
			ptrs[j] = &vals[j]
		}
		var sum uint64
		var h xxhash.Digest
		var lb [binary.MaxVarintLen64]byte
		for rows.Next() {
			if err := rows.Scan(ptrs...); err != nil {
				rows.Close()
				return nil, err
			}
			h.Reset()
			for _, v := range vals {
				if v == nil {
					h.Write([]byte{0xff})
					continue
				}
				h.Write(lb[:binary.PutUvarint(lb[:], uint64(len(v)))])
				h.Write(v)
			}
			sum += h.Sum64()
			ts.Rows++
		}
		if err := rows.Err(); err != nil {
			rows.Close()
			return nil, fmt.Errorf("reading %s: %w", ts.Table, err)
		}
		rows.Close()
		ts.Exists, ts.Checksum = true, fmt.Sprintf("%016x", sum)
		out[i] = ts
	}
	return out, nil
}

// createdTables asks the server which engine each table the capture
// created ended up in.
func createdTables(ctx context.Context, rn *runner, created []string) []store.CreatedTable {
	db, err := openDB(rn)
	if err != nil {
		return nil
	}
	defer db.Close()
	var out []store.CreatedTable
	for _, t := range created {
		schema, name := rn.targetTable(t)
		ct := store.CreatedTable{Table: schema + "." + name, Want: rn.t.Engine}
		err := db.QueryRowContext(ctx, "SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", schema, name).Scan(&ct.Engine)
		if errors.Is(err, sql.ErrNoRows) {
			ct.Engine = "(not there)"
		} else if err != nil {
			ct.Engine = "(unknown: " + err.Error() + ")"
		}
		out = append(out, ct)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Table < out[j].Table })
	return out
}
