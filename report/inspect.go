// Package report turns captures and replay results into what people read:
// text tables, JSON, and (later) HTML and charts.
package report

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tandemdb/tandem/internal/charset"
	"github.com/tandemdb/tandem/internal/textclip"
	"github.com/tandemdb/tandem/sqlinfo"
	"github.com/tandemdb/tandem/store"
)

// CaptureReport is what `tandem inspect` shows of a capture.
type CaptureReport struct {
	Dir           string    `json:"dir"`
	FormatVersion int       `json:"format_version"`
	Source        string    `json:"source"`
	ToolVersion   string    `json:"tool_version"`
	CreatedAt     time.Time `json:"created_at"`
	Closed        bool      `json:"closed_cleanly"`
	// Encryption names the cipher the capture is encrypted with at rest
	// (empty: in clear).
	Encryption string `json:"encryption,omitempty"`
	// Sealed says why the writer did not close the capture, when tandem
	// pack --crashed sealed it (SealedAt); SealedLost the records it
	// lacked then.
	Sealed     string    `json:"sealed,omitempty"`
	SealedAt   time.Time `json:"sealed_at,omitzero"`
	SealedLost string    `json:"sealed_lost,omitempty"`
	// Stopped says why the capture stopped recording early (budget, disk
	// nearly full), StoppedAt when; relaying went on.
	Stopped   string    `json:"stopped,omitempty"`
	StoppedAt time.Time `json:"stopped_at,omitzero"`
	// Failed says why the writer abandoned the capture (a full disk, its
	// directory removed), FailedAt when; relaying went on.
	Failed      string    `json:"failed,omitempty"`
	FailedAt    time.Time `json:"failed_at,omitzero"`
	Dropped     uint64    `json:"dropped"`
	Records     uint64    `json:"records"`
	Sessions    int       `json:"sessions"`
	FirstStart  time.Time `json:"first_start,omitzero"` // none in an empty capture
	LastEnd     time.Time `json:"last_end,omitzero"`
	SpanSeconds float64   `json:"span_seconds"`
	// ByKind counts the records captured as sent; SyntheticByKind the
	// synthetic records that rebuilt sessions open at the capture's start
	// (store.FlagOpenAtStart), SyntheticEnds the synthetic ends of
	// sessions open at its stop (store.FlagOpenAtStop). Neither synthetic
	// kind is in Responses or the digests: nothing was sent for them.
	ByKind          []KindCount `json:"by_kind"`
	SyntheticByKind []KindCount `json:"synthetic_open_at_start_by_kind,omitempty"`
	SyntheticEnds   uint64      `json:"synthetic_open_at_stop,omitempty"`
	// SessionsBy counts sessions by how they entered and left the capture.
	SessionsBy    store.CaptureSessions `json:"sessions_by"`
	Responses     ResponseCounts        `json:"responses"`
	ErrorCodes    []ErrorCount          `json:"error_codes"`
	NotReplayable uint64                `json:"not_replayable"`
	// NotReplayableBy splits NotReplayable by why (NotReplayableReason).
	NotReplayableBy map[string]uint64 `json:"not_replayable_by_reason,omitempty"`
	Masked          uint64            `json:"masked"`
	// Lost counts the records the capture lacks, found by their
	// sequence numbers (a crash that emptied or cut a WAL in the middle, a
	// damaged file); LostRuns says which.
	Lost        uint64          `json:"lost_records"`
	LostRuns    string          `json:"lost,omitempty"`
	TopDigests  []DigestSummary `json:"top_digests"`
	Digests     int             `json:"digests"`
	DiskBytes   int64           `json:"disk_bytes"`
	BytesPerRec float64         `json:"bytes_per_record"`
	// Start and End are the backend's positions when the capture began
	// and ended (tandem proxy --binlog-user); Commits counts the captured
	// transactions whose GTID the capture holds; Bypassed what the binary
	// log held in between that did not pass through the proxy.
	Start    *store.Position `json:"start,omitempty"`
	End      *store.Position `json:"end,omitempty"`
	Commits  uint64          `json:"commits_with_gtid,omitempty"`
	Bypassed *store.Bypassed `json:"bypassed,omitempty"`
	// Origin is where a capture taken without a proxy was read from, and
	// SourceStats what reading it met (sessions found open, gaps, TLS
	// sessions skipped …), each with a count and an example.
	Origin      *store.Origin      `json:"origin,omitempty"`
	SourceStats *store.SourceStats `json:"source_stats,omitempty"`
}

