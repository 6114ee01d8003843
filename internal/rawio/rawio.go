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
package rawio

import (
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"
)

// Conn is a net.Conn whose Read and Write are raw non-blocking calls.
type Conn struct {
	net.Conn
	rc syscall.RawConn
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
	return &Conn{Conn: c, rc: rc}
}

func (c *Conn) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	var n int
	var errno syscall.Errno
	err := c.rc.Read(func(fd uintptr) bool {
		for {
			r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
			switch e {
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false // park until readable
			}
			n, errno = int(r), e
			return true
		}
	})
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
	done := 0
	var errno syscall.Errno
	for done < len(b) && errno == 0 {
		err := c.rc.Write(func(fd uintptr) bool {
			for {
				r, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&b[done])), uintptr(len(b)-done))
				switch e {
				case syscall.EINTR:
					continue
				case syscall.EAGAIN:
					return false // park until writable
				case 0:
					done += int(r)
				default:
					errno = e
				}
				return true
			}
		})
		if err != nil {
			return done, err
		}
	}
	if errno != 0 {
		return done, &net.OpError{Op: "write", Net: c.LocalAddr().Network(), Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: os.NewSyscallError("write", errno)}
	}
	return done, nil
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
