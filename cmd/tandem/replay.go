package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tandemdb/tandem/internal/metricsrv"
	"github.com/tandemdb/tandem/replay"
	"github.com/tandemdb/tandem/report"
	"github.com/tandemdb/tandem/store"
	"github.com/tandemdb/tandem/targets"
)

// shardFlags applies --shard, --shards (with $JOB_COMPLETION_INDEX) and
// --start-at.
func shardFlags(cfg *replay.Config, shard string, shards int, startAt string) error {
	switch {
	case shard != "" && shards != 0:
		return fmt.Errorf("give --shard I/N or --shards N (the index from $JOB_COMPLETION_INDEX), not both")
	case shard != "":
		i, n, ok := strings.Cut(shard, "/")
		ii, err1 := strconv.Atoi(i)
		nn, err2 := strconv.Atoi(n)
		if !ok || err1 != nil || err2 != nil || nn < 1 || ii < 0 || ii >= nn {
			return fmt.Errorf("--shard %q: want I/N with 0 <= I < N, e.g. 0/4", shard)
		}
		cfg.Shard = store.Shard{Index: ii, Count: nn}
	case shards < 0:
		return fmt.Errorf("--shards %d: want the number of shards, 1 or more", shards)
	case shards != 0:
		v := os.Getenv("JOB_COMPLETION_INDEX")
		ii, err := strconv.Atoi(v)
		if shards < 1 || err != nil || ii < 0 || ii >= shards {
			return fmt.Errorf("--shards %d: $JOB_COMPLETION_INDEX is %q; want 0 to %d (run as a Kubernetes Indexed Job, or give --shard I/N)", shards, v, shards-1)
		}
		cfg.Shard = store.Shard{Index: ii, Count: shards}
	}
	if startAt != "" {
		t, err := time.Parse(time.RFC3339, startAt)
		if err != nil {
			return fmt.Errorf("--start-at %q: want an RFC 3339 instant such as 2026-12-01T12:00:00Z", startAt)
		}
		cfg.StartAt = t
	}
	if cfg.Shard.Count > 1 && cfg.RunID == "" {
		return fmt.Errorf("--shard: give the shards of one run the same --run-id, so that 'tandem report' can merge them")
	}
	return nil
}

// runReplay runs a replay or a sweep as both commands do: a progress bar
// on a terminal, metrics served, the report printed, metrics kept up for
// --metrics-linger.
func runReplay(c *cobra.Command, cfg *replay.Config, metricsAddr string, linger time.Duration, asJSON bool,
	run func(replay.Config) (replay.Result, error)) error {
	// Before the targets are checked and the capture opened: a --run that
	// cannot be one was found out last.
	if err := store.CheckRunDir(cfg.RunDir); err != nil {
		return err
	}
	cfg.Progress = replayProgress(c.ErrOrStderr(), cfg.ReportInterval > 0)
	stop, err := serveReplayMetrics(c, cfg, metricsAddr, linger)
	if err != nil {
		return err
	}
	res, err := run(*cfg)
	var rep *report.Report
	if err == nil {
		if rep, err = report.Load(res.RunDir, store.WithKey(cfg.Key)); err == nil {
			err = writeReport(c.OutOrStdout(), rep, asJSON)
		}
	}
	stop(err == nil)
	if err != nil {
		return err
	}
	if res.Interrupted {
		// The report says so first; the status says it to a script (it
		// was 0, as for a complete run).
		return &exitStatus{code: 130, err: errors.New("interrupted: the report above covers what ran until then")}
	}
	return targetsFailed(rep)
}

// targetsFailed is the run's outcome for its exit status: an error with
// status 2 when a target failed during it (the report says why; its
// figures and verdicts cover only what it ran before), so that a script
// can tell a complete comparison from one that is not.
func targetsFailed(rep *report.Report) error {
	var names []string
	for _, pt := range rep.Points {
		for _, t := range pt.Targets {
			if t.Failed != "" && !slices.Contains(names, t.Name) {
				names = append(names, t.Name)
			}
		}
	}
	if len(names) == 0 {
		return nil
	}
	if len(names) == 1 {
		return &exitStatus{code: 2, err: fmt.Errorf("target %s failed during the run (see the report above): its figures and verdicts cover only what it ran before; the others ran to the end", names[0])}
	}
	return &exitStatus{code: 2, err: fmt.Errorf("targets %s failed during the run (see the report above): their figures and verdicts cover only what each ran before it failed", strings.Join(names, ", "))}
}

