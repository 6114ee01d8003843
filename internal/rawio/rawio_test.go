package rawio

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

// A yielding connection yields once before a Read that follows a Write,
// and only then; a plain one never does.
func TestWrapYieldingYieldsOnlyOnAReadAfterAWrite(t *testing.T) {
	yields := 0
	defer func(g func()) { gosched = g }(gosched)
	gosched = func() { yields++ }
	var d net.Dialer
	for _, tc := range []struct {
		name string
		wrap func(net.Conn) net.Conn
		want int
	}{
		{"yielding", WrapYielding, 2},
		{"plain", Wrap, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			yields = 0
			nc, srv := loopback.Pair(t, d.DialContext)
			go io.Copy(srv, srv) // echo
			c := tc.wrap(nc)
			if _, ok := c.(*Conn); !ok {
				t.Fatalf("%T: not wrapped", c)
			}
			b := make([]byte, 1)
			read := func() {
				t.Helper()
				if _, err := io.ReadFull(c, b); err != nil {
					t.Fatal(err)
				}
			}
			write := func(s string) {
				t.Helper()
				if _, err := c.Write([]byte(s)); err != nil {
					t.Fatal(err)
				}
			}
			// A read after a write (yields), a read after a read (not),
			// two writes and a read (once).
			write("ab")
			read()
			read()
			write("c")
			write("d")
			read()
			read()
			if yields != tc.want {
				t.Errorf("%d yields, want %d", yields, tc.want)
			}
		})
	}
}
