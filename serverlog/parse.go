package serverlog

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tandemdb/tandem/sqlinfo"
	"github.com/tandemdb/tandem/store"
)

// parseTime reads a log's time: MariaDB's "261204 20:15:10" (the hour may
// be space-padded) or "20261204 20:15:10" (audit), or MySQL's RFC 3339
// ("2026-12-04T20:15:10.123456Z").
func parseTime(s string, loc *time.Location) (time.Time, error) {
	s = strings.TrimSpace(s)
	if strings.Contains(s, "T") {
		return time.Parse(time.RFC3339Nano, s)
	}
	day, clock, ok := strings.Cut(s, " ")
	if !ok {
		return time.Time{}, fmt.Errorf("time %q", s)
	}
	clock = strings.TrimSpace(clock)
	if len(clock) == 7 { // "9:05:01"
		clock = "0" + clock
	}
	layout := "060102 15:04:05"
	if len(day) == 8 {
		layout = "20060102 15:04:05"
	}
	return time.ParseInLocation(layout, day+" "+clock, loc)
}

// The general log: a line per command, "TIME\tID COMMAND\tARGUMENT" with
// TIME only when it changed (MariaDB) or always (MySQL); a statement with
// line breaks goes on over the following lines.
var generalEntry = regexp.MustCompile(`^(\d{6} [ \d]\d:\d\d:\d\d|\d{4}-\d\d-\d\dT[\d:.]+(?:Z|[+-]\d\d:\d\d))?\t+\s*(\d+) ([A-Za-z][A-Za-z ]*?)\t(.*)$`)

type generalParser struct {
	loc     *time.Location
	at      time.Time
	pending *event
	tsv     bool // the table form, exported by mariadb -B (a header line first)
	// untimed: entries read before the log's first time, which take it.
	untimed untimed
	// execs are SQL EXECUTEs held for the statement each ran, which the
	// log writes as its connection's next entry.
	execs []*event
	// seen: an entry was read; a server header after it is a reopen.
	seen bool
	// flushedAt: when the last FLUSH of the logs (or Refresh) was
	// logged, zero if none since the last header: a header that soon
	// after it is its reopen, which lost nothing (other sessions' entries
	// may come between).
	flushedAt time.Time
}

// flushReopens reports whether a header at at was written by a FLUSH of
// the logs logged at flushed: in the same second, or the next.
func flushReopens(flushed, at time.Time) bool {
	return !flushed.IsZero() && at.Sub(flushed) <= time.Second
}

// serverHeader reports whether s is a line of the header a server writes
// when it opens a log file (general or slow): at its start, at FLUSH
// LOGS, when logging is turned on again. first: it is the header's first
// line ("/usr/sbin/mariadbd, Version: … started with:").
func serverHeader(s string) (header, first bool) {
	switch {
	case strings.HasSuffix(s, " started with:") && strings.Contains(s, ", Version: "):
		return true, true
	case strings.HasPrefix(s, "Tcp port: ") && strings.Contains(s, "Unix socket: "),
		strings.HasPrefix(s, "Time") && strings.Contains(s, "Id Command") && strings.HasSuffix(strings.TrimRight(s, " \t"), "Argument"):
		return true, false
	}
	return false, false
}

// flushesLogs reports whether a statement reopens the logs (FLUSH LOGS,
// FLUSH GENERAL LOGS, FLUSH SLOW LOGS …), which writes their header again
// with nothing lost in between.
func flushesLogs(sql string) bool {
	w := strings.Fields(strings.ToUpper(sql))
	return len(w) >= 2 && w[0] == "FLUSH" && slices.ContainsFunc(w[1:], func(x string) bool { return strings.TrimRight(x, ";,") == "LOGS" })
}

// generalTableHeader is the first line of mysql.general_log exported with
// mariadb -B -e 'SELECT * FROM mysql.general_log'.
const generalTableHeader = "event_time\tuser_host\tthread_id\tserver_id\tcommand_type\targument"

