package store

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tandemdb/tandem/internal/version"
)

// WriterOptions tune a Writer. The zero value is a durable default.
type WriterOptions struct {
	// Source says what writes the capture; stored in Meta.
	Source string
	// Start is the backend's position as the capture begins; stored in Meta.
	Start *Position
	// Origin is where a capture not taken by a proxy was read from;
	// stored in Meta.
	Origin *Origin
	// BaseTime is the origin of the records' times (zero: now). A capture
	// read from files gives its first record's.
	BaseTime time.Time
	// MemTableSize is Pebble's memtable size (0: 64 MiB, for a proxy's
	// capture that must never wait on the disk). A capture written with
	// Append from files, which may wait, bounds its memory with less.
	MemTableSize uint64
	// FlushInterval bounds how long an appended record waits before it is
	// committed (and synced): a crash loses at most this much. Default 100ms.
	FlushInterval time.Duration
	// FlushRecords commits early once this many records wait. Default 16384.
	FlushRecords int
	// MaxPendingBytes bounds the encoded records waiting or being committed;
	// past it Append waits and TryAppend drops. Default 64 MiB.
	MaxPendingBytes int
	// NoSync commits without fsync: faster, but a machine crash may lose
	// records reported durable. A process crash loses nothing committed.
	NoSync bool
	// Logger receives Pebble's messages and the writer's own; nil discards.
	Logger *slog.Logger
	// Metrics, if set, is updated as records are appended and committed.
	Metrics *Metrics
	// FS is the file system the capture is written to; nil: the OS's.
	FS vfs.FS
	// Key, if set, encrypts the capture (package doc, "Encryption").
	Key *Key
	// MaxBytes stops the capture cleanly once its directory holds this
	// many bytes (0: no budget). MinFreeBytes stops it once the file
	// system has less free space than this, plus what closing it still
	// writes (the records only its log holds, flushed into tables) (0: no
	// floor; tandem proxy sets one): Pebble cannot survive a full disk (a
	// WAL rotation that fails aborts the process), so the capture stops
	// while there is room to close it properly. Both are checked about once a second.
	MaxBytes, MinFreeBytes int64
}

