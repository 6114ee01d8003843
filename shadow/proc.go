package shadow

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/rpc"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/tandemdb/tandem/compare"
	"github.com/tandemdb/tandem/store"
	"github.com/tandemdb/tandem/targets"
	"golang.org/x/sys/unix"
)

// Each shadow runs in a process of its own, a worker (tandem's hidden
// "shadow-worker" command), so that nothing it does shares the proxy's
// Go runtime: not its heap or garbage collector, not its scheduler, not
// a crash. The proxy's part is a feeder per shadow: a goroutine that
// follows the capture as it is committed and copies each record's stored
// bytes into the worker's stdin, decoding nothing. The worker keeps what
// it is fed in a log of its own (a mirror of the capture, NAME.feed beside
// its run directory, removed at its end), so that a shadow that is slow or down
// catches up from there without holding the proxy's feeder back, and it
// replays and compares exactly as an in-process shadow would. Control —
// start, metrics, the end — is net/rpc over a socket pair (fd 3).

// WorkerCommand is the hidden command that runs a shadow's worker.
const WorkerCommand = "shadow-worker"

// Set is the running shadows of one proxy: one worker process each.
type Set struct {
	log   *slog.Logger
	procs []*proc
}

type proc struct {
	name   string
	mirror string // the worker's copy of the feed
	cmd    *exec.Cmd
	ctl    *rpc.Client
	feed   *os.File // the worker's stdin
	fed    atomic.Uint64
	drain  chan struct{} // feed up to what is committed now, then end
	fedAll chan struct{} // the feeder ended
	exited chan struct{}
	// stopping is set once Stop began: the worker's exit is then expected.
	stopping atomic.Bool
	waitErr  error
}

// WorkerStart is what a worker is told to run (its Start call).
type WorkerStart struct {
	Config  Config
	Target  targets.Target
	Capture string // the capture's directory (for the run's record of it)
	Source  string // the capture's Meta().Source
	Base    int64  // the capture's Meta().BaseTime: the fed bytes are relative to it
	RunDir  string
	Mirror  string
}

// WorkerFinish is what the proxy tells a worker at the capture's stop
// (its Finish call): the writes that bypassed the proxy during the
// capture, which the shadow's final comparison counts apart.
type WorkerFinish struct {
	Bypassed []compare.BypassedWrite
}

// WorkerEnd is what a worker says at its end (its Finish call).
type WorkerEnd struct {
	Line string // its summary line
	Err  string
}

// Start starts a worker per target in ts (checked by Targets): each
// replays, live, the capture w writes into dir. The workers run until
// Stop, not until the proxy's context ends: the proxy drains them then.
func (cfg Config) Start(_ context.Context, ts []targets.Target, dir string, w *store.Writer, reg prometheus.Registerer, log *slog.Logger) (*Set, error) {
	runs := cfg.Runs
	if runs == "" {
		runs = strings.TrimRight(dir, "/") + ".shadows"
	}
	argv := cfg.Worker
	if len(argv) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("shadows: finding tandem's own executable to run their workers: %w", err)
		}
		argv = []string{exe, WorkerCommand}
	}
	s := &Set{log: log}
	for _, t := range ts {
		p, err := s.spawn(argv, WorkerStart{Config: cfg, Target: t, Capture: dir, Source: w.Meta().Source, Base: w.Meta().BaseTime,
			RunDir: filepath.Join(runs, t.Name), Mirror: filepath.Join(runs, t.Name+".feed")})
		if err != nil {
			s.kill()
			return nil, fmt.Errorf("shadow %s: %w", t.Name, err)
		}
		s.procs = append(s.procs, p)
		// The feed's own progress, from the proxy's side: it goes on
		// showing whether the worker reads, even if the worker dies.
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tandem_shadow_fed_seq",
			Help:        "The last capture record the proxy handed to the shadow's worker (compare tandem_capture_*'s committed records).",
			ConstLabels: prometheus.Labels{"shadow": p.name}}, func() float64 { return float64(p.fed.Load()) }))
	}
	live := w.Live()
	for _, p := range s.procs {
		go pprof.Do(context.Background(), pprof.Labels("tandem", "shadow-feed", "shadow", p.name), func(context.Context) {
			p.feedFrom(live, s.log)
		})
	}
	return s, nil
}

