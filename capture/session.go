package capture

import (
	"errors"
	"fmt"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/tandemdb/tandem/sqlinfo"
	"github.com/tandemdb/tandem/store"
	"github.com/tandemdb/tandem/wire"
)

// Sink takes the records a Session builds (a *Recorder; nil records
// nothing). The record, and what it holds (its parameters, their bytes:
// the packet's), are the session's and valid only during the call: a sink
// that keeps one clones it (store.Record.Clone).
type Sink interface{ Record(*store.Record) }

// Options say what a Session keeps of what it sees.
type Options struct {
	// MaxRecordBytes bounds the SQL, long data and unknown command bytes
	// a record keeps (the rest is cut, and the record marked truncated
	// and not replayable); 0 keeps everything.
	MaxRecordBytes int
	// Checksums: result rows are checksummed (RowSums), as
	// --capture-results checksum asks.
	Checksums bool
	// Commits: the session notes when a transaction that may have written
	// ends (CommitEnded), so that whoever feeds it can ask the server for
	// the transaction's GTID.
	Commits bool
}

// State is what a session carries from its handshake (or, for a session
// found already open, from a snapshot of it): who it is, where it is, and
// how it talks.
type State struct {
	User, Schema string
	// Caps are the client's capability flags as the server sees them;
	// Collation the handshake's.
	Caps      uint64
	Collation byte
	// ConnID is the connection id the server gave the session (its
	// greeting's), 0 when not known.
	ConnID uint32
	// Unknown: the session's login was not seen (a packet capture that
	// began while it was open), so Caps is a guess (protocol 4.1 and
	// transactions, as every client since MySQL 4.1 asks). What changes
	// how answers read is learned from the answers themselves: whether
	// the server ends column definitions with an EOF packet (an EOF is 5
	// bytes; an OK that ends rows without one is 7 or more), and whether
	// it caches result metadata (MariaDB: a byte after the column count).
	Unknown bool
}

// GuessedCaps are the capabilities assumed of a session whose login was
// not seen (State.Unknown).
const GuessedCaps = uint64(mysql.CLIENT_PROTOCOL_41 | mysql.CLIENT_TRANSACTIONS)

// Session builds one client session's records from what crossed the
// wire, without a socket: whoever sees the conversation feeds it — the
// proxy relaying it, or a reader of packets or logs. Per command:
// Command with the client's packet, then each frame of the server's answer
// to Server (as long as it says Read, relaying a client turn when it says
// ClientTurn or SendFile), then End. It keeps what later commands need:
// the current schema, the user after COM_CHANGE_USER, and the prepared
// statements (their parameter count and types, to decode executes).
//
// A session's goroutine owns it; it is not safe for concurrent use.
type Session struct {
	id   uint64
	opts Options
	sink Sink
	st   State
	eof  bool // the server sends EOF packets (no CLIENT_DEPRECATE_EOF)
	// learnEOF: whether it does is not known yet (State.Unknown); the
	// first column definitions' end tells. learnMeta: the same for
	// MariaDB's metadata caching (the first column count tells).
	learnEOF, learnMeta bool
	// prepParams, prepSeen: a prepare's parameter definitions, and the
	// definitions read so far, while learnEOF.
	prepParams, prepSeen int
	// exec is the execute being parsed, its room for parameters reused;
	// params the record's parameters, likewise.
	exec   wire.Execute
	params []store.Value
	stmts  map[uint32]*stmt
	// lastPrepared: the id of the statement the session's last prepare
	// made (0: it failed, or none yet), which MariaDB lets a statement
	// command name as -1 (lastStmtID).
	lastPrepared uint32
	rec          store.Record
	quit         bool // a COM_QUIT was recorded
	// wrote: a statement of the open transaction (or the last one on its
	// own) changed rows or ran DDL; ended: that transaction has ended
	// (Options.Commits); endedSelf: the command that ended it wrote too
	// (an autocommit statement), so its writes were not all done at its
	// start.
	wrote, ended, endedSelf bool
	implicitLost            int
	// What a capture that starts while the session is open needs (see
	// join.go): the SETs it made, autocommit, and its open transaction as
	// the server's status flags tell it; beforeStart: that transaction was
	// open when the session joined the capture.
	sets                                        []string
	setsBeyond                                  int
	autocommitOff, inTrx, trxWrote, beforeStart bool
	statusSeen                                  bool

	// The answer being decoded.
	cmd    byte
	pc     pending
	phase  phase
	resp   *store.Response
	left   int  // column definitions (or prepare packets) still to come
	binary bool // rows are binary (an execute's or a fetch's)
	cont   bool // the next frame continues a packet of MaxPayload bytes
	then   Step // what the packet being continued decided
	row    bool // the packet being continued is a row
	h      xxhash.Digest
	err    error // why the answer was Malformed
	perr   error // why the command was not decoded
}

// stmt is what a session must remember of a prepared statement to decode
// its executes.
type stmt struct {
	sql      string // as recorded (masked if it carried a secret)
	masked   bool
	broken   bool // its SQL was cut or cannot be replayed
	columns  int
	params   int
	types    []wire.ParamType
	longData []bool
	secret   bool // its SQL can carry a password: parameters are not recorded
	diag     bool // it may read the diagnostics (ReadsDiagnostics)
}

// pending is what decoding the answer needs to know of the command.
type pending struct {
	st     *stmt
	useDB  string // USE's schema, applied if the server says OK
	secret bool   // a prepare's SQL can carry a password
	diag   bool   // a prepare's SQL may read the diagnostics
}

