package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// ErrUnknownParamTypes: an execute did not bind parameter types and none
// were bound before (the statement was prepared before we saw the session).
var ErrUnknownParamTypes = errors.New("wire: execute without parameter types")

// ParamType is a parameter's type as COM_STMT_EXECUTE binds it.
type ParamType struct {
	Type byte
	Flag byte // 0x80: unsigned
}

// Unsigned reports the unsigned flag.
func (t ParamType) Unsigned() bool { return t.Flag&0x80 != 0 }

// Param is one parameter value of an execute.
type Param struct {
	ParamType
	Null bool
	// LongData: the value was sent with COM_STMT_SEND_LONG_DATA, not here.
	LongData bool
	Int      int64 // integer types; unsigned ones as their bits
	Float    float64
	// Bytes: strings, decimals, blobs and the like; the temporal types'
	// binary form without its length byte.
	Bytes []byte
}

// Execute is COM_STMT_EXECUTE.
type Execute struct {
	StmtID         uint32
	CursorType     byte
	Iterations     uint32
	NewParamsBound bool
	// Types are the parameter types in force: sent with this execute when
	// NewParamsBound, else those of an earlier execute.
	Types  []ParamType
	Params []Param
}

// ParseExecute parses COM_STMT_EXECUTE (command byte included) for a
// statement with numParams parameters. prev are the types bound by an
// earlier execute of the statement (nil if none); longData reports the
// parameters whose value came through COM_STMT_SEND_LONG_DATA (nil: none).
// With ErrUnknownParamTypes it returns the command without its values.
func ParseExecute(b []byte, numParams int, prev []ParamType, longData func(int) bool) (*Execute, error) {
	e := &Execute{}
	err := e.Parse(b, numParams, prev, longData)
	if err != nil && !errors.Is(err, ErrUnknownParamTypes) {
		return nil, err
	}
	return e, err
}

// Parse is ParseExecute into e, whose room for parameters it reuses (a
// capturing proxy parses one execute per statement). Types sent with the
// command are always new (a caller keeps them for the statement's later
// executes); values alias b.
func (e *Execute) Parse(b []byte, numParams int, prev []ParamType, longData func(int) bool) error {
	params := e.Params[:0]
	*e = Execute{}
	r := reader{b: b}
	if r.u8() != mysql.COM_STMT_EXECUTE {
		r.pos = 0
		r.fail("not COM_STMT_EXECUTE")
		return r.err
	}
	e.StmtID, e.CursorType, e.Iterations = r.u32(), r.u8(), r.u32()
	if r.err != nil || numParams == 0 {
		if r.err == nil && r.left() > 0 {
			r.fail("trailing bytes")
		}
		return r.err
	}
	nulls := r.bytes((numParams + 7) / 8)
	e.NewParamsBound = r.u8() == 1
	if r.err != nil {
		return r.err
	}
	if e.Types = readTypes(&r, e.NewParamsBound, numParams, prev); e.Types == nil {
		return ErrUnknownParamTypes
	}
	if cap(params) < numParams {
		params = make([]Param, numParams)
	}
	e.Params = params[:numParams]
	clear(e.Params)
	for i := 0; i < numParams && r.err == nil; i++ {
		p := &e.Params[i]
		p.ParamType = e.Types[i]
		switch {
		case nulls[i/8]&(1<<(i%8)) != 0:
			p.Null = true
		case longData != nil && longData(i):
			p.LongData = true
		default:
			readParam(&r, p)
		}
	}
	if r.err == nil && r.left() > 0 {
		r.fail("trailing bytes")
	}
	return r.err
}

// readTypes reads numParams parameter types when sent says the command
// carries them, else returns prev (those bound before), or nil when prev
// is not numParams types: the values cannot be read.
func readTypes(r *reader, sent bool, numParams int, prev []ParamType) []ParamType {
	if !sent {
		if len(prev) != numParams {
			return nil
		}
		return prev
	}
	types := make([]ParamType, numParams)
	for i := range types {
		types[i] = ParamType{Type: r.u8(), Flag: r.u8()}
	}
	return types
}

