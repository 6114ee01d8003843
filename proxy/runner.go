package proxy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/tandemdb/tandem/capture"
	"github.com/tandemdb/tandem/compare"
	"github.com/tandemdb/tandem/gtid"
	"github.com/tandemdb/tandem/store"
)

// Runner starts and stops captures on a serving proxy (Controls). One
// capture runs at a time; each has its own directory, start and end
// points (--binlog-user) and shadows. Start and Stop are serialized.
type Runner struct {
	p    *Proxy
	cfg  RunConfig
	reg  *prometheus.Registry
	out  io.Writer
	log  *slog.Logger
	ctx  context.Context // the proxy's: shadows live under it
	smet *store.Metrics
	acc  *gtid.Account // the --binlog-user account on the backend, or nil

	op sync.Mutex // one Start or Stop at a time
	mu struct {
		sync.Mutex
		cur       *running
		last      *CaptureState
		failed    error                // the first capture that failed, for the exit status
		collector prometheus.Collector // the last writer's, on /metrics until the next starts
	}
	// shadows gathers the running capture's shadows' metrics.
	shadows atomic.Pointer[prometheus.Gatherers]
	// afterLeave, set by tests, is called at a stop once every session
	// has left, before the end point is read, with how many are held.
	afterLeave func(held int)
}

// running is a capture under way.
type running struct {
	lc      *liveCapture
	w       *store.Writer
	state   CaptureState // guarded by Runner.mu
	start   *store.Position
	commits bool
	shadows ShadowSet
	cancel  context.CancelFunc // ends its watch
	watched chan struct{}      // closed when its watch has returned
}

// newRunner is the Runner of p, which Run serves.
func newRunner(ctx context.Context, p *Proxy, cfg RunConfig, reg *prometheus.Registry, out io.Writer) *Runner {
	r := &Runner{p: p, cfg: cfg, reg: reg, out: out, log: cfg.Logger, ctx: ctx, smet: store.NewMetrics(reg)}
	if cfg.Binlog != nil {
		acc := *cfg.Binlog
		acc.Addr, acc.TLS = cfg.Backend, p.tlsClient
		r.acc = &acc
	}
	return r
}

// Gather is the running capture's shadows' metrics.
func (r *Runner) Gather() ([]*dto.MetricFamily, error) {
	if g := r.shadows.Load(); g != nil {
		return g.Gather()
	}
	return nil, nil
}

// Status says what runs and what ran last.
func (r *Runner) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := Status{Capturing: r.mu.cur != nil, Last: r.mu.last}
	if c := r.mu.cur; c != nil {
		s := r.stateLocked(c)
		st.Current = &s
	}
	r.p.mu.Lock()
	st.Sessions = len(r.p.mu.conns)
	r.p.mu.Unlock()
	return st
}

// stateLocked is c's state now (r.mu held).
func (r *Runner) stateLocked(c *running) CaptureState {
	s := c.state
	ws := c.w.Stats()
	s.Records, s.Dropped = ws.Committed, ws.Dropped
	s.OpenAtStart, s.Connected = int(c.lc.openAtStart.Load()), int(c.lc.connected.Load())
	s.Waiting = int(c.lc.waiting.Load())
	if c.start != nil {
		s.StartGTID = c.start.GTID
	}
	return s
}

