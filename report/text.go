package report

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/tandemdb/tandem/compare"
	"github.com/tandemdb/tandem/footprint"
	"github.com/tandemdb/tandem/internal/textclip"
	"github.com/tandemdb/tandem/store"
)

// WriteText writes the report for people: per target side by side, then
// statement digests with ratios to the baseline, then divergence samples.
func (rep *Report) WriteText(w io.Writer) error {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	switch {
	case !rep.Finished && rep.Elapsed > 0:
		p("INTERRUPTED after %.1fs: the figures below are what ran until then (statements stopped mid-way are skipped, not errors)\n\n", rep.Elapsed)
	case !rep.Finished:
		p("DID NOT FINISH (killed, or still running): the figures below are what it stored\n\n")
	}
	for i := range rep.Points {
		if i > 0 {
			p("\n")
		}
		rep.writePoint(w, &rep.Points[i], len(rep.Points) > 1)
	}
	if rep.Command == "sweep" {
		p("\n")
		rep.writeSweep(w)
	}
	if line := SessionsLine(rep.CaptureSessions); line != "" {
		p("%s\n", line)
	}
	for _, n := range rep.Notes {
		p("note: %s\n", n)
	}
	return nil
}

// SessionsLine says how a capture that began or ended on a running proxy
// holds its sessions ("" for any other capture): "sessions: 8 open at the
// capture's start (2 inside a transaction), 3 connected during it; 8
// still open at its stop".
func SessionsLine(c *store.CaptureSessions) string {
	if !c.Joined() {
		return ""
	}
	return fmt.Sprintf("sessions: %d open at the capture's start (%d inside a transaction), %d connected during it; %d still open at its stop",
		c.OpenAtStart, c.InTransaction, c.Connected, c.OpenAtStop)
}

// SweepRow is one thread count of a sweep, per target.
type SweepRow struct {
	Threads int
	Targets map[string]*Target
}

// Sweep returns the sweep's points grouped by thread count (in the order
// they ran) and the targets' names in the run's order.
func (rep *Report) Sweep() ([]SweepRow, []string) {
	var rows []SweepRow
	var names []string
	for i := range rep.Points {
		pt := &rep.Points[i]
		k := slices.IndexFunc(rows, func(r SweepRow) bool { return r.Threads == pt.Threads })
		if k < 0 {
			rows = append(rows, SweepRow{Threads: pt.Threads, Targets: map[string]*Target{}})
			k = len(rows) - 1
		}
		for j := range pt.Targets {
			t := &pt.Targets[j]
			rows[k].Targets[t.Name] = t
			if !slices.Contains(names, t.Name) {
				names = append(names, t.Name)
			}
		}
	}
	return rows, names
}

// writeSweep prints TPS, QPS, p95 and p99 per thread count per target.
func (rep *Report) writeSweep(w io.Writer) {
	rows, names := rep.Sweep()
	fmt.Fprintf(w, "sweep of %s: per thread count, per target: tps / qps / p95 ms / p99 ms\n  %-8s", rep.Capture, "threads")
	for _, n := range names {
		fmt.Fprintf(w, " %36s", textclip.Clip(n, 36))
	}
	fmt.Fprintln(w)
	for _, r := range rows {
		fmt.Fprintf(w, "  %-8d", r.Threads)
		for _, n := range names {
			t := r.Targets[n]
			if t == nil {
				fmt.Fprintf(w, " %36s", "-")
				continue
			}
			fmt.Fprintf(w, " %36s", fmt.Sprintf("%.1f / %.1f / %.2f / %.2f", t.TPS, t.QPS, t.Latency.P95, t.Latency.P99))
		}
		fmt.Fprintln(w)
	}
}

