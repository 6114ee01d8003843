package wire

import (
	"encoding/binary"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// First bytes of response packets.
const (
	HeaderOK          = 0x00
	HeaderLocalInfile = 0xfb
	HeaderEOF         = 0xfe
	HeaderErr         = 0xff
)

// IsResultEnd reports whether a payload read where a row could be ends the
// result set: an EOF packet (0xfe, shorter than 9 bytes) or, with
// CLIENT_DEPRECATE_EOF, an OK packet with the 0xfe header (any length below
// MaxPayload: a text row starting with 0xfe announces a column of at least
// 2^24 bytes, so its first packet is exactly MaxPayload long).
func IsResultEnd(p []byte, deprecateEOF bool) bool {
	if len(p) == 0 || p[0] != HeaderEOF {
		return false
	}
	if deprecateEOF {
		return len(p) < MaxPayload
	}
	return len(p) < 9
}

// OK is an OK packet (or an EOF-headed OK ending a result set).
type OK struct {
	Header       byte
	AffectedRows uint64
	InsertID     uint64
	Status       uint16
	Warnings     uint16
	// Info is the human-readable message and, with session tracking, the
	// session state changes, kept raw. ParseOK leaves it in the packet
	// parsed: a caller that keeps it past the packet copies it.
	Info []byte
}

// ParseOK parses an OK packet from a server talking to a client with caps.
// It returns a value, not a pointer, and does not copy Info: a replay and a
// capture parse one per write, and neither keeps it.
func ParseOK(b []byte, caps uint64) (OK, error) {
	r := reader{b: b}
	o := OK{Header: r.u8()}
	if r.err == nil && o.Header != HeaderOK && o.Header != HeaderEOF {
		r.pos = 0
		r.fail("not an OK packet")
	}
	o.AffectedRows, _ = r.lenenc()
	o.InsertID, _ = r.lenenc()
	if uint32(caps)&(mysql.CLIENT_PROTOCOL_41|mysql.CLIENT_TRANSACTIONS) != 0 {
		o.Status = r.u16()
	}
	if uint32(caps)&mysql.CLIENT_PROTOCOL_41 != 0 {
		o.Warnings = r.u16()
	}
	o.Info = r.rest()
	if r.err != nil {
		return OK{}, r.err
	}
	return o, nil
}

// Append encodes the OK packet for a client with caps.
func (o *OK) Append(b []byte, caps uint64) []byte {
	b = append(b, o.Header)
	b = AppendLenenc(b, o.AffectedRows)
	b = AppendLenenc(b, o.InsertID)
	if uint32(caps)&(mysql.CLIENT_PROTOCOL_41|mysql.CLIENT_TRANSACTIONS) != 0 {
		b = binary.LittleEndian.AppendUint16(b, o.Status)
	}
	if uint32(caps)&mysql.CLIENT_PROTOCOL_41 != 0 {
		b = binary.LittleEndian.AppendUint16(b, o.Warnings)
	}
	return append(b, o.Info...)
}

// Err is an ERR packet.
type Err struct {
	Code     uint16
	HasState bool
	State    string // five characters
	Message  string
}

// ParseErr parses an ERR packet.
func ParseErr(b []byte) (*Err, error) {
	r := reader{b: b}
	if r.u8() != HeaderErr {
		r.pos = 0
		r.fail("not an ERR packet")
		return nil, r.err
	}
	e := &Err{Code: r.u16()}
	if r.err == nil && r.left() > 0 && r.b[r.pos] == '#' {
		r.pos++
		e.State, e.HasState = string(r.bytes(5)), true
	}
	e.Message = string(r.rest())
	if r.err != nil {
		return nil, r.err
	}
	return e, nil
}

// Append encodes the ERR packet.
func (e *Err) Append(b []byte) []byte {
	b = append(b, HeaderErr)
	b = binary.LittleEndian.AppendUint16(b, e.Code)
	if e.HasState {
		b = append(b, '#')
		b = append(b, (e.State + "     ")[:5]...)
	}
	return append(b, e.Message...)
}

// EOF is a (pre-DEPRECATE_EOF) EOF packet.
type EOF struct {
	Warnings uint16
	Status   uint16
}

// ParseEOF parses a 5-byte EOF packet (a bare 0xfe is accepted too). It
// returns a value: replay parses two per result set.
func ParseEOF(b []byte) (EOF, error) {
	r := reader{b: b}
	if r.u8() != HeaderEOF {
		r.pos = 0
		r.fail("not an EOF packet")
		return EOF{}, r.err
	}
	var e EOF
	if r.left() >= 4 {
		e.Warnings, e.Status = r.u16(), r.u16()
	}
	if r.err == nil && r.left() > 0 {
		r.fail("trailing bytes")
	}
	if r.err != nil {
		return EOF{}, r.err
	}
	return e, nil
}

// Append encodes the EOF packet.
func (e *EOF) Append(b []byte) []byte {
	b = append(b, HeaderEOF)
	b = binary.LittleEndian.AppendUint16(b, e.Warnings)
	return binary.LittleEndian.AppendUint16(b, e.Status)
}

// PrepareOK is COM_STMT_PREPARE's first response packet.
type PrepareOK struct {
	StmtID   uint32
	Columns  uint16
	Params   uint16
	Reserved byte
	Warnings uint16
	// Short: a server that sent no warning count (12 bytes in all)
	Short bool
}

// ParsePrepareOK parses a prepare-OK packet.
func ParsePrepareOK(b []byte) (*PrepareOK, error) {
	r := reader{b: b}
	if r.u8() != HeaderOK {
		r.pos = 0
		r.fail("not a prepare-OK packet")
		return nil, r.err
	}
	p := &PrepareOK{StmtID: r.u32(), Columns: r.u16(), Params: r.u16()}
	if r.err == nil && r.left() == 0 {
		p.Short = true
		return p, nil
	}
	p.Reserved = r.u8()
	p.Warnings = r.u16()
	if r.err == nil && r.left() > 0 {
		r.fail("trailing bytes")
	}
	if r.err != nil {
		return nil, r.err
	}
	return p, nil
}

// Append encodes the prepare-OK packet.
func (p *PrepareOK) Append(b []byte) []byte {
	b = append(b, HeaderOK)
	b = binary.LittleEndian.AppendUint32(b, p.StmtID)
	b = binary.LittleEndian.AppendUint16(b, p.Columns)
	b = binary.LittleEndian.AppendUint16(b, p.Params)
	if p.Short {
		return b
	}
	b = append(b, p.Reserved)
	return binary.LittleEndian.AppendUint16(b, p.Warnings)
}
