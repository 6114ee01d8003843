package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/tandemdb/tandem/latency"
)

// Outcome flag bits. Part of the run format, never change.
const (
	OutcomeError            = 1 << 0 // the statement failed (ErrCode)
	OutcomeRows             = 1 << 1 // it returned rows
	OutcomeNondeterministic = 1 << 2 // its result cannot be deterministic: not compared
	OutcomeSkipped          = 1 << 3 // not run on the target (SkipReason says why)
	OutcomeOrdered          = 1 << 4 // ORDER BY fixes the row order
	OutcomeClientError      = 1 << 5 // the error is the replayer's, not the server's (Cause says what)
	OutcomeOrderReleased    = 1 << 6 // started before every record it waits for had completed (--order-timeout ran out)
	OutcomeRetried          = 1 << 7 // the outcome of a retry after a deadlock or lock wait timeout
	OutcomeCaptureRollback  = 1 << 8 // the capture failed here (deadlock); the target was rolled back to match
	OutcomeOrderRerun       = 1 << 9 // its transaction was rolled back and run again to keep the capture's order
	// OutcomeTrxFailed: its transaction failed for good on the target (a
	// deadlock or lock wait timeout on every retry, or its connection
	// lost): rolled back, the rest of it not run (run format 2).
	OutcomeTrxFailed = 1 << 10
	outcomeFlagsMax  = 1<<11 - 1
)

// Why a record was skipped (Outcome.SkipReason). Part of the run format.
const (
	SkipNotReplayable     byte = 1  // LOAD DATA LOCAL and the like: the capture flags it
	SkipMasked            byte = 2  // its secrets were masked in the capture
	SkipTruncated         byte = 3  // cut to the capture's size limit
	SkipUnknownStatement  byte = 4  // an execute of a statement prepared before the capture began
	SkipKind              byte = 5  // a command replay does not send (COM_FIELD_LIST, binlog …)
	SkipTargetFailed      byte = 6  // the target had failed before this record
	SkipUnrewritable      byte = 7  // table DDL whose engine could not be rewritten (--on-unrewritable skip)
	SkipLongData          byte = 8  // long data past the capture's size limit
	SkipTrxFailed         byte = 9  // its transaction had failed for good on the target (run format 2)
	SkipCaptureRolledBack byte = 10 // the capture's server rolled it back (deadlock, lock wait timeout): not sent (run format 2)
	SkipInterrupted       byte = 11 // the replay was stopped (Ctrl-C, a signal) before it had an answer: none to compare (run format 2)
	// SkipKill: a KILL naming a connection replay cannot map to one of its
	// own on the target (not in the capture, not connected yet, or KILL
	// USER / QUERY ID): never sent, since on the target that id is some
	// other connection (run format 3).
	SkipKill byte = 12
	// SkipGlobalSet: a SET GLOBAL (or PERSIST) the capture holds, not run
	// unless replay.Config.RunGlobalSets: it would change the target
	// server's settings for everyone on it (run format 4).
	SkipGlobalSet byte = 13
	skipMax       byte = 13
)

// SkipReasonText names a skip reason for reports.
func SkipReasonText(r byte) string {
	switch r {
	case SkipNotReplayable:
		return "not replayable (LOAD DATA LOCAL)"
	case SkipMasked:
		return "secrets masked in the capture"
	case SkipTruncated:
		return "truncated in the capture"
	case SkipUnknownStatement:
		return "statement prepared before the capture began"
	case SkipKind:
		return "command not replayed"
	case SkipTargetFailed:
		return "target had failed"
	case SkipUnrewritable:
		return "engine could not be rewritten"
	case SkipLongData:
		return "long data truncated in the capture"
	case SkipTrxFailed:
		return "its transaction had failed for good"
	case SkipCaptureRolledBack:
		return "rolled back in the capture (deadlock, lock wait timeout)"
	case SkipInterrupted:
		return "not run to its end: the replay was stopped"
	case SkipGlobalSet:
		return "server-wide SET not run (--run-global-sets runs it)"
	case SkipKill:
		return "KILL of a connection not replayed on the target"
	}
	return fmt.Sprintf("reason %d", r)
}

// Client error causes (Outcome.Cause): what happened when the error is the
// replayer's own. Part of the run format.
const (
	CauseTimeout   byte = 1 // the target did not answer within --target-timeout
	CauseRefused   byte = 2 // the connection was refused (or could not be made)
	CauseReset     byte = 3 // the connection was reset or closed by the target
	CauseProtocol  byte = 4 // the target's answer could not be read (malformed)
	CauseCancelled byte = 5 // the replay was stopped
	CauseTooMany   byte = 6 // the target refused the connection: too many connections
	causeMax       byte = 6
)

// CauseText names a client error cause for reports.
func CauseText(c byte) string {
	switch c {
	case CauseTimeout:
		return "timeout"
	case CauseRefused:
		return "connection refused"
	case CauseReset:
		return "connection reset"
	case CauseProtocol:
		return "protocol error"
	case CauseCancelled:
		return "cancelled"
	case CauseTooMany:
		return "too many connections"
	}
	return fmt.Sprintf("cause %d", c)
}

