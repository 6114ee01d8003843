// Package replay replays a capture against several targets at once and
// compares them: every statement's latency per target, and every
// statement's outcome against the baseline target's and against the
// response the capture holds.
//
// Each target has its own reader of the capture, its own connections, its
// own order gate and its own outcome batches, so targets run independently:
// a slow or failing target never slows another. On each target, sessions
// keep the capture's order between them (--order capture): a record starts
// only after every record that ended, in the capture, before it started
// has completed there. Outcomes go to the run directory (store's run
// format); divergences are found afterwards by a merge join of the
// targets' outcomes in sequence order (package compare), so memory does not
// grow with the capture. The run directory is a document: package report
// renders it, here at the end of the run and later with `tandem report`.
//
// Files: scan.go reads the capture once before anything runs; schedule.go
// dispatches records (sessions, regrouping, pacing, loops, ordering) per
// target; order.go is the ordering gate; units.go regroups transactions for
// --concurrency; worker.go runs records on one connection (package conn);
// stats.go keeps per-worker statistics; results.go turns them, the
// comparison and the end state into the run's results.
package replay

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tandemdb/tandem/compare"
	"github.com/tandemdb/tandem/internal/pace"
	"github.com/tandemdb/tandem/sqlinfo"
	"github.com/tandemdb/tandem/store"
	"github.com/tandemdb/tandem/targets"
)

// The defaults a zero Config field means; every command's flags show the
// same (replay, sweep and shadows run one gate, whichever started them).
const (
	DefaultOrderInflight = 50 * time.Millisecond
	DefaultOrderTimeout  = 2 * time.Second
	DefaultRetries       = 3
	DefaultTargetTimeout = 30 * time.Second
)

// Ordering modes (Config.Order).
const (
	// OrderCapture keeps the capture's order between sessions: on each
	// target, a record starts only after every record that ended, in the
	// capture, before it started has completed there.
	OrderCapture = "capture"
	// OrderNone lets sessions run as fast as each can (a load generator).
	OrderNone = "none"
)

