package proxy

import (
	"errors"
	"fmt"
	"io"

	"github.com/cespare/xxhash/v2"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/tandemdb/tandem/capture"
	"github.com/tandemdb/tandem/store"
	"github.com/tandemdb/tandem/wire"
)

// errRawMode: the command is one the proxy does not parse; the rest of the
// connection is relayed as bytes.
var errRawMode = errors.New("proxy: relaying the rest of the connection unparsed")

// relayResponse relays the backend's answer to a command and summarizes it
// in s.rec.Resp.
func (s *session) relayResponse(cmd byte, pc pendingCmd) error {
	switch cmd {
	case mysql.COM_STMT_SEND_LONG_DATA, mysql.COM_STMT_CLOSE:
		return nil // no response
	case mysql.COM_QUERY:
		return s.relayResults(false, pc)
	case mysql.COM_STMT_EXECUTE:
		return s.relayResults(true, pc)
	case mysql.COM_STMT_PREPARE:
		return s.relayPrepare(pc)
	case mysql.COM_STMT_FETCH:
		return s.relayRows(true, &s.rec.Resp)
	case mysql.COM_CHANGE_USER:
		return s.relayChangeUser()
	case mysql.COM_FIELD_LIST:
		return s.relayFieldList()
	case mysql.COM_STATISTICS:
		_, err := s.relayPacket()
		s.rec.Resp.Kind = store.RespOK
		return err
	case mysql.COM_PROCESS_INFO:
		return s.relayResults(false, pc)
	case mysql.COM_INIT_DB, mysql.COM_PING, mysql.COM_RESET_CONNECTION, mysql.COM_STMT_RESET,
		mysql.COM_PROCESS_KILL, mysql.COM_REFRESH, mysql.COM_SET_OPTION, mysql.COM_DEBUG,
		mysql.COM_SHUTDOWN, mysql.COM_REGISTER_SLAVE:
		p, err := s.relayPacket()
		if err != nil {
			return err
		}
		s.summarizeSimple(p, &s.rec.Resp)
		if s.rec.Resp.Kind == store.RespOK {
			switch cmd {
			case mysql.COM_INIT_DB:
				s.schema = pc.useDB
			case mysql.COM_RESET_CONNECTION:
				s.stmts = map[uint32]*stmt{}
			}
		}
		return nil
	case mysql.COM_BINLOG_DUMP, mysql.COM_BINLOG_DUMP_GTID, mysql.COM_TABLE_DUMP, mysql.COM_CONNECT_OUT:
		return errRawMode
	}
	// Anything else (including commands the server does not know) is
	// answered with one packet: OK, EOF or ERR.
	p, err := s.relayPacket()
	if err != nil {
		return err
	}
	s.summarizeSimple(p, &s.rec.Resp)
	return nil
}

// relayPacket relays one whole backend packet and returns its first frame.
func (s *session) relayPacket() ([]byte, error) {
	seq, p, err := s.backend.ReadFrame()
	if err != nil {
		return nil, s.backendErr(err)
	}
	if err := s.client.WriteFrame(seq, p); err != nil {
		return nil, fail(reasonClientGone, err, nil)
	}
	if len(p) == wire.MaxPayload {
		first := append([]byte(nil), p...)
		for len(p) == wire.MaxPayload {
			if seq, p, err = s.backend.ReadFrame(); err != nil {
				return nil, s.backendErr(err)
			}
			if err := s.client.WriteFrame(seq, p); err != nil {
				return nil, fail(reasonClientGone, err, nil)
			}
		}
		return first, nil
	}
	return p, nil
}

// backendErr ends a session whose backend connection failed mid-command.
// The client's connection is closed without a packet of the proxy's own:
// directly, a client whose server went away (or killed its connection)
// reads the end of the stream and reports 2013 itself, reconnect logic
// included. An ERR from the proxy after rows were relayed, with a sequence
// id of its own, read as 2027 "malformed packet" in libmariadb clients.
func (s *session) backendErr(err error) error {
	return fail(reasonBackendGone, fmt.Errorf("backend: %w", err), nil)
}

