// Package proxy is a transparent MySQL-protocol proxy: clients connect to
// it as they would to the server; it relays the handshake (authentication
// is passed through, never stored) and every command and response, and
// feeds each to its session's capture.Session, which builds the records
// (and says when an answer is complete) and hands them to a
// capture.Recorder.
//
// Each client connection is served by one goroutine that owns its two
// connections; the Proxy owns those goroutines, and Serve returns only
// after they have ended. A connection that fails (malformed packet, backend
// or client gone, panic) is closed alone, with a log line naming it.
package proxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tandemdb/tandem/capture"
	"github.com/tandemdb/tandem/internal/blockio"
	"github.com/tandemdb/tandem/internal/hangup"
	"github.com/tandemdb/tandem/internal/rawio"
	"github.com/tandemdb/tandem/latency"
	"github.com/tandemdb/tandem/wire"
)

// What --capture-results records of result sets.
const (
	ResultsSummary  = "summary"  // columns, rows, bytes
	ResultsChecksum = "checksum" // and checksums of the rows, ordered and not
)

// Config configures a Proxy.
type Config struct {
	Listen  string
	Backend string
	// Recorder, if set, receives the exchanges from the start (a capture
	// for the proxy's whole life); Run starts and stops captures itself.
	Recorder       *capture.Recorder
	CaptureResults string
	// Commits: after each transaction that wrote, the proxy asks the
	// backend for its GTID (SELECT @@last_gtid, on the session's own
	// connection, with the client's next command; see gtid.go) and the
	// capture keeps it.
	Commits bool
	// TLSCert and TLSKey (PEM files) let clients use TLS to the proxy.
	TLSCert, TLSKey string
	// BackendTLS makes the proxy use TLS to the backend, verifying its
	// certificate against BackendCA (PEM) unless BackendInsecure.
	BackendTLS      bool
	BackendCA       string
	BackendInsecure bool
	MaxConnections  int
	// IO is how connections wait: IOPoller (Go's network poller, with raw
	// non-blocking reads and writes, see internal/rawio; the default) or
	// IOBlocking (a thread blocked in the kernel per waiting connection,
	// woken directly; see internal/blockio).
	IO string
	// MaxRecordBytes bounds the SQL text or data stored per record; longer
	// ones are truncated and marked. Default 1 MiB.
	MaxRecordBytes int
	DialTimeout    time.Duration
	// HandshakeTimeout bounds the handshake (default 5s: sooner than the
	// server's connect_timeout); MaxHandshakes the connections in it at
	// once (default 64): connections that never authenticate cannot hold
	// --max-connections. One beyond it waits for a slot, for up to
	// HandshakeTimeout (a pool warming up, a burst of connects), and is
	// refused with 1040 only then.
	HandshakeTimeout time.Duration
	MaxHandshakes    int
	// DrainTimeout is how long shutdown waits for clients to finish before
	// closing their connections; Force, once closed, closes them at once
	// (a second Ctrl-C). Notice, if set, is told what shutdown waits for.
	DrainTimeout time.Duration
	Force        <-chan struct{}
	Notice       func(msg string)
	Logger       *slog.Logger
	Metrics      *Metrics
}

// Config.IO values.
const (
	IOBlocking = "blocking"
	IOPoller   = "poller"
)

