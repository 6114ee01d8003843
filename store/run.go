package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/sstable/block"
	"github.com/tandemdb/tandem/internal/version"
	"github.com/tandemdb/tandem/latency"
)

// RunFormatVersion is the run format this package writes and the newest it
// reads. Part of the format: bump it for any incompatible change.
const RunFormatVersion = 4

const runMagic = "tandem-run"

// Run key prefixes. Part of the run format, never change.
const (
	runOutcome  byte = 0x01
	runHist     byte = 0x02
	runResult   byte = 0x03
	runInterval byte = 0x04
	runDigest   byte = 0x05
	runPoint    byte = 0x06
)

var keyRunEnd = []byte("\x00end")

// Series names a histogram of a target in a run. Part of the run format.
type Series byte

const (
	SeriesService Series = 1 // every statement's service time
	SeriesLag     Series = 2 // from the intended send instant (paced replays)
	SeriesRead    Series = 3 // service time of reads
	SeriesWrite   Series = 4 // … of writes
	SeriesOther   Series = 5 // … of other statements
	SeriesDigest  Series = 6 // service time of one statement digest (the key names it)
	seriesMax     Series = 6
)

// RunMeta describes a run; written when it is created. JSON names are part
// of the run format.
type RunMeta struct {
	Magic     string `json:"magic"` // always "tandem-run"
	RunFormat int    `json:"run_format_version"`
	// RunID names the run; the shards of one sharded replay share it.
	RunID string `json:"run_id"`
	Shard *Shard `json:"shard,omitempty"`
	// Command is what made the run: "replay" or "sweep".
	Command       string      `json:"command"`
	Capture       string      `json:"capture"`
	CaptureSource string      `json:"capture_source"`
	Started       time.Time   `json:"started"`
	ToolVersion   string      `json:"tool_version"`
	Targets       []RunTarget `json:"targets"`
	Baseline      string      `json:"baseline"`
	// Settings are the run's flags, in the order they are shown.
	Settings []Setting `json:"settings"`
	// CaptureSessions counts the capture's sessions by how they began and
	// ended, for a capture that began or ended on a running proxy with
	// sessions open (absent otherwise, and in runs written before it).
	CaptureSessions *CaptureSessions `json:"capture_sessions,omitempty"`
}

// Shard says which part of a sharded replay a run is.
type Shard struct {
	Index int `json:"index"`
	Count int `json:"count"`
}

// Setting is one flag of a run.
type Setting struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// RunTarget is one target of a run (never its password).
type RunTarget struct {
	Name     string `json:"name"`
	Addr     string `json:"addr"`
	Engine   string `json:"engine"`
	Options  string `json:"options,omitempty"`
	Version  string `json:"version"`
	Baseline bool   `json:"baseline"`
	// TLS is the cipher suite the target's connections ran ("" in clear).
	TLS string `json:"tls,omitempty"`
	// Position is the target's GTID position when the replay began, and
	// Aligned whether it was the capture's start point (captures with a
	// start point only; AlignedNote says how it stood otherwise).
	Position    string `json:"gtid_position,omitempty"`
	Aligned     bool   `json:"aligned,omitempty"`
	AlignedNote string `json:"alignment,omitempty"`
}

// RunEnd is written when a run ends. A run without one did not finish.
type RunEnd struct {
	Ended   time.Time `json:"ended"`
	Elapsed float64   `json:"elapsed_seconds"`
	// Interrupted: the run was stopped before the capture's end.
	Interrupted bool     `json:"interrupted,omitempty"`
	Notes       []string `json:"notes,omitempty"`
}

// Point is one replay of a run: a plain replay has point 0 only; a sweep
// has one per thread count (and per target, when targets go one at a
// time).
type Point struct {
	Point   int      `json:"point"`
	Label   string   `json:"label"`
	Threads int      `json:"threads,omitempty"`
	Targets []string `json:"targets"`
	// Order is the ordering between sessions that ran: "capture" or "none".
	Order   string    `json:"order"`
	IO      string    `json:"io"`
	Started time.Time `json:"started"`
	Elapsed float64   `json:"elapsed_seconds"`
}