func (p *generalParser) line(s string, emit func(*event)) error {
	switch {
	case s == generalTableHeader:
		p.tsv = true
		return nil
	case p.tsv:
		f := strings.SplitN(s, "\t", 6)
		if len(f) != 6 {
			return fmt.Errorf("a mysql.general_log row with %d fields, want 6 (%s)", len(f), strings.ReplaceAll(generalTableHeader, "\t", ","))
		}
		for i := range f {
			f[i] = unescape(f[i], 0)
		}
		return p.row(f, emit)
	}
	if header, first := serverHeader(s); header {
		// Written when the server opens the file. After an entry, it was
		// opened again: by a FLUSH of the logs (nothing lost), or after
		// logging was off or the server restarted (p.reopen).
		if first && p.seen {
			p.reopen(emit)
		}
		return nil
	}
	m := generalEntry.FindStringSubmatch(s)
	if m == nil {
		switch {
		case p.pending != nil && (p.pending.kind == store.KindQuery):
			p.pending.sql += "\n" + s // a statement's next line
			return nil
		case strings.HasPrefix(s, "\"") && len(s) > 1 && s[1] >= '0' && s[1] <= '9':
			// The table's own data file (the CSV engine's general_log.CSV).
			f, err := csvFields(s)
			if err != nil {
				return err
			}
			if len(f) != 6 {
				return fmt.Errorf("a general_log.CSV row with %d fields, want 6", len(f))
			}
			return p.row(f, emit)
		}
		return nil
	}
	if m[1] != "" {
		at, err := parseTime(m[1], p.loc)
		if err != nil {
			return err
		}
		p.at = at
	}
	return p.entry(m[2], m[3], m[4], emit)
}

// reopen ends what was pending at a header met after entries. Unless a
// FLUSH of the logs wrote it, the log has a hole: logging was off, or the
// server restarted. Every session open then is ended there, unseen (a
// restart ended them; and what one did while logging was off is not in
// the log), and one that goes on after it is a session found open.
func (p *generalParser) reopen(emit func(*event)) {
	if flushReopens(p.flushedAt, p.at) {
		p.flush(emit) // nothing lost: the statements EXECUTEs ran may follow
	} else {
		p.flushAll(emit)
		p.emit(&event{kind: kindReopen, at: p.at}, emit)
	}
	p.flushedAt = time.Time{}
}

// row reads one row of the table form: event_time, user_host, thread_id,
// server_id, command_type, argument.
func (p *generalParser) row(f []string, emit func(*event)) error {
	at, err := time.ParseInLocation("2006-01-02 15:04:05.999999", f[0], p.loc)
	if err != nil {
		return fmt.Errorf("event_time %q", f[0])
	}
	p.at = at
	if err := p.entry(f[2], f[4], f[5], emit); err != nil {
		return err
	}
	p.flush(emit) // a row is whole: its argument has its line breaks escaped
	return nil
}