// Start begins a capture into o.Dir. The backend's start point (with
// --binlog-user) is read before any session joins: every write the
// capture records comes after it.
func (r *Runner) Start(ctx context.Context, o CaptureOptions) (CaptureState, error) {
	r.op.Lock()
	defer r.op.Unlock()
	r.mu.Lock()
	busy, last := r.mu.cur != nil, r.mu.last // only stop changes them, under r.op too
	r.mu.Unlock()
	if busy {
		return CaptureState{}, fmt.Errorf("%w (into %s): stop it first with 'tandem capture stop'", ErrCaptureRunning, r.Status().Current.Dir)
	}
	if o.Duration < 0 || o.MaxBytes < 0 {
		return CaptureState{}, fmt.Errorf("%w: duration and max bytes must not be negative (0: none)", ErrCaptureOptions)
	}
	results := cmp.Or(o.Results, r.cfg.CaptureResults, ResultsSummary)
	if results != ResultsSummary && results != ResultsChecksum {
		return CaptureState{}, fmt.Errorf("%w: results %q: want %s or %s", ErrCaptureOptions, o.Results, ResultsSummary, ResultsChecksum)
	}
	dir, err := CheckCaptureDir(r.cfg.CaptureRoot, o.Dir)
	if err != nil {
		return CaptureState{}, err
	}
	maxBytes := cmp.Or(o.MaxBytes, r.cfg.CaptureMaxBytes)

	aligner, _ := r.cfg.Shadows.(ShadowAligner)
	var start *store.Position
	commits := false
	if r.acc != nil {
		if aligner != nil {
			if err := aligner.Hold(ctx); err != nil {
				if last != nil {
					// The last capture's alignment removed their replication.
					return CaptureState{}, fmt.Errorf("proxy: --shadow-replicas: %w (each capture brings its shadow replicas to its start and detaches them: seed them again as replicas of the backend before the next capture)", err)
				}
				return CaptureState{}, fmt.Errorf("proxy: --shadow-replicas: %w", err)
			}
		}
		if start, err = readPosition(ctx, *r.acc); err != nil {
			return CaptureState{}, fmt.Errorf("proxy: --binlog-user: %w", err)
		}
		if aligner != nil {
			if err := aligner.Align(ctx, start.GTID, r.out); err != nil {
				return CaptureState{}, fmt.Errorf("proxy: --shadow-replicas: %w", err)
			}
		}
		commits = start.Flavor == gtid.MariaDB
		if !commits {
			// MySQL has no @@last_gtid; session_track_gtids would be the way.
			r.notice(fmt.Sprintf("the backend is %s: the capture records its start and end positions, not each commit's GTID (that needs MariaDB's @@last_gtid), so writes that bypass the proxy are not listed", start.Version))
		}
	}
	_, statErr := os.Stat(dir)
	existed := statErr == nil
	source := fmt.Sprintf("proxy %s -> %s", r.cfg.Listen, r.cfg.Backend)
	w, err := store.Create(dir, store.WriterOptions{Source: source, FlushInterval: r.cfg.SyncInterval, Logger: r.log, Metrics: r.smet,
		MaxBytes: maxBytes, MinFreeBytes: r.cfg.CaptureMinFree, Start: start, Key: r.cfg.Key})
	if err != nil {
		if errors.Is(err, store.ErrExists) {
			return CaptureState{}, fmt.Errorf("%w: %v", ErrCaptureDir, err)
		}
		return CaptureState{}, err
	}
	if r.cfg.Shadows != nil && aligner == nil && last != nil {
		// Copies, not replicas: nothing brought them past what the
		// proxy relayed while no capture ran.
		r.notice(fmt.Sprintf("the shadows are copies that missed every write made while no capture ran (since %s): their answers on the tables those writes changed can differ from the primary's for that reason alone; shadows that are replicas (--shadow-replicas) are brought to each capture's start instead",
			last.Stopped.Format(time.TimeOnly)))
	}
	c := &running{w: w, start: start, commits: commits, watched: make(chan struct{})}
	c.lc = r.p.newLive(capture.NewRecorder(w, r.log), results, commits)
	if r.cfg.Shadows != nil {
		shreg := prometheus.NewRegistry()
		if c.shadows, err = r.cfg.Shadows.Start(r.ctx, dir, w, shreg, r.log); err != nil {
			w.Close()
			removeNew(dir, existed)
			return CaptureState{}, fmt.Errorf("proxy: %w", err)
		}
		g := prometheus.Gatherers{shreg, c.shadows}
		r.shadows.Store(&g)
	}
	now := time.Now()
	c.state = CaptureState{Dir: dir, Started: now.UTC(), MaxBytes: maxBytes, Results: results}
	if o.Duration > 0 {
		c.state.Deadline = now.Add(time.Duration(o.Duration)).UTC()
	}
	r.mu.Lock()
	if r.mu.collector != nil {
		r.reg.Unregister(r.mu.collector)
	}
	r.mu.collector = w.Collector()
	r.reg.MustRegister(r.mu.collector)
	r.mu.cur = c
	st := r.stateLocked(c)
	r.mu.Unlock()

	// From here sessions join: those idle now at once, the others before
	// their next command.
	r.p.live.Store(c.lc)
	r.p.metrics.captureActive.Set(1)
	r.joinIdle(c.lc)
	wctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go r.watch(wctx, c, time.Duration(o.Duration))
	msg := "capturing into " + dir
	if o.Duration > 0 {
		msg += fmt.Sprintf(" for %s", time.Duration(o.Duration))
	}
	if start != nil {
		msg += ", start point " + orNone(start.GTID)
	}
	r.log.Info("capture started", "dir", dir, "duration", time.Duration(o.Duration), "max_bytes", maxBytes, "results", results)
	r.notice(msg)
	return st, nil
}

// joinIdle joins every session that is between two commands now; the
// others join before their next command.
func (r *Runner) joinIdle(lc *liveCapture) {
	now := time.Now()
	for _, s := range r.p.sessions() {
		if s.capMu.TryLock() {
			if s.cs != nil && !s.raw { // a session still logging in joins at its connect
				s.syncCaptureLocked(now)
			}
			s.capMu.Unlock()
		}
	}
}

