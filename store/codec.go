package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
)

// recordVersion is the first byte of every record value this code writes.
// Part of the format, never change; a new layout gets a new number.
// Version 2 adds the optional fields 11 (client capabilities) and 12
// (collation) and the long-data bit of a value's header; version 1 values
// (without them) stay readable. Version 3 (capture format 3) adds field
// 13 (the server's connection id).
const recordVersion = 3

// Presence bits of a record value's optional fields. Part of the format.
const (
	hasSchema uint64 = 1 << iota
	hasSQL
	hasStmtID
	hasParams
	hasCursorType
	hasParamIndex
	hasFetchRows
	hasData
	hasUser
	hasCommand
	hasFlags
	hasClientCaps // version 2
	hasCollation  // version 2
	hasConnID     // version 3
)

// Presence bits of a response's optional fields. Part of the format.
const (
	rAffected uint64 = 1 << iota
	rInsertID
	rStatus
	rWarnings
	rErrCode
	rSQLState
	rMessage
	rColumns
	rParams
	rRows
	rBytes
	rChecksums
	rMore
)

// Value header bits. Part of the format.
const (
	valNull     = 1 << 0
	valUnsigned = 1 << 1
	valLongData = 1 << 2 // version 2
)

// Limits that keep a corrupt value from asking for absurd allocations.
const (
	maxParams   = 65535
	maxMore     = 1 << 16
	maxRespNest = 1 // More holds results; a result in More has no More of its own
)

// AppendRecord appends the encoding of r's value (everything but Seq) to dst.
// base is the capture's base time in Unix nanoseconds; starts are stored
// relative to it.
func AppendRecord(dst []byte, r *Record, base int64) []byte {
	var mask uint64
	if r.Schema != "" {
		mask |= hasSchema
	}
	if r.SQL != "" {
		mask |= hasSQL
	}
	if r.StmtID != 0 {
		mask |= hasStmtID
	}
	if len(r.Params) > 0 {
		mask |= hasParams
	}
	if r.CursorType != 0 {
		mask |= hasCursorType
	}
	if r.ParamIndex != 0 {
		mask |= hasParamIndex
	}
	if r.FetchRows != 0 {
		mask |= hasFetchRows
	}
	if len(r.Data) > 0 {
		mask |= hasData
	}
	if r.User != "" {
		mask |= hasUser
	}
	if r.Command != 0 {
		mask |= hasCommand
	}
	if r.Flags != 0 {
		mask |= hasFlags
	}
	if r.ClientCaps != 0 {
		mask |= hasClientCaps
	}
	if r.Collation != 0 {
		mask |= hasCollation
	}
	if r.ConnID != 0 {
		mask |= hasConnID
	}
	dst = append(dst, recordVersion, byte(r.Kind))
	dst = binary.AppendUvarint(dst, mask)
	dst = binary.AppendUvarint(dst, r.Session)
	var start int64
	if !r.Start.IsZero() {
		start = r.Start.UnixNano() - base
	}
	dst = binary.AppendVarint(dst, start)
	dst = binary.AppendUvarint(dst, uint64(max(r.Duration, 0)))
	if mask&hasSchema != 0 {
		dst = appendString(dst, r.Schema)
	}
	if mask&hasSQL != 0 {
		dst = appendString(dst, r.SQL)
	}
	if mask&hasStmtID != 0 {
		dst = binary.AppendUvarint(dst, uint64(r.StmtID))
	}
	if mask&hasParams != 0 {
		dst = binary.AppendUvarint(dst, uint64(len(r.Params)))
		for i := range r.Params {
			dst = appendValue(dst, &r.Params[i])
		}
	}
	if mask&hasCursorType != 0 {
		dst = append(dst, r.CursorType)
	}
	if mask&hasParamIndex != 0 {
		dst = binary.AppendUvarint(dst, uint64(r.ParamIndex))
	}
	if mask&hasFetchRows != 0 {
		dst = binary.AppendUvarint(dst, uint64(r.FetchRows))
	}
	if mask&hasData != 0 {
		dst = appendBytes(dst, r.Data)
	}
	if mask&hasUser != 0 {
		dst = appendString(dst, r.User)
	}
	if mask&hasCommand != 0 {
		dst = append(dst, r.Command)
	}
	if mask&hasFlags != 0 {
		dst = binary.AppendUvarint(dst, uint64(r.Flags))
	}
	if mask&hasClientCaps != 0 {
		dst = binary.AppendUvarint(dst, r.ClientCaps)
	}
	if mask&hasCollation != 0 {
		dst = append(dst, r.Collation)
	}
	if mask&hasConnID != 0 {
		dst = binary.AppendUvarint(dst, uint64(r.ConnID))
	}
	return appendResponse(dst, &r.Resp, 0)
}

