// Package blockio gives a TCP connection whose reads and writes are plain
// blocking system calls on its own OS thread, bypassing Go's network
// poller: the kernel wakes the waiting thread directly, as in a C client.
// The proxy uses it with --io blocking (its default path is
// internal/rawio); replay's workers use it raw (below), by default. The
// cost is one OS thread per connection while it waits, so use it where the
// number of connections is bounded.
//
// Deadlines map to SO_RCVTIMEO and SO_SNDTIMEO (relative to when they are
// set); Close shuts the socket down first, so a read blocked in another
// goroutine returns.
//
// The socket is a duplicate that Go's poller does not watch: a watched
// socket wakes the thread waiting in epoll on every arriving packet, on top
// of the thread the kernel wakes for the read — two wake-ups per reply.
//
// WrapRaw goes one step further for a client that waits for each reply
// (replay's workers): its calls are raw, invisible to Go's scheduler, so
// the waiting goroutine keeps its thread and its P, and the reply wakes it
// like a C client's thread, with no scheduler work at all. Go's own calls
// (Wrap) tell the scheduler, and while any goroutine is in one the sysmon
// thread wakes every 20 µs to look — 8,000 wake-ups a second measured on
// point selects over eight connections. The price of raw calls is a P per waiting
// connection: the process needs GOMAXPROCS of at least its raw connections
// plus what its other goroutines use. A signal ends a raw wait (the
// runtime's preemption, a garbage collection's stack scan), and the call
// gives the goroutine to the runtime before it waits again, so a raw wait
// never holds up a collection; the socket timeouts bound each wait to rawSlice so that
// even with preemption signals turned off a wait comes back to Go.
package blockio

import (
	"context"
	"errors"
	"fmt"
	"golang.org/x/sys/unix"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// rawSlice bounds one raw wait in the kernel (see the package comment). A
// short one costs a kernel timer per read: 1 ms halved the throughput of
// point selects, 10 ms cost a quarter, against 1 s.
var rawSlice = time.Second // a variable for tests

// Conn is a TCP connection served by blocking system calls.
//
// The descriptor is released only when no Read or Write is using it: once
// closed, its number can be reused by the next socket the process opens, and
// a call still holding it would read another connection's bytes.
type Conn struct {
	fd            int // a duplicate the Conn owns, not watched by Go's poller
	local, remote net.Addr
	raw           bool

	// raw: the deadlines, enforced by Read and Write (the socket timeouts
	// bound each wait to rawSlice instead)
	rdl, wdl time.Time

	mu       sync.Mutex
	inflight int  // Reads and Writes using fd now
	closed   bool // Close was called: new calls fail with net.ErrClosed
	released bool // f is closed
	closeErr error
}

// Dial connects like net.Dialer.DialContext, then switches the socket to
// blocking calls.
func Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	return dial(ctx, network, addr, false)
}

// DialRaw is Dial with raw calls (see WrapRaw).
func DialRaw(ctx context.Context, network, addr string) (net.Conn, error) {
	return dial(ctx, network, addr, true)
}

func dial(ctx context.Context, network, addr string, raw bool) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c, nil // unix sockets and the like: leave them to the poller
	}
	bc, err := wrap(tc, raw)
	if err != nil {
		tc.Close()
		return nil, err
	}
	return bc, nil
}

// Wrap moves tc onto blocking calls. tc is closed (the new Conn holds a
// duplicate of its socket); on error tc is left as it was.
func Wrap(tc *net.TCPConn) (*Conn, error) { return wrap(tc, false) }

// WrapRaw moves tc onto raw blocking calls that keep the goroutine's P
// while they wait (see the package comment), for a connection whose
// goroutine only ever waits on it. tc is closed; on error it is left as it
// was.
func WrapRaw(tc *net.TCPConn) (*Conn, error) { return wrap(tc, true) }

func wrap(tc *net.TCPConn, raw bool) (*Conn, error) {
	sc, err := tc.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("blockio: %w", err)
	}
	fd := -1
	var serr error
	if err := sc.Control(func(s uintptr) {
		// A duplicate Go's poller does not know; closing tc then takes the
		// socket out of the poller's epoll set.
		r, _, e := syscall.Syscall(syscall.SYS_FCNTL, s, syscall.F_DUPFD_CLOEXEC, 0)
		if e != 0 {
			serr = os.NewSyscallError("fcntl", e)
			return
		}
		fd = int(r)
	}); err != nil {
		return nil, fmt.Errorf("blockio: %w", err)
	}
	if serr != nil {
		return nil, fmt.Errorf("blockio: %w", serr)
	}
	c := &Conn{fd: fd, local: tc.LocalAddr(), remote: tc.RemoteAddr(), raw: raw}
	if err := c.setup(); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("blockio: %w", err)
	}
	tc.Close()
	return c, nil
}