func (o *WriterOptions) defaults() {
	if o.FlushInterval <= 0 {
		o.FlushInterval = 100 * time.Millisecond
	}
	if o.FlushRecords <= 0 {
		o.FlushRecords = 16384
	}
	if o.MaxPendingBytes <= 0 {
		o.MaxPendingBytes = 64 << 20
	}

	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// WriterStats are a Writer's counters.
type WriterStats struct {
	Appended     uint64        // records accepted
	Dropped      uint64        // records TryAppend refused because the writer was behind
	Committed    uint64        // records committed (durable unless NoSync)
	Bytes        uint64        // encoded bytes of the accepted records (keys and values)
	Commits      uint64        // batches committed
	CommitTime   time.Duration // total time spent committing
	MaxCommit    time.Duration // longest single commit
	DurableSeq   uint64        // every record up to this seq is committed
	PendingBytes int           // encoded bytes not yet committed
}

type sessSeq struct{ session, seq uint64 }

// Writer appends records to a new capture with group commit: records
// collect in a batch that a background goroutine commits every
// FlushInterval or FlushRecords records.
type Writer struct {
	db   *pebble.DB
	dir  string
	meta Meta
	opts WriterOptions

	mu struct {
		sync.Mutex
		batch    *pebble.Batch
		nextSeq  uint64
		first    uint64 // first seq of batch
		count    int
		index    []sessSeq
		minStart int64
		maxStart int64
		pending  int // bytes in batch and in the commit under way
		closed   bool
		err      error // a commit failed, or the capture stopped; the writer accepts nothing more
		// stopped: the capture stopped cleanly (budget, free space); err
		// says why and Close still closes it properly.
		stopped   bool
		stoppedAt time.Time
		// end and bypassed are SetEnd's, for the summary.
		end      *Position
		bypassed *Bypassed
		source   *SourceStats
	}
	gtids          atomic.Uint64 // AddGTID's entries
	bypassedN      uint32        // AddBypassed's records, under mu
	lastSpaceCheck time.Time
	// bytesAtSpaceCheck are the records' bytes at the last look at the
	// disk, spaceMargin what the floor left then (-1: not looked yet, or
	// no floor); the flusher's own.
	bytesAtSpaceCheck, spaceMargin int64
	space                          sync.Cond // signalled when a commit frees pending bytes
	// flushing and flushed: the records' bytes when Pebble's latest flush
	// of its memtables began, and when the latest one that finished began.
	// What came since is in the log only; Close flushes it into tables,
	// which the floor must leave room for (checkSpace).
	flushing, flushed atomic.Uint64

	// failed is closed when Pebble reported a fatal write error (fail):
	// the store is abandoned, its goroutines parked, and nothing may call
	// it again. dbMu orders the metrics' reads of the store before Close.
	failed   chan struct{}
	failOnce sync.Once
	// noted is closed when fail has left its note on disk: Close waits
	// for it, so that the note is there when Close returns.
	noted chan struct{}
	// committed is closed, and replaced, at each commit: followers of
	// the live capture (Reader.Follow) wait on it.
	commitSig atomic.Pointer[chan struct{}]
	dbMu      sync.RWMutex
	dbClosed  bool

	kick     chan struct{}
	flushReq chan chan error
	stop     chan struct{}
	done     chan struct{}

	// Touched only by the flusher goroutine.
	spareIndex []sessSeq
	sessions   map[uint64]struct{}
	keyBuf     []byte
	valBuf     []byte

	appended, dropped, committed, bytes, commits atomic.Uint64
	commitNanos, maxCommitNanos                  atomic.Int64
	durable                                      atomic.Uint64
}

// Create makes a new capture in dir, which must not exist or be empty.
func Create(dir string, opts WriterOptions) (*Writer, error) {
	opts.defaults()
	entries, err := os.ReadDir(dir)
	switch {
	case err == nil && len(entries) > 0:
		if ok, _ := looksLikePebble(dir); ok {
			return nil, fmt.Errorf("%w: %s already holds a capture; choose a new directory (tandem never writes over one)", ErrExists, dir)
		}
		return nil, fmt.Errorf("%w: %s has other files in it; choose a new or empty directory", ErrExists, dir)
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("store: %w", err)
	}
	w := &Writer{spaceMargin: -1,
		dir:      dir,
		opts:     opts,
		kick:     make(chan struct{}, 1),
		flushReq: make(chan chan error),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		failed:   make(chan struct{}),
		noted:    make(chan struct{}),
		sessions: map[uint64]struct{}{},
	}
	w.space.L = &w.mu
	sig := make(chan struct{})
	w.commitSig.Store(&sig)
	po := pebbleOptions(false, opts.Logger, opts.Key)
	po.Logger = pebbleLogger{log: opts.Logger, fatal: w.fail}
	po.EventListener = &pebble.EventListener{
		FlushBegin: func(pebble.FlushInfo) { w.flushing.Store(w.bytes.Load()) },
		FlushEnd: func(info pebble.FlushInfo) {
			if info.Err == nil {
				w.flushed.Store(w.flushing.Load())
			}
		},
	}
	if opts.MemTableSize > 0 {
		po.MemTableSize = opts.MemTableSize
	}
	fs := opts.FS
	if fs == nil {
		fs = vfs.Default
	}
	po.FS = writerFS{FS: encryptFS(fs, opts.Key), fail: w.fail}
	var db *pebble.DB
	err = w.await(func() (err error) {
		db, err = pebble.Open(dir, po)
		return err
	})
	if err != nil {
		return nil, openErr(dir, err)
	}
	now := time.Now().UTC()
	meta := Meta{
		Magic:         magic,
		FormatVersion: FormatVersion,
		CreatedAt:     now,
		BaseTime:      now.UnixNano(),
		Source:        opts.Source,
		ToolVersion:   version.String(),
		Start:         opts.Start,
		Origin:        opts.Origin,
	}
	if !opts.BaseTime.IsZero() {
		meta.BaseTime = opts.BaseTime.UnixNano()
	}
	if opts.Key != nil {
		meta.Encryption = cryptCipher
	}
	hdr, _ := json.Marshal(meta)
	if err := w.await(func() error { return db.Set(keyHeader, hdr, pebble.Sync) }); err != nil {
		if !w.isFailed() {
			db.Close()
		}
		return nil, fmt.Errorf("store: write header: %w", err)
	}
	w.db, w.meta = db, meta
	// Blocks for the note fail leaves, reserved while there is room.
	_ = os.WriteFile(filepath.Join(dir, reservedFile), []byte(strings.Repeat(" ", failedFileSize)), 0o644)
	w.mu.batch = db.NewBatch()
	w.mu.nextSeq = 1
	go w.flusher()
	return w, nil
}

// Meta returns the capture's metadata.
func (w *Writer) Meta() Meta { return w.meta }

var valPool = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

// Append adds r to the capture, assigning and returning its sequence (also
// stored in r.Seq). It waits while MaxPendingBytes are waiting to be
// committed, so nothing is lost: use it where the producer may be slowed
// (synth, imports). The record is durable once DurableSeq reaches it.
func (w *Writer) Append(r *Record) (uint64, error) {
	return w.append(r, true)
}

// AddGTID stores the GTID the server gave the transaction that record seq
// committed (key 0x05). It never waits: a writer that is closed or failed
// keeps nothing, as it keeps no more records.
func (w *Writer) AddGTID(seq uint64, gtid string) {
	if seq == 0 || gtid == "" {
		return
	}
	var key [9]byte
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.closed || w.mu.err != nil {
		return
	}
	if w.mu.batch.Set(gtidKey(key[:0], seq), []byte(gtid), nil) == nil {
		w.gtids.Add(1)
	}
}

// SetEnd gives the backend's position at the capture's end and what the
// binary log held between start and end that did not pass through the
// capture, for the summary Close writes.
func (w *Writer) SetEnd(end *Position, bypassed *Bypassed) {
	w.mu.Lock()
	w.mu.end, w.mu.bypassed = end, bypassed
	w.mu.Unlock()
}

// SetSourceStats gives what reading a source without a proxy met, for the
// summary Close writes.
func (w *Writer) SetSourceStats(st *SourceStats) {
	w.mu.Lock()
	w.mu.source = st
	w.mu.Unlock()
}

// TryAppend is Append that never waits: when the writer is behind, the
// record is dropped, counted, and 0 returned. Capture uses it so that a slow
// disk never slows the client.
func (w *Writer) TryAppend(r *Record) uint64 {
	seq, _ := w.append(r, false)
	return seq
}

func (w *Writer) append(r *Record, wait bool) (uint64, error) {
	bp := valPool.Get().(*[]byte)
	val := AppendRecord((*bp)[:0], r, w.meta.BaseTime)
	size := len(val) + 9
	start := r.Start.UnixNano() - w.meta.BaseTime

	w.mu.Lock()
	for !w.mu.closed && w.mu.err == nil && w.mu.pending+size > w.opts.MaxPendingBytes && w.mu.pending > 0 {
		if !wait {
			w.mu.Unlock()
			*bp = val
			valPool.Put(bp)
			w.dropped.Add(1)
			if m := w.opts.Metrics; m != nil {
				m.dropped.Inc()
			}
			return 0, nil
		}
		w.space.Wait()
	}
	if w.mu.closed || w.mu.err != nil {
		err := w.mu.err
		w.mu.Unlock()
		*bp = val
		valPool.Put(bp)
		if err == nil {
			err = ErrClosed
		}
		return 0, err
	}
	seq := w.mu.nextSeq
	w.mu.nextSeq++
	var key [9]byte
	err := w.mu.batch.Set(recordKey(key[:0], seq), val, nil)
	if err != nil {
		w.mu.Unlock()
		return 0, fmt.Errorf("store: append: %w", err)
	}
	if w.mu.count == 0 {
		w.mu.first, w.mu.minStart, w.mu.maxStart = seq, start, start
	} else {
		w.mu.minStart = min(w.mu.minStart, start)
		w.mu.maxStart = max(w.mu.maxStart, start)
	}
	w.mu.count++
	w.mu.index = append(w.mu.index, sessSeq{r.Session, seq})
	w.mu.pending += size
	full := w.mu.count >= w.opts.FlushRecords
	w.mu.Unlock()

	*bp = val
	valPool.Put(bp)
	r.Seq = seq
	w.appended.Add(1)
	w.bytes.Add(uint64(size))
	if m := w.opts.Metrics; m != nil {
		m.appended.Inc()
		m.bytes.Add(float64(size))
	}
	if full {
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
	return seq, nil
}

// fail is Pebble's Fatalf for this writer (pebbleLogger): the store could
// not write and cannot go on. Recording stops at once, the reason is
// logged once, and the writer never calls the store again.
func (w *Writer) fail(msg string) {
	w.failOnce.Do(func() {
		// A removed directory shows first as whatever file Pebble could
		// not make next (create …/000004.log: no such file): say what
		// happened before how it showed.
		if removed := w.removedMsg(); msg != removed {
			if _, err := os.Stat(w.dir); errors.Is(err, os.ErrNotExist) {
				msg = removed + ": " + msg
			}
		}
		w.mu.Lock()
		w.mu.err = fmt.Errorf("%w: %s", ErrFailed, msg)
		w.mu.stopped, w.mu.stoppedAt = false, time.Now().UTC()
		w.space.Broadcast()
		w.mu.Unlock()
		w.opts.Logger.Error("capture failed: the store cannot write; recording stops, relaying goes on; what was synced is readable once this process ends",
			"err", msg, "records_synced", w.durable.Load())
		close(w.failed)
		defer close(w.noted)
		if testBeforeNote != nil {
			testBeforeNote()
		}
		// For inspect, into the blocks reserved at Create: a full disk
		// takes no new ones.
		b, _ := json.Marshal(failure{Reason: msg, At: time.Now().UTC()})
		reserved := filepath.Join(w.dir, reservedFile)
		if f, err := os.OpenFile(reserved, os.O_WRONLY, 0); err == nil {
			f.WriteAt(b[:min(len(b), failedFileSize)], 0)
			f.Sync()
			f.Close()
			_ = os.Rename(reserved, filepath.Join(w.dir, failedFile))
		}
	})
}

// removedMsg is why the capture failed when its directory is gone.
func (w *Writer) removedMsg() string {
	return "the capture directory " + w.dir + " was removed"
}

// testBeforeNote, when set by a test, runs in fail between the error
// becoming visible and the note being written.
var testBeforeNote func()

// awaitNote returns once a failed writer's note is on disk (at once for a
// writer that did not fail).
func (w *Writer) awaitNote() {
	if errors.Is(w.Err(), ErrFailed) {
		<-w.noted
	}
}

// failedErr is the error of a writer that failed, with what stays of the
// capture.
func (w *Writer) failedErr() error {
	return fmt.Errorf("%w (records up to seq %d were synced and stay readable once this process ends)", w.Err(), w.durable.Load())
}

func (w *Writer) isFailed() bool {
	select {
	case <-w.failed:
		return true
	default:
		return false
	}
}

// await runs a store call that may end in Pebble's Fatalf, which parks
// its goroutine for good: it returns the call's error, or the failure.
func (w *Writer) await(f func() error) error {
	ch := make(chan error, 1)
	go func() { ch <- safely(f) }()
	select {
	case err := <-ch:
		return err
	case <-w.failed:
		return w.Err()
	}
}

// Err says why the writer accepts no more records (a failed commit or
// store, ErrFailed, or the capture stopped: ErrStopped), nil while it
// records.
func (w *Writer) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mu.err
}

// Flush commits (and syncs, unless NoSync) every record appended so far.
func (w *Writer) Flush() error {
	ch := make(chan error, 1)
	select {
	case w.flushReq <- ch:
	case <-w.done:
		return ErrClosed
	case <-w.failed:
		return w.Err()
	}
	select {
	case err := <-ch:
		return err
	case <-w.failed:
		return w.Err()
	}
}

// DurableSeq is the highest seq such that it and every record before it are
// committed.
func (w *Writer) DurableSeq() uint64 { return w.durable.Load() }

// Stats returns the writer's counters.
func (w *Writer) Stats() WriterStats {
	w.mu.Lock()
	pending := w.mu.pending
	w.mu.Unlock()
	return WriterStats{
		Appended:     w.appended.Load(),
		Dropped:      w.dropped.Load(),
		Committed:    w.committed.Load(),
		Bytes:        w.bytes.Load(),
		Commits:      w.commits.Load(),
		CommitTime:   time.Duration(w.commitNanos.Load()),
		MaxCommit:    time.Duration(w.maxCommitNanos.Load()),
		DurableSeq:   w.durable.Load(),
		PendingBytes: pending,
	}
}

// flusher owns the commits. It stops when stop is closed, after a last commit.
func (w *Writer) flusher() {
	defer close(w.done)
	t := time.NewTicker(w.opts.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			w.commit()
		case <-w.kick:
			w.commit()
		case ch := <-w.flushReq:
			ch <- w.commit()
		case <-w.stop:
			w.commit()
			return
		}
	}
}

