// Package serverlog builds a capture from what a MySQL or MariaDB server
// writes about its own traffic: the general log (its file, or its table:
// the CSV engine's file, or the table exported by mariadb -B), the slow
// log (with
// long_query_time=0) and MariaDB's server_audit log. Such a capture
// holds who connected (user, schema, connection id), every statement in
// the order the server logged it, with its session and time, and the
// executes of prepared statements with their values inlined as the log
// shows them (replayed as text). It holds no answers: replay compares
// targets with each other only (store.Origin.NoResults).
//
// Time is as precise as the log: the MariaDB general and slow logs and
// the audit log write whole seconds; the records of one second are spread
// evenly over it, in the log's order. None says when a statement both
// began and ended, so each record spans what the log allows: the general
// log writes a statement as it arrives, so its record lasts until its
// session's next event (it ended by then); the audit log writes it as it
// ends (with its result code), so its record begins at its session's
// previous event; the slow log writes it as it ends with its Query_time,
// so its record starts that long before. Statements of different
// sessions then overlap as far as the log allows, and the order gate
// holds back only what the log says came after.
//
// Passwords in statements are masked (sqlinfo.MaskSecrets) and such
// records are not replayable; authentication is not in any of the logs.
package serverlog

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/tandemdb/tandem/capture"
	"github.com/tandemdb/tandem/internal/textclip"
	"github.com/tandemdb/tandem/sqlinfo"
	"github.com/tandemdb/tandem/store"
)

// Formats.
const (
	General = "general"
	Slow    = "slow"
	Audit   = "audit"
)

// Formats lists the formats Read takes.
var Formats = []string{General, Slow, Audit}

// OriginKind is the store.Origin kind of a capture read from a log of
// format f.
func OriginKind(f string) string { return f + "-log" }

// event is one thing a log says happened.
type event struct {
	at     time.Time     // when (the log's precision)
	dur    time.Duration // how long it took (slow log), or 0
	conn   uint32        // the server's connection id
	kind   store.Kind
	user   string
	schema string // Connect, InitDB: the schema; a statement: the current one, if the log says
	sql    string
	failed string // a connect refused: why
	// errCode is the error the statement ended with (the audit log's
	// RETCODE; 0: none, or the log does not say).
	errCode uint16
	// untimed: logged before the log's first time, and given it.
	untimed bool
	// refusedChange: a change of user the server refused (failed says
	// why): the session goes on as it was.
	refusedChange bool
	// cut: the statement is as long as the log writes any (the audit
	// log's server_audit_query_log_limit): it may be cut.
	cut bool
	// failedPrepare: a prepare that failed, logged with its ? marks.
	failedPrepare bool
	// schemaGuess: schema is not the log's word for this entry but the
	// last one it wrote for any (MySQL's slow log).
	schemaGuess bool
	// schemaUnsaid: the log does not say which schema the session is in
	// (the general log, but at a connect, Init DB or change of user).
	schemaUnsaid bool
}

// kindReopen is the kind of the event a log's header makes when the server
// opened the log again after entries, not after a FLUSH of the logs: the
// server restarted, or logging was off for a while.
const kindReopen store.Kind = 255

// Stats is what reading a log met.
type Stats = store.SourceStats

// builder turns events into records: one session per connection (a new
// one at each connect).
//
// Times: the events of one logged second are spread evenly over it, in
// the log's order. Durations: the slow log gives each statement's (it is
// logged as it ends, so it starts that long before); the general and
// audit logs give none, so a statement's record lasts until its
// session's next event (all the log can say: it ended by then), and is
// written then, as a proxy writes a record when its command ends.
type builder struct {
	sink     capture.Sink
	sessions map[uint32]*logSession
	nextID   uint64
	st       *store.SourceStats
	when     when // what a logged time is
	// schema is Options.Schema: that of sessions found open whose schema
	// the log does not say.
	schema string
	// The events of the second being read (whole-second logs).
	sec    int64
	secBuf []*event
	last   time.Time
}

