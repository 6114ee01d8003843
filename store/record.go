package store

import (
	"fmt"
	"time"
)

// Kind is what a client sent. The numbers are part of the format, never change.
type Kind uint8

const (
	KindConnect         Kind = 1  // a session begins; User and Schema are set, never auth data
	KindQuery           Kind = 2  // COM_QUERY; SQL is set
	KindPrepare         Kind = 3  // COM_STMT_PREPARE; SQL is set, StmtID is the server's id
	KindExecute         Kind = 4  // COM_STMT_EXECUTE; StmtID, Params, CursorType. bulk execute: see ComStmtBulkExecute
	KindLongData        Kind = 5  // COM_STMT_SEND_LONG_DATA; StmtID, ParamIndex, Data
	KindClose           Kind = 6  // COM_STMT_CLOSE; StmtID
	KindReset           Kind = 7  // COM_STMT_RESET; StmtID
	KindFetch           Kind = 8  // COM_STMT_FETCH; StmtID, FetchRows
	KindInitDB          Kind = 9  // COM_INIT_DB; Schema is the new schema
	KindChangeUser      Kind = 10 // COM_CHANGE_USER; User and Schema, never auth data
	KindResetConnection Kind = 11 // COM_RESET_CONNECTION
	KindPing            Kind = 12 // COM_PING
	KindQuit            Kind = 13 // COM_QUIT, or the connection ended
	KindOther           Kind = 14 // anything else; Command is the command byte, Data its payload (bounded)
	kindMax             Kind = 14
)

var kindNames = [...]string{
	KindConnect: "connect", KindQuery: "query", KindPrepare: "prepare", KindExecute: "execute",
	KindLongData: "long-data", KindClose: "close", KindReset: "reset", KindFetch: "fetch",
	KindInitDB: "init-db", KindChangeUser: "change-user", KindResetConnection: "reset-connection",
	KindPing: "ping", KindQuit: "quit", KindOther: "other",
}

