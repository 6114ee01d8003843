package conn

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/tandemdb/tandem/sandbox/sandboxtest"
	"github.com/tandemdb/tandem/store"
)

// The servers the tests start stop when they end (sandboxtest.Main).
func TestMain(m *testing.M) { os.Exit(sandboxtest.Main(m)) }

// A replay connection holds its read and write buffers only while a call
// runs: a thousand-session replay held 34 MiB of them (16 KiB each way
// per connection) for connections that mostly waited for their turn.
// Between calls it holds none, whatever the call read: rows, an error, a
// result larger than a buffer.
func TestConnHoldsNoBuffersBetweenCalls(t *testing.T) {
	ctx := context.Background()
	c := dialSandbox(t)
	held := func(after string) { t.Helper(); holdsNone(t, c, after) }
	held("the login")
	var r Result
	if err := c.Query(ctx, "SELECT 1", &r); err != nil || r.Rows != 1 {
		t.Fatalf("SELECT 1: %+v %v", r, err)
	}
	held("a query")
	st, err := c.Prepare(ctx, "SELECT REPEAT('x', ?) AS s")
	if err != nil {
		t.Fatal(err)
	}
	held("a prepare")
	for _, n := range []int64{10, 40 << 10} { // a row larger than the 16 KiB read buffer too
		r = Result{}
		if err := c.Execute(ctx, st, []store.Value{{Type: store.TypeLongLong, Int: n}}, 0, false, &r); err != nil || r.Rows != 1 {
			t.Fatalf("execute REPEAT %d: %+v %v", n, r, err)
		}
		held(fmt.Sprintf("an execute returning %d bytes", n))
	}
	r = Result{}
	err = c.Query(ctx, "SELECT * FROM no_such_db.t", &r)
	if se, ok := err.(*ServerError); !ok || se.Code != 1146 {
		t.Fatalf("a query of a missing table: %v, want error 1146", err)
	}
	held("an error")
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	held("a ping")
	// The same answers again, with buffers taken from the pool.
	r = Result{}
	if err := c.Execute(ctx, st, []store.Value{{Type: store.TypeLongLong, Int: 3}}, 0, false, &r); err != nil || r.Rows != 1 || r.Columns != 1 {
		t.Fatalf("execute after the others: %+v %v", r, err)
	}
	held("the last execute")
}

// A connection that runs call after call (--concurrency) keeps the same
// two buffers while it holds them, gives them back with Hold(false) and
// at its Quit, and takes them at each call again after that.
func TestHeldConnKeepsItsBuffersUntilLetGo(t *testing.T) {
	ctx := context.Background()
	c := dialSandbox(t)
	c.Hold(true)
	var r Result
	if err := c.Query(ctx, "SELECT 1", &r); err != nil || r.Rows != 1 {
		t.Fatalf("SELECT 1: %+v %v", r, err)
	}
	if rb, wb := c.wc.Holds(); !rb || !wb {
		t.Fatalf("held, after a query: holds a read buffer %v, a write buffer %v; want both", rb, wb)
	}
	rbuf, wbuf := c.wc.Buffers()
	st, err := c.Prepare(ctx, "SELECT ? + 1")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		r = Result{}
		if err := c.Execute(ctx, st, []store.Value{{Type: store.TypeLongLong, Int: int64(i)}}, 0, false, &r); err != nil || r.Rows != 1 {
			t.Fatalf("execute %d: %+v %v", i, r, err)
		}
	}
	if r2, w2 := c.wc.Buffers(); r2 != rbuf || w2 != wbuf {
		t.Fatalf("held, after a prepare and 3 executes: the buffers changed (read %p → %p, write %p → %p); want the same two", rbuf, r2, wbuf, w2)
	}
	c.Hold(false)
	holdsNone(t, c, "Hold(false)")
	r = Result{}
	if err := c.Query(ctx, "SELECT 2", &r); err != nil || r.Rows != 1 {
		t.Fatalf("SELECT 2: %+v %v", r, err)
	}
	holdsNone(t, c, "a query, not held")
	c.Hold(true)
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	c.Quit()
	holdsNone(t, c, "Quit, held")
}

// dialSandbox is a connection, as root, to the package's InnoDB sandbox;
// it is closed when the test ends.
func dialSandbox(t *testing.T) *Conn {
	t.Helper()
	h := sandboxtest.Server(t, "innodb")
	c, err := Dial(context.Background(), Config{Addr: h.Addr(), User: "root", Caps: DefaultCaps})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// holdsNone fails the test if c holds a read or a write buffer after what
// it says.
func holdsNone(t *testing.T, c *Conn, after string) {
	t.Helper()
	if r, w := c.wc.Holds(); r || w {
		t.Fatalf("after %s: holds a read buffer %v, a write buffer %v; want neither", after, r, w)
	}
}
