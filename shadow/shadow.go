// Package shadow runs shadows beside tandem proxy: live replays of the
// capture as it is written, each on a target of its own (another engine,
// a copy of the primary), each statement compared at once with the
// primary's captured response. Shadows only read the capture log: the
// proxy's client path does no shadow work, and a shadow that is slow,
// down or failing never reaches a client.
package shadow

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tandemdb/tandem/compare"
	"github.com/tandemdb/tandem/latency"
	"github.com/tandemdb/tandem/replay"
	"github.com/tandemdb/tandem/report"
	"github.com/tandemdb/tandem/store"
	"github.com/tandemdb/tandem/targets"
)

// Modes (Config.Mode).
const (
	All      = "all"       // every record, writes too: a shadow cloned from the primary
	ReadOnly = "read-only" // no writes: a shadow with other data
)

// Config is what `tandem proxy --shadow …` runs.
type Config struct {
	// Specs are targets, "name=DSN[,engine=X][,options=…]"; Listed are
	// more, from a --config file's shadows: list.
	Specs  []string
	Listed []targets.Target
	// Mode is All (default) or ReadOnly.
	Mode string
	// Runs is where each shadow's run directory goes (default
	// CAPTURE.shadows/NAME).
	Runs string
	// MaxLag, if set, makes a shadow further behind skip ahead at
	// transaction boundaries. StatusInterval paces the status log line
	// (default 10s). TargetTimeout fails a shadow whose server stops
	// answering a call (default 30s).
	MaxLag, StatusInterval, TargetTimeout time.Duration
	// KeepCommits is how long before what it replays a shadow keeps the
	// capture's commits for its verdicts (0: 10 minutes): a difference in
	// a statement whose transaction began earlier is counted
	// order-ambiguous. About 32 bytes per commit and table written.
	KeepCommits time.Duration
	// Worker is the command line that starts a shadow's worker process
	// (default: this executable's WorkerCommand).
	Worker []string
	// MinFreeBytes is the free-space floor of a worker's copy of the feed
	// (the capture's, --capture-min-free): past it the shadow's feed ends
	// (it replays what it has) before the disk the capture may share fills.
	// Its run directory has half that floor (0: none).
	MinFreeBytes int64
	// Replicas: the shadows are replicas of the primary, held and aligned
	// to the capture's start (their replication removed) before any
	// statement runs on them (--shadow-replicas).
	Replicas bool
	// Key encrypts a worker's copy of the feed and the shadows' run
	// directories, as it does the capture (store.Key; nil: neither). It
	// reaches the worker over its control socket only.
	Key *store.Key
}

// local is shadows running in this process: a worker's (worker.go).
type local struct {
	// bypassed is where writes that bypassed the proxy changed each table,
	// set at the capture's stop (Finish), read by every shadow's final
	// comparison (replay.Config.Bypassed).
	bypassed atomic.Pointer[compare.Bypassed]
	log      *slog.Logger
	lives    []*follower
	lats     []*latencies // per shadow, as lives
	// feedLost says why the worker's feed broke off ("" while it flows):
	// the shadow then replays what it has and shows down.
	feedLost atomic.Pointer[string]
	dirs     []string
	key      *store.Key // of the run directories (Config.Key)
	drain    chan struct{}
	cancel   context.CancelFunc
	done     chan struct{} // the status loop ended
}

// Check says what is wrong with the configuration's settings; Targets
// checks the shadows themselves.
func (cfg *Config) Check() error {
	switch cfg.Mode {
	case "":
		cfg.Mode = All
	case All, ReadOnly:
	default:
		return fmt.Errorf("--shadow-mode %q: want %s or %s", cfg.Mode, All, ReadOnly)
	}
	if cfg.MaxLag < 0 {
		return errors.New("--shadow-max-lag must not be negative")
	}
	if cfg.KeepCommits < 0 {
		return errors.New("--shadow-keep-commits must not be negative (0 keeps the default, 10m)")
	}
	return nil
}