// setup makes the socket blocking (the flag is shared with tc's descriptor,
// which is about to close) and, for raw calls, bounds each wait.
func (c *Conn) setup() error {
	if err := syscall.SetNonblock(c.fd, false); err != nil {
		return os.NewSyscallError("fcntl", err)
	}
	if c.raw {
		return errors.Join(c.sockTimeout(syscall.SO_RCVTIMEO, rawSlice), c.sockTimeout(syscall.SO_SNDTIMEO, rawSlice))
	}
	return nil
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
		if err := syscall.Close(c.fd); err != nil {
			c.closeErr = c.opErr("close", err)
		}
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
		n, err := c.call(syscall.SYS_READ, b)
		switch {
		case err == syscall.EINTR && !c.raw:
			continue
		case err == syscall.EINTR, err == syscall.EAGAIN: // a signal, or the socket timeout expired
			if c.raw && c.waitMore(syscall.SO_RCVTIMEO, err) {
				continue
			}
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
		n, err := c.call(syscall.SYS_WRITE, b[done:])
		switch {
		case err == syscall.EINTR && !c.raw:
			continue
		case err == syscall.EINTR, err == syscall.EAGAIN:
			if c.raw && c.waitMore(syscall.SO_SNDTIMEO, err) {
				continue
			}
			return done, &timeoutError{"write"}
		case err != nil:
			return done, c.opErr("write", err)
		}
		done += n
	}
	return done, nil
}

// call is one read or write: raw, or through Go's syscall package, which
// tells the scheduler.
func (c *Conn) call(trap uintptr, b []byte) (int, error) {
	var r uintptr
	var e syscall.Errno
	if c.raw {
		r, _, e = syscall.RawSyscall(trap, uintptr(c.fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	} else {
		r, _, e = syscall.Syscall(trap, uintptr(c.fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	}
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

// waitMore reports whether a raw wait goes on after a signal (EINTR) or
// the end of its slice (EAGAIN): the deadline, if any, has not passed. The
// socket timeout restarts with every call, so the next wait is cut to the
// time left.
//
// After a signal, the runtime first gets the goroutine it signalled for: a
// preemption (sysmon's, every 10 ms of a long wait), or a stop for a
// garbage collection's stack scan. Both take the goroutine at a function's
// stack check, which checkpoint has (it calls, so it is not a leaf).
// runtime.Gosched lets the goroutine go too, but ignores a stop request, so
// the collector signals again until it catches the goroutine between two
// waits: up to 2,700 signals for a collection, measured, against five.
func (c *Conn) waitMore(opt int, why error) bool {
	if why == syscall.EINTR {
		checkpoint()
	}
	c.mu.Lock()
	deadline := c.rdl
	if opt == syscall.SO_SNDTIMEO {
		deadline = c.wdl
	}
	c.mu.Unlock()
	if deadline.IsZero() {
		return true
	}
	left := time.Until(deadline)
	if left <= 0 {
		return false
	}
	c.sockTimeout(opt, min(max(left, time.Microsecond), rawSlice)) // (a zero timeout would be none)
	return true
}

//go:noinline
func checkpoint() { leaf() }

//go:noinline
func leaf() {}

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
// deadline already past times out at once (the smallest timeout). With raw
// calls the Conn keeps the deadline and the timeout is at most rawSlice.
func (c *Conn) setTimeout(opt int, t time.Time) error {
	if err := c.acquire("set"); err != nil {
		return err
	}
	defer c.release()
	var d time.Duration
	if !t.IsZero() {
		d = max(time.Until(t), time.Microsecond)
	}
	if c.raw {
		c.mu.Lock()
		if opt == syscall.SO_RCVTIMEO {
			c.rdl = t
		} else {
			c.wdl = t
		}
		c.mu.Unlock()
		if d == 0 || d > rawSlice {
			d = rawSlice
		}
	}
	return c.sockTimeout(opt, d)
}

func (c *Conn) sockTimeout(opt int, d time.Duration) error {
	tv := syscall.NsecToTimeval(d.Nanoseconds())
	return os.NewSyscallError("setsockopt", syscall.SetsockoptTimeval(c.fd, syscall.SOL_SOCKET, opt, &tv))
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

// PeerClosed reports whether the peer has closed the connection (or it
// failed): a non-blocking peek that reads nothing sees end of stream. It
// consumes nothing, so it may run beside a Read.
func (c *Conn) PeerClosed() bool {
	if err := c.acquire("peek"); err != nil {
		return true
	}
	defer c.release()
	return peerClosed(c.fd)
}

// peerClosed asks the kernel, without blocking or consuming, whether the
// peer has shut its side (its FIN arrived) or the connection failed.
// POLLRDHUP tells it even with unread bytes in front of the FIN: a TLS
// peer's close_notify alert, a MySQL server's last ERR packet; a peek
// for end of stream would see only those bytes and say open.
func peerClosed(fd int) bool {
	p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}}
	n, err := unix.Poll(p, 0)
	switch {
	case err == unix.EINTR:
		return false
	case err != nil:
		return true
	}
	return n > 0 && p[0].Revents&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR|unix.POLLNVAL) != 0
}

// PeerClosedRaw is PeerClosed for a connection on Go's poller.
func PeerClosedRaw(rc syscall.RawConn) bool {
	closed := false
	if err := rc.Read(func(fd uintptr) bool { closed = peerClosed(int(fd)); return true }); err != nil {
		return true
	}
	return closed
}

// Control runs f with the socket's descriptor, as syscall.RawConn's
// Control does; it fails once the Conn is closed.
func (c *Conn) Control(f func(fd uintptr)) error {
	if err := c.acquire("control"); err != nil {
		return err
	}
	defer c.release()
	f(uintptr(c.fd))
	return nil
}