// phase is where in the server's answer the session is.
type phase uint8

const (
	phaseNone        phase = iota
	phaseResult            // a result's first packet: OK, ERR, LOCAL INFILE or a column count
	phaseInfile            // the server's answer after the client sent a LOCAL INFILE file
	phaseDefs              // column definitions
	phaseDefsEOF           // the EOF after them (no CLIENT_DEPRECATE_EOF)
	phaseRows              // rows, until the result set's end
	phasePrepare           // COM_STMT_PREPARE's first packet
	phasePrepareRest       // its parameter and column definitions
	phaseSimple            // a one-packet answer: OK, ERR or EOF
	phaseStatistics        // COM_STATISTICS's string
	phaseFieldList         // COM_FIELD_LIST: definitions until EOF or ERR
	phaseAuth              // COM_CHANGE_USER's authentication exchange
)

// Step says what follows a frame (or a command).
type Step uint8

const (
	// Read: the answer goes on; feed the server's next frame.
	Read Step = iota
	// Done: the answer is complete; End the command.
	Done
	// ClientTurn: the server waits for the client's next packet
	// (authentication data): relay it, then read on.
	ClientTurn
	// SendFile: the server asked for a LOCAL INFILE file: the client
	// sends its contents and an empty packet (not recorded), then read on.
	SendFile
	// Raw: a command whose conversation is not decoded (a binlog dump):
	// the rest of the connection is not recorded.
	Raw
	// Malformed: the answer cannot be decoded (Err says why); the
	// conversation cannot be followed further.
	Malformed
)

// NewSession starts following session id (the record's Session) in state
// st, its records going to sink.
func NewSession(id uint64, st State, opts Options, sink Sink) *Session {
	s := &Session{id: id, st: st, opts: opts, sink: sink, eof: uint32(st.Caps)&mysql.CLIENT_DEPRECATE_EOF == 0, stmts: map[uint32]*stmt{}}
	if st.Unknown {
		s.learnEOF, s.learnMeta, s.eof = true, true, false // counted without EOFs until learned
		if s.st.Caps == 0 {
			s.st.Caps = GuessedCaps
		}
	}
	return s
}

// isEOF reports whether p is an EOF packet (never an OK that ends rows
// without one: that has at least 7 bytes).
func isEOF(p []byte) bool { return len(p) == 5 && p[0] == wire.HeaderEOF }

// learnedEOF notes whether the server sends EOF packets, once seen.
func (s *Session) learnedEOF(eof bool) {
	s.eof, s.learnEOF = eof, false
	if !eof {
		s.st.Caps |= uint64(mysql.CLIENT_DEPRECATE_EOF)
	}
}

// Stray takes a server packet that came when no answer was expected, and
// reports whether it was one the session can account for: the EOF that
// ends a prepare's definitions, while it is not known whether the server
// sends EOF packets (State.Unknown), which teaches that it does. Whoever
// feeds a session from packets calls it; the proxy never does.
func (s *Session) Stray(p []byte) bool {
	if s.learnEOF && isEOF(p) {
		s.learnedEOF(true)
		return true
	}
	return false
}

// State is the session's current state.
func (s *Session) State() State { return s.st }

// Err says why the answer was Malformed.
func (s *Session) Err() error { return s.err }

// Kind is the kind of the command being recorded (for metrics).
func (s *Session) Kind() store.Kind { return s.rec.Kind }

// Connect records the session's login, at start and taking d: accepted
// (ok), or refused with the server's message. A refusal before the client
// said who it is records nothing.
func (s *Session) Connect(start time.Time, d time.Duration, ok bool, msg string) {
	r := store.Record{Session: s.id, Start: start, Duration: d, Kind: store.KindConnect, User: s.st.User, Schema: s.st.Schema,
		ClientCaps: s.st.Caps, Collation: s.st.Collation, ConnID: s.st.ConnID, Resp: store.Response{Kind: store.RespOK}}
	if !ok {
		if s.st.User == "" {
			return
		}
		r.Resp = store.Response{Kind: store.RespError, Message: msg}
	}
	s.record(&r)
}

