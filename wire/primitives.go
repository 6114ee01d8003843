package wire

import (
	"encoding/binary"
	"fmt"
)

// reader reads a payload front to back; the first error sticks and every
// later read returns zero values.
type reader struct {
	b   []byte
	pos int
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s at byte %d of %d", ErrMalformed, what, r.pos, len(r.b))
	}
}

func (r *reader) left() int { return len(r.b) - r.pos }

func (r *reader) bytes(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || r.left() < n {
		r.fail(fmt.Sprintf("%d bytes wanted", n))
		return nil
	}
	s := r.b[r.pos : r.pos+n]
	r.pos += n
	return s
}

func (r *reader) u8() uint8 {
	if s := r.bytes(1); s != nil {
		return s[0]
	}
	return 0
}

func (r *reader) u16() uint16 {
	if s := r.bytes(2); s != nil {
		return binary.LittleEndian.Uint16(s)
	}
	return 0
}

func (r *reader) u24() uint32 {
	if s := r.bytes(3); s != nil {
		return uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16
	}
	return 0
}

func (r *reader) u32() uint32 {
	if s := r.bytes(4); s != nil {
		return binary.LittleEndian.Uint32(s)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if s := r.bytes(8); s != nil {
		return binary.LittleEndian.Uint64(s)
	}
	return 0
}

// lenenc reads a length-encoded integer; null reports the 0xfb NULL marker.
func (r *reader) lenenc() (v uint64, null bool) {
	c := r.u8()
	switch {
	case r.err != nil:
		return 0, false
	case c < 0xfb:
		return uint64(c), false
	case c == 0xfb:
		return 0, true
	case c == 0xfc:
		return uint64(r.u16()), false
	case c == 0xfd:
		return uint64(r.u24()), false
	case c == 0xfe:
		return r.u64(), false
	}
	r.pos--
	r.fail("0xff is not a length-encoded integer")
	return 0, false
}

func (r *reader) lenencBytes() []byte {
	n, null := r.lenenc()
	if null {
		r.fail("NULL where a string was expected")
		return nil
	}
	if r.err == nil && n > uint64(r.left()) {
		r.fail(fmt.Sprintf("string of %d bytes", n))
		return nil
	}
	return r.bytes(int(n))
}

// nulString reads up to a NUL byte, which it consumes.
func (r *reader) nulString() []byte {
	if r.err != nil {
		return nil
	}
	for i := r.pos; i < len(r.b); i++ {
		if r.b[i] == 0 {
			s := r.b[r.pos:i]
			r.pos = i + 1
			return s
		}
	}
	r.fail("unterminated string")
	return nil
}

func (r *reader) rest() []byte { return r.bytes(r.left()) }

// AppendLenenc appends a length-encoded integer.
func AppendLenenc(b []byte, v uint64) []byte {
	switch {
	case v < 0xfb:
		return append(b, byte(v))
	case v <= 0xffff:
		return append(b, 0xfc, byte(v), byte(v>>8))
	case v <= 0xffffff:
		return append(b, 0xfd, byte(v), byte(v>>8), byte(v>>16))
	}
	b = append(b, 0xfe)
	return binary.LittleEndian.AppendUint64(b, v)
}

// AppendLenencBytes appends a length-encoded string.
func AppendLenencBytes(b, s []byte) []byte {
	return append(AppendLenenc(b, uint64(len(s))), s...)
}

func appendNul(b, s []byte) []byte { return append(append(b, s...), 0) }

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}