// checkSpace stops the capture cleanly when it reached its budget or the
// disk its free-space floor (see WriterOptions); it runs in the flusher.
func (w *Writer) checkSpace() {
	var why string
	budget := false // why is the budget, not the disk
	// The records' encoded bytes, at every commit (the log grows by as
	// much); the directory's size and the disk's free space once a second,
	// and sooner once what was written since the last look could have
	// used a quarter of the margin the floor left then (the log, then the
	// tables it is flushed into, hold the records twice): a burst of large
	// statements must not write through the floor between two looks.
	b := int64(w.bytes.Load())
	if w.opts.MaxBytes > 0 && b >= w.opts.MaxBytes {
		why, budget = fmt.Sprintf("the capture reached its budget (--capture-max-bytes %d; %d bytes of records)", w.opts.MaxBytes, b), true
	}
	soon := w.spaceMargin >= 0 && b-w.bytesAtSpaceCheck >= w.spaceMargin/4
	if why == "" && !soon && time.Since(w.lastSpaceCheck) < time.Second {
		return
	}
	w.lastSpaceCheck, w.bytesAtSpaceCheck = time.Now(), b
	if _, err := os.Stat(w.dir); errors.Is(err, os.ErrNotExist) {
		// Records would go on into unlinked files until a new one could
		// not be made; nothing of them would remain.
		w.fail(w.removedMsg())
		return
	}
	if why == "" && w.opts.MaxBytes > 0 {
		if n, err := dirSize(w.dir); err == nil && n >= w.opts.MaxBytes {
			why, budget = fmt.Sprintf("the capture reached its budget (--capture-max-bytes %d; %d bytes on disk)", w.opts.MaxBytes, n), true
		}
	}
	if why == "" && w.opts.MinFreeBytes > 0 {
		var st syscall.Statfs_t
		if syscall.Statfs(w.dir, &st) == nil {
			free := int64(st.Bavail) * int64(st.Bsize)
			// Closing writes the records only the log holds into tables
			// (Close's flush): that much room on top of the floor, or the
			// stop would fill the disk it stops for. The default floor
			// covers a memtable; a floor set lower may not.
			unflushed := max(b-int64(w.flushed.Load()), 0)
			w.spaceMargin = max(free-w.opts.MinFreeBytes-unflushed, 0)
			switch {
			case free < w.opts.MinFreeBytes:
				why = fmt.Sprintf("the disk is nearly full (%d bytes free, under the floor of %d)", free, w.opts.MinFreeBytes)
			case free < w.opts.MinFreeBytes+unflushed:
				why = fmt.Sprintf("the disk is nearly full (%d bytes free: closing the capture writes %d bytes more, and the floor is %d)", free, unflushed, w.opts.MinFreeBytes)
			}
		}
	}
	if why == "" {
		return
	}
	w.mu.Lock()
	if w.mu.err == nil {
		w.mu.err = &stoppedError{why: why, budget: budget}
		w.mu.stopped, w.mu.stoppedAt = true, time.Now().UTC()
		w.space.Broadcast()
		w.opts.Logger.Error("capture stopped; relaying goes on", "reason", why, "records", w.committed.Load())
	}
	w.mu.Unlock()
}