// spawn starts one worker and tells it what to run.
func (s *Set) spawn(argv []string, args WorkerStart) (*proc, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "shadow-control"), os.NewFile(uintptr(fds[1]), "shadow-control")
	defer theirs.Close()
	conn, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	feedR, feedW, err := os.Pipe()
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("feed pipe: %w", err)
	}
	defer feedR.Close()
	// A larger pipe: fewer wake-ups of the feeder while the worker reads.
	_, _ = unix.FcntlInt(feedW.Fd(), unix.F_SETPIPE_SZ, 1<<20)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = feedR, os.Stderr, os.Stderr
	cmd.ExtraFiles = []*os.File{theirs}
	// Its own process group, so that a terminal's Ctrl-C reaches the proxy
	// only (which drains the shadows); killed if the proxy dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		conn.Close()
		feedW.Close()
		return nil, fmt.Errorf("starting its worker (%s): %w", argv[0], err)
	}
	p := &proc{name: args.Target.Name, mirror: args.Mirror, cmd: cmd, ctl: rpc.NewClient(conn), feed: feedW,
		drain: make(chan struct{}), fedAll: make(chan struct{}), exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
		if !p.stopping.Load() {
			s.log.Error("shadow worker ended; this shadow is gone (the clients and the capture are not affected)", "shadow", p.name, "err", exitReason(p.waitErr))
		}
	}()
	var reply string
	if err := p.call("Worker.Start", args, &reply, time.Minute); err != nil {
		p.stopping.Store(true) // its end is this error, said once
		p.ctl.Close()
		feedW.Close()
		cmd.Process.Kill()
		<-p.exited
		return nil, err
	}
	return p, nil
}

func exitReason(err error) string {
	if err == nil {
		return "exited"
	}
	return err.Error()
}

// call is an RPC to the worker that gives up after timeout, or at once
// if the worker has ended.
func (p *proc) call(method string, args, reply any, timeout time.Duration) error {
	c := p.ctl.Go(method, args, reply, make(chan *rpc.Call, 1))
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-c.Done:
		var se rpc.ServerError
		switch {
		case c.Error == nil:
			return nil
		case errors.As(c.Error, &se):
			return errors.New(string(se)) // the worker's own message
		}
		// The connection broke: the worker ended, or is ending.
		select {
		case <-p.exited:
			return fmt.Errorf("its worker ended: %s", exitReason(p.waitErr))
		case <-time.After(5 * time.Second):
			return fmt.Errorf("lost contact with its worker: %v", c.Error)
		}
	case <-p.exited:
		return fmt.Errorf("its worker ended: %s", exitReason(p.waitErr))
	case <-t.C:
		return fmt.Errorf("its worker did not answer %s within %s", method, timeout)
	}
}

// feedPace is the longest a committed record waits in the proxy before
// its shadows' feeders hand it over (a shadow's lag is counted from the
// record's captured end, so it includes this).
const feedPace = 10 * time.Millisecond

// Frames on the feed: uvarint seq, uvarint length, the record's stored
// bytes; seq 0 ends the feed (everything committed was sent).

// feedFrom copies the capture's committed records into the worker's
// stdin until drained (then up to what is committed at that moment) or
// the worker ends.
func (p *proc) feedFrom(live *store.Reader, log *slog.Logger) {
	defer close(p.fedAll)
	defer p.feed.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Once drained: what is committed then, and the end frame.
	live.EndOnDrain(ctx, p.drain, func(target uint64) bool {
		select {
		case <-p.exited:
			return true // no one reads the feed
		default:
			return p.fed.Load() >= target
		}
	}, cancel)
	bw := bufio.NewWriterSize(p.feed, 256<<10)
	var hdr [2 * binary.MaxVarintLen64]byte
	pace := time.NewTimer(0)
	defer pace.Stop()
	for raw, err := range live.FollowRaw(ctx, 1) {
		if err != nil {
			// The capture failed or stopped: the shadow replays what it has.
			log.Warn("shadow feed ends: the capture cannot be read further", "shadow", p.name, "err", err)
			break
		}
		n := binary.PutUvarint(hdr[:], raw.Seq)
		n += binary.PutUvarint(hdr[n:], uint64(len(raw.Value)))
		bw.Write(hdr[:n])
		bw.Write(raw.Value)
		p.fed.Store(raw.Seq)
		if raw.Seq == raw.Durable {
			// Caught up: hand over what is buffered, then let commits
			// gather for a moment, so that the feeder wakes and writes
			// about feedPace apart, not at every commit.
			if bw.Flush() != nil {
				return // the worker is gone; its waiter says why
			}
			pace.Reset(feedPace)
			select {
			case <-pace.C:
			case <-ctx.Done():
			}
		}
	}
	bw.WriteByte(0)
	bw.Flush()
}

// Gather collects every worker's metrics (its shadow's tandem_shadow_*
// and replay series) for the proxy's /metrics, merged by
// prometheus.Gatherers (which also checks that the workers agree on each
// family's help and type). A worker that has ended shows as
// tandem_shadow_up 0.
func (s *Set) Gather() ([]*dto.MetricFamily, error) {
	gs := make(prometheus.Gatherers, len(s.procs))
	for i, p := range s.procs {
		gs[i] = prometheus.GathererFunc(p.gather)
	}
	return gs.Gather()
}