// Targets checks each shadow target — its spec, a unique name, reachable,
// its engine present — and returns them: a wrong DSN or a missing engine
// stops the proxy before it creates its capture, as replay's targets do.
func (cfg Config) Targets(ctx context.Context) ([]targets.Target, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	all := slices.Clone(cfg.Listed)
	for _, spec := range cfg.Specs {
		t, err := targets.Parse(spec)
		if err != nil {
			return nil, fmt.Errorf("--shadow: %w", err)
		}
		all = append(all, t)
	}
	var ts []targets.Target
	var dbs []*sql.DB
	defer func() {
		for _, db := range dbs {
			db.Close()
		}
	}()
	for _, t := range all {
		if slices.ContainsFunc(ts, func(o targets.Target) bool { return o.Name == t.Name }) {
			return nil, fmt.Errorf("--shadow: two shadows are named %q", t.Name)
		}
		db, err := t.Open()
		if err != nil {
			return nil, fmt.Errorf("shadow %s: %w", t.Name, err)
		}
		dbs = append(dbs, db)
		if _, err = t.Check(ctx, db); err != nil {
			err = fmt.Errorf("shadow %s: %w", t.Name, err)
		} else if cfg.Mode == All && !cfg.Replicas {
			// Written to, it must not apply another server's changes too
			// (replay.CheckNotApplying); read-only it may, and replicas
			// (--shadow-replicas) are stopped at the start point first.
			if err = replay.CheckNotApplying(ctx, "shadow", t, db); err != nil {
				err = fmt.Errorf("%w; or give --shadow-replicas (the shadows are then brought to the capture's start and detached) or --shadow-mode read-only", err)
			}
		}
		if err == nil && cfg.Mode == All {
			if err = replay.CheckWritable(ctx, "shadow", t, db); err != nil {
				err = fmt.Errorf("%w; or give --shadow-mode read-only (no writes sent)", err)
			}
		}
		if err != nil {
			return nil, err
		}
		ts = append(ts, t)
	}
	// Shadows on one server: one database each, and xids of their own
	// (each replays in a worker of its own, which cannot tell). Every
	// shadow's xids are its own: it may be on the primary's server, whose
	// live XA transactions hold the captured xids (the proxy has no
	// account there to ask).
	servers, unknown := targets.Servers(ctx, ts, dbs)
	if err := targets.SameTables(ts, servers, unknown); err != nil {
		return nil, fmt.Errorf("--shadow: %w", err)
	}
	for i, n := range targets.SharedBefore(servers) {
		ts[i].Shared = n + 1
	}
	return ts, nil
}

// startLocal starts a live replay of the capture dir, as live (a live
// reader) holds it, on each of ts, in this process.
func (cfg Config) startLocal(ts []targets.Target, dir, runs string, live *store.Reader, reg prometheus.Registerer, log *slog.Logger) (*local, error) {
	sctx, cancel := context.WithCancel(context.Background())
	s := &local{log: log, key: cfg.Key, drain: make(chan struct{}), cancel: cancel, done: make(chan struct{})}
	metrics := replay.NewMetrics(reg)
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "tandem_shadow_statement_duration_seconds",
		Help:    "Latency of the statements a shadow compared, by side: on the primary (as the proxy captured it: from the command's arrival to the reply's end) and on the shadow (its service time), and by statement class.",
		Buckets: latency.MetricBuckets()}, []string{"shadow", "side", "class"})
	reg.MustRegister(latency)
	for _, t := range ts {
		rd := filepath.Join(runs, t.Name)
		var lv *follower
		lat := newLatencies(latency, t.Name)
		// The shadow's goroutines carry a profiler label, so a CPU profile
		// of the proxy (--pprof) tells the client path from the shadows'
		// work (make bench-proxy).
		pprof.Do(sctx, pprof.Labels("tandem", "shadow", "shadow", t.Name), func(lctx context.Context) {
			lv = startFollower(lctx, replay.Config{Capture: dir, RunDir: rd, RunID: "shadow-" + t.Name, Targets: []targets.Target{t},
				Logger: log, Metrics: metrics, TargetTimeout: cfg.TargetTimeout, Key: cfg.Key, Bypassed: s.bypassed.Load, RunMinFree: runFloor(cfg.MinFreeBytes)},
				follow{reader: live, from: 1, drain: s.drain, maxLag: cfg.MaxLag, readOnly: cfg.Mode == ReadOnly, observe: lat.observe,
					keepCommits: cfg.KeepCommits})
		})
		s.lives = append(s.lives, lv)
		s.lats = append(s.lats, lat)
		s.dirs = append(s.dirs, rd)
	}
	reg.MustRegister(collector{s})
	go s.status(cfg.StatusInterval)
	return s, nil
}