type logSession struct {
	id     uint64
	schema string
	// logSchema is the schema the log last stated for the session (the
	// audit log's DATABASE, the slow log's Schema): a change of it is a
	// change the session made by a command the log leaves out.
	logSchema string
	closed    bool
	pending   *store.Record // a statement waiting for its end (arrival)
	lastEnd   time.Time     // when its last event ended (ended)
	// schemaUnknown: the session was found open and neither the log nor
	// Options.Schema says its schema: its statements are not replayed
	// (store.FlagSchemaUnknown) until it names one.
	schemaUnknown bool
}

// when says what a log's time for a statement is.
type when uint8

const (
	// arrival: the statement came in then (general log); it ended by its
	// session's next event.
	arrival when = iota
	// ended: the statement ended then (server_audit writes it with its
	// result); it began after its session's previous event.
	ended
	// timed: it ended then and the log says how long it took (slow log).
	timed
)

func whenOf(f string) when {
	switch f {
	case Audit:
		return ended
	case Slow:
		return timed
	}
	return arrival
}

func newBuilder(sink capture.Sink, st *store.SourceStats, w when, schema string) *builder {
	return &builder{sink: sink, sessions: map[uint32]*logSession{}, st: st, when: w, schema: schema}
}

func (b *builder) sample(kind, s string) {
	if b.st.Samples == nil {
		b.st.Samples = map[string]string{}
	}
	if _, ok := b.st.Samples[kind]; !ok {
		b.st.Samples[kind] = s
	}
}

// add takes one event in the log's order.
func (b *builder) add(e *event) {
	if e.untimed {
		b.st.Untimed++
		b.sample("untimed", fmt.Sprintf("connection %d: logged before the log's first time, given that time (%s)", e.conn, e.at.Format(time.RFC3339)))
	}
	if e.at.Nanosecond() != 0 { // the log has sub-second times
		b.flushSecond()
		b.process(e, e.at)
		return
	}
	sec := e.at.Unix()
	if sec < b.sec-1 {
		b.st.TimeBack++
		b.sample("time_back", fmt.Sprintf("connection %d logged at %s after %s: taken as of the later time", e.conn, e.at.Format(time.RFC3339), time.Unix(b.sec, 0).In(e.at.Location()).Format(time.RFC3339)))
	}
	if sec < b.sec {
		// An earlier second after a later one (a log that stamps a
		// statement when it began and writes it when it ended): the
		// log's order stands, so it is taken as of the second being
		// read. Spread over its own second again, it would start before
		// records of its session already written: a session's records
		// must never go back in time (replay's order gate queues them in
		// the session's order and waits by their times).
		sec = b.sec
	}
	if len(b.secBuf) > 0 && sec != b.sec {
		b.flushSecond()
	}
	b.sec = sec
	b.secBuf = append(b.secBuf, e)
}

// flushSecond spreads the second's events over it.
func (b *builder) flushSecond() {
	n := len(b.secBuf)
	for i, e := range b.secBuf {
		b.process(e, time.Unix(b.sec, 0).Add(time.Duration(2*i+1)*time.Second/time.Duration(2*n)))
	}
	clear(b.secBuf)
	b.secBuf = b.secBuf[:0]
}

// session returns the session of e's connection, starting one (with a
// synthetic connect at at) if the log has not shown its connect.
func (b *builder) session(e *event, at time.Time) *logSession {
	conn, user, schema := e.conn, e.user, e.schema
	s := b.sessions[conn]
	if s != nil && !s.closed {
		return s
	}
	unknown := false
	if schema == "" && e.schemaUnsaid {
		// The connect that named it is not in the log: --schema's, or
		// none known.
		schema, unknown = b.schema, b.schema == ""
	}
	b.nextID++
	s = &logSession{id: b.nextID, schema: schema, logSchema: schema, schemaUnknown: unknown}
	b.sessions[conn] = s
	b.st.Sessions++
	b.st.FoundOpen++
	b.sample("found_open", fmt.Sprintf("connection %d, first logged at %s with no connect before it", conn, at.Format(time.RFC3339)))
	b.sink.Record(&store.Record{Session: s.id, Start: at, Kind: store.KindConnect, User: user, Schema: schema, ConnID: conn,
		Flags: store.FlagOpenAtStart, Resp: store.Response{Kind: store.RespOK}})
	return s
}