// Config is what `tandem replay` runs.
type Config struct {
	Capture string
	// CaptureName is how the run and its messages name the capture, when
	// Capture is not what the user gave: the archive (tandem pack) it was
	// unpacked from. Default Capture.
	CaptureName string
	RunDir      string
	// RunMinFree is the run directory's free-space floor
	// (store.DefaultRunMinFree when 0; negative: none).
	RunMinFree int64
	// RunID names the run (shards of one run share it); default: made up.
	RunID   string
	Targets []targets.Target
	// Speed scales the captured pacing: 1 as captured, 2 twice as fast, 0
	// as fast as possible (no clock waits; order still holds).
	Speed float64
	// Concurrency > 0 regroups whole transactions onto that many connections
	// per target; 0 replays each captured session on its own connection.
	Concurrency int
	// Order is OrderCapture or OrderNone; "" picks OrderCapture for a
	// recorded capture and OrderNone for a synthesized one, whose sessions
	// have no real order between them. OrderInflight and OrderTimeout
	// bound the gate (see gate); 0 means DefaultOrderInflight and
	// DefaultOrderTimeout.
	Order                       string
	OrderInflight, OrderTimeout time.Duration
	// CommitOrder, with --order capture and each session on its own
	// connection: CommitOrderGTID (the default, "") keeps the commits in
	// the order of the GTIDs the capture holds, CommitOrderTime orders
	// them by the capture's clock alone (as before GTIDs were captured).
	CommitOrder string
	// boardWait bounds a regrouped statement's wait on the board (0:
	// boardWait); tests shorten it to make replay go out of order.
	boardWait time.Duration
	// spares (tests): a --concurrency run's spare units and records are
	// reused even in a test binary that poisons them (poisonSpares), and
	// counted here.
	spares *sparesReused
	// Reference, if set, is a server holding production's end state (a
	// replica stopped at the capture's end point, tandem align --end):
	// every target's end state is compared with it, not replayed onto.
	Reference *targets.Target
	// ApplyBypassed runs the transactions that bypassed the proxy (the
	// capture holds them, rebuilt from the binary log's row images) where
	// the server ran them among the captured ones, so that the replay is
	// complete and end states can equal production's.
	ApplyBypassed bool
	// Bypassed, for a followed capture (a shadow), says where writes that
	// bypassed the proxy changed each table, as the proxy's binary-log
	// check found at the capture's stop: the final comparison with the
	// captured answers counts what came after them apart, as a replay of
	// the closed capture does. Asked once, after the last record; nil (or
	// a nil answer): none known.
	Bypassed func() *compare.Bypassed
	// AllowUnaligned replays onto targets that are not at the capture's
	// start point (a capture with one), labelling their verdicts.
	AllowUnaligned bool
	// SkipDamaged replays a capture that lacks records (a crash, a
	// damaged file) instead of refusing it; the report says what is
	// missing.
	SkipDamaged bool
	// Key opens an encrypted capture and encrypts the run directory
	// (store.Key; nil: neither).
	Key *store.Key
	// Retries is how often a transaction that fails with a deadlock or lock
	// wait timeout the capture did not have is retried: 0 means the
	// default (3), negative none.
	Retries int
	// TargetTimeout fails a target whose call gets no answer this long;
	// default 30s, negative never.
	TargetTimeout time.Duration
	// OnUnrewritable: UnrewritableFail (default) or UnrewritableSkip.
	OnUnrewritable string
	// RunGlobalSets runs the capture's SET GLOBAL and SET PERSIST
	// statements on the targets; by default they are skipped and counted
	// (store.SkipGlobalSet): an admin session in a capture would otherwise
	// change every target server's settings for everyone on it.
	RunGlobalSets bool
	// Loop replays the capture this many times (at least once); Duration,
	// if set, loops until it has passed.
	Loop     int
	Duration time.Duration
	// ReportInterval prints a progress line per target; 0 disables.
	// SeriesInterval is the run's stored interval series; default 1s.
	ReportInterval, SeriesInterval time.Duration
	// Samples kept per (digest, divergence class).
	Samples int
	// IO is how connections wait for replies: IOAuto (the default, ""
	// too), IOBlocking or IOPoller.
	IO string
	// Shard replays the sessions of one shard: Index of Count (Count ≤ 1:
	// all).
	Shard store.Shard
	// StartAt, if set, is the wall-clock instant replay begins.
	StartAt time.Time
	Logger  *slog.Logger
	// Metrics, if set, exports the run to Prometheus (see Metrics), with
	// MetricsDigests digests labelled apart (default 20).
	Metrics        *Metrics
	MetricsDigests int
	// Progress, if set, is called about five times a second while a point
	// replays (see Progress).
	Progress func(Progress)
	// MetricsURL, if set, is announced on the progress writer when the
	// replay starts (after the targets are checked).
	MetricsURL string

	// logsEachCommit: every target writes its engine's log at each COMMIT
	// (commitWritesLog; Run sets it), which IOAuto weighs (ioMode).
	logsEachCommit bool
	// sharedServer: some targets are databases of one server (Run sets
	// it; a followed run's target is taken to share one): XA RECOVER
	// there lists the other targets' xids too (runner.movesXids).
	sharedServer bool
}

