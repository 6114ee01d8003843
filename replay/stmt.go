package replay

import (
	"encoding/binary"
	"fmt"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/tandemdb/tandem/capture"
	"github.com/tandemdb/tandem/store"
	"github.com/tandemdb/tandem/wire"
)

// Prepared statements run on the project's wire codec rather than
// go-mysql's client: an execute sends the captured parameters with their
// captured types, as the client sent them (go-mysql binds Go values, so a
// DATETIME went out as a string), and its response is folded into the
// outcome as it arrives, every result set of a CALL included, with no
// result objects built. The connection is go-mysql's (handshake,
// authentication, text queries); each command's response is read to its
// end by whichever side sent the command, so neither buffers the other's
// bytes.

// stmt is a statement prepared on a worker's connection.
type stmt struct {
	id      uint32
	params  int
	columns int
}

// serverError is an ERR packet as an error that outcome() classifies by
// its code.
func serverError(p []byte) error {
	e, err := wire.ParseErr(p)
	if err != nil {
		return err
	}
	return &mysql.MyError{Code: e.Code, State: e.State, Message: e.Message}
}

// prepare sends COM_STMT_PREPARE and reads its definitions to their end.
func (w *worker) prepare(sql string) (*stmt, error) {
	w.buf = append(append(w.buf[:0], mysql.COM_STMT_PREPARE), sql...)
	if err := w.send(); err != nil {
		return nil, err
	}
	p, err := w.readPacket()
	if err != nil {
		return nil, err
	}
	if len(p) > 0 && p[0] == wire.HeaderErr {
		return nil, serverError(p)
	}
	ok, err := wire.ParsePrepareOK(p)
	if err != nil {
		return nil, err
	}
	// Parameter definitions, then column definitions, each block followed
	// by an EOF (go-mysql does not ask for CLIENT_DEPRECATE_EOF).
	for _, n := range []uint16{ok.Params, ok.Columns} {
		if n == 0 {
			continue
		}
		if err := w.skip(int(n) + 1); err != nil {
			return nil, err
		}
	}
	return &stmt{id: ok.StmtID, params: int(ok.Params), columns: int(ok.Columns)}, nil
}

// closeStmt sends COM_STMT_CLOSE, which has no response.
func (w *worker) closeStmt(st *stmt) {
	w.buf = binary.LittleEndian.AppendUint32(append(w.buf[:0], mysql.COM_STMT_CLOSE), st.id)
	w.send()
}

// execute runs st with the captured parameters and folds the response into
// o: rows, checksums, columns, and the final OK or EOF's affected rows,
// insert id and warnings.
func (w *worker) execute(st *stmt, ps []store.Value, o *store.Outcome) error {
	if len(ps) != st.params {
		// What the server answers to an execute with the wrong count; not
		// sent, since the packet could not be framed for it.
		return &mysql.MyError{Code: mysql.ER_WRONG_ARGUMENTS, State: "HY000",
			Message: fmt.Sprintf("the capture has %d parameters for a statement that takes %d", len(ps), st.params)}
	}
	w.buf = appendExecute(w.buf[:0], st.id, ps, &w.params)
	if err := w.send(); err != nil {
		return err
	}
	return w.readResults(o)
}

// send writes w.buf as a command (sequence 0).
func (w *worker) send() error {
	if _, err := w.wc.WritePacket(0, w.buf); err != nil {
		return err
	}
	return w.wc.Flush()
}

// readPacket reads one payload; a payload of MaxPayload bytes or more
// spans frames, which are joined (a row that large is rare: joining
// allocates). Valid until the next read.
func (w *worker) readPacket() ([]byte, error) {
	_, p, err := w.wc.ReadFrame()
	if err != nil || len(p) < wire.MaxPayload {
		return p, err
	}
	big := append([]byte(nil), p...)
	for {
		_, p, err := w.wc.ReadFrame()
		if err != nil {
			return nil, err
		}
		big = append(big, p...)
		if len(p) < wire.MaxPayload {
			return big, nil
		}
	}
}

// skip reads n packets (definitions and their EOF).
func (w *worker) skip(n int) error {
	for range n {
		if _, err := w.readPacket(); err != nil {
			return err
		}
	}
	return nil
}

// readResults reads a binary-protocol response to its end.
func (w *worker) readResults(o *store.Outcome) error {
	var sums capture.RowSums
	var rows uint64
	results, sets := 0, 0
	for {
		p, err := w.readPacket()
		if err != nil {
			return err
		}
		if len(p) == 0 {
			return fmt.Errorf("replay: empty response packet")
		}
		results++
		var status uint16
		switch p[0] {
		case wire.HeaderErr:
			return serverError(p) // ends the response, even after result sets
		case wire.HeaderOK:
			ok, err := wire.ParseOK(p, uint64(mysql.CLIENT_PROTOCOL_41|mysql.CLIENT_TRANSACTIONS))
			if err != nil {
				return err
			}
			o.Affected, o.InsertID, o.Warnings, status = ok.AffectedRows, ok.InsertID, ok.Warnings, ok.Status
		default:
			n, _, err := wire.ParseColumnCount(p, false)
			if err != nil {
				return err
			}
			sets++
			o.Columns = uint32(n)
			if err := w.skip(int(n) + 1); err != nil { // definitions, EOF
				return err
			}
			for {
				p, err := w.readPacket()
				if err != nil {
					return err
				}
				if wire.IsResultEnd(p, false) {
					eof, err := wire.ParseEOF(p)
					if err != nil {
						return err
					}
					o.Affected, o.InsertID, o.Warnings, status = 0, 0, eof.Warnings, eof.Status
					break
				}
				if len(p) > 0 && p[0] == wire.HeaderErr {
					return serverError(p) // the statement failed while sending rows
				}
				sums.AddRow(p)
				rows++
			}
		}
		if status&mysql.SERVER_MORE_RESULTS_EXISTS == 0 {
			break
		}
	}
	// One result set: its rows and columns. Several (a CALL): the rows of
	// all, as multi-statement queries count them.
	if sets > 0 && (results == 1 || rows > 0) {
		o.Flags |= store.OutcomeRows
	}
	if results > 1 {
		o.Columns = 0
	}
	o.Rows, o.Ordered, o.Unordered = rows, sums.Ordered, sums.Unordered
	return nil
}

// appendExecute encodes COM_STMT_EXECUTE with the parameters' captured
// types and values (types bound with every execute); params is scratch.
func appendExecute(b []byte, id uint32, ps []store.Value, params *[]wire.Param) []byte {
	*params = capture.WireParams((*params)[:0], ps)
	e := wire.Execute{StmtID: id, Iterations: 1, NewParamsBound: true, Params: *params}
	return e.Append(b)
}
