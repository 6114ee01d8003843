package blockio

import (
	"bytes"
	"errors"
	"github.com/tandemdb/tandem/internal/loopback"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// pair returns a blocking client connection and the server's end.
func pair(t *testing.T) (*Conn, net.Conn) {
	t.Helper()
	c, srv := loopback.Pair(t, Dial)
	return c.(*Conn), srv
}

func TestRoundTripLargeBothWays(t *testing.T) {
	c, srv := pair(t)
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
}

func TestPeerCloseIsEOF(t *testing.T) {
	c, srv := pair(t)
	srv.Write([]byte("bye"))
	srv.Close()
	b, err := io.ReadAll(c)
	if err != nil || string(b) != "bye" {
		t.Fatalf("ReadAll = %q, %v; want \"bye\", nil (EOF ends it)", b, err)
	}
	if n, err := c.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("Read after EOF = %d, %v", n, err)
	}
}

func TestReadDeadlineTimesOut(t *testing.T) {
	c, _ := pair(t)
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
}

func TestCloseWakesBlockedRead(t *testing.T) {
	c, _ := pair(t)
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
}

// Close while a Read is blocked: the descriptor stays open until that Read
// has returned, so a socket opened in between cannot take its number.
func TestCloseKeepsDescriptorWhileInUse(t *testing.T) {
	c, _ := pair(t)
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