func (c *Config) defaults() error {
	if c.Backend == "" {
		return errors.New("proxy: no backend; give --backend HOST:PORT")
	}
	if _, port, err := net.SplitHostPort(c.Backend); err != nil || port == "" {
		return fmt.Errorf("proxy: backend %q is not HOST:PORT", c.Backend)
	}
	switch c.CaptureResults {
	case "":
		c.CaptureResults = ResultsSummary
	case ResultsSummary, ResultsChecksum:
	default:
		return fmt.Errorf("proxy: --capture-results %q: want %s or %s", c.CaptureResults, ResultsSummary, ResultsChecksum)
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return errors.New("proxy: --tls-cert and --tls-key go together")
	}
	switch c.IO {
	case "":
		c.IO = IOPoller
	case IOBlocking, IOPoller:
	default:
		return fmt.Errorf("proxy: --io %q: want %s or %s", c.IO, IOPoller, IOBlocking)
	}
	if c.MaxConnections <= 0 {
		c.MaxConnections = 1000
	}
	if c.MaxRecordBytes <= 0 {
		c.MaxRecordBytes = 1 << 20
	}
	if c.DialTimeout <= 0 {
		c.DialTimeout = 5 * time.Second
	}
	if c.MaxHandshakes <= 0 {
		c.MaxHandshakes = 64
	}
	if c.HandshakeTimeout <= 0 {
		c.HandshakeTimeout = 5 * time.Second
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = 5 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Metrics == nil {
		c.Metrics = NewMetrics(prometheus.NewRegistry())
	}
	return nil
}

// Metrics are the proxy's Prometheus metrics.
type Metrics struct {
	active   prometheus.Gauge
	accepted prometheus.Counter
	failures *prometheus.CounterVec
	commands *prometheus.CounterVec
	bytes    *prometheus.CounterVec
	// roundtrip: command sent to the backend until its reply was relayed.
	roundtrip *prometheus.HistogramVec
	// byCommand: commands' and roundtrip's series of each command byte,
	// looked up once (a label lookup hashes the label per statement).
	byCommand [256]atomic.Pointer[commandMetrics]
	// Captures: whether one runs, why each stopped, how sessions joined.
	captureActive prometheus.Gauge
	captureStops  *prometheus.CounterVec
	joins         *prometheus.CounterVec
}

// commandMetrics are one command kind's series.
type commandMetrics struct {
	commands  prometheus.Counter
	roundtrip prometheus.Observer
}

// command returns the series of command byte cmd.
func (m *Metrics) command(cmd byte) *commandMetrics {
	if c := m.byCommand[cmd].Load(); c != nil {
		return c
	}
	kind := capture.CommandKind(cmd).String()
	c := &commandMetrics{commands: m.commands.WithLabelValues(kind), roundtrip: m.roundtrip.WithLabelValues(kind)}
	m.byCommand[cmd].Store(c) // a racing store holds the same series
	return c
}

// NewMetrics creates the proxy's metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		active: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tandem_proxy_connections_active", Help: "Client connections being relayed."}),
		accepted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tandem_proxy_connections_total", Help: "Client connections accepted."}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tandem_proxy_connection_failures_total", Help: "Connections that ended in failure, by reason."}, []string{"reason"}),
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tandem_proxy_commands_total", Help: "Commands relayed, by kind."}, []string{"kind"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tandem_proxy_bytes_total", Help: "Bytes relayed, by direction."}, []string{"direction"}),
		roundtrip: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tandem_proxy_backend_duration_seconds",
			Help:    "From a command's arrival to the last byte of the backend's reply relayed to the client, by command kind.",
			Buckets: latency.MetricBuckets()}, []string{"kind"}),
	}
	m.captureActive = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "tandem_proxy_capture_active", Help: "1 while a capture records the relayed traffic, 0 while the proxy only relays."})
	m.captureStops = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tandem_proxy_capture_stops_total", Help: "Captures that ended, by reason: requested, duration, max-bytes, disk, shutdown."}, []string{"reason"})
	m.joins = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tandem_proxy_capture_sessions_total", Help: "Sessions that entered a capture: open-at-start (open when it started, with their state) or connected (during it)."}, []string{"how"})
	reg.MustRegister(m.active, m.accepted, m.failures, m.commands, m.bytes, m.roundtrip, m.captureActive, m.captureStops, m.joins)
	for _, r := range StopReasons() {
		m.captureStops.WithLabelValues(r)
	}
	m.joins.WithLabelValues("open-at-start")
	m.joins.WithLabelValues("connected")
	// Every reason from the start: a dashboard shows 0, not "no data".
	for _, r := range []string{reasonBackendUnreachable, reasonMalformed, reasonTLS, reasonUnsupported, reasonAuthFailed,
		reasonTooMany, reasonClientGone, reasonBackendGone, "panic", "other"} {
		m.failures.WithLabelValues(r)
	}
	return m
}

// Proxy accepts client connections and relays them to the backend.
type Proxy struct {
	cfg Config
	ln  net.Listener
	// live is the capture sessions record into now (nil: relay only).
	live      atomic.Pointer[liveCapture]
	hang      *hangup.Watcher // nil: epoll unavailable (Serve)
	metrics   *Metrics
	log       *slog.Logger
	tlsServer *tls.Config
	tlsClient *tls.Config
	nextID    atomic.Uint64
	active    atomic.Int64
	// handshakes holds a slot per connection not yet authenticated.
	handshakes chan struct{}
	wg         sync.WaitGroup

	mu struct {
		sync.Mutex
		conns map[*session]struct{}
	}
}