// KindCount is how many records of one kind a capture holds.
type KindCount struct {
	Kind  string `json:"kind"`
	Count uint64 `json:"count"`
}

// ResponseCounts counts the responses (results of multi-statements included).
type ResponseCounts struct {
	OK        uint64 `json:"ok"`
	ResultSet uint64 `json:"result_sets"`
	Error     uint64 `json:"errors"`
	None      uint64 `json:"none"`
}

// ErrorCount is one error code's count, with the first message seen.
type ErrorCount struct {
	Code     uint16 `json:"code"`
	SQLState string `json:"sql_state"`
	Count    uint64 `json:"count"`
	Sample   string `json:"sample_message"`
}

// DigestSummary is one statement shape's share of the capture.
type DigestSummary struct {
	Digest     string  `json:"digest"`
	Text       string  `json:"text"`
	Count      uint64  `json:"count"`
	Executes   uint64  `json:"executes"`
	Errors     uint64  `json:"errors"`
	AvgSeconds float64 `json:"avg_seconds"`
	totalNanos int64
}

// InspectOptions tune Inspect.
type InspectOptions struct {
	// Top is how many digests to list; default 10.
	Top int
	// Key opens an encrypted capture.
	Key *store.Key
}

type stmtKey struct {
	session uint64
	id      uint32
}

