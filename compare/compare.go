// Package compare decides, statement by statement, whether a target's
// outcome differs from the baseline's or from the response the capture
// holds, classifies the difference, keeps samples, and tells real
// differences from those the capture's own order leaves open. It is pure:
// it reads outcomes and captured responses, never a server.
//
// Comparison is semantic: rows are compared as a multiset unless the
// statement's ORDER BY fixes their order; a statement whose result cannot
// be deterministic (NOW(), RAND(), LIMIT without ORDER BY …) is compared
// for errors only and counted apart. A difference on a statement whose
// captured interval overlapped a commit of another session touching one of
// its tables — or that replay had to start before all it waits for had
// completed — is counted as order-ambiguous, never as an engine difference;
// except a statement whose answer the commit order replay kept decides
// (Statement.Locked), which only a commit that deleted rows of its table
// makes ambiguous.
package compare

import (
	"fmt"
	"iter"
	"strings"

	"github.com/tandemdb/tandem/internal/textclip"
	"github.com/tandemdb/tandem/store"
)

// Divergence classes.
const (
	ErrorVsOK = "error-vs-ok"
	ErrorCode = "error-code"
	Affected  = "affected-rows"
	InsertID  = "insert-id"
	RowCount  = "row-count"
	Content   = "row-content"
	Order     = "order-only"
	Warnings  = "warnings"
	// Ambiguous names order-ambiguous samples (counted apart, not a class).
	Ambiguous = "order-ambiguous"
	// AfterSkip names samples ambiguous for ReasonNotReplayed.
	AfterSkip = "after-skipped-write"
)

// Reasons a divergence is order-ambiguous (Divergences.AmbiguousBy).
const (
	ReasonCommitOverlap = "commit-overlap"
	ReasonReplayOrder   = "replay-order"
	// ReasonRetried: the statement ran again after its transaction hit a
	// deadlock on one side; the retry sees the data as it is then.
	ReasonRetried = "retried"
	// ReasonNotReplayed: in the comparison with the capture, a write that
	// replay could not run (Gaps) reached one of the statement's tables
	// before it.
	ReasonNotReplayed = "not-replayed"
	// ReasonCoarseTimes: the capture's times are as coarse as the server
	// log it was read from, so the order its sessions took locks in is
	// not known: a transaction that failed for good on one side (its
	// deadlocks or lock waits came from replay's order) is counted apart,
	// its failing statement included.
	ReasonCoarseTimes = "coarse-times"
	// ReasonFailedTrx: a transaction that failed for good on one side
	// (Failures) wrote one of the statement's tables before it.
	ReasonFailedTrx = "after-failed-transaction"
	// ReasonBypassed: in the comparison with the capture, writes that did
	// not pass through the proxy (the capture's binary-log list) changed
	// one of the statement's tables on the captured server before it;
	// replay does not repeat them.
	ReasonBypassed = "bypassed-write"
	// ReasonStartedBefore: in the comparison with the capture, the
	// statement belongs to a transaction that was already open when the
	// capture started (store.FlagBeforeStart): its snapshot and locks
	// began before the capture, so what it saw there is not what the
	// target saw.
	ReasonStartedBefore = "started-before-capture"
	// ReasonChosenValues: a write that stored values each server chooses
	// anew (sqlinfo.Info.ChosenValues: UUID(), RAND() without a seed,
	// SYSDATE() …), or a user variable holding such a value or one the
	// targets cannot have as captured, reached one of the statement's
	// tables before it, so that table's rows differ between the targets
	// and from the capture although no engine differs. In both
	// comparisons.
	ReasonChosenValues = "nondeterministic-write"
	// ReasonTiedOrder: the statement's ORDER BY may leave rows tied
	// (Statement.TiedOrder): it differed in order only, or in content
	// under a LIMIT, which is the server's choice among tied rows.
	ReasonTiedOrder = "tied-order"
)

