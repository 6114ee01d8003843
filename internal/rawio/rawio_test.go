package rawio

import (
	"bytes"
	"errors"
	"github.com/tandemdb/tandem/internal/loopback"
	"io"
	"net"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// pair returns a raw client connection and the server's end.
func pair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	var d net.Dialer
	nc, srv := loopback.Pair(t, d.DialContext)
	c := Wrap(nc)
	if _, ok := c.(*Conn); !ok {
		t.Fatalf("Wrap(%T) did not wrap", nc)
	}
	return c, srv
}

func TestLargeRoundTripWaitsForReadiness(t *testing.T) {
	c, srv := pair(t)
	go io.Copy(srv, srv) // echo
	// 8 MiB: more than the socket buffers hold, so writes meet EAGAIN and
	// park, and reads find nothing and park.
	want := bytes.Repeat([]byte("0123456789abcdef"), 1<<19)
	go func() {
		if n, err := c.Write(want); err != nil || n != len(want) {
			t.Errorf("Write = %d, %v", n, err)
		}
	}()
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("echoed bytes differ")
	}
}

func TestEOFDeadlineAndClose(t *testing.T) {
	c, srv := pair(t)
	srv.Write([]byte("bye"))
	srv.Close()
	if b, err := io.ReadAll(c); err != nil || string(b) != "bye" {
		t.Fatalf("ReadAll = %q, %v", b, err)
	}

	c, _ = pair(t)
	c.SetReadDeadline(time.Now().Add(30 * time.Millisecond))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read past the deadline = %v, want os.ErrDeadlineExceeded", err)
	}
	c.SetReadDeadline(time.Time{})
	done := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 1))
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	c.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("blocked Read after Close = %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not wake the parked Read")
	}
	if _, err := c.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Write after Close = %v, want net.ErrClosed", err)
	}
}

func TestWrapLeavesOtherConnsAlone(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if Wrap(a) != a {
		t.Fatal("a net.Pipe has no socket; Wrap must return it as it is")
	}
}

// A proxy reads and writes each packet of every statement: neither call
// may allocate (a closure per call did, two allocations each).
func TestReadAndWriteDoNotAllocate(t *testing.T) {
	c, srv := pair(t)
	go io.Copy(srv, srv) // echo
	out, in := []byte("SELECT 1 FROM dual"), make([]byte, 64)
	roundTrip := func() {
		if n, err := c.Write(out); err != nil || n != len(out) {
			t.Fatalf("Write = %d, %v", n, err)
		}
		for got := 0; got < len(out); {
			n, err := c.Read(in[got:])
			if err != nil {
				t.Fatal(err)
			}
			got += n
		}
	}
	roundTrip() // the poller's first registration
	if n := testing.AllocsPerRun(200, roundTrip); n != 0 {
		t.Errorf("a write and a read: %v allocations, want 0", n)
	}
	if !bytes.Equal(in[:len(out)], out) {
		t.Errorf("echoed %q, want %q", in[:len(out)], out)
	}
}

// A yielding connection lets a runnable goroutine go first when it reads
// after a write, and only then: with one P, a goroutine started just before
// the Read runs before it only if the Read yields, since the bytes it reads
// are already there (it never parks).
func TestWrapYieldingYieldsOnlyOnAReadAfterAWrite(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var d net.Dialer
	for _, tc := range []struct {
		name      string
		wrap      func(net.Conn) net.Conn
		write     bool
		wantFirst bool // the other goroutine ran before Read returned
	}{
		{"yielding, read after a write", WrapYielding, true, true},
		{"yielding, read after a read", WrapYielding, false, false},
		{"plain, read after a write", Wrap, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc, srv := loopback.Pair(t, d.DialContext)
			c := tc.wrap(nc)
			if _, ok := c.(*Conn); !ok {
				t.Fatalf("%T: not wrapped", c)
			}
			in := make([]byte, 1)
			// Two bytes in one segment: the first Read takes one (and may
			// park until they arrive), the second finds the other there. It
			// is "after a read" unless a Write comes between.
			if _, err := srv.Write([]byte("ab")); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Read(in); err != nil || in[0] != 'a' {
				t.Fatalf("first Read = %q, %v", in, err)
			}
			if tc.write {
				if _, err := c.Write([]byte("q")); err != nil {
					t.Fatal(err)
				}
			}
			var ran atomic.Bool
			go ran.Store(true)
			if _, err := c.Read(in); err != nil || in[0] != 'b' {
				t.Fatalf("second Read = %q, %v", in, err)
			}
			if got := ran.Load(); got != tc.wantFirst {
				t.Errorf("the runnable goroutine ran before the Read returned: %v, want %v", got, tc.wantFirst)
			}
		})
	}
}