// New checks cfg and starts listening; Serve accepts.
func New(cfg Config) (*Proxy, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	p := &Proxy{cfg: cfg, metrics: cfg.Metrics, log: cfg.Logger, handshakes: make(chan struct{}, cfg.MaxHandshakes)}
	p.mu.conns = map[*session]struct{}{}
	if cfg.Recorder != nil {
		// A capture for the proxy's whole life (Run starts and stops its
		// own instead).
		p.live.Store(p.newLive(cfg.Recorder, cfg.CaptureResults, cfg.Commits))
		p.metrics.captureActive.Set(1)
	}
	if cfg.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			return nil, fmt.Errorf("proxy: load --tls-cert/--tls-key: %w", err)
		}
		p.tlsServer = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	if cfg.BackendTLS {
		host, _, _ := net.SplitHostPort(cfg.Backend)
		p.tlsClient = &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12, InsecureSkipVerify: cfg.BackendInsecure}
		if cfg.BackendCA != "" {
			pem, err := os.ReadFile(cfg.BackendCA)
			if err != nil {
				return nil, fmt.Errorf("proxy: --backend-ca: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("proxy: --backend-ca %s holds no PEM certificate", cfg.BackendCA)
			}
			p.tlsClient.RootCAs = pool
		}
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("proxy: listen on %s: %w", cfg.Listen, err)
	}
	p.ln = ln
	return p, nil
}

// Addr is the address the proxy listens on.
func (p *Proxy) Addr() net.Addr { return p.ln.Addr() }

// Serve accepts connections until ctx is done, then stops accepting, lets
// connections finish for DrainTimeout, closes the rest and waits for their
// goroutines. It does not close the recorder.
func (p *Proxy) Serve(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { p.ln.Close() })
	defer stop()
	wctx, cancelWatch := context.WithCancel(ctx)
	defer cancelWatch()
	// The hang-up watcher closes an idle session's client side the moment
	// its backend goes away; the idle watch is the backstop (a socket the
	// watcher could not take) and the only watch if epoll is unavailable.
	if h, herr := hangup.New(); herr != nil {
		p.log.Warn("cannot watch backends for their close; idle sessions notice it within a second", "err", herr)
	} else {
		p.hang = h
		defer h.Close() // after the sessions' goroutines (deferred below)
	}
	go p.watchIdle(wctx)
	var err error
	for {
		c, aerr := p.ln.Accept()
		if aerr != nil {
			if ctx.Err() == nil && !errors.Is(aerr, net.ErrClosed) {
				var ne net.Error
				if errors.As(aerr, &ne) && ne.Timeout() {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				err = fmt.Errorf("proxy: accept: %w", aerr)
			}
			break
		}
		p.metrics.accepted.Inc()
		p.wg.Add(1)
		go p.handle(c)
	}
	p.drain()
	return err
}

// drain waits for sessions to end, then closes those still open.
func (p *Proxy) drain() {
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	p.mu.Lock()
	open := len(p.mu.conns)
	p.mu.Unlock()
	if open > 0 && p.cfg.Notice != nil {
		p.cfg.Notice(fmt.Sprintf("stopping: waiting up to %s for %d open client sessions to end (Ctrl-C again closes them now)", p.cfg.DrainTimeout, open))
	}
	select {
	case <-done:
		return
	case <-time.After(p.cfg.DrainTimeout):
	case <-p.cfg.Force:
	}
	// Clients first: a session whose GTID question is still waiting asks
	// it on its backend as it ends (askAtEnd, bounded by endAskTimeout);
	// then the backends of those that did not end.
	p.mu.Lock()
	n := len(p.mu.conns)
	for s := range p.mu.conns {
		s.client.Close()
	}
	p.mu.Unlock()
	p.log.Info("shutdown: closed the connections still open", "connections", n, "drain_timeout", p.cfg.DrainTimeout)
	select {
	case <-done:
		return
	case <-time.After(endAskTimeout + 100*time.Millisecond):
	}
	p.mu.Lock()
	for s := range p.mu.conns {
		s.backend.Close()
	}
	p.mu.Unlock()
	<-done
}

