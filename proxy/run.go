package proxy

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/tandemdb/tandem/capture"
	"github.com/tandemdb/tandem/compare"
	"github.com/tandemdb/tandem/gtid"
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
	// Binlog, if set, is the account that reads the backend's position and
	// binary log (its Addr and TLS are the backend's): the capture records
	// the server's position at its start and end, each captured commit's
	// GTID, and the transactions that bypassed the proxy in between.
	Binlog *gtid.Account
	// BinlogTimeout bounds reading the binary log at the capture's end
	// (default 1m).
	BinlogTimeout time.Duration
	// AdminEnabled serves the capture controls (tandem capture
	// start|stop|status) on the metrics address; AdminTokenFile holds the
	// bearer token they need (required off loopback); CaptureRoot, if set,
	// is the directory captures started at runtime must be inside.
	AdminEnabled   bool
	AdminTokenFile string
	CaptureRoot    string
	// Key, if set, encrypts every capture (store.WriterOptions.Key), by
	// flag or at runtime, and the shadows' copies of it.
	Key *store.Key
}

// ShadowStarter starts shadows on the capture w writes into dir.
type ShadowStarter interface {
	Start(ctx context.Context, dir string, w *store.Writer, reg prometheus.Registerer, log *slog.Logger) (ShadowSet, error)
}

// ShadowAligner is a ShadowStarter whose shadows are replicas of the
// backend (tandem proxy --shadow-replicas): Hold stops them applying
// before the capture's start point is read, Align brings each exactly to
// it (and removes its replication) before the first client is served.
type ShadowAligner interface {
	Hold(ctx context.Context) error
	Align(ctx context.Context, start string, out io.Writer) error
}

