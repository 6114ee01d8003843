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
	// for every such connection while it runs.
	IOBlocking = "blocking"
	// IOPoller: a worker parks on Go's poller while it waits; the process
	// keeps its GOMAXPROCS. Fewer threads, more scheduler hand-offs.
	IOPoller = "poller"
	// IOAuto: IOBlocking for up to blockingPerCPU connections per CPU,
	// IOPoller for more. The default.
	IOAuto = "auto"
)

// maxBlockingConns caps the connections one replay runs with IOBlocking,
// which each need a P; a replay that needs more uses the poller.
const maxBlockingConns = 512

// blockingPerCPU is how many connections per CPU IOAuto gives a thread
// each. A blocked thread is woken by the kernel with no scheduler hand-off:
// at 8 connections on 2 CPUs the poller ran about 15 % fewer point
// selects per second. But each connection's P holds memory of its own
// (allocation caches, free pages: 80-130 KB measured), and many more
// threads than CPUs cost the kernel more than the hand-offs save. On 2
// CPUs, sysbench oltp_read_write captures replayed at --speed 0, blocking
// against the poller: 16 sessions alike (elapsed, CPU and peak RSS within
// the runs' spread); 64 sessions with --order none 14-29 % slower and 44 %
// more CPU, with --order capture alike (from 26 % slower to 13 % faster
// over 7 runs each, 6 % more CPU), 6-11 MB more; 256 sessions 1.39-1.56x
// slower, 2.35x the CPU with --order none, 21-33 MB more.
const blockingPerCPU = 8

// autoBlockingConns is the most connections IOAuto runs blocking.
func autoBlockingConns() int { return min(blockingPerCPU*cpus(), maxBlockingConns) }

// cpus is how many CPUs the process may use: GOMAXPROCS as it was before
// any run raised it (addProcs). Go sets it from a container's CPU quota
// too, where runtime.NumCPU counts the whole machine's.
func cpus() int {
	procs.Lock()
	defer procs.Unlock()
	if procs.extra > 0 {
		return procs.base
	}
	return runtime.GOMAXPROCS(0)
}

// ioMode decides how this run's connections wait: conns is how many the
// run opens at most. The reason is for the log when blocking was asked for
// but not used, or chosen for the user (IOAuto).
func ioMode(asked string, conns int) (mode, reason string) {
	switch {
	case asked == IOPoller:
		return IOPoller, ""
	case asked == IOAuto && conns > autoBlockingConns():
		return IOPoller, fmt.Sprintf("%d connections, more than %d per CPU: waiting on the poller (--io %s: a thread each)", conns, blockingPerCPU, IOBlocking)
	case conns > maxBlockingConns:
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
