package proxy

import (
	"errors"
	"fmt"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/tandemdb/tandem/capture"
	"github.com/tandemdb/tandem/wire"
)

// lastGTIDQuery asks MariaDB for the GTID of the session's last
// transaction written to the binary log.
const lastGTIDQuery = "SELECT @@last_gtid"

// How the proxy learns each captured transaction's GTID (Config.Commits).
//
// MariaDB gives a session the GTID of its last transaction written to the
// binary log in @@last_gtid; the proxy asks for it on the session's own
// connection and records it on the record that ended the transaction: the
// capture then holds each captured commit's place in the server's order,
// and what the binary log holds beyond them bypassed the proxy.
//
// Whatever the proxy asks must never reach the client, and no question may
// change what the client reads next: a SELECT resets the diagnostics the
// previous statement left (ROW_COUNT(), FOUND_ROWS(), its warnings). So
// the question is not asked after the commit's answer but with the
// client's next command, written ahead of it in the same flush (no extra
// round trip) and answered first; when that command reads the diagnostics
// (capture.Session.ReadsDiagnostics), or is one the proxy does not put a
// question before, the question waits for the one after. A session that
// ends with a question waiting asks it before its backend connection
// closes. A transaction whose GTID could not be asked for (the command
// that read the diagnostics committed another one, the backend went away)
// is counted with those a DDL statement committed (Bypassed.Unasked): the
// list of transactions that bypassed the proxy may then name it, and says
// so.

// commitToAsk is a transaction that wrote whose GTID is still to be asked
// for: the record that ended it, and between which times the server
// committed it.
type commitToAsk struct {
	capture.Commit
	ok bool
}

// noteCommit keeps, when the command just ended closed a transaction that
// wrote, that its GTID is to be asked for.
func (s *session) noteCommit() {
	c, ok := s.cs.CommitEnded()
	if !ok {
		return
	}
	if s.noGTID {
		s.lost++ // the backend would not say: the bypassed list may name it
		return
	}
	if s.ask.ok {
		s.lost++ // the server's last GTID is the new transaction's now
	}
	s.ask = commitToAsk{Commit: c, ok: true}
}

// askBefore reports whether the question waiting (if any) goes ahead of
// the client's command p: not when p reads the diagnostics, nor before a
// command that has no answer or continues another (a cursor's fetch, a
// statement's long data), nor before one the proxy does not follow.
func (s *session) askBefore(p []byte) bool {
	if !s.ask.ok { // never set once noGTID is
		return false
	}
	switch p[0] {
	case mysql.COM_QUERY, mysql.COM_STMT_PREPARE, mysql.COM_STMT_EXECUTE, wire.ComStmtBulkExecute:
		return len(p) < wire.MaxPayload && !s.cs.ReadsDiagnostics(p)
	case mysql.COM_INIT_DB, mysql.COM_PING, mysql.COM_QUIT, mysql.COM_CHANGE_USER, mysql.COM_RESET_CONNECTION:
		return true
	}
	return false
}

// learnGTID records the answer to the question asked for s.ask.
func (s *session) learnGTID(g string, err error) error {
	c := s.ask
	s.ask = commitToAsk{}
	if err != nil {
		var qe *gtidQueryError
		if errors.As(err, &qe) {
			s.noGTID = true
			s.lost++
			s.p.log.Warn("the backend does not say its transactions' GTIDs; this session's commits are captured without them", "session", s.id, "err", qe.msg)
			return nil
		}
		s.lost++
		return err
	}
	if g == "" || g == s.lastGTID {
		return nil // nothing went to the binary log (a false alarm)
	}
	s.lastGTID = g
	if s.joined != nil {
		s.joined.rec.AddGTID(c.Commit, g)
	}
	return nil
}

// askAtEnd asks the question still waiting when the client has gone (or
// is being closed): the backend connection is still open, and is given
// endAskTimeout to answer.
func (s *session) askAtEnd() {
	if !s.ask.ok {
		return
	}
	s.backend.SetDeadline(time.Now().Add(endAskTimeout))
	g, err := s.askLastGTID()
	if err != nil {
		s.p.log.Debug("the GTID of the session's last transaction could not be asked for", "session", s.id, "err", err)
	}
	_ = s.learnGTID(g, err)
}

// unasked counts the session's transactions that wrote whose GTID was
// not learned: those lost, and one still waiting when the session ended
// another way (a backend error, a command relayed raw).
func (s *session) unasked() int {
	if s.ask.ok {
		return s.lost + 1
	}
	return s.lost
}

// endAskTimeout bounds the question a session asks as it ends.
const endAskTimeout = 2 * time.Second

type gtidQueryError struct{ msg string }

func (e *gtidQueryError) Error() string { return e.msg }

var lastGTIDPacket = append([]byte{mysql.COM_QUERY}, lastGTIDQuery...)

// askLastGTID sends lastGTIDQuery and reads its one-row, one-column
// answer. A broken connection is a backend error; an ERR answer a
// gtidQueryError.
func (s *session) askLastGTID() (string, error) {
	s.backend.NewCommand()
	if err := s.backend.WriteFrame(0, lastGTIDPacket); err != nil {
		return "", s.backendErr(err)
	}
	if err := s.backend.Flush(); err != nil {
		return "", s.backendErr(err)
	}
	return s.readLastGTID()
}

// readLastGTID reads lastGTIDQuery's answer.
func (s *session) readLastGTID() (string, error) {
	eof := uint32(s.caps)&mysql.CLIENT_DEPRECATE_EOF == 0
	var val string
	for n := 0; ; n++ {
		_, p, err := s.backend.ReadFrame()
		if err != nil {
			return "", s.backendErr(err)
		}
		if len(p) == 0 {
			return "", &gtidQueryError{"an empty packet in the answer to " + lastGTIDQuery}
		}
		if n == 0 && p[0] == 0xff {
			msg := "error"
			if e, perr := wire.ParseErr(p); perr == nil {
				msg = fmt.Sprintf("%d %s", e.Code, e.Message)
			}
			return "", &gtidQueryError{lastGTIDQuery + ": " + msg}
		}
		// column count, its definition, [EOF], the row, EOF or OK
		row := 2
		if eof {
			row = 3
		}
		switch {
		case n == row && p[0] != 0xfe:
			if p[0] == 0xfb {
				val = "" // NULL
			} else if int(p[0]) < 0xfb && len(p) >= 1+int(p[0]) {
				val = string(p[1 : 1+int(p[0])])
			} else {
				return "", &gtidQueryError{"an answer to " + lastGTIDQuery + " this proxy does not read"}
			}
		case n >= row && p[0] == 0xfe && len(p) < 0xffffff:
			return val, nil
		case n > row+1:
			return "", &gtidQueryError{"an answer to " + lastGTIDQuery + " longer than one row"}
		}
	}
}