// watch stops c when its duration runs out or its writer stops on its own
// (its budget, a full disk, a failure).
func (r *Runner) watch(ctx context.Context, c *running, d time.Duration) {
	defer close(c.watched)
	var deadline <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		deadline = t.C
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-deadline:
			go r.stop(c, StopDuration)
			return
		case <-tick.C:
			if err := c.w.Err(); err != nil {
				reason := StopDiskFull
				if errors.Is(err, store.ErrBudget) {
					reason = StopMaxBytes
				}
				go r.stop(c, reason)
				return
			}
		}
	}
}

// Stop ends the running capture at the client's request.
func (r *Runner) Stop(ctx context.Context) (CaptureState, error) {
	r.mu.Lock()
	c := r.mu.cur
	r.mu.Unlock()
	if c == nil {
		return CaptureState{}, fmt.Errorf("%w: start one with 'tandem capture start DIR'", ErrNoCapture)
	}
	return r.stop(c, StopRequested)
}

// stop ends c for reason: sessions leave it (each between two commands,
// those in a command waited for up to --drain-timeout), its end point
// and the transactions that bypassed the proxy are read, its shadows
// replay what it holds, and it closes.
func (r *Runner) stop(c *running, reason string) (CaptureState, error) {
	r.op.Lock()
	defer r.op.Unlock()
	r.mu.Lock()
	if r.mu.cur != c {
		r.mu.Unlock()
		return CaptureState{}, fmt.Errorf("%w: it stopped already", ErrNoCapture)
	}
	r.mu.Unlock()
	c.cancel()
	if reason != StopDuration && reason != StopMaxBytes && reason != StopDiskFull {
		<-c.watched
	}
	if c.start != nil && reason != StopMaxBytes && reason != StopDiskFull && c.w.Err() == nil {
		// A transaction that wrote, open now, ends in the capture (for
		// up to --drain-timeout): its commit is the capture's, before
		// the end point. Cut at the stop, its captured part would be
		// rolled back by replay, while production committed it; and the
		// session would have to wait for the end point (below) with its
		// locks held, and so would every session waiting for them.
		c.lc.finishBy.Store(time.Now().Add(r.p.cfg.DrainTimeout).UnixNano())
	}
	close(c.lc.stopping)
	r.p.live.CompareAndSwap(c.lc, nil)
	r.p.metrics.captureActive.Set(0)
	// Sessions that leave inside a transaction that wrote (it did not end
	// in time) are held (their next command waits) until the end point
	// is read: those idle here (held), and those in a command, which
	// leave by themselves before their next one (syncCaptureLocked waits
	// for endPointRead). A COMMIT of theirs relayed after they left but
	// before the point was read would be in the capture's range and not
	// in the capture, and so listed as a transaction that bypassed the
	// proxy — applied whole by --apply-bypassed on top of the captured
	// part of it, which replay runs and rolls back at the session's
	// stop. Held, their commit comes after the end point, as
	// production's end state then says.
	var held []*session
	holding := &held
	if c.start == nil {
		holding = nil // no end point to read: nobody waits
		c.lc.endPointRead()
	}
	defer c.lc.endPointRead()
	began := time.Now()
	busy, open := r.leaveAll(c.lc, holding)
	if busy > 0 {
		r.log.Warn("sessions still in a command after the drain timeout leave the capture without their end", "sessions", busy, "drain_timeout", r.p.cfg.DrainTimeout)
	}
	if open > 0 {
		r.log.Info("sessions inside a transaction that wrote at the stop: each ended it in the capture, or was held until the end point was read", "sessions", open, "held", len(held), "waited", time.Since(began).Round(time.Millisecond), "drain_timeout", r.p.cfg.DrainTimeout)
	}
	if r.afterLeave != nil {
		r.afterLeave(len(held))
	}
	var end *store.Position
	var bypassed []compare.BypassedWrite
	if c.start != nil {
		var endErr error
		end, endErr = readEnd(r.cfg, *r.acc)
		releaseHeld(held)
		c.lc.endPointRead()
		end, bypassed = endCapture(r.cfg, *r.acc, c.start, end, endErr, c.w, c.lc.rec, c.commits, int(c.lc.unasked.Load()), r.out, r.log)
	}
	var shadowErr error // a lost shadow: the capture itself is whole
	if c.shadows != nil {
		if err := c.w.Flush(); err != nil && !errors.Is(err, store.ErrStopped) {
			r.log.Warn("flushing the capture for the shadows", "err", err)
		}
		drain := cmp.Or(r.cfg.ShadowDrainTimeout, time.Minute)
		forced := false
		select {
		case <-r.cfg.Force:
			forced = true
		default:
		}
		if !forced {
			r.notice(fmt.Sprintf("stopping the capture: the shadows replay what it holds, for up to %s", drain))
		}
		shadowErr = c.shadows.Stop(drain, r.cfg.Force, r.out, bypassed)
		r.shadows.Store(nil)
	}
	werr := c.w.Err()
	captureErr := c.lc.rec.Close()
	if werr != nil && !errors.Is(werr, store.ErrStopped) {
		captureErr = errors.Join(werr, captureErr)
	}
	ws := c.w.Stats()

	r.mu.Lock()
	st := r.stateLocked(c)
	st.Records, st.Dropped = ws.Committed, ws.Dropped
	st.Stopped, st.Reason = time.Now().UTC(), reason
	if end != nil {
		st.EndGTID = end.GTID
	}
	var failure error
	if captureErr != nil {
		failure = fmt.Errorf("the capture into %s: %w", st.Dir, captureErr)
	}
	failure = errors.Join(failure, shadowErr)
	switch {
	case failure != nil:
		st.Err = failure.Error()
		if r.mu.failed == nil {
			r.mu.failed = failure
		}
	case werr != nil:
		st.Err = werr.Error() // its budget or the disk's floor: the reason says which
	}
	r.mu.last, r.mu.cur = &st, nil
	r.mu.Unlock()
	r.p.metrics.captureStops.WithLabelValues(reason).Inc()
	r.log.Info("capture stopped", "dir", st.Dir, "reason", reason, "records", st.Records, "dropped", st.Dropped,
		"open_at_start", st.OpenAtStart, "connected", st.Connected, "err", st.Err)
	r.notice(fmt.Sprintf("capture stopped (%s): %d records captured into %s, %d dropped; sessions: %d open at its start, %d connected during it",
		reason, st.Records, st.Dir, st.Dropped, st.OpenAtStart, st.Connected))
	return st, failure
}

