package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
	"github.com/tandemdb/tandem/capture"
	"github.com/tandemdb/tandem/internal/metricsrv"
	"github.com/tandemdb/tandem/store"
)

// RunConfig is what `tandem proxy` runs: a proxy, its capture and its
// metrics endpoint.
type RunConfig struct {
	Config
	// CaptureDir, if set, is a new directory to record into.
	CaptureDir string
	// SyncInterval bounds what a crash of the proxy can lose of the capture.
	SyncInterval time.Duration
	// CaptureMaxBytes and CaptureMinFree stop the capture cleanly (relaying
	// goes on) at a size, or before the disk fills (store.WriterOptions).
	CaptureMaxBytes, CaptureMinFree int64
	// MetricsAddr serves /metrics ("off" disables; a bare ":PORT" is loopback).
	MetricsAddr string
	// Pprof serves Go's profiles under /debug/pprof/ on the metrics endpoint.
	Pprof bool
	// Procs is how many CPUs run Go code at once (GOMAXPROCS), for the
	// startup line; the command sets it.
	Procs int
	// Ready, if set, is called with the listening address once accepting.
	Ready func(addr string)
	// Shadows, if set, start live replays of the capture as it is written
	// (package shadow); on shutdown they replay what the capture holds,
	// for up to ShadowDrainTimeout (default 1m), before it closes.
	Shadows            ShadowStarter
	ShadowDrainTimeout time.Duration
}

// ShadowStarter starts shadows on the capture w writes into dir.
type ShadowStarter interface {
	Start(ctx context.Context, dir string, w *store.Writer, reg prometheus.Registerer, log *slog.Logger) (ShadowSet, error)
}

// ShadowSet is running shadows. Their metrics are gathered from them
// for /metrics.
type ShadowSet interface {
	Stop(timeout time.Duration, force <-chan struct{}, out io.Writer) error
	prometheus.Gatherer
}

// removeNew removes what a failed start wrote into dir: the directory
// itself if this start created it, else only its contents (it was empty:
// store.Create refuses any other).
func removeNew(dir string, existed bool) {
	if !existed {
		os.RemoveAll(dir)
		return
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		os.RemoveAll(filepath.Join(dir, e.Name()))
	}
}

// Run serves until ctx is done, then drains connections and closes the
// capture, and writes a one-line summary to out.
func Run(ctx context.Context, cfg RunConfig, out io.Writer) error {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
		cfg.Logger = log
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	cfg.Metrics = NewMetrics(reg)

	if cfg.Shadows != nil && cfg.CaptureDir == "" {
		return errors.New("proxy: --shadow needs --capture DIR: shadows replay the capture as it is written")
	}
	// Everything that can fail is tried before the capture is created (the
	// listener, TLS, the metrics endpoint), so that a failed start leaves
	// no capture behind for the retry to trip on.
	if cfg.Notice == nil {
		cfg.Notice = func(msg string) { fmt.Fprintf(out, "tandem proxy: %s\n", msg) }
	}
	p, err := New(cfg.Config)
	if err != nil {
		return err
	}
	mctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The shadows, once started, add what their workers gather.
	var shadows atomic.Pointer[ShadowSet]
	gather := prometheus.Gatherers{reg, prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		if sh := shadows.Load(); sh != nil {
			return (*sh).Gather()
		}
		return nil, nil
	})}
	maddr, mwait, err := metricsrv.Listen(mctx, cfg.MetricsAddr, gather, reg, cfg.Pprof)
	if err != nil {
		p.ln.Close()
		return err
	}
	var w *store.Writer
	discard := func() {} // removes a capture this start created, on failure
	if cfg.CaptureDir != "" {
		_, statErr := os.Stat(cfg.CaptureDir)
		existed := statErr == nil
		source := fmt.Sprintf("proxy %s -> %s", cfg.Listen, cfg.Backend)
		w, err = store.Create(cfg.CaptureDir, store.WriterOptions{Source: source, FlushInterval: cfg.SyncInterval, Logger: log, Metrics: store.NewMetrics(reg),
			MaxBytes: cfg.CaptureMaxBytes, MinFreeBytes: cfg.CaptureMinFree})
		if err != nil {
			p.ln.Close()
			cancel()
			mwait()
			return err
		}
		discard = func() {
			w.Close()
			removeNew(cfg.CaptureDir, existed)
		}
		reg.MustRegister(w.Collector())
		cfg.Recorder = capture.NewRecorder(w, log)
		p.recorder = cfg.Recorder // before Serve: no session exists yet
	}
	// Shadows start last: every later failure would have to stop them
	// before the capture they read closes.
	var sh ShadowSet
	if cfg.Shadows != nil {
		if sh, err = cfg.Shadows.Start(ctx, cfg.CaptureDir, w, reg, log); err != nil {
			p.ln.Close()
			cancel()
			mwait()
			discard()
			return fmt.Errorf("proxy: %w", err)
		}
		shadows.Store(&sh)
	}
	what := "relaying only (no --capture)"
	if w != nil {
		what = "capturing into " + cfg.CaptureDir
	}
	metrics := "metrics off"
	if maddr != "" {
		metrics = "metrics on http://" + maddr + "/metrics"
	}
	procs := ""
	if cfg.Procs > 0 {
		procs = fmt.Sprintf(", %d procs, %s I/O", cfg.Procs, p.cfg.IO)
	}
	fmt.Fprintf(out, "tandem proxy: listening on %s, backend %s, %s, %s%s\n", p.Addr(), cfg.Backend, what, metrics, procs)
	if cfg.Ready != nil {
		cfg.Ready(p.Addr().String())
	}
	serveErr := p.Serve(ctx)
	forced := false // a second Ctrl-C came while the clients drained
	select {
	case <-cfg.Force:
		forced = true
	default:
	}
	var closeErr error
	if sh != nil {
		// What the clients sent is in the capture: let the shadows replay
		// it all before the capture closes.
		if err := w.Flush(); err != nil && !errors.Is(err, store.ErrStopped) {
			log.Warn("flushing the capture for the shadows", "err", err)
		}
		drain := cfg.ShadowDrainTimeout
		if drain <= 0 {
			drain = time.Minute
		}
		if !forced {
			fmt.Fprintf(out, "tandem proxy: stopping: the shadows replay what the capture holds, for up to %s (Ctrl-C again to stop them now)\n", drain)
		}
		closeErr = sh.Stop(drain, cfg.Force, out)
	}
	if w != nil {
		closeErr = errors.Join(closeErr, cfg.Recorder.Close())
		st := w.Stats()
		fmt.Fprintf(out, "tandem proxy: %d sessions, %d records captured into %s, %d dropped\n", p.nextID.Load(), st.Committed, cfg.CaptureDir, st.Dropped)
	} else {
		fmt.Fprintf(out, "tandem proxy: %d sessions relayed\n", p.nextID.Load())
	}
	cancel()
	mwait()
	return errors.Join(serveErr, closeErr)
}