// TargetResult is what one target did in one point: counters, comparisons
// and the state it ended in.
type TargetResult struct {
	Target string `json:"target"`
	// Elapsed is this target's own replay time, which its rates divide by.
	Elapsed      float64 `json:"elapsed_seconds"`
	Transactions int64   `json:"transactions"`
	Reads        int64   `json:"reads"`
	Writes       int64   `json:"writes"`
	Other        int64   `json:"other"`
	Errors       int64   `json:"errors"`
	// ErrorCodes counts errors by code: the server's ("1213"), or the
	// replayer's with their cause ("2013 timeout").
	ErrorCodes map[string]int64 `json:"error_codes,omitempty"`
	// Deadlocks counts deadlocks and lock wait timeouts (1213, 1205) the
	// target gave, retried or not: engine behaviour. Errors, ErrorCodes and
	// Deadlocks count every time a statement failed, first runs, retries
	// and reruns alike (run format 2; format 1 counted each record's first
	// run only), so they equal what the server counts.
	Deadlocks        int64 `json:"deadlocks_and_lock_waits"`
	Retries          int64 `json:"retries"`
	RetriesSucceeded int64 `json:"retries_succeeded"`
	// Reexecuted counts statements run again beyond their first run: by
	// retries and by reruns for order.
	Reexecuted int64 `json:"reexecuted,omitempty"`
	// FailedTransactions counts the transactions that failed for good on
	// the target: rolled back there, never committed in part, the rest of
	// their statements not run (SkipTrxFailed). FailedByCode splits them by
	// the error that ended the last attempt ("1213"; "2013 connection
	// reset" when the connection was lost, which is no engine's verdict).
	// Failures lists them (the first maxFailures), for the attribution of
	// later differences.
	FailedTransactions int64            `json:"failed_transactions,omitempty"`
	FailedByCode       map[string]int64 `json:"failed_transactions_by_code,omitempty"`
	Failures           []FailedTrx      `json:"failures,omitempty"`
	// Reordered counts the changes replay sent to the target out of the
	// capture's order (see Reorder); Reorders lists them (the first
	// MaxFailures), for the attribution of later differences.
	Reordered int64     `json:"reordered,omitempty"`
	Reorders  []Reorder `json:"reorders,omitempty"`
	// CaptureRollbacks: statements that failed with a deadlock in the
	// capture, where the target was rolled back to match.
	CaptureRollbacks int64            `json:"capture_rollbacks,omitempty"`
	Connections      int64            `json:"connections"`
	ConnectFailures  int64            `json:"connect_failures"`
	Skipped          int64            `json:"skipped"`
	SkippedBy        map[string]int64 `json:"skipped_by_reason,omitempty"`
	// Ordering: records that waited for others to complete; transactions
	// rolled back and run again so that a statement stuck behind their
	// locks could go first, as in the capture; records that went ahead
	// before all they wait for had completed (the longest wait,
	// --order-timeout, ran out, or what they waited for waited for them).
	OrderWaits     int64 `json:"order_waits"`
	OrderReruns    int64 `json:"order_reruns"`
	OrderReleased  int64 `json:"order_released"`
	PinnedSessions int64 `json:"pinned_sessions,omitempty"`
	// Failed says why the target stopped before the end, if it did.
	Failed     string         `json:"failed,omitempty"`
	VsBaseline *Divergences   `json:"divergences_from_baseline,omitempty"`
	VsCapture  *Divergences   `json:"divergences_from_capture,omitempty"`
	EndState   *EndState      `json:"end_state,omitempty"`
	Created    []CreatedTable `json:"created_tables,omitempty"`
	// CreatedDropped counts the tables the traffic created and dropped
	// again, or created temporary: gone at the end, so their engine cannot
	// be read.
	CreatedDropped int `json:"created_dropped,omitempty"`
	// Footprint is the size of the tables the capture touched after the
	// replay, FootprintBefore before it (package footprint says how each
	// engine is measured); FootprintError says why they are missing.
	Footprint       []TableFootprint `json:"footprint,omitempty"`
	FootprintBefore []TableFootprint `json:"footprint_before,omitempty"`
	FootprintError  string           `json:"footprint_error,omitempty"`
}

// FailedTrx is a transaction that failed for good on a target.
type FailedTrx struct {
	Session uint64 `json:"session"`
	// Loop is the pass over the capture (--loop); FirstSeq the
	// transaction's first record, FailedSeq the statement whose last
	// attempt failed, LastSeq its last record.
	Loop      int    `json:"loop,omitempty"`
	FirstSeq  uint64 `json:"first_seq"`
	FailedSeq uint64 `json:"failed_seq"`
	LastSeq   uint64 `json:"last_seq"`
	// Code is the error of the last attempt; Cause is set when it was the
	// replayer's (the connection was lost: no engine verdict).
	Code     uint16 `json:"code"`
	Cause    byte   `json:"cause,omitempty"`
	Attempts int    `json:"attempts"`
	// Statements counts the transaction's statements; Tables are those it
	// writes, schema-qualified as in the capture.
	Statements int      `json:"statements"`
	Tables     []string `json:"tables,omitempty"`
	// At is when its first record started, on the capture's clock (ns,
	// Unix), shifted by whole capture spans for later passes.
	At int64 `json:"at_ns"`
}