// Inspect reads the whole capture in dir once and summarizes it.
func Inspect(ctx context.Context, dir string, opts InspectOptions) (*CaptureReport, error) {
	if opts.Top <= 0 {
		opts.Top = 10
	}
	r, err := store.Open(dir, store.WithKey(opts.Key))
	if err != nil {
		return nil, err
	}
	defer r.Close()
	m := r.Meta()
	rep := &CaptureReport{Dir: dir, FormatVersion: m.FormatVersion, Source: m.Source, ToolVersion: m.ToolVersion, CreatedAt: m.CreatedAt}
	rep.Start, rep.Encryption, rep.Origin = m.Start, m.Encryption, m.Origin
	if sum, ok := r.Summary(); ok {
		rep.SourceStats = sum.Source
		rep.Closed, rep.Dropped = true, sum.Dropped
		rep.Stopped, rep.StoppedAt = sum.Stopped, sum.StoppedAt
		rep.End, rep.Commits, rep.Bypassed = sum.End, sum.Commits, sum.Bypassed
		rep.Sealed, rep.SealedAt, rep.SealedLost = sum.Sealed, sum.SealedAt, sum.Lost
		rep.Closed = sum.Sealed == ""
	}
	if why, at, ok := r.Failure(); ok {
		rep.Failed, rep.FailedAt = why, at
	}

	kinds, synthetic := map[store.Kind]uint64{}, map[store.Kind]uint64{}
	errs := map[uint16]*ErrorCount{}
	digests := map[string]*DigestSummary{}
	prepared := map[stmtKey]sqlinfo.Digest{} // live prepared statements
	sessions := map[uint64]struct{}{}
	var first, last int64
	countResp := func(p *store.Response) {
		switch p.Kind {
		case store.RespOK:
			rep.Responses.OK++
		case store.RespResultSet:
			rep.Responses.ResultSet++
		case store.RespError:
			rep.Responses.Error++
			e := errs[p.ErrCode]
			if e == nil {
				e = &ErrorCount{Code: p.ErrCode, SQLState: p.SQLState, Sample: p.Message}
				errs[p.ErrCode] = e
			}
			e.Count++
		default:
			rep.Responses.None++
		}
	}
	var lost store.SeqGaps
	charsets := map[uint64]*charset.Session{}
	for rec, err := range r.Records() {
		if err != nil {
			return nil, err
		}
		if rep.Records%65536 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		lost.Note(rec.Seq)
		rep.Records++
		sessions[rec.Session] = struct{}{}
		rep.SessionsBy.Add(rec)
		syn := rec.Flags&(store.FlagOpenAtStart|store.FlagOpenAtStop) != 0
		switch {
		case rec.Flags&store.FlagOpenAtStart != 0:
			synthetic[rec.Kind]++
		case rec.Flags&store.FlagOpenAtStop != 0:
			rep.SyntheticEnds++
		default:
			kinds[rec.Kind]++
		}
		start, end := rec.Start.UnixNano(), rec.Start.UnixNano()+int64(rec.Duration)
		if first == 0 || start < first {
			first = start
		}
		last = max(last, end)
		if rec.Flags&store.FlagNotReplayable != 0 {
			rep.NotReplayable++
			if rep.NotReplayableBy == nil {
				rep.NotReplayableBy = map[string]uint64{}
			}
			rep.NotReplayableBy[NotReplayableReason(rec)]++
		}
		if rec.Flags&store.FlagMasked != 0 {
			rep.Masked++
		}
		if !syn {
			countResp(&rec.Resp)
			for i := range rec.Resp.More {
				countResp(&rec.Resp.More[i])
			}
		}

		var d sqlinfo.Digest
		// Statements are in their session's character set; digests are
		// the captured text's, printed in UTF-8.
		cs := charsets[rec.Session]
		if cs == nil {
			cs = &charset.Session{}
			charsets[rec.Session] = cs
		}
		digest := func(sql string) sqlinfo.Digest {
			d := sqlinfo.DigestOf(sql)
			if u := cs.ToUTF8(sql); u != sql {
				d.Text = sqlinfo.DigestOf(u).Text
			}
			return d
		}
		switch rec.Kind {
		case store.KindConnect, store.KindChangeUser:
			cs.Connect(rec.Collation)
			continue
		case store.KindResetConnection:
			cs.Reset()
			continue
		case store.KindQuit:
			delete(charsets, rec.Session)
			continue
		case store.KindQuery:
			d = digest(rec.SQL)
			if rec.Resp.Kind != store.RespError {
				cs.Statement(rec.SQL)
			}
		case store.KindPrepare:
			// A synthetic capture records no response; only an error means
			// the statement does not exist.
			if rec.Resp.Kind != store.RespError {
				prepared[stmtKey{rec.Session, rec.StmtID}] = digest(rec.SQL)
			}
			continue
		case store.KindExecute:
			var ok bool
			if d, ok = prepared[stmtKey{rec.Session, rec.StmtID}]; !ok {
				d = sqlinfo.Digest{ID: "unknown", Text: fmt.Sprintf("(statement %d prepared before the capture began)", rec.StmtID)}
			}
		case store.KindClose:
			delete(prepared, stmtKey{rec.Session, rec.StmtID})
			continue
		default:
			continue
		}
		if syn {
			continue // a SET or START TRANSACTION that rebuilt the session's state: not traffic
		}
		s := digests[d.ID]
		if s == nil {
			s = &DigestSummary{Digest: d.ID, Text: d.Text}
			digests[d.ID] = s
		}
		s.Count++
		s.totalNanos += int64(rec.Duration)
		if rec.Kind == store.KindExecute {
			s.Executes++
		}
		if rec.Resp.Kind == store.RespError {
			s.Errors++
		}
	}

	rep.Sessions = len(sessions)
	rep.Lost, rep.LostRuns = lost.Missing, lost.String()
	if rep.Records > 0 {
		rep.FirstStart, rep.LastEnd = time.Unix(0, first).UTC(), time.Unix(0, last).UTC()
		rep.SpanSeconds = time.Duration(last - first).Seconds()
	}
	for _, k := range store.Kinds() {
		if n := kinds[k]; n > 0 {
			rep.ByKind = append(rep.ByKind, KindCount{k.String(), n})
		}
		if n := synthetic[k]; n > 0 {
			rep.SyntheticByKind = append(rep.SyntheticByKind, KindCount{k.String(), n})
		}
	}
	for _, e := range errs {
		rep.ErrorCodes = append(rep.ErrorCodes, *e)
	}
	slices.SortFunc(rep.ErrorCodes, func(a, b ErrorCount) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Code, b.Code))
	})
	rep.Digests = len(digests)
	all := make([]*DigestSummary, 0, len(digests))
	for _, s := range digests {
		s.AvgSeconds = time.Duration(s.totalNanos / int64(s.Count)).Seconds()
		all = append(all, s)
	}
	slices.SortFunc(all, func(a, b *DigestSummary) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), strings.Compare(a.Text, b.Text))
	})
	for _, s := range all[:min(opts.Top, len(all))] {
		rep.TopDigests = append(rep.TopDigests, *s)
	}
	if rep.DiskBytes, err = r.DiskBytes(); err != nil {
		return nil, err
	}
	if rep.Records > 0 {
		rep.BytesPerRec = float64(rep.DiskBytes) / float64(rep.Records)
	}
	return rep, nil
}