func (rep *Report) writePoint(w io.Writer, pt *Point, many bool) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	label := "replay"
	if many {
		label = pt.Label
	}
	dirs := strings.Join(rep.RunDirs, ", ")
	p("%s of %s against %s in %.1fs (baseline %s; --order %s; --io %s; run directory %s)\n",
		label, rep.Capture, Count(len(pt.Targets), "target"), pt.Elapsed, rep.Baseline, pt.Order, pt.IO, dirs)
	if len(rep.Shards) > 0 {
		var sh []string
		for _, s := range rep.Shards {
			sh = append(sh, fmt.Sprintf("%d/%d", s.Index, s.Count))
		}
		p("shards %s of run %s merged\n", strings.Join(sh, ", "), rep.RunID)
	}
	p("\n")
	// One column per target, right-aligned, as wide as its widest cell
	// (at least 22): no cell is cut.
	var table [][]string
	row := func(label string, f func(t *Target) string) {
		r := []string{label}
		for i := range pt.Targets {
			r = append(r, f(&pt.Targets[i]))
		}
		table = append(table, r)
	}
	isBase := func(t *Target) bool { return t.Name == rep.Baseline }
	any := func(f func(t *Target) bool) bool {
		return slices.ContainsFunc(pt.Targets, func(t Target) bool { return f(&t) })
	}
	row("", func(t *Target) string { return t.Name })
	row("engine", func(t *Target) string { return strings.TrimSpace(t.Engine + " " + t.Options) })
	row("version", func(t *Target) string { return strings.SplitN(t.Version, "-", 3)[0] })
	row("connection", func(t *Target) string {
		if t.TLS == "" {
			return "in clear"
		}
		return "TLS " + strings.TrimPrefix(t.TLS, "TLS_")
	})
	if any(func(t *Target) bool { return t.AlignedNote != "" }) {
		row("start", func(t *Target) string {
			switch {
			case t.Aligned:
				return "at capture start"
			case t.AlignedNote == "":
				return "-"
			}
			return "UNALIGNED"
		})
	}
	row("transactions", func(t *Target) string { return fmt.Sprintf("%d (%.1f/s)", t.Transactions, t.TPS) })
	row("queries (r/w/o)", func(t *Target) string { return fmt.Sprintf("%d/%d/%d", t.Reads, t.Writes, t.Other) })
	row("queries/s", func(t *Target) string { return fmt.Sprintf("%.1f", t.QPS) })
	row("errors (deadlocks)", func(t *Target) string { return fmt.Sprintf("%d (%d)", t.Errors, t.Deadlocks) })
	if any(func(t *Target) bool { return t.Retries > 0 }) {
		row("retries (succeeded)", func(t *Target) string { return fmt.Sprintf("%d (%d)", t.Retries, t.RetriesSucceeded) })
	}
	if any(func(t *Target) bool { return t.FailedTransactions > 0 }) {
		// Rolled back on the target, never committed in part.
		row("trx failed for good", func(t *Target) string { return fmt.Sprint(t.FailedTransactions) })
	}
	if any(func(t *Target) bool { return t.Reordered > 0 }) {
		// Sent ahead of a conflicting change: replay's order, not the
		// capture's (see the paragraph below the table).
		row("changes out of order", func(t *Target) string { return fmt.Sprint(t.Reordered) })
	}
	row("skipped", func(t *Target) string { return fmt.Sprint(t.Skipped) })
	row("connections (failed)", func(t *Target) string { return fmt.Sprintf("%d (%d)", t.Connections, t.ConnectFailures) })
	for _, q := range []struct {
		n string
		f func(l Summary) float64
	}{{"min", func(l Summary) float64 { return l.Min }}, {"avg", func(l Summary) float64 { return l.Avg }},
		{"p50", func(l Summary) float64 { return l.P50 }}, {"p95", func(l Summary) float64 { return l.P95 }},
		{"p99", func(l Summary) float64 { return l.P99 }}, {"max", func(l Summary) float64 { return l.Max }}} {
		row("latency ms "+q.n, func(t *Target) string { return fmt.Sprintf("%.3f", q.f(t.Latency)) })
	}
	// Paced replays: how late statements went out against the captured
	// pacing (from the intended send instant to the last packet).
	row("lag ms p50/p95/p99/max", func(t *Target) string {
		if t.Lag == nil {
			return "- (unpaced)"
		}
		return fmt.Sprintf("%.2f/%.2f/%.2f/%.1f", t.Lag.P50, t.Lag.P95, t.Lag.P99, t.Lag.Max)
	})
	if pt.Order == "capture" {
		row("order: waits/reruns/released", func(t *Target) string {
			return fmt.Sprintf("%d/%d/%d", t.OrderWaits, t.OrderReruns, t.OrderReleased)
		})
	}
	if any(func(t *Target) bool { return t.PinnedSessions > 0 }) {
		row("sessions kept on 1 conn", func(t *Target) string { return fmt.Sprint(t.PinnedSessions) })
	}
	vs := func(f func(d *store.Divergences) string) func(t *Target) string {
		return func(t *Target) string {
			if isBase(t) {
				return "-"
			}
			if t.VsBaseline == nil {
				return "-"
			}
			return f(t.VsBaseline)
		}
	}
	row("compared with baseline", func(t *Target) string {
		if isBase(t) {
			return "baseline"
		}
		return vs(func(d *store.Divergences) string { return fmt.Sprint(d.Compared) })(t)
	})
	row("nondeterministic", vs(func(d *store.Divergences) string { return fmt.Sprint(d.Nondeterministic) }))
	row("order-ambiguous", vs(func(d *store.Divergences) string {
		return fmt.Sprint(d.Ambiguous - d.AmbiguousBy[compare.ReasonFailedTrx] - d.AmbiguousBy[compare.ReasonChosenValues] - d.AmbiguousBy[compare.ReasonTiedOrder])
	}))
	for _, r := range []struct{ reason, label string }{
		{compare.ReasonFailedTrx, "after a failed trx"},
		{compare.ReasonChosenValues, "after a nondeterministic write"}, // UUID(), RAND() …: each side chose its own values
		{compare.ReasonTiedOrder, "tied rows of an ORDER BY"},          // in another order, or others picked by LIMIT
	} {
		if any(func(t *Target) bool { return t.VsBaseline != nil && t.VsBaseline.AmbiguousBy[r.reason] > 0 }) {
			row(r.label, vs(func(d *store.Divergences) string { return fmt.Sprint(d.AmbiguousBy[r.reason]) }))
		}
	}
	if any(func(t *Target) bool {
		return t.VsBaseline != nil && t.VsBaseline.Unavailable > 0 || t.VsCapture != nil && t.VsCapture.Unavailable > 0
	}) {
		row("unanswered (not compared)", func(t *Target) string {
			var n int64
			if t.VsBaseline != nil {
				n = t.VsBaseline.Unavailable
			}
			if t.VsCapture != nil {
				n = max(n, t.VsCapture.Unavailable)
			}
			return fmt.Sprint(n)
		})
	}
	if any(func(t *Target) bool { return t.VsBaseline != nil && t.VsBaseline.Missing+t.VsBaseline.Extra > 0 }) {
		// A run cut short (interrupted, a target failed) stops the
		// targets at different records.
		row("ran on one side only", vs(func(d *store.Divergences) string { return fmt.Sprint(d.Missing + d.Extra) }))
	}
	for _, c := range compare.Classes {
		row("divergent: "+c, vs(func(d *store.Divergences) string { return fmt.Sprint(d.ByClass[c]) }))
	}
	// vc: a cell of the comparison with the capture ("-" for a target
	// without one: a run killed before it compared, a merged shard's).
	vc := func(f func(d *store.Divergences) string) func(t *Target) string {
		return func(t *Target) string {
			if t.VsCapture == nil {
				return "-"
			}
			return f(t.VsCapture)
		}
	}
	capBy := func(reason string) bool {
		return any(func(t *Target) bool { return t.VsCapture != nil && t.VsCapture.AmbiguousBy[reason] > 0 })
	}
	if any(func(t *Target) bool { return t.VsCapture != nil && t.VsCapture.Compared > 0 }) {
		row("compared with capture", vc(func(d *store.Divergences) string { return fmt.Sprint(d.Compared) }))
		row("  order-ambiguous", vc(func(d *store.Divergences) string {
			// The rest: each reason below has a row of its own.
			by := d.AmbiguousBy
			return fmt.Sprint(d.Ambiguous - by[compare.ReasonNotReplayed] - by[compare.ReasonFailedTrx] - by[compare.ReasonStartedBefore] - by[compare.ReasonBypassed] - by[compare.ReasonChosenValues] - by[compare.ReasonTiedOrder])
		}))
		for _, r := range []struct{ reason, label string }{
			{compare.ReasonStartedBefore, "  trx began before capture"}, // statements of transactions open at the capture's start
			{compare.ReasonFailedTrx, "  after a failed trx"},
			{compare.ReasonNotReplayed, "  after a skipped write"},
			{compare.ReasonBypassed, "  after a bypassed write"},
			{compare.ReasonChosenValues, "  after a nondeterministic write"},
			{compare.ReasonTiedOrder, "  tied rows of an ORDER BY"},
		} {
			if capBy(r.reason) {
				row(r.label, vc(func(d *store.Divergences) string { return fmt.Sprint(d.AmbiguousBy[r.reason]) }))
			}
		}
		row("  differs from capture", vc(compare.Summary))
	}
	if any(func(t *Target) bool { return t.VsCapture != nil && t.VsCapture.OpenAtStart > 0 }) {
		// Synthetic records that rebuilt sessions open at the capture's
		// start: run, never compared (no answer was captured).
		row("rebuilt open sessions (failed)", func(t *Target) string {
			if t.VsCapture == nil {
				return "-"
			}
			return fmt.Sprintf("%d (%d)", t.VsCapture.OpenAtStart, t.VsCapture.OpenAtStartFailed)
		})
	}
	if any(func(t *Target) bool { return t.EndState != nil }) {
		row("end state", func(t *Target) string {
			switch {
			case t.EndState == nil:
				return "-"
			case t.EndState.Error != "":
				return "not read"
			case isBase(t):
				return fmt.Sprintf("%d tables", len(t.EndState.Tables))
			case t.EndState.Same:
				return "same as baseline"
			}
			n, explained := countTables(t.EndState.Tables, func(ts store.TableState) (bool, bool) { return ts.Differs, ts.Because != "" })
			if explained > 0 {
				return fmt.Sprintf("%d of %d differ (%d explained below)", n, len(t.EndState.Tables), explained)
			}
			return fmt.Sprintf("%d of %d tables differ", n, len(t.EndState.Tables))
		})
	}
	if any(func(t *Target) bool { return t.EndState != nil && t.EndState.Reference != "" }) {
		row("vs production", func(t *Target) string {
			switch {
			case t.EndState == nil || t.EndState.Reference == "":
				return "-"
			case t.EndState.ReferenceError != "":
				return "not read"
			case t.EndState.SameAsReference:
				return "same as production"
			}
			n, byp := countTables(t.EndState.Tables, func(ts store.TableState) (bool, bool) { return ts.VsReference, ts.Bypassed != "" })
			if byp > 0 {
				return fmt.Sprintf("%d of %d differ (%d by bypassed writes)", n, len(t.EndState.Tables), byp)
			}
			return fmt.Sprintf("%d of %d tables differ", n, len(t.EndState.Tables))
		})
	}
	if any(func(t *Target) bool { return len(t.Footprint) > 0 }) {
		var base *Target
		for i := range pt.Targets {
			if isBase(&pt.Targets[i]) {
				base = &pt.Targets[i]
			}
		}
		row("storage data+index", func(t *Target) string {
			d, x := footprint.Total(t.Footprint)
			if len(t.Footprint) == 0 {
				return "-"
			}
			s := Bytes(d + x)
			if base != nil && !isBase(t) {
				if bd, bx := footprint.Total(base.Footprint); bd+bx > 0 {
					s += fmt.Sprintf(" (%.2fx)", float64(d+x)/float64(bd+bx))
				}
			}
			return s
		})
		row("  before the replay", func(t *Target) string {
			d, x := footprint.Total(t.FootprintBefore)
			if len(t.FootprintBefore) == 0 {
				return "-"
			}
			return Bytes(d + x)
		})
	}
	writeTable(w, table)
	for i := range pt.Targets {
		if t := &pt.Targets[i]; t.Failed != "" {
			p("\n%s failed: %s\n", t.Name, t.Failed)
		}
	}
	rep.writeDetails(w, pt)
	WriteFootprint(w, pt, rep.Baseline, "storage footprint after the replay")
}

