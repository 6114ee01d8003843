// Package blockio gives a TCP connection whose reads and writes are plain
// blocking system calls on its own OS thread, bypassing Go's network
// poller: the kernel wakes the waiting thread directly, as in a C client.
// The proxy uses it with --io blocking, which measured better than Go's own
// socket calls on large results and worse on small ones; the default path
// is internal/rawio. The cost is one OS thread per connection while it
// waits, so use it where the number of connections is bounded.
//
// Deadlines map to SO_RCVTIMEO and SO_SNDTIMEO (relative to when they are
// set); Close shuts the socket down first, so a read blocked in another
// goroutine returns.
package blockio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
)

// Conn is a TCP connection served by blocking system calls.
//
// The descriptor is released only when no Read or Write is using it: once
// closed, its number can be reused by the next socket the process opens, and
// a call still holding it would read another connection's bytes.
type Conn struct {
	f             *os.File // owns fd
	fd            int
	local, remote net.Addr

	mu       sync.Mutex
	inflight int  // Reads and Writes using fd now
	closed   bool // Close was called: new calls fail with net.ErrClosed
	released bool // f is closed
	closeErr error
}

// Dial connects like net.Dialer.DialContext, then switches the socket to
// blocking calls.
func Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c, nil // unix sockets and the like: leave them to the poller
	}
	return Wrap(tc)
}

// Wrap moves tc onto blocking calls. tc is closed (the new Conn holds a
// duplicate of its socket); on error tc is left as it was.
func Wrap(tc *net.TCPConn) (*Conn, error) {
	f, err := tc.File() // a duplicate descriptor
	if err != nil {
		return nil, fmt.Errorf("blockio: %w", err)
	}
	fd := int(f.Fd()) // Fd puts the descriptor in blocking mode
	if err := syscall.SetNonblock(fd, false); err != nil {
		f.Close()
		return nil, fmt.Errorf("blockio: %w", err)
	}
	c := &Conn{f: f, fd: fd, local: tc.LocalAddr(), remote: tc.RemoteAddr()}
	tc.Close()
	return c, nil
}

// acquire marks a call using fd; it fails once the Conn is closed.
func (c *Conn) acquire(op string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return &net.OpError{Op: op, Net: "tcp", Source: c.local, Addr: c.remote, Err: net.ErrClosed}
	}
	c.inflight++
	return nil
}

// release ends a call; the last one out of a closed Conn frees fd.
func (c *Conn) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inflight--
	c.releaseLocked()
}

func (c *Conn) releaseLocked() {
	if c.closed && c.inflight == 0 && !c.released {
		c.released = true
		c.closeErr = c.f.Close()
	}
}

func (c *Conn) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	if err := c.acquire("read"); err != nil {
		return 0, err
	}
	defer c.release()
	for {
		n, err := syscall.Read(c.fd, b)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN: // SO_RCVTIMEO expired
			return 0, &timeoutError{"read"}
		case err != nil:
			return 0, c.opErr("read", err)
		case n == 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

func (c *Conn) Write(b []byte) (int, error) {
	if err := c.acquire("write"); err != nil {
		return 0, err
	}
	defer c.release()
	done := 0
	for done < len(b) {
		n, err := syscall.Write(c.fd, b[done:])
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			return done, &timeoutError{"write"}
		case err != nil:
			return done, c.opErr("write", err)
		}
		done += n
	}
	return done, nil
}

// Close shuts the socket down, which wakes a Read or Write blocked in
// another goroutine, and releases it when no call uses it any more.
func (c *Conn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	syscall.Shutdown(c.fd, syscall.SHUT_RDWR)
	c.releaseLocked()
	return c.closeErr
}

// CloseWrite sends FIN, as net.TCPConn.CloseWrite does.
func (c *Conn) CloseWrite() error {
	if err := c.acquire("close"); err != nil {
		return err
	}
	defer c.release()
	return syscall.Shutdown(c.fd, syscall.SHUT_WR)
}

func (c *Conn) LocalAddr() net.Addr  { return c.local }
func (c *Conn) RemoteAddr() net.Addr { return c.remote }

func (c *Conn) SetDeadline(t time.Time) error {
	return errors.Join(c.SetReadDeadline(t), c.SetWriteDeadline(t))
}
func (c *Conn) SetReadDeadline(t time.Time) error {
	return c.setTimeout(syscall.SO_RCVTIMEO, t)
}
func (c *Conn) SetWriteDeadline(t time.Time) error {
	return c.setTimeout(syscall.SO_SNDTIMEO, t)
}

// setTimeout sets a socket timeout from a deadline; zero clears it. A
// deadline already past times out at once (the smallest timeout).
func (c *Conn) setTimeout(opt int, t time.Time) error {
	if err := c.acquire("set"); err != nil {
		return err
	}
	defer c.release()
	var tv syscall.Timeval
	if !t.IsZero() {
		d := max(time.Until(t), time.Microsecond)
		tv = syscall.NsecToTimeval(d.Nanoseconds())
	}
	return syscall.SetsockoptTimeval(c.fd, syscall.SOL_SOCKET, opt, &tv)
}

func (c *Conn) opErr(op string, err error) error {
	return &net.OpError{Op: op, Net: "tcp", Source: c.local, Addr: c.remote, Err: os.NewSyscallError(op, err)}
}

type timeoutError struct{ op string }

func (e *timeoutError) Error() string   { return "blockio: " + e.op + " timed out" }
func (e *timeoutError) Timeout() bool   { return true }
func (e *timeoutError) Temporary() bool { return true }
func (e *timeoutError) Is(target error) bool {
	return target == os.ErrDeadlineExceeded
}
