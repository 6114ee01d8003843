package wire

import (
	"bytes"
	"net"
	"testing"

	"github.com/tandemdb/tandem/internal/loopback"
)

// A pooled connection holds buffers only while it reads or writes: the
// write buffer goes back once flushed, the read buffer when Release finds
// nothing read ahead. What was read ahead stays, and is read next.
func TestPooledConnHoldsBuffersOnlyWhileInUse(t *testing.T) {
	a, b := loopback.Pair(t, (&net.Dialer{}).DialContext)
	w, r := NewPooledConn(a, 64, 64), NewPooledConn(b, 64, 64)
	if w.r != nil || w.w != nil {
		t.Fatal("a new pooled connection holds buffers")
	}
	// Two packets in one flush: the reader's first read takes both.
	if err := w.WriteFrame(1, []byte("first")); err != nil {
		t.Fatal(err)
	}
	if w.w == nil {
		t.Fatal("writing took no write buffer")
	}
	if err := w.WriteFrame(2, []byte("second")); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if w.w != nil {
		t.Fatal("the write buffer was kept after Flush")
	}
	seq, p, err := r.ReadFrame()
	if err != nil || seq != 1 || string(p) != "first" {
		t.Fatalf("first read: %d %q %v", seq, p, err)
	}
	// "second" may still be on its way; wait until it is read ahead.
	for r.r.Buffered() < 4+len("second") {
		if _, err := r.r.Peek(r.r.Buffered() + 1); err != nil {
			t.Fatal(err)
		}
	}
	if r.Release() {
		t.Fatal("Release let go of a read buffer holding a packet")
	}
	if r.r == nil {
		t.Fatal("the read buffer is gone with a packet in it")
	}
	seq, p, err = r.ReadFrame()
	if err != nil || seq != 2 || string(p) != "second" {
		t.Fatalf("second read: %d %q %v", seq, p, err)
	}
	if !r.Release() || r.r != nil || r.w != nil {
		t.Fatal("Release kept the buffers of a connection at rest")
	}
	// Taken again for the next read, from the pool or new: the stream
	// goes on where it was, a frame larger than the buffer too.
	big := bytes.Repeat([]byte("x"), 200)
	for i := range 3 {
		if err := w.WriteFrame(byte(i), big[:100*i]); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		seq, p, err := r.ReadFrame()
		if err != nil || seq != byte(i) || len(p) != 100*i {
			t.Fatalf("frame %d after Release: %d, %d bytes, %v", i, seq, len(p), err)
		}
		r.Release()
	}
	// A connection that is not pooled keeps its own buffers.
	plain := NewConnSize(a, 64, 64)
	if !plain.Release() || plain.r == nil || plain.w == nil {
		t.Fatal("Release changed a connection that is not pooled")
	}
	if r.Detach() != b {
		t.Fatal("Detach of a pooled connection at rest is not its socket")
	}
}

// A connection at rest costs no allocation to take buffers again: they
// come back from the pool.
func TestPooledConnReusesBuffers(t *testing.T) {
	a, b := loopback.Pair(t, (&net.Dialer{}).DialContext)
	w, r := NewPooledConn(a, 1024, 1024), NewPooledConn(b, 1024, 1024)
	payload := []byte("SELECT 1")
	round := func() {
		if err := w.WriteFrame(0, payload); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if _, p, err := r.ReadFrame(); err != nil || !bytes.Equal(p, payload) {
			t.Fatalf("read %q %v", p, err)
		}
		r.Release()
	}
	round()
	if allocs := testing.AllocsPerRun(200, round); allocs != 0 {
		t.Errorf("%.2f allocations a round trip, want 0", allocs)
	}
}