// Command begins a command: p is the client's packet (or, for one of
// MaxPayload bytes or more, its first bytes: truncated says the rest was
// cut). It says what follows: Read (an answer), Done (none: long data, a
// close, a quit) or Raw.
//
// A command that cannot be decoded for recording is recorded as not
// replayable; its answer is still followed (the server decides what is
// malformed).
func (s *Session) Command(p []byte, truncated bool, at time.Time) Step {
	s.rec = store.Record{Session: s.id, Start: at, Schema: s.st.Schema}
	s.pc, s.phase, s.resp, s.cont, s.then, s.row, s.binary, s.err, s.perr = pending{}, phaseNone, &s.rec.Resp, false, Read, false, false, nil, nil
	if len(p) == 0 {
		s.rec.Kind, s.rec.Flags = store.KindOther, store.FlagNotReplayable
		return Done
	}
	s.cmd = p[0]
	s.rec.Command = p[0]
	if s.beforeStart {
		s.rec.Flags |= store.FlagBeforeStart
	}
	if s.opts.MaxRecordBytes > 0 && len(p) > s.opts.MaxRecordBytes+1 && p[0] != mysql.COM_STMT_SEND_LONG_DATA { // long data: its data is bounded below
		// --max-record-bytes holds for every command, not only for those
		// the proxy reads in several frames: SQL and data beyond it are
		// cut, and the record is not replayable.
		p, truncated = p[:s.opts.MaxRecordBytes+1], true
	}
	if truncated {
		s.rec.Flags |= store.FlagTruncated
	}
	if err := s.parseCommand(p); err != nil {
		s.rec.Flags |= store.FlagNotReplayable
		s.rec.Kind = store.KindOther
		s.pc = pending{}
		s.perr = err
	}
	switch s.cmd {
	case mysql.COM_STMT_SEND_LONG_DATA, mysql.COM_STMT_CLOSE:
		return Done // no answer
	case mysql.COM_QUIT:
		s.rec.Kind = store.KindQuit
		return Done
	case mysql.COM_QUERY, mysql.COM_PROCESS_INFO:
		s.phase = phaseResult
	case mysql.COM_STMT_EXECUTE, wire.ComStmtBulkExecute:
		s.phase, s.binary = phaseResult, true
	case mysql.COM_STMT_PREPARE:
		s.phase = phasePrepare
		s.lastPrepared = 0 // until the server says
	case mysql.COM_STMT_FETCH:
		s.phase, s.binary = phaseRows, true
		s.rec.Resp.Kind = store.RespResultSet
	case mysql.COM_CHANGE_USER:
		s.phase = phaseAuth
	case mysql.COM_FIELD_LIST:
		s.phase = phaseFieldList
	case mysql.COM_STATISTICS:
		s.phase = phaseStatistics
	case mysql.COM_BINLOG_DUMP, mysql.COM_BINLOG_DUMP_GTID, mysql.COM_TABLE_DUMP, mysql.COM_CONNECT_OUT:
		s.rec.Kind, s.rec.Flags = store.KindOther, s.rec.Flags|store.FlagNotReplayable
		return Raw
	default:
		// INIT_DB, PING, RESET_CONNECTION, STMT_RESET and the rest
		// (commands the server does not know included) are answered with
		// one packet: OK, EOF or ERR.
		s.phase = phaseSimple
	}
	return Read
}

// ParseErr says why the last command could not be decoded for recording
// (it is then recorded as not replayable), or nil.
func (s *Session) ParseErr() error { return s.perr }

// Server takes one frame of the server's answer (a packet's payload, or
// for a packet of MaxPayload bytes or more each of its frames in turn)
// and says what follows.
func (s *Session) Server(p []byte) Step {
	if s.cont {
		// A continuation of a packet of MaxPayload bytes or more: only a
		// row's frames matter (its bytes and checksum).
		if s.row {
			s.resp.Bytes += uint64(len(p) + 4)
			if s.opts.Checksums {
				s.h.Write(p)
			}
		}
		if len(p) == wire.MaxPayload {
			return Read
		}
		s.cont = false
		if s.row {
			s.row = false
			s.endRow()
		}
		return s.then
	}
	step := s.packet(p)
	if len(p) == wire.MaxPayload && step != Malformed {
		s.cont, s.then = true, step
		return Read
	}
	return step
}

