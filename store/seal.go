package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// ErrAlreadyClosed: Seal was given a capture that was closed cleanly.
var ErrAlreadyClosed = errors.New("store: capture already closed")

// Seal closes a capture its writer did not close (it was killed, the
// machine went down, or the writer failed): it reads every record —
// each block's checksum checked — and writes the summary a clean Close
// would have, saying that it was sealed, why, and which records are lost.
// The capture can then be packed. A capture with a damaged file is
// refused (the error names the file), as is one already closed or still
// open for writing. An encrypted capture needs its key (WithKey).
func Seal(dir string, opts ...Option) (Summary, error) {
	key, err := storeKey(dir, optionsOf(opts).key)
	if err != nil {
		return Summary{}, err
	}
	r, err := Open(dir, opts...)
	if err != nil {
		return Summary{}, err
	}
	if _, closed := r.Summary(); closed {
		r.Close()
		return Summary{}, fmt.Errorf("%w: %s was closed cleanly: there is nothing to seal", ErrAlreadyClosed, dir)
	}
	sum := Summary{Sealed: "its writer did not close it (killed, or the machine went down)"}
	if why, at, ok := r.Failure(); ok {
		sum.Sealed = fmt.Sprintf("its writer failed at %s: %s", at.Format(time.RFC3339), why)
	}
	var gaps SeqGaps
	sessions := map[uint64]bool{}
	for rec, err := range r.Records() {
		if err != nil {
			r.Close()
			return Summary{}, fmt.Errorf("store: %s cannot be sealed: %w ('tandem inspect --verify' says which records are readable)", dir, err)
		}
		gaps.Note(rec.Seq)
		sessions[rec.Session] = true
		if sum.FirstSeq == 0 {
			sum.FirstSeq = rec.Seq
		}
		sum.LastSeq = rec.Seq
		sum.Records++
	}
	gtids, err := r.GTIDs()
	if err != nil {
		r.Close()
		return Summary{}, fmt.Errorf("store: %s cannot be sealed: %w", dir, err)
	}
	if err := r.Close(); err != nil {
		return Summary{}, err
	}
	sum.Sessions, sum.Commits, sum.Lost = uint64(len(sessions)), uint64(len(gtids)), gaps.String()
	if sum.Records == 0 {
		sum.FirstSeq = 0
	}
	sum.SealedAt = time.Now().UTC()
	sum.ClosedAt = sum.SealedAt

	db, err := pebble.Open(dir, pebbleOptions(false, slog.New(slog.DiscardHandler), key))
	if err != nil {
		return Summary{}, openErr(dir, err)
	}
	b, _ := json.Marshal(sum)
	err = db.Set(keySummary, b, pebble.Sync)
	if err == nil {
		err = db.Flush() // out of the WAL into tables, as Close leaves a capture
	}
	if cerr := safely(db.Close); err == nil {
		err = cerr
	}
	if err != nil {
		return Summary{}, fmt.Errorf("store: sealing %s: %w", dir, err)
	}
	return sum, nil
}
