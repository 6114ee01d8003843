package conn

import (
	"encoding/binary"
	"net"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/tandemdb/tandem/wire"
)

// MariaDB's extended capabilities are asked for in the last four bytes of
// the handshake response's filler, which a server reads only from a client
// that clears CLIENT_MYSQL (CLIENT_LONG_PASSWORD's bit, as MariaDB's own
// clients do). go-mysql's client writes MySQL's response with a blank
// filler, so extLogin patches it on its way out, asking for what the
// greeting of a MariaDB server offers of:
//   - MARIADB_CLIENT_STMT_BULK_OPERATIONS, always: bulk execute
//     (COM_STMT_BULK_EXECUTE) needs it, and it changes no other answer;
//   - MARIADB_CLIENT_CACHE_METADATA, when Config.CacheMetadata asks: the
//     server then skips a prepared statement's column definitions on the
//     executes that would repeat them, as it did for the captured client
//     that asked for it (MariaDB Connector/C, /J, sysbench on libmariadb).
//
// Under TLS the patched packet is the SSLRequest, which the server takes
// the capabilities from.
type extLogin struct {
	net.Conn
	want     uint64 // extended capabilities to ask for, if offered
	greeting []byte
	seen     bool   // the greeting was read
	offered  uint64 // of want, what the greeting offers (MariaDB only)
	asked    uint64 // what the login asked for
	written  bool   // the first packet after the greeting went out
}

func (b *extLogin) Read(p []byte) (int, error) {
	n, err := b.Conn.Read(p)
	if !b.seen && n > 0 {
		b.greeting = append(b.greeting, p[:n]...)
		if len(b.greeting) >= 4 {
			size := int(b.greeting[0]) | int(b.greeting[1])<<8 | int(b.greeting[2])<<16
			if len(b.greeting) >= 4+size {
				b.seen = true
				g, perr := wire.ParseGreeting(b.greeting[4 : 4+size])
				if perr == nil && g.Caps&uint64(mysql.CLIENT_LONG_PASSWORD) == 0 {
					b.offered = g.Caps & b.want
				}
				b.greeting = nil
			}
		}
	}
	return n, err
}

func (b *extLogin) Write(p []byte) (int, error) {
	if b.seen && !b.written {
		b.written = true
		// The handshake response or SSLRequest: header, capabilities (4),
		// max packet (4), collation (1), filler (23).
		if b.offered != 0 && len(p) >= 4+32 && p[3] == 1 {
			q := append([]byte(nil), p...)
			caps := binary.LittleEndian.Uint32(q[4:])
			binary.LittleEndian.PutUint32(q[4:], caps&^mysql.CLIENT_LONG_PASSWORD)
			binary.LittleEndian.PutUint32(q[4+28:], binary.LittleEndian.Uint32(q[4+28:])|uint32(b.offered>>32))
			b.asked = b.offered
			return b.Conn.Write(q)
		}
	}
	return b.Conn.Write(p)
}

// NetConn is the connection beneath (for TLS state and the socket).
func (b *extLogin) NetConn() net.Conn { return b.Conn }