// Outcome is what one record did on one target.
type Outcome struct {
	// Seq is the record's sequence in the capture, with the pass over the
	// capture (--loop) in its top 24 bits (OutcomeSeq); it is the key, not
	// part of the value.
	Seq     uint64
	Session uint64
	Flags   uint32
	Service time.Duration // send to last packet
	Lag     time.Duration // intended send instant to last packet (paced replays)
	ErrCode uint16
	// Results is how many results the response held (a CALL or a
	// multi-statement text has several).
	Results  uint16
	Affected uint64
	InsertID uint64
	Warnings uint16
	Rows     uint64
	Columns  uint32
	// Ordered and Unordered are the row checksums (wire.RowSums).
	Ordered, Unordered uint64
	// Cause is set with OutcomeClientError; SkipReason with OutcomeSkipped.
	Cause, SkipReason byte
}

// OutcomeSeq is the outcome key of record seq in pass loop.
func OutcomeSeq(seq uint64, loop int) uint64 { return uint64(loop)<<40 | seq }

// SplitOutcomeSeq is OutcomeSeq's inverse.
func SplitOutcomeSeq(key uint64) (seq uint64, loop int) { return key & (1<<40 - 1), int(key >> 40) }

const outcomeVersion = 1

// AppendOutcome encodes o (without Seq, which is in the key).
func AppendOutcome(b []byte, o *Outcome) []byte {
	b = append(b, outcomeVersion)
	b = binary.AppendUvarint(b, uint64(o.Flags))
	for _, v := range []uint64{o.Session, uint64(max(o.Service, 0)), uint64(max(o.Lag, 0)), uint64(o.ErrCode), uint64(o.Results),
		o.Affected, o.InsertID, uint64(o.Warnings), o.Rows, uint64(o.Columns)} {
		b = binary.AppendUvarint(b, v)
	}
	b = binary.LittleEndian.AppendUint64(b, o.Ordered)
	b = binary.LittleEndian.AppendUint64(b, o.Unordered)
	if o.Flags&OutcomeClientError != 0 {
		b = append(b, o.Cause)
	}
	if o.Flags&OutcomeSkipped != 0 {
		b = append(b, o.SkipReason)
	}
	return b
}

// DecodeOutcome decodes a value of AppendOutcome; o.Seq is left as it is.
// An error wraps ErrCorrupt.
func DecodeOutcome(b []byte, o *Outcome) error {
	d := decoder{b: b}
	if v := d.byte(); d.err == nil && v != outcomeVersion {
		if v > outcomeVersion {
			return fmt.Errorf("%w: outcome version %d is newer than this tandem reads (%d); upgrade tandem", ErrNewerFormat, v, outcomeVersion)
		}
		return fmt.Errorf("%w: outcome version %d", ErrCorrupt, v)
	}
	seq := o.Seq
	*o = Outcome{Seq: seq}
	o.Flags = uint32(d.uvarintMax(outcomeFlagsMax, "outcome flags"))
	o.Session = d.uvarint()
	o.Service = time.Duration(d.uvarintMax(math.MaxInt64, "service time"))
	o.Lag = time.Duration(d.uvarintMax(math.MaxInt64, "lag"))
	o.ErrCode = uint16(d.uvarintMax(math.MaxUint16, "error code"))
	o.Results = uint16(d.uvarintMax(math.MaxUint16, "results"))
	o.Affected, o.InsertID = d.uvarint(), d.uvarint()
	o.Warnings = uint16(d.uvarintMax(math.MaxUint16, "warnings"))
	o.Rows = d.uvarint()
	o.Columns = uint32(d.uvarintMax(math.MaxUint32, "columns"))
	if s := d.fixed(16); s != nil {
		o.Ordered, o.Unordered = binary.LittleEndian.Uint64(s), binary.LittleEndian.Uint64(s[8:])
	}
	if o.Flags&OutcomeClientError != 0 {
		if o.Cause = d.byte(); d.err == nil && (o.Cause == 0 || o.Cause > causeMax) {
			d.fail(fmt.Errorf("unknown cause %d", o.Cause))
		}
	}
	if o.Flags&OutcomeSkipped != 0 {
		if o.SkipReason = d.byte(); d.err == nil && (o.SkipReason == 0 || o.SkipReason > skipMax) {
			d.fail(fmt.Errorf("unknown skip reason %d", o.SkipReason))
		}
	}
	if d.err == nil && d.pos != len(b) {
		d.fail(errors.New("trailing bytes"))
	}
	if d.err != nil {
		return fmt.Errorf("%w: outcome: %v", ErrCorrupt, d.err)
	}
	return nil
}

const histVersion = 1

