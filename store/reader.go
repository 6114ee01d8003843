package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Reader reads a capture. Iterations stream with constant memory.
type Reader struct {
	db      *pebble.DB
	dir     string
	meta    Meta
	summary *Summary
	live    *Writer // set for a reader of a capture being written
	// bypassed are the applied bypassed transactions' records, in key
	// order, and their sessions (ApplyBypassed).
	bypassed         []bypassedRec
	bypassedSessions []uint64
	// pass: Records passes over damaged files (PassDamaged), listing them.
	pass struct {
		on      bool
		mu      sync.Mutex
		damaged []Damage
	}
}

// Open opens the capture in dir for reading. It fails with ErrNotCapture
// for a directory that is not one (without touching it), ErrNewerFormat for
// a capture this version cannot read, ErrCorrupt when the store is
// damaged, and ErrNoKey or ErrWrongKey for an encrypted capture without
// its key (WithKey).
func Open(dir string, opts ...Option) (*Reader, error) {
	if err := checkCaptureDir(dir); err != nil {
		return nil, err
	}
	o := optionsOf(opts)
	key, err := storeKey(dir, o.key)
	if err != nil {
		return nil, err
	}
	po := pebbleOptions(true, slog.New(slog.DiscardHandler), key)
	if o.cacheSize > 0 {
		po.CacheSize = o.cacheSize
	}
	db, err := pebble.Open(dir, po)
	if err != nil {
		return nil, openErr(dir, err)
	}
	r := &Reader{db: db, dir: dir}
	if err := r.readHeader(); err != nil {
		db.Close()
		return nil, err
	}
	return r, nil
}

func (r *Reader) readHeader() error {
	hdr, err := r.get(keyHeader)
	if err != nil {
		return err
	}
	if hdr == nil {
		return fmt.Errorf("%w: %s is a Pebble store without a tandem header (another program's database?)", ErrNotCapture, r.dir)
	}
	if err := json.Unmarshal(hdr, &r.meta); err != nil {
		return fmt.Errorf("%w: %s: unreadable header: %v", ErrCorrupt, r.dir, err)
	}
	if r.meta.Magic != magic {
		return fmt.Errorf("%w: %s holds %q, not %q", ErrNotCapture, r.dir, r.meta.Magic, magic)
	}
	if r.meta.FormatVersion > FormatVersion {
		return fmt.Errorf("%w: %s is capture format version %d; this tandem reads up to version %d; upgrade tandem to read it",
			ErrNewerFormat, r.dir, r.meta.FormatVersion, FormatVersion)
	}
	if r.meta.FormatVersion < 1 {
		return fmt.Errorf("%w: %s: header has format version %d", ErrCorrupt, r.dir, r.meta.FormatVersion)
	}
	sum, err := r.get(keySummary)
	if err != nil {
		return err
	}
	if sum != nil {
		var s Summary
		if err := json.Unmarshal(sum, &s); err != nil {
			return fmt.Errorf("%w: %s: unreadable summary: %v", ErrCorrupt, r.dir, err)
		}
		r.summary = &s
	}
	return nil
}

// get returns a copy of key's value, nil if absent.
func (r *Reader) get(key []byte) ([]byte, error) {
	v, closer, err := r.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, r.wrap(err)
	}
	defer closer.Close()
	return append([]byte(nil), v...), nil
}

func (r *Reader) wrap(err error) error {
	if pebble.IsCorruptionError(err) {
		return damaged(r.dir, err)
	}
	return fmt.Errorf("store: %s: %w", r.dir, err)
}

// Meta returns the capture's metadata.
func (r *Reader) Meta() Meta { return r.meta }

// GTIDs returns the commit GTIDs the capture holds (key 0x05), by the
// seq of the record that committed the transaction.
func (r *Reader) GTIDs() (map[uint64]string, error) {
	it, err := r.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixGTID}, UpperBound: []byte{prefixGTID + 1}})
	if err != nil {
		return nil, r.wrap(err)
	}
	out := map[uint64]string{}
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) != 9 {
			it.Close()
			return nil, fmt.Errorf("%w: %s: a commit GTID key of %d bytes", ErrCorrupt, r.dir, len(k))
		}
		out[binary.BigEndian.Uint64(k[1:])] = string(it.Value())
	}
	if err := it.Close(); err != nil {
		return nil, r.wrap(err)
	}
	return out, nil
}

