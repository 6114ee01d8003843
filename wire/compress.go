package wire

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"sync"

	"github.com/klauspost/compress/zlib"
)

// The compressed protocol (CLIENT_COMPRESS, zlib). After the login's OK
// both sides wrap their packets: each compressed packet is a 7-byte header
// (the compressed payload's length, a sequence id of its own, the length
// before compression — 0 when the payload was sent as it is) and a
// payload that holds a stretch of the ordinary packet stream: a packet
// may span several compressed packets, and one may hold several.
//
// Sequence ids: a command starts at 0, and each compressed packet after
// it, either way, takes the next id, as the ordinary ids do. The side
// that starts a command resets (CompressConn.NewCommand); a packet read
// sets the next id to follow it.

// compressHeader is the compressed packet's header size.
const compressHeader = 7

// minCompress: payloads shorter than this go uncompressed, as the
// servers' and client libraries' MIN_COMPRESS_LENGTH (50) does.
const minCompress = 50

// maxCompressed bounds one compressed packet's payload before compression
// (its header's 3-byte length).
const maxCompressed = MaxPayload

// CompressConn is a connection that speaks the compressed protocol
// beneath: Read returns the packet stream decompressed, and every Write
// goes out as compressed packets (one per Write of up to 16 MiB). Above
// it, Conn frames packets as on any connection. It is safe for one
// reader and one writer at once (a session relayed as bytes).
type CompressConn struct {
	net.Conn
	r    *bufio.Reader
	in   []byte // decompressed bytes not yet read
	inb  bytes.Buffer
	zr   io.ReadCloser
	hdr  [compressHeader]byte
	zbuf bytes.Buffer
	zw   *zlib.Writer
	out  []byte

	mu  sync.Mutex
	seq byte
}

// NewCompressConn wraps c, which has just ended its login, in the
// compressed protocol.
func NewCompressConn(c net.Conn) *CompressConn {
	return &CompressConn{Conn: c, r: bufio.NewReaderSize(c, bufSize)}
}

// NetConn is the connection beneath, as tls.Conn's.
func (c *CompressConn) NetConn() net.Conn { return c.Conn }

// NewCommand makes the next compressed packet written the first of a
// command (sequence id 0).
func (c *CompressConn) NewCommand() {
	c.mu.Lock()
	c.seq = 0
	c.mu.Unlock()
}

// Seq is the sequence id the next compressed packet written takes.
func (c *CompressConn) Seq() byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seq
}

// Read returns decompressed bytes of the packet stream.
func (c *CompressConn) Read(b []byte) (int, error) {
	for len(c.in) == 0 {
		if err := c.readPacket(); err != nil {
			return 0, err
		}
	}
	n := copy(b, c.in)
	c.in = c.in[n:]
	return n, nil
}

// readPacket reads one compressed packet into c.in.
func (c *CompressConn) readPacket() error {
	if _, err := io.ReadFull(c.r, c.hdr[:]); err != nil {
		return err
	}
	clen := int(c.hdr[0]) | int(c.hdr[1])<<8 | int(c.hdr[2])<<16
	seq := c.hdr[3]
	ulen := int(c.hdr[4]) | int(c.hdr[5])<<8 | int(c.hdr[6])<<16
	c.mu.Lock()
	c.seq = seq + 1
	c.mu.Unlock()
	c.inb.Reset()
	if ulen == 0 {
		// Sent as it is.
		c.inb.Grow(clen)
		if _, err := io.CopyN(&c.inb, c.r, int64(clen)); err != nil {
			return unexpected(err)
		}
		c.in = c.inb.Bytes()
		return nil
	}
	lr := &limitedReader{r: c.r, n: int64(clen)}
	var err error
	if c.zr == nil {
		c.zr, err = zlib.NewReader(lr)
	} else {
		err = c.zr.(zlib.Resetter).Reset(lr, nil)
	}
	if err != nil {
		return fmt.Errorf("%w: compressed packet %d: %v", ErrMalformed, seq, err)
	}
	c.inb.Grow(ulen)
	n, err := io.Copy(&c.inb, io.LimitReader(c.zr, int64(ulen)+1))
	if err != nil {
		return fmt.Errorf("%w: compressed packet %d: %v", ErrMalformed, seq, err)
	}
	if n != int64(ulen) {
		return fmt.Errorf("%w: compressed packet %d holds %d bytes, its header says %d", ErrMalformed, seq, n, ulen)
	}
	// What zlib did not read of the payload (a checksum it stopped
	// before) must not be taken for the next header.
	if _, err := c.r.Discard(int(lr.n)); err != nil {
		return unexpected(err)
	}
	c.in = c.inb.Bytes()
	return nil
}

// limitedReader reads at most n bytes of r, byte by byte too, so that
// zlib reads it as it is instead of through a buffer of its own.
type limitedReader struct {
	r *bufio.Reader
	n int64
}

func (l *limitedReader) Read(b []byte) (int, error) {
	if l.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(b)) > l.n {
		b = b[:l.n]
	}
	n, err := l.r.Read(b)
	l.n -= int64(n)
	return n, err
}

func (l *limitedReader) ReadByte() (byte, error) {
	if l.n <= 0 {
		return 0, io.EOF
	}
	b, err := l.r.ReadByte()
	if err == nil {
		l.n--
	}
	return b, err
}

// Write sends b as compressed packets.
func (c *CompressConn) Write(b []byte) (int, error) {
	written := 0
	for len(b) > 0 {
		chunk := b[:min(len(b), maxCompressed)]
		if err := c.writePacket(chunk); err != nil {
			return written, err
		}
		written += len(chunk)
		b = b[len(chunk):]
	}
	return written, nil
}

func (c *CompressConn) writePacket(p []byte) error {
	payload, ulen := p, 0
	if len(p) >= minCompress {
		c.zbuf.Reset()
		if c.zw == nil {
			c.zw = zlib.NewWriter(&c.zbuf)
		} else {
			c.zw.Reset(&c.zbuf)
		}
		if _, err := c.zw.Write(p); err != nil {
			return err
		}
		if err := c.zw.Close(); err != nil {
			return err
		}
		if c.zbuf.Len() < len(p) {
			payload, ulen = c.zbuf.Bytes(), len(p)
		}
	}
	c.mu.Lock()
	seq := c.seq
	c.seq++
	c.mu.Unlock()
	n := len(payload)
	c.out = append(c.out[:0], byte(n), byte(n>>8), byte(n>>16), seq, byte(ulen), byte(ulen>>8), byte(ulen>>16))
	c.out = append(c.out, payload...)
	_, err := c.Conn.Write(c.out)
	return err
}