// Reorder is a change replay sent to a target out of the capture's
// order: ahead of a conflicting change (same rows or table) that came
// before it in the capture and was not done yet on the target, because
// the longest wait (--order-timeout) ran out or the two waited for each
// other. Or (Kind) a transaction rolled back and run again — to let a
// statement stuck behind its locks through, or after a deadlock — whose
// writes a change waiting on the server for those locks may then have
// overtaken. Two
// writes to the same rows applied in the other order leave other data:
// from then on the tables it writes may differ on that target by
// replay's doing, not the engine's.
type Reorder struct {
	Session uint64 `json:"session"`
	Loop    int    `json:"loop,omitempty"`
	// Seq is the record that went ahead (for a regrouped transaction, its
	// first; for a transaction run again, its first that took locks);
	// Tables are those its transaction writes (or locked),
	// schema-qualified.
	Seq    uint64   `json:"seq"`
	Tables []string `json:"tables,omitempty"`
	// At is when it started in the capture (ns, Unix; shifted by whole
	// capture spans for later passes).
	At int64 `json:"at_ns"`
	// Kind says how the order was lost: "" sent ahead, ReorderYielded or
	// ReorderRetried.
	Kind string `json:"kind,omitempty"`
}

// Reorder kinds of a transaction rolled back and run again, whose writes
// a change that waited on the server for its locks then went ahead of.
const (
	// ReorderYielded: replay rolled it back so that a statement stuck
	// behind its locks goes first (an order rerun).
	ReorderYielded = "yielded"
	// ReorderRetried: it hit a deadlock or lock wait timeout the capture
	// did not have, and was retried (--retries).
	ReorderRetried = "retried"
)

// Kinds of a change the target lacks, listed with the reorders for the
// same purpose: from then on the tables it writes may differ there, by
// that change, not by what later statements do.
const (
	// ReorderUnsent: replay did not send it to the target (table DDL whose
	// engine could not be set for it, --on-unrewritable skip).
	ReorderUnsent = "unsent"
	// ReorderFailed: it failed on the target (not with a lock error,
	// which is retried) where the capture's succeeded. The failure itself
	// is counted as the target's difference.
	ReorderFailed = "failed"
)

// MaxFailures bounds TargetResult.Failures and TargetResult.Reorders.
const MaxFailures = 100000

// Divergences is one target's comparison with the baseline or with the
// responses the capture holds.
type Divergences struct {
	Compared int64 `json:"compared"`
	// Nondeterministic statements are compared only for errors.
	Nondeterministic int64 `json:"nondeterministic"`
	// Ambiguous: outcomes that differ where the capture itself leaves the
	// order open (a commit of another session on the same tables overlapped
	// the statement), or where replay released a record early. Not counted
	// in ByClass.
	Ambiguous int64 `json:"order_ambiguous"`
	// AmbiguousBy splits Ambiguous by reason: "commit-overlap" (the
	// capture's own order is open), "replay-order" (replay let the record
	// go early or ran its transaction again), "retried" (one side's
	// transaction was retried after a deadlock, so it ran on later data),
	// and the others compare.Reasons lists; among them, in the comparison
	// with the capture only, "started-before-capture" (a record of a
	// transaction already open when the capture started, FlagBeforeStart:
	// its snapshot and locks began before it).
	AmbiguousBy map[string]int64 `json:"order_ambiguous_by_reason,omitempty"`
	// OpenAtStart counts, in the comparison with the capture only, the
	// synthetic records (FlagOpenAtStart) that rebuilt sessions open at
	// the capture's start: run on the target, never compared (the capture
	// holds no answer for them) nor counted in Compared;
	// OpenAtStartFailed those of them that failed on the target (also in
	// its errors), whose sessions then went on in another state than the
	// captured ones.
	OpenAtStart       int64 `json:"open_at_start,omitempty"`
	OpenAtStartFailed int64 `json:"open_at_start_failed,omitempty"`
	Skipped           int64 `json:"skipped"`
	// Unavailable: statements one side could not get an answer to from its
	// server (refused, reset, timed out): not an engine's outcome, so not
	// compared.
	Unavailable int64            `json:"unavailable,omitempty"`
	Missing     int64            `json:"missing_on_target"`
	Extra       int64            `json:"missing_on_baseline"`
	ByClass     map[string]int64 `json:"by_class"`
	Samples     []Sample         `json:"samples"`
}

// Total is the number of divergent statements (ambiguous ones apart).
func (d *Divergences) Total() int64 {
	if d == nil {
		return 0
	}
	var n int64
	for _, v := range d.ByClass {
		n += v
	}
	return n
}

// Sample shows one divergent statement.
type Sample struct {
	Class string `json:"class"`
	// Seq is the statement's record in the capture; Loop counts the
	// capture's passes before it (--loop, --duration).
	Seq       uint64   `json:"seq"`
	Loop      int      `json:"loop,omitempty"`
	Session   uint64   `json:"session"`
	Digest    string   `json:"digest"`
	Statement string   `json:"statement"`
	Params    []string `json:"params,omitempty"`
	Baseline  string   `json:"baseline"`
	Target    string   `json:"target"`
	// Ambiguous samples are of order-ambiguous outcomes; Why says what made
	// them so.
	Ambiguous bool   `json:"ambiguous,omitempty"`
	Why       string `json:"why,omitempty"`
	// FirstDiff shows the first row that differs, from running the
	// statement again on both sides after the replay (reads only).
	FirstDiff string `json:"first_differing_row,omitempty"`
}