// Summary returns what a clean Close wrote; false for a capture whose writer
// did not close (a crash, or still being written).
func (r *Reader) Summary() (Summary, bool) {
	if r.summary == nil {
		return Summary{}, false
	}
	return *r.summary, true
}

// Failure says why the writer abandoned the capture (a full disk, its
// directory removed), and when, if it could leave that note.
func (r *Reader) Failure() (reason string, at time.Time, ok bool) {
	for _, name := range []string{failedFile, reservedFile} { // see failedFile
		b, err := os.ReadFile(filepath.Join(r.dir, name))
		var f failure
		if err != nil || len(bytes.TrimSpace(b)) == 0 || json.Unmarshal(b, &f) != nil {
			continue
		}
		return f.Reason, f.At, true
	}
	return "", time.Time{}, false
}

// DiskBytes is the size of the capture's files.
func (r *Reader) DiskBytes() (int64, error) { return dirSize(r.dir) }

// Close releases the reader. A live reader (Writer.Live) leaves the
// store to its writer.
func (r *Reader) Close() error {
	if r.live != nil {
		return nil
	}
	return r.db.Close()
}

// Live returns a reader of the capture w is writing, in this process:
// each call sees what is committed at that moment, and Follow yields
// records as they are committed. Stop using it before closing w.
func (w *Writer) Live() *Reader {
	return &Reader{db: w.db, dir: w.dir, meta: w.meta, live: w}
}

// DurableSeq is, for a live reader, the writer's: every record up to it
// is committed and readable. 0 for a reader of a closed capture.
func (r *Reader) DurableSeq() uint64 {
	if r.live == nil {
		return 0
	}
	return r.live.DurableSeq()
}

// ErrNotLive: Follow was called on a reader of a closed capture.
var ErrNotLive = errors.New("store: Follow needs a live reader (Writer.Live)")

// Follow yields the live capture's records from seq from on, in order,
// as they are committed, waiting for more until ctx is done: then, or
// when the writer closes, stops or fails, it ends (with the writer's
// error, if it has one). The *Record is reused from one step to the next.
func (r *Reader) Follow(ctx context.Context, from uint64) iter.Seq2[*Record, error] {
	return func(yield func(*Record, error) bool) {
		err := r.follow(ctx, from, func(ri *recordIter) (bool, error) {
			if err := ri.decode(); err != nil {
				return false, err
			}
			return yield(&ri.rec, nil), nil
		})
		if err != nil {
			yield(nil, err)
		}
	}
}

// EndOnDrain ends a follower of this live reader once drain is closed:
// it waits until reached(target) says the follower has handed on every
// record committed at that moment (target), or has given up, then calls
// cancel (the context of its Follow). It returns at once; it gives up
// when ctx ends.
func (r *Reader) EndOnDrain(ctx context.Context, drain <-chan struct{}, reached func(target uint64) bool, cancel context.CancelFunc) {
	go func() {
		select {
		case <-drain:
		case <-ctx.Done():
			return
		}
		target := r.DurableSeq()
		for !reached(target) && ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
	}()
}

// Raw is a record as stored: its seq, and its encoding relative to the
// capture's Meta().BaseTime (DecodeRecord reads it).
type Raw struct {
	Seq   uint64
	Value []byte
	// Durable is the last committed seq when this record was read: Seq ==
	// Durable means the reader has caught up with the writer for now.
	Durable uint64
}