// packet decodes a packet's first frame.
func (s *Session) packet(p []byte) Step {
	if len(p) == 0 && (s.phase == phaseResult || s.phase == phaseAuth) {
		return s.malformed(errors.New("empty response packet"))
	}
	head := byte(0x01) // no header of note (an empty packet)
	if len(p) > 0 {
		head = p[0]
	}
	switch s.phase {
	case phaseResult:
		switch p[0] {
		case wire.HeaderOK, wire.HeaderErr:
			s.summarize(p, s.resp)
			if p[0] == wire.HeaderOK && s.pc.useDB != "" && s.resp == &s.rec.Resp {
				s.st.Schema = s.pc.useDB
			}
			return s.resultEnd()
		case wire.HeaderLocalInfile:
			// MariaDB asks for the file in answer to a query or to the
			// execute of a prepared LOAD DATA LOCAL alike.
			s.phase = phaseInfile
			s.rec.Flags |= store.FlagNotReplayable
			return SendFile
		}
		n, metadata, err := wire.ParseColumnCount(p, s.st.Caps&wire.MariaDBClientCacheMetadata != 0)
		if err != nil && s.learnMeta {
			if n, metadata, err = wire.ParseColumnCount(p, true); err == nil {
				s.st.Caps |= wire.MariaDBClientCacheMetadata
			}
		}
		if err == nil {
			s.learnMeta = false
		}
		if err != nil {
			return s.malformed(fmt.Errorf("result set header: %w", err))
		}
		s.resp.Kind, s.resp.Columns = store.RespResultSet, uint32(n)
		s.resp.Bytes = uint64(len(p) + 4)
		s.left = int(n)
		if !metadata {
			s.left = 0 // MariaDB metadata caching: the client has the definitions
		}
		s.afterDefs()
		return Read
	case phaseInfile:
		s.summarize(p, s.resp)
		return s.resultEnd()
	case phaseDefs:
		s.resp.Bytes += uint64(len(p) + 4)
		s.left--
		s.afterDefs()
		return Read
	case phaseDefsEOF:
		if s.learnEOF {
			s.learnedEOF(isEOF(p))
			if !s.eof {
				s.phase = phaseRows
				return s.packet(p)
			}
		}
		s.resp.Bytes += uint64(len(p) + 4)
		e, err := wire.ParseEOF(p)
		if err != nil {
			return s.malformed(fmt.Errorf("EOF after column definitions: %w", err))
		}
		if s.cmd == mysql.COM_STMT_EXECUTE && e.Status&mysql.SERVER_STATUS_CURSOR_EXISTS != 0 {
			// Rows come with COM_STMT_FETCH. The server's word, not the
			// execute's cursor flag: an execute the recorder could not
			// decode (of a statement prepared before it followed the
			// session, or cut) opens one too, and waiting for rows the
			// server will not send would hang the relay.
			s.resp.Status = e.Status
			return s.resultEnd()
		}
		s.phase = phaseRows
		return Read
	case phaseRows:
		s.resp.Bytes += uint64(len(p) + 4)
		switch {
		case head == wire.HeaderErr:
			// An error in the middle of the rows ends the statement.
			s.summarize(p, s.resp)
			return Done
		case s.binary && head == wire.HeaderEOF, wire.IsResultEnd(p, !s.eof):
			var end store.Response
			s.summarize(p, &end)
			s.resp.Status, s.resp.Warnings = end.Status, end.Warnings
			s.resp.HasChecksums = s.opts.Checksums
			if s.cmd == mysql.COM_STMT_FETCH {
				return Done
			}
			return s.resultEnd()
		}
		s.resp.Rows++
		if s.opts.Checksums {
			s.h.Reset()
			s.h.Write(p)
		}
		if len(p) == wire.MaxPayload { // a row of 16 MiB or more
			s.row = true
			return Read
		}
		s.endRow()
		return Read
	case phasePrepare:
		if head == wire.HeaderErr {
			s.summarize(p, &s.rec.Resp)
			return Done
		}
		ok, err := wire.ParsePrepareOK(p)
		if err != nil {
			return s.malformed(fmt.Errorf("prepare response: %w", err))
		}
		s.rec.StmtID = ok.StmtID
		s.rec.Resp = store.Response{Kind: store.RespOK, Columns: uint32(ok.Columns), Params: ok.Params, Warnings: ok.Warnings}
		// A statement that can carry a password keeps its parameters out
		// of the capture, literals to mask or not (SET PASSWORD =
		// PASSWORD(?) has none).
		secret := s.rec.Flags&store.FlagMasked != 0 || s.pc.secret
		s.lastPrepared = ok.StmtID
		s.stmts[ok.StmtID] = &stmt{sql: s.rec.SQL, masked: s.rec.Flags&store.FlagMasked != 0, broken: s.rec.Flags&(store.FlagTruncated|store.FlagNotReplayable) != 0, columns: int(ok.Columns),
			params: int(ok.Params), secret: secret, diag: s.pc.diag}
		s.left = 0
		for _, n := range []uint16{ok.Params, ok.Columns} {
			if n > 0 {
				s.left += int(n)
				if s.eof {
					s.left++
				}
			}
		}
		s.phase = phasePrepareRest
		s.prepParams, s.prepSeen = int(ok.Params), 0
		if s.left == 0 {
			return Done
		}
		return Read
	case phasePrepareRest:
		if s.learnEOF {
			// Definitions were counted without EOF packets.
			if !isEOF(p) {
				s.prepSeen++
				if s.left--; s.left == 0 {
					return Done // an EOF may follow: Stray takes it
				}
				return Read
			}
			s.learnedEOF(true)
			if s.prepSeen == s.prepParams && s.left > 0 {
				s.left++ // the parameters' EOF; the columns' is to come
				return Read
			}
			return Done
		}
		if s.left--; s.left == 0 {
			return Done
		}
		return Read
	case phaseSimple:
		s.summarize(p, &s.rec.Resp)
		if s.rec.Resp.Kind == store.RespOK {
			switch s.cmd {
			case mysql.COM_INIT_DB:
				s.st.Schema = s.pc.useDB
			case mysql.COM_RESET_CONNECTION:
				clear(s.stmts)
				s.lastPrepared = 0
			case mysql.COM_SET_OPTION:
				if on, ok := MultiStatementsOption(&s.rec); ok {
					s.st.Caps = withMultiStatements(s.st.Caps, on)
				}
			}
		}
		return Done
	case phaseStatistics:
		s.rec.Resp.Kind = store.RespOK
		return Done
	case phaseFieldList:
		if head == wire.HeaderErr || wire.IsResultEnd(p, !s.eof) {
			s.summarize(p, &s.rec.Resp)
			return Done
		}
		return Read
	case phaseAuth:
		switch head {
		case wire.HeaderOK:
			s.rec.Resp.Kind = store.RespOK
			s.st.User, s.st.Schema = s.rec.User, s.rec.Schema
			clear(s.stmts)
			s.lastPrepared = 0
			return Done
		case wire.HeaderErr:
			msg := "malformed ERR"
			if e, err := wire.ParseErr(p); err == nil {
				msg = fmt.Sprintf("%d (%s) %s", e.Code, e.State, e.Message)
			}
			s.rec.Resp = store.Response{Kind: store.RespError, Message: msg}
			return Done
		case 0x01:
			// AuthMoreData. caching_sha2_password's "fast auth success"
			// (0x01 0x03) is followed by OK without a client reply.
			if len(p) == 2 && p[1] == 0x03 {
				return Read
			}
		}
		return ClientTurn
	}
	return s.malformed(fmt.Errorf("a server packet where no answer was expected (%s)", commandName(s.cmd)))
}

// afterDefs moves past the column definitions once none is left.
func (s *Session) afterDefs() {
	switch {
	case s.left > 0:
		s.phase = phaseDefs
	case s.eof || s.learnEOF:
		s.phase = phaseDefsEOF
	default:
		// Rows follow, or (with a cursor) an end packet carrying
		// SERVER_STATUS_CURSOR_EXISTS, after which rows come with fetches.
		s.phase = phaseRows
	}
}

