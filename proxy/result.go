package proxy

import (
	"errors"
	"fmt"
	"io"

	"github.com/tandemdb/tandem/capture"
	"github.com/tandemdb/tandem/wire"
)

// errRawMode: the command is one the proxy does not parse; the rest of the
// connection is relayed as bytes.
var errRawMode = errors.New("proxy: relaying the rest of the connection unparsed")

// relayAnswer relays the backend's answer to a command, frame by frame,
// for as long as the recorder says it goes on; it relays the client's
// turns inside it (authentication data, a LOCAL INFILE file).
func (s *session) relayAnswer() error {
	for {
		seq, p, err := s.backend.ReadFrame()
		if err != nil {
			return s.backendErr(err)
		}
		if err := s.client.WriteFrame(seq+s.seqShift, p); err != nil {
			return fail(reasonClientGone, err, nil)
		}
		switch s.cs.Server(p) {
		case capture.Read:
		case capture.Done:
			return nil
		case capture.ClientTurn:
			if err := s.relayClientTurn(false); err != nil {
				return err
			}
		case capture.SendFile:
			if err := s.relayClientTurn(true); err != nil {
				return err
			}
		default:
			return fail(reasonMalformed, s.cs.Err(), nil)
		}
	}
}

// relayClientTurn relays what the client sends inside an answer: one
// packet (authentication data), or a LOCAL INFILE file's frames up to
// the empty one that ends it.
func (s *session) relayClientTurn(file bool) error {
	if err := s.client.Flush(); err != nil {
		return fail(reasonClientGone, err, nil)
	}
	for {
		seq, p, err := s.client.ReadFrame()
		if err != nil {
			return fail(reasonClientGone, err, nil)
		}
		if err := s.backend.WriteFrame(seq-s.seqShift, p); err != nil {
			return s.backendErr(err)
		}
		if file && len(p) == 0 || !file && len(p) < wire.MaxPayload {
			break
		}
	}
	if err := s.backend.Flush(); err != nil {
		return s.backendErr(err)
	}
	s.shiftSeq()
	return nil
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