// entry reads one command of connection id. The command before it is
// complete (emitted) unless this entry says more of it: a refused login
// logs the attempt, then its refusal; an EXECUTE of a prepared statement
// logs the EXECUTE, then the statement it ran.
func (p *generalParser) entry(id, command, arg string, emit func(*event)) error {
	conn, err := strconv.ParseUint(id, 10, 32)
	if err != nil {
		return fmt.Errorf("connection id %q", id)
	}
	p.seen = true
	if p.pending != nil && isSQLExecute(p.pending.sql) {
		p.flush(emit) // whole now: held (flush)
	}
	var ranAt time.Time
	if i := slices.IndexFunc(p.execs, func(h *event) bool { return h.conn == uint32(conn) }); i >= 0 {
		h := p.execs[i]
		p.execs = slices.Delete(p.execs, i, i+1)
		if command == "Execute" {
			// The statement it ran, with its values: replayed once, as it
			// ran, at the EXECUTE's time (the log writes it after).
			ranAt = h.at
		} else {
			// No statement followed it (it failed): replayed as logged,
			// late enough to keep the log's order of time.
			p.flush(emit)
			if !h.at.IsZero() && p.at.Sub(h.at) > time.Second {
				h.at = p.at
			}
			p.emit(h, emit)
		}
	}
	prev := p.pending
	if prev != nil && prev.conn != uint32(conn) {
		prev = nil
	}
	// The general log names a schema only at a connect, an Init DB and a
	// change of user: a session it finds open at anything else (a pool's
	// ping, a statement) is in a schema it does not say.
	e := &event{at: p.at, conn: uint32(conn), schemaUnsaid: true}
	switch command {
	case "Connect":
		if strings.HasPrefix(arg, "Access denied") || strings.Contains(arg, " denied ") {
			if prev != nil && prev.kind == store.KindChangeUser {
				// A change of user the server refused: the session goes
				// on as it was.
				p.pending = nil
				e.kind, e.failed, e.refusedChange = store.KindChangeUser, arg, true
				break
			}
			if prev != nil && prev.kind == store.KindConnect && prev.failed == "" {
				p.pending = nil // the attempt this refuses: one refused connect
			}
			e.kind, e.failed = store.KindConnect, arg
			break
		}
		e.kind, e.schemaUnsaid = store.KindConnect, false
		e.user, e.schema = userAndSchema(arg)
	case "Execute":
		e.kind, e.sql = store.KindQuery, arg
		if !ranAt.IsZero() && p.at.Sub(ranAt) <= time.Second {
			e.at = ranAt // (not when seconds late: the log's order of time first)
		}
	case "Query":
		e.kind, e.sql = store.KindQuery, arg
	case "Init DB":
		e.kind, e.schema, e.schemaUnsaid = store.KindInitDB, arg, false
	case "Change user":
		e.kind, e.schemaUnsaid = store.KindChangeUser, false // "on" names the schema, or none
		e.user, e.schema = userAndSchema(arg)
	case "Quit":
		e.kind = store.KindQuit
	case "Ping":
		e.kind = store.KindPing
	case "Reset connection":
		e.kind = store.KindResetConnection
	case "Refresh":
		p.flush(emit)
		p.flushedAt = p.at // mysqladmin flush-logs, logrotate's way
		return nil
	default:
		// Prepare, Close stmt, Reset stmt, Fetch, Long Data: the protocol
		// of prepared statements, whose executes the log writes with
		// their values (replayed as text); Statistics, Field List,
		// Binlog Dump and the like are not replayed. Their lines end the
		// statement before them all the same (a prepared text's next
		// lines are its own).
		p.flush(emit)
		return nil
	}
	p.flush(emit)
	if e.kind == store.KindQuery && flushesLogs(e.sql) {
		p.flushedAt = p.at
	}
	p.pending = e
	return nil
}

// isSQLExecute reports whether sql is an EXECUTE of a prepared statement
// (not EXECUTE IMMEDIATE, which the log writes once).
func isSQLExecute(sql string) bool {
	w := strings.Fields(sql)
	return len(w) >= 2 && strings.EqualFold(w[0], "EXECUTE") && !strings.EqualFold(w[1], "IMMEDIATE")
}

// flush ends the statement pending. An EXECUTE s USING … is held
// instead: the log writes the statement it ran, with its values, as its
// connection's next entry (other connections' may come between).
func (p *generalParser) flush(emit func(*event)) {
	switch e := p.pending; {
	case e == nil:
		return
	case e.kind == store.KindQuery && isSQLExecute(e.sql):
		p.execs = append(p.execs, e)
	default:
		p.emit(e, emit)
	}
	p.pending = nil
}

// flushAll ends what is pending and what is held: the log ends, or was
// closed (the statement an EXECUTE ran is not coming).
func (p *generalParser) flushAll(emit func(*event)) {
	p.flush(emit)
	for _, h := range p.execs {
		p.emit(h, emit)
	}
	p.execs = nil
}