// FollowRaw is Follow without decoding: it yields each record's stored
// bytes, valid until the next step. A process that feeds the capture to
// another (a shadow's worker) copies bytes and decodes nothing.
func (r *Reader) FollowRaw(ctx context.Context, from uint64) iter.Seq2[Raw, error] {
	return func(yield func(Raw, error) bool) {
		err := r.follow(ctx, from, func(ri *recordIter) (bool, error) {
			k := ri.it.Key()
			if len(k) != 9 {
				return false, fmt.Errorf("%w: %s: record key of %d bytes", ErrCorrupt, r.dir, len(k))
			}
			v, err := ri.it.ValueAndErr()
			if err != nil {
				return false, r.wrap(err)
			}
			return yield(Raw{Seq: binary.BigEndian.Uint64(k[1:]), Value: v, Durable: ri.hi}, nil), nil
		})
		if err != nil {
			yield(Raw{}, err)
		}
	}
}

// follow calls step on each committed record from seq from on, waiting
// for commits, until step says stop, ctx ends, or the writer closes or
// fails.
func (r *Reader) follow(ctx context.Context, from uint64, step func(*recordIter) (bool, error)) error {
	w := r.live
	if w == nil {
		return ErrNotLive
	}
	next := max(from, 1)
	for {
		sig := *w.commitSig.Load()
		if durable := w.DurableSeq(); durable >= next {
			ri, err := r.newRecordIterRange(next, durable)
			if err != nil {
				return err
			}
			for ok := ri.it.First(); ok; ok = ri.it.Next() {
				more, err := step(ri)
				if err != nil || !more {
					ri.it.Close()
					return err
				}
				next = binary.BigEndian.Uint64(ri.it.Key()[1:]) + 1
			}
			err = ri.err()
			ri.it.Close()
			if err != nil {
				return err
			}
			continue
		}
		select {
		case <-sig:
		case <-ctx.Done():
			return nil
		case <-w.failed:
			return w.Err()
		case <-w.done:
			return nil // the writer is closing its store: stop following first
		}
	}
}

// newRecordIterRange iterates records from seq lo to hi, inclusive.
func (r *Reader) newRecordIterRange(lo, hi uint64) (*recordIter, error) {
	it, err := r.db.NewIter(&pebble.IterOptions{LowerBound: recordKey(nil, lo), UpperBound: recordKey(nil, hi+1)})
	if err != nil {
		return nil, r.wrap(err)
	}
	return &recordIter{r: r, it: it, hi: hi}, nil
}

// recordIter walks record keys with one Pebble iterator.
type recordIter struct {
	r   *Reader
	it  *pebble.Iterator
	rec Record
	key [9]byte
	hi  uint64 // the last seq of a range's iterator
}

func (r *Reader) newRecordIter() (*recordIter, error) {
	it, err := r.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixRecord}, UpperBound: []byte{prefixRecord + 1}})
	if err != nil {
		return nil, r.wrap(err)
	}
	return &recordIter{r: r, it: it}, nil
}

// decode decodes the record under the iterator into ri.rec.
func (ri *recordIter) decode() error {
	v, err := ri.it.ValueAndErr()
	if err != nil {
		return ri.r.wrap(err)
	}
	return ri.decodeValue(v)
}

// decodeValue decodes v, the value under the iterator, into ri.rec.
func (ri *recordIter) decodeValue(v []byte) error {
	k := ri.it.Key()
	if len(k) != 9 {
		return fmt.Errorf("%w: %s: record key of %d bytes", ErrCorrupt, ri.r.dir, len(k))
	}
	ri.rec.Seq = binary.BigEndian.Uint64(k[1:])
	if err := DecodeRecord(v, ri.r.meta.BaseTime, &ri.rec); err != nil {
		return fmt.Errorf("%s: record seq %d: %w", ri.r.dir, ri.rec.Seq, err)
	}
	return nil
}

// seek positions at seq and decodes it; false if it is absent.
func (ri *recordIter) seek(seq uint64) (bool, error) {
	if !ri.it.SeekGE(recordKey(ri.key[:0], seq)) {
		return false, ri.err()
	}
	if at, ok := recordSeq(ri.it.Key()); !ok || at != seq {
		return false, ri.err()
	}
	return true, ri.decode()
}

func (ri *recordIter) err() error {
	if err := ri.it.Error(); err != nil {
		return ri.r.wrap(err)
	}
	return nil
}