// OnUnrewritable values.
const (
	UnrewritableFail = "fail"
	UnrewritableSkip = "skip"
)

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
	switch {
	case c.Speed < 0:
		return errors.New("replay: --speed must not be negative")
	case math.IsNaN(c.Speed) || math.IsInf(c.Speed, 0) || c.Speed > 0 && (c.Speed < 0.001 || c.Speed > 1000):
		return fmt.Errorf("replay: --speed %v: want 0 (no clock waits) or a factor from 0.001 to 1000 (1: as captured)", c.Speed)
	case c.Duration < 0:
		return fmt.Errorf("replay: --duration %v must not be negative (0: the capture's own length)", c.Duration)
	case c.Loop < 0:
		return fmt.Errorf("replay: --loop %d: want 1 or more (passes over the capture)", c.Loop)
	case c.Samples < 0:
		return fmt.Errorf("replay: --samples %d must not be negative", c.Samples)
	case c.Concurrency < 0:
		return fmt.Errorf("replay: --concurrency %d must not be negative (0: one connection per captured session)", c.Concurrency)
	}
	if c.Concurrency < 0 {
		return errors.New("replay: --concurrency must not be negative")
	}
	switch c.IO {
	case "":
		c.IO = IOAuto
	case IOAuto, IOBlocking, IOPoller:
	default:
		return fmt.Errorf("replay: --io %q: want %s, %s or %s", c.IO, IOAuto, IOBlocking, IOPoller)
	}
	switch c.Order {
	case "", OrderCapture, OrderNone: // "": capture, or none for a synthesized capture
	default:
		return fmt.Errorf("replay: --order %q: want %s or %s", c.Order, OrderCapture, OrderNone)
	}
	switch c.CommitOrder {
	case "":
		c.CommitOrder = CommitOrderGTID
	case CommitOrderGTID, CommitOrderTime:
	default:
		return fmt.Errorf("replay: --commit-order %q: want %s (the server's order, from the capture's GTIDs) or %s (the capture's clock)", c.CommitOrder, CommitOrderGTID, CommitOrderTime)
	}
	switch c.OnUnrewritable {
	case "":
		c.OnUnrewritable = UnrewritableFail
	case UnrewritableFail, UnrewritableSkip:
	default:
		return fmt.Errorf("replay: --on-unrewritable %q: want %s or %s", c.OnUnrewritable, UnrewritableFail, UnrewritableSkip)
	}
	if !c.StartAt.IsZero() && time.Until(c.StartAt) < -time.Minute {
		return fmt.Errorf("replay: --start-at %s is %v in the past (more than a minute): the shards would not start together; give a later instant", c.StartAt.Format(time.RFC3339), -time.Until(c.StartAt).Round(time.Second))
	}
	if c.Shard.Count > 1 && c.Order == OrderCapture {
		return fmt.Errorf("replay: --order capture with %d shards: a record cannot wait for sessions another shard replays, so the order between sessions would hold only within each shard; replay unsharded for --order capture, or shard with --order none (each session's own order stays exact)", c.Shard.Count)
	}
	if c.Shard.Count > 1 && (c.Shard.Index < 0 || c.Shard.Index >= c.Shard.Count) {
		return fmt.Errorf("replay: shard %d/%d: the index must be 0 to %d", c.Shard.Index, c.Shard.Count, c.Shard.Count-1)
	}
	if c.OrderInflight <= 0 {
		c.OrderInflight = DefaultOrderInflight
	}
	if c.OrderTimeout <= 0 {
		c.OrderTimeout = DefaultOrderTimeout
	}
	switch {
	case c.Retries == 0:
		c.Retries = DefaultRetries
	case c.Retries < 0:
		c.Retries = 0
	}
	switch {
	case c.TargetTimeout == 0:
		c.TargetTimeout = DefaultTargetTimeout
	case c.TargetTimeout < 0:
		c.TargetTimeout = 0
	}
	if c.Loop < 1 {
		c.Loop = 1
	}
	if c.Samples <= 0 {
		c.Samples = 3
	}
	if c.SeriesInterval <= 0 {
		c.SeriesInterval = time.Second
	}
	if c.ReportInterval > 0 && c.ReportInterval < c.SeriesInterval {
		c.SeriesInterval = c.ReportInterval
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.MetricsDigests == 0 {
		c.MetricsDigests = 20
	}
	if c.MetricsDigests < 0 {
		return errors.New("replay: --metrics-digests must not be negative")
	}
	if c.RunID == "" {
		var b [4]byte
		rand.Read(b[:])
		c.RunID = time.Now().UTC().Format("20060102-150405") + fmt.Sprintf("-%x", b)
	}
	if _, err := targets.Baseline(c.Targets); err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	return nil
}

// baseline is the baseline target's index (check has refused a list
// with two).
// captureName is how the capture is named to the user (CaptureName).
func (c *Config) captureName() string {
	if c.CaptureName != "" {
		return c.CaptureName
	}
	return c.Capture
}

func (c *Config) baseline() int {
	i, _ := targets.Baseline(c.Targets)
	return i
}

