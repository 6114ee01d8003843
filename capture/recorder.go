// Package capture turns protocol exchanges into store records and writes
// them without ever making the client wait: Session follows one client
// session's conversation, fed by whoever sees it (the proxy today), and
// Recorder appends its records to a capture.
package capture

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tandemdb/tandem/store"
)

// Recorder hands records to a store.Writer with TryAppend: when the writer
// is behind (its pending bytes are the bounded queue), records are dropped
// and counted, and a warning is logged at most once per LogEvery.
type Recorder struct {
	w        *store.Writer
	log      *slog.Logger
	logEvery time.Duration
	dropped  atomic.Uint64

	mu struct {
		sync.Mutex
		lastLog      time.Time
		droppedAtLog uint64
		gtids        map[string]CommitPoint // the commits' GTIDs (AddGTID)
	}
}

// NewRecorder records into w. A nil Recorder records nothing.
func NewRecorder(w *store.Writer, log *slog.Logger) *Recorder {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Recorder{w: w, log: log, logEvery: 5 * time.Second}
}

// Record appends r, or drops and counts it. It never blocks on the disk.
func (c *Recorder) Record(r *store.Record) {
	if c == nil {
		return
	}
	if c.w.TryAppend(r) != 0 {
		return
	}
	n := c.dropped.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.w.Err() != nil {
		return // the capture stopped (logged once by the writer); relaying goes on
	}
	if now := time.Now(); now.Sub(c.mu.lastLog) >= c.logEvery {
		c.log.Warn("capture is behind: records dropped", "dropped_since_last_report", n-c.mu.droppedAtLog, "dropped_total", n)
		c.mu.lastLog, c.mu.droppedAtLog = now, n
	}
}

// AddGTID notes that the transaction cm ended was given gtid by the
// server: the capture keeps it with cm's record (when the record was not
// dropped), and CommitPoints lists it.
func (c *Recorder) AddGTID(cm Commit, gtid string) {
	if c == nil || gtid == "" {
		return
	}
	c.w.AddGTID(cm.Seq, gtid)
	c.mu.Lock()
	if c.mu.gtids == nil {
		c.mu.gtids = map[string]CommitPoint{}
	}
	c.mu.gtids[gtid] = CommitPoint(cm)
	c.mu.Unlock()
}

// CommitPoint is where a captured commit is (Commit: its record, and
// between which times the server committed it).
type CommitPoint Commit

// CommitPoints returns the GTIDs AddGTID was given, with where each is.
func (c *Recorder) CommitPoints() map[string]CommitPoint {
	out := map[string]CommitPoint{}
	if c == nil {
		return out
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for g, p := range c.mu.gtids {
		out[g] = p
	}
	return out
}

// Writer is the capture the recorder writes.
func (c *Recorder) Writer() *store.Writer { return c.w }

// Dropped is how many records were dropped.
func (c *Recorder) Dropped() uint64 {
	if c == nil {
		return 0
	}
	return c.dropped.Load()
}

// Close flushes and closes the capture.
func (c *Recorder) Close() error {
	if c == nil {
		return nil
	}
	return c.w.Close()
}
