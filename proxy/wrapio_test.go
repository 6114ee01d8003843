package proxy

import (
	"net"
	"runtime"
	"testing"

	"github.com/tandemdb/tandem/internal/loopback"
	"github.com/tandemdb/tandem/internal/rawio"
)

// With the poller, the proxy's connections yield before a read that
// follows a write when it runs Go code on one P (its default up to 7
// CPUs), and not with two.
func TestPollerConnectionsYieldWithOneP(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	p := &Proxy{cfg: Config{IO: IOPoller}}
	var d net.Dialer
	for _, tc := range []struct {
		procs int
		want  bool
	}{{1, true}, {2, false}} {
		runtime.GOMAXPROCS(tc.procs)
		nc, _ := loopback.Pair(t, d.DialContext)
		c, ok := p.wrapIO(nc, nil).(*rawio.Conn)
		if !ok {
			t.Fatalf("procs %d: wrapIO gave %T, want a *rawio.Conn", tc.procs, c)
		}
		if got := c.Yielding(); got != tc.want {
			t.Errorf("procs %d: yielding %v, want %v", tc.procs, got, tc.want)
		}
	}
}