// Classes lists the divergence classes in report order. It is the one
// list: reports, replay's metrics and the shadows' all take it from here.
var Classes = []string{ErrorVsOK, ErrorCode, Affected, InsertID, RowCount, Content, Order, Warnings}

// Reasons lists the reasons a divergence is order-ambiguous, in report
// order; like Classes, the one list.
var Reasons = []string{ReasonCommitOverlap, ReasonReplayOrder, ReasonRetried, ReasonNotReplayed, ReasonFailedTrx, ReasonBypassed, ReasonStartedBefore, ReasonChosenValues, ReasonTiedOrder, ReasonCoarseTimes}

func isErr(o *store.Outcome) bool { return o.Flags&store.OutcomeError != 0 }

// Classify says how t diverges from b ("" when it does not) and whether the
// statement was nondeterministic (compared for errors only).
func Classify(b, t *store.Outcome) (class string, nondeterministic bool) {
	be, te := isErr(b), isErr(t)
	switch {
	case be != te:
		return ErrorVsOK, false
	case be:
		switch {
		case b.ErrCode != t.ErrCode:
			return ErrorCode, false
		case b.Results != t.Results:
			return ErrorVsOK, false // one side failed at a later result than the other
		}
		return "", false
	}
	if (b.Flags|t.Flags)&store.OutcomeNondeterministic != 0 {
		return "", true
	}
	switch {
	case b.Affected != t.Affected:
		return Affected, false
	case b.InsertID != t.InsertID:
		return InsertID, false
	case b.Rows != t.Rows:
		return RowCount, false
	case b.Unordered != t.Unordered:
		return Content, false
	case b.Flags&store.OutcomeOrdered != 0 && b.Ordered != t.Ordered:
		return Order, false
	case b.Warnings != t.Warnings:
		return Warnings, false
	}
	return "", false
}

// ClassifyCaptured says how a target's outcome t diverges from the response
// the capture recorded ("" when it does not), and whether the statement was
// nondeterministic. Row checksums are compared when the capture has them
// (proxy --capture-results checksum); a response of several results (a
// CALL, a multi-statement text) is compared on its results' count, the
// error that ended it, its total rows and checksums; warnings for OK
// responses.
func ClassifyCaptured(resp *store.Response, t *store.Outcome) (string, bool) {
	last := resp
	rows := resp.Rows
	results := 1 + len(resp.More)
	allSums := resp.HasChecksums || resp.Kind != store.RespResultSet
	for i := range resp.More {
		last = &resp.More[i]
		rows += last.Rows
		if last.Kind == store.RespResultSet && !last.HasChecksums {
			allSums = false
		}
	}
	ce, te := last.Kind == store.RespError, isErr(t)
	switch {
	case ce != te:
		return ErrorVsOK, false
	case ce:
		switch {
		case last.ErrCode != t.ErrCode:
			return ErrorCode, false
		case t.Results != 0 && int(t.Results) != results:
			return ErrorVsOK, false
		}
		return "", false
	}
	if t.Flags&store.OutcomeNondeterministic != 0 {
		return "", true
	}
	single := len(resp.More) == 0
	ok := single && resp.Kind == store.RespOK && t.Flags&store.OutcomeRows == 0
	switch {
	case ok && resp.AffectedRows != t.Affected:
		return Affected, false
	case ok && resp.InsertID != t.InsertID:
		return InsertID, false
	case rows != t.Rows:
		return RowCount, false
	case allSums && resp.HasChecksums && sumUnordered(resp) != t.Unordered:
		return Content, false
	case single && resp.HasChecksums && t.Flags&store.OutcomeOrdered != 0 && resp.Ordered != t.Ordered:
		return Order, false
	case ok && resp.Warnings != t.Warnings:
		return Warnings, false
	}
	return "", false
}

// sumUnordered adds the unordered checksums of every result: a multiset of
// all rows, as replay folds several result sets.
func sumUnordered(p *store.Response) uint64 {
	s := p.Unordered
	for i := range p.More {
		s += p.More[i].Unordered
	}
	return s
}

