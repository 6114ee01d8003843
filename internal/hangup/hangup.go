// Package hangup tells, at once, when the peer of a registered connection
// shuts it. One epoll set, edge-triggered on EPOLLRDHUP (the peer's FIN,
// even behind unread bytes: a TLS close_notify, a server's last ERR
// packet), is watched by one goroutine. A connection costs two system
// calls, to register and to remove it; its reads and writes cost nothing.
//
// Why: a proxy whose client waits for its next command does not read its
// backend, so it learns that the server closed the connection (KILL,
// wait_timeout) only when it next looks. Directly, the client's socket
// closes at that moment, and connection pools drop the connection before
// using it again.
package hangup

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Watcher watches registered connections for their peer's close.
type Watcher struct {
	epfd, wake int
	mu         struct {
		sync.Mutex
		next   uint64
		fns    map[uint64]func()
		closed bool
	}
	done chan struct{}
}

// New starts a watcher.
func New() (*Watcher, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("hangup: epoll_create1: %w", err)
	}
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("hangup: eventfd: %w", err)
	}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, wake, &unix.EpollEvent{Events: unix.EPOLLIN}); err != nil { // token 0
		unix.Close(wake)
		unix.Close(epfd)
		return nil, fmt.Errorf("hangup: epoll_ctl: %w", err)
	}
	w := &Watcher{epfd: epfd, wake: wake, done: make(chan struct{})}
	w.mu.fns = map[uint64]func(){}
	go w.run()
	return w, nil
}

// controller is a connection whose socket descriptor can be reached:
// *net.TCPConn and the like through SyscallConn, or a Control of its own.
type controller interface {
	Control(func(fd uintptr)) error
}

// ErrNoSocket: the connection has no socket to watch.
var ErrNoSocket = errors.New("hangup: the connection has no socket to watch")

// Innermost is the connection beneath c's wrappers (*tls.Conn, and any
// other with a NetConn method): the one with the socket.
func Innermost(c net.Conn) net.Conn {
	for {
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return c
		}
		c = u.NetConn()
	}
}

func socketOf(c net.Conn) (controller, error) {
	switch v := Innermost(c).(type) {
	case controller:
		return v, nil
	case syscall.Conn:
		rc, err := v.SyscallConn()
		if err != nil {
			return nil, err
		}
		return rc, nil
	}
	return nil, ErrNoSocket
}

// Add calls fn, from the watcher's goroutine, when c's peer shuts the
// connection or it fails; at most once. remove, which must be called
// before c is closed, stops watching it.
func (w *Watcher) Add(c net.Conn, fn func()) (remove func(), err error) {
	sc, err := socketOf(c)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	if w.mu.closed {
		w.mu.Unlock()
		return nil, errors.New("hangup: the watcher is closed")
	}
	w.mu.next++
	tok := w.mu.next
	w.mu.fns[tok] = fn
	w.mu.Unlock()
	ev := unix.EpollEvent{Events: unix.EPOLLRDHUP | unix.EPOLLET, Fd: int32(uint32(tok)), Pad: int32(uint32(tok >> 32))}
	var cerr error
	if err := sc.Control(func(fd uintptr) { cerr = unix.EpollCtl(w.epfd, unix.EPOLL_CTL_ADD, int(fd), &ev) }); err != nil || cerr != nil {
		w.forget(tok)
		return nil, fmt.Errorf("hangup: epoll_ctl: %w", errors.Join(err, cerr))
	}
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.mu.fns, tok)
		if w.mu.closed {
			return // epfd is closed, or about to be
		}
		// A closed connection fails Control: the kernel dropped it from
		// the set with its last descriptor.
		sc.Control(func(fd uintptr) { unix.EpollCtl(w.epfd, unix.EPOLL_CTL_DEL, int(fd), nil) })
	}, nil
}

func (w *Watcher) forget(tok uint64) {
	w.mu.Lock()
	delete(w.mu.fns, tok)
	w.mu.Unlock()
}

func (w *Watcher) run() {
	defer close(w.done)
	events := make([]unix.EpollEvent, 64)
	for {
		n, err := unix.EpollWait(w.epfd, events, -1)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return
		}
		for _, ev := range events[:n] {
			tok := uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
			if tok == 0 {
				return // Close
			}
			w.mu.Lock()
			fn := w.mu.fns[tok]
			delete(w.mu.fns, tok) // at most once
			w.mu.Unlock()
			if fn != nil {
				fn()
			}
		}
	}
}

// Close stops the watcher; connections still registered are no longer
// watched.
func (w *Watcher) Close() error {
	w.mu.Lock()
	if w.mu.closed {
		w.mu.Unlock()
		return nil
	}
	w.mu.closed = true
	w.mu.Unlock()
	one := [8]byte{1}
	unix.Write(w.wake, one[:])
	<-w.done
	unix.Close(w.wake)
	return unix.Close(w.epfd)
}