// emit passes e on, once the log has said what time it is: entries before
// its first time wait for it, and take it.
func (p *generalParser) emit(e *event, emit func(*event)) {
	if !p.untimed.pass(e, p.at, emit) {
		return
	}
	if e.at.IsZero() {
		e.at, e.untimed = p.at, true
	}
	emit(e)
}

// untimed holds the entries read before a log's first time (a file cut
// from a longer one starts with entries MariaDB wrote without one).
type untimed []*event

// pass holds e while no time is known (at zero) and reports false; once
// one is, it passes on what waited, stamped with it, and reports true.
func (u *untimed) pass(e *event, at time.Time, emit func(*event)) bool {
	if at.IsZero() {
		*u = append(*u, e)
		return false
	}
	for _, w := range *u {
		w.at, w.untimed = at, true
		emit(w)
	}
	*u = nil
	return true
}

// newFile is called before each file after the first: the next file of
// the same log goes on from where the last one ended, but for its form.
func (p *generalParser) newFile() { p.tsv = false }

// end emits what is still held at the end of the log.
func (p *generalParser) end(emit func(*event)) { p.flushAll(emit) }

// untimedLeft counts the entries still waiting for a time at the end.
func (p *generalParser) untimedLeft() int { return len(p.untimed) }

// csvFields splits a row of the CSV engine's file: quoted fields with
// \-escapes, or bare numbers.
func csvFields(s string) ([]string, error) {
	var out []string
	for i := 0; i <= len(s); {
		if i < len(s) && s[i] == '"' {
			var b strings.Builder
			j := i + 1
			for ; j < len(s) && s[j] != '"'; j++ {
				if s[j] == '\\' && j+1 < len(s) {
					j++
					b.WriteByte(unescapeByte(s[j]))
					continue
				}
				b.WriteByte(s[j])
			}
			if j >= len(s) {
				return nil, fmt.Errorf("a quoted field that does not end (a row cut short?)")
			}
			out = append(out, b.String())
			i = j + 1
		} else {
			j := strings.IndexByte(s[i:], ',')
			if j < 0 {
				j = len(s) - i
			}
			out = append(out, s[i:i+j])
			i += j
		}
		if i < len(s) && s[i] != ',' {
			return nil, fmt.Errorf("a field followed by %q, not a comma", s[i])
		}
		i++
	}
	return out, nil
}

