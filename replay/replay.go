// Package replay replays a capture against several targets at once and
// compares them: every statement's latency per target, and every
// statement's outcome against the baseline target's.
//
// Each target has its own reader of the capture, its own connections and
// its own outcome writer, so targets run independently: a slow or failing
// target never slows another. Outcomes go to the run directory (store's
// run format), and divergences are found afterwards by a merge join of the
// targets' outcomes in sequence order, so memory does not grow with the
// capture.
package replay

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/tandemdb/tandem/store"
	"github.com/tandemdb/tandem/target"
)

// Config is what `tandem replay` runs.
type Config struct {
	Capture string
	RunDir  string
	Targets []target.Target
	// Speed scales the captured pacing: 1 as captured, 2 twice as fast, 0
	// as fast as possible.
	Speed float64
	// Concurrency > 0 regroups whole transactions onto that many connections
	// per target; 0 replays each captured session on its own connection.
	Concurrency int
	// Loop replays the capture this many times (at least once); Duration,
	// if set, loops until it has passed.
	Loop     int
	Duration time.Duration
	// ReportInterval prints a progress line per target; 0 disables.
	ReportInterval time.Duration
	// Samples kept per (digest, divergence class).
	Samples int
	// IO is how connections wait for replies: IOBlocking (the default,
	// "" too) or IOPoller.
	IO     string
	Logger *slog.Logger
}

