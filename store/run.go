package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"os"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/tandemdb/tandem/internal/version"
)

// A replay run directory is a Pebble store of its own (a capture is never
// written to). Its keys, part of the format:
//
//	0x00 "header"                  JSON RunMeta (Magic "tandem-run")
//	0x00 "report"                  JSON report written when the run ends (owned by replay)
//	0x01 target:u8 seq:u64be       one statement's Outcome on target number target
//
// Outcome value (outcome format version 1): byte version (1), byte flags
// (bit 0 error, bit 1 has rows, bit 2 nondeterministic, bit 3 skipped,
// bit 4 ORDER BY fixes the row order),
// uvarint session, then uvarints: service ns, lag ns, error code, affected
// rows, insert id, warnings, rows, columns; then u64le ordered and
// unordered row checksums.

const (
	runMagic       = "tandem-run"
	outcomeVersion = 1
)

var keyReport = []byte("\x00report")

// RunMeta describes a replay run. JSON names are part of the format.
type RunMeta struct {
	Magic         string          `json:"magic"`
	FormatVersion int             `json:"format_version"`
	Capture       string          `json:"capture"`
	Started       time.Time       `json:"started"`
	ToolVersion   string          `json:"tool_version"`
	Targets       []RunTargetInfo `json:"targets"`
	Settings      json.RawMessage `json:"settings,omitempty"`
}

// RunTargetInfo is one target of a run (never its password).
type RunTargetInfo struct {
	Name     string `json:"name"`
	Addr     string `json:"addr"`
	Engine   string `json:"engine"`
	Options  string `json:"options,omitempty"`
	Version  string `json:"version"`
	Baseline bool   `json:"baseline"`
}

// Outcome flag bits. Part of the format.
const (
	OutcomeError            = 1 << 0
	OutcomeRows             = 1 << 1
	OutcomeNondeterministic = 1 << 2
	OutcomeSkipped          = 1 << 3
	OutcomeOrdered          = 1 << 4 // ORDER BY fixes the row order
)

// Outcome is what one statement did on one target.
type Outcome struct {
	Seq       uint64
	Session   uint64
	Flags     byte
	Service   time.Duration // send to last packet
	Lag       time.Duration // intended send instant to last packet (paced modes)
	ErrCode   uint16
	Affected  uint64
	InsertID  uint64
	Warnings  uint16
	Rows      uint64
	Columns   uint32
	Ordered   uint64
	Unordered uint64
}

// AppendOutcome encodes o (without Seq, which is in the key).
func AppendOutcome(b []byte, o *Outcome) []byte {
	b = append(b, outcomeVersion, o.Flags)
	for _, v := range []uint64{o.Session, uint64(max(o.Service, 0)), uint64(max(o.Lag, 0)), uint64(o.ErrCode), o.Affected, o.InsertID, uint64(o.Warnings), o.Rows, uint64(o.Columns)} {
		b = binary.AppendUvarint(b, v)
	}
	b = binary.LittleEndian.AppendUint64(b, o.Ordered)
	return binary.LittleEndian.AppendUint64(b, o.Unordered)
}

// DecodeOutcome decodes a value of AppendOutcome; Seq is left as it is.
func DecodeOutcome(b []byte, o *Outcome) error {
	d := decoder{b: b}
	if v := d.byte(); d.err == nil && v != outcomeVersion {
		return fmt.Errorf("%w: outcome version %d", ErrCorrupt, v)
	}
	seq := o.Seq
	*o = Outcome{Seq: seq, Flags: d.byte(), Session: d.uvarint()}
	o.Service = time.Duration(d.uvarintMax(1<<62, "service time"))
	o.Lag = time.Duration(d.uvarintMax(1<<62, "lag"))
	o.ErrCode = uint16(d.uvarintMax(0xffff, "error code"))
	o.Affected, o.InsertID = d.uvarint(), d.uvarint()
	o.Warnings = uint16(d.uvarintMax(0xffff, "warnings"))
	o.Rows = d.uvarint()
	o.Columns = uint32(d.uvarintMax(0xffffffff, "columns"))
	if s := d.fixed(16); s != nil {
		o.Ordered, o.Unordered = binary.LittleEndian.Uint64(s), binary.LittleEndian.Uint64(s[8:])
	}
	if d.err == nil && d.pos != len(b) {
		d.fail(errors.New("trailing bytes"))
	}
	if d.err != nil {
		return fmt.Errorf("%w: outcome: %v", ErrCorrupt, d.err)
	}
	return nil
}