// settings lists the run's flags for its metadata.
func (c *Config) settings() []store.Setting {
	s := []store.Setting{{Name: "speed", Value: strconv.FormatFloat(c.Speed, 'g', -1, 64)},
		{Name: "concurrency", Value: strconv.Itoa(c.Concurrency)}, {Name: "order", Value: c.Order}, {Name: "commit-order", Value: c.CommitOrder},
		{Name: "retries", Value: strconv.Itoa(c.Retries)}, {Name: "loop", Value: strconv.Itoa(c.Loop)}}
	if c.Duration > 0 {
		s = append(s, store.Setting{Name: "duration", Value: c.Duration.String()})
	}
	s = append(s, store.Setting{Name: "target-timeout", Value: c.TargetTimeout.String()}, store.Setting{Name: "on-unrewritable", Value: c.OnUnrewritable})
	if c.RunGlobalSets {
		s = append(s, store.Setting{Name: "run-global-sets", Value: "true"})
	}
	return s
}

func shardOf(session uint64, n int) int {
	h := fnv.New64a()
	var b [8]byte
	for i := range b {
		b[i] = byte(session >> (8 * i))
	}
	h.Write(b[:])
	return int(h.Sum64() % uint64(n))
}

// Result is what a replay leaves to its caller: where it stored its
// results, and how it ended. Replay computes and stores; it renders
// nothing. A caller reads the run back with report.Load(RunDir), which
// gives what `tandem report RunDir` prints.
type Result struct {
	// RunDir is the run directory (Config.RunDir).
	RunDir string
	// Elapsed is the time the points took, summed.
	Elapsed time.Duration
	// Interrupted is set when ctx ended the run before the capture did.
	Interrupted bool
	// Notes are the run's notes (as stored in its end record).
	Notes []string
}

// Run checks every target, replays the capture against all of them at
// once, compares their outcomes and stores them in cfg.RunDir. Progress
// lines go to progress.
func Run(ctx context.Context, cfg Config, progress io.Writer) (Result, error) {
	return run(ctx, cfg, nil, &runState{src: closedCapture{}}, progress)
}

// Sweep replays a capture at several concurrencies, each a point of one
// run: the seeds' throughput-against-threads chart.
type Sweep struct {
	// Threads are the --concurrency values, in order.
	Threads []int
	// Together replays every target at once at each point; by default
	// targets take turns, so that on one machine none competes with
	// another for CPU and disk.
	Together bool
	// Before, if set, runs before each point with the targets it is about
	// to replay against (e.g. to load the starting data again).
	Before func(ctx context.Context, ts []targets.Target) error
}

// groups are the sets of targets each thread count runs: all at once
// (nil, Together) or one after another.
func (sw *Sweep) groups(targets int) [][]int {
	if sw.Together {
		return [][]int{nil}
	}
	g := make([][]int, 0, targets)
	for i := range targets {
		g = append(g, []int{i})
	}
	return g
}

// RunSweep runs a sweep (see Sweep) into one run directory.
func RunSweep(ctx context.Context, cfg Config, sw Sweep, progress io.Writer) (Result, error) {
	if len(sw.Threads) == 0 {
		return Result{}, errors.New("sweep: no thread counts; give --threads 1,2,4,…")
	}
	for _, n := range sw.Threads {
		if n < 1 {
			return Result{}, fmt.Errorf("sweep: thread count %d: want 1 or more", n)
		}
	}
	return run(ctx, cfg, &sw, &runState{src: closedCapture{}}, progress)
}