// Records yields every record in global sequence order. The *Record is
// reused from one step to the next: Clone it to keep it. An error ends the
// iteration. For a cleanly closed capture, finding fewer records than its
// summary counts is an ErrCorrupt (a lost file), never a silent truncation.
// After ApplyBypassed, the bypassed transactions come among them, each
// right after the record it followed on the server (their seqs are
// BypassedSeqBase and up: the order is no longer by seq).
func (r *Reader) Records() iter.Seq2[*Record, error] {
	return r.withBypassed(r.records())
}

// CapturedRecords is Records without the applied bypassed transactions:
// what passed through the capture, in seq order.
func (r *Reader) CapturedRecords() iter.Seq2[*Record, error] { return r.records() }

func (r *Reader) records() iter.Seq2[*Record, error] {
	return func(yield func(*Record, error) bool) {
		var n uint64
		lower := []byte{prefixRecord}
		passed := false
		for {
			it, err := r.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: []byte{prefixRecord + 1}})
			if err != nil {
				yield(nil, r.wrap(err))
				return
			}
			ri := &recordIter{r: r, it: it}
			var raw error // a damaged block's error, as Pebble gave it
			for ok := it.First(); ok; ok = it.Next() {
				v, verr := it.ValueAndErr()
				if verr != nil {
					raw = verr
					break
				}
				if err := ri.decodeValue(v); err != nil {
					it.Close()
					yield(nil, err)
					return
				}
				n++
				if !yield(&ri.rec, nil) {
					it.Close()
					return
				}
			}
			if raw == nil {
				raw = it.Error()
			}
			it.Close()
			if raw == nil {
				break
			}
			next, ok := r.pastDamage(raw, lower)
			if !ok {
				yield(nil, r.wrap(raw))
				return
			}
			passed = true
			if next == nil {
				break // the damaged file held the records to the last
			}
			lower = next
		}
		if s := r.summary; s != nil && n != s.Records && !passed {
			yield(nil, fmt.Errorf("%w: %s: found %d records, its summary counts %d", ErrCorrupt, r.dir, n, s.Records))
		}
	}
}

// PassDamaged makes the reader's Records (and CapturedRecords) pass over
// a damaged table file to the records after it, as Verify does, instead
// of ending with its error: the records from its damaged block to the
// file's last are missing, as lost records are (replay --skip-damaged).
// Damaged lists the files passed over.
func (r *Reader) PassDamaged() { r.pass.on = true }

// Damaged lists the damaged files Records passed over (PassDamaged).
func (r *Reader) Damaged() []Damage {
	r.pass.mu.Lock()
	defer r.pass.mu.Unlock()
	return slices.Clone(r.pass.damaged)
}

// pastDamage says where reading resumes after the damaged file raw
// names (a key past lower), when the reader passes damage: nil when that
// file held the records to the last.
func (r *Reader) pastDamage(raw error, lower []byte) ([]byte, bool) {
	if !r.pass.on {
		return nil, false
	}
	d, ok := damageOf(raw)
	if !ok {
		return nil, false
	}
	next, ok := d.resume(lower)
	if !ok {
		return nil, false
	}
	r.pass.mu.Lock()
	if !slices.ContainsFunc(r.pass.damaged, func(x Damage) bool { return x.File == d.File }) {
		r.pass.damaged = append(r.pass.damaged, d)
	}
	r.pass.mu.Unlock()
	return next, true
}

// Sessions lists the session ids in the capture, in increasing order.
func (r *Reader) Sessions() ([]uint64, error) {
	it, err := r.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixSession}, UpperBound: []byte{prefixSession + 1}})
	if err != nil {
		return nil, r.wrap(err)
	}
	defer it.Close()
	var out []uint64
	var key []byte
	for ok := it.First(); ok; {
		k := it.Key()
		if len(k) != 17 {
			return nil, fmt.Errorf("%w: %s: session index key of %d bytes", ErrCorrupt, r.dir, len(k))
		}
		s := binary.BigEndian.Uint64(k[1:9])
		out = append(out, s)
		if s == ^uint64(0) {
			break
		}
		key = sessionKey(key[:0], s+1, 0)
		ok = it.SeekGE(key)
	}
	if err := it.Error(); err != nil {
		return nil, r.wrap(err)
	}
	return append(out, r.bypassedSessions...), nil
}