// EndState is the state of the tables the capture touched, after the
// replay, compared with the baseline's.
type EndState struct {
	Tables []TableState `json:"tables"`
	// Same: every table has the baseline's content (the baseline's own
	// end state says true).
	Same bool `json:"same_as_baseline"`
	// Error says why the state could not be read.
	Error string `json:"error,omitempty"`
	// Reference names the server holding production's end state (replay
	// --reference: a replica stopped at the capture's end point);
	// SameAsReference: every table has its content; ReferenceError why
	// it could not be read.
	Reference       string `json:"reference,omitempty"`
	SameAsReference bool   `json:"same_as_reference,omitempty"`
	ReferenceError  string `json:"reference_error,omitempty"`
}

// TableState is one table's content, as a checksum of its rows.
type TableState struct {
	Table    string `json:"table"` // schema.name on the target
	Exists   bool   `json:"exists"`
	Rows     int64  `json:"rows"`
	Checksum string `json:"checksum"`
	// Differs from the baseline's table of the same name.
	Differs bool `json:"differs_from_baseline,omitempty"`
	// Because names the transaction that failed for good on this target
	// or the baseline and wrote the table, when it differs: the
	// difference follows from it, no engine's otherwise (run format 2).
	Because string `json:"because,omitempty"`
	// VsReference: the table differs from the reference's (production's
	// end state), which has ReferenceRows rows; Bypassed says why when
	// writes that bypassed the proxy changed it on production.
	VsReference   bool   `json:"differs_from_reference,omitempty"`
	ReferenceRows int64  `json:"reference_rows,omitempty"`
	Bypassed      string `json:"bypassed,omitempty"`
	// ReferenceBecause names what replay could not do as captured on this
	// target (a transaction that failed for good, a change out of order)
	// that wrote the table, when it differs from the reference's.
	ReferenceBecause string `json:"reference_because,omitempty"`
}

// CreatedTable is a table the replay created, with its engine as the
// server reports it.
type CreatedTable struct {
	Table  string `json:"table"`
	Engine string `json:"engine"`
	// Want is the target's engine; Engine differs when the server did not
	// (or could not) use it.
	Want string `json:"want"`
}

// TableFootprint is a table's size on a target; Rows is the engine's
// estimate (InnoDB samples pages), the bytes are allocated sizes.
type TableFootprint struct {
	// Table is named as in the capture, so that targets line up; Measured
	// is its name on the target when that differs (a target whose DSN
	// names another database than the capture's schema).
	Table      string `json:"table"`
	Measured   string `json:"measured,omitempty"`
	Engine     string `json:"engine"`
	Rows       int64  `json:"rows"`
	DataBytes  int64  `json:"data_bytes"`
	IndexBytes int64  `json:"index_bytes"`
	Source     string `json:"source"`
}

// DigestInfo is a statement digest's normalized text and class.
type DigestInfo struct {
	Text  string `json:"text"`
	Class string `json:"class"`
}

func runKey(prefix byte, point, target int) []byte {
	k := append(make([]byte, 0, 24), prefix)
	k = binary.BigEndian.AppendUint16(k, uint16(point))
	return append(k, byte(target))
}

// RunWriter writes a new run directory.
type RunWriter struct {
	db  *pebble.DB
	dir string
	// minFree: outcomes are refused once the disk has less free space
	// (checkSpace).
	minFree int64
}

// DefaultRunMinFree is a run directory's free-space floor: outcomes stop
// being written below it, with an error that says so, so that the disk
// never fills under the run (Pebble answers a full disk by panicking)
// and the run's end (its results, the comparisons) still has room.
const DefaultRunMinFree = 64 << 20

// ErrRunDiskFull: the run directory's disk fell under its free-space
// floor (DefaultRunMinFree).
var ErrRunDiskFull = errors.New("store: the run directory's disk is nearly full")

// checkSpace says whether the run directory's disk is under its floor.
func (w *RunWriter) checkSpace() error {
	if w.minFree <= 0 {
		return nil
	}
	return checkFree(w.dir, w.minFree)
}

func checkFree(dir string, floor int64) error {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return nil // not known: Pebble's own error, if any, says more
	}
	if free := int64(st.Bavail) * int64(st.Bsize); free < floor {
		return fmt.Errorf("%w (%s: %d bytes free, under the floor of %d): free space on that disk, or put the run on another one, and run it again", ErrRunDiskFull, dir, free, floor)
	}
	return nil
}

