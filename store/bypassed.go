package store

import (
	"encoding/binary"
	"fmt"
	"iter"
	"sort"
	"strconv"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Bypassed transactions as records (key 0x06): each transaction that
// bypassed the proxy, rebuilt from the binary log's row images as a
// session of its own (connect, BEGIN, one statement per row change,
// COMMIT, quit), stored under the seq of the captured record it followed
// in the server's order. A reader that applies them (ApplyBypassed)
// yields them right after that record, with seqs from BypassedSeqBase and
// sessions from BypassedSessionBase, so that replay runs them where the
// server ran them; every other reader never sees them.
//
//	0x06 after:u64be n:u32be    one record (record value as above)
const prefixBypassed byte = 0x06

// BypassedSeqBase and BypassedSessionBase are where the applied bypassed
// records' seqs and session ids begin: above any a writer hands out, and
// below OutcomeSeq's pass bits.
const (
	BypassedSeqBase     uint64 = 1 << 39
	BypassedSessionBase uint64 = 1 << 62
)

// SessionName names session id in messages: "session 12", or, for the
// session that carries the writes that bypassed the proxy, what it is.
func SessionName(id uint64) string {
	if id >= BypassedSessionBase {
		return "the writes that bypassed the proxy (from the binary log)"
	}
	return "session " + strconv.FormatUint(id, 10)
}

func bypassedKey(dst []byte, after uint64, n uint32) []byte {
	dst = append(dst, prefixBypassed)
	dst = binary.BigEndian.AppendUint64(dst, after)
	return binary.BigEndian.AppendUint32(dst, n)
}

// AddBypassed stores one bypassed transaction's records, to be applied
// after the record with seq after (0: before the first). Their Session is
// kept as given (BypassedSessionBase and up). It waits like Append.
func (w *Writer) AddBypassed(after uint64, recs []*Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.closed || w.mu.err != nil {
		if w.mu.err != nil {
			return w.mu.err
		}
		return ErrClosed
	}
	for _, r := range recs {
		var key [13]byte
		if err := w.mu.batch.Set(bypassedKey(key[:0], after, w.bypassedN), AppendRecord(nil, r, w.meta.BaseTime), nil); err != nil {
			return fmt.Errorf("store: add bypassed: %w", err)
		}
		w.bypassedN++
	}
	return nil
}

// bypassedRec is an applied record and the seq it follows.
type bypassedRec struct {
	after uint64
	rec   *Record
}

// ApplyBypassed makes the reader yield the capture's bypassed
// transactions (key 0x06) among its records, each right after the
// captured record it followed on the server, and returns how many
// records they are. Call it before reading.
func (r *Reader) ApplyBypassed() (int, error) {
	it, err := r.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixBypassed}, UpperBound: []byte{prefixBypassed + 1}})
	if err != nil {
		return 0, r.wrap(err)
	}
	var out []bypassedRec
	sessions := map[uint64]bool{}
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) != 13 {
			it.Close()
			return 0, fmt.Errorf("%w: %s: a bypassed record key of %d bytes", ErrCorrupt, r.dir, len(k))
		}
		rec := &Record{}
		if err := DecodeRecord(it.Value(), r.meta.BaseTime, rec); err != nil {
			it.Close()
			return 0, fmt.Errorf("%w: %s: bypassed record: %v", ErrCorrupt, r.dir, err)
		}
		rec.Seq = BypassedSeqBase + uint64(len(out))
		sessions[rec.Session] = true
		out = append(out, bypassedRec{after: binary.BigEndian.Uint64(k[1:9]), rec: rec})
	}
	if err := it.Close(); err != nil {
		return 0, r.wrap(err)
	}
	if err := r.placeBypassed(out); err != nil {
		return 0, err
	}
	r.bypassed = out
	ids := make([]uint64, 0, len(sessions))
	for s := range sessions {
		ids = append(ids, s)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	r.bypassedSessions = ids
	return len(out), nil
}

// placeBypassed puts each bypassed record after every captured record
// that ended before (or as) it starts, and before every other: the
// position in the capture's order (records are written as they end) that
// a record of that start has. Its stored place (the captured commit
// before it in the server's order) is one such record, but the records
// written just after it can have ended a little earlier: a replay that
// handed the bypassed record out before them would have it wait for
// records not yet handed out.
func (r *Reader) placeBypassed(bs []bypassedRec) error {
	if len(bs) == 0 {
		return nil
	}
	type ended struct {
		end int64
		seq uint64
	}
	var ends []ended
	for rec, err := range r.records() {
		if err != nil {
			return err
		}
		ends = append(ends, ended{rec.Start.UnixNano() + int64(rec.Duration), rec.Seq})
	}
	sort.Slice(ends, func(i, j int) bool { return ends[i].end < ends[j].end })
	for i := 1; i < len(ends); i++ {
		ends[i].seq = max(ends[i].seq, ends[i-1].seq) // the last seq of those ended by then
	}
	prev := uint64(0)
	for i := range bs {
		start := bs[i].rec.Start.UnixNano()
		k := sort.Search(len(ends), func(j int) bool { return ends[j].end > start })
		after := uint64(0)
		if k > 0 {
			after = ends[k-1].seq
		}
		bs[i].after = max(after, prev) // one session: its order holds
		prev = bs[i].after
	}
	return nil
}

// withBypassed merges the applied bypassed records into records (in seq
// order): those placed after a seq before s come out before s.
func (r *Reader) withBypassed(records iter.Seq2[*Record, error]) iter.Seq2[*Record, error] {
	if len(r.bypassed) == 0 {
		return records
	}
	return func(yield func(*Record, error) bool) {
		j := 0
		flush := func(below uint64) bool {
			for ; j < len(r.bypassed) && r.bypassed[j].after < below; j++ {
				if !yield(r.bypassed[j].rec.Clone(), nil) {
					return false
				}
			}
			return true
		}
		for rec, err := range records {
			if err != nil {
				yield(nil, err)
				return
			}
			if !flush(rec.Seq) || !yield(rec, nil) {
				return
			}
		}
		flush(^uint64(0))
	}
}

func (r *Reader) bypassedGet(seq uint64) (*Record, bool) {
	i := seq - BypassedSeqBase
	if i >= uint64(len(r.bypassed)) {
		return nil, false
	}
	return r.bypassed[i].rec.Clone(), true
}

func (r *Reader) bypassedSession(id uint64) iter.Seq2[*Record, error] {
	return func(yield func(*Record, error) bool) {
		for _, b := range r.bypassed {
			if b.rec.Session == id && !yield(b.rec.Clone(), nil) {
				return
			}
		}
	}
}

// BypassedCommit is a bypassed transaction's COMMIT statement: it names
// the transaction's GTID and hi, the latest it can have committed (the
// end of the next captured commit in the server's order, ns), which
// ParseBypassedCommit reads back. Part of the format.
func BypassedCommit(gtid string, hi time.Time) string {
	return fmt.Sprintf("COMMIT /* tandem bypassed %s before %d */", gtid, hi.UnixNano())
}

// ParseBypassedCommit reads what BypassedCommit wrote.
func ParseBypassedCommit(sql string) (gtid string, hi int64, ok bool) {
	n, err := fmt.Sscanf(sql, "COMMIT /* tandem bypassed %s before %d */", &gtid, &hi)
	return gtid, hi, err == nil && n == 2
}