// WriteText writes the report for people.
// writePoints says where the capture starts and ends in the backend's
// history, and what bypassed it.
func (rep *CaptureReport) writePoints(p func(string, ...any)) {
	if rep.Start == nil {
		p("start point\tnone (captured without --binlog-user): replay assumes each target holds the rows the backend held when the capture began, and cannot check it\n")
		return
	}
	pos := func(x *store.Position) string {
		g := x.GTID
		if g == "" {
			g = "(empty GTID position)"
		}
		s := fmt.Sprintf("%s at %s (server_id %d, %s", g, x.At.Format(time.RFC3339), x.ServerID, x.Version)
		if x.BinlogFile != "" {
			s += fmt.Sprintf(", %s:%d", x.BinlogFile, x.BinlogPos)
		}
		return s + ")"
	}
	p("start point\t%s: bring targets here with 'tandem align'\n", pos(rep.Start))
	if rep.End == nil {
		p("end point\tnone (the capture did not close, or the position could not be read at its end)\n")
		return
	}
	p("end point\t%s: a replica stopped here (tandem align --end) holds production's end state\n", pos(rep.End))
	if rep.Bypassed == nil {
		return
	}
	b := rep.Bypassed
	p("commits\t%d captured transactions with their GTID\n", rep.Commits)
	if b.Transactions == 0 {
		p("bypassed\tnone: every transaction the binary log holds between the points passed through the proxy\n")
	} else {
		tables := make([]string, 0, len(b.Tables))
		for _, t := range b.Tables {
			tables = append(tables, fmt.Sprintf("%s (%d transactions, %d rows, first %s)", t.Table, t.Transactions, t.Rows, t.FirstGTID))
		}
		p("BYPASSED\t%d transactions (%d rows) in the binary log between the points did not pass through the proxy: %s; replay runs them only with --apply-bypassed (without it, answers and end states on their tables differ from production's by them, and are counted apart)\n",
			b.Transactions, b.Rows, strings.Join(tables, "; "))
		for i, t := range b.First {
			if i == 5 {
				p("\t… %d more (tandem inspect --json lists the first %d)\n", b.Transactions-5, len(b.First))
				break
			}
			p("\t%s at %s: %d rows of %s\n", t.GTID, t.At.Format("15:04:05"), t.Rows, strings.Join(t.Tables, ", "))
		}
	}
	if b.Transactions > 0 {
		if b.Applicable == b.Transactions {
			p("\tall %d stored with their row images: tandem replay --apply-bypassed runs them where the server ran them\n", b.Applicable)
		} else {
			p("\t%d of %d stored with their row images (%s): replay cannot apply them\n", b.Applicable, b.Transactions, b.NotApplicable)
		}
	}
	if b.Unasked > 0 {
		p("bypassed\tUNCERTAIN: %d captured transactions that wrote have a GTID the proxy could not ask for (committed implicitly by DDL, or by a statement that read the diagnostics, or the backend went away): up to %d of those listed may have passed through the proxy\n", b.Unasked, b.Unasked)
	}
	if b.Error != "" {
		p("bypassed\tUNCERTAIN: the binary log could not be read to the end point (%s): the list stops where reading did\n", b.Error)
	}
}

