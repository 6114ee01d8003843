package wire

import (
	"encoding/binary"
	"fmt"
)

// MariaDB's COM_STMT_BULK_EXECUTE (MARIADB_CLIENT_STMT_BULK_OPERATIONS):
// one command runs a prepared statement for many rows of parameters.
//
//	0xfa stmt_id:u32 flags:u16
//	[flags&BulkSendTypes: type:u8 flag:u8 per parameter]
//	rows, to the packet's end: per parameter an indicator byte, then the
//	value (binary, as COM_STMT_EXECUTE's) when the indicator is none.
//
// The server answers one OK (affected rows of all rows together) or ERR;
// with BulkSendUnitResults (MARIADB_CLIENT_BULK_UNIT_RESULTS, which the
// proxy does not offer) a result set instead.
const (
	ComStmtBulkExecute byte = 0xfa

	BulkSendUnitResults uint16 = 64
	BulkSendTypes       uint16 = 128
)

// Indicators of a bulk row's parameter.
const (
	BulkNone    byte = 0 // a value follows
	BulkNull    byte = 1
	BulkDefault byte = 2 // the column's default
	BulkIgnore  byte = 3 // the column is left as it is (UPDATE)
)

// BulkExecute is COM_STMT_BULK_EXECUTE, parsed.
type BulkExecute struct {
	StmtID uint32
	Flags  uint16
	// Types are the parameter types: sent with the command when
	// Flags&BulkSendTypes, else those bound before.
	Types []ParamType
	// Rows hold each row's parameters; Indicator[i][j] is row i's
	// parameter j's indicator (BulkNone: the value is in Rows[i][j]).
	Rows      [][]Param
	Indicator [][]byte
}

// ParseBulkExecute parses COM_STMT_BULK_EXECUTE (command byte included)
// for a statement with numParams parameters; prev are the types bound
// before (nil if none).
func ParseBulkExecute(b []byte, numParams int, prev []ParamType) (*BulkExecute, error) {
	r := reader{b: b}
	if r.u8() != ComStmtBulkExecute {
		r.pos = 0
		r.fail("not COM_STMT_BULK_EXECUTE")
		return nil, r.err
	}
	e := &BulkExecute{StmtID: r.u32(), Flags: r.u16()}
	if r.err != nil {
		return nil, r.err
	}
	if numParams == 0 {
		// A bulk execute needs parameters: the server refuses one without.
		if r.left() > 0 {
			r.fail("a bulk execute of a statement without parameters carries data")
			return nil, r.err
		}
		return e, nil
	}
	if e.Types = readTypes(&r, e.Flags&BulkSendTypes != 0, numParams, prev); e.Types == nil {
		return e, ErrUnknownParamTypes
	}
	for r.err == nil && r.left() > 0 {
		row := make([]Param, numParams)
		ind := make([]byte, numParams)
		for j := 0; j < numParams && r.err == nil; j++ {
			p := &row[j]
			p.ParamType = e.Types[j]
			ind[j] = r.u8()
			switch ind[j] {
			case BulkNone:
				readParam(&r, p)
			case BulkNull:
				p.Null = true
			case BulkDefault, BulkIgnore:
			default:
				r.fail(fmt.Sprintf("row %d, parameter %d: indicator %d", len(e.Rows)+1, j+1, ind[j]))
			}
		}
		if r.err == nil {
			e.Rows = append(e.Rows, row)
			e.Indicator = append(e.Indicator, ind)
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	return e, nil
}

// Append encodes the command; types are sent when Flags&BulkSendTypes.
func (e *BulkExecute) Append(b []byte) []byte {
	b = append(b, ComStmtBulkExecute)
	b = binary.LittleEndian.AppendUint32(b, e.StmtID)
	b = binary.LittleEndian.AppendUint16(b, e.Flags)
	if e.Flags&BulkSendTypes != 0 {
		for _, t := range e.Types {
			b = append(b, t.Type, t.Flag)
		}
	}
	for i, row := range e.Rows {
		for j := range row {
			ind := e.Indicator[i][j]
			b = append(b, ind)
			if ind == BulkNone {
				b = appendParam(b, &row[j])
			}
		}
	}
	return b
}
