// Package rawio reads and writes a network connection's non-blocking
// socket with raw system calls, still waiting for readiness through Go's
// poller.
//
// Why: Go's own socket reads and writes tell the scheduler they are in a
// system call (entersyscall), which wakes the sysmon thread, and sysmon then
// hands the processor to another thread when the call runs past 20 µs — as
// a loopback TCP write that delivers to its receiver often does. For a relay
// whose every step is such a call (the proxy), that bookkeeping and the
// thread switches it causes were a third of the CPU. A non-blocking read or
// write returns at once, so it can run as a raw system call, as the runtime
// itself does for its own non-blocking calls; when the socket is not ready
// the goroutine parks on the poller exactly as before. Deadlines and Close
// keep working through net.Conn.
//
// WrapYielding adds one thing for a relay, which answers each read with a
// write on another connection: a read that follows a write on the same
// connection (the proxy reading the server's answer after forwarding a
// command, or the client's next command after relaying an answer) first
// lets the goroutines that are already runnable go ahead (runtime.Gosched).
// Read at once, such a socket is nearly always empty: the read fails with
// EAGAIN and the goroutine parks, to be woken and read again; after the
// others' turns its bytes have often arrived. Measured on the proxy with
// one P (2 CPUs, sysbench point selects at 8 threads through a capturing
// proxy, alternating 3 s rounds against the same proxy without it): reads
// per statement 3.47 to 2.58, epoll waits 0.34 to 0.20; 0.3, 3.5 and 6 %
// more statements a second and 2, 1 and 4 % less CPU per statement (three
// runs of 16 to 24 rounds, the first within its noise), 4 % more at 32
// threads, no difference at 1 thread or on read/write. With two Ps on the
// same 2 CPUs it cost 3 % of the QPS (a yield there hands the goroutine to
// the global queue), so the proxy yields with one P only. Replay's workers,
// which are not relays (a worker has nothing to do but wait for its
// answer), lost 6 % with it.
package rawio

import (
	"io"
	"net"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// Conn is a net.Conn whose Read and Write are raw non-blocking calls.
// A Read may run beside a Write, not beside another Read (nor a Write
// beside a Write), as in every user of a net.Conn here.
type Conn struct {
	net.Conn
	rc syscall.RawConn
	// What a Read and a Write hand their poller callback, which is bound
	// once (Wrap): a closure per call over its arguments went to the heap,
	// two allocations per Read and per Write, four or more per statement a
	// proxy relays.
	r, w      ioState
	readReady func(fd uintptr) bool
	wrReady   func(fd uintptr) bool
	// yield: Gosched before a read that follows a write (WrapYielding);
	// wrote: a Write came since the last Read (atomic: a Write may run
	// beside a Read).
	yield bool
	wrote atomic.Bool
}

// ioState is one direction's call under way: its buffer, what was done,
// the error.
type ioState struct {
	b     []byte
	n     int
	errno syscall.Errno
}

// Wrap returns c on raw calls, or c itself when it has no socket to reach
// (not a *net.TCPConn or *net.UnixConn).
func Wrap(c net.Conn) net.Conn {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return c
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return c
	}
	rw := &Conn{Conn: c, rc: rc}
	rw.readReady, rw.wrReady = rw.readNow, rw.writeNow
	return rw
}

// gosched is runtime.Gosched, a variable for tests.
var gosched = runtime.Gosched

// WrapYielding is Wrap for a relay: a Read that follows a Write on the
// connection lets the runnable goroutines go first (see the package
// comment).
func WrapYielding(c net.Conn) net.Conn {
	w := Wrap(c)
	if rw, ok := w.(*Conn); ok {
		rw.yield = true
	}
	return w
}

// Yielding reports whether c yields before a read that follows a write
// (WrapYielding).
func (c *Conn) Yielding() bool { return c.yield }

// readNow is a Read's callback: one read, false when there is nothing to
// read yet (park until readable).
func (c *Conn) readNow(fd uintptr) bool {
	b := c.r.b
	for {
		r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		switch e {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		}
		c.r.n, c.r.errno = int(r), e
		return true
	}
}

// writeNow is a Write's callback: one write of what is left, false when
// the socket cannot take any (park until writable).
func (c *Conn) writeNow(fd uintptr) bool {
	b := c.w.b[c.w.n:]
	for {
		r, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		switch e {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		case 0:
			c.w.n += int(r)
		default:
			c.w.errno = e
		}
		return true
	}
}

func (c *Conn) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	c.r = ioState{b: b}
	if c.yield && c.wrote.Load() {
		c.wrote.Store(false)
		gosched()
	}
	err := c.rc.Read(c.readReady)
	n, errno := c.r.n, c.r.errno
	c.r.b = nil // the caller's buffer is not kept
	switch {
	case err != nil:
		return 0, err
	case errno != 0:
		return 0, &net.OpError{Op: "read", Net: c.LocalAddr().Network(), Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: os.NewSyscallError("read", errno)}
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

func (c *Conn) Write(b []byte) (int, error) {
	c.w = ioState{b: b}
	if c.yield {
		c.wrote.Store(true)
	}
	defer func() { c.w.b = nil }() // the caller's buffer is not kept
	for c.w.n < len(b) && c.w.errno == 0 {
		if err := c.rc.Write(c.wrReady); err != nil {
			return c.w.n, err
		}
	}
	if c.w.errno != 0 {
		return c.w.n, &net.OpError{Op: "write", Net: c.LocalAddr().Network(), Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: os.NewSyscallError("write", c.w.errno)}
	}
	return c.w.n, nil
}

// PeerClosed reports whether the peer has closed the connection, by a
// non-blocking peek that consumes nothing.
func (c *Conn) PeerClosed() bool {
	closed := false
	if err := c.rc.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		closed = err == nil && n == 0 || err != nil && err != syscall.EAGAIN && err != syscall.EINTR
		return true
	}); err != nil {
		return true
	}
	return closed
}

// SyscallConn returns the raw connection beneath.
func (c *Conn) SyscallConn() (syscall.RawConn, error) { return c.rc, nil }
