package wire

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
)

// ErrPacketTooLarge: a frame header announced more than MaxPayload bytes.
// (Impossible with a 3-byte length; kept for callers that bound payloads.)
var ErrPacketTooLarge = errors.New("wire: packet too large")

const bufSize = 64 << 10

// Conn frames packets on a net.Conn. It is used by one goroutine at a time.
// A payload returned by ReadFrame is valid until the next read.
type Conn struct {
	net.Conn
	r       *bufio.Reader
	w       *bufio.Writer
	scratch []byte
	hdr     [4]byte
	whdr    [4]byte
	// BytesIn and BytesOut count bytes read and written, headers included.
	BytesIn, BytesOut int64
	// comp is the compressed protocol beneath, once Compress turned it on.
	comp *CompressConn
	// MaxPacket, if positive, bounds what ReadPacket joins from
	// continuation frames (a peer that is not authenticated yet must not
	// make the reader buffer gigabytes).
	MaxPacket int
}

// NewConn wraps c.
func NewConn(c net.Conn) *Conn { return NewConnSize(c, bufSize, bufSize) }

// NewConnSize wraps c with read and write buffers of the given sizes: a
// packet larger than a buffer still goes through, in more system calls.
func NewConnSize(c net.Conn, read, write int) *Conn {
	return &Conn{Conn: c, r: bufio.NewReaderSize(c, read), w: bufio.NewWriterSize(c, write)}
}

// Upgrade replaces the underlying connection (after a TLS handshake on it).
// Nothing may be buffered: the peer waits for the handshake, so nothing is.
// Detach returns the connection for a TLS handshake over it: the bytes
// already read ahead (a client may send its TLS hello right behind its
// SSLRequest, in one segment) come first, then the socket's.
func (c *Conn) Detach() net.Conn {
	n := c.r.Buffered()
	if n == 0 {
		return c.Conn
	}
	b, _ := c.r.Peek(n)
	pre := append([]byte(nil), b...)
	c.r.Discard(n)
	return &prefixConn{Conn: c.Conn, pre: pre}
}

// prefixConn reads pre before its connection.
type prefixConn struct {
	net.Conn
	pre []byte
}

// NetConn is the connection beneath, as tls.Conn's.
func (p *prefixConn) NetConn() net.Conn { return p.Conn }

func (p *prefixConn) Read(b []byte) (int, error) {
	if len(p.pre) > 0 {
		n := copy(b, p.pre)
		p.pre = p.pre[n:]
		return n, nil
	}
	return p.Conn.Read(b)
}

func (c *Conn) Upgrade(nc net.Conn) error {
	if c.r.Buffered() > 0 {
		return fmt.Errorf("%w: %d bytes arrived before the switch to TLS or compression", ErrMalformed, c.r.Buffered())
	}
	c.Conn = nc
	c.r.Reset(nc)
	c.w.Reset(nc)
	return nil
}

// Compress turns on the compressed protocol beneath the packets (after a
// login that agreed on CLIENT_COMPRESS); nothing may be buffered.
func (c *Conn) Compress() error {
	cc := NewCompressConn(c.Conn)
	if err := c.Upgrade(cc); err != nil {
		return err
	}
	c.comp = cc
	return nil
}

// Compressed reports whether Compress turned the compressed protocol on.
func (c *Conn) Compressed() bool { return c.comp != nil }

// NewCommand says that what is written next starts a command: under the
// compressed protocol its packets' sequence ids start again at 0. (A
// connection that sends commands calls it; one that answers never does.)
func (c *Conn) NewCommand() {
	if c.comp != nil {
		c.comp.NewCommand()
	}
}

// CompressedSeq is the sequence id the next compressed packet written
// takes (0 without compression). A server numbers the packets of its
// answer from the compressed packets it read, not from the packets
// inside them: a relay that sends a command in other compressed packets
// than its client did must shift the answer's ids by the difference.
func (c *Conn) CompressedSeq() byte {
	if c.comp == nil {
		return 0
	}
	return c.comp.Seq()
}

// ReadFrame reads one packet frame. A payload of exactly MaxPayload bytes
// is continued by the next frame.
func (c *Conn) ReadFrame() (seq byte, payload []byte, err error) {
	if _, err := io.ReadFull(c.r, c.hdr[:]); err != nil {
		return 0, nil, err
	}
	n := int(c.hdr[0]) | int(c.hdr[1])<<8 | int(c.hdr[2])<<16
	seq = c.hdr[3]
	c.BytesIn += int64(4 + n)
	if n <= c.r.Size() {
		p, err := c.r.Peek(n)
		if err != nil {
			return 0, nil, unexpected(err)
		}
		c.r.Discard(n)
		return seq, p, nil
	}
	if cap(c.scratch) < n {
		c.scratch = make([]byte, n)
	}
	p := c.scratch[:n]
	if _, err := io.ReadFull(c.r, p); err != nil {
		return 0, nil, unexpected(err)
	}
	return seq, p, nil
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// ReadPacket reads a whole payload, joining continuation frames, and
// returns the last frame's sequence id. The payload is a fresh slice.
func (c *Conn) ReadPacket() (seq byte, payload []byte, err error) {
	var out []byte
	for {
		s, p, err := c.ReadFrame()
		if err != nil {
			return 0, nil, err
		}
		if c.MaxPacket > 0 && len(out)+len(p) > c.MaxPacket {
			return 0, nil, fmt.Errorf("%w: more than %d bytes in one packet", ErrPacketTooLarge, c.MaxPacket)
		}
		out = append(out, p...)
		seq = s
		if len(p) < MaxPayload {
			if out == nil {
				out = []byte{}
			}
			return seq, out, nil
		}
	}
}

// WriteFrame buffers one frame; payload must not exceed MaxPayload.
func (c *Conn) WriteFrame(seq byte, payload []byte) error {
	n := len(payload)
	if n > MaxPayload {
		return ErrPacketTooLarge
	}
	c.BytesOut += int64(4 + n)
	c.whdr = [4]byte{byte(n), byte(n >> 8), byte(n >> 16), seq}
	if _, err := c.w.Write(c.whdr[:]); err != nil {
		return err
	}
	_, err := c.w.Write(payload)
	return err
}

// WritePacket writes a payload of any size as frames with sequence ids from
// seq on, and returns the sequence id the next packet takes.
func (c *Conn) WritePacket(seq byte, payload []byte) (byte, error) {
	for {
		n := min(len(payload), MaxPayload)
		if err := c.WriteFrame(seq, payload[:n]); err != nil {
			return seq, err
		}
		seq++
		payload = payload[n:]
		if n < MaxPayload {
			return seq, nil
		}
	}
}

// Reader returns the buffered reader, for relaying the rest of a
// connection as bytes without losing what is already buffered.
func (c *Conn) Reader() io.Reader { return c.r }

// Flush sends what is buffered.
func (c *Conn) Flush() error { return c.w.Flush() }