func readParam(r *reader, p *Param) {
	switch p.Type {
	case mysql.MYSQL_TYPE_NULL:
		p.Null = true
	case mysql.MYSQL_TYPE_TINY:
		v := r.u8()
		if p.Unsigned() {
			p.Int = int64(v)
		} else {
			p.Int = int64(int8(v))
		}
	case mysql.MYSQL_TYPE_SHORT, mysql.MYSQL_TYPE_YEAR:
		v := r.u16()
		if p.Unsigned() {
			p.Int = int64(v)
		} else {
			p.Int = int64(int16(v))
		}
	case mysql.MYSQL_TYPE_LONG, mysql.MYSQL_TYPE_INT24:
		v := r.u32()
		if p.Unsigned() {
			p.Int = int64(v)
		} else {
			p.Int = int64(int32(v))
		}
	case mysql.MYSQL_TYPE_LONGLONG:
		p.Int = int64(r.u64())
	case mysql.MYSQL_TYPE_FLOAT:
		p.Float = float64(math.Float32frombits(r.u32()))
	case mysql.MYSQL_TYPE_DOUBLE:
		p.Float = math.Float64frombits(r.u64())
	case mysql.MYSQL_TYPE_DATE, mysql.MYSQL_TYPE_DATETIME, mysql.MYSQL_TYPE_TIMESTAMP, mysql.MYSQL_TYPE_TIME:
		n := int(r.u8())
		if r.err == nil && n > 12 {
			r.fail(fmt.Sprintf("temporal value of %d bytes", n))
			return
		}
		p.Bytes = clone(r.bytes(n))
		if p.Bytes == nil && r.err == nil {
			p.Bytes = []byte{}
		}
	default:
		p.Bytes = clone(r.lenencBytes())
		if p.Bytes == nil && r.err == nil {
			p.Bytes = []byte{}
		}
	}
}

// Append encodes the execute. Types are sent when NewParamsBound.
func (e *Execute) Append(b []byte) []byte {
	b = append(b, mysql.COM_STMT_EXECUTE)
	b = binary.LittleEndian.AppendUint32(b, e.StmtID)
	b = append(b, e.CursorType)
	b = binary.LittleEndian.AppendUint32(b, e.Iterations)
	n := len(e.Params)
	if n == 0 {
		return b
	}
	at := len(b) // the NULL bitmap, written in place
	b = append(b, make([]byte, (n+7)/8)...)
	for i, p := range e.Params {
		if p.Null {
			b[at+i/8] |= 1 << (i % 8)
		}
	}
	if e.NewParamsBound {
		b = append(b, 1)
		for _, p := range e.Params {
			b = append(b, p.Type, p.Flag)
		}
	} else {
		b = append(b, 0)
	}
	for _, p := range e.Params {
		if p.Null || p.LongData {
			continue
		}
		b = appendParam(b, &p)
	}
	return b
}

func appendParam(b []byte, p *Param) []byte {
	switch p.Type {
	case mysql.MYSQL_TYPE_NULL:
		return b
	case mysql.MYSQL_TYPE_TINY:
		return append(b, byte(p.Int))
	case mysql.MYSQL_TYPE_SHORT, mysql.MYSQL_TYPE_YEAR:
		return binary.LittleEndian.AppendUint16(b, uint16(p.Int))
	case mysql.MYSQL_TYPE_LONG, mysql.MYSQL_TYPE_INT24:
		return binary.LittleEndian.AppendUint32(b, uint32(p.Int))
	case mysql.MYSQL_TYPE_LONGLONG:
		return binary.LittleEndian.AppendUint64(b, uint64(p.Int))
	case mysql.MYSQL_TYPE_FLOAT:
		return binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(p.Float)))
	case mysql.MYSQL_TYPE_DOUBLE:
		return binary.LittleEndian.AppendUint64(b, math.Float64bits(p.Float))
	case mysql.MYSQL_TYPE_DATE, mysql.MYSQL_TYPE_DATETIME, mysql.MYSQL_TYPE_TIMESTAMP, mysql.MYSQL_TYPE_TIME:
		return append(append(b, byte(len(p.Bytes))), p.Bytes...)
	}
	return AppendLenencBytes(b, p.Bytes)
}