// runMemTableSize is a run store's memtable size. Pebble starts a DB's
// memtables at 256 KiB and doubles them up to this size, and keeps the
// last one flushed for reuse: a run's memtables hold up to about twice
// this, reached only after some 15 MiB of outcomes at 8 MiB (a 64-session
// replay of 200,000 records had reached 12 MiB, one of 800,000 records
// 16 MiB, one of 25,000 records 2 MiB): memory that grew with the
// capture's length up to 16 MiB. At 2 MiB it was 4 MiB, reached within
// seconds but not by a short replay: a 64-session replay of a 5 s capture
// (20,000 statements, 1 MiB of outcomes) peaked at 28–30 MiB outside the
// binary's pages, that of a 50 s capture at 39–40. At 1 MiB, 30 and 37–38:
// a short replay already fills what a long one holds.
const runMemTableSize = 1 << 20

// runCacheSize is the block cache of a run store, written or read: a run
// is read in order (the outcomes compared at a replay's end, a report),
// so a block is not read again. Pebble's default 8 MiB filled as a long
// replay compared its outcomes at its end, beside the replay's memory.
const runCacheSize = 1 << 20

// runL0CompactionThreshold is how many flushed files a run store's L0
// holds before Pebble compacts them: as many bytes of outcomes before the
// first compaction (64 MiB) as with the 2 MiB memtables before.
const runL0CompactionThreshold = 64

// runCompression is how a run store's blocks are compressed: Snappy,
// Pebble's default, rather than a capture's zstd. A run is a replay's
// by-product, written at the targets' pace on the cores the targets use;
// a capture is kept and shipped.
func runCompression() *block.CompressionProfile { return block.SnappyCompression }

// CheckRunDir says whether a run can be made in dir (CreateRun asks it;
// a command asks before its slow start): dir must not exist, or be an
// empty directory.
func CheckRunDir(dir string) error {
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("%w: %s is not empty; choose a new directory for the run", ErrExists, dir)
	}
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		// Pebble said "mkdir …: not a directory".
		return fmt.Errorf("%w: %s is a file; a run is a directory: choose a new one", ErrExists, dir)
	}
	return nil
}

// CreateRun makes a new run directory (it must not exist or be empty),
// encrypted with the key of WithKey if one is given.
func CreateRun(dir string, meta RunMeta, opts ...Option) (*RunWriter, error) {
	if err := CheckRunDir(dir); err != nil {
		return nil, err
	}
	if len(meta.Targets) > 255 {
		return nil, errors.New("store: a run has at most 255 targets")
	}
	o := optionsOf(opts)
	minFree := int64(DefaultRunMinFree)
	if o.runMinFree != nil {
		minFree = *o.runMinFree
	}
	if minFree > 0 {
		probe := dir
		for { // the directory may not exist yet: its nearest ancestor's disk
			if _, err := os.Stat(probe); err == nil || filepath.Dir(probe) == probe {
				break
			}
			probe = filepath.Dir(probe)
		}
		if err := checkFree(probe, minFree); err != nil {
			return nil, err
		}
	}
	po := pebbleOptions(false, slog.New(slog.DiscardHandler), o.key)
	// A run's outcomes are small and come at the targets' pace: a
	// capture's 64 MiB memtables (up to four of them while flushes lag)
	// would be most of a replay's memory, growing as each fills (see
	// runMemTableSize).
	po.MemTableSize = runMemTableSize
	po.CacheSize = runCacheSize
	// Compactions of a run's outcomes would run beside the replay, on the
	// cores the targets and the replay share (3.6 % of a point-select
	// replay's CPU with the capture's threshold of 8): let L0 hold up to
	// 64 flushes first (a flush takes about 0.5 MiB of outcomes: 12,000
	// records of a 64-session read/write replay, so some 800,000 records
	// go by before the first compaction). Reading a run merges them.
	po.L0CompactionThreshold = runL0CompactionThreshold
	po.L0StopWritesThreshold = 4 * runL0CompactionThreshold
	// zstd was 3.5 % of a point-select replay's CPU, in the flushes of
	// outcomes that are written once and read once, at the run's end.
	// Snappy costs a fraction of that; the run takes more disk (see
	// runCompression).
	for i := range po.Levels {
		po.Levels[i].Compression = runCompression
	}
	db, err := pebble.Open(dir, po)
	if err != nil {
		return nil, openErr(dir, err)
	}
	meta.Magic, meta.RunFormat, meta.ToolVersion = runMagic, RunFormatVersion, version.String()
	b, _ := json.Marshal(meta)
	if err := db.Set(keyHeader, b, pebble.Sync); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: write run header: %w", err)
	}
	return &RunWriter{db: db, dir: dir, minFree: minFree}, nil
}

// Dir is the run directory.
func (w *RunWriter) Dir() string { return w.dir }