func outcomeKey(dst []byte, target byte, seq uint64) []byte {
	dst = append(dst, prefixRun, target)
	return binary.BigEndian.AppendUint64(dst, seq)
}

// RunStore is an open run directory.
type RunStore struct {
	db  *pebble.DB
	dir string
}

// CreateRun makes a new run directory (it must not exist or be empty).
func CreateRun(dir string, meta RunMeta) (*RunStore, error) {
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return nil, fmt.Errorf("%w: %s is not empty; choose a new directory for the run", ErrExists, dir)
	}
	db, err := pebble.Open(dir, pebbleOptions(false, slog.New(slog.DiscardHandler)))
	if err != nil {
		return nil, openErr(dir, err)
	}
	meta.Magic, meta.FormatVersion, meta.ToolVersion = runMagic, FormatVersion, version.String()
	b, _ := json.Marshal(meta)
	if err := db.Set(keyHeader, b, pebble.Sync); err != nil {
		db.Close()
		return nil, err
	}
	return &RunStore{db: db, dir: dir}, nil
}

// OutcomeBatch collects outcomes of one target for one commit.
type OutcomeBatch struct {
	b      *pebble.Batch
	target byte
	key    []byte
	val    []byte
	n      int
}

// NewOutcomeBatch starts a batch for target number target.
func (r *RunStore) NewOutcomeBatch(target int) *OutcomeBatch {
	return &OutcomeBatch{b: r.db.NewBatch(), target: byte(target)}
}

// Add buffers o.
func (ob *OutcomeBatch) Add(o *Outcome) {
	ob.key = outcomeKey(ob.key[:0], ob.target, o.Seq)
	ob.val = AppendOutcome(ob.val[:0], o)
	ob.b.Set(ob.key, ob.val, nil)
	ob.n++
}

// Len is the number of outcomes buffered.
func (ob *OutcomeBatch) Len() int { return ob.n }

// Commit writes the batch (without fsync: a run can be re-run) and resets it.
func (ob *OutcomeBatch) Commit() error {
	if ob.n == 0 {
		return nil
	}
	err := ob.b.Commit(pebble.NoSync)
	ob.b.Reset()
	ob.n = 0
	return err
}

// Outcomes yields target's outcomes in seq order; the *Outcome is reused.
func (r *RunStore) Outcomes(target int) iter.Seq2[*Outcome, error] {
	return func(yield func(*Outcome, error) bool) {
		it, err := r.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixRun, byte(target)}, UpperBound: []byte{prefixRun, byte(target) + 1}})
		if err != nil {
			yield(nil, err)
			return
		}
		defer it.Close()
		var o Outcome
		for ok := it.First(); ok; ok = it.Next() {
			k := it.Key()
			if len(k) != 10 {
				yield(nil, fmt.Errorf("%w: outcome key of %d bytes", ErrCorrupt, len(k)))
				return
			}
			o.Seq = binary.BigEndian.Uint64(k[2:])
			v, err := it.ValueAndErr()
			if err == nil {
				err = DecodeOutcome(v, &o)
			}
			if err != nil {
				yield(nil, err)
				return
			}
			if !yield(&o, nil) {
				return
			}
		}
		if err := it.Error(); err != nil {
			yield(nil, err)
		}
	}
}

// SetReport stores the run's final report (JSON).
func (r *RunStore) SetReport(b []byte) error { return r.db.Set(keyReport, b, pebble.Sync) }

// Close flushes and closes the run directory.
func (r *RunStore) Close() error {
	err := r.db.Flush()
	return errors.Join(err, r.db.Close())
}