// endRow folds a whole row's checksum in.
func (s *Session) endRow() {
	if s.opts.Checksums {
		rs := wire.RowSums{Ordered: s.resp.Ordered, Unordered: s.resp.Unordered}
		rs.Add(s.h.Sum64())
		s.resp.Ordered, s.resp.Unordered = rs.Ordered, rs.Unordered
	}
}

// resultEnd ends one result of a query or execute: Done, unless the
// server said more follow (a multi-statement query, a procedure's
// results), each of which the record keeps in Resp.More.
func (s *Session) resultEnd() Step {
	if s.resp.Kind == store.RespError || s.resp.Status&mysql.SERVER_MORE_RESULTS_EXISTS == 0 {
		return Done
	}
	s.rec.Resp.More = append(s.rec.Resp.More, store.Response{})
	s.resp = &s.rec.Resp.More[len(s.rec.Resp.More)-1]
	s.phase = phaseResult
	return Read
}

func (s *Session) malformed(err error) Step {
	s.err = err
	return Malformed
}

// End records the command, which ended at at.
func (s *Session) End(at time.Time) {
	s.rec.Duration = at.Sub(s.rec.Start)
	if s.rec.Kind == store.KindQuit {
		s.quit = true
	}
	s.record(&s.rec)
	s.noteState()
	if s.opts.Commits {
		s.noteCommit()
	}
}

// MultiStatementsOption reports whether rec is a COM_SET_OPTION that turns
// the session's multi-statement texts on or off (mysql_set_server_option:
// PHP's mysqli_multi_query sends it around each call), and which.
func MultiStatementsOption(rec *store.Record) (on, ok bool) {
	if rec.Kind != store.KindOther || rec.Command != mysql.COM_SET_OPTION || len(rec.Data) < 2 || rec.Data[1] != 0 || rec.Data[0] > 1 {
		return false, false
	}
	return rec.Data[0] == 0, true // MYSQL_OPTION_MULTI_STATEMENTS_ON is 0
}

// withMultiStatements returns caps with CLIENT_MULTI_STATEMENTS on or off.
func withMultiStatements(caps uint64, on bool) uint64 {
	if on {
		return caps | uint64(mysql.CLIENT_MULTI_STATEMENTS)
	}
	return caps &^ uint64(mysql.CLIENT_MULTI_STATEMENTS)
}

// MayHaveWritten reports whether a record may have changed data: commands
// a capture lost (store.FlagLost) may have; a statement did if its answer
// says it changed rows, or if it is DDL (which changes none); one whose
// answer was lost (store.FlagAnswerLost) may have. Replay asks it of the
// records it skips, a packet capture of a session's commands before it
// joined.
func MayHaveWritten(r *store.Record) bool {
	switch {
	case r.Flags&store.FlagLost != 0:
		return true
	case r.Kind != store.KindQuery && r.Kind != store.KindExecute:
		return false
	case r.Flags&store.FlagAnswerLost != 0:
		return true
	case r.Resp.Kind != store.RespOK && r.Resp.Kind != store.RespResultSet:
		return false
	case r.Resp.AffectedRows > 0:
		return true
	}
	for _, m := range r.Resp.More {
		if m.AffectedRows > 0 {
			return true
		}
	}
	if r.Kind == store.KindQuery {
		in := sqlinfo.Analyze(r.SQL)
		return in.TableDDL || in.ImplicitCommit && !in.Begin && !in.Set && !in.End
	}
	return false
}

// EndLost records the command, which ended at at without its whole
// answer seen (a packet capture lost bytes of it, or ended first): its
// response is none and it is marked store.FlagAnswerLost.
func (s *Session) EndLost(at time.Time) {
	s.rec.Resp = store.Response{}
	s.rec.Flags |= store.FlagAnswerLost
	s.cont, s.row = false, false
	s.End(at)
}

// noteCommit follows, from the server's answers, whether a transaction
// that wrote has ended: a statement that changed rows (or DDL, which
// changes none) makes the session's transaction one that wrote; an answer
// whose status says no transaction is open ends it. Only statements'
// answers say where the transaction is (a prepare's OK has no status).
// Statements that wrote nothing make no binary-log transaction, and a
// false alarm costs whoever asks only a question the server answers with
// the GTID it gave before.
func (s *Session) noteCommit() {
	if s.rec.Kind != store.KindQuery && s.rec.Kind != store.KindExecute {
		return
	}
	r := &s.rec.Resp
	if r.Kind != store.RespOK && r.Kind != store.RespResultSet {
		return
	}
	wroteBefore := s.wrote
	status, self := AnswerStatus(r)
	s.wrote = s.wrote || self
	if s.rec.Kind == store.KindQuery && r.Kind == store.RespOK && r.AffectedRows == 0 && len(r.More) == 0 {
		in := sqlinfo.Analyze(s.rec.SQL)
		switch {
		case in.XAPrepare && wroteBefore:
			// XA PREPARE logs the transaction's writes under a GTID of
			// its own (MariaDB 10.5 and later, MySQL 5.7.7 and later),
			// and its XA COMMIT or ROLLBACK under another: the
			// transaction goes on being one that wrote, for that.
			s.ended, s.endedSelf = true, false
			return
		case in.Verb == "XA" && in.End:
			// An XA COMMIT or ROLLBACK of a prepared transaction is
			// logged under a GTID of its own, also when another session
			// prepared it (a transaction manager's recovery): asked for
			// (an XA ROLLBACK of one never prepared logs nothing: the
			// question hears the last GTID again).
			s.wrote = true
		case wroteBefore && (in.Begin || in.Set && in.SetAutocommit == '1' || in.End && in.Chain):
			// It committed the transaction that wrote and logged nothing
			// itself (BEGIN, SET autocommit=1, COMMIT AND CHAIN): the
			// server's last GTID is that transaction's, though a new one
			// may be open now.
			s.wrote, s.ended, s.endedSelf = false, true, false
			return
		case in.TempTable:
			// CREATE or DROP TEMPORARY TABLE commits nothing, and is
			// logged under a GTID of its own in statement-based or mixed
			// binary logs (not in row-based ones: then the question only
			// hears the last GTID again): asked for, never taken for a
			// write that bypassed the proxy.
			s.wrote, self = true, true
		case in.ImplicitCommit && !in.Begin && !in.Set:
			if wroteBefore {
				// DDL that committed a transaction that wrote: the server
				// logged two, and only the DDL's GTID can be asked for.
				s.implicitLost++
			}
			s.wrote, self = true, true // DDL (CREATE, DROP, ALTER, GRANT …) is logged with no rows
		}
	}
	if s.wrote && status&mysql.SERVER_STATUS_IN_TRANS == 0 {
		s.wrote, s.ended, s.endedSelf = false, true, self
	}
}

