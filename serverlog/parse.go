package serverlog

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

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
	m := generalEntry.FindStringSubmatch(s)
	if m == nil {
		switch {
		case p.pending != nil && (p.pending.kind == store.KindQuery):
			p.pending.sql += "\n" + s // a statement's next line
		case strings.HasPrefix(s, "Time") || strings.Contains(s, ", Version: ") || strings.HasPrefix(s, "Tcp port:") || s == "":
			// the header a server writes when it opens the log
		}
		return nil
	}
	p.flush(emit)
	if m[1] != "" {
		at, err := parseTime(m[1], p.loc)
		if err != nil {
			return err
		}
		p.at = at
	}
	return p.entry(m[2], m[3], m[4])
}

// row reads one row of the table form: event_time, user_host, thread_id,
// server_id, command_type, argument.
func (p *generalParser) row(f []string, emit func(*event)) error {
	p.flush(emit)
	at, err := time.ParseInLocation("2006-01-02 15:04:05.999999", f[0], p.loc)
	if err != nil {
		return fmt.Errorf("event_time %q", f[0])
	}
	p.at = at
	if err := p.entry(f[2], f[4], f[5]); err != nil {
		return err
	}
	p.flush(emit) // a row is whole: its argument has its line breaks escaped
	return nil
}

// entry reads one command of connection id.
func (p *generalParser) entry(id, command, arg string) error {
	conn, err := strconv.ParseUint(id, 10, 32)
	if err != nil {
		return fmt.Errorf("connection id %q", id)
	}
	e := &event{at: p.at, conn: uint32(conn)}
	switch command {
	case "Connect":
		if strings.HasPrefix(arg, "Access denied") || strings.Contains(arg, " denied ") {
			e.kind, e.failed = store.KindConnect, arg
			break
		}
		e.kind = store.KindConnect
		e.user, e.schema = userAndSchema(arg)
	case "Query", "Execute":
		e.kind, e.sql = store.KindQuery, arg
	case "Init DB":
		e.kind, e.schema = store.KindInitDB, arg
	case "Change user":
		e.kind = store.KindChangeUser
		e.user, e.schema = userAndSchema(arg)
	case "Quit":
		e.kind = store.KindQuit
	case "Ping":
		e.kind = store.KindPing
	case "Reset connection":
		e.kind = store.KindResetConnection
	default:
		// Prepare, Close stmt, Reset stmt, Fetch, Long Data: the protocol
		// of prepared statements, whose executes the log writes with
		// their values (replayed as text); Statistics, Field List,
		// Binlog Dump and the like are not replayed.
		return nil
	}
	p.pending = e
	return nil
}

func (p *generalParser) flush(emit func(*event)) {
	if p.pending != nil {
		emit(p.pending)
		p.pending = nil
	}
}

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
// "# Thread_id: N  Schema: S", "# Query_time: Q …", other "# " lines,
// then "use `S`;", "SET timestamp=T;" and the statement, ending with ";".
type slowParser struct {
	loc     *time.Location
	at      time.Time
	cur     *event
	sql     []string
	headers bool // in the "# " lines of an entry
}

var (
	slowThread  = regexp.MustCompile(`Thread_id:\s*(\d+)(?:\s+Schema:\s*(\S*))?`)
	slowMySQLID = regexp.MustCompile(`\sId:\s*(\d+)`)
	slowQuery   = regexp.MustCompile(`Query_time:\s*([\d.]+)`)
	slowUser    = regexp.MustCompile(`User@Host:\s*([^\[\s]*)`)
)

func (p *slowParser) line(s string, emit func(*event)) error {
	if strings.HasPrefix(s, "# ") {
		if !p.headers {
			p.flush(emit) // a new entry begins
			p.cur, p.headers = &event{kind: store.KindQuery}, true
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
		case slowThread.MatchString(s):
			m := slowThread.FindStringSubmatch(s)
			id, _ := strconv.ParseUint(m[1], 10, 32)
			p.cur.conn, p.cur.schema = uint32(id), m[2]
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
	if p.cur == nil {
		return nil // the header a server writes when it opens the log
	}
	p.headers = false
	if len(p.sql) == 0 {
		switch {
		case strings.HasPrefix(s, "use ") && strings.HasSuffix(s, ";"):
			p.cur.schema = strings.Trim(strings.TrimSuffix(strings.TrimPrefix(s, "use "), ";"), "`")
			return nil
		case strings.HasPrefix(s, "SET timestamp=") && strings.HasSuffix(s, ";"):
			return nil
		}
	}
	p.sql = append(p.sql, s)
	return nil
}

func (p *slowParser) flush(emit func(*event)) {
	if p.cur != nil && len(p.sql) > 0 {
		sql := strings.TrimSuffix(strings.Join(p.sql, "\n"), ";")
		if !strings.HasPrefix(sql, "# administrator command") && !strings.HasPrefix(sql, "administrator command") {
			p.cur.sql, p.cur.at = sql, p.at
			emit(p.cur)
		}
	}
	p.cur, p.sql, p.headers = nil, p.sql[:0], false
}

// The server_audit log (file output): one event a line,
// "TIME,SERVERHOST,USER,HOST,CONNID,QUERYID,OPERATION,DATABASE,OBJECT,RETCODE",
// OBJECT quoted with '…' and \-escapes when it is a statement.
type auditParser struct{ loc *time.Location }

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
	obj, rest, err := auditObject(f[8])
	if err != nil {
		return err
	}
	e := &event{at: at, conn: uint32(id), user: f[2], schema: f[7]}
	switch f[6] {
	case "CONNECT":
		e.kind = store.KindConnect
	case "FAILED_CONNECT":
		e.kind, e.failed = store.KindConnect, "error "+strings.TrimPrefix(rest, ",")
	case "DISCONNECT":
		e.kind = store.KindQuit
	case "CHANGE_USER":
		e.kind = store.KindChangeUser
	case "QUERY", "QUERY_DDL", "QUERY_DML", "QUERY_DCL", "QUERY_DML_NO_SELECT":
		e.kind, e.sql = store.KindQuery, obj
		// RETCODE: the error the statement ended with (0: none).
		if code, err := strconv.ParseUint(strings.TrimSpace(strings.TrimPrefix(rest, ",")), 10, 16); err == nil {
			e.errCode = uint16(code)
		}
	default:
		return nil // READ, WRITE, CREATE, … (table events): not commands
	}
	emit(e)
	return nil
}

func (p *auditParser) flush(func(*event)) {}

// auditObject reads the OBJECT field (and returns what follows it): a
// statement quoted with '…', \-escaped, or a bare word.
func auditObject(s string) (obj, rest string, err error) {
	if !strings.HasPrefix(s, "'") {
		obj, rest, _ = strings.Cut(s, ",")
		return obj, "," + rest, nil
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s):
			i++
			b.WriteByte(unescapeByte(s[i]))
		case c == '\'':
			return b.String(), s[i+1:], nil
		default:
			b.WriteByte(c)
		}
	}
	return "", "", fmt.Errorf("a statement whose quote does not end (a line cut short?)")
}
