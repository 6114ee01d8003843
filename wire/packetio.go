package wire

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
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
	// rpool and wpool, for a pooled connection (NewPooledConn), are where
	// its buffers come from and go back to; r or w is nil while it has
	// none.
	rpool *bufStack[*bufio.Reader]
	wpool *bufStack[*bufio.Writer]
	// hold: a pooled connection keeps the buffers it took (Hold).
	hold bool
}

// NewConn wraps c.
func NewConn(c net.Conn) *Conn { return NewConnSize(c, bufSize, bufSize) }

// NewConnSize wraps c with read and write buffers of the given sizes: a
// packet larger than a buffer still goes through, in more system calls.
func NewConnSize(c net.Conn, read, write int) *Conn {
	return &Conn{Conn: c, r: bufio.NewReaderSize(c, read), w: bufio.NewWriterSize(c, write)}
}

// NewPooledConn is NewConnSize for one of many connections that are
// mostly at rest (a replay's, one per captured session): its buffers are
// taken from pools shared by every pooled connection with buffers of the
// same sizes when it reads or writes, the write buffer goes back once
// Flush has sent it, and the read buffer when Release finds nothing read
// ahead. A thousand-session replay held 34 MiB of buffers for
// connections that mostly waited for their turn.
func NewPooledConn(c net.Conn, read, write int) *Conn {
	return &Conn{Conn: c, rpool: readerPool(read), wpool: writerPool(write)}
}

// bufStack is a pool of buffers of one size: a stack, so that the buffer
// given back last, still in the CPU's caches, is taken first. (A
// sync.Pool keeps a buffer per P: a goroutine that moved to another P
// found none there and made a new one, 16 KiB zeroed — 2 µs more a
// statement on a point-select replay — and a collection empties it.)
type bufStack[T any] struct {
	mu   sync.Mutex
	free []T
	make func() T
}

// maxFree bounds the buffers a stack keeps: the most connections at work
// at once that it serves without making new ones.
const maxFree = 256

func (s *bufStack[T]) get() T {
	s.mu.Lock()
	if n := len(s.free); n > 0 {
		x := s.free[n-1]
		var zero T
		s.free[n-1] = zero
		s.free = s.free[:n-1]
		s.mu.Unlock()
		return x
	}
	s.mu.Unlock()
	return s.make()
}

func (s *bufStack[T]) put(x T) {
	s.mu.Lock()
	if len(s.free) < maxFree {
		s.free = append(s.free, x)
	}
	s.mu.Unlock()
}

var bufPools struct {
	sync.Mutex
	r map[int]*bufStack[*bufio.Reader]
	w map[int]*bufStack[*bufio.Writer]
}

// readerPool is the pool of read buffers of size n.
func readerPool(n int) *bufStack[*bufio.Reader] {
	bufPools.Lock()
	defer bufPools.Unlock()
	return poolOf(&bufPools.r, n, func() *bufio.Reader { return bufio.NewReaderSize(nil, n) })
}

// writerPool is the pool of write buffers of size n.
func writerPool(n int) *bufStack[*bufio.Writer] {
	bufPools.Lock()
	defer bufPools.Unlock()
	return poolOf(&bufPools.w, n, func() *bufio.Writer { return bufio.NewWriterSize(nil, n) })
}

// poolOf is the stack of size n in pools, made with mk if it is new.
func poolOf[T any](pools *map[int]*bufStack[T], n int, mk func() T) *bufStack[T] {
	if *pools == nil {
		*pools = map[int]*bufStack[T]{}
	}
	p := (*pools)[n]
	if p == nil {
		p = &bufStack[T]{make: mk}
		(*pools)[n] = p
	}
	return p
}

// reader is c's read buffer, taken from its pool if it has none.
func (c *Conn) reader() *bufio.Reader {
	if c.r == nil {
		c.r = c.rpool.get()
		c.r.Reset(c.Conn)
	}
	return c.r
}