// handshakeSlot takes one of the --max-handshakes slots, waiting for up to
// the handshake timeout when all are taken; false when none came free.
func (p *Proxy) handshakeSlot() bool {
	select {
	case p.handshakes <- struct{}{}:
		return true
	default:
	}
	t := time.NewTimer(p.cfg.HandshakeTimeout)
	defer t.Stop()
	select {
	case p.handshakes <- struct{}{}:
		return true
	case <-t.C:
		return false
	}
}

// handle serves one client connection.
func (p *Proxy) handle(c net.Conn) {
	defer p.wg.Done()
	id := p.nextID.Add(1)
	log := p.log.With("session", id, "client", c.RemoteAddr().String())
	c = p.wrapIO(c, log)
	start := time.Now()
	client := wire.NewConn(c)
	defer client.Close()
	// refuse answers 1040 when counter is past its limit (and takes the
	// slot back); else the slot is the caller's.
	refuse := func(counter *atomic.Int64, limit int, msg string, args ...any) bool {
		if counter.Add(1) <= int64(limit) {
			return false
		}
		counter.Add(-1)
		p.metrics.failures.WithLabelValues(reasonTooMany).Inc()
		client.WritePacket(0, proxyErr(1040, "08004", msg, args...).Append(nil))
		client.Flush()
		log.Warn("connection refused: " + fmt.Sprintf(msg, args...))
		return true
	}
	if refuse(&p.active, p.cfg.MaxConnections, "too many connections (--max-connections %d)", p.cfg.MaxConnections) {
		return
	}
	defer p.active.Add(-1)
	p.metrics.active.Inc()
	defer p.metrics.active.Dec()
	if !p.handshakeSlot() {
		p.metrics.failures.WithLabelValues(reasonTooMany).Inc()
		msg := fmt.Sprintf("too many connections authenticating at once (--max-handshakes %d) for %s; try again", p.cfg.MaxHandshakes, p.cfg.HandshakeTimeout)
		client.WritePacket(0, proxyErr(1040, "08004", "%s", msg).Append(nil))
		client.Flush()
		log.Warn("connection refused: " + msg)
		return
	}
	endHandshake := sync.OnceFunc(func() { <-p.handshakes })
	defer endHandshake()

	bc, err := net.DialTimeout("tcp", p.cfg.Backend, p.cfg.DialTimeout)
	if err != nil {
		p.metrics.failures.WithLabelValues(reasonBackendUnreachable).Inc()
		client.WritePacket(0, proxyErr(1105, "HY000", "cannot reach backend %s: %v", p.cfg.Backend, err).Append(nil))
		client.Flush()
		log.Warn("backend unreachable", "backend", p.cfg.Backend, "err", err)
		return
	}
	bc = p.wrapIO(bc, log)
	s := &session{p: p, id: id, client: client, backend: wire.NewConn(bc)}
	defer s.backend.Close()
	if p.hang != nil {
		if remove, err := p.hang.Add(bc, s.backendHungUp); err == nil {
			defer remove() // before the backend closes
		}
	}
	p.mu.Lock()
	p.mu.conns[s] = struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.mu.conns, s)
		p.mu.Unlock()
		p.metrics.bytes.WithLabelValues("client_to_backend").Add(float64(s.client.BytesIn))
		p.metrics.bytes.WithLabelValues("backend_to_client").Add(float64(s.backend.BytesIn))
	}()
	defer func() {
		if r := recover(); r != nil {
			p.metrics.failures.WithLabelValues("panic").Inc()
			log.Error("panic in connection; closing it", "panic", r, "stack", string(debug.Stack()))
		}
	}()

	err = s.handshake()
	endHandshake()
	// The client's flags and collation: replay asks for the ones that change
	// results (CLIENT_FOUND_ROWS changes affected-row counts).
	// The session follows its state whether or not a capture runs; it
	// records while it is in one (capture.go).
	s.capMu.Lock()
	s.cs = capture.NewSession(id, capture.State{User: s.user, Schema: s.schema, Caps: s.caps, Collation: s.collation, ConnID: s.connID},
		capture.Options{MaxRecordBytes: p.cfg.MaxRecordBytes}, nil)
	s.joinAtConnect()
	if err != nil {
		msg := ""
		var ce *connError
		if errors.As(err, &ce) && ce.reason == reasonAuthFailed {
			msg = ce.err.Error()
		}
		s.cs.Connect(start, time.Since(start), false, msg)
		s.refusedLocked()
		s.capMu.Unlock()
		p.endWith(s, log, err)
		return
	}
	s.cs.Connect(start, time.Since(start), true, "")
	s.capMu.Unlock()
	log.Debug("session started", "user", s.user, "schema", s.schema, "tls", s.clientTLS)

	err = s.serveCommands()
	if errors.Is(err, errRawMode) {
		s.capMu.Lock()
		s.raw = true
		s.capMu.Unlock()
		err = s.relayRaw()
		if errors.Is(err, net.ErrClosed) {
			err = nil
		}
	}
	s.capMu.Lock()
	s.endLocked(time.Now())
	s.capMu.Unlock()
	p.endWith(s, log, err)
}