// settle writes a session's statement waiting for its end, which came
// at at.
func (b *builder) settle(s *logSession, at time.Time) {
	if r := s.pending; r != nil {
		r.Duration = max(at.Sub(r.Start), 0)
		b.sink.Record(r)
		s.pending = nil
	}
}

// process records one event at at (its end, for the slow log's).
func (b *builder) process(e *event, at time.Time) {
	if e.dur > 0 {
		at = at.Add(-e.dur)
	}
	if end := at.Add(e.dur); end.After(b.last) {
		b.last = end
	}
	switch e.kind {
	case kindReopen:
		// What happened while the log was closed is not in it: the
		// sessions open then end there, unseen, and one that goes on
		// after it is found open again.
		open := 0
		for _, s := range b.openSessions() {
			b.end(s, at, false)
			open++
		}
		b.st.Gaps++
		b.sample("gaps", fmt.Sprintf("the log was opened again after %s, not by a FLUSH of the logs (the server restarted, or logging was off); %d sessions open then end there", at.Format(time.RFC3339), open))
		return
	case store.KindConnect:
		if old := b.sessions[e.conn]; old != nil && !old.closed {
			b.end(old, at, false) // the id came back: the old one ended unseen
		}
		if e.failed != "" {
			b.st.Undecoded++
			b.sample("undecoded", fmt.Sprintf("connection %d refused at %s: %s", e.conn, at.Format(time.RFC3339), e.failed))
			return
		}
		b.nextID++
		s := &logSession{id: b.nextID, schema: e.schema, logSchema: e.schema, lastEnd: at}
		b.sessions[e.conn] = s
		b.st.Sessions++
		b.sink.Record(&store.Record{Session: s.id, Start: at, Kind: store.KindConnect, User: e.user, Schema: e.schema, ConnID: e.conn,
			Resp: store.Response{Kind: store.RespOK}})
		return
	case store.KindQuit:
		if s := b.sessions[e.conn]; s != nil && !s.closed {
			b.end(s, at, true)
		}
		return
	}
	if e.refusedChange {
		b.st.Undecoded++
		b.sample("undecoded", fmt.Sprintf("connection %d: a change of user refused at %s: %s", e.conn, at.Format(time.RFC3339), e.failed))
		return
	}
	s := b.session(e, at)
	if at.Before(s.lastEnd) {
		at = s.lastEnd // sub-second times out of order: never before the session's last event
	}
	b.settle(s, at)
	r := &store.Record{Session: s.id, Start: at, Duration: e.dur, Kind: e.kind, Schema: s.schema}
	if e.errCode != 0 {
		// What the log says of the answer: the error alone (replay
		// handles a captured deadlock or lock wait timeout as the
		// server did, and compares other errors with the targets').
		r.Resp = store.Response{Kind: store.RespError, ErrCode: e.errCode}
	}
	if b.when == ended && !s.lastEnd.IsZero() && s.lastEnd.Before(at) {
		r.Start, r.Duration = s.lastEnd, at.Sub(s.lastEnd)
	}
	s.lastEnd = at.Add(e.dur)
	if told := e.schema != "" && !e.schemaGuess; told && e.kind != store.KindInitDB && e.kind != store.KindChangeUser {
		if e.schema != s.logSchema && e.schema != s.schema {
			// The log says the session is in another schema than it last
			// said: the session changed it by a command the log does not
			// write (the audit and slow logs leave out COM_INIT_DB, which
			// a client's USE sends). Replay changes it there too. (A USE
			// statement the log did not follow leaves its word as it was.)
			b.sink.Record(&store.Record{Session: s.id, Start: r.Start, Kind: store.KindInitDB, Schema: e.schema, Resp: store.Response{Kind: store.RespOK}})
			s.schema = e.schema
		}
		s.logSchema = e.schema
		r.Schema = s.schema
		s.schemaUnknown = false
	}
	switch e.kind {
	case store.KindQuery:
		r.SQL = e.sql
		switch masked, ok := sqlinfo.MaskSecrets(e.sql); {
		case ok:
			r.SQL, r.Flags = masked, store.FlagMasked
		case sqlinfo.CarriesSecret(e.sql) && (strings.Contains(e.sql, "*****") || strings.Contains(e.sql, "<secret>")):
			// A password the server masked in its log (server_audit's
			// *****, MySQL's <secret>): no statement to run.
			r.Flags = store.FlagMasked
		}
		if sqlinfo.IsLoadDataLocal(e.sql) {
			r.Flags |= store.FlagNotReplayable // the client's file is in no log
		}
		if e.cut {
			r.Flags |= store.FlagTruncated | store.FlagNotReplayable
			b.st.Truncated++
			b.sample("truncated", fmt.Sprintf("connection %d at %s: %d bytes, as long as the log writes any", e.conn, at.Format(time.RFC3339), len(e.sql)))
		}
		if e.failedPrepare {
			r.Flags |= store.FlagNotReplayable
			b.st.FailedPrepares++
			b.sample("failed_prepares", fmt.Sprintf("connection %d at %s: error %d preparing %s", e.conn, at.Format(time.RFC3339), e.errCode, clip(r.SQL)))
		}
		if db, ok := sqlinfo.UseSchema(e.sql); ok {
			s.schema, s.schemaUnknown = db, false
		} else if s.schemaUnknown {
			// Run in whichever schema the target's DSN names, it could
			// read or write same-named tables of another schema.
			r.Flags |= store.FlagSchemaUnknown | store.FlagNotReplayable
			b.st.SchemaUnknown++
			b.sample("schema_unknown", fmt.Sprintf("connection %d at %s: %s", e.conn, at.Format(time.RFC3339), clip(r.SQL)))
		}
	case store.KindInitDB:
		r.Schema, s.schema, s.schemaUnknown = e.schema, e.schema, false
	case store.KindChangeUser:
		r.User, r.Schema = e.user, e.schema
		s.schema, s.schemaUnknown = e.schema, false
	}
	if b.when == arrival {
		s.pending = r
		return
	}
	b.sink.Record(r)
}