// writeTable prints rows of a label and a cell per target: labels
// left-aligned in 26 characters (or the longest), each target's column
// right-aligned and as wide as its widest cell, at least 22.
func writeTable(w io.Writer, rows [][]string) {
	if len(rows) == 0 {
		return
	}
	widths := make([]int, len(rows[0]))
	for i := range widths {
		widths[i] = 22
	}
	widths[0] = 26
	for _, r := range rows {
		for i, c := range r {
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	for _, r := range rows {
		fmt.Fprintf(w, "  %-*s", widths[0], r[0])
		for i, c := range r[1:] {
			fmt.Fprintf(w, " %*s", widths[i+1], c)
		}
		fmt.Fprintln(w)
	}
}

// Bytes formats a byte count with a binary unit.
func Bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// WriteFootprint prints each table's size per target after the replay,
// with the ratio of its total to the baseline's.
func WriteFootprint(w io.Writer, pt *Point, baseline, title string) {
	var tables []string
	size := map[string]map[string]store.TableFootprint{} // table → target → size
	for _, t := range pt.Targets {
		for _, f := range t.Footprint {
			if size[f.Table] == nil {
				size[f.Table] = map[string]store.TableFootprint{}
				tables = append(tables, f.Table)
			}
			size[f.Table][t.Name] = f
		}
	}
	if len(tables) == 0 {
		return
	}
	slices.Sort(tables)
	fmt.Fprintf(w, "\n%s (data + index; ratio of the total to the baseline's):\n  %-28s", title, "table")
	for _, t := range pt.Targets {
		fmt.Fprintf(w, " %30s", textclip.Clip(t.Name, 30))
	}
	fmt.Fprintln(w)
	for _, tb := range tables {
		fmt.Fprintf(w, "  %-28s", textclip.Clip(tb, 28))
		b, hasBase := size[tb][baseline]
		for _, t := range pt.Targets {
			f, ok := size[tb][t.Name]
			if !ok {
				fmt.Fprintf(w, " %30s", "-")
				continue
			}
			cell := Bytes(f.DataBytes) + " + " + Bytes(f.IndexBytes)
			if hasBase && t.Name != baseline && b.DataBytes+b.IndexBytes > 0 {
				cell += fmt.Sprintf(" %.2fx", float64(f.DataBytes+f.IndexBytes)/float64(b.DataBytes+b.IndexBytes))
			}
			fmt.Fprintf(w, " %30s", cell)
		}
		fmt.Fprintln(w)
	}
	// Rows are named as captured; say where a target measured them.
	for _, t := range pt.Targets {
		var moved []string
		for _, f := range t.Footprint {
			if f.Measured == "" {
				continue
			}
			cs, _, _ := strings.Cut(f.Table, ".")
			ts, _, _ := strings.Cut(f.Measured, ".")
			if m := fmt.Sprintf("%s is database %s", cs, ts); !slices.Contains(moved, m) {
				moved = append(moved, m)
			}
		}
		if len(moved) > 0 {
			fmt.Fprintf(w, "  tables are named as captured; on %s, %s\n", t.Name, strings.Join(moved, ", "))
		}
	}
	for _, t := range pt.Targets {
		if t.FootprintError != "" {
			fmt.Fprintf(w, "  %s: footprint not measured: %s\n", t.Name, t.FootprintError)
		}
	}
}

func (rep *Report) writeDetails(w io.Writer, pt *Point) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	var base *Target
	for i := range pt.Targets {
		if pt.Targets[i].Name == rep.Baseline {
			base = &pt.Targets[i]
		}
	}
	if base == nil && len(pt.Targets) > 0 {
		base = &pt.Targets[0]
	}
	// What each target's errors and skips were.
	for i := range pt.Targets {
		t := &pt.Targets[i]
		if len(t.ErrorCodes) > 0 {
			named := make(map[string]int64, len(t.ErrorCodes))
			for code, n := range t.ErrorCodes {
				if name := serverErrorNames[code]; name != "" {
					code += " " + name
				}
				named[code] += n
			}
			p("\nerrors on %s: %s\n", t.Name, counts(named))
		}
		if len(t.SkippedBy) > 0 {
			p("skipped on %s: %s\n", t.Name, counts(t.SkippedBy))
		}
		if t.FailedTransactions > 0 {
			named := make(map[string]int64, len(t.FailedByCode))
			for code, n := range t.FailedByCode {
				if name := serverErrorNames[code]; name != "" {
					code += " " + name
				}
				named[code] += n
			}
			p("transactions that failed for good on %s (rolled back there, never committed in part; the rest of each not run): %d, by the last attempt's error: %s\n",
				t.Name, t.FailedTransactions, counts(named))
			for _, f := range t.Failures[:min(len(t.Failures), 3)] {
				writes := "writing " + strings.Join(f.Tables, ", ")
				if len(f.Tables) == 0 {
					writes = "writing nothing"
				}
				p("  %s, seq %d–%d (%d statements, failed at seq %d) %s\n", store.SessionName(f.Session), f.FirstSeq, f.LastSeq, f.Statements, f.FailedSeq, writes)
			}
			if len(t.Failures) > 3 {
				p("  … %d more (all in --json and the run directory)\n", len(t.Failures)-3)
			}
		}
		reorderedTables := func(kind string) (n int, tables []string) {
			for _, r := range t.Reorders {
				if r.Kind != kind {
					continue
				}
				n++
				for _, x := range r.Tables {
					if !slices.Contains(tables, x) {
						tables = append(tables, x)
					}
				}
			}
			slices.Sort(tables)
			return n, tables
		}
		if t.Reordered > 0 {
			_, tables := reorderedTables("")
			p("changes replay sent to %s ahead of a conflicting change it could not wait for (--order-timeout ran out, or the two waited for each other): %d;"+
				" two writes to the same rows in the other order leave other data, so %s may differ from then on by replay's doing: differences there are counted order-ambiguous."+
				" A larger --order-timeout lets replay wait longer for the order\n",
				t.Name, t.Reordered, strings.Join(tables, ", "))
		}
		for _, k := range []struct{ kind, what string }{
			{store.ReorderYielded, "transactions holding locks that replay rolled back on %s and ran again, to let a statement stuck behind their locks through: %d"},
			{store.ReorderRetried, "transactions holding locks that hit a deadlock or lock wait timeout on %s the capture did not have, and were retried: %d"},
		} {
			if n, tables := reorderedTables(k.kind); n > 0 {
				p(k.what+"; a change that waited on the server for those locks went on at the rollback, ahead of their writes, so %s may differ from then on: differences there are counted order-ambiguous\n",
					t.Name, n, strings.Join(tables, ", "))
			}
		}
		if n, tables := reorderedTables(store.ReorderUnsent); n > 0 {
			p("writes replay did not send to %s (table DDL whose engine could not be set in it; --on-unrewritable skip): %d; %s differ there from then on by that: later differences on them are counted apart (not-replayed)\n",
				t.Name, n, strings.Join(tables, ", "))
		}
		if n, tables := reorderedTables(store.ReorderFailed); n > 0 {
			p("writes that failed on %s where the capture's succeeded: %d; %s lack them there from then on: the first such failure on a table counts as the target's difference, and later differences there follow from it and are counted apart (not-replayed)\n",
				t.Name, n, strings.Join(tables, ", "))
		}
	}
	// End state: which tables differ.
	for i := range pt.Targets {
		t := &pt.Targets[i]
		if t.EndState == nil {
			continue
		}
		if t.EndState.Error != "" {
			p("\nend state of %s could not be read: %s\n", t.Name, t.EndState.Error)
			continue
		}
		var differ, because []string
		for _, ts := range t.EndState.Tables {
			if !ts.Differs {
				continue
			}
			s := ts.Table
			if !ts.Exists {
				s += " (missing)"
			}
			if ts.Because != "" {
				because = append(because, fmt.Sprintf("  %s: diverged because %s", s, ts.Because))
			} else {
				differ = append(differ, s)
			}
		}
		if len(differ) > 0 {
			p("\nend state of %s differs from %s in: %s\n", t.Name, rep.Baseline, strings.Join(differ, ", "))
		}
		if es := t.EndState; es.Reference != "" {
			switch {
			case es.ReferenceError != "":
				p("\nend state of %s against production (%s) could not be read: %s\n", t.Name, es.Reference, es.ReferenceError)
			case es.SameAsReference:
				p("\nend state of %s: same as production's (reference %s, at the capture's end point)\n", t.Name, es.Reference)
			default:
				var byp, other []string
				for _, ts := range es.Tables {
					if !ts.VsReference {
						continue
					}
					d := fmt.Sprintf("%s (%d rows, production %d)", ts.Table, ts.Rows, ts.ReferenceRows)
					if ts.ReferenceBecause != "" {
						d += ", by what replay could not do as captured: " + ts.ReferenceBecause
					}
					if ts.Bypassed != "" {
						byp = append(byp, "  "+d+": "+ts.Bypassed)
					} else {
						other = append(other, d)
					}
				}
				if len(other) > 0 {
					p("\nend state of %s differs from production's (reference %s) in: %s\n", t.Name, es.Reference, strings.Join(other, ", "))
				}
				if len(byp) > 0 {
					p("\nend state of %s differs from production's (reference %s) by writes that bypassed the proxy (counted apart: not the engine's):\n%s\n", t.Name, es.Reference, strings.Join(byp, "\n"))
				}
			}
		}
		if len(because) > 0 {
			p("\nend state of %s differs from %s by what replay could not do as captured (transactions that failed for good, changes out of order):\n%s\n", t.Name, rep.Baseline, strings.Join(because, "\n"))
		}
	}
	// Created tables and their engines, as the servers report them.
	for i := range pt.Targets {
		t := &pt.Targets[i]
		if len(t.Created) == 0 && t.CreatedDropped == 0 {
			continue
		}
		var parts []string
		for _, c := range t.Created {
			s := c.Table + " " + c.Engine
			if !strings.EqualFold(c.Engine, c.Want) {
				s += " (not " + c.Want + "!)"
			}
			parts = append(parts, s)
		}
		if t.CreatedDropped > 0 {
			parts = append(parts, fmt.Sprintf("and %d created and gone again (dropped by the traffic, or temporary)", t.CreatedDropped))
		}
		p("\ntables the replay created on %s: %s\n", t.Name, strings.Join(parts, ", "))
	}
	if base != nil && len(base.TopDigests) > 0 {
		ratios := base.Name == rep.Baseline // a sweep point of one target has no baseline beside it
		if ratios {
			p("\nstatements by total time on %s: latency ms p50/p95/p99 per target (p95 ratio to %s)\n  %-62s", base.Name, base.Name, "")
		} else {
			p("\nstatements by total time on %s: latency ms p50/p95/p99\n  %-62s", base.Name, "")
		}
		for i := range pt.Targets {
			p(" %30s", textclip.Clip(pt.Targets[i].Name, 30))
		}
		p("\n")
		for _, d := range base.TopDigests[:min(10, len(base.TopDigests))] {
			p("  %-62s", textclip.Clip(d.Text, 60))
			for i := range pt.Targets {
				t := &pt.Targets[i]
				j := slices.IndexFunc(t.TopDigests, func(x DigestLatency) bool { return x.Digest == d.Digest })
				if j < 0 {
					p(" %30s", "-")
					continue
				}
				x := t.TopDigests[j]
				cell := fmt.Sprintf("%.3f/%.3f/%.3f", x.Latency.P50, x.Latency.P95, x.Latency.P99)
				if ratios {
					cell += fmt.Sprintf(" (%.2fx)", x.RatioP95)
				}
				p(" %30s", cell)
			}
			p("\n")
		}
	}
	printSamples := func(name string, d *store.Divergences, from, fromLabel string) {
		if d == nil || len(d.Samples) == 0 {
			return
		}
		shown := d.Samples[:min(len(d.Samples), 8)]
		apart := ""
		if d.Ambiguous > 0 {
			var by []string
			for _, r := range compare.Reasons { // the report's order
				if n := d.AmbiguousBy[r]; n > 0 {
					by = append(by, fmt.Sprintf("%s %d", r, n))
				}
			}
			apart = " (" + strings.Join(by, ", ") + ")"
		}
		p("\ndivergences of %s from %s (%d, and %d counted apart%s); %d of %d samples (all in --json and the run directory):\n",
			name, from, d.Total(), d.Ambiguous, apart, len(shown), len(d.Samples))
		for _, s := range shown {
			loop := ""
			if s.Loop > 0 {
				loop = fmt.Sprintf(" (loop %d)", s.Loop+1)
			}
			p("  [%s] seq %d%s %s: %s", s.Class, s.Seq, loop, store.SessionName(s.Session), textclip.Clip(s.Statement, 200))
			if len(s.Params) > 0 {
				p("  params (%s)", strings.Join(s.Params, ", "))
			}
			p("\n      %s: %s\n      %s: %s\n", fromLabel, s.Baseline, name, s.Target)
			if s.Why != "" {
				p("      ambiguous: %s\n", s.Why)
			}
			if s.FirstDiff != "" {
				p("      %s\n", s.FirstDiff)
			}
		}
	}
	for i := range pt.Targets {
		printSamples(pt.Targets[i].Name, pt.Targets[i].VsBaseline, rep.Baseline, rep.Baseline)
	}
	for i := range pt.Targets {
		printSamples(pt.Targets[i].Name, pt.Targets[i].VsCapture, "the captured responses", "captured")
	}
}

// counts renders a count map, largest first: "1213 4, 1062 1".
// serverErrorNames names the server errors a replay meets most, where
// the number alone would not say what happened.
var serverErrorNames = map[string]string{
	"1040": "too many connections",
	"1045": "access denied",
	"1049": "unknown database",
	"1062": "duplicate key",
	"1064": "syntax error",
	"1146": "no such table",
	"1205": "lock wait timeout",
	"1213": "deadlock",
	"1286": "unknown storage engine",
	"1290": "server option prevents it",
	"1792": "read-only transaction",
	"1910": "not supported by the engine",
}

func counts(m map[string]int64) string {
	type kv struct {
		k string
		v int64
	}
	var kvs []kv
	for k, v := range m {
		kvs = append(kvs, kv{k, v})
	}
	slices.SortFunc(kvs, func(a, b kv) int {
		if a.v != b.v {
			return int(b.v - a.v)
		}
		return strings.Compare(a.k, b.k)
	})
	var parts []string
	for _, x := range kvs {
		parts = append(parts, fmt.Sprintf("%s ×%d", x.k, x.v))
	}
	return strings.Join(parts, ", ")
}

// countTables counts the tables that differ, and of those the ones
// explained, as f says of each.
func countTables(tables []store.TableState, f func(store.TableState) (differs, explained bool)) (n, explained int) {
	for _, ts := range tables {
		if d, e := f(ts); d {
			n++
			if e {
				explained++
			}
		}
	}
	return n, explained
}

// Count is n and the noun, plural unless n is 1: "1 target", "3 targets".
func Count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
