package proxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/tandemdb/tandem/capture"
	"github.com/tandemdb/tandem/store"
	"github.com/tandemdb/tandem/wire"
)

// session relays one client connection. Its goroutine owns everything in it.
type session struct {
	p         *Proxy
	id        uint64
	client    *wire.Conn
	backend   *wire.Conn
	clientTLS bool
	// compressed: both legs speak the compressed protocol (the client
	// asked for it at login).
	compressed bool
	// seqShift is what the sequence ids of the server's answer are moved
	// by on the way to the client (compressed sessions: shiftSeq).
	seqShift byte

	// From the handshake; then cs follows the session's state and builds
	// its records.
	caps         uint64
	collation    byte
	user, schema string
	connID       uint32
	cs           *capture.Session
	cmdBuf       []byte
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
	// hungUp: the backend shut the connection (hangup's watcher): a
	// session that is idle, or about to be, closes its client's side.
	hungUp atomic.Bool
	// lastGTID is the GTID of the session's last transaction the backend
	// logged (Config.Commits); noGTID: the backend would not say. ask is
	// the transaction whose GTID is still to be asked for (see gtid.go);
	// lost counts those whose GTID could not be asked for.
	lastGTID string
	noGTID   bool
	ask      commitToAsk
	lost     int

	// capMu is held while a command is handled: a capture's start or
	// stop joins or leaves the session between two commands (capture.go).
	// joined is the capture the session records into; waitingFor the one
	// it will join once its written transaction ends.
	capMu      sync.Mutex
	joined     *liveCapture
	waitingFor *liveCapture
	// raw: the session is relayed unparsed (errRawMode); its backend is
	// not the proxy's to ask anything of.
	raw bool
}

// backendHungUp is told (by the proxy's hang-up watcher) that the backend
// shut the connection: while the session waits for its client, the
// client's side closes now, as the server's close would have closed it.
// A session in a command finds out by reading its answer.
func (s *session) backendHungUp() {
	s.hungUp.Store(true)
	if s.idleSince.Load() != 0 {
		s.backendClosedIdle.Store(true)
		s.client.Close()
	}
}

// serveCommands relays commands until the client quits or a side fails.
func (s *session) serveCommands() error {
	s.errSeq = 1 // an answer to a command
	locked := false
	defer func() {
		if locked {
			s.capMu.Unlock()
		}
	}()
	for {
		if locked {
			s.capMu.Unlock()
			locked = false
		}
		s.idleSince.Store(time.Now().UnixNano())
		if s.hungUp.Load() { // it went while the last answer was relayed
			return fail(reasonBackendGone, errors.New("the backend closed the connection"), nil)
		}
		seq, p, err := s.client.ReadFrame()
		s.idleSince.Store(0)
		if err != nil {
			// The question still waiting, if any, is asked as the session
			// ends (endLocked).
			if s.backendClosedIdle.Load() {
				return fail(reasonBackendGone, errors.New("the backend closed the idle connection"), nil)
			}
			if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fail(reasonClientGone, err, nil)
		}
		s.capMu.Lock()
		locked = true
		// After the lock: a start or stop that held it came first, and
		// its synthetic records come before this command in time too.
		start := time.Now()
		if s.joined != nil || s.p.live.Load() != nil {
			s.syncCaptureLocked(start)
		}
		if len(p) == 0 {
			return fail(reasonMalformed, errors.New("empty command packet"), proxyErr(1047, "08S01", "empty command packet"))
		}
		cmd := p[0]
		asking := s.askBefore(p)
		s.backend.NewCommand()
		if asking {
			if err := s.backend.WriteFrame(0, lastGTIDPacket); err != nil {
				return s.backendErr(err)
			}
			if s.compressed {
				// Under compression each command goes in packets of its
				// own: the server numbers its answers from the compressed
				// packet a command came in.
				if err := s.backend.Flush(); err != nil {
					return s.backendErr(err)
				}
				s.backend.NewCommand()
			}
		}
		full, truncated := p, false
		if len(p) == wire.MaxPayload {
			// A command of 16 MiB or more: relay every frame, keep a bounded copy.
			if full, truncated, err = s.relayLongCommand(seq, p); err != nil {
				return err
			}
		} else if err := s.backend.WriteFrame(seq, p); err != nil {
			return s.backendErr(err)
		}
		cm := s.p.metrics.command(cmd)
		cm.commands.Inc()

		// The recorder reads what the client sent before the backend's
		// answer can reuse the frame buffer. A command it cannot decode
		// is relayed all the same (the server decides what is malformed)
		// and recorded as not replayable.
		step := s.cs.Command(full, truncated, start)
		if err := s.cs.ParseErr(); err != nil {
			s.p.log.Debug("command not parsed for recording; relayed", "session", s.id, "command", commandName(cmd), "err", err)
		}
		if err := s.backend.Flush(); err != nil {
			return s.backendErr(err)
		}
		s.shiftSeq()
		if asking {
			if err := s.learnGTID(s.readLastGTID()); err != nil {
				return err
			}
		}
		switch {
		case cmd == mysql.COM_QUIT:
			s.cs.End(time.Now())
			return nil
		case step == capture.Raw:
			s.cs.End(time.Now())
			s.p.log.Info("command the proxy does not parse; relaying the rest of the session unparsed and unrecorded", "session", s.id, "command", fmt.Sprintf("0x%02x", cmd))
			return errRawMode
		case step == capture.Read:
			if err := s.relayAnswer(); err != nil {
				return err
			}
		}
		if err := s.client.Flush(); err != nil {
			return fail(reasonClientGone, err, nil)
		}
		end := time.Now()
		cm.roundtrip.Observe(end.Sub(start).Seconds())
		s.cs.End(end)
		s.noteCommit()
	}
}

// shiftSeq sets seqShift once the client's packets of a turn were relayed:
// under compression a server numbers its answer from the compressed
// packets it read, and the client expects them numbered from those it
// sent, which the proxy re-packs.
func (s *session) shiftSeq() {
	s.seqShift = s.client.CompressedSeq() - s.backend.CompressedSeq()
}

// relayLongCommand forwards a multi-frame command and returns its first
// MaxRecordBytes, and whether it was longer.
func (s *session) relayLongCommand(seq byte, p []byte) ([]byte, bool, error) {
	limit := s.p.cfg.MaxRecordBytes
	s.cmdBuf = s.cmdBuf[:0]
	total := 0
	for {
		if err := s.backend.WriteFrame(seq, p); err != nil {
			return nil, false, fail(reasonBackendGone, err, proxyErr(1105, "08S01", "backend connection lost"))
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
			return nil, false, fail(reasonClientGone, err, nil)
		}
	}
	return s.cmdBuf, total > limit, nil
}

func commandName(c byte) string {
	if k := capture.CommandKind(c); k != store.KindOther {
		return k.String()
	}
	return fmt.Sprintf("command 0x%02x", c)
}