func (w *RunWriter) setJSON(key []byte, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := w.db.Set(key, b, pebble.NoSync); err != nil {
		return fmt.Errorf("store: %s: %w", w.dir, err)
	}
	return nil
}

// PutPoint records a point's description.
func (w *RunWriter) PutPoint(p Point) error {
	k := binary.BigEndian.AppendUint16([]byte{runPoint}, uint16(p.Point))
	return w.setJSON(k, p)
}

// PutResult records a target's result in a point.
func (w *RunWriter) PutResult(point, target int, r *TargetResult) error {
	return w.setJSON(runKey(runResult, point, target), r)
}

// PutDigest records a digest's text and class.
func (w *RunWriter) PutDigest(id string, d DigestInfo) error {
	return w.setJSON(append([]byte{runDigest}, id...), d)
}

// PutHistogram records a histogram of a target in a point; name is the
// digest ID for SeriesDigest, "" otherwise.
func (w *RunWriter) PutHistogram(point, target int, s Series, name string, h *latency.Histogram) error {
	k := append(runKey(runHist, point, target), byte(s))
	k = append(k, name...)
	if err := w.db.Set(k, AppendHistogram(nil, h), pebble.NoSync); err != nil {
		return fmt.Errorf("store: %s: %w", w.dir, err)
	}
	return nil
}

// PutInterval records interval number n of a target in a point.
//
// It is synced (once a second per target, as the run goes): a replay
// killed before it stores its results is reported from its intervals.
func (w *RunWriter) PutInterval(point, target, n int, iv *Interval) error {
	k := binary.BigEndian.AppendUint32(runKey(runInterval, point, target), uint32(n))
	if err := w.db.Set(k, AppendInterval(nil, iv), pebble.Sync); err != nil {
		return fmt.Errorf("store: %s: %w", w.dir, err)
	}
	return nil
}

// OutcomeBatch collects outcomes of one target in one point for one commit.
// It belongs to one goroutine.
type OutcomeBatch struct {
	w   *RunWriter
	b   *pebble.Batch
	pre []byte
	key []byte
	val []byte
	n   int
}

// NewOutcomeBatch starts a batch for a target in a point.
func (w *RunWriter) NewOutcomeBatch(point, target int) *OutcomeBatch {
	return &OutcomeBatch{w: w, b: w.db.NewBatch(), pre: runKey(runOutcome, point, target)}
}

// Add buffers o; a later Add of the same Seq replaces it (a retry's outcome).
func (ob *OutcomeBatch) Add(o *Outcome) {
	ob.key = binary.BigEndian.AppendUint64(append(ob.key[:0], ob.pre...), o.Seq)
	ob.val = AppendOutcome(ob.val[:0], o)
	ob.b.Set(ob.key, ob.val, nil)
	ob.n++
}

// Len is the number of outcomes buffered.
func (ob *OutcomeBatch) Len() int { return ob.n }

// Full reports whether the batch holds enough to commit now, whatever
// its count: what its outcomes take in a memtable reaches a quarter of
// one.
//
// Pebble applies a batch whose entries take half a memtable or more
// (runMemTableSize) as a memtable of its own, flushed to a file at once,
// and drops its buffer. 4,096 point-select outcomes, 180 KiB of data,
// take 0.9 MiB in a memtable, its skiplist's room for each entry's node
// counted at its full height: every commit of a --concurrency replay's
// connection was a flush, a new file in L0, and a buffer grown again
// from 1 KiB, a quarter of what the replay allocated.
func (ob *OutcomeBatch) Full() bool {
	return ob.b.Len()+ob.n*memtableEntryRoom >= runMemTableSize/4
}

// memtableEntryRoom is what Pebble counts an entry of a batch as taking
// in a memtable beyond its key and value: a skiplist node at full height
// (184 bytes in Pebble v2) and the key's 8-byte trailer.
const memtableEntryRoom = 192

// Commit writes the batch (without fsync: a run can be replayed again) and
// resets it.
//
// Under the run directory's free-space floor it writes nothing and says so
// (ErrRunDiskFull); the batch's outcomes are dropped.
func (ob *OutcomeBatch) Commit() error {
	if ob.n == 0 {
		return nil
	}
	if err := ob.w.checkSpace(); err != nil {
		ob.b.Reset()
		ob.n = 0
		return err
	}
	err := ob.b.Commit(pebble.NoSync)
	ob.b.Reset()
	ob.n = 0
	return err
}

// Outcomes reads back outcomes written so far (for comparison before the
// run ends).
func (w *RunWriter) Outcomes(point, target int) iter.Seq2[*Outcome, error] {
	return outcomes(w.db, w.dir, point, target)
}

// End writes the run's end record and closes it.
func (w *RunWriter) End(e RunEnd) error {
	err := w.setJSON(keyRunEnd, e)
	return errors.Join(err, w.Close())
}