// commit takes the current batch, adds its index entries and commits it.
func (w *Writer) commit() (err error) {
	w.checkSpace()
	w.mu.Lock()
	var stopped *stoppedError
	if w.mu.err != nil && (!errors.As(w.mu.err, &stopped) || w.mu.count == 0 && w.mu.batch.Empty()) {
		err := w.mu.err
		w.mu.Unlock()
		return err
	}
	// A clean stop (the budget, the disk's floor) refuses records from
	// now on; those already accepted, numbered and counted as captured,
	// are committed: the floor leaves room for them. The stop is still
	// the answer.
	if stopped != nil {
		defer func() {
			if err == nil {
				err = stopped
			}
		}()
	}
	b, count, first := w.mu.batch, w.mu.count, w.mu.first
	minStart, maxStart := w.mu.minStart, w.mu.maxStart
	index := w.mu.index
	size := w.mu.pending
	if count == 0 && b.Empty() {
		w.mu.Unlock()
		return nil
	}
	w.mu.batch = w.db.NewBatch()
	w.mu.count = 0
	w.mu.index = w.spareIndex[:0]
	w.mu.Unlock()

	if count > 0 { // else the batch holds commit GTIDs only
		w.addIndex(b, index, first, count, minStart, maxStart)
	}
	begin := time.Now()
	opt := pebble.Sync
	if w.opts.NoSync {
		opt = pebble.NoSync
	}
	err = commitBatch(b, opt)
	elapsed := time.Since(begin)
	closeBatch(b)
	w.spareIndex = index

	w.mu.Lock()
	if err != nil {
		w.mu.err = fmt.Errorf("store: commit: %w", err)
		w.mu.stopped = false // not a clean stop any more: Close says so
		w.opts.Logger.Error("capture commit failed; the writer stops accepting records", "err", err)
	}
	// At the swap, pending held exactly this batch's bytes; what was
	// appended since stays pending.
	w.mu.pending -= size
	w.space.Broadcast()
	w.mu.Unlock()
	if err != nil {
		return w.mu.err
	}
	if count == 0 {
		return nil
	}
	w.durable.Store(first + uint64(count) - 1)
	next := make(chan struct{})
	close(*w.commitSig.Swap(&next))
	w.committed.Add(uint64(count))
	w.commits.Add(1)
	w.commitNanos.Add(int64(elapsed))
	for {
		m := w.maxCommitNanos.Load()
		if int64(elapsed) <= m || w.maxCommitNanos.CompareAndSwap(m, int64(elapsed)) {
			break
		}
	}
	if m := w.opts.Metrics; m != nil {
		m.commit.Observe(elapsed.Seconds())
	}
	return nil
}

