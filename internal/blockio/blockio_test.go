package blockio

import (
	"bytes"
	"errors"
	"github.com/tandemdb/tandem/internal/loopback"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// pair returns a blocking client connection and the server's end; raw
// picks DialRaw.
func pair(t *testing.T, raw bool) (*Conn, net.Conn) {
	t.Helper()
	dial := Dial
	if raw {
		dial = DialRaw
	}
	c, srv := loopback.Pair(t, dial)
	return c.(*Conn), srv
}

// bothModes runs f with Go's calls and with raw calls.
func bothModes(t *testing.T, f func(t *testing.T, raw bool)) {
	for _, raw := range []bool{false, true} {
		name := "syscall"
		if raw {
			name = "raw"
		}
		t.Run(name, func(t *testing.T) { f(t, raw) })
	}
}

func TestRoundTripLargeBothWays(t *testing.T) {
	bothModes(t, func(t *testing.T, raw bool) {
		c, srv := pair(t, raw)
		go io.Copy(srv, srv)                                    // echo
		want := bytes.Repeat([]byte("0123456789abcdef"), 1<<18) // 4 MiB: several partial writes and reads
		go func() {
			if _, err := c.Write(want); err != nil {
				t.Error(err)
			}
		}()
		got := make([]byte, len(want))
		if _, err := io.ReadFull(c, got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatal("echoed bytes differ")
		}
		if c.RemoteAddr().String() != srv.LocalAddr().String() || c.LocalAddr().String() != srv.RemoteAddr().String() {
			t.Errorf("addresses: local %v remote %v; server sees %v %v", c.LocalAddr(), c.RemoteAddr(), srv.LocalAddr(), srv.RemoteAddr())
		}
	})
}

func TestPeerCloseIsEOF(t *testing.T) {
	bothModes(t, func(t *testing.T, raw bool) {
		c, srv := pair(t, raw)
		srv.Write([]byte("bye"))
		srv.Close()
		b, err := io.ReadAll(c)
		if err != nil || string(b) != "bye" {
			t.Fatalf("ReadAll = %q, %v; want \"bye\", nil (EOF ends it)", b, err)
		}
		if n, err := c.Read(make([]byte, 1)); n != 0 || err != io.EOF {
			t.Fatalf("Read after EOF = %d, %v", n, err)
		}
	})
}

func TestReadDeadlineTimesOut(t *testing.T) {
	bothModes(t, func(t *testing.T, raw bool) {
		c, _ := pair(t, raw)
		c.SetReadDeadline(time.Now().Add(30 * time.Millisecond))
		start := time.Now()
		_, err := c.Read(make([]byte, 1))
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("Read = %v; want a timeout that is os.ErrDeadlineExceeded", err)
		}
		if waited := time.Since(start); waited < 25*time.Millisecond {
			t.Fatalf("timed out after %v, before the deadline", waited)
		}
		c.SetReadDeadline(time.Time{}) // cleared: the next read waits for data
	})
}

func TestCloseWakesBlockedRead(t *testing.T) {
	bothModes(t, func(t *testing.T, raw bool) {
		c, _ := pair(t, raw)
		done := make(chan error, 1)
		go func() {
			_, err := c.Read(make([]byte, 1))
			done <- err
		}()
		time.Sleep(20 * time.Millisecond)
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err == nil {
				t.Fatal("blocked Read returned no error after Close")
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Close did not wake the blocked Read")
		}
		if err := c.Close(); err != nil {
			t.Fatalf("second Close = %v", err)
		}
		// After Close every call fails with net.ErrClosed: the descriptor number
		// may already belong to another socket.
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
			t.Errorf("Read after Close = %v, want net.ErrClosed", err)
		}
		if _, err := c.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
			t.Errorf("Write after Close = %v, want net.ErrClosed", err)
		}
		if err := c.SetReadDeadline(time.Now()); !errors.Is(err, net.ErrClosed) {
			t.Errorf("SetReadDeadline after Close = %v, want net.ErrClosed", err)
		}
	})
}

// Close while a Read is blocked: the descriptor stays open until that Read
// has returned, so a socket opened in between cannot take its number.
func TestCloseKeepsDescriptorWhileInUse(t *testing.T) {
	bothModes(t, func(t *testing.T, raw bool) {
		c, _ := pair(t, raw)
		started := make(chan struct{})
		done := make(chan struct{})
		go func() {
			close(started)
			c.Read(make([]byte, 1))
			close(done)
		}()
		<-started
		time.Sleep(20 * time.Millisecond)
		c.mu.Lock()
		inflight := c.inflight
		c.mu.Unlock()
		if inflight != 1 {
			t.Fatalf("inflight = %d while a Read blocks, want 1", inflight)
		}
		c.Close()
		<-done
		c.mu.Lock()
		released := c.released
		c.mu.Unlock()
		if !released {
			t.Fatal("descriptor not released after the last call returned")
		}
	})
}

