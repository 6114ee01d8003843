package replay

import (
	"context"
	"time"

	"github.com/tandemdb/tandem/sqlinfo"
	"github.com/tandemdb/tandem/store"
)

// The engine's two seams. A run takes its records from a source and, if it
// has one, tells an observer each outcome as it is final; everything else
// (targets, sessions, the order, retries, results) is the same for every
// run. A replay or a sweep reads a closed capture and has no observer (it
// compares the outcomes at the end, from its run directory); a shadow
// (package shadow, through Follow) follows a capture as it is written: its
// Source decides what of it is replayed, its Observer compares each
// outcome with the primary's at once (Verdicts).

// source is where a run's records come from.
type source interface {
	// reader opens the capture; done releases it.
	reader(cfg *Config) (r *store.Reader, done func(), err error)
	// index is what the engine plans with (sessions, tables, commit
	// intervals) and the analyzer that made it; srv is what the targets'
	// schemas choose on their own (nil: nothing).
	index(ctx context.Context, r *store.Reader, srv *serverChoices) (*captureIndex, *sqlinfo.Analyzer, error)
	// records calls body with each record to replay on rn's target, pass
	// by pass (loop), until body returns false, the records end or ctx
	// does.
	records(ctx context.Context, rn *runner, body func(rec *store.Record, loop int) bool) error
	// followed: the capture is still being written. Its end, its list of
	// bypassed writes and its start point are not known yet, so nothing
	// is checked or applied against them, and a target that goes away is
	// down (the feed waits for it to come back), not failed.
	followed() bool
}

// runState is what a run holds while it runs, apart from what it was
// asked (Config): its seams and its metrics.
type runState struct {
	src     source
	obs     Observer // nil: none
	feed    *Feed    // a followed run's (Follow)
	metrics *runMetrics
}

// closedCapture is the source of a replay or a sweep: a capture that is
// closed (or crashed), indexed whole before the first record is sent, and
// looped as Loop and Duration ask.
type closedCapture struct{}

// captureCacheSize is the block cache of the capture a replay reads. The
// scan and the replay each read the capture once, in order, so a block is
// not read again: with Pebble's default 8 MiB cache, filled by the scan of
// any capture over 8 MiB of blocks, the C heap held 8 MiB more than a
// short capture's (and its arena fragments as blocks are swapped), for no
// hits.
const captureCacheSize = 1 << 20

func (closedCapture) reader(cfg *Config) (*store.Reader, func(), error) {
	r, err := store.Open(cfg.Capture, store.WithKey(cfg.Key), store.WithCacheSize(captureCacheSize))
	if err != nil {
		return nil, nil, err
	}
	if cfg.SkipDamaged {
		r.PassDamaged() // the records in a damaged file are then lost ones
	}
	return r, func() { r.Close() }, nil
}

func (closedCapture) index(ctx context.Context, r *store.Reader, srv *serverChoices) (*captureIndex, *sqlinfo.Analyzer, error) {
	an := sqlinfo.NewAnalyzer()
	x, err := scanCapture(ctx, r, an, srv)
	return x, an, err
}

func (closedCapture) followed() bool { return false }

// records runs body over the capture as many times as Loop and Duration
// ask.
func (closedCapture) records(ctx context.Context, rn *runner, body func(rec *store.Record, loop int) bool) error {
	deadline := time.Time{}
	if rn.cfg.Duration > 0 {
		deadline = rn.start.Add(rn.cfg.Duration)
	}
	for loop := 0; ; loop++ {
		rn.pass.Store(int64(loop + 1))
		for rec, err := range rn.r.Records() {
			if err != nil {
				return err
			}
			if ctx.Err() != nil || !deadline.IsZero() && time.Now().After(deadline) {
				return nil
			}
			if !deadline.IsZero() && rn.cfg.Speed > 0 && rn.intended(rec, loop).After(deadline) {
				// Paced: a record due after --duration ends is not handed
				// out (its worker would sleep past the end: the passes
				// after it are all handed out at once).
				return nil
			}
			if !body(rec, loop) {
				return nil
			}
		}
		if loop+1 >= rn.cfg.Loop && (deadline.IsZero() || time.Now().After(deadline)) {
			return nil
		}
	}
}
