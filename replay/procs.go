package replay

import (
	"fmt"
	"runtime"
	"sync"
)

// How replay's connections wait for replies (Config.IO).
const (
	// IOBlocking: a worker waits for each reply in a blocking read that
	// keeps its thread and P, as a C client's thread does; replay adds a P
	// for every such connection while it runs. The default.
	IOBlocking = "blocking"
	// IOPoller: a worker parks on Go's poller while it waits; the process
	// keeps its GOMAXPROCS. Fewer threads, more scheduler hand-offs.
	IOPoller = "poller"
)

// maxBlockingConns caps the connections one replay runs with IOBlocking,
// which each need a P; a replay that needs more uses the poller.
const maxBlockingConns = 512

// ioMode decides how this run's connections wait: conns is how many the
// run opens at most. The reason is for the log when blocking was asked for
// but not used.
func ioMode(asked string, conns int) (mode, reason string) {
	if asked == IOPoller {
		return IOPoller, ""
	}
	if conns > maxBlockingConns {
		return IOPoller, fmt.Sprintf("%d connections need more than the %d Ps --io %s allows; waiting on the poller", conns, maxBlockingConns, IOBlocking)
	}
	return IOBlocking, ""
}

var procs struct {
	sync.Mutex
	base, extra int
}

// addProcs raises GOMAXPROCS by n for a run's blocking connections and
// returns the undo; runs at once add up, and the last one out restores the
// setting it found.
func addProcs(n int) (undo func()) {
	procs.Lock()
	defer procs.Unlock()
	if procs.extra == 0 {
		procs.base = runtime.GOMAXPROCS(0)
	}
	procs.extra += n
	runtime.GOMAXPROCS(procs.base + procs.extra)
	return func() {
		procs.Lock()
		defer procs.Unlock()
		procs.extra -= n
		runtime.GOMAXPROCS(procs.base + procs.extra)
	}
}
