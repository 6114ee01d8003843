package proxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/tandemdb/tandem/capture"
	"github.com/tandemdb/tandem/sqlinfo"
	"github.com/tandemdb/tandem/store"
	"github.com/tandemdb/tandem/wire"
)

// stmt is what the proxy must remember of a prepared statement to parse
// its executes.
type stmt struct {
	params   int
	types    []wire.ParamType
	longData []bool
	secret   bool // its SQL can carry a password: parameters are not recorded
}

// session relays one client connection. Its goroutine owns everything in it.
type session struct {
	p         *Proxy
	id        uint64
	client    *wire.Conn
	backend   *wire.Conn
	clientTLS bool

	caps         uint64
	collation    byte // the handshake's
	deprecateEOF bool
	user, schema string
	stmts        map[uint32]*stmt
	rec          store.Record
	cmdBuf       []byte
	quitRecorded bool
	// errSeq is the sequence id an ERR from the proxy itself must carry to
	// be read by the client at this point of the conversation.
	errSeq byte
	// idleSince is when the session began waiting for its client's next
	// command (unix ns; 0 while a command is under way): the idle watch
	// checks the backend of sessions idle for a while.
	idleSince atomic.Int64
	// backendClosedIdle: the idle watch found the backend gone and closed
	// the client's side.
	backendClosedIdle atomic.Bool
}

// serveCommands relays commands until the client quits or a side fails.
func (s *session) serveCommands() error {
	s.errSeq = 1 // an answer to a command
	for {
		s.idleSince.Store(time.Now().UnixNano())
		seq, p, err := s.client.ReadFrame()
		s.idleSince.Store(0)
		if err != nil {
			if s.backendClosedIdle.Load() {
				return fail(reasonBackendGone, errors.New("the backend closed the idle connection"), nil)
			}
			if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fail(reasonClientGone, err, nil)
		}
		start := time.Now()
		if len(p) == 0 {
			return fail(reasonMalformed, errors.New("empty command packet"), proxyErr(1047, "08S01", "empty command packet"))
		}
		cmd := p[0]
		s.rec = store.Record{Session: s.id, Start: start, Schema: s.schema, Command: cmd}
		full := p
		if len(p) == wire.MaxPayload {
			// A command of 16 MiB or more: relay every frame, keep a bounded copy.
			if full, err = s.relayLongCommand(seq, p); err != nil {
				return err
			}
		} else if err := s.backend.WriteFrame(seq, p); err != nil {
			return s.backendErr(err)
		}
		s.p.metrics.commands.WithLabelValues(commandKind(cmd).String()).Inc()

		// Parse what the client sent before the backend's answer can reuse
		// the frame buffer.
		// A command the proxy cannot parse for recording is relayed all
		// the same (the server decides what is malformed) and recorded as
		// not replayable.
		pending, err := s.parseCommand(full)
		if err != nil {
			s.rec.Flags |= store.FlagNotReplayable
			s.rec.Kind = store.KindOther
			pending = pendingCmd{}
			s.p.log.Debug("command not parsed for recording; relayed", "session", s.id, "command", commandName(cmd), "err", err)
		}
		if err := s.backend.Flush(); err != nil {
			return s.backendErr(err)
		}
		if cmd == mysql.COM_QUIT {
			s.rec.Kind = store.KindQuit
			s.record(start)
			s.quitRecorded = true
			return nil
		}
		if err := s.relayResponse(cmd, pending); err != nil {
			return err
		}
		if err := s.client.Flush(); err != nil {
			return fail(reasonClientGone, err, nil)
		}
		s.p.metrics.roundtrip.WithLabelValues(commandKind(cmd).String()).Observe(time.Since(start).Seconds())
		s.record(start)
	}
}

// relayLongCommand forwards a multi-frame command and returns its first
// MaxRecordBytes; a longer command marks the record truncated.
func (s *session) relayLongCommand(seq byte, p []byte) ([]byte, error) {
	limit := s.p.cfg.MaxRecordBytes
	s.cmdBuf = s.cmdBuf[:0]
	total := 0
	for {
		if err := s.backend.WriteFrame(seq, p); err != nil {
			return nil, fail(reasonBackendGone, err, proxyErr(1105, "08S01", "backend connection lost"))
		}
		total += len(p)
		if room := limit - len(s.cmdBuf); room > 0 {
			s.cmdBuf = append(s.cmdBuf, p[:min(len(p), room)]...)
		}
		if len(p) < wire.MaxPayload {
			break
		}
		var err error
		if seq, p, err = s.client.ReadFrame(); err != nil {
			return nil, fail(reasonClientGone, err, nil)
		}
	}
	if total > limit {
		s.rec.Flags |= store.FlagTruncated
	}
	return s.cmdBuf, nil
}

// pendingCmd carries what the response relay needs to know of the command.
type pendingCmd struct {
	stmtID uint32
	st     *stmt
	sql    string
	useDB  string // USE's schema, applied if the server says OK
	cursor bool
}