// Describe says what an outcome was, for a sample.
func Describe(o *store.Outcome) string {
	switch {
	case o.Flags&store.OutcomeClientError != 0:
		return fmt.Sprintf("error %d (%s)", o.ErrCode, store.CauseText(o.Cause))
	case isErr(o) && o.Results > 1:
		return fmt.Sprintf("error %d after %d results", o.ErrCode, o.Results-1)
	case isErr(o):
		return fmt.Sprintf("error %d", o.ErrCode)
	case o.Flags&store.OutcomeRows != 0 && o.Results > 1:
		return fmt.Sprintf("%d rows in %d results (checksums %016x/%016x)", o.Rows, o.Results, o.Unordered, o.Ordered)
	case o.Flags&store.OutcomeRows != 0:
		return fmt.Sprintf("%d rows (checksums %016x/%016x), %d warnings", o.Rows, o.Unordered, o.Ordered, o.Warnings)
	}
	return fmt.Sprintf("ok, %d affected, insert id %d, %d warnings", o.Affected, o.InsertID, o.Warnings)
}

// DescribeResponse says what a captured response was, for a sample.
func DescribeResponse(p *store.Response) string {
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

// Statement is what a sample shows of a captured statement, and what the
// ambiguity check needs: its session, its captured window and its tables.
type Statement struct {
	Session uint64
	SQL     string
	Params  []string
	Digest  string
	// From and To bound the captured interval that decides the statement's
	// result (ns, the capture's clock): from the start of its transaction's
	// first statement, which fixes a repeatable-read snapshot, to its end.
	From, To int64
	// LoopOffset is what replay's timeline adds to the capture's clock in
	// the --loop pass the outcome is of (0 in the first): failed
	// transactions and changes run out of order are at times on that
	// timeline.
	LoopOffset int64
	// Tables it reads and writes, schema-qualified.
	Tables []string
	// BeforeStart: it belongs to a transaction already open when the
	// capture started (store.FlagBeforeStart).
	BeforeStart bool
	// TiedOrder: its ORDER BY may leave rows tied (its columns hold no
	// unique key known to replay), so the server returns tied rows in an
	// order of its own, and with Limited (a LIMIT) picks among them as it
	// likes: a difference in order only, or in content under a LIMIT, is
	// the server's choice, not the engine's data (ReasonTiedOrder).
	TiedOrder, Limited bool
	// Locked: its answer is decided by the commit order replay kept (the
	// server's, from the capture's GTIDs): it locks the rows it names and
	// its transaction committed in that order. A commit of another session
	// that overlapped it does not make it ambiguous.
	Locked bool
}

// Source describes captured statements by their outcome key.
type Source interface {
	Statement(key uint64) (Statement, bool)
}

// Tally accumulates one target's comparison.
type Tally struct {
	D       store.Divergences
	commits *Commits
	// Gaps, set for the comparison with the capture only, makes a
	// difference after a write replay skipped ambiguous.
	Gaps *Gaps
	// Failed, if set, makes a difference after a transaction that failed
	// for good on either side counted apart (ReasonFailedTrx).
	Failed *Failures
	// Free, set when sessions ran freely (--order none), makes a
	// difference on a table another session writes order-ambiguous.
	Free *Writers
	// Chosen, set for both comparisons, indexes the writes of values each
	// server chooses anew: a difference after one on a table it wrote is
	// counted apart (ReasonChosenValues).
	Chosen *Gaps
	// Bypassed, set for the comparison with the capture only, makes a
	// difference on a table that writes bypassing the proxy had changed
	// counted apart (ReasonBypassed).
	Bypassed *Bypassed
	// BeforeStart, set for the comparison with the capture only, makes a
	// difference on a statement of a transaction open at the capture's
	// start counted apart (ReasonStartedBefore).
	BeforeStart bool
	// Coarse, set when the capture's times are coarser than its
	// statements (a server log's whole seconds), says so: a statement of a
	// transaction that failed for good on one side is counted apart
	// (ReasonCoarseTimes).
	Coarse string
	src    Source
	per    int
	seen   map[string]int
}

// NewTally starts a comparison that keeps up to samples samples per
// (digest, class); commits (may be nil) decides ambiguity, src describes
// statements.
func NewTally(samples int, commits *Commits, src Source) *Tally {
	return &Tally{D: store.Divergences{ByClass: map[string]int64{}}, commits: commits, src: src, per: samples, seen: map[string]int{}}
}

// Note records one comparison: class from Classify (or ClassifyCaptured),
// the outcome key, what each side did, and how ordering went for it (Why).
func (t *Tally) Note(key uint64, class string, nondet bool, order OrderWhy, base, target string) {
	t.D.Compared++
	if nondet {
		t.D.Nondeterministic++
	}
	if class == "" {
		return
	}
	st, ok := t.src.Statement(key)
	why, reason := t.JudgeDiff(key, class, st, ok, order)
	if why != "" {
		t.D.Ambiguous++
		if t.D.AmbiguousBy == nil {
			t.D.AmbiguousBy = map[string]int64{}
		}
		t.D.AmbiguousBy[reason]++
		class := Ambiguous
		switch reason {
		case ReasonNotReplayed:
			class = AfterSkip
		case ReasonFailedTrx:
			class = ReasonFailedTrx
		case ReasonBypassed:
			class = ReasonBypassed
		case ReasonStartedBefore:
			class = ReasonStartedBefore
		case ReasonChosenValues, ReasonTiedOrder:
			class = reason
		}
		t.sample(key, class, st, ok, base, target, why)
		return
	}
	t.D.ByClass[class]++
	t.sample(key, class, st, ok, base, target, "")
}

// JudgeDiff is Judge for a difference of class: one in order only, or in
// content under a LIMIT, of a statement whose ORDER BY may leave rows
// tied is the server's choice among them (ReasonTiedOrder).
func (t *Tally) JudgeDiff(key uint64, class string, st Statement, ok bool, order OrderWhy) (why, reason string) {
	if ok && st.TiedOrder && (class == Order || class == Content && st.Limited) {
		what := "the rows in another order"
		if class == Content {
			what = "other rows under its LIMIT"
		}
		return "its ORDER BY may leave rows tied (its columns hold no unique key known to replay), and the server gives tied rows in an order of its own: " + what + " may be its choice, not the engine's data", ReasonTiedOrder
	}
	return t.Judge(key, st, ok, order)
}

// Judge says why a differing outcome of st (outcome key key; ok: st is
// known) is ambiguous, and the reason's name, or "" when it is a
// divergence.
func (t *Tally) Judge(key uint64, st Statement, ok bool, order OrderWhy) (why, reason string) {
	if order == OrderVerdict {
		// The failing statement of a transaction that failed for good: a
		// verdict on the engine's locking, unless the capture's times are
		// too coarse to say what order replay should have kept.
		if t.Coarse != "" {
			return "its transaction failed for good on one side (deadlocks or lock wait timeouts on every try); " + t.Coarse, ReasonCoarseTimes
		}
		return "", ""
	}
	if ok && t.BeforeStart && st.BeforeStart {
		return "its transaction was already open when the capture started: its snapshot and locks began before it, so the captured answer is not one the target could give from the capture's start", ReasonStartedBefore
	}
	if ok {
		if why, reason := t.Failed.Before(key, st.Session, st.To+st.LoopOffset, st.Tables, false); why != "" {
			return why, reason
		}
		if b, hit := t.Bypassed.Before(st.To, st.Tables); hit {
			return fmt.Sprintf("writes that bypassed the proxy (%d transactions, the first %s) changed %s on the captured server before it: replay does not repeat them", b.Transactions, b.GTID, b.Table), ReasonBypassed
		}
		if why, reason := t.Failed.Before(key, st.Session, st.To+st.LoopOffset, st.Tables, true); why != "" {
			return why, reason
		}
		if tb, hit := t.Free.Other(st.Session, st.Tables); hit {
			return fmt.Sprintf("sessions ran freely (--order none) and other sessions write %s: what it saw depends on the order replay gave them", tb), ReasonReplayOrder
		}
		if g, hit := t.Chosen.Before(st.To, st.Tables); hit {
			return fmt.Sprintf("%s wrote %s before it with values each server chooses anew (UUID(), RAND() without a seed, SYSDATE(), CONNECTION_ID(), the user, or a user variable holding one, or set again when its session joined the capture): the targets' rows there are not the capture's nor each other's", store.SessionName(g.Session), g.Table), ReasonChosenValues
		}
	}
	switch {
	case order == OrderReleased:
		return "replay could not keep its order exactly (it went ahead after --order-timeout, or its transaction ran again to let a blocked statement through)", ReasonReplayOrder
	case order == OrderRetried:
		return "its transaction was retried after a deadlock on one side, so it ran on later data", ReasonRetried
	case ok && t.commits != nil && !st.Locked:
		if c, hit := t.commits.OverlappingFor(key, false, st.Session, st.From, st.To, st.Tables); hit {
			if c.Table == Forgotten {
				return forgottenWhy, ReasonCommitOverlap
			}
			return fmt.Sprintf("a commit of %s on %s overlapped it in the capture", store.SessionName(c.Session), c.Table), ReasonCommitOverlap
		}
	case ok && t.commits != nil:
		// Its answer is the commit order's, except where InnoDB skips a
		// row that a transaction it waited for deleted (and perhaps
		// inserted again): then it depends on whether it waited.
		if c, hit := t.commits.OverlappingFor(key, true, st.Session, st.From, st.To, st.Tables); hit {
			if c.Table == Forgotten {
				return forgottenWhy, ReasonCommitOverlap
			}
			return fmt.Sprintf("a commit of %s that deleted rows of %s overlapped it in the capture (InnoDB skips a row deleted by a transaction it waited for, so its answer depends on whether it waited)", store.SessionName(c.Session), c.Table), ReasonCommitOverlap
		}
	}
	if ok {
		if g, hit := t.Gaps.Before(st.To, st.Tables); hit && g.Table == AnyTable && g.Session != 0 {
			return fmt.Sprintf("%s ran commands before it that the capture could not record or replay cannot run (bytes a packet capture lost, a statement of unknown schema or prepared before the capture; see skipped), which may have written what it read or wrote", store.SessionName(g.Session)), ReasonNotReplayed
		} else if hit && g.Table == AnyTable {
			return "records lost from the capture before it (a crash, a damaged file; see the notes) may have written what it read or wrote", ReasonNotReplayed
		} else if hit && g.Failed {
			return fmt.Sprintf("a write of %s to %s before it failed on this side and succeeded in the capture, so the data differs from then on", store.SessionName(g.Session), g.Table), ReasonNotReplayed
		} else if hit {
			return fmt.Sprintf("%s wrote to %s before it with a statement replay could not run (see skipped)", store.SessionName(g.Session), g.Table), ReasonNotReplayed
		}
	}
	return "", ""
}

// forgottenWhy says why a statement is ambiguous whose transaction began
// before the commits a live shadow still keeps (Commits.Forget).
const forgottenWhy = "its transaction began before the commits this shadow still keeps (it keeps those of the last minutes before what it is replaying), so whether a commit of another session overlapped it in the capture is not known"

func (t *Tally) sample(key uint64, class string, st Statement, ok bool, base, target, why string) {
	if !ok || t.seen[st.Digest+"\x00"+class] >= t.per {
		return
	}
	t.seen[st.Digest+"\x00"+class]++
	seq, loop := store.SplitOutcomeSeq(key)
	t.D.Samples = append(t.D.Samples, store.Sample{Class: class, Seq: seq, Loop: loop, Session: st.Session, Digest: st.Digest,
		Statement: st.SQL, Params: st.Params, Baseline: base, Target: target, Ambiguous: why != "", Why: why})
}

// Join merge-joins two outcome streams in key order, calling pair for keys
// both have; keys only one has are counted as missing or extra.
func Join(base, target iter.Seq2[*store.Outcome, error], d *store.Divergences, pair func(b, t *store.Outcome)) error {
	nextB, stopB := iter.Pull2(base)
	defer stopB()
	nextT, stopT := iter.Pull2(target)
	defer stopT()
	bo, berr, bok := nextB()
	to, terr, tok := nextT()
	for bok || tok {
		if berr != nil {
			return berr
		}
		if terr != nil {
			return terr
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
		pair(bo, to)
		bo, berr, bok = nextB()
		to, terr, tok = nextT()
	}
	return nil
}

// Skipped reports whether either side did not run the record.
func Skipped(b, t *store.Outcome) bool { return (b.Flags|t.Flags)&store.OutcomeSkipped != 0 }

// OrderWhy says whether the outcomes compared ran in the capture's order.
type OrderWhy uint8

const (
	OrderKept     OrderWhy = iota
	OrderReleased          // replay could not keep the capture's order exactly for one side
	OrderRetried           // one side ran it again after a deadlock in its transaction
	// OrderVerdict: on one side it is the statement whose transaction
	// failed for good (a deadlock or lock wait timeout on every retry):
	// the engine's verdict, never explained away.
	OrderVerdict
)

// OrderOf tells how ordering went for the outcomes compared: replay could
// not keep the capture's order exactly for either side (it started before
// all it waits for had completed, or its transaction was run again), or
// one side's outcome is a retry's.
func OrderOf(os ...*store.Outcome) OrderWhy {
	why := OrderKept
	for _, o := range os {
		if o.Flags&(store.OutcomeTrxFailed|store.OutcomeError) == store.OutcomeTrxFailed|store.OutcomeError && o.Flags&store.OutcomeClientError == 0 {
			return OrderVerdict
		}
	}
	for _, o := range os {
		switch {
		case o.Flags&(store.OutcomeOrderReleased|store.OutcomeOrderRerun) != 0:
			return OrderReleased
		case o.Flags&store.OutcomeRetried != 0:
			why = OrderRetried
		}
	}
	return why
}

// FirstDiff describes the first difference between two sides' rows (each
// row rendered as text): by position when only the order may differ, else
// the first row one side has more of than the other.
func FirstDiff(a, b []string, aName, bName string, byPosition bool) string {
	const prefix = "first differing row (re-run after the replay): "
	if byPosition {
		for i := range max(len(a), len(b)) {
			if i >= len(a) || i >= len(b) || a[i] != b[i] {
				return fmt.Sprintf("%srow %d: %s %s, %s %s", prefix, i+1, aName, textclip.Clip(at(a, i), 120), bName, textclip.Clip(at(b, i), 120))
			}
		}
		return "rows agree when re-run after the replay, in the same order"
	}
	count := map[string]int{}
	for _, x := range b {
		count[x]++
	}
	for i, x := range a {
		if count[x] == 0 {
			return fmt.Sprintf("%srow %d on %s %s is not on %s (%d rows vs %d)", prefix, i+1, aName, textclip.Clip(x, 120), bName, len(a), len(b))
		}
		count[x]--
	}
	for i, x := range b {
		if count[x] > 0 {
			return fmt.Sprintf("%srow %d on %s %s is not on %s (%d rows vs %d)", prefix, i+1, bName, textclip.Clip(x, 120), aName, len(b), len(a))
		}
	}
	return "rows agree when re-run after the replay"
}

func at(rows []string, i int) string {
	if i < len(rows) {
		return rows[i]
	}
	return "(no row)"
}

// Summary is "0", or a total with its classes: "3 (row-content 2, warnings 1)".
func Summary(d *store.Divergences) string {
	total := d.Total()
	if total == 0 {
		return "0"
	}
	var parts []string
	for _, c := range Classes {
		if n := d.ByClass[c]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", c, n))
		}
	}
	return fmt.Sprintf("%d (%s)", total, strings.Join(parts, ", "))
}