// unescape undoes \-escapes (\n, \t, \\ …) from offset from.
func unescape(s string, from int) string {
	if strings.IndexByte(s[from:], '\\') < 0 {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
			b.WriteByte(unescapeByte(s[i]))
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func unescapeByte(c byte) byte {
	switch c {
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	case '0':
		return 0
	case 'b':
		return '\b'
	case 'f':
		return '\f'
	case 'Z':
		return 0x1a
	}
	return c
}

// userAndSchema reads a connect's "user@host on schema using TCP/IP"
// (MariaDB may add "as anonymous").
func userAndSchema(arg string) (user, schema string) {
	who, rest, _ := strings.Cut(arg, " on ")
	user, _, _ = strings.Cut(who, "@")
	schema, _, _ = strings.Cut(rest, " using ")
	return user, strings.TrimSpace(schema)
}

// The slow log: per statement "# Time:" (when it changed), "# User@Host:",
// "# Thread_id: N  Schema: S" (MariaDB) or "… Id: N" on the User@Host
// line (MySQL), "# Query_time: Q …", other "# " lines; then the log's
// own "use `S`;" (MySQL writes it only when the schema changed since the
// last one it wrote, for any session), and its "SET timestamp=T;" (with
// last_insert_id= and insert_id= before it when the statement used or made
// one); then the statement, ending with ";", or "# administrator command:
// NAME;" for a command that is not a statement.
type slowParser struct {
	loc *time.Location
	at  time.Time
	cur *event
	sql []string
	// headers: in the "# " lines of an entry; prologue: after them,
	// before the statement (the log's "use" and "SET" lines).
	headers, prologue bool
	// db is the schema of the log's last "use" line (MySQL's entries
	// name none of their own); schemaField: the entry named its own.
	db          string
	schemaField bool
	ownUse      bool // the entry had a "use" line of its own
	seen        bool // an entry was read: a server header after it is a reopen
	// flushedAt: when the last FLUSH of the logs was logged (zero: none
	// since the last header).
	flushedAt time.Time
	// reopenAt: a header after entries was read at that time, and no
	// FLUSH of the logs yet that wrote it: the entries after it are held
	// (held) until one comes (no gap) or their time is past it (the
	// server restarted, or logging was off: a reopen event first).
	reopenAt time.Time
	held     []*event
	untimed  untimed // entries before the log's first time
}

// untimedLeft counts the entries still waiting for a time at the end.
func (p *slowParser) untimedLeft() int { return len(p.untimed) }

// maxHeld bounds the entries held after a header.
const maxHeld = 4096

// emit passes e on, or holds it: before the log's first time (a file cut
// from a longer one: it takes that time), or after a header whose cause
// is not known yet (reopenAt).
func (p *slowParser) emit(e *event, emit func(*event)) {
	if !p.untimed.pass(e, e.at, emit) {
		return
	}
	if p.reopenAt.IsZero() {
		emit(e)
		return
	}
	switch {
	case e.kind == store.KindQuery && flushesLogs(e.sql) && flushReopens(p.reopenAt, e.at):
		// The FLUSH that wrote the header: nothing was lost.
		p.reopenAt = time.Time{}
	case e.at.Sub(p.reopenAt) > time.Second || len(p.held) >= maxHeld:
		emit(&event{kind: kindReopen, at: p.reopenAt})
		p.reopenAt = time.Time{}
	default:
		p.held = append(p.held, e)
		return
	}
	for _, h := range p.held {
		emit(h)
	}
	p.held = nil
	emit(e)
}

// end releases what is held at the end of the log: a header no FLUSH
// wrote is a reopen.
func (p *slowParser) end(emit func(*event)) {
	p.flush(emit)
	if !p.reopenAt.IsZero() {
		emit(&event{kind: kindReopen, at: p.reopenAt})
		p.reopenAt = time.Time{}
	}
	for _, h := range p.held {
		emit(h)
	}
	p.held = nil
}

var (
	slowThread  = regexp.MustCompile(`Thread_id:\s*(\d+)`)
	slowSchema  = regexp.MustCompile(`\sSchema: (\S*)`)
	slowMySQLID = regexp.MustCompile(`\sId:\s*(\d+)`)
	slowQuery   = regexp.MustCompile(`Query_time:\s*([\d.]+)`)
	slowUser    = regexp.MustCompile(`User@Host:\s*([^\[\s]*)`)
)

func (p *slowParser) line(s string, emit func(*event)) error {
	header, first := serverHeader(s)
	switch {
	case strings.HasPrefix(s, "# Time:") || strings.HasPrefix(s, "# User@Host:"):
		// An entry begins (its first line may be either).
		if !p.headers {
			p.flush(emit)
			p.cur, p.headers, p.schemaField, p.ownUse = &event{kind: store.KindQuery}, true, false, false
			p.seen = true
		}
	case p.headers && strings.HasPrefix(s, "# "):
		// the entry's other header lines
	case header:
		if first && p.seen {
			p.flush(emit)
			if !flushReopens(p.flushedAt, p.at) && p.reopenAt.IsZero() {
				// The slow log writes a statement when it ends: the FLUSH
				// of the logs that wrote this header, if one did, comes
				// after it. What follows waits for it (emit holds it).
				p.reopenAt = p.at
			}
			p.flushedAt = time.Time{}
		}
		return nil
	case p.cur == nil:
		return nil // before the first entry
	default:
		return p.body(s)
	}
	switch {
	case strings.HasPrefix(s, "# Time:"):
		at, err := parseTime(strings.TrimPrefix(s, "# Time:"), p.loc)
		if err != nil {
			return err
		}
		p.at = at
	case strings.HasPrefix(s, "# User@Host:"):
		if m := slowUser.FindStringSubmatch(s); m != nil {
			p.cur.user = m[1]
		}
		if m := slowMySQLID.FindStringSubmatch(s); m != nil {
			id, _ := strconv.ParseUint(m[1], 10, 32)
			p.cur.conn = uint32(id)
		}
	}
	if m := slowThread.FindStringSubmatch(s); m != nil {
		id, _ := strconv.ParseUint(m[1], 10, 32)
		p.cur.conn = uint32(id)
		if m := slowSchema.FindStringSubmatch(s); m != nil {
			p.cur.schema, p.schemaField = m[1], true // "Schema:   QC_hit": none
		}
	}
	if m := slowQuery.FindStringSubmatch(s); m != nil {
		q, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			return fmt.Errorf("Query_time %q", m[1])
		}
		p.cur.dur = time.Duration(q * float64(time.Second))
	}
	return nil
}

// body reads a line after an entry's headers: the log's own lines, then
// the statement's.
func (p *slowParser) body(s string) error {
	if p.headers {
		p.headers, p.prologue = false, true
	}
	if p.prologue {
		switch {
		case strings.HasPrefix(s, "use ") && strings.HasSuffix(s, ";"):
			p.db = sqlinfo.Unquote(strings.TrimSuffix(strings.TrimPrefix(s, "use "), ";"))
			p.ownUse = true
			return nil
		case logSet(s):
			p.prologue = false // the statement follows
			return nil
		}
		p.prologue = false // a log without the SET line
	}
	p.sql = append(p.sql, s)
	return nil
}

// logSet reports whether s is the slow log's own SET line:
// "SET timestamp=T;", with last_insert_id= and insert_id= before it.
func logSet(s string) bool {
	body, ok := strings.CutPrefix(s, "SET ")
	if !ok || !strings.HasSuffix(body, ";") {
		return false
	}
	for _, a := range strings.Split(strings.TrimSuffix(body, ";"), ",") {
		name, v, ok := strings.Cut(a, "=")
		if !ok || name != "timestamp" && name != "insert_id" && name != "last_insert_id" {
			return false
		}
		if _, err := strconv.ParseFloat(v, 64); err != nil {
			return false
		}
	}
	return true
}

func (p *slowParser) flush(emit func(*event)) {
	if p.cur != nil && len(p.sql) > 0 {
		sql := strings.TrimSuffix(strings.Join(p.sql, "\n"), ";")
		e := p.cur
		e.at = p.at
		if !p.schemaField {
			// MySQL: the schema of the log's last "use", written when
			// the session's differed from it; without one of its own, a
			// guess (a session without a schema writes none either).
			e.schema, e.schemaGuess = p.db, !p.ownUse
		}
		if cmd, ok := strings.CutPrefix(sql, "# administrator command: "); ok {
			// A command that is not a statement: a quit ends its
			// session; a refresh may have reopened the logs; the rest
			// (ping, statistics …) is not replayed.
			switch cmd {
			case "Quit":
				e.kind = store.KindQuit
				p.emit(e, emit)
			case "Refresh":
				if !p.reopenAt.IsZero() && flushReopens(p.reopenAt, e.at) {
					p.reopenAt = time.Time{}
					for _, h := range p.held {
						emit(h)
					}
					p.held = nil
				} else {
					p.flushedAt = e.at
				}
			}
		} else {
			e.sql = sql
			if flushesLogs(sql) && p.reopenAt.IsZero() {
				p.flushedAt = e.at
			}
			p.emit(e, emit)
		}
	}
	p.cur, p.sql, p.headers, p.prologue = nil, p.sql[:0], false, false
}

// The server_audit log (file output): one event a line,
// "TIME,SERVERHOST,USER,HOST,CONNID,QUERYID,OPERATION,DATABASE,OBJECT,RETCODE",
// OBJECT quoted with '…' and \-escapes when it is a statement, cut at
// server_audit_query_log_limit bytes as written (escapes included).
type auditParser struct {
	loc *time.Location
	// limit is the server's server_audit_query_log_limit: a statement
	// written that long may have been cut.
	limit int
}

func (p *auditParser) line(s string, emit func(*event)) error {
	if s == "" {
		return nil
	}
	f := strings.SplitN(s, ",", 9)
	if len(f) < 9 {
		return fmt.Errorf("an audit event with %d fields, want 10 (TIME,SERVERHOST,USER,HOST,CONNID,QUERYID,OPERATION,DATABASE,OBJECT,RETCODE; syslog output is not read)", len(f))
	}
	at, err := parseTime(f[0], p.loc)
	if err != nil {
		return err
	}
	id, err := strconv.ParseUint(f[4], 10, 32)
	if err != nil {
		return fmt.Errorf("connection id %q", f[4])
	}
	obj, written, rest, err := auditObject(f[8])
	if err != nil {
		return err
	}
	// RETCODE: the error the event ended with (0: none).
	var code uint16
	if c, err := strconv.ParseUint(strings.TrimSpace(strings.TrimPrefix(rest, ",")), 10, 16); err == nil {
		code = uint16(c)
	}
	e := &event{at: at, conn: uint32(id), user: f[2], schema: f[7]}
	switch f[6] {
	case "CONNECT":
		e.kind = store.KindConnect
	case "FAILED_CONNECT":
		e.kind, e.failed = store.KindConnect, "error "+strings.TrimPrefix(rest, ",")
	case "DISCONNECT":
		e.kind = store.KindQuit
	case "CHANGEUSER", "CHANGE_USER":
		// MariaDB's plugin writes CHANGEUSER (some forks CHANGE_USER).
		e.kind = store.KindChangeUser
		if code != 0 {
			e.failed, e.refusedChange = fmt.Sprintf("error %d", code), true
		}
	case "QUERY", "QUERY_DDL", "QUERY_DML", "QUERY_DCL", "QUERY_DML_NO_SELECT":
		e.kind, e.sql, e.errCode = store.KindQuery, obj, code
		if p.limit > 0 && written >= p.limit-1 {
			// Written as long as the server writes any: it may have cut
			// it (a cut statement can run, and do something else). One
			// byte short too: the plugin stops a byte early when the next
			// escape (\' or \\) does not fit.
			e.cut = true
		}
		if code != 0 && hasPlaceholder(obj) {
			// A prepare that failed: the plugin writes a statement only
			// once it has run, or a prepare only when it failed, with
			// its ? marks. It is no statement to run.
			e.failedPrepare = true
		}
	default:
		return nil // READ, WRITE, CREATE, … (table events): not commands
	}
	emit(e)
	return nil
}

func (p *auditParser) flush(func(*event)) {}

// hasPlaceholder reports whether sql holds a ? parameter mark outside its
// strings, comments and names.
func hasPlaceholder(sql string) bool {
	toks, err := sqlinfo.Lex(sql)
	return err == nil && slices.ContainsFunc(toks, func(t sqlinfo.Token) bool { return t.Kind == sqlinfo.TokParam })
}

// auditObject reads the OBJECT field (and returns how many bytes it took
// as written, and what follows it): a statement quoted with '…',
// \-escaped, or a bare word.
func auditObject(s string) (obj string, written int, rest string, err error) {
	if !strings.HasPrefix(s, "'") {
		obj, rest, _ = strings.Cut(s, ",")
		return obj, len(obj), "," + rest, nil
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s):
			i++
			b.WriteByte(unescapeByte(s[i]))
		case c == '\'':
			return b.String(), i - 1, s[i+1:], nil
		default:
			b.WriteByte(c)
		}
	}
	return "", 0, "", fmt.Errorf("a statement whose quote does not end (a line cut short?)")
}