// status logs every shadow's state every interval until the shadows end.
func (s *local) status(every time.Duration) {
	defer close(s.done)
	if every <= 0 {
		every = 10 * time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.drain:
			return
		case <-t.C:
			for i, lv := range s.lives {
				st := s.stats(lv)
				s.log.Info("shadow status", "shadow", lv.name, "state", stateOf(st), "lag_records", st.LagRecords,
					"lag", time.Duration(st.LagSeconds*float64(time.Second)).Round(time.Millisecond), "compared", st.Compared,
					"divergent", classes(st.Divergent), "counted_apart", classes(st.Ambiguous), "skipped", st.Skipped, "unanswered", st.Unavailable,
					"p95_vs_primary", s.lats[i].ratios(true))
			}
		}
	}
}

// stats is a shadow's state, down if its feed broke off.
func (s *local) stats(lv *follower) stats {
	st := lv.stats()
	if why := s.feedLost.Load(); why != nil {
		st.Up, st.Down = false, "its feed broke off: "+*why
	}
	return st
}

// runFloor is a shadow's run directory's free-space floor for replay
// (Config.RunMinFree) from the capture's (0: none): half of it, so that
// where the capture stops and the shadow's feed ends (it replays what it
// has), the run still has room to record that and end.
func runFloor(minFree int64) int64 {
	if minFree <= 0 {
		return -1
	}
	return max(minFree/2, 1)
}

func stateOf(st stats) string {
	switch {
	case !st.Up:
		return "down: " + st.Down
	case st.Lagging:
		return "lagging"
	}
	return "up"
}

