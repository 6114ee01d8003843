package hangup

import (
	"net"
	"testing"
	"time"
)

func pair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return c, s
}

// The peer's close is told once, also behind bytes nobody read; a
// connection removed before its peer closes is not told; neither is
// traffic.
func TestWatcherTellsThePeersClose(t *testing.T) {
	w, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	told := make(chan string, 4)
	a, aPeer := pair(t)
	if _, err := w.Add(a, func() { told <- "a" }); err != nil {
		t.Fatal(err)
	}
	b, bPeer := pair(t)
	removeB, err := w.Add(b, func() { told <- "b" })
	if err != nil {
		t.Fatal(err)
	}
	// Traffic both ways is no close.
	aPeer.Write([]byte("hello"))
	buf := make([]byte, 5)
	if _, err := a.Read(buf); err != nil {
		t.Fatal(err)
	}
	a.Write([]byte("x"))
	select {
	case who := <-told:
		t.Fatalf("%s told of a close on traffic", who)
	case <-time.After(50 * time.Millisecond):
	}
	removeB()
	bPeer.Close()
	aPeer.Write([]byte("last words")) // unread, in front of the FIN
	aPeer.Close()
	select {
	case who := <-told:
		if who != "a" {
			t.Fatalf("told %s, want a", who)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the peer's close was not told")
	}
	select {
	case who := <-told:
		t.Fatalf("told %s again", who)
	case <-time.After(50 * time.Millisecond):
	}
	// Registered after the peer closed: told too.
	c, cPeer := pair(t)
	cPeer.Close()
	time.Sleep(10 * time.Millisecond)
	if _, err := w.Add(c, func() { told <- "c" }); err != nil {
		t.Fatal(err)
	}
	select {
	case who := <-told:
		if who != "c" {
			t.Fatalf("told %s, want c", who)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a close before Add was not told")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Add(b, func() {}); err == nil {
		t.Error("Add after Close succeeded")
	}
}