// defaultReplayMetrics is replay's metrics address (the proxy's is 9470).
const defaultReplayMetrics = "127.0.0.1:9471"

// serveReplayMetrics starts replay's /metrics endpoint, if asked, and
// returns the function that ends it (after --metrics-linger when the run
// ended well).
func serveReplayMetrics(c *cobra.Command, cfg *replay.Config, addr string, linger time.Duration) (func(ok bool), error) {
	withPprof, _ := c.Flags().GetBool("pprof")
	if addr == metricsrv.Off {
		return func(bool) {}, nil
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	var r prometheus.Registerer = reg
	if cfg.Shard.Count > 1 { // every replay series says which shard it is
		r = prometheus.WrapRegistererWith(prometheus.Labels{"shard": fmt.Sprintf("%d/%d", cfg.Shard.Index, cfg.Shard.Count)}, reg)
	}
	m := replay.NewMetrics(r)
	ctx, cancel := context.WithCancel(context.Background())
	bound, wait, err := metricsrv.Listen(ctx, addr, reg, reg, withPprof)
	if err != nil {
		cancel()
		if c.Flags().Changed("metrics-addr") {
			return nil, err
		}
		fmt.Fprintf(c.ErrOrStderr(), "%s: warning: %v; replaying with metrics off\n", c.CommandPath(), err)
		return func(bool) {}, nil
	}
	cfg.Metrics, cfg.MetricsURL = m, "http://"+bound+"/metrics"
	return func(ok bool) {
		if ok && linger > 0 {
			fmt.Fprintf(c.ErrOrStderr(), "%s: keeping http://%s/metrics up for %v (--metrics-linger)\n", c.CommandPath(), bound, linger)
			t := time.NewTimer(linger)
			select {
			case <-t.C:
			case <-c.Context().Done():
				t.Stop()
			}
		}
		cancel()
		wait()
	}, nil
}

func newReplayCmd() *cobra.Command {
	var cfg replay.Config
	var unpackDir string
	var keys keyFlag
	var specs []string
	var configFile string
	var asJSON bool
	var gate gateFlags
	var metricsAddr string
	var linger time.Duration
	var shard, startAt string
	var shards int
	var reference string
	cmd := &cobra.Command{
		Use:   "replay CAPTURE_DIR --target name=DSN[,engine=X] --target …",
		Short: "Replay a capture against several targets at once and compare them",
		Long: `Replays a capture against every target at once — each on its own connections,
so a slow target never slows another — measures every statement's latency per
target, and compares every statement's outcome (error, affected rows, insert
id, row count, row checksums, warnings) with the baseline target: the first,
or the one marked ,baseline — and, for a capture made by tandem proxy, with
the response the capture holds (row checksums when the proxy ran with
--capture-results checksum). Samples of row differences show the first
differing row, from running the read statement again on both sides after
the replay.

Start state. Verdicts on writes hold only if every target starts with the
rows the primary held when the capture began. A capture taken with tandem
proxy --binlog-user knows that point (its GTID position): each target's
position is read before the first statement, and a target not at it is
refused, with both positions and the command that brings it there (tandem
align); --allow-unaligned replays anyway and labels those targets. With
--reference NAME=DSN (a replica stopped at the capture's end point, tandem
align --end), every target's end state is compared with production's too:
"same as production", or which tables differ, naming those that writes
which bypassed the proxy changed (the capture lists them). --apply-bypassed
runs those writes too, rebuilt from the binary log's row images, each where
the server ran it among the captured transactions: the replay is then
complete, and an end state can be "same as production". Each runs in its
place in the server's commit order, as the captured commits do (see
Order).

Every target is checked first: reachable, its engine present (a missing
engine, e.g. TokuDB, stops the replay before any statement runs). CREATE and
ALTER TABLE in the traffic get each target's engine and options: only the
ENGINE clause and the options change in the statement's text; one that
cannot be edited stops that target (--on-unrewritable skip runs the rest
without it). Credentials come from the targets, never from the capture; a
target whose DSN names a database runs every session in it. Targets may be
databases of one server (not one database: refused); a server's XA xids
are its own, so each target after its server's first, and each --loop pass
after the first, gives the captured xids a branch qualifier of its own
(~tandemN, pN appended), and XA RECOVER is not compared there.

Order. With --order capture (the default), on each target a change (a
write, the COMMIT of a transaction that wrote, a locking read) starts only
after every record that ended, in the capture, before it started has
completed there, and a read after every such change, at every --speed:
concurrent read-write traffic then does to identical targets the same
thing in the same order. A capture without changes (read-only traffic)
has nothing to order: its records run as with --order none. A
transaction regrouped by --concurrency, and on a connection per session a
statement that ran on its own (autocommit), waits only for the earlier
ones it depends on: one of the two changes a row the other reads or
changes (by primary key when both name their rows on an integer key,
else by table); a prepare or a statement's close waits for nothing, and
what replay cannot know (DDL in the capture, a view, a trigger, a foreign
key, a nondeterministic statement, a statement inside a session's
transaction, a login) waits for everything before it. Records that
overlapped in the capture run concurrently, as they did; conflicting
writes and locking reads among them go to the server in the order they
ended in the capture, which is the order the capture's server granted
their locks. When a statement is stuck on the server behind the locks of
a transaction that waits for it (replay let the other take a lock first),
the waiting transaction rolls back at once and runs again after it, as
the capture had it; --order-inflight bounds how long a stuck statement
that no waiting transaction can explain is given. No record waits longer
than --order-timeout for a record before it that makes no progress (is
not done, nor sent when that is what it waits for: a rare fault, counted
and labelled; a wait behind records that keep getting done, as when one
session runs ahead at --speed 0, is not cut short); reruns and
timeouts are counted, and their outcomes are order-ambiguous when they
differ. A rollback lets a change that waited on the server for the
transaction's locks go ahead of its writes, as a timeout lets a change go
ahead of one it waited for: later differences on the tables concerned
are order-ambiguous too, and the report names them. A statement whose outcome differs but whose captured interval
(from its transaction's start) overlapped a commit of another session on
one of its tables is counted as order-ambiguous, apart from the
divergences: the capture itself does not say whether it saw that commit.

Commit order. A capture taken with tandem proxy --binlog-user holds each
captured commit's GTID: the server's own commit order. With --commit-order
gtid (the default) a commit goes to a target only once the commit before
it in that order is done there, so every target commits in production's
order, bypassed transactions applied with --apply-bypassed included (a
captured transaction that holds a row the earlier one needs rolls back and
runs again after it, as above). Under two-phase locking that order decides
what every write and locking read sees; so when the binary log shows that
every captured commit has its GTID, a write or locking read that names its
rows by primary key is judged as a verdict even where it overlapped
another session's commit (unless that transaction deleted rows of its
table: InnoDB skips a row deleted by a transaction it waited for, so the
answer depends on whether it waited), and only plain reads (which read a
snapshot taken at a moment), range writes and statements reading other
tables stay order-ambiguous there. The report says which rule a run used;
--commit-order time orders commits by the capture's clock as before, to
compare the two. --concurrency regroups transactions and orders commits by
the clock: a transaction's at its COMMIT's start, a change on its own at
its end (one that waited on the server for another transaction's lock
ended after that COMMIT, and runs after it).
--order none replays sessions freely (a load generator; divergences of
concurrent writes then mean little); it is the default for a capture made
by tandem synth, whose timeline is made up.

Transactions. A captured transaction runs on every target whole or not at
all. A deadlock or lock wait timeout (1213, 1205) that the capture did not
have is the target's engine behaviour, counted; then the transaction is
rolled back and retried from its first statement, as the client would,
up to --retries times; only the retried outcome is compared. The
rollback lets a change that waited on the server for its locks go ahead
of its writes, so later differences on the tables it locked are counted
apart ("retried"), and the report lists such transactions. A
transaction that fails on every retry (or whose connection is lost) has
failed for good on that target: it is rolled back, the rest of it is not
run (it would commit in part), and it is listed with its error and the
tables it writes. Its failing statement is the engine's verdict
(error-vs-ok); later differences on the tables it wrote are counted apart
("after a failed trx", naming it), and so is every table it leaves unlike
the baseline at the end. A statement the capture's server answered with a
deadlock or lock wait timeout had no effect there: it is not sent, and
the target's transaction is rolled back where the capture's was. Every
error is counted where it happened, first runs, retries and reruns alike:
the counts are what the servers count. An INSERT whose captured answer
carried an AUTO_INCREMENT id gets that id on every target (SET insert_id,
as statement-based replication does), so retries, reruns and overlapping
inserts never shift the ids.

Modes: each captured session on its own connection, paced by --speed (1 as
captured, 0 no clock waits); or --concurrency K, whole transactions
regrouped onto K connections per target, each carrying the schema,
variables (the latest value of each) and client flags of the session it
serves (a SET TRANSACTION or SET insert_id goes with the statement it is
for); sessions with state that cannot move (temporary tables, LOCK
TABLES, GET_LOCK, user variables set by queries or to a value of what
the session did, such as SET @id = NEXTVAL(s), cursors) keep a
connection of their own. Latency is service time and, when paced, time
from the intended send instant. Statements that cannot be deterministic
(NOW(), RAND(), LIMIT without ORDER BY …) are compared for errors only.
A captured KILL names a connection by the id the capture's server gave it:
it is sent with the id of the target connection replaying that session
(session mode only); one naming no captured session, KILL USER or
QUERY ID, and any KILL under --concurrency are never sent (skipped,
counted), since on a target that id is some other connection's. The
killed session's end, which the capture records before the KILL's answer,
leaves its connection open until the KILL has run. A
captured SET GLOBAL or SET PERSIST (an admin session turning a log on) is
not run either (skipped, counted): it would change each target server's
settings for everyone on it; --run-global-sets runs them.

At the end every table the capture touched is checksummed on every target
("end state: same as baseline", or which tables differ), and the engines
of the tables the replay created are read from information_schema.
Results are stored in --run DIR; 'tandem report DIR' prints them again.

Exit status: 0 when every target ran the replay to its end (divergences
are findings, not failures: the report and its JSON count them); 2 when
the replay ran to its end but a target failed during it (stopped, hung,
unreachable past --target-timeout): the report says why, and that
target's figures cover only what it ran before; 130 when it was
interrupted (Ctrl-C, SIGTERM): the report covers what ran until then; 1
when the replay could not run (the message says why).`,
		Example: `  tandem replay ./capture --speed 0 \
      --target innodb='root@tcp(127.0.0.1:3306)/sbtest' \
      --target myrocks='root@tcp(127.0.0.1:3307)/sbtest,engine=rocksdb'
  tandem replay ./capture --config targets.yaml --concurrency 16 --duration 60s --report-interval 10s`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("replay takes one capture directory; see 'tandem replay --help'")
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			if cfg.Loop < 1 { // 0 was taken as 1
				return fmt.Errorf("--loop %d: want 1 or more (passes over the capture)", cfg.Loop)
			}
			if err := cmp.Or(notNegative("--report-interval", cfg.ReportInterval), notNegative("--metrics-linger", linger)); err != nil {
				return err
			}
			tuneReplayGC()
			var err error
			if cfg.Key, err = keys.load(); err != nil {
				return err
			}
			dir, err := captureDir(args[0], unpackDir, cfg.Key)
			if err != nil {
				return err
			}
			cfg.Capture = dir
			if dir != args[0] {
				cfg.CaptureName = args[0] // the archive, not its unpacked copy
			}
			ts, err := loadTargets(configFile, specs)
			if err != nil {
				return err
			}
			cfg.Targets = ts
			if reference != "" {
				ref, err := targets.Parse(reference)
				if err != nil {
					return fmt.Errorf("--reference: %w", err)
				}
				for _, t := range ts {
					if t.Addr() == ref.Addr() && t.Database() == ref.Database() {
						return fmt.Errorf("--reference %s is target %s too: the reference is production's end state, never replayed onto", ref.Name, t.Name)
					}
				}
				cfg.Reference = &ref
			}
			if cfg.RunDir == "" {
				cfg.RunDir = filepath.Join(".tandem", "runs", time.Now().UTC().Format("20060102-150405"))
			}
			if err := gate.apply(&cfg); err != nil {
				return err
			}
			if err := shardFlags(&cfg, shard, shards, startAt); err != nil {
				return err
			}
			return runReplay(c, &cfg, metricsAddr, linger, asJSON, func(cfg replay.Config) (replay.Result, error) {
				return replay.Run(c.Context(), cfg, c.ErrOrStderr())
			})
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&specs, "target", nil, targetFlagHelp)
	f.StringVar(&configFile, "config", "", configFlagHelp)
	f.StringVar(&cfg.RunDir, "run", "", "new directory for the run's results (default .tandem/runs/TIMESTAMP); refused when its disk has under 64 MiB free, and the run stops with an error if it falls under that")
	f.StringVar(&unpackDir, "unpack-dir", "", "where a packed capture (FILE.tar.zst, tandem pack) is unpacked once, made if missing (default $TMPDIR)")
	keys.add(f, keyRunHelp)
	f.StringVar(&cfg.RunID, "run-id", "", "name of the run (shards of one run share it; default: the time and a random suffix)")
	f.Float64Var(&cfg.Speed, "speed", 1, "pacing: 1 as captured, 2 twice as fast, 0 no clock waits (order still holds)")
	f.StringVar(&cfg.Order, "order", "", "capture: a change (write, COMMIT of a write, locking read) starts after every record that ended before it in the capture has completed, a read after every such change (a capture without changes has nothing to order); none: sessions run freely (default: capture, or none for a synthesized capture)")
	gate.add(f, &cfg)
	f.StringVar(&reference, "reference", "", "NAME=DSN of a server holding production's end state (a replica stopped at the capture's end point by tandem align --end): every target's end state is compared with it, and it is never replayed onto")
	f.BoolVar(&cfg.ApplyBypassed, "apply-bypassed", false, "also run the transactions that bypassed the proxy (the capture holds them, from the binary log's row images) where the server ran them, so that end states can equal production's")
	f.BoolVar(&cfg.AllowUnaligned, "allow-unaligned", false, "replay onto targets that are not at the capture's start point (refused otherwise); the report labels their verdicts on writes")
	f.IntVar(&cfg.Concurrency, "concurrency", 0, "regroup transactions onto this many connections per target (0: one per captured session)")
	f.IntVar(&cfg.Loop, "loop", 1, "replay the capture this many times")
	f.DurationVar(&cfg.Duration, "duration", 0, "keep looping the capture until this much time has passed")
	f.DurationVar(&cfg.ReportInterval, "report-interval", 0, "print a sysbench-style line per target this often (to stderr)")
	f.IntVar(&cfg.Samples, "samples", 3, "divergence samples kept per statement digest and class")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	f.StringVar(&metricsAddr, "metrics-addr", defaultReplayMetrics, "serve Prometheus /metrics here while replaying; ':PORT' binds loopback, 'off' disables (the default port, if taken, turns metrics off with a warning)")
	f.StringVar(&shard, "shard", "", "replay shard I of N (\"I/N\", 0-based): the sessions with hash(session) mod N = I, each whole; shards of one run share --run-id and --start-at, and 'tandem report' merges their run directories")
	f.IntVar(&shards, "shards", 0, "with N shards, take I from $JOB_COMPLETION_INDEX (a Kubernetes Indexed Job)")
	f.StringVar(&startAt, "start-at", "", "RFC 3339 instant at which replay starts, after the targets are checked (shards start together; at most a minute in the past)")
	f.IntVar(&cfg.MetricsDigests, "metrics-digests", 20, "label the latency of the capture's N most frequent statement digests apart (the rest as \"other\")")
	f.Bool("pprof", false, "also serve Go's profiles under /debug/pprof/ on the metrics endpoint")
	f.DurationVar(&linger, "metrics-linger", 0, "after the replay, keep /metrics up this long so a last scrape sees the final counts (e.g. 2x the scrape interval)")
	f.StringVar(&cfg.IO, "io", replay.IOAuto, "how connections wait for replies: blocking (a thread each, waiting in the kernel as a C client does; replay raises GOMAXPROCS by the connections it opens: fastest for a few connections per CPU), poller (Go's poller: fewer threads and less memory, more scheduler hand-offs; it takes the replies of a group commit in one wake-up) or auto (the poller for transactions that write, one in 40 statements or more, over 2 connections or more to each target, when every target writes its log at each COMMIT: on 2 CPUs 10 to 13 % faster there at 2, 8 and 12 connections, alike at 4 and 16, where on reads the poller is 15 to 35 % slower; the poller beyond 8 connections per CPU; blocking otherwise; the report names the one it chose)")
	return cmd
}

// gateFlags are the flags replay and sweep share — how the capture's order
// between sessions is kept, how lock errors are retried, when a target
// counts as hung, what DDL that cannot be rewritten does — defined once,
// with replay.Config's defaults, so both run the same replay.
type gateFlags struct{ retries int }

func (g *gateFlags) add(f *pflag.FlagSet, cfg *replay.Config) {
	f.BoolVar(&cfg.SkipDamaged, "skip-damaged", false, "replay a capture that lacks records (a crash emptied or cut a WAL; a damaged file, whose unreadable records are passed over; 'tandem inspect --verify' lists both) instead of refusing it; the report says what is missing")
	f.DurationVar(&cfg.OrderInflight, "order-inflight", replay.DefaultOrderInflight, "with --order capture, a record stuck on the server this long (or 20x its captured time) for a reason the capture does not explain is let through: the transaction waiting for it rolls back and runs again (one that may hold the lock it waits for yields within 2ms)")
	f.StringVar(&cfg.CommitOrder, "commit-order", replay.CommitOrderGTID, "with --order capture, each session on its own connection: gtid keeps commits in the order the capture's GTIDs give (the server's own; a capture without GTIDs falls back to its clock), time orders them by the capture's clock alone, as captures without GTIDs are")
	f.DurationVar(&cfg.OrderTimeout, "order-timeout", replay.DefaultOrderTimeout, "with --order capture, the longest a record waits for those before it while none of them progresses (is done, or sent); one that goes ahead is counted (order_released), and a change that overtakes a conflicting one makes later differences on its tables order-ambiguous")
	f.IntVar(&g.retries, "retries", replay.DefaultRetries, "retry a transaction that hits a deadlock or lock wait timeout the capture did not have this many times (0: never; the writes that bypassed the proxy, applied as a replica applies them, are tried 10 times, as a replica does); one that fails every time is rolled back and counted as failed for good")
	f.DurationVar(&cfg.TargetTimeout, "target-timeout", replay.DefaultTargetTimeout, "a target whose call gets no answer this long, and whose server then completes no new connection (stopped, hung, unreachable), is marked failed; the others go on. A call waiting on a server that answers (a lock wait, a long statement) is logged and waited for, up to 10 times this (0: wait forever)")
	f.StringVar(&cfg.OnUnrewritable, "on-unrewritable", replay.UnrewritableFail, "a CREATE/ALTER TABLE whose engine cannot be set: fail (stop that target) or skip (run the rest without it)")
	f.BoolVar(&cfg.RunGlobalSets, "run-global-sets", false, "run the capture's SET GLOBAL / SET PERSIST statements on the targets (by default they are skipped and counted: an admin session in the capture would change each target server's settings for everyone on it)")
}

// apply gives the flags' zeros their meaning on the command line ("never",
// "wait forever"), where replay.Config's zero means its default; a
// negative value is an error (in a Config it means "none").
func (g *gateFlags) apply(cfg *replay.Config) error {
	switch {
	case g.retries < 0:
		return fmt.Errorf("--retries %d must not be negative (0: never retry)", g.retries)
	case cfg.TargetTimeout < 0:
		return fmt.Errorf("--target-timeout %v must not be negative (0: wait forever)", cfg.TargetTimeout)
	case cfg.OrderInflight < 0 || cfg.OrderTimeout < 0:
		return errors.New("--order-inflight and --order-timeout must not be negative")
	}
	cfg.Retries = g.retries
	if g.retries == 0 {
		cfg.Retries = -1
	}
	if cfg.TargetTimeout == 0 {
		cfg.TargetTimeout = -1
	}
	return nil
}