// gather is one worker's metrics, decoded from its Worker.Gather reply.
func (p *proc) gather() ([]*dto.MetricFamily, error) {
	var b []byte
	err := p.call("Worker.Gather", struct{}{}, &b, 5*time.Second)
	var mfs []*dto.MetricFamily
	if err == nil {
		dec := expfmt.NewDecoder(bytes.NewReader(b), expfmt.NewFormat(expfmt.TypeProtoDelim))
		for {
			mf := &dto.MetricFamily{}
			if err = dec.Decode(mf); err != nil {
				if errors.Is(err, io.EOF) {
					return mfs, nil
				}
				break
			}
			mfs = append(mfs, mf)
		}
	}
	select {
	case <-p.exited:
		return []*dto.MetricFamily{{Name: ptr("tandem_shadow_up"), Help: ptr(descUpHelp), Type: dto.MetricType_GAUGE.Enum(),
			Metric: []*dto.Metric{{Label: []*dto.LabelPair{{Name: ptr("shadow"), Value: ptr(p.name)}}, Gauge: &dto.Gauge{Value: ptr(0.0)}}}}}, nil
	default:
		return mfs, fmt.Errorf("shadow %s: %w", p.name, err)
	}
}

func ptr[T any](v T) *T { return &v }

// Stop lets every shadow replay what the capture holds (up to timeout),
// then ends them and prints one line each. bypassed are the writes that
// bypassed the proxy during the capture (compare.PlaceBypassed; nil: none
// known), which each shadow's final comparison counts apart. The capture
// must stay open until it returns.
func (s *Set) Stop(timeout time.Duration, force <-chan struct{}, out io.Writer, bypassed []compare.BypassedWrite) error {
	if s == nil {
		return nil
	}
	deadline := time.Now().Add(timeout)
	for _, p := range s.procs {
		p.stopping.Store(true)
		close(p.drain)
	}
	var errs []error
	type result struct {
		reply WorkerEnd
		err   error
	}
	results := make([]chan result, len(s.procs))
	for i, p := range s.procs {
		results[i] = make(chan result, 1)
		go func() {
			var r WorkerEnd
			err := p.call("Worker.Finish", WorkerFinish{Bypassed: bypassed}, &r, 24*time.Hour)
			results[i] <- result{r, err}
		}()
	}
	warned := false
	for i, p := range s.procs {
		var res result
		got, forced := false, false
		select {
		case res = <-results[i]:
			got = true
		case <-force:
			forced = true
		case <-time.After(time.Until(deadline)):
		}
		if !got {
			if !warned {
				if forced {
					s.log.Warn("stopping the shadows now (asked to), before they caught up")
				} else {
					s.log.Warn("shadows did not catch up in time; stopping them", "timeout", timeout)
				}
				warned = true
			}
			var none struct{}
			_ = p.call("Worker.Abort", struct{}{}, &none, 5*time.Second)
			select {
			case res = <-results[i]:
			case <-time.After(30 * time.Second):
				res.err = errors.New("its worker did not end after being stopped; killed")
			}
		}
		// The feeder ends with the worker's feed; the capture may close
		// only once no feeder reads it.
		select {
		case <-p.fedAll:
		case <-time.After(5 * time.Second):
			p.feed.Close()
			p.cmd.Process.Kill()
			<-p.fedAll
		}
		switch {
		case res.err != nil:
			errs = append(errs, fmt.Errorf("shadow %s: %w", p.name, res.err))
		case res.reply.Err != "":
			errs = append(errs, fmt.Errorf("shadow %s: %s", p.name, res.reply.Err))
		default:
			fmt.Fprint(out, res.reply.Line)
		}
		p.ctl.Close() // the worker removes its mirror and exits
		select {
		case <-p.exited:
		case <-time.After(30 * time.Second):
			p.cmd.Process.Kill()
			<-p.exited
		}
		// A worker that ended early left its copy of the feed behind.
		if err := os.RemoveAll(p.mirror); err != nil {
			s.log.Warn("removing a shadow worker's copy of the capture", "shadow", p.name, "err", err)
		}
	}
	return errors.Join(errs...)
}

// kill ends the workers started so far (a failed Start).
func (s *Set) kill() {
	for _, p := range s.procs {
		p.stopping.Store(true)
		p.ctl.Close()
		p.feed.Close()
		p.cmd.Process.Kill()
		<-p.exited
		os.RemoveAll(p.mirror)
	}
}