// LongData is COM_STMT_SEND_LONG_DATA.
type LongData struct {
	StmtID uint32
	Param  uint16
	Data   []byte
}

// ParseLongData parses COM_STMT_SEND_LONG_DATA (command byte included).
func ParseLongData(b []byte) (*LongData, error) {
	r := reader{b: b}
	if r.u8() != mysql.COM_STMT_SEND_LONG_DATA {
		r.pos = 0
		r.fail("not COM_STMT_SEND_LONG_DATA")
		return nil, r.err
	}
	l := &LongData{StmtID: r.u32(), Param: r.u16()}
	l.Data = clone(r.rest())
	if r.err != nil {
		return nil, r.err
	}
	return l, nil
}

// Append encodes the command.
func (l *LongData) Append(b []byte) []byte {
	b = append(b, mysql.COM_STMT_SEND_LONG_DATA)
	b = binary.LittleEndian.AppendUint32(b, l.StmtID)
	b = binary.LittleEndian.AppendUint16(b, l.Param)
	return append(b, l.Data...)
}

// StmtCommand is COM_STMT_CLOSE, COM_STMT_RESET or COM_STMT_FETCH: a
// command byte, a statement id and, for fetch, a row count.
type StmtCommand struct {
	Command byte
	StmtID  uint32
	Rows    uint32 // COM_STMT_FETCH only
}

// ParseStmtCommand parses COM_STMT_CLOSE, COM_STMT_RESET or COM_STMT_FETCH.
func ParseStmtCommand(b []byte) (*StmtCommand, error) {
	r := reader{b: b}
	c := &StmtCommand{Command: r.u8()}
	switch c.Command {
	case mysql.COM_STMT_CLOSE, mysql.COM_STMT_RESET, mysql.COM_STMT_FETCH:
	default:
		r.pos = 0
		r.fail("not a statement command")
		return nil, r.err
	}
	c.StmtID = r.u32()
	if c.Command == mysql.COM_STMT_FETCH {
		c.Rows = r.u32()
	}
	if r.err == nil && r.left() > 0 {
		r.fail("trailing bytes")
	}
	if r.err != nil {
		return nil, r.err
	}
	return c, nil
}

// Append encodes the command.
func (c *StmtCommand) Append(b []byte) []byte {
	b = append(b, c.Command)
	b = binary.LittleEndian.AppendUint32(b, c.StmtID)
	if c.Command == mysql.COM_STMT_FETCH {
		b = binary.LittleEndian.AppendUint32(b, c.Rows)
	}
	return b
}

// ParseColumnCount parses the first packet of a result set. With
// MariaDB's MARIADB_CLIENT_CACHE_METADATA negotiated (cacheMetadata), a
// byte follows the count: 1 when column definitions follow, 0 when the
// server skips them because the client has them already (an execute of a
// statement whose metadata did not change). Without it, definitions always
// follow.
func ParseColumnCount(b []byte, cacheMetadata bool) (n uint64, metadata bool, err error) {
	r := reader{b: b}
	n, null := r.lenenc()
	if null {
		r.fail("NULL column count")
	}
	metadata = true
	if cacheMetadata && r.err == nil {
		switch r.u8() {
		case 0:
			metadata = false
		case 1:
		default:
			r.pos--
			r.fail("metadata-follows byte not 0 or 1")
		}
	}
	if r.err == nil && r.left() > 0 {
		r.fail("trailing bytes")
	}
	return n, metadata, r.err
}