// openIndexed opens an iterator over the index keys in [lo, hi) and a
// record iterator to follow them; the caller closes both.
func (r *Reader) openIndexed(lo, hi []byte) (*pebble.Iterator, *recordIter, error) {
	idx, err := r.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, nil, r.wrap(err)
	}
	ri, err := r.newRecordIter()
	if err != nil {
		idx.Close()
		return nil, nil, err
	}
	return idx, ri, nil
}

// Session yields one session's records in order. The *Record is reused.
func (r *Reader) Session(id uint64) iter.Seq2[*Record, error] {
	if id >= BypassedSessionBase && len(r.bypassed) > 0 {
		return r.bypassedSession(id)
	}
	return func(yield func(*Record, error) bool) {
		idx, ri, err := r.openIndexed(sessionKey(nil, id, 0), sessionKey(nil, id, ^uint64(0)))
		if err != nil {
			yield(nil, err)
			return
		}
		defer idx.Close()
		defer ri.it.Close()
		for ok := idx.First(); ok; ok = idx.Next() {
			seqs, err := r.decodeSessionEntry(idx)
			if err != nil {
				yield(nil, err)
				return
			}
			for _, seq := range seqs {
				found, err := ri.seek(seq)
				if err == nil && !found {
					err = fmt.Errorf("%w: %s: session %d's index names seq %d, which is missing", ErrCorrupt, r.dir, id, seq)
				}
				if err != nil {
					yield(nil, err)
					return
				}
				if !yield(&ri.rec, nil) {
					return
				}
			}
		}
		if err := idx.Error(); err != nil {
			yield(nil, r.wrap(err))
		}
	}
}

func (r *Reader) decodeSessionEntry(it *pebble.Iterator) ([]uint64, error) {
	v, err := it.ValueAndErr()
	if err != nil {
		return nil, r.wrap(err)
	}
	_, seqs, err := decodeSessionIndex(it.Key(), v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.dir, err)
	}
	return seqs, nil
}

// recordSeq is the sequence of a record key.
func recordSeq(k []byte) (uint64, bool) {
	if len(k) != 9 || k[0] != prefixRecord {
		return 0, false
	}
	return binary.BigEndian.Uint64(k[1:]), true
}

// decodeSessionIndex decodes a session index entry (key and value): the
// session and the seqs it lists. An error wraps ErrCorrupt.
func decodeSessionIndex(k, v []byte) (uint64, []uint64, error) {
	if len(k) != 17 || k[0] != prefixSession {
		return 0, nil, fmt.Errorf("%w: session index key of %d bytes", ErrCorrupt, len(k))
	}
	session, first := binary.BigEndian.Uint64(k[1:9]), binary.BigEndian.Uint64(k[9:])
	d := decoder{b: v}
	n := d.uvarintMax(uint64(len(v)), "session index count")
	seqs := make([]uint64, 0, n)
	prev := first - 1
	for i := uint64(0); i < n && d.err == nil; i++ {
		delta := d.uvarint()
		if d.err == nil && (delta == 0 || prev+delta < prev) {
			d.fail(errors.New("seqs not increasing"))
		}
		prev += delta
		seqs = append(seqs, prev)
	}
	if d.err == nil && d.pos != len(v) {
		d.fail(errors.New("trailing bytes"))
	}
	if d.err == nil && (len(seqs) == 0 || seqs[0] != first) {
		d.fail(errors.New("first seq is not the key's"))
	}
	if d.err != nil {
		return 0, nil, fmt.Errorf("%w: session index entry of session %d at seq %d: %v", ErrCorrupt, session, first, d.err)
	}
	return session, seqs, nil
}

