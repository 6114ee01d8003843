package wire

import "github.com/cespare/xxhash/v2"

// RowSums accumulates the two checksums of a result's rows, from each row's
// 64-bit hash (xxhash of the row packet's payload): Ordered depends on the
// rows' order, Unordered does not (a multiset). The capture and replay use
// the same definition, so their checksums compare for the same protocol.
type RowSums struct {
	Ordered, Unordered uint64
}

// Add folds in one row's hash.
func (s *RowSums) Add(rowHash uint64) {
	s.Ordered = (s.Ordered ^ rowHash) * 0x100000001b3
	s.Unordered += rowHash
}

// AddRow folds in one whole row packet's payload. (The proxy, which sees a
// row of 16 MiB or more in frames, hashes them as they pass and calls Add.)
func (s *RowSums) AddRow(payload []byte) { s.Add(xxhash.Sum64(payload)) }