// leaveAll makes every session in lc leave it, each between two
// commands: idle ones at once, the others when their command ends, for up
// to the drain timeout. It returns how many were still in a command then.
// With held non-nil, a session that leaves inside a transaction that
// wrote keeps its capMu locked and is appended to *held: the caller
// releases it (releaseHeld).
//
// While lc is finishing, a session inside a transaction that wrote stays
// in it until that transaction ends (it leaves, idle, at a later look, or
// by itself before its next command); those still in one when the time
// is up leave then, held.
// It returns how many sessions were still in a command then, and how
// many it found inside a transaction that wrote on its first look.
func (r *Runner) leaveAll(lc *liveCapture, held *[]*session) (busy, open int) {
	// From here on no session stays to end its transaction: the end
	// point is read next.
	defer lc.finishBy.Store(0)
	deadline := time.Now().Add(r.p.cfg.DrainTimeout)
	pending := r.p.sessions()
	for first := true; ; first = false {
		now := time.Now()
		finishing := lc.finishing(now) && now.Before(deadline)
		rest := pending[:0]
		for _, s := range pending {
			if !s.capMu.TryLock() {
				rest = append(rest, s)
				continue
			}
			if s.joined == lc {
				writing := !s.raw && !s.cs.Joinable()
				if writing && first {
					open++
				}
				if writing && finishing {
					s.capMu.Unlock()
					rest = append(rest, s) // its transaction ends in the capture
					continue
				}
				s.leaveLocked(now)
				if writing && held != nil {
					*held = append(*held, s)
					continue
				}
			}
			s.capMu.Unlock()
		}
		pending = rest
		if len(pending) == 0 || lc.in.Load() == 0 {
			return 0, open
		}
		if now.After(deadline) {
			return len(pending), open
		}
		select {
		case <-r.p.cfg.Force:
			return len(pending), open
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// releaseHeld lets the sessions leaveAll held go on.
func releaseHeld(held []*session) {
	for _, s := range held {
		s.capMu.Unlock()
	}
}

// failure is the first capture's failure (a full disk, a store error),
// which the proxy's exit status reports.
func (r *Runner) failure() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.failed
}

// stopCurrent ends the running capture, if any, for reason.
func (r *Runner) stopCurrent(reason string) {
	r.mu.Lock()
	c := r.mu.cur
	r.mu.Unlock()
	if c != nil {
		r.stop(c, reason)
	}
}

func (r *Runner) notice(msg string) {
	if r.cfg.Notice != nil {
		r.cfg.Notice(msg)
	}
}

// sessions lists the sessions relayed now.
func (p *Proxy) sessions() []*session {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*session, 0, len(p.mu.conns))
	for s := range p.mu.conns {
		out = append(out, s)
	}
	return out
}