// AnswerStatus returns the server status an answer of one or more
// results ends with, and whether any of them changed rows. An ERR that
// ends a multi-statement answer carries no status (0, which would read as
// "autocommit off, no transaction"): the last OK or EOF before it says
// where the session stands.
func AnswerStatus(r *store.Response) (status uint16, changed bool) {
	status, changed = r.Status, r.AffectedRows > 0
	for i := range r.More {
		m := &r.More[i]
		changed = changed || m.AffectedRows > 0
		if m.Kind != store.RespError {
			status = m.Status
		}
	}
	return status, changed
}

// ImplicitLost counts the transactions that wrote and that a DDL
// statement committed implicitly (Options.Commits): the server gave them a
// GTID nobody can ask for, so a list of the binary log's transactions that
// did not pass through the capture may name them.
func (s *Session) ImplicitLost() int { return s.implicitLost }

// ResetImplicitLost starts ImplicitLost's count afresh (a new capture).
func (s *Session) ResetImplicitLost() { s.implicitLost = 0 }

// ReadsDiagnostics reports whether the command in p (not yet given to
// Command) may read what the previous statement left in the session's
// diagnostics: ROW_COUNT(), FOUND_ROWS(), its warnings and errors
// (SHOW WARNINGS, GET DIAGNOSTICS, @@warning_count), Last_query_cost. A
// prepare counts by its SQL, an execute by its statement's (one prepared
// before the session was seen may). Any statement sent
// to the server before it would change them: whoever asks the server
// something on the session's connection asks after such a command.
func (s *Session) ReadsDiagnostics(p []byte) bool {
	if len(p) == 0 {
		return false
	}
	switch p[0] {
	case mysql.COM_QUERY, mysql.COM_STMT_PREPARE:
		return readsDiagnostics(p[1:])
	case mysql.COM_STMT_EXECUTE, wire.ComStmtBulkExecute:
		if len(p) < 5 {
			return false
		}
		_, st := s.stmtOf(uint32(p[1]) | uint32(p[2])<<8 | uint32(p[3])<<16 | uint32(p[4])<<24)
		return st == nil || st.diag // unknown: it may
	}
	return false
}

// ReadsDiagnosticsText reports whether a statement's text may read what
// the statement before it left (ROW_COUNT(), FOUND_ROWS(), the warnings):
// whoever sends something of its own before it changes that.
func ReadsDiagnosticsText(sql string) bool { return readsDiagnostics(sql) }

// diagnosticsWords are what a statement that reads the diagnostics names.
var diagnosticsWords = []string{"row_count", "found_rows", "warnings", "errors", "diagnostics", "warning_count", "error_count", "last_query_cost"}

// readsDiagnostics reports whether sql names one of diagnosticsWords, in
// any case (a false alarm only makes a question wait one command).
func readsDiagnostics[T string | []byte](sql T) bool {
	for _, w := range diagnosticsWords {
		if containsFold(sql, w) {
			return true
		}
	}
	return false
}

// containsFold reports whether s holds lower (ASCII, lower case) in any case.
func containsFold[T string | []byte](s T, lower string) bool {
	for i := 0; i+len(lower) <= len(s); i++ {
		j := 0
		for ; j < len(lower); j++ {
			c := s[i+j]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != lower[j] {
				break
			}
		}
		if j == len(lower) {
			return true
		}
	}
	return false
}

// Commit is a transaction that wrote, ended by a captured command.
type Commit struct {
	Seq uint64 // the command's record in the capture (0 if it was dropped)
	// End is when the command's answer was complete: the server had
	// committed. From is the earliest the server can have committed with
	// every write of the transaction done (and its rows locked until the
	// commit): the command's start when it wrote nothing itself (a COMMIT
	// after the transaction's writes), else End (an autocommit write,
	// whose own rows may be written as late as its answer).
	From, End time.Time
}

// CommitEnded reports (once) whether the command just ended closed a
// transaction that wrote, with Options.Commits: the moment to ask the
// server for its GTID.
func (s *Session) CommitEnded() (Commit, bool) {
	if !s.ended {
		return Commit{}, false
	}
	s.ended = false
	c := Commit{Seq: s.rec.Seq, From: s.rec.Start, End: s.rec.Start.Add(s.rec.Duration)}
	if s.endedSelf {
		c.From = c.End
	}
	return c, true
}