func (c *Config) check() error {
	if c.Capture == "" {
		return errors.New("replay: no capture; give the capture directory")
	}
	if len(c.Targets) == 0 {
		return errors.New("replay: no targets; give --target name=DSN[,engine=X] (two or more to compare)")
	}
	if len(c.Targets) > 250 {
		return errors.New("replay: at most 250 targets")
	}
	if c.RunDir == "" {
		return errors.New("replay: no run directory; give --run DIR")
	}
	if c.Speed < 0 {
		return errors.New("replay: --speed must not be negative")
	}
	if c.Concurrency < 0 {
		return errors.New("replay: --concurrency must not be negative")
	}
	switch c.IO {
	case "":
		c.IO = IOBlocking
	case IOBlocking, IOPoller:
	default:
		return fmt.Errorf("replay: --io %q: want %s or %s", c.IO, IOBlocking, IOPoller)
	}
	if c.Loop < 1 {
		c.Loop = 1
	}
	if c.Samples <= 0 {
		c.Samples = 3
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	seen := map[string]bool{}
	baselines := 0
	for _, t := range c.Targets {
		if seen[t.Name] {
			return fmt.Errorf("replay: two targets named %q", t.Name)
		}
		seen[t.Name] = true
		if t.Baseline {
			baselines++
		}
	}
	if baselines > 1 {
		return errors.New("replay: more than one target is marked baseline")
	}
	return nil
}

func (c *Config) baseline() int {
	for i, t := range c.Targets {
		if t.Baseline {
			return i
		}
	}
	return 0
}

// Run checks every target, replays the capture against all of them at
// once, compares their outcomes and returns the report (also stored in
// the run directory). Progress lines go to progress.
func Run(ctx context.Context, cfg Config, progress io.Writer) (*Report, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	r, err := store.Open(cfg.Capture)
	if err != nil {
		return nil, err
	}
	defer r.Close()

	// Every target must be usable before any statement runs anywhere.
	infos := make([]store.RunTargetInfo, len(cfg.Targets))
	for i, t := range cfg.Targets {
		db, err := t.Open()
		if err != nil {
			return nil, err
		}
		info, err := t.Check(ctx, db)
		db.Close()
		if err != nil {
			return nil, err
		}
		infos[i] = store.RunTargetInfo{Name: t.Name, Addr: t.Addr(), Engine: t.Engine, Options: t.Options, Version: info.Version, Baseline: i == cfg.baseline()}
	}
	capStart, capEnd, err := span(r)
	if err != nil {
		return nil, err
	}
	settings, _ := json.Marshal(map[string]any{"speed": cfg.Speed, "concurrency": cfg.Concurrency, "loop": cfg.Loop, "duration": cfg.Duration.String()})
	run, err := store.CreateRun(cfg.RunDir, store.RunMeta{Capture: cfg.Capture, Started: time.Now().UTC(), Targets: infos, Settings: settings})
	if err != nil {
		return nil, err
	}
	defer run.Close()

	conns := cfg.Concurrency
	if conns == 0 {
		conns, err = sessionCount(r)
		if err != nil {
			return nil, err
		}
	}
	conns *= len(cfg.Targets)
	mode, why := ioMode(cfg.IO, conns)
	if why != "" {
		cfg.Logger.Warn(why)
	}
	if mode == IOBlocking {
		defer addProcs(conns)()
	}

	an := newAnalyzer()
	runners := make([]*runner, len(cfg.Targets))
	start := time.Now().Add(50 * time.Millisecond) // one instant for all targets
	for i, t := range cfg.Targets {
		if runners[i], err = newRunner(i, t, &cfg, r, an, run); err != nil {
			return nil, err
		}
		runners[i].start, runners[i].capStart, runners[i].capSpan = start, capStart, capEnd-capStart
		runners[i].blocking = mode == IOBlocking
	}

	stopReports := make(chan struct{})
	var reports sync.WaitGroup
	if cfg.ReportInterval > 0 && progress != nil {
		reports.Add(1)
		go func() {
			defer reports.Done()
			progressLines(progress, runners, start, cfg.ReportInterval, stopReports)
		}()
	}
	errs := make([]error, len(runners))
	var wg sync.WaitGroup
	for i, rn := range runners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sleepUntil(ctx, start)
			if cfg.Concurrency > 0 {
				errs[i] = rn.runConcurrent(ctx)
			} else {
				errs[i] = rn.runSessions(ctx)
			}
			rn.end = time.Now()
			if err := rn.flush(); err != nil && errs[i] == nil {
				errs[i] = err
			}
			if errs[i] != nil {
				errs[i] = fmt.Errorf("target %s: %w", rn.t.Name, errs[i])
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(stopReports)
	reports.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}

	rep := newReport(cfg, infos, runners, elapsed)
	rep.IO, rep.IONote = mode, why
	ss := newSessions(r)
	if err := compare(run, ss, an, cfg, rep); err != nil {
		return nil, err
	}
	if err := compareCaptured(run, ss, an, cfg, rep); err != nil {
		return nil, err
	}
	addFirstDiffs(ctx, ss, an, cfg, runners, rep)
	b, _ := json.Marshal(rep)
	if err := run.SetReport(b); err != nil {
		return nil, err
	}
	return rep, nil
}

// span returns the first and last start in the capture, in ns, from the
// store's time index (no pass over the records).
func span(r *store.Reader) (int64, int64, error) {
	first, last, ok, err := r.StartSpan()
	if err != nil {
		return 0, 0, err
	}
	if !ok {
		return 0, 0, errors.New("replay: the capture holds no records")
	}
	return first.UnixNano(), last.UnixNano(), nil
}

// progressLines prints, per target and interval, a line in sysbench's form.
func progressLines(w io.Writer, runners []*runner, start time.Time, every time.Duration, stop chan struct{}) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			secs := every.Seconds()
			for _, rn := range runners {
				l := rn.stats.takeInterval(secs)
				fmt.Fprintf(w, "[ %ds ] %s thds: %d tps: %.2f qps: %.2f (r/w/o: %.2f/%.2f/%.2f) lat (ms,95%%): %.2f err/s: %.2f\n",
					int(now.Sub(start).Round(time.Second).Seconds()), rn.t.Name, rn.active.Load(), l.tps, l.qps,
					l.rwo[ClassRead], l.rwo[ClassWrite], l.rwo[ClassOther], l.p95ms, l.errs)
			}
		}
	}
}

// Report is the replay's result: per target side by side, and divergences.
type Report struct {
	Capture     string             `json:"capture"`
	RunDir      string             `json:"run_dir"`
	Elapsed     float64            `json:"elapsed_seconds"`
	Baseline    string             `json:"baseline"`
	Targets     []TargetReport     `json:"targets"`
	Divergences []DivergenceReport `json:"divergences"`
	// VsCapture compares each target with the responses the capture holds
	// (proxy captures; a synthesized capture has none).
	VsCapture []DivergenceReport `json:"divergences_from_capture"`
	// IO is how the connections waited for replies (Config.IO); IONote
	// says why it is not the one asked for.
	IO     string `json:"io"`
	IONote string `json:"io_note,omitempty"`
}