// commitBatch commits b. Pebble reports a failed commit (a full disk, a
// capture directory deleted or made read-only: a WAL write or rotation
// error) through Logger.Fatalf, which panics (pebbleLogger): the panic is
// the commit's error here, so a failing capture stops recording and
// never takes the process, and every client relayed through it, down.
func commitBatch(b *pebble.Batch, opt *pebble.WriteOptions) error {
	return safely(func() error { return b.Commit(opt) })
}

// safely runs a Pebble call, its Fatalf panic as its error (commitBatch).
func safely(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	return f()
}

func closeBatch(b *pebble.Batch) {
	defer func() { recover() }() // a batch of a failed commit may be in use by the broken pipeline
	b.Close()
}

// addIndex writes the session and time index entries of one commit.
func (w *Writer) addIndex(b *pebble.Batch, index []sessSeq, first uint64, count int, minStart, maxStart int64) {
	slices.SortStableFunc(index, func(a, b sessSeq) int { return cmp.Compare(a.session, b.session) })
	for i := 0; i < len(index); {
		j := i
		for j < len(index) && index[j].session == index[i].session {
			j++
		}
		s := index[i].session
		w.sessions[s] = struct{}{}
		w.valBuf = binary.AppendUvarint(w.valBuf[:0], uint64(j-i))
		prev := index[i].seq - 1
		for _, e := range index[i:j] {
			w.valBuf = binary.AppendUvarint(w.valBuf, e.seq-prev)
			prev = e.seq
		}
		w.keyBuf = sessionKey(w.keyBuf[:0], s, index[i].seq)
		_ = b.Set(w.keyBuf, w.valBuf, nil)
		i = j
	}
	w.valBuf = binary.AppendUvarint(w.valBuf[:0], uint64(count))
	w.valBuf = binary.AppendVarint(w.valBuf, minStart)
	w.valBuf = binary.AppendVarint(w.valBuf, maxStart)
	w.keyBuf = timeKey(w.keyBuf[:0], first)
	_ = b.Set(w.keyBuf, w.valBuf, nil)
}

