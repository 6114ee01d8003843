package replay

import (
	"context"
	"net"
	"testing"

	"github.com/tandemdb/tandem/capture/synth"
	"github.com/tandemdb/tandem/replay/conn"
	"github.com/tandemdb/tandem/sandbox/sandboxtest"
	"github.com/tandemdb/tandem/store"
)

// countingConn counts the bytes read from the server.
type countingConn struct {
	net.Conn
	read int
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read += n
	return n, err
}

// A client that asked for MariaDB's metadata caching (sysbench on
// libmariadb, Connector/J) had its executes answered without column
// definitions; replay asks for what the captured client asked for, so the
// target does the work it did for that client. Before, replay never asked,
// and every execute's answer carried the definitions again (197 bytes
// against sysbench's 150 for a point select).
func TestReplayAsksForMetadataCachingAsTheClientDid(t *testing.T) {
	h := sandboxtest.Server(t, "innodb")
	for _, cache := range []bool{false, true} {
		var cc *countingConn
		cfg := conn.Config{Addr: h.Addr(), User: "root", Caps: conn.DefaultCaps, CacheMetadata: cache,
			Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
				var d net.Dialer
				c, err := d.DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				cc = &countingConn{Conn: c}
				return cc, nil
			}}
		ctx := context.Background()
		c, err := conn.Dial(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if c.CacheMetadata != cache {
			t.Fatalf("asked for metadata caching %v: the login has %v", cache, c.CacheMetadata)
		}
		st, err := c.Prepare(ctx, "SELECT CAST(? AS SIGNED) AS n")
		if err != nil {
			t.Fatal(err)
		}
		var first conn.Result
		for i := range 3 {
			var r conn.Result
			before := cc.read
			if err := c.Execute(ctx, st, []store.Value{{Type: store.TypeLongLong, Int: 42}}, 0, false, &r); err != nil {
				t.Fatal(err)
			}
			n := cc.read - before
			if r.Columns != 1 || r.Rows != 1 || r.Sets != 1 {
				t.Fatalf("cache %v, execute %d: %+v, want 1 set of 1 column, 1 row", cache, i, r)
			}
			if i == 0 {
				first = r
			} else if r.Sums != first.Sums {
				t.Fatalf("cache %v, execute %d: row sums %v, the first execute's %v", cache, i, r.Sums, first.Sums)
			}
			// Column count (6 bytes with the metadata-follows byte), EOF (9),
			// the BIGINT row (4 + 10), EOF (9); without caching, 5 bytes of
			// count and the column's definition (4 + 23) besides.
			want := 5 + 27 + 9 + 14 + 9
			if cache {
				want = 6 + 9 + 14 + 9
			}
			if i > 0 && n != want {
				t.Errorf("cache %v, execute %d: %d bytes read, want %d", cache, i, n, want)
			}
		}
		c.Close()
	}
}

// A synthetic session is sysbench on libmariadb, which asks for metadata
// caching; so do captured clients whose login asked for it.
func TestClientFlagsCarryMetadataCaching(t *testing.T) {
	for _, tc := range []struct {
		caps uint64
		want bool
	}{
		{synth.SysbenchCaps, true},
		{synth.SysbenchCaps &^ (1 << 36), false},
		{0, false}, // not recorded: the default client does not ask
	} {
		if got := clientOf(&store.Record{Kind: store.KindConnect, ClientCaps: tc.caps}).cacheMetadata; got != tc.want {
			t.Errorf("caps %#x: cacheMetadata %v, want %v", tc.caps, got, tc.want)
		}
	}
}