// Close records the session's end when it ended without a COM_QUIT (the
// client or the server went away), at at.
func (s *Session) Close(at time.Time) {
	if !s.quit {
		s.quit = true
		s.record(&store.Record{Session: s.id, Start: at, Kind: store.KindQuit})
	}
}

// record hands r to the sink. The server's message for a secret statement
// can quote it, the password included (a syntax error "near 'IDENTIFEID
// BY …'"): such a record keeps the code and state, never the text.
func (s *Session) record(r *store.Record) {
	if r.Flags&store.FlagMasked != 0 {
		r.Resp.Message = redacted(r.Resp.Message)
		for i := range r.Resp.More {
			r.Resp.More[i].Message = redacted(r.Resp.More[i].Message)
		}
	}
	if s.sink != nil {
		s.sink.Record(r)
	}
}

// redacted replaces an error message of a secret statement.
func redacted(msg string) string {
	if msg == "" {
		return ""
	}
	return "(message of a statement with a secret, not stored)"
}

// summarize reads an OK, ERR or EOF packet into resp.
func (s *Session) summarize(p []byte, resp *store.Response) {
	if len(p) == 0 {
		return
	}
	switch {
	case p[0] == wire.HeaderErr:
		resp.Kind = store.RespError
		if e, err := wire.ParseErr(p); err == nil {
			resp.ErrCode, resp.SQLState, resp.Message = e.Code, e.State, e.Message
		}
	case p[0] == wire.HeaderOK || p[0] == wire.HeaderEOF && len(p) >= 7:
		resp.Kind = store.RespOK
		if o, err := wire.ParseOK(p, s.st.Caps); err == nil {
			resp.AffectedRows, resp.InsertID, resp.Status, resp.Warnings = o.AffectedRows, o.InsertID, o.Status, o.Warnings
		}
	case p[0] == wire.HeaderEOF:
		resp.Kind = store.RespOK
		if e, err := wire.ParseEOF(p); err == nil {
			resp.Status, resp.Warnings = e.Status, e.Warnings
		}
	default:
		resp.Kind = store.RespOK
	}
}

// parseCommand fills s.rec from the command payload.
func (s *Session) parseCommand(p []byte) error {
	r := &s.rec
	r.Kind = CommandKind(p[0])
	truncated := r.Flags&store.FlagTruncated != 0
	switch p[0] {
	case mysql.COM_QUERY, mysql.COM_STMT_PREPARE:
		sql := string(p[1:])
		if p[0] == mysql.COM_QUERY {
			s.pc.useDB, _ = sqlinfo.UseSchema(sql)
			if sqlinfo.IsLoadDataLocal(sql) {
				r.Flags |= store.FlagNotReplayable
			}
		}
		if masked, ok := sqlinfo.MaskSecrets(sql); ok {
			sql = masked
			r.Flags |= store.FlagMasked
		} else if p[0] == mysql.COM_STMT_PREPARE && sqlinfo.CarriesSecret(sql) {
			s.pc.secret = true
		}
		if p[0] == mysql.COM_STMT_PREPARE {
			// Whether or not GTIDs are asked now (Options.Commits): a
			// session prepares before it joins a capture that asks.
			s.pc.diag = readsDiagnostics(sql)
		}
		r.SQL = sql
		if truncated {
			r.Flags |= store.FlagNotReplayable
		}
	case mysql.COM_INIT_DB:
		r.Schema = string(p[1:])
		s.pc.useDB = r.Schema
	case mysql.COM_STMT_EXECUTE:
		st, err := s.executed(p)
		if st == nil || err != nil {
			return err
		}
		var longData func(int) bool
		if st.longData != nil {
			longData = func(i int) bool { return i < len(st.longData) && st.longData[i] }
		}
		e := &s.exec
		err = e.Parse(p, st.params, st.types, longData)
		switch {
		case errors.Is(err, wire.ErrUnknownParamTypes):
			r.Flags |= store.FlagNotReplayable
		case err != nil && truncated:
			r.Flags |= store.FlagNotReplayable
		case err != nil:
			return err
		default:
			if e.NewParamsBound {
				st.types = e.Types
				r.Flags |= store.FlagNewParamsBound
			}
			r.CursorType = e.CursorType
			if st.secret {
				r.Flags |= store.FlagMasked
			} else {
				s.params = Params(s.params[:0], e.Params)
				r.Params = s.params
			}
		}
		st.longData = nil // long data applies to one execute
	case wire.ComStmtBulkExecute:
		// One command for many rows: recorded as one execute whose Data
		// is the command after its statement id — flags, the parameter
		// types in force (always sent: the statement a replay runs it on
		// has bound none) and the rows — for replay to send as it is.
		st, err := s.executed(p)
		if st == nil || err != nil {
			return err
		}
		e, err := wire.ParseBulkExecute(p, st.params, st.types)
		switch {
		case errors.Is(err, wire.ErrUnknownParamTypes):
			r.Flags |= store.FlagNotReplayable
		case err != nil && truncated:
			r.Flags |= store.FlagNotReplayable
		case err != nil:
			return err
		default:
			if e.Flags&wire.BulkSendTypes != 0 {
				st.types = e.Types
				r.Flags |= store.FlagNewParamsBound
			}
			if st.secret {
				r.Flags |= store.FlagMasked | store.FlagNotReplayable
				break
			}
			e.Flags |= wire.BulkSendTypes
			r.Data = e.Append(r.Data[:0])[5:]
		}
	case mysql.COM_STMT_SEND_LONG_DATA:
		l, err := wire.ParseLongData(p)
		if err != nil {
			return err
		}
		var st *stmt
		r.StmtID, st = s.stmtOf(l.StmtID)
		r.ParamIndex = l.Param
		if st == nil {
			// A statement the session does not know (prepared before it
			// was followed, or its prepare's answer lost) may take a
			// password (ALTER USER ? IDENTIFIED BY ?): its data is not
			// kept, so the record cannot be replayed.
			r.Flags |= store.FlagMasked | store.FlagNotReplayable
			break
		}
		if int(l.Param) < st.params {
			if st.longData == nil {
				st.longData = make([]bool, st.params)
			}
			st.longData[l.Param] = true
			if st.secret {
				r.Flags |= store.FlagMasked
				break
			}
		}
		keep := len(l.Data)
		if s.opts.MaxRecordBytes > 0 {
			keep = min(keep, s.opts.MaxRecordBytes) // 0 keeps everything
		}
		r.Data = append(r.Data[:0], l.Data[:keep]...)
		if keep < len(l.Data) || truncated {
			r.Flags |= store.FlagTruncated | store.FlagNotReplayable
		}
	case mysql.COM_STMT_CLOSE, mysql.COM_STMT_RESET, mysql.COM_STMT_FETCH:
		c, err := wire.ParseStmtCommand(p)
		if err != nil {
			return err
		}
		var st *stmt
		r.StmtID, st = s.stmtOf(c.StmtID)
		r.FetchRows = c.Rows
		if st != nil {
			switch c.Command {
			case mysql.COM_STMT_CLOSE:
				delete(s.stmts, r.StmtID)
			case mysql.COM_STMT_RESET:
				st.longData = nil
			}
		}
	case mysql.COM_CHANGE_USER:
		cu, err := wire.ParseChangeUser(p, s.st.Caps)
		if err != nil {
			return err
		}
		r.User, r.Schema = string(cu.User), string(cu.Database)
	case mysql.COM_QUIT, mysql.COM_PING, mysql.COM_RESET_CONNECTION:
	default:
		if keepsPayload(p[0]) {
			n := min(len(p)-1, 256)
			r.Data = append(r.Data[:0], p[1:1+n]...)
		}
	}
	return nil
}