// Close flushes and closes the run directory (without an end record if End
// was not called: the run did not finish).
func (w *RunWriter) Close() error {
	if w.db == nil {
		return nil
	}
	err := errors.Join(w.db.Flush(), w.db.Close())
	w.db = nil
	if err != nil {
		return err
	}
	// Everything is in tables now; the write-ahead logs Pebble keeps for
	// reuse only hold disk space (preallocated, tens of MB each).
	return removeWALs(w.dir)
}

// RunReader reads a run directory.
type RunReader struct {
	db   *pebble.DB
	dir  string
	meta RunMeta
	end  *RunEnd
}

// ErrNotRun: the directory is not a run.
var ErrNotRun = errors.New("store: not a tandem run")

// OpenRun opens the run in dir for reading; an encrypted one needs its
// key (WithKey; ErrNoKey, ErrWrongKey).
func OpenRun(dir string, opts ...Option) (*RunReader, error) {
	if err := checkStoreDir(dir, "run", ErrNotRun); err != nil {
		return nil, err
	}
	key, err := storeKey(dir, optionsOf(opts).key)
	if err != nil {
		return nil, err
	}
	po := pebbleOptions(true, slog.New(slog.DiscardHandler), key)
	po.CacheSize = runCacheSize
	db, err := pebble.Open(dir, po)
	if err != nil {
		return nil, openErr(dir, err)
	}
	r := &RunReader{db: db, dir: dir}
	if err := r.readHeader(); err != nil {
		db.Close()
		return nil, err
	}
	return r, nil
}

func getCopy(db *pebble.DB, dir string, key []byte) ([]byte, error) {
	v, closer, err := db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, damagedRun(dir, err)
	}
	defer closer.Close()
	return append([]byte(nil), v...), nil
}

func (r *RunReader) readHeader() error {
	hdr, err := getCopy(r.db, r.dir, keyHeader)
	if err != nil {
		return fmt.Errorf("store: %s: %w", r.dir, err)
	}
	if hdr == nil {
		return fmt.Errorf("%w: %s is a Pebble store without a tandem header", ErrNotRun, r.dir)
	}
	var probe struct {
		Magic     string `json:"magic"`
		RunFormat int    `json:"run_format_version"`
	}
	if err := json.Unmarshal(hdr, &probe); err != nil {
		return fmt.Errorf("%w: %s: unreadable run header: %v", ErrCorrupt, r.dir, err)
	}
	switch {
	case probe.Magic == magic:
		return fmt.Errorf("%w: %s is a capture; 'tandem report' reads the run directories that 'tandem replay --run' writes", ErrNotRun, r.dir)
	case probe.Magic != runMagic:
		return fmt.Errorf("%w: %s holds %q", ErrNotRun, r.dir, probe.Magic)
	case probe.RunFormat == 0:
		return fmt.Errorf("%w: %s was written by a tandem from before runs could be read back; replay the capture again", ErrNotRun, r.dir)
	case probe.RunFormat > RunFormatVersion:
		return fmt.Errorf("%w: %s is run format version %d; this tandem reads up to version %d; upgrade tandem to read it",
			ErrNewerFormat, r.dir, probe.RunFormat, RunFormatVersion)
	}
	if err := json.Unmarshal(hdr, &r.meta); err != nil {
		return fmt.Errorf("%w: %s: unreadable run header: %v", ErrCorrupt, r.dir, err)
	}
	end, err := getCopy(r.db, r.dir, keyRunEnd)
	if err != nil {
		return fmt.Errorf("store: %s: %w", r.dir, err)
	}
	if end != nil {
		var e RunEnd
		if err := json.Unmarshal(end, &e); err != nil {
			return fmt.Errorf("%w: %s: unreadable run end: %v", ErrCorrupt, r.dir, err)
		}
		r.end = &e
	}
	return nil
}

// Dir is the run directory.
func (r *RunReader) Dir() string { return r.dir }

// Meta is the run's description.
func (r *RunReader) Meta() RunMeta { return r.meta }

// End is the run's end record; false for a run that did not finish.
func (r *RunReader) End() (RunEnd, bool) {
	if r.end == nil {
		return RunEnd{}, false
	}
	return *r.end, true
}

// Close releases the reader.
func (r *RunReader) Close() error { return r.db.Close() }

// Points lists the run's points in order.
func (r *RunReader) Points() ([]Point, error) {
	var out []Point
	err := r.each([]byte{runPoint}, []byte{runPoint + 1}, func(k, v []byte) error {
		if len(k) != 3 {
			return fmt.Errorf("point key of %d bytes", len(k))
		}
		var p Point
		if err := json.Unmarshal(v, &p); err != nil {
			return err
		}
		out = append(out, p)
		return nil
	})
	return out, err
}