// classes prints counts by name, in name order, "none" for none.
func classes(m map[string]int64) string {
	var parts []string
	for k, v := range m {
		if v != 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", k, v))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// stop lets every shadow replay what the capture holds, until abort is
// closed, then ends them and prints one line each. bypassed lists the
// writes that bypassed the proxy during the capture (the proxy's
// binary-log check; nil: none known): each shadow's final comparison
// counts the answers on their tables from then on apart, as replay does.
func (s *local) stop(abort <-chan struct{}, out io.Writer, bypassed []compare.BypassedWrite) error {
	if len(bypassed) > 0 {
		b := compare.NewBypassed()
		for _, w := range bypassed {
			b.Add(w)
		}
		s.bypassed.Store(b)
	}
	close(s.drain)
	<-s.done
	var errs []error
	// notFinished: each shadow's records not finished when the drain ran
	// out (or a second Ctrl-C came), taken before the runs are cancelled.
	var notFinished []uint64
	for i, lv := range s.lives {
		select {
		case <-lv.done:
		case <-abort:
			if notFinished == nil {
				for _, l := range s.lives {
					notFinished = append(notFinished, s.stats(l).LagRecords)
				}
			}
			s.cancel()
			<-lv.done
		}
		res, err := lv.wait()
		var rep *report.Report
		if err == nil {
			rep, err = report.Load(res.RunDir, store.WithKey(s.key))
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("shadow %s: %w", lv.name, err))
			continue
		}
		st := s.stats(lv)
		end := ""
		// The run's final comparison is the verdict: it knows what the
		// live counts could not (the writes that bypassed the proxy, found
		// at the capture's stop), so the line says what its report says.
		compared, divergent, apart := st.Compared, st.Divergent, st.Ambiguous
		if pts := rep.Points; len(pts) > 0 && len(pts[0].Targets) > 0 {
			tg := pts[0].Targets[0]
			if tg.Failed != "" {
				end = ", failed: " + tg.Failed
			}
			if vc := tg.VsCapture; vc != nil {
				compared, divergent, apart = vc.Compared, vc.ByClass, vc.AmbiguousBy
			}
		}
		if why := s.feedLost.Load(); why != nil {
			end += ", its feed broke off (it replayed what had arrived): " + *why
		} else if !rep.Finished && end == "" {
			// Its drain ran out, or it was aborted (a second Ctrl-C):
			// what it had not replayed is in no count above.
			if i < len(notFinished) {
				end += fmt.Sprintf(", stopped before the capture's end with %d records not finished (they are not compared)", notFinished[i])
			} else {
				end += ", stopped before the capture's end (what it had not finished is not compared)"
			}
		}
		fmt.Fprintf(out, "tandem proxy: shadow %s: %d compared with the primary, divergent %s, counted apart %s, %d skipped, %d unanswered; p95 vs the primary %s%s; tandem report %s\n",
			lv.name, compared, classes(divergent), classes(apart), st.Skipped, st.Unavailable, s.lats[i].ratios(false), end, s.dirs[i])
	}
	s.cancel()
	return errors.Join(errs...)
}

const descUpHelp = "1 while the shadow's server answers, 0 while it is down (its feed waits and retries) or its worker has ended."

// collector exports the shadows' state to Prometheus.
type collector struct{ s *local }

var (
	descShadowUp        = prometheus.NewDesc("tandem_shadow_up", descUpHelp, []string{"shadow"}, nil)
	descShadowLagRecs   = prometheus.NewDesc("tandem_shadow_lag_records", "Records committed to the capture that the shadow has not dispatched yet.", []string{"shadow"}, nil)
	descShadowLagSecs   = prometheus.NewDesc("tandem_shadow_lag_seconds", "How far behind the capture the record the shadow dispatched last is.", []string{"shadow"}, nil)
	descShadowLagging   = prometheus.NewDesc("tandem_shadow_lagging", "1 while the shadow is past --shadow-max-lag and skipping ahead.", []string{"shadow"}, nil)
	descShadowSkipped   = prometheus.NewDesc("tandem_shadow_skipped_total", "Records the shadow left out: behind --shadow-max-lag, or writes in read-only mode.", []string{"shadow"}, nil)
	descShadowCompared  = prometheus.NewDesc("tandem_shadow_compared_total", "Statements compared with the primary's captured response.", []string{"shadow"}, nil)
	descShadowDivergent = prometheus.NewDesc("tandem_shadow_divergent_total", "Statements whose outcome differs from the primary's, by class.", []string{"shadow", "class"}, nil)
	descShadowAmbiguous = prometheus.NewDesc("tandem_shadow_ambiguous_total", "Differing outcomes counted apart, by reason (the capture's order, a retry, a write the shadow skipped).", []string{"shadow", "reason"}, nil)
	descShadowUnavail   = prometheus.NewDesc("tandem_shadow_unavailable_total", "Statements the shadow could not run for a reason of its own (down, connection lost).", []string{"shadow"}, nil)
)

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descShadowUp, descShadowLagRecs, descShadowLagSecs, descShadowLagging, descShadowSkipped, descShadowCompared, descShadowDivergent, descShadowAmbiguous, descShadowUnavail} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	for _, lv := range c.s.lives {
		st := c.s.stats(lv)
		n := lv.name
		ch <- prometheus.MustNewConstMetric(descShadowUp, prometheus.GaugeValue, b(st.Up), n)
		ch <- prometheus.MustNewConstMetric(descShadowLagRecs, prometheus.GaugeValue, float64(st.LagRecords), n)
		ch <- prometheus.MustNewConstMetric(descShadowLagSecs, prometheus.GaugeValue, st.LagSeconds, n)
		ch <- prometheus.MustNewConstMetric(descShadowLagging, prometheus.GaugeValue, b(st.Lagging), n)
		ch <- prometheus.MustNewConstMetric(descShadowSkipped, prometheus.CounterValue, float64(st.Skipped), n)
		ch <- prometheus.MustNewConstMetric(descShadowCompared, prometheus.CounterValue, float64(st.Compared), n)
		ch <- prometheus.MustNewConstMetric(descShadowUnavail, prometheus.CounterValue, float64(st.Unavailable), n)
		for _, class := range compare.Classes {
			ch <- prometheus.MustNewConstMetric(descShadowDivergent, prometheus.CounterValue, float64(st.Divergent[class]), n, class)
		}
		for _, reason := range compare.Reasons {
			ch <- prometheus.MustNewConstMetric(descShadowAmbiguous, prometheus.CounterValue, float64(st.Ambiguous[reason]), n, reason)
		}
	}
}

