package proxy

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/tandemdb/tandem/capture"
)

// A proxy relays whether or not it captures; captures come and go while
// it runs (Runner.Start, Runner.Stop). Every session follows its state all
// the time (capture.Session); what changes with a capture is only where
// its records go.
//
// Joining and leaving happen between two commands. A session holds its
// capMu while it handles a command (from the moment the command arrives
// until its answer is relayed and recorded); a start or a stop takes the
// mutex of each session it finds idle and joins or leaves it there, and a
// session that was in a command joins or leaves itself before its next
// one (syncCaptureLocked). So no command is ever half in a capture.

// liveCapture is one capture sessions record into.
type liveCapture struct {
	rec  *capture.Recorder
	opts capture.Options
	// stopping: sessions leave it and none joins.
	stopping chan struct{}
	// endRead is closed once the stop has read the capture's end point
	// (or knows it reads none): a session that left inside a transaction
	// that wrote waits for it before its next command (syncCaptureLocked).
	endRead     chan struct{}
	endReadOnce sync.Once
	// finishBy (Unix ns, 0: not at all): until then, a session inside a
	// transaction that wrote stays in the stopping capture until that
	// transaction ends, so that the capture holds its commit (Runner.stop).
	finishBy atomic.Int64
	// Counts for status: sessions that joined open (and of those inside a
	// transaction), that connected during it, and those waiting for their
	// written transaction to end before they join; in: sessions in it now.
	openAtStart, inTrxAtStart, connected, waiting, in atomic.Int64
	// unasked counts its written transactions whose GTID was not learned.
	unasked atomic.Int64
}

// newLive is a capture into rec, with result checksums if results says
// so, asking each written transaction's GTID if commits.
func (p *Proxy) newLive(rec *capture.Recorder, results string, commits bool) *liveCapture {
	return &liveCapture{rec: rec, stopping: make(chan struct{}), endRead: make(chan struct{}),
		opts: capture.Options{MaxRecordBytes: p.cfg.MaxRecordBytes, Checksums: results == ResultsChecksum, Commits: commits}}
}

// endPointRead lets the sessions held for the end point go on; it may be
// called more than once.
func (lc *liveCapture) endPointRead() { lc.endReadOnce.Do(func() { close(lc.endRead) }) }

// finishing reports whether a session inside a transaction that wrote
// stays in the stopping capture at now, to end its transaction there.
func (lc *liveCapture) finishing(now time.Time) bool {
	d := lc.finishBy.Load()
	return d != 0 && now.UnixNano() < d
}

func (lc *liveCapture) isStopping() bool {
	select {
	case <-lc.stopping:
		return true
	default:
		return false
	}
}

// syncCaptureLocked joins the capture running now, or leaves one that
// stopped, at at (the session's capMu held, between two commands).
func (s *session) syncCaptureLocked(at time.Time) {
	cur := s.p.live.Load()
	if lc := s.joined; lc != nil && (lc != cur || lc.isStopping()) {
		writing := !s.raw && !s.cs.Joinable()
		if writing && lc.finishing(at) {
			return // its transaction ends in the capture (Runner.stop)
		}
		s.leaveLocked(at)
		if writing {
			// Too late to end its transaction in the capture: its
			// command (a COMMIT, most likely) goes after the end point,
			// as for the sessions the stop holds (see Runner.stop). In
			// the capture's range it would be a transaction that
			// bypassed the proxy, applied whole on top of its captured
			// part.
			<-lc.endRead
		}
	}
	if s.joined != nil || cur == nil || cur.isStopping() {
		return
	}
	if !s.cs.Joinable() {
		if s.waitingFor != cur {
			s.waitingFor = cur
			cur.waiting.Add(1)
		}
		return
	}
	if s.waitingFor == cur {
		cur.waiting.Add(-1)
	}
	s.waitingFor = nil
	s.resetGTIDs()
	if s.cs.Join(cur.rec, cur.opts, at) {
		cur.inTrxAtStart.Add(1)
	}
	cur.openAtStart.Add(1)
	cur.in.Add(1)
	s.joined = cur
	s.p.metrics.joins.WithLabelValues("open-at-start").Inc()
}

// leaveLocked ends the session's part in its capture at a stop (capMu
// held, between two commands): a synthetic end closes it there.
func (s *session) leaveLocked(at time.Time) { s.departLocked(at, false) }

// departLocked takes the session out of its capture (capMu held): the
// GTID of its last transaction that wrote is asked now, while the capture
// can still keep it (not after a raw relay: the backend is not the
// proxy's to ask), then its end is recorded: the real one when final (it
// quit or went away: capture.Session.Close), else a synthetic one
// (capture.Session.Leave).
func (s *session) departLocked(at time.Time, final bool) {
	lc := s.joined
	if lc == nil {
		return
	}
	if !s.raw {
		s.askAtEnd()
		s.backend.SetDeadline(time.Time{})
	}
	lc.unasked.Add(int64(s.cs.ImplicitLost() + s.unasked()))
	if final {
		s.cs.Close(at)
	} else {
		s.cs.Leave(at)
	}
	lc.in.Add(-1)
	s.joined = nil
}

// joinAtConnect puts a session that has just logged in into the running
// capture, as one connected during it (capMu held).
func (s *session) joinAtConnect() {
	cur := s.p.live.Load()
	if cur == nil || cur.isStopping() {
		return
	}
	s.resetGTIDs()
	s.cs.Record(cur.rec, cur.opts)
	cur.connected.Add(1)
	cur.in.Add(1)
	s.joined = cur
	s.p.metrics.joins.WithLabelValues("connected").Inc()
}

// endLocked is the session's end (capMu held): it stops waiting for a
// capture and leaves the one it is in with its real end.
func (s *session) endLocked(at time.Time) {
	if s.waitingFor != nil {
		s.waitingFor.waiting.Add(-1)
		s.waitingFor = nil
	}
	s.departLocked(at, true)
}

// refusedLocked takes back joinAtConnect for a login the server refused
// (capMu held): its refused connect is recorded, but it is no session of
// the capture.
func (s *session) refusedLocked() {
	if lc := s.joined; lc != nil {
		lc.connected.Add(-1)
		lc.in.Add(-1)
		s.joined = nil
	}
}

// resetGTIDs starts the session's GTID bookkeeping afresh for a capture.
func (s *session) resetGTIDs() {
	s.ask, s.lost = commitToAsk{}, 0
	s.cs.ResetImplicitLost()
}