// TargetReport is one target's totals.
type TargetReport struct {
	store.RunTargetInfo
	Transactions    int64 `json:"transactions"`
	Reads           int64 `json:"reads"`
	Writes          int64 `json:"writes"`
	Other           int64 `json:"other"`
	Errors          int64 `json:"errors"`
	Deadlocks       int64 `json:"deadlocks_and_lock_waits"`
	ConnectFailures int64 `json:"connect_failures"`
	// Connections is how many connections replay opened to the target.
	Connections int64 `json:"connections"`
	Skipped     int64 `json:"skipped"`
	// Elapsed is this target's own replay time, which its rates divide by.
	Elapsed    float64                   `json:"elapsed_seconds"`
	TPS        float64                   `json:"tps"`
	QPS        float64                   `json:"qps"`
	Latency    LatencySummary            `json:"latency"`
	Lag        LatencySummary            `json:"lag_from_intended"`
	ByClass    map[string]LatencySummary `json:"latency_by_class"`
	TopDigests []DigestLatency           `json:"top_digests"`
}

// DigestLatency is one statement shape's latency on a target.
type DigestLatency struct {
	Digest  string         `json:"digest"`
	Text    string         `json:"text"`
	Class   string         `json:"class"`
	Latency LatencySummary `json:"latency"`
	// RatioP95 is this p95 over the baseline's p95 for the same digest.
	RatioP95 float64 `json:"p95_ratio_to_baseline,omitempty"`
}

func newReport(cfg Config, infos []store.RunTargetInfo, runners []*runner, elapsed time.Duration) *Report {
	rep := &Report{Capture: cfg.Capture, RunDir: cfg.RunDir, Elapsed: elapsed.Seconds(), Baseline: cfg.Targets[cfg.baseline()].Name}
	for i, rn := range runners {
		s := rn.stats
		s.mu.Lock()
		tr := TargetReport{RunTargetInfo: infos[i], Transactions: s.transactions, Reads: s.queries[ClassRead], Writes: s.queries[ClassWrite],
			Other: s.queries[ClassOther], Errors: s.errors, Deadlocks: s.deadlocks, ConnectFailures: s.connectFailures, Connections: s.connections, Skipped: s.skipped,
			Latency: summarize(s.service), Lag: summarize(s.lag), ByClass: map[string]LatencySummary{}}
		for c := ClassOther; c <= ClassWrite; c++ {
			tr.ByClass[c.String()] = summarize(s.byClass[c])
		}
		own := rn.end.Sub(rn.start) // every runner's goroutine sets end before Run reports
		tr.Elapsed = own.Seconds()
		tr.TPS = float64(tr.Transactions) / own.Seconds()
		tr.QPS = float64(tr.Reads+tr.Writes+tr.Other) / own.Seconds()
		for id, ds := range s.byDigest {
			tr.TopDigests = append(tr.TopDigests, DigestLatency{Digest: id, Text: ds.text, Class: ds.class.String(), Latency: summarize(ds.hist)})
		}
		s.mu.Unlock()
		slices.SortFunc(tr.TopDigests, func(a, b DigestLatency) int {
			return cmp.Or(cmp.Compare(b.Latency.Count, a.Latency.Count), cmp.Compare(a.Digest, b.Digest))
		})
		if len(tr.TopDigests) > 20 {
			tr.TopDigests = tr.TopDigests[:20]
		}
		rep.Targets = append(rep.Targets, tr)
	}
	base := rep.Targets[cfg.baseline()]
	p95 := map[string]float64{}
	for _, d := range base.TopDigests {
		p95[d.Digest] = d.Latency.P95
	}
	for i := range rep.Targets {
		for j, d := range rep.Targets[i].TopDigests {
			if b := p95[d.Digest]; b > 0 {
				rep.Targets[i].TopDigests[j].RatioP95 = d.Latency.P95 / b
			}
		}
	}
	return rep
}

// sessionCount is how many sessions the capture holds: the connections a
// session-fidelity replay opens per target, at most.
func sessionCount(r *store.Reader) (int, error) {
	if s, ok := r.Summary(); ok {
		return int(s.Sessions), nil
	}
	ids, err := r.Sessions()
	return len(ids), err
}