// latencies are a shadow's compared statements' latencies, on the primary
// and on the shadow, per class: exported to Prometheus
// (tandem_shadow_statement_duration_seconds), and kept for the status
// line (since the last one) and the closing line (in all).
type latencies struct {
	h    *prometheus.HistogramVec
	name string
	mu   sync.Mutex
	by   map[string]*classLat
}

type classLat struct {
	obs             [2]prometheus.Observer // primary, shadow
	interval, total latPair
}

type latPair struct{ primary, shadow latency.Histogram }

func newLatencies(h *prometheus.HistogramVec, name string) *latencies {
	return &latencies{h: h, name: name, by: map[string]*classLat{}}
}

// observe takes one compared statement's latency on each side (a
// a shadow's observe).
func (l *latencies) observe(class string, primary, shadow time.Duration) {
	l.mu.Lock()
	c := l.by[class]
	if c == nil {
		c = &classLat{}
		if l.h != nil {
			c.obs = [2]prometheus.Observer{l.h.WithLabelValues(l.name, "primary", class), l.h.WithLabelValues(l.name, "shadow", class)}
		}
		l.by[class] = c
	}
	for _, p := range []*latPair{&c.interval, &c.total} {
		p.primary.Record(primary)
		p.shadow.Record(shadow)
	}
	l.mu.Unlock()
	if c.obs[0] != nil {
		c.obs[0].Observe(primary.Seconds())
		c.obs[1].Observe(shadow.Seconds())
	}
}

// ratios says, per class, the shadow's p95 latency against the primary's:
// "read 0.81ms/0.62ms=1.31x, write …" (since the last call, with
// interval; else in all), "none" with nothing compared.
func (l *latencies) ratios(interval bool) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var parts []string
	for class, c := range l.by {
		p := &c.total
		if interval {
			p = &c.interval
		}
		if p.primary.Count() == 0 {
			continue
		}
		sp, pp := p.shadow.Quantile(0.95), p.primary.Quantile(0.95)
		ratio := "-"
		if pp > 0 {
			ratio = fmt.Sprintf("%.2fx", float64(sp)/float64(pp))
		}
		parts = append(parts, fmt.Sprintf("%s %s/%s=%s", class, roundDur(sp), roundDur(pp), ratio))
		if interval {
			p.primary.Reset()
			p.shadow.Reset()
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// roundDur keeps a latency's three leading digits.
func roundDur(d time.Duration) time.Duration {
	for r := time.Duration(1); ; r *= 10 {
		if d < 1000*r {
			return d.Round(r)
		}
	}
}