// ShadowSet is running shadows. Their metrics are gathered from them
// for /metrics.
type ShadowSet interface {
	// Stop drains the shadows; bypassed are the writes that bypassed the
	// proxy during the capture (nil: none known), which each shadow's
	// final comparison counts apart.
	Stop(timeout time.Duration, force <-chan struct{}, out io.Writer, bypassed []compare.BypassedWrite) error
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

// Run serves until ctx is done, then drains connections and stops the
// capture running then, and writes a one-line summary to out. Captures
// start with --capture (at once) or through the admin interface on the
// metrics address (tandem capture start|stop|status), one after another.
func Run(ctx context.Context, cfg RunConfig, out io.Writer) error {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
		cfg.Logger = log
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	cfg.Metrics = NewMetrics(reg)
	if cfg.Notice == nil {
		cfg.Notice = func(msg string) { fmt.Fprintf(out, "tandem proxy: %s\n", msg) }
	}
	if _, ok := cfg.Shadows.(ShadowAligner); ok && cfg.Binlog == nil {
		return errors.New("proxy: --shadow-replicas needs --binlog-user: the shadows are brought to the capture's start point, which the backend's binary log gives")
	}
	// Everything that can fail is tried before the first capture is
	// created (the listener, TLS, the metrics endpoint, the admin token),
	// so that a failed start leaves no capture behind for the retry to
	// trip on.
	token, adminOn, adminNotice, err := AdminFor(cfg.MetricsAddr, cfg.AdminTokenFile, cfg.AdminEnabled)
	if err != nil {
		return err
	}
	if cfg.CaptureDir != "" {
		if cfg.CaptureDir, err = CheckCaptureDir(cfg.CaptureRoot, cfg.CaptureDir); err != nil {
			return err
		}
	}
	p, err := New(cfg.Config)
	if err != nil {
		return err
	}
	r := newRunner(ctx, p, cfg, reg, out)
	mctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	gather := prometheus.Gatherers{reg, prometheus.GathererFunc(r.Gather)}
	var routes []metricsrv.Route
	if adminOn {
		routes = append(routes, metricsrv.Route{Pattern: "/capture/", Handler: AdminHandler(r, token)})
	}
	maddr, mwait, err := metricsrv.Listen(mctx, cfg.MetricsAddr, gather, reg, cfg.Pprof, routes...)
	if err != nil {
		p.ln.Close()
		return err
	}
	if cfg.CaptureDir != "" {
		if _, err := r.Start(ctx, CaptureOptions{Dir: cfg.CaptureDir}); err != nil {
			p.ln.Close()
			cancel()
			mwait()
			return err
		}
	}
	what := "relaying only (start a capture with 'tandem capture start DIR')"
	if cfg.CaptureDir != "" {
		what = "capturing into " + cfg.CaptureDir
	}
	metrics := "metrics off"
	if maddr != "" {
		metrics = "metrics on http://" + maddr + "/metrics"
		if adminOn {
			metrics += ", capture controls on http://" + maddr + "/capture/"
		}
	}
	procs := ""
	if cfg.Procs > 0 {
		procs = fmt.Sprintf(", %d procs, %s I/O", cfg.Procs, p.cfg.IO)
	}
	fmt.Fprintf(out, "tandem proxy: listening on %s, backend %s, %s, %s%s\n", p.Addr(), cfg.Backend, what, metrics, procs)
	if adminNotice != "" {
		cfg.Notice(adminNotice)
	}
	if cfg.Ready != nil {
		cfg.Ready(p.Addr().String())
	}
	serveErr := p.Serve(ctx)
	// Every session has ended: what they wrote is before the end point.
	r.stopCurrent(StopShutdown)
	fmt.Fprintf(out, "tandem proxy: %d sessions relayed\n", p.nextID.Load())
	cancel()
	mwait()
	return errors.Join(serveErr, r.failure())
}

// readPosition reads the backend's position with the --binlog-user account.
func readPosition(ctx context.Context, acc gtid.Account) (*store.Position, error) {
	db := openAdmin(acc)
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return gtid.Read(ctx, db)
}

// openAdmin opens a go-sql-driver pool on the backend for the account.
func openAdmin(acc gtid.Account) *sql.DB {
	c := mysql.NewConfig()
	c.User, c.Passwd, c.Net, c.Addr = acc.User, acc.Password, "tcp", acc.Addr
	c.TLS = acc.TLS
	c.Timeout = 5 * time.Second
	conn, err := mysql.NewConnector(c)
	if err != nil {
		panic(err) // NewConnector fails only on a malformed config built here
	}
	return sql.OpenDB(conn)
}

// endCapture records the backend's end position and, when the proxy
// followed commits, the binary log's transactions in between that did not
// pass through it, and says so.
// readEnd reads the backend's position at a capture's end.
func readEnd(cfg RunConfig, acc gtid.Account) (*store.Position, error) {
	ctx, cancel := context.WithTimeout(context.Background(), cmp.Or(cfg.BinlogTimeout, time.Minute))
	defer cancel()
	return readPosition(ctx, acc)
}

// It returns the end point (nil: none) and where the writes that bypassed
// the proxy changed each table (compare.PlaceBypassed; nil: none known).
func endCapture(cfg RunConfig, acc gtid.Account, start, end *store.Position, err error, w *store.Writer, rec *capture.Recorder, commitsOn bool, unasked int, out io.Writer, log *slog.Logger) (*store.Position, []compare.BypassedWrite) {
	ctx, cancel := context.WithTimeout(context.Background(), cmp.Or(cfg.BinlogTimeout, time.Minute))
	defer cancel()
	if err != nil {
		log.Warn("reading the backend's position at the capture's end failed; the capture has no end point", "err", err)
		fmt.Fprintf(out, "tandem proxy: the capture has no end point: %v\n", err)
		return nil, nil
	}
	var byp *store.Bypassed
	points := rec.CommitPoints()
	commits := make(map[string]bool, len(points))
	for g := range points {
		commits[g] = true
	}
	if commitsOn {
		var trxs []gtid.Trx
		byp, trxs = gtid.Bypassed(ctx, acc, start.GTID, end.GTID, commits, true)
		if len(trxs) > 0 {
			byp.Applicable, byp.NotApplicable = storeBypassed(ctx, acc, start, end, w, trxs, points)
		}
		if byp.Error != "" && byp.NotApplicable == "" {
			byp.NotApplicable = "the binary log was not read to the end point"
		}
		byp.Unasked = unasked
	}
	w.SetEnd(end, byp)
	msg := fmt.Sprintf("capture points: start %s, end %s", orNone(start.GTID), orNone(end.GTID))
	if byp != nil {
		msg += fmt.Sprintf("; %d captured commits with their GTID; %d transactions (%d rows) bypassed the proxy", len(commits), byp.Transactions, byp.Rows)
		if len(byp.Tables) > 0 {
			names := make([]string, 0, len(byp.Tables))
			for _, t := range byp.Tables {
				names = append(names, t.Table)
			}
			msg += " on " + strings.Join(names, ", ")
		}
		if byp.Error != "" {
			msg += " (the binary log could not be read to the end: " + byp.Error + ")"
		}
		if unasked > 0 {
			msg += fmt.Sprintf(" (uncertain: %d captured transactions have a GTID the proxy could not ask for (committed implicitly by DDL, by a statement that read the diagnostics, or the backend went away): up to %d of those may have passed through the proxy)", unasked, unasked)
		}
	}
	fmt.Fprintf(out, "tandem proxy: %s\n", msg)
	return end, placeBypassed(byp, start, points)
}

// placeBypassed places each table's first write that bypassed the proxy
// on the capture's clock, from where the captured commits began.
func placeBypassed(byp *store.Bypassed, start *store.Position, points map[string]capture.CommitPoint) []compare.BypassedWrite {
	tables := gtid.BypassedTables(byp)
	if len(tables) == 0 {
		return nil
	}
	commits := make([]compare.CommitStart, 0, len(points))
	for g, p := range points {
		if id, err := gtid.ParseGTID(g); err == nil {
			commits = append(commits, compare.CommitStart{Domain: id.Domain, Seq: id.Seq, Start: p.From.UnixNano()})
		}
	}
	return compare.PlaceBypassed(tables, start.At.UnixNano(), commits).Writes()
}

// storeBypassed stores the transactions that bypassed the proxy as
// records (capture.BypassedRecords), each after the captured commit that
// came before it in the server's order, for replay --apply-bypassed. It
// returns how many it stored and, if not all, why not.
func storeBypassed(ctx context.Context, acc gtid.Account, start, end *store.Position, w *store.Writer, trxs []gtid.Trx, points map[string]capture.CommitPoint) (int, string) {
	db := openAdmin(acc)
	defer db.Close()
	var image string
	if err := db.QueryRowContext(ctx, "SELECT @@binlog_row_image").Scan(&image); err != nil {
		return 0, "reading @@binlog_row_image: " + err.Error()
	}
	if !strings.EqualFold(image, "FULL") {
		return 0, "binlog_row_image is " + image + ": rebuilding a row's change needs its every column (FULL)"
	}
	names := map[string]bool{}
	for _, t := range trxs {
		for _, c := range t.Changes {
			names[c.Schema+"."+c.Table] = true
		}
	}
	list := make([]string, 0, len(names))
	for n := range names {
		list = append(list, n)
	}
	tables, err := gtid.ReadTables(ctx, db, list)
	if err != nil {
		return 0, err.Error()
	}
	slots := newBypassedSlots(points, start.At, end.At)
	// One session carries them all, in the server's order: where each
	// follows (the record seq after which it runs, and its time) never goes
	// back, even where the captured commits' records and GTIDs were
	// handed out in a slightly different order.
	session := store.BypassedSessionBase
	stored := 0
	var why string
	prevAfter, prevLo := uint64(0), start.At
	for _, t := range trxs {
		after, lo, hi := slots.slot(t.GTID)
		after = max(after, prevAfter)
		if lo.Before(prevLo) {
			lo = prevLo
		}
		if hi.Before(lo) {
			hi = lo
		}
		recs, err := capture.BypassedRecords(t, tables, session, lo, hi, stored == 0)
		if err != nil {
			if why == "" {
				why = fmt.Sprintf("%s: %v", t.GTID, err)
			}
			continue
		}
		if err := w.AddBypassed(after, recs); err != nil {
			return stored, err.Error()
		}
		prevAfter, prevLo = after, recs[len(recs)-1].Start
		stored++
	}
	if stored > 0 {
		if err := w.AddBypassed(prevAfter, []*store.Record{capture.BypassedQuit(session, prevLo.Add(1))}); err != nil {
			return stored, err.Error()
		}
	}
	if stored < len(trxs) && why != "" {
		why = fmt.Sprintf("%d of %d could not be rebuilt (the first: %s)", len(trxs)-stored, len(trxs), why)
	}
	return stored, why
}

// bypassedSlots places the transactions that bypassed the proxy among
// the captured commits, by GTID: per domain, in GTID order, the captured
// commits with the latest From among those up to each (prefix), and the
// earliest End among those from each on (suffix).
type bypassedSlots struct {
	start, end time.Time
	domains    map[uint32]*slotDomain
}

type slotDomain struct {
	seqs      []uint64 // the commits' GTID sequence numbers, ascending
	lastFrom  []capture.CommitPoint
	firstEnds []time.Time
}

func newBypassedSlots(points map[string]capture.CommitPoint, start, end time.Time) *bypassedSlots {
	type point struct {
		g gtid.GTID
		capture.CommitPoint
	}
	var sorted []point
	for g, p := range points {
		if id, err := gtid.ParseGTID(g); err == nil && p.Seq != 0 { // a dropped record has nothing to follow
			sorted = append(sorted, point{id, p})
		}
	}
	slices.SortFunc(sorted, func(a, b point) int { return cmp.Compare(a.g.Seq, b.g.Seq) })
	s := &bypassedSlots{start: start, end: end, domains: map[uint32]*slotDomain{}}
	for _, p := range sorted {
		d := s.domains[p.g.Domain]
		if d == nil {
			d = &slotDomain{}
			s.domains[p.g.Domain] = d
		}
		d.seqs = append(d.seqs, p.g.Seq)
		last := p.CommitPoint
		if n := len(d.lastFrom); n > 0 && d.lastFrom[n-1].From.After(last.From) {
			last = d.lastFrom[n-1]
		}
		d.lastFrom = append(d.lastFrom, last)
		d.firstEnds = append(d.firstEnds, p.End)
	}
	for _, d := range s.domains {
		for i := len(d.firstEnds) - 2; i >= 0; i-- {
			if d.firstEnds[i+1].Before(d.firstEnds[i]) {
				d.firstEnds[i] = d.firstEnds[i+1]
			}
		}
	}
	return s
}

// slot says where the bypassed transaction g goes: after the record seq
// after, at lo, with captured statements up to hi unable to say whether
// they saw it. It committed on the server after every captured commit
// before it in its domain's order, and before every one after it. So it
// goes at the latest From of the former: once a COMMIT began, the
// transaction's writes were done and held their rows until it; a bypassed
// transaction that waited on them is released inside that COMMIT, as it
// is on a target, where placing it at the COMMIT's end instead could put
// it after a captured write that followed it on the server, its answer
// sent first (group commit sends answers a little out of the server's
// order). The first End of the latter bounds the window.
func (s *bypassedSlots) slot(g gtid.GTID) (after uint64, lo, hi time.Time) {
	lo, hi = s.start, s.end
	if d := s.domains[g.Domain]; d != nil {
		i, _ := slices.BinarySearch(d.seqs, g.Seq)
		if i > 0 && d.lastFrom[i-1].From.After(lo) {
			after, lo = d.lastFrom[i-1].Seq, d.lastFrom[i-1].From
		}
		if i < len(d.seqs) && d.firstEnds[i].Before(hi) {
			hi = d.firstEnds[i]
		}
	}
	return after, lo, hi
}

func orNone(g string) string {
	if g == "" {
		return "(empty: nothing logged yet)"
	}
	return g
}