func appendResponse(dst []byte, p *Response, depth int) []byte {
	dst = append(dst, byte(p.Kind))
	if p.Kind == RespNone {
		return dst
	}
	var mask uint64
	set := func(cond bool, bit uint64) {
		if cond {
			mask |= bit
		}
	}
	set(p.AffectedRows != 0, rAffected)
	set(p.InsertID != 0, rInsertID)
	set(p.Status != 0, rStatus)
	set(p.Warnings != 0, rWarnings)
	set(p.ErrCode != 0, rErrCode)
	set(p.SQLState != "", rSQLState)
	set(p.Message != "", rMessage)
	set(p.Columns != 0, rColumns)
	set(p.Params != 0, rParams)
	set(p.Rows != 0, rRows)
	set(p.Bytes != 0, rBytes)
	set(p.HasChecksums, rChecksums)
	set(len(p.More) > 0 && depth < maxRespNest, rMore)
	dst = binary.AppendUvarint(dst, mask)
	if mask&rAffected != 0 {
		dst = binary.AppendUvarint(dst, p.AffectedRows)
	}
	if mask&rInsertID != 0 {
		dst = binary.AppendUvarint(dst, p.InsertID)
	}
	if mask&rStatus != 0 {
		dst = binary.AppendUvarint(dst, uint64(p.Status))
	}
	if mask&rWarnings != 0 {
		dst = binary.AppendUvarint(dst, uint64(p.Warnings))
	}
	if mask&rErrCode != 0 {
		dst = binary.AppendUvarint(dst, uint64(p.ErrCode))
	}
	if mask&rSQLState != 0 {
		dst = appendString(dst, p.SQLState)
	}
	if mask&rMessage != 0 {
		dst = appendString(dst, p.Message)
	}
	if mask&rColumns != 0 {
		dst = binary.AppendUvarint(dst, uint64(p.Columns))
	}
	if mask&rParams != 0 {
		dst = binary.AppendUvarint(dst, uint64(p.Params))
	}
	if mask&rRows != 0 {
		dst = binary.AppendUvarint(dst, p.Rows)
	}
	if mask&rBytes != 0 {
		dst = binary.AppendUvarint(dst, p.Bytes)
	}
	if mask&rChecksums != 0 {
		dst = binary.LittleEndian.AppendUint64(dst, p.Ordered)
		dst = binary.LittleEndian.AppendUint64(dst, p.Unordered)
	}
	if mask&rMore != 0 {
		dst = binary.AppendUvarint(dst, uint64(len(p.More)))
		for i := range p.More {
			dst = appendResponse(dst, &p.More[i], depth+1)
		}
	}
	return dst
}

func appendValue(dst []byte, v *Value) []byte {
	var h byte
	if v.Null {
		h |= valNull
	}
	if v.Unsigned {
		h |= valUnsigned
	}
	if v.LongData {
		h |= valLongData
	}
	dst = append(dst, h, v.Type)
	if v.Null {
		return dst
	}
	switch classOf(v.Type) {
	case classInt:
		if v.Unsigned {
			return binary.AppendUvarint(dst, uint64(v.Int))
		}
		return binary.AppendVarint(dst, v.Int)
	case classFloat:
		return binary.LittleEndian.AppendUint32(dst, math.Float32bits(float32(v.Float)))
	case classDouble:
		return binary.LittleEndian.AppendUint64(dst, math.Float64bits(v.Float))
	}
	return appendBytes(dst, v.Bytes)
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendBytes(dst []byte, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// errTruncated and friends say what is wrong inside a value; DecodeRecord
// wraps them in ErrCorrupt.
var (
	errTruncated = errors.New("truncated")
	errOverflow  = errors.New("varint overflows")
)

// decoder reads a value front to back; the first error sticks.
type decoder struct {
	b       []byte
	pos     int
	err     error
	version byte // of the record being decoded
}

func (d *decoder) fail(err error) {
	if d.err == nil {
		d.err = fmt.Errorf("%w at byte %d", err, d.pos)
	}
}

func (d *decoder) byte() byte {
	if d.err != nil {
		return 0
	}
	if d.pos >= len(d.b) {
		d.fail(errTruncated)
		return 0
	}
	c := d.b[d.pos]
	d.pos++
	return c
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.pos:])
	if n <= 0 {
		if n == 0 {
			d.fail(errTruncated)
		} else {
			d.fail(errOverflow)
		}
		return 0
	}
	d.pos += n
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b[d.pos:])
	if n <= 0 {
		if n == 0 {
			d.fail(errTruncated)
		} else {
			d.fail(errOverflow)
		}
		return 0
	}
	d.pos += n
	return v
}

