package store

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/cockroachdb/pebble/v2"
)

// SeqGaps finds the sequence numbers a capture lacks. A capture numbers its
// records 1, 2, 3 … as they are appended: a number missing between two
// that are there is a record lost — a crash that emptied or cut a WAL in
// the middle, or a damaged file — and so is one missing before the first.
// (Records lost after the last one are seen only against a clean close's
// summary, which Reader.Records checks.) Feed it every record's Seq in
// order.
type SeqGaps struct {
	next uint64
	// Missing counts the lost records; Ranges lists the first maxGaps
	// runs of them, and More how many runs were left off.
	Missing uint64
	Ranges  []SeqRange
	More    int
}

// SeqRange is a run of missing sequence numbers, From to To inclusive.
type SeqRange struct{ From, To uint64 }

const maxGaps = 20

// Last is the highest sequence number noted (0: none).
func (g *SeqGaps) Last() uint64 { return max(g.next, 1) - 1 }

// Note takes the next record's sequence number.
func (g *SeqGaps) Note(seq uint64) {
	if g.next == 0 {
		g.next = 1
	}
	if seq > g.next {
		g.Missing += seq - g.next
		if len(g.Ranges) < maxGaps {
			g.Ranges = append(g.Ranges, SeqRange{g.next, seq - 1})
		} else {
			g.More++
		}
	}
	g.next = max(g.next, seq+1)
}

// String says what is missing, e.g. "3,912 records lost, in 1 run (seq
// 7,732 to 11,643)"; "" when nothing is.
func (g *SeqGaps) String() string {
	if g == nil || g.Missing == 0 {
		return ""
	}
	var rs []string
	for _, r := range g.Ranges {
		if r.From == r.To {
			rs = append(rs, fmt.Sprint(r.From))
		} else {
			rs = append(rs, fmt.Sprintf("%d to %d", r.From, r.To))
		}
	}
	if g.More > 0 {
		rs = append(rs, fmt.Sprintf("and %d more runs", g.More))
	}
	runs := len(g.Ranges) + g.More
	s := "runs"
	if runs == 1 {
		s = "run"
	}
	return fmt.Sprintf("%d records lost, in %d %s (seq %s)", g.Missing, runs, s, strings.Join(rs, ", "))
}

// Damage is a table file that fails its checksums: the records in it
// (From to To, by sequence number; 0 when the file's bounds are not
// records: From 0 is from the first, To 0 to the last when ToLast) cannot
// be read.
type Damage struct {
	File     string
	From, To uint64
	// ToLast: the file's keys go on past the records (to the capture's
	// index): it holds the records from From to the last, and there is
	// nothing after it to read.
	ToLast bool
	// Held says which records the file holds, in words ("records 1 to
	// the last"), as the error of a reader that meets it does.
	Held   string
	Detail string
}

// Verification is what Verify found: the records read, the damaged files
// passed over, and the records missing elsewhere.
type Verification struct {
	Readable uint64
	Damaged  []Damage
	Lost     SeqGaps
}

// Verify reads every record of the capture, passing over a damaged file
// to the records after it, and says what is readable and what is not.
func (r *Reader) Verify() (*Verification, error) {
	v := &Verification{}
	lower := []byte{prefixRecord}
	for {
		it, err := r.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: []byte{prefixRecord + 1}})
		if err != nil {
			return v, r.wrap(err)
		}
		var rec Record
		var decodeErr error
		for ok := it.First(); ok; ok = it.Next() {
			seq, isRec := recordSeq(it.Key())
			if !isRec {
				it.Close()
				return v, fmt.Errorf("%w: %s: record key of %d bytes", ErrCorrupt, r.dir, len(it.Key()))
			}
			val, err := it.ValueAndErr()
			if err != nil {
				break // a damaged block: it.Error() says why
			}
			if err := DecodeRecord(val, r.meta.BaseTime, &rec); err != nil {
				// Intact on disk (its block's checksum held) but not a
				// record this version can read.
				decodeErr = fmt.Errorf("%w: %s: record %d: %v", ErrCorrupt, r.dir, seq, err)
				break
			}
			v.Lost.Note(seq)
			v.Readable++
		}
		err = it.Error()
		it.Close()
		if err == nil && decodeErr != nil {
			return v, decodeErr
		}
		if err == nil {
			return v, nil
		}
		d, ok := damageOf(err)
		if !ok {
			return v, r.wrap(err)
		}
		v.Damaged = append(v.Damaged, d)
		next, ok := d.resume(lower)
		if !ok || next == nil {
			return v, nil // nothing after it to read, or no way past it
		}
		// The records after the damaged file; the ones in it are
		// counted as damaged, not lost.
		v.Lost.next = max(v.Lost.next, d.To+1)
		lower = next
	}
}

// damageOf describes the damaged table file a corruption error of
// Pebble's names; false for another error.
func damageOf(err error) (Damage, bool) {
	if !pebble.IsCorruptionError(err) {
		return Damage{}, false
	}
	info := pebble.ExtractDataCorruptionInfo(err)
	if info == nil {
		return Damage{}, false
	}
	lo, hi := info.Bounds.Start, info.Bounds.End.Key
	d := Damage{File: filepath.Base(info.Path), Held: heldRecords(lo, hi), Detail: "damaged"}
	if info.Details != nil {
		d.Detail = info.Details.Error()
	}
	d.From, _ = recordSeq(lo) // 0: not a record
	d.To, _ = recordSeq(hi)
	d.ToLast = len(lo) > 0 && len(hi) > 0 && lo[0] <= prefixRecord && hi[0] > prefixRecord
	return d, true
}

// resume is the key reading goes on from after d: past its last record,
// and past lower (where reading began); nil and true when d holds the
// records to the last (nothing after it to read); false when the file's
// keys end in no record, or that is no way past it.
func (d Damage) resume(lower []byte) ([]byte, bool) {
	if d.ToLast {
		return nil, true
	}
	if d.To == 0 {
		return nil, false
	}
	next := recordKey(nil, d.To+1)
	return next, bytes.Compare(next, lower) > 0
}