// keepsPayload reports whether the first bytes of a command the recorder
// does not replay are kept (for inspect): only of commands whose payload
// holds no secret. COM_REGISTER_SLAVE carries a replica's report
// password, and a command unknown here may carry anything.
func keepsPayload(cmd byte) bool {
	switch cmd {
	case mysql.COM_SLEEP, mysql.COM_FIELD_LIST, mysql.COM_CREATE_DB, mysql.COM_DROP_DB, mysql.COM_REFRESH, mysql.COM_SHUTDOWN,
		mysql.COM_STATISTICS, mysql.COM_PROCESS_INFO, mysql.COM_PROCESS_KILL, mysql.COM_DEBUG, mysql.COM_TIME,
		mysql.COM_DELAYED_INSERT, mysql.COM_TABLE_DUMP, mysql.COM_SET_OPTION, mysql.COM_DAEMON:
		return true
	}
	return false
}

// executed reads the statement id of an execute or bulk execute p into
// the record and returns the statement; nil when it is unknown to us (and
// so to the server, which answers ERR).
func (s *Session) executed(p []byte) (*stmt, error) {
	if len(p) < 5 {
		return nil, fmt.Errorf("%w: %s of %d bytes", wire.ErrMalformed, commandName(p[0]), len(p))
	}
	id, st := s.stmtOf(uint32(p[1]) | uint32(p[2])<<8 | uint32(p[3])<<16 | uint32(p[4])<<24)
	s.pc.st = st
	s.rec.StmtID = id
	return st, nil
}

// lastStmtID is the statement id by which MariaDB's statement commands
// name the connection's last prepared statement (a client may send the
// prepare and its execute together: Connector/C's execute direct).
const lastStmtID = 0xffffffff

// stmtOf returns the id a statement command names, -1 resolved to the
// last prepared statement's (the id its prepare was recorded with, which
// replay knows), and the statement; nil when unknown.
func (s *Session) stmtOf(id uint32) (uint32, *stmt) {
	if id == lastStmtID && s.lastPrepared != 0 {
		id = s.lastPrepared
	}
	return id, s.stmts[id]
}

// CommandKind maps a command byte to the record kind.
func CommandKind(c byte) store.Kind {
	switch c {
	case mysql.COM_QUERY:
		return store.KindQuery
	case mysql.COM_STMT_PREPARE:
		return store.KindPrepare
	case mysql.COM_STMT_EXECUTE, wire.ComStmtBulkExecute:
		return store.KindExecute
	case mysql.COM_STMT_SEND_LONG_DATA:
		return store.KindLongData
	case mysql.COM_STMT_CLOSE:
		return store.KindClose
	case mysql.COM_STMT_RESET:
		return store.KindReset
	case mysql.COM_STMT_FETCH:
		return store.KindFetch
	case mysql.COM_INIT_DB:
		return store.KindInitDB
	case mysql.COM_CHANGE_USER:
		return store.KindChangeUser
	case mysql.COM_RESET_CONNECTION:
		return store.KindResetConnection
	case mysql.COM_PING:
		return store.KindPing
	case mysql.COM_QUIT:
		return store.KindQuit
	}
	return store.KindOther
}

// commandName names a command byte for messages.
func commandName(c byte) string {
	if k := CommandKind(c); k != store.KindOther {
		return k.String()
	}
	return fmt.Sprintf("command 0x%02x", c)
}