// end ends a session: its quit is in the log (quit), or it is not.
func (b *builder) end(s *logSession, at time.Time, quit bool) {
	b.settle(s, at)
	s.closed = true
	if quit {
		b.sink.Record(&store.Record{Session: s.id, Start: at, Kind: store.KindQuit})
		return
	}
	b.sink.Record(&store.Record{Session: s.id, Start: at, Kind: store.KindQuit, Flags: store.FlagOpenAtStop})
}

// finish ends the sessions still open at the log's end (synthetic ends),
// in session order.
func (b *builder) finish() {
	b.flushSecond()
	for _, s := range b.openSessions() {
		b.end(s, b.last, false)
	}
}

// openSessions are the sessions not ended, in session order.
func (b *builder) openSessions() []*logSession {
	var open []*logSession
	for _, s := range b.sessions {
		if !s.closed {
			open = append(open, s)
		}
	}
	slices.SortFunc(open, func(x, y *logSession) int { return cmp.Compare(x.id, y.id) })
	return open
}

// clip shortens a statement for a sample (never inside a character).
func clip(sql string) string { return textclip.Clip(sql, 80) }

// parser reads one log format.
type parser interface {
	// line takes one line (without its newline); it calls emit for each
	// event complete.
	line(s string, emit func(*event)) error
	// flush emits what is pending at the end of a file.
	flush(emit func(*event))
}

// Options say what Read cannot tell from the log itself.
type Options struct {
	// Loc is the time zone the log's times are in (the server's
	// log_timestamps or system time zone; nil: local). RFC 3339 times
	// carry their own.
	Loc *time.Location
	// AuditQueryLimit is the server's server_audit_query_log_limit (0:
	// its default, 1024): the audit log cuts a statement at that many
	// bytes as written (a byte fewer when an escape does not fit), and
	// one that long is not replayed.
	AuditQueryLimit int
	// Schema is the schema of sessions the log finds open (their connect
	// is not in it) when it does not say theirs (the general log). None:
	// their statements are
	// store.FlagSchemaUnknown and not replayed, until they name one (USE,
	// Init DB, a change of user).
	Schema string
}

// DefaultAuditQueryLimit is server_audit_query_log_limit's default.
const DefaultAuditQueryLimit = 1024