// AppendHistogram encodes h: its exact sum, min and max, and its non-empty
// buckets (latency's bucket indexes).
func AppendHistogram(b []byte, h *latency.Histogram) []byte {
	b = append(b, histVersion)
	b = binary.AppendUvarint(b, h.Count())
	b = binary.AppendUvarint(b, h.Sum())
	b = binary.AppendUvarint(b, uint64(h.Min()))
	b = binary.AppendUvarint(b, uint64(h.Max()))
	n := 0
	h.Buckets(func(int, uint64) bool { n++; return true })
	b = binary.AppendUvarint(b, uint64(n))
	prev := -1
	h.Buckets(func(i int, c uint64) bool {
		b = binary.AppendUvarint(b, uint64(i-prev-1))
		b = binary.AppendUvarint(b, c)
		prev = i
		return true
	})
	return b
}

// DecodeHistogram decodes a value of AppendHistogram into h. An error
// wraps ErrCorrupt.
func DecodeHistogram(b []byte, h *latency.Histogram) error {
	d := decoder{b: b}
	n, err := decodeHistogram(&d, h)
	if err == nil && d.pos != len(b) {
		err = fmt.Errorf("%w: histogram: %d trailing bytes", ErrCorrupt, len(b)-d.pos)
	}
	_ = n
	return err
}

func decodeHistogram(d *decoder, h *latency.Histogram) (uint64, error) {
	if v := d.byte(); d.err == nil && v != histVersion {
		return 0, fmt.Errorf("%w: histogram version %d", ErrCorrupt, v)
	}
	count := d.uvarint()
	sum := d.uvarint()
	minV := d.uvarintMax(math.MaxInt64, "histogram min")
	maxV := d.uvarintMax(math.MaxInt64, "histogram max")
	n := d.uvarintMax(uint64(latency.MaxIndex+1), "histogram buckets")
	if d.err == nil && n > uint64(len(d.b)-d.pos)/2 {
		d.fail(errTruncated)
	}
	if d.err != nil {
		return 0, fmt.Errorf("%w: histogram: %v", ErrCorrupt, d.err)
	}
	var total uint64
	ok := h.Restore(sum, int64(minV), int64(maxV), func(yield func(int, uint64) bool) {
		prev := -1
		for range n {
			delta := d.uvarintMax(uint64(latency.MaxIndex), "bucket delta")
			c := d.uvarint()
			if d.err != nil {
				return
			}
			prev += int(delta) + 1
			total += c
			if !yield(prev, c) {
				return
			}
		}
	})
	if d.err != nil {
		return 0, fmt.Errorf("%w: histogram: %v", ErrCorrupt, d.err)
	}
	if !ok || total != count {
		return 0, fmt.Errorf("%w: histogram: buckets hold %d values, header says %d, or bounds disagree", ErrCorrupt, total, count)
	}
	return count, nil
}

// Interval is what one target did in one interval of a run: sysbench's
// --report-interval line, with the interval's latency histogram.
type Interval struct {
	// Start is the interval's start, from the run's start; Length its length.
	Start, Length time.Duration
	Transactions  uint64
	Reads         uint64
	Writes        uint64
	Other         uint64
	Errors        uint64
	Deadlocks     uint64
	Retries       uint64
	// Threads is how many connections were replaying at the interval's end.
	Threads uint64
	Latency latency.Histogram
}

const intervalVersion = 1

// AppendInterval encodes iv.
func AppendInterval(b []byte, iv *Interval) []byte {
	b = append(b, intervalVersion)
	b = binary.AppendUvarint(b, uint64(max(iv.Start, 0)))
	b = binary.AppendUvarint(b, uint64(max(iv.Length, 0)))
	for _, v := range []uint64{iv.Transactions, iv.Reads, iv.Writes, iv.Other, iv.Errors, iv.Deadlocks, iv.Retries, iv.Threads} {
		b = binary.AppendUvarint(b, v)
	}
	return AppendHistogram(b, &iv.Latency)
}

// DecodeInterval decodes a value of AppendInterval into iv.
func DecodeInterval(b []byte, iv *Interval) error {
	d := decoder{b: b}
	if v := d.byte(); d.err == nil && v != intervalVersion {
		return fmt.Errorf("%w: interval version %d", ErrCorrupt, v)
	}
	iv.Start = time.Duration(d.uvarintMax(math.MaxInt64, "interval start"))
	iv.Length = time.Duration(d.uvarintMax(math.MaxInt64, "interval length"))
	for _, p := range []*uint64{&iv.Transactions, &iv.Reads, &iv.Writes, &iv.Other, &iv.Errors, &iv.Deadlocks, &iv.Retries, &iv.Threads} {
		*p = d.uvarint()
	}
	if d.err != nil {
		return fmt.Errorf("%w: interval: %v", ErrCorrupt, d.err)
	}
	if _, err := decodeHistogram(&d, &iv.Latency); err != nil {
		return err
	}
	if d.pos != len(b) {
		return fmt.Errorf("%w: interval: %d trailing bytes", ErrCorrupt, len(b)-d.pos)
	}
	return nil
}
