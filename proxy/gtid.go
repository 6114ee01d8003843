package proxy

import (
	"errors"
	"fmt"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/tandemdb/tandem/wire"
)

// lastGTIDQuery asks MariaDB for the GTID of the session's last
// transaction written to the binary log.
const lastGTIDQuery = "SELECT @@last_gtid"

// noteCommit asks the backend, on the session's own connection, for the
// GTID of the transaction the command just ended, when it wrote
// (Config.Commits): the capture then holds each captured commit's place in
// the server's order, and what the binary log holds beyond them bypassed
// the proxy. The question goes after the answer was relayed, before the
// client's next command is read; its answer never reaches the client. A
// server that cannot answer stops the questions for the session.
//
// Behind a COMMIT of a transaction that wrote the question goes out with
// the COMMIT itself (pipelined, see askBehind): its answer is then read
// here, already arrived, and the client never waits a round trip for it.
func (s *session) noteCommit(pipelined bool) error {
	seq, end, ok := s.cs.CommitEnded()
	var g string
	var err error
	switch {
	case pipelined:
		g, err = s.readLastGTID()
		if !ok && err == nil {
			return nil // the COMMIT failed, or committed nothing: the answer is the last GTID again
		}
	case !ok || s.noGTID:
		return nil
	default:
		g, err = s.askLastGTID()
	}
	if err != nil {
		var qe *gtidQueryError
		if errors.As(err, &qe) {
			s.noGTID = true
			s.p.log.Warn("the backend does not say its transactions' GTIDs; this session's commits are captured without them", "session", s.id, "err", qe.msg)
			return nil
		}
		return err
	}
	if g == "" || g == s.lastGTID {
		return nil // nothing went to the binary log
	}
	s.lastGTID = g
	s.p.recorder.AddGTID(seq, g, end)
	return nil
}

type gtidQueryError struct{ msg string }

func (e *gtidQueryError) Error() string { return e.msg }

var lastGTIDPacket = append([]byte{mysql.COM_QUERY}, lastGTIDQuery...)

// askBehind queues lastGTIDQuery behind the command just written to the
// backend (not flushed): the server answers it after the command.
func (s *session) askBehind() error {
	if err := s.backend.WriteFrame(0, lastGTIDPacket); err != nil {
		return s.backendErr(err)
	}
	return nil
}

// askLastGTID sends lastGTIDQuery and reads its one-row, one-column
// answer. A broken connection is a backend error; an ERR answer a
// gtidQueryError.
func (s *session) askLastGTID() (string, error) {
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
