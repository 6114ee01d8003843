package conn

import (
	"context"
	"encoding/binary"
	"net"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/tandemdb/tandem/store"
	"github.com/tandemdb/tandem/wire"
)

// MariaDB's bulk execute (COM_STMT_BULK_EXECUTE) needs the connection to
// have asked for MARIADB_CLIENT_STMT_BULK_OPERATIONS at login: an
// extended capability, in the last four bytes of the handshake response's
// filler, which a server reads only from a client that clears
// CLIENT_MYSQL (CLIENT_LONG_PASSWORD's bit, as MariaDB's own clients do).
// go-mysql's client writes MySQL's response with a blank filler, so
// bulkLogin patches it on its way out, only when the greeting came from a
// MariaDB server that offers bulk execute. Under TLS the patched packet
// is the SSLRequest, which the server takes the capabilities from.
type bulkLogin struct {
	net.Conn
	greeting []byte
	seen     bool // the greeting was read
	offered  bool // by a MariaDB server
	asked    bool // the login asked for it
	written  bool // the first packet after the greeting went out
}

// bulkCaps is the extended capability asked for, shifted to the filler's
// 32 bits.
const bulkCaps = uint32(wire.MariaDBClientStmtBulkOps >> 32)

func (b *bulkLogin) Read(p []byte) (int, error) {
	n, err := b.Conn.Read(p)
	if !b.seen && n > 0 {
		b.greeting = append(b.greeting, p[:n]...)
		if len(b.greeting) >= 4 {
			size := int(b.greeting[0]) | int(b.greeting[1])<<8 | int(b.greeting[2])<<16
			if len(b.greeting) >= 4+size {
				b.seen = true
				g, perr := wire.ParseGreeting(b.greeting[4 : 4+size])
				b.offered = perr == nil && g.Caps&uint64(mysql.CLIENT_LONG_PASSWORD) == 0 && g.Caps&wire.MariaDBClientStmtBulkOps != 0
				b.greeting = nil
			}
		}
	}
	return n, err
}

func (b *bulkLogin) Write(p []byte) (int, error) {
	if b.seen && !b.written {
		b.written = true
		// The handshake response or SSLRequest: header, capabilities (4),
		// max packet (4), collation (1), filler (23).
		if b.offered && len(p) >= 4+32 && p[3] == 1 {
			q := append([]byte(nil), p...)
			caps := binary.LittleEndian.Uint32(q[4:])
			binary.LittleEndian.PutUint32(q[4:], caps&^mysql.CLIENT_LONG_PASSWORD)
			binary.LittleEndian.PutUint32(q[4+28:], binary.LittleEndian.Uint32(q[4+28:])|bulkCaps)
			b.asked = true
			return b.Conn.Write(q)
		}
	}
	return b.Conn.Write(p)
}

// NetConn is the connection beneath (for TLS state and the socket).
func (b *bulkLogin) NetConn() net.Conn { return b.Conn }

// BulkExecute sends MariaDB's COM_STMT_BULK_EXECUTE for st with a
// captured bulk execute's data (store.ComStmtBulkExecute: flags, types,
// rows) and reads its answer into r. A server that was not asked for bulk
// execute at login (not MariaDB) cannot run it: that is an error of the
// replay's, said as such, never sent.
func (c *Conn) BulkExecute(ctx context.Context, st *Stmt, data []byte, r *Result) error {
	if !c.Bulk {
		return &ServerError{Code: mysql.ER_UNKNOWN_COM_ERROR, State: "08S01",
			Message: "the target does not offer MariaDB's bulk execute (COM_STMT_BULK_EXECUTE), which the capture ran; it was not sent"}
	}
	end, err := c.begin(ctx, "bulk execute")
	if err != nil {
		return err
	}
	defer end()
	c.buf = append(c.buf[:0], store.ComStmtBulkExecute)
	c.buf = binary.LittleEndian.AppendUint32(c.buf, st.ID)
	c.buf = append(c.buf, data...)
	if err := c.send(); err != nil {
		return c.fail("bulk execute", err, ctx)
	}
	if err := c.readPrelude(ctx, "bulk execute"); err != nil {
		return err
	}
	return c.readResults(ctx, "bulk execute", true, r)
}