// uvarintMax reads a uvarint that must not exceed limit.
func (d *decoder) uvarintMax(limit uint64, what string) uint64 {
	v := d.uvarint()
	if v > limit {
		d.fail(fmt.Errorf("%s %d exceeds %d", what, v, limit))
		return 0
	}
	return v
}

func (d *decoder) fixed(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || len(d.b)-d.pos < n {
		d.fail(errTruncated)
		return nil
	}
	s := d.b[d.pos : d.pos+n]
	d.pos += n
	return s
}

// bytes returns a length-prefixed slice aliasing the input.
func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err == nil && n > uint64(len(d.b)-d.pos) {
		d.fail(errTruncated)
		return nil
	}
	return d.fixed(int(n))
}

func (d *decoder) string() string { return string(d.bytes()) }

// stringLike is string, returning prev itself when the bytes are prev's.
func (d *decoder) stringLike(prev string) string {
	if b := d.bytes(); string(b) != prev {
		return string(b)
	}
	return prev
}

// DecodeRecord decodes a value written by AppendRecord into r, replacing
// its contents; r.Seq is left as it is. Slices in r (Params, Data, Bytes of
// values) reuse r's memory where they can and never alias b. An error wraps
// ErrCorrupt.
func DecodeRecord(b []byte, base int64, r *Record) error {
	d := decoder{b: b}
	version := d.byte()
	if d.err == nil && (version == 0 || version > recordVersion) {
		if version > recordVersion {
			return fmt.Errorf("%w: record version %d is newer than this tandem reads (%d); upgrade tandem", ErrNewerFormat, version, recordVersion)
		}
		return fmt.Errorf("%w: unknown record version %d", ErrCorrupt, version)
	}
	d.version = version
	kind := Kind(d.byte())
	mask := d.uvarint()
	if d.err == nil && version < 2 && mask&(hasClientCaps|hasCollation) != 0 {
		d.fail(fmt.Errorf("version %d record with version 2 fields", version))
	}
	if d.err == nil && version < 3 && mask&hasConnID != 0 {
		d.fail(fmt.Errorf("version %d record with version 3 fields", version))
	}
	if d.err == nil && mask >= hasConnID<<1 {
		d.fail(fmt.Errorf("unknown fields (mask %#x)", mask))
	}
	params, data := r.Params[:0], r.Data[:0]
	schema, sql := r.Schema, r.SQL
	*r = Record{Seq: r.Seq, Kind: kind}
	if d.err == nil && (kind == 0 || kind > kindMax) {
		d.fail(fmt.Errorf("unknown kind %d", kind))
	}
	r.Session = d.uvarint()
	start := d.varint()
	r.Start = time.Unix(0, base+start)
	dur := d.uvarint()
	if dur > math.MaxInt64 {
		d.fail(errOverflow)
	}
	r.Duration = time.Duration(dur)
	// A reader decodes record after record into one Record: the schema,
	// and often the text, are the previous record's, kept rather than
	// allocated again.
	if mask&hasSchema != 0 {
		r.Schema = d.stringLike(schema)
	}
	if mask&hasSQL != 0 {
		r.SQL = d.stringLike(sql)
	}
	if mask&hasStmtID != 0 {
		r.StmtID = uint32(d.uvarintMax(math.MaxUint32, "statement id"))
	}
	if mask&hasParams != 0 {
		n := int(d.uvarintMax(maxParams, "parameter count"))
		// Each value takes at least two bytes: never allocate past the input.
		if d.err == nil && n > (len(b)-d.pos)/2 {
			d.fail(errTruncated)
			n = 0
		}
		if cap(params) < n {
			params = make([]Value, n)
		}
		params = params[:n]
		for i := 0; i < n && d.err == nil; i++ {
			decodeValue(&d, &params[i])
		}
		r.Params = params
	}
	if mask&hasCursorType != 0 {
		r.CursorType = d.byte()
	}
	if mask&hasParamIndex != 0 {
		r.ParamIndex = uint16(d.uvarintMax(math.MaxUint16, "parameter index"))
	}
	if mask&hasFetchRows != 0 {
		r.FetchRows = uint32(d.uvarintMax(math.MaxUint32, "fetch rows"))
	}
	if mask&hasData != 0 {
		r.Data = append(data, d.bytes()...)
	}
	if mask&hasUser != 0 {
		r.User = d.string()
	}
	if mask&hasCommand != 0 {
		r.Command = d.byte()
	}
	if mask&hasFlags != 0 {
		r.Flags = Flags(d.uvarintMax(math.MaxUint32, "flags"))
	}
	if mask&hasClientCaps != 0 {
		r.ClientCaps = d.uvarint()
	}
	if mask&hasCollation != 0 {
		r.Collation = d.byte()
	}
	if mask&hasConnID != 0 {
		r.ConnID = uint32(d.uvarintMax(math.MaxUint32, "connection id"))
	}
	decodeResponse(&d, &r.Resp, 0)
	if d.err == nil && d.pos != len(b) {
		d.fail(fmt.Errorf("%d trailing bytes", len(b)-d.pos))
	}
	if d.err != nil {
		return fmt.Errorf("%w: %v", ErrCorrupt, d.err)
	}
	return nil
}