// writer is c's write buffer, taken from its pool if it has none.
func (c *Conn) writer() *bufio.Writer {
	if c.w == nil {
		c.w = c.wpool.get()
		c.w.Reset(c.Conn)
	}
	return c.w
}

// Hold(true) makes a pooled connection keep the buffers it takes until
// Release or Hold(false), instead of giving the write buffer back at each
// Flush: for a connection busy with one call after another (a replay
// connection at --concurrency), taking and giving back two buffers a call
// was 3.5 % of a point-select replay's CPU. Hold(false) releases what is
// at rest. Call it from the goroutine using c.
func (c *Conn) Hold(on bool) {
	c.hold = on
	if !on {
		c.Release()
	}
}

// Holds reports whether c holds a read buffer and a write buffer now.
func (c *Conn) Holds() (read, write bool) { return c.r != nil, c.w != nil }

// Buffers are the read and write buffers c holds now (nil for one it does
// not), for tests that check which buffers a connection uses.
func (c *Conn) Buffers() (*bufio.Reader, *bufio.Writer) { return c.r, c.w }

// Release gives a pooled connection's buffers back to their pools when it
// is at rest: nothing read ahead, nothing left to write (held or not: see
// Hold). It reports whether the connection holds no buffer now (always,
// for one that is not pooled: it holds its own). A payload ReadFrame
// returned is not valid after it. Call it between commands, from the
// goroutine using c.
func (c *Conn) Release() bool {
	if c.rpool == nil {
		return true
	}
	if c.w != nil && c.w.Buffered() == 0 {
		c.w.Reset(nil)
		c.wpool.put(c.w)
		c.w = nil
	}
	if c.r != nil && c.r.Buffered() == 0 {
		c.r.Reset(nil)
		c.rpool.put(c.r)
		c.r = nil
	}
	return c.r == nil && c.w == nil
}

// Upgrade replaces the underlying connection (after a TLS handshake on it).
// Nothing may be buffered: the peer waits for the handshake, so nothing is.
// Detach returns the connection for a TLS handshake over it: the bytes
// already read ahead (a client may send its TLS hello right behind its
// SSLRequest, in one segment) come first, then the socket's.
func (c *Conn) Detach() net.Conn {
	if c.r == nil {
		return c.Conn // pooled, at rest: nothing read ahead
	}
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
	if c.r != nil && c.r.Buffered() > 0 {
		return fmt.Errorf("%w: %d bytes arrived before the switch to TLS or compression", ErrMalformed, c.r.Buffered())
	}
	c.Conn = nc
	if c.r != nil {
		c.r.Reset(nc)
	}
	if c.w != nil {
		c.w.Reset(nc)
	}
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
	r := c.r
	if r == nil {
		r = c.reader()
	}
	if _, err := io.ReadFull(r, c.hdr[:]); err != nil {
		return 0, nil, err
	}
	n := int(c.hdr[0]) | int(c.hdr[1])<<8 | int(c.hdr[2])<<16
	seq = c.hdr[3]
	c.BytesIn += int64(4 + n)
	if n <= r.Size() {
		p, err := r.Peek(n)
		if err != nil {
			return 0, nil, unexpected(err)
		}
		r.Discard(n)
		return seq, p, nil
	}
	if cap(c.scratch) < n {
		c.scratch = make([]byte, n)
	}
	p := c.scratch[:n]
	if _, err := io.ReadFull(r, p); err != nil {
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
	w := c.w
	if w == nil {
		w = c.writer()
	}
	if _, err := w.Write(c.whdr[:]); err != nil {
		return err
	}
	_, err := w.Write(payload)
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
func (c *Conn) Reader() io.Reader { return c.reader() }

// Flush sends what is buffered; a pooled connection's write buffer then
// goes back to its pool.
func (c *Conn) Flush() error {
	if c.w == nil {
		return nil
	}
	if err := c.w.Flush(); err != nil {
		return err
	}
	if c.wpool != nil && !c.hold {
		c.w.Reset(nil)
		c.wpool.put(c.w)
		c.w = nil
	}
	return nil
}