// wrapIO puts a connection on raw non-blocking calls with the poller
// (internal/rawio), or on blocking calls with --io blocking; if the switch
// to blocking fails the connection stays on Go's poller. With one P (the
// default on up to 7 CPUs) the poller's connections yield before a read
// that follows a write: a relay's next read is of what the peer answers,
// and the goroutines already woken go first. With two Ps on 2 CPUs that
// cost 3 % of the QPS, so they do not.
func (p *Proxy) wrapIO(c net.Conn, log *slog.Logger) net.Conn {
	if p.cfg.IO == IOPoller {
		if runtime.GOMAXPROCS(0) == 1 {
			return rawio.WrapYielding(c)
		}
		return rawio.Wrap(c)
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	bc, err := blockio.Wrap(tc)
	if err != nil {
		log.Warn("cannot switch the connection to blocking I/O; it stays on the poller", "err", err)
		return c
	}
	return bc
}

// endWith counts and logs how a session ended, and tells the client what
// the proxy has to say, if anything.
func (p *Proxy) endWith(s *session, log *slog.Logger, err error) {
	if err == nil {
		log.Debug("session ended")
		return
	}
	var ce *connError
	if !errors.As(err, &ce) {
		p.metrics.failures.WithLabelValues("other").Inc()
		log.Warn("connection closed", "err", err)
		return
	}
	p.metrics.failures.WithLabelValues(ce.reason).Inc()
	if ce.client != nil {
		s.client.WritePacket(s.errSeq, ce.client.Append(nil))
		s.client.Flush()
	}
	if ce.reason == reasonAuthFailed {
		log.Info("login refused by the server", "err", ce.err)
		return
	}
	if ce.reason == reasonClientGone && s.user == "" {
		// Gone before it said who it is: a port probe or health check.
		log.Debug("client left before the handshake", "err", ce.err)
		return
	}
	log.Warn("connection closed", "reason", ce.reason, "err", ce.err)
}

// idleCheck is how long a session waits for its client before the idle
// watch looks at its backend, and how often it looks.
const idleCheck = 500 * time.Millisecond

// watchIdle closes the client's side of sessions whose backend closed the
// connection while they were idle (the server's wait_timeout, a KILL):
// directly, the client would see its connection end, and database/sql
// drops such a connection before using it instead of failing the next
// query on it. It peeks at the backends of sessions idle for more than
// idleCheck, consuming nothing; busy sessions cost nothing.
func (p *Proxy) watchIdle(ctx context.Context) {
	t := time.NewTicker(idleCheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			var idle []*session
			p.mu.Lock()
			for s := range p.mu.conns {
				if since := s.idleSince.Load(); since != 0 && now.UnixNano()-since > int64(idleCheck) {
					idle = append(idle, s)
				}
			}
			p.mu.Unlock()
			for _, s := range idle {
				if s.idleSince.Load() != 0 && peerClosed(s.backend.Conn) {
					s.backendClosedIdle.Store(true)
					s.client.Close()
				}
			}
		}
	}
}

// peerClosed reports whether c's peer closed it, asking the kernel about
// its socket (under TLS, the socket beneath), without reading.
func peerClosed(c net.Conn) bool {
	switch v := hangup.Innermost(c).(type) { // beneath *tls.Conn, wire's prefix
	case interface{ PeerClosed() bool }:
		return v.PeerClosed()
	case syscall.Conn:
		rc, err := v.SyscallConn()
		return err == nil && blockio.PeerClosedRaw(rc)
	}
	return false
}
