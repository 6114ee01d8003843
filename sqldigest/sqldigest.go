// Package sqldigest names statements by their shape: literals replaced by
// "?", case and spacing normalized, with the TiDB parser's digester, so a
// text query and the prepared statement it came from share one digest.
package sqldigest

import "github.com/pingcap/tidb/pkg/parser"

// Digest is a statement shape.
type Digest struct {
	// ID is the hex SHA-256 of Text (64 characters).
	ID string
	// Text is the normalized statement.
	Text string
}

// Short is the first 16 characters of ID, enough to tell digests apart in tables.
func (d Digest) Short() string {
	if len(d.ID) > 16 {
		return d.ID[:16]
	}
	return d.ID
}

// Of returns sql's digest.
func Of(sql string) Digest {
	norm, d := parser.NormalizeDigest(sql)
	return Digest{ID: d.String(), Text: norm}
}