// Close commits what is left, writes the summary and closes the capture.
// Appends after Close fail with ErrClosed. A writer that failed returns
// from Close once its failure note is on disk.
func (w *Writer) Close() error {
	defer w.awaitNote()
	w.mu.Lock()
	if w.mu.closed {
		w.mu.Unlock()
		return ErrClosed
	}
	w.mu.closed = true
	w.space.Broadcast()
	w.mu.Unlock()
	close(w.stop)
	select {
	case <-w.done:
	case <-w.failed: // the flusher may be parked inside the store
	}
	if w.isFailed() {
		// Nothing more may be asked of the store: its goroutines hold its
		// locks. The WAL holds what was synced; Pebble replays it when the
		// capture is opened after this process ends.
		return fmt.Errorf("store: close: %w", w.failedErr())
	}

	var errs []error
	w.mu.Lock()
	commitErr, stopped, stoppedAt := w.mu.err, w.mu.stopped, w.mu.stoppedAt
	w.mu.Unlock()
	if stopped {
		commitErr = nil // a clean stop: close properly, say why in the summary
	}
	errs = append(errs, commitErr)
	if commitErr == nil {
		sum := Summary{
			Records:  w.committed.Load(),
			LastSeq:  w.durable.Load(),
			Sessions: uint64(len(w.sessions)),
			Dropped:  w.dropped.Load(),
			ClosedAt: time.Now().UTC(),
			Commits:  w.gtids.Load(),
		}
		w.mu.Lock()
		sum.End, sum.Bypassed, sum.Source = w.mu.end, w.mu.bypassed, w.mu.source
		w.mu.Unlock()
		if sum.Records > 0 {
			sum.FirstSeq = 1
		}
		if stopped {
			sum.Stopped, sum.StoppedAt = strings.TrimPrefix(w.mu.err.Error(), ErrStopped.Error()+": "), stoppedAt
		}
		b, _ := json.Marshal(sum)
		errs = append(errs, w.await(func() error { return w.db.Set(keySummary, b, pebble.Sync) }))
		// Move everything out of the WAL into compressed tables.
		errs = append(errs, w.await(w.db.Flush))
	}
	if w.isFailed() {
		return fmt.Errorf("store: close: %w", w.failedErr())
	}
	// After a failed commit Pebble's pipeline may be broken: its Close may
	// panic or wait forever. What was synced is on disk either way.
	closed := make(chan error, 1)
	go func() {
		w.dbMu.Lock()
		defer w.dbMu.Unlock()
		w.dbClosed = true
		closed <- safely(w.db.Close)
	}()
	select {
	case err := <-closed:
		errs = append(errs, err)
	case <-w.failed:
		errs = append(errs, w.failedErr())
	case <-time.After(10 * time.Second):
		errs = append(errs, errors.New("the store did not close within 10s after a failure; what was synced stays readable once this process ends"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("store: close: %w", err)
	}
	os.Remove(filepath.Join(w.dir, reservedFile))
	os.Remove(filepath.Join(w.dir, failedFile))
	return removeWALs(w.dir)
}

// removeWALs deletes a cleanly closed capture's write-ahead logs. After the
// final Flush every record is in an SSTable, and the logs Pebble keeps
// (for recycling) would only take space: as much as the records themselves
// for a capture of a few million.
func removeWALs(dir string) error {
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		return err
	}
	for _, l := range logs {
		if err := os.Remove(l); err != nil {
			return fmt.Errorf("store: close: %w", err)
		}
	}
	return nil
}

// stoppedError is why a writer stopped recording: ErrStopped, and
// ErrBudget too when its size budget stopped it.
type stoppedError struct {
	why    string
	budget bool
}

func (e *stoppedError) Error() string { return ErrStopped.Error() + ": " + e.why }

func (e *stoppedError) Is(target error) bool {
	return target == ErrStopped || e.budget && target == ErrBudget
}