// each calls f for every key in [lo, hi); an error of f is wrapped as
// corruption.
func (r *RunReader) each(lo, hi []byte, f func(k, v []byte) error) error {
	it, err := r.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return fmt.Errorf("store: %s: %w", r.dir, err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return fmt.Errorf("store: %s: %w", r.dir, err)
		}
		if err := f(it.Key(), v); err != nil {
			if errors.Is(err, ErrCorrupt) {
				return fmt.Errorf("%s: %w", r.dir, err)
			}
			return fmt.Errorf("%w: %s: %v", ErrCorrupt, r.dir, err)
		}
	}
	if err := it.Error(); err != nil {
		if pebble.IsCorruptionError(err) {
			return damagedRun(r.dir, err)
		}
		return fmt.Errorf("store: %s: %w", r.dir, err)
	}
	return nil
}

// Result returns a target's result in a point; false when there is none.
func (r *RunReader) Result(point, target int) (*TargetResult, bool, error) {
	v, err := getCopy(r.db, r.dir, runKey(runResult, point, target))
	if err != nil || v == nil {
		return nil, false, err
	}
	var t TargetResult
	if err := json.Unmarshal(v, &t); err != nil {
		return nil, false, fmt.Errorf("%w: %s: target result: %v", ErrCorrupt, r.dir, err)
	}
	return &t, true, nil
}

// Digests returns every digest's text and class.
func (r *RunReader) Digests() (map[string]DigestInfo, error) {
	out := map[string]DigestInfo{}
	err := r.each([]byte{runDigest}, []byte{runDigest + 1}, func(k, v []byte) error {
		var d DigestInfo
		if err := json.Unmarshal(v, &d); err != nil {
			return err
		}
		out[string(k[1:])] = d
		return nil
	})
	return out, err
}

// Histogram returns one histogram; false when the run has none.
func (r *RunReader) Histogram(point, target int, s Series, name string) (*latency.Histogram, bool, error) {
	k := append(runKey(runHist, point, target), byte(s))
	v, err := getCopy(r.db, r.dir, append(k, name...))
	if err != nil || v == nil {
		return nil, false, err
	}
	h := &latency.Histogram{}
	if err := DecodeHistogram(v, h); err != nil {
		return nil, false, fmt.Errorf("%s: %w", r.dir, err)
	}
	return h, true, nil
}

// DigestHistograms returns a target's per-digest histograms in a point, by
// digest ID.
func (r *RunReader) DigestHistograms(point, target int) (map[string]*latency.Histogram, error) {
	pre := append(runKey(runHist, point, target), byte(SeriesDigest))
	hi := append(runKey(runHist, point, target), byte(SeriesDigest)+1)
	out := map[string]*latency.Histogram{}
	err := r.each(pre, hi, func(k, v []byte) error {
		h := &latency.Histogram{}
		if err := DecodeHistogram(v, h); err != nil {
			return err
		}
		out[string(k[len(pre):])] = h
		return nil
	})
	return out, err
}

// Intervals returns a target's interval series in a point, in order.
func (r *RunReader) Intervals(point, target int) ([]Interval, error) {
	var out []Interval
	err := r.each(runKey(runInterval, point, target), runKey(runInterval, point, target+1), func(k, v []byte) error {
		if len(k) != 8 {
			return fmt.Errorf("interval key of %d bytes", len(k))
		}
		var iv Interval
		if err := DecodeInterval(v, &iv); err != nil {
			return err
		}
		out = append(out, iv)
		return nil
	})
	return out, err
}

// Outcomes yields a target's outcomes in a point, in key order; the
// *Outcome is reused.
func (r *RunReader) Outcomes(point, target int) iter.Seq2[*Outcome, error] {
	return outcomes(r.db, r.dir, point, target)
}

func outcomes(db *pebble.DB, dir string, point, target int) iter.Seq2[*Outcome, error] {
	return func(yield func(*Outcome, error) bool) {
		lo, hi := runKey(runOutcome, point, target), runKey(runOutcome, point, target+1)
		it, err := db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
		if err != nil {
			yield(nil, err)
			return
		}
		defer it.Close()
		var o Outcome
		for ok := it.First(); ok; ok = it.Next() {
			k := it.Key()
			if len(k) != 12 {
				yield(nil, fmt.Errorf("%w: %s: outcome key of %d bytes", ErrCorrupt, dir, len(k)))
				return
			}
			o.Seq = binary.BigEndian.Uint64(k[4:])
			v, err := it.ValueAndErr()
			if err == nil {
				err = DecodeOutcome(v, &o)
			}
			if err != nil {
				yield(nil, fmt.Errorf("%s: seq %d: %w", dir, o.Seq, err))
				return
			}
			if !yield(&o, nil) {
				return
			}
		}
		if err := it.Error(); err != nil {
			yield(nil, damagedRun(dir, err))
		}
	}
}
