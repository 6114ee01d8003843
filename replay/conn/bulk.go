package conn

import (
	"context"
	"encoding/binary"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/tandemdb/tandem/store"
)

// BulkExecute sends MariaDB's COM_STMT_BULK_EXECUTE for st with a
// captured bulk execute's data (store.ComStmtBulkExecute: flags, types,
// rows) and reads its answer into r. A server that was not asked for bulk
// execute at login (not MariaDB) cannot run it: that is an error of the
// replay's, said as such, never sent.
func (c *Conn) BulkExecute(ctx context.Context, st *Stmt, data []byte, r *Result) error {
	if !c.Bulk {
		c.prelude = nil // not sent either: it would go out with the next command
		return &ServerError{Code: mysql.ER_UNKNOWN_COM_ERROR, State: "08S01",
			Message: "the target does not offer MariaDB's bulk execute (COM_STMT_BULK_EXECUTE), which the capture ran; it was not sent"}
	}
	stop, err := c.begin(ctx, "bulk execute")
	if err != nil {
		return err
	}
	defer c.end(stop)
	st.bound = nil // it binds types of its own: the next execute sends its
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