func run(ctx context.Context, cfg Config, sw *Sweep, rs *runState, progress io.Writer) (Result, error) {
	if err := cfg.check(); err != nil {
		return Result{}, err
	}
	r, done, err := rs.src.reader(&cfg)
	if err != nil {
		return Result{}, err
	}
	defer done()
	followed := rs.src.followed()

	// Every target must be usable before any statement runs anywhere.
	infos := make([]store.RunTarget, len(cfg.Targets))
	// Whether each target refuses this account's writes, asked now on the
	// open handle, refused once the capture is known to write (below).
	readOnly := make([]error, len(cfg.Targets))
	dbs := make([]*sql.DB, 0, len(cfg.Targets))
	cfg.logsEachCommit = len(cfg.Targets) > 0
	closeAll := func() {
		for _, db := range dbs {
			db.Close()
		}
	}
	for i, t := range cfg.Targets {
		db, err := t.Open()
		if err != nil {
			closeAll()
			return Result{}, err
		}
		dbs = append(dbs, db)
		info, err := t.Check(ctx, db)
		if err == nil {
			err = t.CheckDatabase(ctx, db)
		}
		if err == nil && !followed { // a shadow's: checked before its capture began (shadow.Config.Targets)
			if err = CheckNotApplying(ctx, "target", t, db); err != nil {
				err = fmt.Errorf("replay: %w", err)
			}
			readOnly[i] = CheckWritable(ctx, "target", t, db)
		}
		if err == nil {
			cfg.logsEachCommit = cfg.logsEachCommit && commitWritesLog(ctx, t, db)
		}
		if err != nil {
			closeAll()
			return Result{}, err
		}
		infos[i] = store.RunTarget{Name: t.Name, Addr: t.Addr(), Engine: t.Engine, Options: t.Options, Version: info.Version, Baseline: i == cfg.baseline(),
			TLS: info.TLS}
	}
	servers, unknown := targets.Servers(ctx, cfg.Targets, dbs)
	err = targets.SameTables(cfg.Targets, servers, unknown)
	var srv *serverChoices
	if err == nil {
		srv, err = loadServerChoices(ctx, cfg.Targets, dbs)
	}
	closeAll()
	if err != nil {
		return Result{}, fmt.Errorf("replay: %w", err)
	}
	if !followed { // a shadow's Shared is the proxy's, which knows the other shadows
		cfg.Targets = slices.Clone(cfg.Targets)
		for i, n := range targets.SharedBefore(servers) {
			cfg.Targets[i].Shared = n
			cfg.sharedServer = cfg.sharedServer || n > 0
		}
	} else {
		cfg.sharedServer = true
	}
	var notes []string
	if cfg.ApplyBypassed {
		if followed {
			return Result{}, errors.New("replay: --apply-bypassed applies what a closed capture lists; a live capture's list is known only at its end")
		}
		n, err := applyBypassed(&cfg, r)
		if err != nil {
			return Result{}, err
		}
		notes = append(notes, n)
	}
	switch start := r.Meta().Start; {
	case followed:
	case sw != nil && sw.Before != nil && start != nil:
		// --prepare-tables: every point starts from rows sysbench-style
		// loading made, never the primary's at the capture's start.
		notes = append(notes, "the sweep loads its own rows before every point (--prepare-tables): no target holds the primary's rows at the capture's start, so differences on writes from the captured responses are not verdicts; between targets they are (each point starts every target from the same rows)")
	default:
		n, err := checkAligned(ctx, &cfg, r, infos)
		if err != nil {
			return Result{}, err
		}
		notes = append(notes, n...)
		if sw != nil && start != nil && len(sw.Threads)*len(sw.groups(len(cfg.Targets))) > 1 {
			notes = append(notes, "from the sweep's second point on, each target holds what the earlier points wrote, not the capture's start: differences on writes from the captured responses there are not verdicts; between targets they are (every target ran the same points)")
		}
	}
	if cfg.CaptureName != "" && cfg.CaptureName != cfg.Capture {
		notes = append(notes, fmt.Sprintf("the capture %s was replayed from its unpacked copy in %s", cfg.CaptureName, cfg.Capture))
	}
	x, an, err := rs.src.index(ctx, r, srv)
	if err != nil {
		if errors.Is(err, store.ErrCorrupt) && !cfg.SkipDamaged {
			err = fmt.Errorf("%w; or replay the records that are readable with --skip-damaged (the report then says what was passed over)", err)
		}
		return Result{}, err
	}
	notes = append(notes, srv.notes()...)
	if x.writes {
		// A capture that writes tables, on a target that refuses this
		// account's writes (a shadow's is checked before its capture
		// began, shadow.Config.Targets: readOnly holds nothing then).
		if err := errors.Join(readOnly...); err != nil {
			return Result{}, fmt.Errorf("replay: %w", err)
		}
	}
	if _, closed := r.Summary(); !closed && !followed {
		notes = append(notes, fmt.Sprintf("the capture was not closed cleanly (its writer crashed, was killed, or still runs): it was replayed up to its last record (seq %d); records after it may have been lost without a trace", x.lost.Last()))
	}
	// A damaged file that held the records to the last leaves no gap in
	// the sequence: the records read just end before it. Its damage is
	// said all the same.
	if lost, damaged := x.lost.String(), r.Damaged(); lost != "" || len(damaged) > 0 {
		if !cfg.SkipDamaged {
			return Result{}, fmt.Errorf("replay: capture %s lacks records: %s — a crash that emptied or cut a WAL, or a damaged file; the sessions there miss statements, and verdicts on what follows would be false. 'tandem inspect' shows what is there; replay it anyway with --skip-damaged (the report then says what is missing)", cfg.captureName(), lost)
		}
		var why []string
		if lost != "" {
			why = append(why, lost)
		}
		for _, d := range damaged {
			why = append(why, fmt.Sprintf("%s is damaged (%s), %s were passed over from its damaged block on", d.File, d.Detail, d.Held))
		}
		notes = append(notes, fmt.Sprintf("the capture lacks records (%s; --skip-damaged): sessions with statements there replayed without them, so a difference from the captured responses after the first lost record may be the capture's damage, not the engines': such differences are counted apart (ambiguous: not-replayed), in every session; between targets, which all lack the same records, nothing changes", strings.Join(why, "; ")))
	}
	if x.lostEnded > 0 {
		trx := "1 transaction"
		if x.lostEnded > 1 {
			trx = fmt.Sprintf("%d transactions", x.lostEnded)
		}
		notes = append(notes, fmt.Sprintf("the packet capture lost commands inside %s (bytes missing from a session's stream), which may have committed there: replay committed each there, on every target, once the session's last statement seen was done (held open, it would keep locks the capture's session had let go); differences in what other sessions ran from its first change on are counted apart (ambiguous), between targets and against the capture", trx))
	}
	switch {
	case cfg.Order == "" && cfg.Shard.Count > 1:
		cfg.Order = OrderNone
		notes = append(notes, fmt.Sprintf("replayed as shard %d of %d: sessions of other shards run in other processes, so sessions were not ordered against each other (--order none); each session's own order is exact, and differences between concurrent writes are order-ambiguous", cfg.Shard.Index, cfg.Shard.Count))
	case cfg.Order == "" && x.synthetic:
		cfg.Order = OrderNone
		notes = append(notes, "the capture was synthesized: its sessions have no real order between them, so they replayed freely (--order none), as sysbench threads run; differences between concurrent writes are order-ambiguous, and end states can differ for that reason alone")
	case cfg.Order == "":
		cfg.Order = OrderCapture
	case cfg.Order == OrderCapture && x.synthetic:
		notes = append(notes, "the capture was synthesized: its timeline is made up, so --order capture keeps an order that never happened; conflicting writes of concurrent sessions are order-ambiguous")
	}
	if n := commitOrderNote(&cfg, x); n != "" {
		notes = append(notes, n)
	}
	if cfg.Order == OrderCapture && nothingToOrder(x, followed) {
		notes = append(notes, "the capture changes nothing other sessions could see (no write, DDL, locking read or statement of unknown effect): under --order capture a read waits only for earlier changes, so no record had anything to wait for, and the sessions ran as freely as with --order none")
	}
	command := "replay"
	switch {
	case sw != nil:
		command = "sweep"
	case followed:
		command = "shadow"
	}
	meta := store.RunMeta{RunID: cfg.RunID, Command: command, Capture: cfg.captureName(), CaptureSource: r.Meta().Source,
		Started: time.Now().UTC(), Targets: infos, Baseline: cfg.Targets[cfg.baseline()].Name, Settings: cfg.settings()}
	if sc := x.sessionsBy; sc.Joined() && !followed {
		meta.CaptureSessions = &sc // a live capture's are known at its end only
	}
	if cfg.Shard.Count > 1 {
		meta.Shard = &store.Shard{Index: cfg.Shard.Index, Count: cfg.Shard.Count}
	}
	runOpts := []store.Option{store.WithKey(cfg.Key)}
	if cfg.RunMinFree != 0 {
		runOpts = append(runOpts, store.WithRunMinFree(max(cfg.RunMinFree, 0)))
	}
	run, err := store.CreateRun(cfg.RunDir, meta, runOpts...)
	if err != nil {
		return Result{}, err
	}
	defer run.Close()
	rs.metrics = cfg.Metrics.begin(cfg.RunID, infos, x, cfg.MetricsDigests)
	if cfg.MetricsURL != "" && progress != nil {
		fmt.Fprintf(progress, "tandem %s: run %s, metrics on %s\n", command, cfg.RunID, cfg.MetricsURL)
	}
	var elapsed time.Duration
	if sw == nil {
		if !followed {
			// The last check is done: from here on the targets change.
			if err := markReplayed(ctx, &cfg, r); err != nil {
				return Result{}, err
			}
		}
		p, err := replayPoint(ctx, &cfg, rs, 0, "replay", cfg.Concurrency, nil, r, an, x, run, progress)
		if err != nil {
			return Result{}, err
		}
		notes = append(notes, p.notes...)
		elapsed = p.elapsed
	} else {
		if !followed {
			// The last check is done: from here on the targets change.
			if err := markReplayed(ctx, &cfg, r); err != nil {
				return Result{}, err
			}
		}
		groups := sw.groups(len(cfg.Targets))
		point := 0
		for _, n := range sw.Threads {
			for _, only := range groups {
				if ctx.Err() != nil {
					break
				}
				ts := cfg.Targets
				label := fmt.Sprintf("%d threads", n)
				if n == 1 {
					label = "1 thread"
				}
				if only != nil {
					ts = []targets.Target{cfg.Targets[only[0]]}
					label += ", " + ts[0].Name
				}
				if sw.Before != nil {
					if err := sw.Before(ctx, ts); err != nil {
						return Result{}, fmt.Errorf("sweep: before %s: %w", label, err)
					}
				}
				if progress != nil {
					fmt.Fprintf(progress, "tandem sweep: point %d: %s\n", point+1, label)
				}
				p, err := replayPoint(ctx, &cfg, rs, point, label, n, only, r, an, x, run, progress)
				if err != nil {
					return Result{}, fmt.Errorf("sweep: %s: %w", label, err)
				}
				point++
				elapsed += p.elapsed
				for _, nt := range p.notes {
					if !slices.Contains(notes, nt) {
						notes = append(notes, nt)
					}
				}
			}
		}
	}
	end := store.RunEnd{Ended: time.Now().UTC(), Elapsed: elapsed.Seconds(), Interrupted: ctx.Err() != nil, Notes: notes}
	if err := run.End(end); err != nil {
		return Result{}, err
	}
	return Result{RunDir: cfg.RunDir, Elapsed: elapsed, Interrupted: end.Interrupted, Notes: notes}, nil
}