// summarizeSimple reads an OK, ERR or EOF packet into resp.
func (s *session) summarizeSimple(p []byte, resp *store.Response) {
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
		if o, err := wire.ParseOK(p, s.caps); err == nil {
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

// relayResults relays the results of COM_QUERY (text rows) or
// COM_STMT_EXECUTE (binary rows): one or more results, each an OK, an ERR,
// a result set, or (COM_QUERY) a LOCAL INFILE exchange.
func (s *session) relayResults(binary bool, pc pendingCmd) error {
	for i := 0; ; i++ {
		resp := &s.rec.Resp
		if i > 0 {
			s.rec.Resp.More = append(s.rec.Resp.More, store.Response{})
			resp = &s.rec.Resp.More[len(s.rec.Resp.More)-1]
		}
		p, err := s.relayPacket()
		if err != nil {
			return err
		}
		if len(p) == 0 {
			return fail(reasonMalformed, errors.New("empty response packet"), nil)
		}
		var status uint16
		switch p[0] {
		case wire.HeaderOK, wire.HeaderErr:
			s.summarizeSimple(p, resp)
			status = resp.Status
			if p[0] == wire.HeaderOK && pc.useDB != "" && i == 0 {
				s.schema = pc.useDB
			}
		case wire.HeaderLocalInfile:
			// MariaDB asks for the file in answer to a query or to the
			// execute of a prepared LOAD DATA LOCAL alike.
			if err := s.relayLocalInfile(resp); err != nil {
				return err
			}
			status = resp.Status
		default:
			n, metadata, err := wire.ParseColumnCount(p, s.caps&wire.MariaDBClientCacheMetadata != 0)
			if err != nil {
				return fail(reasonMalformed, fmt.Errorf("result set header: %w", err), nil)
			}
			resp.Kind, resp.Columns = store.RespResultSet, uint32(n)
			resp.Bytes = uint64(len(p) + 4)
			defs := int(n)
			if !metadata {
				defs = 0 // MariaDB metadata caching: the client has the definitions
			}
			if status, err = s.relayResultSet(binary, defs, resp, pc.cursor); err != nil {
				return err
			}
		}
		if resp.Kind == store.RespError || status&mysql.SERVER_MORE_RESULTS_EXISTS == 0 {
			return nil
		}
	}
}

// relayResultSet relays the column definitions that follow the column count
// (defs of them), the EOF after them unless CLIENT_DEPRECATE_EOF, and rows.
func (s *session) relayResultSet(binary bool, defs int, resp *store.Response, cursor bool) (uint16, error) {
	for i := 0; i < defs; i++ {
		p, err := s.relayPacket()
		if err != nil {
			return 0, err
		}
		resp.Bytes += uint64(len(p) + 4)
	}
	if !s.deprecateEOF {
		p, err := s.relayPacket()
		if err != nil {
			return 0, err
		}
		resp.Bytes += uint64(len(p) + 4)
		e, err := wire.ParseEOF(p)
		if err != nil {
			return 0, fail(reasonMalformed, fmt.Errorf("EOF after column definitions: %w", err), nil)
		}
		if cursor && e.Status&mysql.SERVER_STATUS_CURSOR_EXISTS != 0 {
			// Rows come with COM_STMT_FETCH.
			resp.Status = e.Status
			return e.Status, nil
		}
	}
	// Rows follow, or (with a cursor) an end packet carrying
	// SERVER_STATUS_CURSOR_EXISTS, after which rows come with fetches.
	if err := s.relayRows(binary, resp); err != nil {
		return 0, err
	}
	return resp.Status, nil
}

// relayRows relays rows until the result set's end (or an ERR), counting
// rows and bytes and, if asked, checksumming them. Binary rows start with
// 0x00, so for them any 0xfe-headed packet is the end.
func (s *session) relayRows(binary bool, resp *store.Response) error {
	if resp.Kind == store.RespNone {
		resp.Kind = store.RespResultSet
	}
	sums := s.p.cfg.CaptureResults == ResultsChecksum
	var h xxhash.Digest
	for {
		seq, p, err := s.backend.ReadFrame()
		if err != nil {
			return s.backendErr(err)
		}
		if err := s.client.WriteFrame(seq, p); err != nil {
			return fail(reasonClientGone, err, nil)
		}
		resp.Bytes += uint64(len(p) + 4)
		switch {
		case len(p) > 0 && p[0] == wire.HeaderErr:
			// An error in the middle of the rows ends the statement.
			s.summarizeSimple(p, resp)
			return nil
		case binary && len(p) > 0 && p[0] == wire.HeaderEOF, wire.IsResultEnd(p, s.deprecateEOF):
			var end store.Response
			s.summarizeSimple(p, &end)
			resp.Status, resp.Warnings = end.Status, end.Warnings
			resp.HasChecksums = sums
			return nil
		}
		resp.Rows++
		if sums {
			h.Reset()
			h.Write(p)
		}
		for len(p) == wire.MaxPayload { // a row of 16 MiB or more
			if seq, p, err = s.backend.ReadFrame(); err != nil {
				return s.backendErr(err)
			}
			if err := s.client.WriteFrame(seq, p); err != nil {
				return fail(reasonClientGone, err, nil)
			}
			resp.Bytes += uint64(len(p) + 4)
			if sums {
				h.Write(p)
			}
		}
		if sums {
			rs := capture.RowSums{Ordered: resp.Ordered, Unordered: resp.Unordered}
			rs.Add(h.Sum64())
			resp.Ordered, resp.Unordered = rs.Ordered, rs.Unordered
		}
	}
}

// relayLocalInfile relays LOAD DATA LOCAL INFILE: the client sends the
// file's contents and an empty packet, then the server answers.
func (s *session) relayLocalInfile(resp *store.Response) error {
	if err := s.client.Flush(); err != nil {
		return fail(reasonClientGone, err, nil)
	}
	for {
		seq, p, err := s.client.ReadFrame()
		if err != nil {
			return fail(reasonClientGone, err, nil)
		}
		if err := s.backend.WriteFrame(seq, p); err != nil {
			return s.backendErr(err)
		}
		if len(p) == 0 {
			break
		}
	}
	if err := s.backend.Flush(); err != nil {
		return s.backendErr(err)
	}
	p, err := s.relayPacket()
	if err != nil {
		return err
	}
	s.summarizeSimple(p, resp)
	s.rec.Flags |= store.FlagNotReplayable
	return nil
}

// relayPrepare relays a prepare's answer and remembers the statement.
func (s *session) relayPrepare(pc pendingCmd) error {
	p, err := s.relayPacket()
	if err != nil {
		return err
	}
	if len(p) > 0 && p[0] == wire.HeaderErr {
		s.summarizeSimple(p, &s.rec.Resp)
		return nil
	}
	ok, err := wire.ParsePrepareOK(p)
	if err != nil {
		return fail(reasonMalformed, fmt.Errorf("prepare response: %w", err), nil)
	}
	s.rec.StmtID = ok.StmtID
	s.rec.Resp = store.Response{Kind: store.RespOK, Columns: uint32(ok.Columns), Params: ok.Params, Warnings: ok.Warnings}
	s.stmts[ok.StmtID] = &stmt{params: int(ok.Params), secret: s.rec.Flags&store.FlagMasked != 0}
	for _, n := range []uint16{ok.Params, ok.Columns} {
		if n == 0 {
			continue
		}
		for i := 0; i < int(n); i++ {
			if _, err := s.relayPacket(); err != nil {
				return err
			}
		}
		if !s.deprecateEOF {
			if _, err := s.relayPacket(); err != nil {
				return err
			}
		}
	}
	return nil
}

// relayChangeUser relays COM_CHANGE_USER's authentication exchange.
func (s *session) relayChangeUser() error {
	if err := s.client.Flush(); err != nil {
		return fail(reasonClientGone, err, nil)
	}
	ok, msg, err := s.relayAuth(0, 0)
	if err != nil {
		return err
	}
	if ok {
		s.rec.Resp.Kind = store.RespOK
		s.user, s.schema = s.rec.User, s.rec.Schema
		s.stmts = map[uint32]*stmt{}
	} else {
		s.rec.Resp = store.Response{Kind: store.RespError, Message: msg}
	}
	return nil
}

// relayFieldList relays COM_FIELD_LIST: column definitions until EOF, or ERR.
func (s *session) relayFieldList() error {
	for {
		p, err := s.relayPacket()
		if err != nil {
			return err
		}
		if len(p) > 0 && (p[0] == wire.HeaderErr || wire.IsResultEnd(p, s.deprecateEOF)) {
			s.summarizeSimple(p, &s.rec.Resp)
			return nil
		}
	}
}

// relayRaw copies bytes both ways until either side closes: for commands
// the proxy does not parse (binlog dumps and the like).
func (s *session) relayRaw() error {
	if err := s.client.Flush(); err != nil {
		return err
	}
	done := make(chan error, 2)
	// Both goroutines end when relayRaw closes the connections below.
	go func() { _, err := io.Copy(s.client.Conn, s.backend.Reader()); done <- err }()
	go func() { _, err := io.Copy(s.backend.Conn, s.client.Reader()); done <- err }()
	err := <-done
	s.client.Close()
	s.backend.Close()
	<-done
	return err
}