func (k Kind) String() string {
	if k >= 1 && k <= kindMax {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Kinds lists every valid kind in numeric order.
func Kinds() []Kind {
	out := make([]Kind, 0, kindMax)
	for k := Kind(1); k <= kindMax; k++ {
		out = append(out, k)
	}
	return out
}

// Flags qualify a record. The bit values are part of the format.
type Flags uint32

const (
	// FlagNotReplayable marks a command replay must skip (LOAD DATA LOCAL INFILE).
	FlagNotReplayable Flags = 1 << 0
	// FlagMasked marks SQL whose secret literals were replaced before storing.
	FlagMasked Flags = 1 << 1
	// FlagTruncated marks Data or SQL cut to the capture's size limit.
	FlagTruncated Flags = 1 << 2
	// FlagNewParamsBound is COM_STMT_EXECUTE's new-params-bound flag: the
	// client sent parameter types with this execute.
	FlagNewParamsBound Flags = 1 << 3
	// FlagOpenAtStart marks a synthetic record written when a capture
	// started on a proxy that was already relaying: the session was open
	// then, and the record rebuilds its state as it was (its connect, its
	// session variables, an open transaction's BEGIN, its prepared
	// statements). Nothing was sent to the server for it, and its Resp is
	// what the state implies (OK; a prepare's parameter count), not an
	// answer to compare with.
	FlagOpenAtStart Flags = 1 << 4
	// FlagBeforeStart marks a record of a transaction that was already
	// open when the capture started (read-only until then: one that had
	// written joins the capture only after it ends). Replay runs it as
	// captured, but its snapshot and locks began before the capture, so a
	// difference from the captured response is counted apart
	// ("started-before-capture"), never as an engine difference.
	FlagBeforeStart Flags = 1 << 5
	// FlagOpenAtStop marks the synthetic end of a session still open when
	// the capture stopped (a KindQuit nothing sent): replay ends the
	// session there, and the server rolls back a transaction it left open.
	FlagOpenAtStop Flags = 1 << 6
	// FlagLost marks a record that stands for commands of its session a
	// packet capture could not record: bytes it lost (a dropped or
	// missing segment), or (with FlagOpenAtStart) commands of a session
	// found open that ran before it could join and may have written. What
	// they were is unknown; after lost bytes, so is where the session's
	// transaction stands (replay ends an open one there by a commit:
	// sqlinfo.Trx.Lost). It is a KindOther record, not replayable; replay
	// counts every table as possibly written from its start on (the
	// comparison with the capture labels later differences
	// after-skipped-write).
	FlagLost Flags = 1 << 7
	// FlagAnswerLost marks a command whose answer a packet capture did not
	// see whole (lost bytes, or the capture ended first): Resp is none,
	// and replay compares its outcome between targets only.
	FlagAnswerLost Flags = 1 << 8
	// FlagSchemaUnknown marks a statement of a session a packet capture
	// found open (its login unseen) whose schema is not known (no
	// --schema was given and it had not said USE): not replayable, since
	// its unqualified names would resolve nowhere.
	FlagSchemaUnknown Flags = 1 << 9
)

// ComStmtBulkExecute is the Command of an execute record that stands for
// MariaDB's COM_STMT_BULK_EXECUTE: one command running its statement for
// many rows. Its Data is the command after the statement id (flags with
// the send-types flag set, the parameter types, the rows; see package
// wire), Params is empty.
const ComStmtBulkExecute byte = 0xfa

// CommandsLost reports whether r stands for commands of a followed
// session that a packet capture lost (FlagLost without FlagOpenAtStart:
// not those before a session found open joined). Where the session's
// transaction stands after it is unknown: sqlinfo.Trx.Lost.
func (r *Record) CommandsLost() bool { return r.Flags&(FlagLost|FlagOpenAtStart) == FlagLost }

// IsBulk reports whether r is a bulk execute.
func (r *Record) IsBulk() bool { return r.Kind == KindExecute && r.Command == ComStmtBulkExecute }

// Record is one command exchange: what a client sent and a summary of what
// the server answered.
type Record struct {
	// Seq is the global sequence, assigned by the Writer; it is the key, not
	// part of the value.
	Seq      uint64
	Session  uint64
	Start    time.Time
	Duration time.Duration
	Kind     Kind
	Flags    Flags
	// Schema is the current schema when the command was sent (the new one
	// for InitDB, the requested one for Connect and ChangeUser).
	Schema string
	// SQL is the statement of a Query or Prepare.
	SQL string
	// StmtID is the server's prepared statement id (Prepare from its
	// response; Execute, LongData, Close, Reset, Fetch from the command).
	StmtID     uint32
	Params     []Value
	CursorType uint8
	ParamIndex uint16
	FetchRows  uint32
	// Data is LongData's chunk or Other's payload.
	Data    []byte
	User    string
	Command byte
	// ClientCaps are the capability flags the client asked for in its
	// handshake (Connect; 0 when not captured): replay asks for the ones
	// that change results (found rows, multi statements …). Collation is
	// the handshake's collation id.
	ClientCaps uint64
	Collation  byte
	// ConnID is the connection id the server gave the session (Connect;
	// 0 when not captured): what its CONNECTION_ID() returned and what
	// another session's KILL names it by. Replay maps it to the target
	// connection that replays the session.
	ConnID uint32
	Resp   Response
}

// RespKind is the kind of the server's answer. Part of the format.
type RespKind uint8

const (
	RespNone      RespKind = 0 // no answer (close, long data, quit) or the connection broke
	RespOK        RespKind = 1 // OK or EOF packet; for Prepare, the prepare-OK
	RespError     RespKind = 2
	RespResultSet RespKind = 3
	respKindMax   RespKind = 3
)

func (k RespKind) String() string {
	switch k {
	case RespNone:
		return "none"
	case RespOK:
		return "ok"
	case RespError:
		return "error"
	case RespResultSet:
		return "resultset"
	}
	return fmt.Sprintf("resp(%d)", uint8(k))
}

// Response summarizes a server's answer. A multi-statement query or a CALL
// has one Response per result; the second and later are in More.
type Response struct {
	Kind         RespKind
	AffectedRows uint64
	InsertID     uint64
	Status       uint16
	Warnings     uint16
	ErrCode      uint16
	SQLState     string
	Message      string
	// Columns of a result set, or of a prepared statement's result.
	Columns uint32
	// Params of a prepared statement.
	Params uint16
	Rows   uint64
	// Bytes is the size of the result on the wire.
	Bytes uint64
	// HasChecksums says Ordered and Unordered are set: checksums of the rows
	// in their order and independent of it.
	HasChecksums bool
	Ordered      uint64
	Unordered    uint64
	More         []Response
}

// Value is a typed parameter of an execute, as the binary protocol carried it.
type Value struct {
	// Type is the MySQL field type (MYSQL_TYPE_*).
	Type     byte
	Unsigned bool
	Null     bool
	// Int holds integer types (the bits of the uint64 for unsigned ones).
	Int int64
	// Float holds FLOAT and DOUBLE.
	Float float64
	// Bytes holds strings, blobs, decimals, JSON, BIT, and the temporal
	// types in their binary-protocol form.
	Bytes []byte
	// LongData: the client sent this parameter's value with
	// COM_STMT_SEND_LONG_DATA (the session's long-data records hold it);
	// the execute carries its type only.
	LongData bool
}

// MySQL field types used to pick a value's encoding; the rest are byte strings.
const (
	TypeDecimal    byte = 0x00
	TypeTiny       byte = 0x01
	TypeShort      byte = 0x02
	TypeLong       byte = 0x03
	TypeFloat      byte = 0x04
	TypeDouble     byte = 0x05
	TypeNull       byte = 0x06
	TypeTimestamp  byte = 0x07
	TypeLongLong   byte = 0x08
	TypeInt24      byte = 0x09
	TypeDate       byte = 0x0a
	TypeTime       byte = 0x0b
	TypeDateTime   byte = 0x0c
	TypeYear       byte = 0x0d
	TypeVarChar    byte = 0x0f
	TypeNewDecimal byte = 0xf6
	TypeBlob       byte = 0xfc
	TypeVarString  byte = 0xfd
	TypeString     byte = 0xfe
)

// valueClass says how a type's value is encoded.
type valueClass uint8

const (
	classBytes valueClass = iota
	classInt
	classFloat
	classDouble
)

func classOf(t byte) valueClass {
	switch t {
	case TypeTiny, TypeShort, TypeLong, TypeLongLong, TypeInt24, TypeYear:
		return classInt
	case TypeFloat:
		return classFloat
	case TypeDouble:
		return classDouble
	}
	return classBytes
}

// Clone returns a deep copy of r that shares no memory with it.
func (r *Record) Clone() *Record {
	// A record and its few parameters go in one allocation (replay clones
	// every record it reads ahead), no larger than the two would be.
	var c *Record
	switch n := len(r.Params); {
	case n == 1:
		x := &struct {
			r Record
			p [1]Value
		}{r: *r}
		c = &x.r
		c.Params = x.p[:]
	case n == 2:
		x := &struct {
			r Record
			p [2]Value
		}{r: *r}
		c = &x.r
		c.Params = x.p[:]
	case n == 3 || n == 4:
		x := &struct {
			r Record
			p [4]Value
		}{r: *r}
		c = &x.r
		c.Params = x.p[:n:n]
	default:
		c = new(Record)
		*c = *r
		if r.Params != nil {
			c.Params = make([]Value, n)
		}
	}
	r.cloneRest(c)
	return c
}

// CloneInto is Clone into c, a record whose owner is done with it: c's
// room for parameters is reused when it holds them all, so that a clone
// into a record that held as many parameters allocates nothing but their
// bytes. Nothing else of what c held is reused (its strings and byte
// slices may still be referenced elsewhere). It returns c.
func (r *Record) CloneInto(c *Record) *Record {
	room := c.Params[:0]
	*c = *r
	if r.Params != nil {
		if room != nil && cap(room) >= len(r.Params) {
			c.Params = room[:len(r.Params)]
		} else {
			c.Params = make([]Value, len(r.Params))
		}
	}
	r.cloneRest(c)
	return c
}

// cloneRest deep-copies into c, a shallow copy of r with room for its
// parameters, what the copy shares with r.
func (r *Record) cloneRest(c *Record) {
	if r.Params != nil {
		for i, v := range r.Params {
			c.Params[i] = v
			if v.Bytes != nil {
				c.Params[i].Bytes = append([]byte(nil), v.Bytes...)
			}
		}
	}
	if r.Data != nil {
		c.Data = append([]byte(nil), r.Data...)
	}
	c.Resp = r.Resp.clone()
}

func (r Response) clone() Response {
	if r.More != nil {
		more := make([]Response, len(r.More))
		for i := range r.More {
			more[i] = r.More[i].clone()
		}
		r.More = more
	}
	return r
}