func decodeResponse(d *decoder, p *Response, depth int) {
	p.Kind = RespKind(d.byte())
	if d.err != nil || p.Kind == RespNone {
		return
	}
	if p.Kind > respKindMax {
		d.fail(fmt.Errorf("unknown response kind %d", p.Kind))
		return
	}
	mask := d.uvarint()
	if mask&rAffected != 0 {
		p.AffectedRows = d.uvarint()
	}
	if mask&rInsertID != 0 {
		p.InsertID = d.uvarint()
	}
	if mask&rStatus != 0 {
		p.Status = uint16(d.uvarintMax(math.MaxUint16, "status"))
	}
	if mask&rWarnings != 0 {
		p.Warnings = uint16(d.uvarintMax(math.MaxUint16, "warnings"))
	}
	if mask&rErrCode != 0 {
		p.ErrCode = uint16(d.uvarintMax(math.MaxUint16, "error code"))
	}
	if mask&rSQLState != 0 {
		p.SQLState = d.string()
	}
	if mask&rMessage != 0 {
		p.Message = d.string()
	}
	if mask&rColumns != 0 {
		p.Columns = uint32(d.uvarintMax(math.MaxUint32, "columns"))
	}
	if mask&rParams != 0 {
		p.Params = uint16(d.uvarintMax(math.MaxUint16, "params"))
	}
	if mask&rRows != 0 {
		p.Rows = d.uvarint()
	}
	if mask&rBytes != 0 {
		p.Bytes = d.uvarint()
	}
	if mask&rChecksums != 0 {
		p.HasChecksums = true
		if s := d.fixed(16); s != nil {
			p.Ordered = binary.LittleEndian.Uint64(s)
			p.Unordered = binary.LittleEndian.Uint64(s[8:])
		}
	}
	if mask&rMore != 0 {
		if depth >= maxRespNest {
			d.fail(errors.New("nested results"))
			return
		}
		n := int(d.uvarintMax(maxMore, "result count"))
		if d.err == nil && n > len(d.b)-d.pos {
			d.fail(errTruncated)
			return
		}
		if n == 0 {
			return
		}
		p.More = make([]Response, n)
		for i := 0; i < n && d.err == nil; i++ {
			decodeResponse(d, &p.More[i], depth+1)
		}
	}
}

func decodeValue(d *decoder, v *Value) {
	h := d.byte()
	typ := d.byte()
	buf := v.Bytes[:0]
	*v = Value{Type: typ, Null: h&valNull != 0, Unsigned: h&valUnsigned != 0, LongData: h&valLongData != 0}
	allowed := byte(valNull | valUnsigned | valLongData)
	if d.version < 2 {
		allowed = valNull | valUnsigned
	}
	if d.err == nil && h&^allowed != 0 {
		d.fail(fmt.Errorf("bad value header %#x", h))
	}
	if v.Null || d.err != nil {
		return
	}
	switch classOf(typ) {
	case classInt:
		if v.Unsigned {
			v.Int = int64(d.uvarint())
		} else {
			v.Int = d.varint()
		}
	case classFloat:
		if s := d.fixed(4); s != nil {
			v.Float = float64(math.Float32frombits(binary.LittleEndian.Uint32(s)))
		}
	case classDouble:
		if s := d.fixed(8); s != nil {
			v.Float = math.Float64frombits(binary.LittleEndian.Uint64(s))
		}
	default:
		v.Bytes = append(buf, d.bytes()...)
	}
}