// decodeTimeIndex decodes a time index entry (key and value): a commit's
// first seq, record count and start-time range. An error wraps ErrCorrupt.
func decodeTimeIndex(k, v []byte) (first, count uint64, minStart, maxStart int64, err error) {
	if len(k) != 9 || k[0] != prefixTime {
		return 0, 0, 0, 0, fmt.Errorf("%w: time index key of %d bytes", ErrCorrupt, len(k))
	}
	d := decoder{b: v}
	count, minStart, maxStart = d.uvarint(), d.varint(), d.varint()
	if d.err == nil && d.pos != len(v) {
		d.fail(errors.New("trailing bytes"))
	}
	if d.err == nil && (count == 0 || minStart > maxStart) {
		d.fail(fmt.Errorf("count %d, starts %d..%d", count, minStart, maxStart))
	}
	if d.err != nil {
		return 0, 0, 0, 0, fmt.Errorf("%w: time index entry: %v", ErrCorrupt, d.err)
	}
	return binary.BigEndian.Uint64(k[1:]), count, minStart, maxStart, nil
}

// Window yields, in sequence order, the records whose start lies in
// [from, to). It reads only the commits whose start times overlap the
// window. The *Record is reused.
func (r *Reader) Window(from, to time.Time) iter.Seq2[*Record, error] {
	return func(yield func(*Record, error) bool) {
		lo, hi := from.UnixNano()-r.meta.BaseTime, to.UnixNano()-r.meta.BaseTime
		idx, ri, err := r.openIndexed([]byte{prefixTime}, []byte{prefixTime + 1})
		if err != nil {
			yield(nil, err)
			return
		}
		defer idx.Close()
		defer ri.it.Close()
		for ok := idx.First(); ok; ok = idx.Next() {
			v, err := idx.ValueAndErr()
			if err != nil {
				yield(nil, r.wrap(err))
				return
			}
			first, count, minStart, maxStart, err := decodeTimeIndex(idx.Key(), v)
			if err != nil {
				yield(nil, fmt.Errorf("%s: %w", r.dir, err))
				return
			}
			if maxStart < lo || minStart >= hi {
				continue
			}
			for ok := ri.it.SeekGE(recordKey(ri.key[:0], first)); ok; ok = ri.it.Next() {
				if seq, ok := recordSeq(ri.it.Key()); !ok || seq >= first+count {
					break
				}
				if err := ri.decode(); err != nil {
					yield(nil, err)
					return
				}
				if s := ri.rec.Start.UnixNano() - r.meta.BaseTime; s < lo || s >= hi {
					continue
				}
				if !yield(&ri.rec, nil) {
					return
				}
			}
			if err := ri.err(); err != nil {
				yield(nil, err)
				return
			}
		}
		if err := idx.Error(); err != nil {
			yield(nil, r.wrap(err))
		}
	}
}

// Get returns the record with sequence seq (a copy), or false if absent.
func (r *Reader) Get(seq uint64) (*Record, bool, error) {
	if seq >= BypassedSeqBase && len(r.bypassed) > 0 {
		rec, ok := r.bypassedGet(seq)
		return rec, ok, nil
	}
	ri, err := r.newRecordIter()
	if err != nil {
		return nil, false, err
	}
	defer ri.it.Close()
	found, err := ri.seek(seq)
	if err != nil || !found {
		return nil, false, err
	}
	return ri.rec.Clone(), true, nil
}

// StartSpan returns the earliest and latest record start, from the time
// index alone (one entry per commit), and false for an empty capture.
func (r *Reader) StartSpan() (time.Time, time.Time, bool, error) {
	it, err := r.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixTime}, UpperBound: []byte{prefixTime + 1}})
	if err != nil {
		return time.Time{}, time.Time{}, false, r.wrap(err)
	}
	defer it.Close()
	var lo, hi int64
	seen := false
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return time.Time{}, time.Time{}, false, r.wrap(err)
		}
		_, _, minStart, maxStart, err := decodeTimeIndex(it.Key(), v)
		if err != nil {
			return time.Time{}, time.Time{}, false, fmt.Errorf("%s: %w", r.dir, err)
		}
		if !seen || minStart < lo {
			lo = minStart
		}
		if !seen || maxStart > hi {
			hi = maxStart
		}
		seen = true
	}
	if err := it.Error(); err != nil {
		return time.Time{}, time.Time{}, false, r.wrap(err)
	}
	return time.Unix(0, r.meta.BaseTime+lo), time.Unix(0, r.meta.BaseTime+hi), seen, nil
}