func TestWrapAccepted(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			return
		}
		c.Write([]byte("ping"))
		io.Copy(io.Discard, c)
	}()
	a, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	c, err := Wrap(a.(*net.TCPConn))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b := make([]byte, 4)
	if _, err := io.ReadFull(c, b); err != nil || string(b) != "ping" {
		t.Fatalf("read %q, %v", b, err)
	}
	if _, err := a.Write([]byte("x")); err == nil {
		t.Fatal("the wrapped net.TCPConn is still open; Wrap must close it")
	}
}

// A raw wait is cut into slices; a deadline longer than one still holds.
func TestRawDeadlineOutlastsSlices(t *testing.T) {
	defer func(s time.Duration) { rawSlice = s }(rawSlice)
	rawSlice = 20 * time.Millisecond
	c, _ := pair(t, true)
	c.SetReadDeadline(time.Now().Add(150 * time.Millisecond))
	start := time.Now()
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read = %v; want os.ErrDeadlineExceeded", err)
	}
	if waited := time.Since(start); waited < 145*time.Millisecond {
		t.Fatalf("timed out after %v: a slice's end was taken for the deadline", waited)
	}
}

// A goroutine waiting in a raw read holds its P, but a garbage collection
// (which must stop every goroutine) still runs: the runtime's signal ends
// the wait and the goroutine stops for it. With the slice at a minute, a
// collection that had to wait for the read would hang the test.
func TestRawWaitLetsGCRun(t *testing.T) {
	defer func(s time.Duration) { rawSlice = s }(rawSlice)
	rawSlice = time.Minute
	c, srv := pair(t, true)
	got := make(chan string, 1)
	go func() {
		b := make([]byte, 5)
		n, err := io.ReadFull(c, b)
		if err != nil {
			t.Error(err)
		}
		got <- string(b[:n])
	}()
	time.Sleep(20 * time.Millisecond) // the Read is waiting
	done := make(chan struct{})
	go func() {
		for range 3 {
			runtime.GC()
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("garbage collection did not finish while a raw Read waited")
	}
	srv.Write([]byte("hello"))
	if s := <-got; s != "hello" {
		t.Fatalf("Read after the collections got %q", s)
	}
}

// Wrapped sockets are not in Go's epoll set: a packet for them wakes only
// the reading thread. The set is read from /proc: every epoll descriptor's
// fdinfo lists the inodes it watches.
func TestNotWatchedByPoller(t *testing.T) {
	inode := func(fd int) uint64 {
		var st syscall.Stat_t
		if err := syscall.Fstat(fd, &st); err != nil {
			t.Fatal(err)
		}
		return st.Ino
	}
	watched := func() map[uint64]bool {
		m := map[uint64]bool{}
		fds, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Skip("no /proc: ", err)
		}
		for _, e := range fds {
			if l, _ := os.Readlink("/proc/self/fd/" + e.Name()); l != "anon_inode:[eventpoll]" {
				continue
			}
			info, _ := os.ReadFile("/proc/self/fdinfo/" + e.Name())
			for _, line := range strings.Split(string(info), "\n") {
				if i := strings.Index(line, " ino:"); strings.HasPrefix(line, "tfd:") && i > 0 {
					f := strings.Fields(line[i+5:])
					if ino, err := strconv.ParseUint(f[0], 16, 64); err == nil {
						m[ino] = true
					}
				}
			}
		}
		return m
	}
	// The check itself: a plain connection's socket is in the set.
	plain, _ := loopback.Pair(t, (&net.Dialer{}).DialContext)
	var plainFD int
	sc, _ := plain.(*net.TCPConn).SyscallConn()
	sc.Control(func(fd uintptr) { plainFD = int(fd) })
	if !watched()[inode(plainFD)] {
		t.Fatal("a net.TCPConn's socket is not in the epoll set read from /proc; the check cannot work")
	}
	bothModes(t, func(t *testing.T, raw bool) {
		c, _ := pair(t, raw)
		if watched()[inode(c.fd)] {
			t.Fatal("the wrapped socket is still watched by Go's poller")
		}
	})
}