func (rep *CaptureReport) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	p := func(format string, args ...any) { fmt.Fprintf(tw, format, args...) }
	p("capture\t%s\n", rep.Dir)
	p("written by\ttandem %s (format %d), source %q, created %s\n", rep.ToolVersion, rep.FormatVersion, rep.Source, rep.CreatedAt.Format(time.RFC3339))
	if o := rep.Origin; o != nil {
		ports := ""
		if len(o.Ports) > 0 {
			ports = fmt.Sprintf(", server ports %v", o.Ports)
		}
		prec := ""
		if o.TimePrecision > 0 {
			prec = fmt.Sprintf(", times to %v", o.TimePrecision)
		}
		p("read from\t%s %s%s%s, without a proxy\n", o.Kind, strings.Join(o.Inputs, ", "), ports, prec)
		if o.NoResults {
			p("lacks\tthe server's answers: replay compares targets with each other only\n")
		}
		if st := rep.SourceStats; st != nil {
			for _, l := range st.Lines(o.Kind) {
				p("\t%s\n", l)
			}
		}
	}
	if rep.Encryption != "" {
		p("encrypted\tat rest, %s (every file; it opens with its key only)\n", rep.Encryption)
	}
	if rep.Stopped != "" {
		p("stopped\tcapture stopped at %s: %s (the traffic after it was relayed, not recorded)\n", rep.StoppedAt.Format(time.RFC3339), rep.Stopped)
	}
	if rep.Failed != "" {
		p("failed\tcapture failed at %s: %s (the records synced before it are here; the traffic after it was relayed, not recorded)\n", rep.FailedAt.Format(time.RFC3339), rep.Failed)
	}
	switch {
	case rep.Sealed != "":
		p("state\tsealed at %s after a crash (tandem pack --crashed): %s; records dropped while capturing unknown, no end point\n", rep.SealedAt.Format(time.RFC3339), rep.Sealed)
	case rep.Closed:
		p("state\tclosed cleanly, %d records dropped while capturing\n", rep.Dropped)
	case rep.Failed != "":
		p("state\tnot closed: the writer abandoned it when it failed\n")
	case rep.Lost > 0:
		p("state\tnot closed: the writer crashed or is still running, and records are missing (below)\n")
	default:
		p("state\tnot closed: the writer crashed or is still running; records up to its last sync are here\n")
	}
	rep.writePoints(p)
	if rep.Lost > 0 {
		p("LOST\t%s: what the sessions did there is unknown; replay refuses the capture unless --skip-damaged\n", rep.LostRuns)
	}
	if rep.Records == 0 {
		p("records\t0\n")
		return tw.Flush()
	}
	p("span\t%s → %s (%.3fs)\n", rep.FirstStart.Format("2006-01-02 15:04:05.000"), rep.LastEnd.Format("15:04:05.000"), rep.SpanSeconds)
	p("records\t%d in %s, %s\n", rep.Records, Count(rep.Sessions, "session"), Count(rep.Digests, "statement digest"))
	c := &rep.SessionsBy
	p("sessions began\t%d connected during the capture, %d open at its start (%d inside a transaction)\n", c.Connected, c.OpenAtStart, c.InTransaction)
	p("sessions ended\t%d quit or disconnected, %d open at its stop\n", c.Ended, c.OpenAtStop)
	p("on disk\t%s (%.1f bytes/record)\n", Bytes(rep.DiskBytes), rep.BytesPerRec)
	p("responses\tok %d, result sets %d, errors %d, none %d\n", rep.Responses.OK, rep.Responses.ResultSet, rep.Responses.Error, rep.Responses.None)
	if rep.NotReplayable+rep.Masked > 0 {
		why := make([]string, 0, len(rep.NotReplayableBy))
		for r, n := range rep.NotReplayableBy {
			why = append(why, fmt.Sprintf("%d %s", n, r))
		}
		slices.Sort(why)
		var flagged []string
		if rep.NotReplayable > 0 { // "0 not replayable ()" before
			flagged = append(flagged, fmt.Sprintf("%d not replayable (%s)", rep.NotReplayable, strings.Join(why, "; ")))
		}
		if rep.Masked > 0 {
			flagged = append(flagged, fmt.Sprintf("%d with masked secrets", rep.Masked))
		}
		p("flagged\t%s\n", strings.Join(flagged, ", "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(w, "\nrecords by kind")
	for _, k := range rep.ByKind {
		fmt.Fprintf(tw, "  %s\t%d\t%5.1f%%\n", k.Kind, k.Count, 100*float64(k.Count)/float64(rep.Records))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(rep.SyntheticByKind) > 0 || rep.SyntheticEnds > 0 {
		// Written by the recorder, not sent by a client: the state of
		// sessions open when the capture started, the ends of those open
		// when it stopped.
		fmt.Fprintln(w, "\nsynthetic records (not sent by clients)")
		for _, k := range rep.SyntheticByKind {
			fmt.Fprintf(tw, "  %s\t%d\t%5.1f%%\tsynthetic (open at start)\n", k.Kind, k.Count, 100*float64(k.Count)/float64(rep.Records))
		}
		if n := rep.SyntheticEnds; n > 0 {
			fmt.Fprintf(tw, "  quit\t%d\t%5.1f%%\tsynthetic (open at stop)\n", n, 100*float64(n)/float64(rep.Records))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(rep.ErrorCodes) > 0 {
		fmt.Fprintln(w, "\nerrors")
		for _, e := range rep.ErrorCodes {
			fmt.Fprintf(tw, "  %d (%s)\t%d\t%s\n", e.Code, e.SQLState, e.Count, textclip.Clip(e.Sample, 80))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(rep.TopDigests) > 0 {
		fmt.Fprintf(w, "\ntop %d statements by count (of %d digests)\n", len(rep.TopDigests), rep.Digests)
		fmt.Fprintln(tw, "  COUNT\tEXECUTES\tERRORS\tAVG MS\tDIGEST\tSTATEMENT")
		for _, d := range rep.TopDigests {
			short := sqlinfo.Digest{ID: d.Digest}.Short()
			fmt.Fprintf(tw, "  %d\t%d\t%d\t%.3f\t%s\t%s\n", d.Count, d.Executes, d.Errors, d.AvgSeconds*1000, short, textclip.Clip(d.Text, 100))
		}
	}
	return tw.Flush()
}

// NotReplayableReason says why the proxy marked rec not replayable.
func NotReplayableReason(rec *store.Record) string {
	switch {
	case rec.Flags&store.FlagLost != 0:
		return "commands the packet capture could not record (bytes lost, or run before a session found open joined)"
	case rec.Flags&store.FlagSchemaUnknown != 0:
		return "schema unknown: the session began before the capture, which does not say its schema (give tandem capture --schema)"
	case rec.Flags&store.FlagTruncated != 0:
		return "truncated at --max-record-bytes"
	case rec.Kind == store.KindOther:
		return "a command the proxy does not parse"
	case rec.Kind == store.KindQuery && sqlinfo.IsLoadDataLocal(rec.SQL):
		return "LOAD DATA LOCAL: the file was the client's"
	case rec.IsBulk() && rec.Flags&store.FlagMasked != 0:
		return "a bulk execute of a statement that can carry a password: its rows were not stored"
	case rec.Kind == store.KindExecute:
		return "parameter types unknown (bound before the capture began)"
	}
	return "statement longer than --max-record-bytes (cut)"
}
