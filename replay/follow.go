package replay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/tandemdb/tandem/sqlinfo"
	"github.com/tandemdb/tandem/store"
)

// The seam of a run that follows a capture while it is written (a
// shadow: package shadow). The engine is the same as a replay's
// (sessions, prepared statements, the capture's order, client error
// handling, the run directory); what differs is where records come from
// (a Source) and who watches them run (an Observer). Between them and the
// run stands a Feed.

// A Source feeds a followed run its records.
type Source interface {
	// Reader is the capture being written (store.Writer.Live); its
	// writer closes it.
	Reader() *store.Reader
	// Feed hands f the records to replay, in commit order, until the
	// capture ends, the source stops or ctx ends. Every record is given
	// to f.Index first, sent or not.
	Feed(ctx context.Context, f *Feed) error
}

// An Observer is told what a followed run's workers do, as they do it.
type Observer interface {
	// Started: the run replays through f from now on.
	Started(f *Feed)
	// Finished: a worker is done with record seq.
	Finished(seq uint64)
	// Outcome is one record's outcome; a retried or rerun record's later
	// outcome replaces its earlier one.
	Outcome(d Done)
}

// Done is one record a worker ran (or skipped), and its outcome.
type Done struct {
	Rec *store.Record
	// SQL is a query's text or an execute's prepared SQL, Info its
	// analysis (nil for records that are not statements).
	SQL     string
	Info    *sqlinfo.Info
	Outcome *store.Outcome
}

// Feed is a followed run as its Source and Observer see it: where records
// go, what is known of them, and the state of the run's target.
type Feed struct {
	sc   *scanner
	r    *store.Reader
	rn   atomic.Pointer[runner]
	body func(rec *store.Record, loop int) bool
}

// NewFeed returns a feed that indexes and analyses records but replays
// nothing until a run (Follow) takes it: a Source's policy can be tested
// on it without a server.
func NewFeed() *Feed {
	sc := newScanner(sqlinfo.NewAnalyzer())
	sc.ended = nil // a followed session's end is replayed before any KILL after it is seen
	sc.followed = true
	// A followed capture lets go of old commits (Feed.ForgetCommits) and
	// compares again at its end: that comparison finds what the live one
	// found while they were kept.
	sc.x.commits.Remember()
	return &Feed{sc: sc}
}

// Index adds rec to what the run knows of the capture (its session's
// prepared statements and transactions, the tables it writes).
func (f *Feed) Index(rec *store.Record) { f.sc.add(rec) }

// ForgetCommits lets go of the index's commits that ended before before
// (ns, the capture's clock): a followed capture is indexed for as long as
// it runs. A statement whose transaction began before that bound and
// whose outcome differs is then counted order-ambiguous, its commits not
// known (compare.Commits.Forget). It returns how many entries went.
func (f *Feed) ForgetCommits(before int64) int { return f.sc.x.commits.Forget(before) }

// Send replays rec (already indexed). False: the run is ending; send
// nothing more.
func (f *Feed) Send(rec *store.Record) bool { return f.body(rec, 0) }

// Statement is a query's text or an execute's prepared SQL (as indexed)
// with its analysis; ok is false for records that are not statements.
func (f *Feed) Statement(rec *store.Record) (sql string, info *sqlinfo.Info, ok bool) {
	switch rec.Kind {
	case store.KindQuery:
		sql = rec.SQL
	case store.KindExecute:
		sql = f.sc.preparedSQL(rec.Session, rec.StmtID)
	default:
		return "", nil, false
	}
	return sql, f.sc.an.Info(sql), true
}

// CapturedError is the error code the primary answered rec with (the
// last of a multi-statement's results), 0 for none.
func (f *Feed) CapturedError(rec *store.Record) uint16 { return capturedError(rec) }

// LeftOut marks the tables a statement of rec writes (info, from
// Statement) as not replayed from rec's start on: the target lacks the
// write, and later differences there are counted apart, not as the
// engine's.
func (f *Feed) LeftOut(rec *store.Record, info *sqlinfo.Info) {
	f.sc.x.gaps.Add(rec.Session, rec.Start.UnixNano(), qualify(info.Writes, rec.Schema, nil))
}

// Lacks marks the tables of a write that failed on the target (and not on
// the primary) from rec's end on: later differences there follow from it.
func (f *Feed) Lacks(rec *store.Record, info *sqlinfo.Info) {
	f.sc.x.gaps.AddFailed(rec.Session, rec.Start.UnixNano()+int64(rec.Duration), qualify(info.Writes, rec.Schema, nil))
}

// Target is the name of the run's target.
func (f *Feed) Target() string {
	if rn := f.rn.Load(); rn != nil {
		return rn.t.Name
	}
	return ""
}

// Logger is the run's logger.
func (f *Feed) Logger() *slog.Logger {
	if rn := f.rn.Load(); rn != nil {
		return rn.cfg.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// Down says why the target is down now, its last connection attempt
// having failed ("" while it is up, or before the run started).
func (f *Feed) Down() string {
	if rn := f.rn.Load(); rn != nil {
		return rn.downReason()
	}
	return ""
}

// Failed says why the target failed for good ("" while it has not).
func (f *Feed) Failed() string {
	if rn := f.rn.Load(); rn != nil {
		return rn.failed()
	}
	return ""
}

// Probe tries to connect to a target that is down, once.
func (f *Feed) Probe(ctx context.Context) {
	if rn := f.rn.Load(); rn != nil {
		rn.probe(ctx)
	}
}

// Follow replays src's records onto one target (cfg.Targets[0]) as they
// are committed, as fast as the order allows, telling obs (which may be
// nil) what runs. It returns when src's Feed does, once every record sent
// has run; the run directory cfg.RunDir then holds what a replay's does.
func Follow(ctx context.Context, cfg Config, src Source, obs Observer) (Result, error) {
	if src == nil || src.Reader() == nil {
		return Result{}, errors.New("replay: following a capture needs a live reader of it")
	}
	if len(cfg.Targets) != 1 {
		return Result{}, fmt.Errorf("replay: a followed capture replays onto one target, not %d", len(cfg.Targets))
	}
	// As fast as the order allows: records arrive as they happen. Go's
	// poller, so that a shadow takes no threads from the proxy.
	cfg.Speed, cfg.Concurrency, cfg.Loop, cfg.Duration, cfg.IO = 0, 0, 1, 0, IOPoller
	if cfg.Order == "" {
		cfg.Order = OrderCapture
	}
	f := NewFeed()
	f.r = src.Reader()
	return run(ctx, cfg, nil, &runState{src: followed{src, f}, obs: obs, feed: f}, nil)
}

// followed is the engine's source for a followed capture: indexed as it
// is fed.
type followed struct {
	src Source
	f   *Feed
}

func (s followed) reader(*Config) (*store.Reader, func(), error) {
	return s.f.r, func() {}, nil // the capture being written; its writer closes it
}

func (s followed) index(_ context.Context, _ *store.Reader, srv *serverChoices) (*captureIndex, *sqlinfo.Analyzer, error) {
	s.f.sc.x.srv.Store(srv) // from here on: records indexed before did not see it
	return s.f.sc.x, s.f.sc.an, nil
}

func (s followed) records(ctx context.Context, rn *runner, body func(rec *store.Record, loop int) bool) error {
	s.f.rn.Store(rn)
	s.f.body = body
	err := s.src.Feed(ctx, s.f)
	s.f.sc.finish()
	return err
}

func (followed) followed() bool { return true }