// newParser returns a parser of format f.
func newParser(f string, o Options) (parser, error) {
	switch f {
	case General:
		return &generalParser{loc: o.Loc}, nil
	case Slow:
		return &slowParser{loc: o.Loc}, nil
	case Audit:
		limit := o.AuditQueryLimit
		if limit == 0 {
			limit = DefaultAuditQueryLimit
		}
		return &auditParser{loc: o.Loc, limit: limit}, nil
	}
	return nil, fmt.Errorf("log format %q: want one of %s", f, strings.Join(Formats, ", "))
}

// Read reads the logs in paths (in the order given: a log and its rotated
// successors, oldest first: one log, read as one) of format f into sink,
// and returns what it met.
func Read(ctx context.Context, paths []string, f string, o Options, sink capture.Sink) (*Stats, error) {
	if o.Loc == nil {
		o.Loc = time.Local
	}
	st := &store.SourceStats{}
	b := newBuilder(sink, st, whenOf(f), o.Schema)
	p, err := newParser(f, o)
	if err != nil {
		return nil, err
	}
	for i, path := range paths {
		if nf, ok := p.(interface{ newFile() }); ok && i > 0 {
			nf.newFile()
		}
		if err := readFile(ctx, path, p, b, st); err != nil {
			return st, err
		}
	}
	if e, ok := p.(interface{ end(func(*event)) }); ok {
		e.end(b.add)
	}
	if u, ok := p.(interface{ untimedLeft() int }); ok && u.untimedLeft() > 0 {
		return st, fmt.Errorf("%s: %d entries and no time in the log: MariaDB writes a time only when the second changes, and these files hold none (a piece cut from a longer log?); give the log from its start, or the file before it too", strings.Join(paths, ", "), u.untimedLeft())
	}
	b.finish()
	return st, nil
}

func readFile(ctx context.Context, path string, p parser, b *builder, st *store.SourceStats) error {
	fh, err := os.Open(path)
	if err != nil {
		return err
	}
	defer fh.Close()
	r := bufio.NewReaderSize(fh, 1<<20)
	n := 0
	emit := func(e *event) { b.add(e) }
	for {
		line, err := r.ReadString('\n')
		if err == io.EOF && line == "" {
			break
		}
		if err != nil && err != io.EOF {
			return fmt.Errorf("%s: line %d: %w", path, n+1, err)
		}
		n++
		st.Packets++ // lines, for a log
		if perr := p.line(strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r"), emit); perr != nil {
			return fmt.Errorf("%s: line %d: %w", path, n, perr)
		}
		if n%65536 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if err == io.EOF {
			break
		}
	}
	p.flush(emit)
	return nil
}

// FirstTime is the time of the first event of a log file of format f, and
// how precise the log's times are (1 s, or 1 µs when its times have a
// fraction).
func FirstTime(path, f string, loc *time.Location) (time.Time, time.Duration, error) {
	p, err := newParser(f, Options{Loc: loc})
	if err != nil {
		return time.Time{}, 0, err
	}
	var first *event
	err = readFileUntil(path, p, func(e *event) error {
		first = e
		return errStop
	})
	if err != nil && err != errStop {
		return time.Time{}, 0, fmt.Errorf("%w (is --format %s right?)", err, f)
	}
	if first == nil {
		return time.Time{}, time.Second, fmt.Errorf("%s: no %s log event in it (is --format right?)", path, f)
	}
	prec := time.Second
	if first.at.Nanosecond() != 0 {
		prec = time.Microsecond
	}
	return first.at.Add(-first.dur).Truncate(time.Second), prec, nil
}

var errStop = fmt.Errorf("stop")

// readFileUntil reads a log's events until fn returns an error.
func readFileUntil(path string, p parser, fn func(*event) error) error {
	fh, err := os.Open(path)
	if err != nil {
		return err
	}
	defer fh.Close()
	r := bufio.NewReaderSize(fh, 1<<16)
	var ferr error
	emit := func(e *event) {
		if ferr == nil {
			ferr = fn(e)
		}
	}
	for n := 1; ferr == nil; n++ {
		line, err := r.ReadString('\n')
		if line != "" {
			if perr := p.line(strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r"), emit); perr != nil {
				return fmt.Errorf("%s: line %d: %w", path, n, perr)
			}
		}
		if err != nil {
			break
		}
	}
	if ferr == nil {
		p.flush(emit)
	}
	return ferr
}