// Progress is how far a replay point is: Done of Total records (summed
// over its targets), or with ByTime (--duration) milliseconds of the
// duration.
type Progress struct {
	Point       string
	Done, Total int64
	ByTime      bool
	Finished    bool
}

// reportProgress calls cfg.Progress until stop is closed, then once more
// with Finished.
func reportProgress(cfg *Config, label string, runners []*runner, records uint64, start time.Time, stop <-chan struct{}) {
	loops := max(cfg.Loop, 1)
	total := int64(records) * int64(loops) * int64(len(runners))
	byTime := cfg.Duration > 0
	if byTime {
		total = cfg.Duration.Milliseconds()
	}
	done := func() int64 {
		if byTime {
			return min(max(time.Since(start).Milliseconds(), 0), total)
		}
		var n int64
		for _, rn := range runners {
			for _, st := range rn.stats {
				n += st.records.Load()
			}
		}
		return min(n, total)
	}
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-stop:
			cfg.Progress(Progress{Point: label, Done: done(), Total: total, ByTime: byTime, Finished: true})
			return
		case <-t.C:
			cfg.Progress(Progress{Point: label, Done: done(), Total: total, ByTime: byTime})
		}
	}
}

// pointResult is what one replay point produced beyond what it stored.
type pointResult struct {
	elapsed time.Duration
	notes   []string
}

