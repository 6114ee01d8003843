// Package wire is the MySQL client/server protocol as pure functions over
// bytes: each ParseX takes a packet payload and returns a struct or an error
// wrapping ErrMalformed; each struct has an Append method that encodes it
// back. Nothing here does I/O except packetio.go, which frames packets on a
// connection (headers, sequence ids, multi-packet payloads, byte counters).
//
// Protocol constants (capabilities, commands, status flags, field types)
// come from github.com/go-mysql-org/go-mysql/mysql; MariaDB's extended
// capabilities, which that package lacks, are defined here.
package wire

import "errors"

// ErrMalformed is wrapped by every parse error.
var ErrMalformed = errors.New("wire: malformed packet")

// MariaDB extended capabilities: the upper 32 bits of a 64-bit capability
// set, carried in the greeting's and handshake response's reserved bytes
// when the client-mysql bit (CLIENT_LONG_PASSWORD) is clear.
const (
	MariaDBClientProgress         uint64 = 1 << 32
	MariaDBClientComMulti         uint64 = 1 << 33
	MariaDBClientStmtBulkOps      uint64 = 1 << 34
	MariaDBClientExtendedMetadata uint64 = 1 << 35
	MariaDBClientCacheMetadata    uint64 = 1 << 36
	MariaDBClientBulkUnitResults  uint64 = 1 << 37
	clientMySQL                   uint32 = 1 // CLIENT_LONG_PASSWORD; clear in MariaDB's greeting
)

// MaxPayload is the largest payload of one packet; a payload of exactly this
// size is continued by the next packet.
const MaxPayload = 1<<24 - 1