// parseCommand fills s.rec from the command payload.
func (s *session) parseCommand(p []byte) (pendingCmd, error) {
	var pc pendingCmd
	r := &s.rec
	r.Kind = commandKind(p[0])
	truncated := r.Flags&store.FlagTruncated != 0
	switch p[0] {
	case mysql.COM_QUERY, mysql.COM_STMT_PREPARE:
		sql := string(p[1:])
		pc.sql = sql
		if masked, ok := sqlinfo.MaskSecrets(sql); ok {
			sql = masked
			r.Flags |= store.FlagMasked
		}
		r.SQL = sql
		if truncated {
			r.Flags |= store.FlagNotReplayable
		}
		if p[0] == mysql.COM_QUERY {
			pc.useDB, _ = sqlinfo.UseSchema(pc.sql)
			if sqlinfo.IsLoadDataLocal(pc.sql) {
				r.Flags |= store.FlagNotReplayable
			}
		}
	case mysql.COM_INIT_DB:
		r.Schema = string(p[1:])
		pc.useDB = r.Schema
	case mysql.COM_STMT_EXECUTE:
		if len(p) < 5 {
			return pc, fmt.Errorf("%w: execute of %d bytes", wire.ErrMalformed, len(p))
		}
		id := uint32(p[1]) | uint32(p[2])<<8 | uint32(p[3])<<16 | uint32(p[4])<<24
		pc.stmtID, pc.st = id, s.stmts[id]
		r.StmtID = id
		if pc.st == nil {
			// Unknown to us (and so to the server): relay; the server answers ERR.
			return pc, nil
		}
		var longData func(int) bool
		if pc.st.longData != nil {
			longData = func(i int) bool { return i < len(pc.st.longData) && pc.st.longData[i] }
		}
		e, err := wire.ParseExecute(p, pc.st.params, pc.st.types, longData)
		switch {
		case errors.Is(err, wire.ErrUnknownParamTypes):
			r.Flags |= store.FlagNotReplayable
		case err != nil && truncated:
			r.Flags |= store.FlagNotReplayable
		case err != nil:
			return pc, err
		default:
			if e.NewParamsBound {
				pc.st.types = e.Types
				r.Flags |= store.FlagNewParamsBound
			}
			r.CursorType = e.CursorType
			pc.cursor = e.CursorType != 0
			if pc.st.secret {
				r.Flags |= store.FlagMasked
			} else {
				r.Params = capture.Params(r.Params[:0], e.Params)
			}
		}
		pc.st.longData = nil // long data applies to one execute
	case mysql.COM_STMT_SEND_LONG_DATA:
		l, err := wire.ParseLongData(p)
		if err != nil {
			return pc, err
		}
		r.StmtID, r.ParamIndex = l.StmtID, l.Param
		if st := s.stmts[l.StmtID]; st != nil && int(l.Param) < st.params {
			if st.longData == nil {
				st.longData = make([]bool, st.params)
			}
			st.longData[l.Param] = true
			if st.secret {
				r.Flags |= store.FlagMasked
				break
			}
		}
		r.Data = append(r.Data[:0], l.Data[:min(len(l.Data), s.p.cfg.MaxRecordBytes)]...)
		if len(l.Data) > s.p.cfg.MaxRecordBytes || truncated {
			r.Flags |= store.FlagTruncated | store.FlagNotReplayable
		}
	case mysql.COM_STMT_CLOSE, mysql.COM_STMT_RESET, mysql.COM_STMT_FETCH:
		c, err := wire.ParseStmtCommand(p)
		if err != nil {
			return pc, err
		}
		r.StmtID, r.FetchRows = c.StmtID, c.Rows
		pc.stmtID = c.StmtID
		if st := s.stmts[c.StmtID]; st != nil {
			switch c.Command {
			case mysql.COM_STMT_CLOSE:
				delete(s.stmts, c.StmtID)
			case mysql.COM_STMT_RESET:
				st.longData = nil
			}
		}
	case mysql.COM_CHANGE_USER:
		cu, err := wire.ParseChangeUser(p, s.caps)
		if err != nil {
			return pc, err
		}
		r.User, r.Schema = string(cu.User), string(cu.Database)
	case mysql.COM_QUIT, mysql.COM_PING, mysql.COM_RESET_CONNECTION:
	default:
		n := min(len(p)-1, 256)
		r.Data = append(r.Data[:0], p[1:1+n]...)
	}
	return pc, nil
}

// record stores the exchange.
func (s *session) record(start time.Time) {
	s.rec.Duration = time.Since(start)
	if s.rec.Flags&store.FlagMasked != 0 {
		// The server's message for a secret statement can quote it, the
		// password included (a syntax error "near 'IDENTIFEID BY …'"):
		// keep the code and state, never the text.
		s.rec.Resp.Message = redacted(s.rec.Resp.Message)
		for i := range s.rec.Resp.More {
			s.rec.Resp.More[i].Message = redacted(s.rec.Resp.More[i].Message)
		}
	}
	s.p.recorder.Record(&s.rec)
}

// redacted replaces an error message of a secret statement.
func redacted(msg string) string {
	if msg == "" {
		return ""
	}
	return "(message of a statement with a secret, not stored)"
}

// commandKind maps a command byte to the record kind.
func commandKind(c byte) store.Kind {
	switch c {
	case mysql.COM_QUERY:
		return store.KindQuery
	case mysql.COM_STMT_PREPARE:
		return store.KindPrepare
	case mysql.COM_STMT_EXECUTE:
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

func commandName(c byte) string {
	if k := commandKind(c); k != store.KindOther {
		return k.String()
	}
	return fmt.Sprintf("command 0x%02x", c)
}