// replayPoint replays the capture once (with its loops) against the
// targets numbered in only (nil: all) with the given concurrency, and
// stores everything as point number point of the run.
// runnersDone, if set (by tests), sees a point's runners once they have
// stopped.
var runnersDone func([]*runner)

func replayPoint(ctx context.Context, cfg *Config, rs *runState, point int, label string, concurrency int, only []int, r *store.Reader,
	an *sqlinfo.Analyzer, x *captureIndex, run *store.RunWriter, progress io.Writer) (*pointResult, error) {
	pcfg := *cfg
	pcfg.Concurrency = concurrency
	idxs := only
	if idxs == nil {
		for i := range cfg.Targets {
			idxs = append(idxs, i)
		}
	}
	conns := concurrency
	if conns == 0 {
		conns = len(x.sessions)
		if pcfg.Shard.Count > 1 {
			conns = conns/pcfg.Shard.Count + 1
		}
	}
	tr := traffic{statements: x.statements, writeTrx: x.writeTrx, perTarget: conns, logsEachCommit: pcfg.logsEachCommit}
	conns *= len(idxs)
	mode, why := ioMode(pcfg.IO, conns, tr)
	var notes []string
	switch {
	case why != "" && pcfg.IO == IOAuto:
		pcfg.Logger.Info(why)
	case why != "":
		pcfg.Logger.Warn(why)
		notes = append(notes, why)
	}
	if mode == IOBlocking {
		defer addProcs(conns)()
	}
	reg := newDigestRegistry()
	reg.seed(x)
	start := time.Now().Add(50 * time.Millisecond) // one instant for all targets
	if !pcfg.StartAt.IsZero() {
		start = pcfg.StartAt
	}
	runners := make([]*runner, 0, len(idxs))
	for _, i := range idxs {
		rn, err := newRunner(ctx, i, pcfg.Targets[i], &pcfg, x, an, r, run, reg, rs)
		if err != nil {
			return nil, err
		}
		rn.point = point
		rn.start, rn.capStart, rn.capSpan = start, x.first, x.last-x.first
		rn.blocking = mode == IOBlocking
		runners = append(runners, rn)
		if rs.feed != nil {
			rs.feed.rn.Store(rn)
		}
		if rs.obs != nil {
			rs.obs.Started(rs.feed)
		}
	}
	for _, rn := range runners {
		rn.footprintBefore, _ = footprints(ctx, rn, x.tables) // an error shows after the point
		rn.loadPrimaryKeys(ctx, x.tables)                     // row keys for the gate, AUTO_INCREMENT columns for captured ids
		rn.forgetClock(x, rs.src.followed())
		if rs.src.followed() {
			rn.live = newLiveKeys(rn) // its tables are not known yet
		}
	}
	rs.metrics.start(pcfg.Metrics, runners)
	stopProgress := func() {}
	if pcfg.Progress != nil {
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() { defer close(done); reportProgress(&pcfg, label, runners, x.recordsIn(pcfg.Shard), start, stop) }()
		stopProgress = sync.OnceFunc(func() { close(stop); <-done })
		defer stopProgress()
	}
	prog := &progressLines{w: progress, every: pcfg.ReportInterval, acc: map[string]*store.Interval{}}
	errs := make([]error, len(runners))
	var wg sync.WaitGroup
	for k, rn := range runners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stop := make(chan struct{})
			var bg sync.WaitGroup
			bg.Add(2)
			go func() { defer bg.Done(); rn.watchdog(stop) }()
			go func() { defer bg.Done(); rn.collect(pcfg.SeriesInterval, prog, stop) }()
			pace.SleepUntil(ctx, start)
			if pcfg.Concurrency > 0 {
				errs[k] = rn.runConcurrent(ctx)
			} else {
				errs[k] = rn.runSessions(ctx)
			}
			rn.end = time.Now()
			rn.rollbackLeftPrepared()
			rn.closeSide()
			close(stop)
			bg.Wait()
			rn.mu.Lock()
			if errs[k] == nil {
				errs[k] = rn.mu.outErr
			}
			rn.mu.Unlock()
			if errs[k] != nil {
				errs[k] = fmt.Errorf("target %s: %w", rn.t.Name, errs[k])
			}
		}()
	}
	wg.Wait()
	stopProgress()
	elapsed := time.Since(start)
	if runnersDone != nil {
		runnersDone(runners)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	names := make([]string, len(runners))
	for k, rn := range runners {
		names[k] = rn.t.Name
	}
	order := pcfg.Order
	if err := run.PutPoint(store.Point{Point: point, Label: label, Threads: concurrency, Targets: names, Order: order, IO: mode,
		Started: start.UTC(), Elapsed: elapsed.Seconds()}); err != nil {
		return nil, err
	}
	results, err := storeResults(ctx, &pcfg, rs, point, runners, r, an, x, run, reg)
	rs.metrics.end(pcfg.Metrics, results)
	if err != nil {
		return nil, err
	}
	return &pointResult{elapsed: elapsed, notes: notes}, nil
}
