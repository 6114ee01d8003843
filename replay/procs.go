package replay

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"runtime"
	"sync"

	"github.com/tandemdb/tandem/targets"
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
	// IOAuto: IOPoller for more than blockingPerCPU connections per CPU,
	// or for traffic of transactions that write, over two connections or
	// more to each target, on targets that write a log at each COMMIT
	// (traffic.favoursPoller); IOBlocking otherwise.
	// The default.
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

// maxStmtsPerWriteTrx: IOAuto waits on the poller for traffic with at
// least one transaction that writes in this many statements, over two
// connections or more, where every target writes its log at each COMMIT
// (traffic.favoursPoller).
//
// Why: such a target commits in groups, and the replies to a group's
// COMMITs, and to what waited on its locks, come together. A thread
// blocked on each connection is woken for each of them, one wake-up
// each, where the poller's thread takes all that came in one. Measured
// on 2 CPUs (a virtual machine), MariaDB 10.11, transactions of N point
// selects and one UPDATE by key, replayed with --order capture, 8
// connections, 2 rounds each, poller against blocking: N=10 +10 and
// +12 % (the server's CPU per statement 25 µs against 28), N=30 +4 and
// +5 %, N=60 +1 and -3 %, N=150 -26 %; N=10 at 12 connections +12 and
// +11 %, at 16 +0 and +1 % (earlier rounds -5 and -2 %), at 4 -3 %
// (four rounds, +1 to -6 %), at 2 +11 and +13 %, at 1 -25 and -21 %
// (one connection commits alone: no group to take at once); with
// innodb_flush_log_at_trx_commit=2 (the log written at each COMMIT, not
// synced) +10 %, with 0 (written once a second) -20 and -24 %. Point
// selects, read-only transactions and autocommit UPDATEs (alike, -6 and
// +6 %) stay blocking.
const maxStmtsPerWriteTrx = 40

// traffic is what IOAuto knows of the run before it starts: the
// capture's statements and the transactions among them that wrote
// (captureIndex), the connections each target gets, and whether every
// target writes its log at each COMMIT (commitWritesLog).
type traffic struct {
	statements, writeTrx uint64
	perTarget            int
	logsEachCommit       bool
}

// favoursPoller: transactions that write, one in maxStmtsPerWriteTrx
// statements or more, over two connections or more to each target (whose
// COMMITs can group there), on targets that log each COMMIT.
func (t traffic) favoursPoller() bool {
	return t.perTarget >= 2 && t.logsEachCommit && t.writeTrx > 0 && t.statements <= maxStmtsPerWriteTrx*t.writeTrx
}

// commitWritesLog reports whether t's engine writes its log at each
// COMMIT (synced or not): innodb_flush_log_at_trx_commit or MyRocks'
// rocksdb_flush_log_at_trx_commit not 0 (no engine named: InnoDB, the
// targets' default). Another engine, or a setting that cannot be read, is
// reported as not (IOAuto then decides by the width alone, as before).
func commitWritesLog(ctx context.Context, t targets.Target, db *sql.DB) bool {
	engine := cmp.Or(targets.CanonicalEngine(t.Engine), "InnoDB")
	v := map[string]string{"InnoDB": "innodb_flush_log_at_trx_commit", "ROCKSDB": "rocksdb_flush_log_at_trx_commit"}[engine]
	if v == "" {
		return false
	}
	var n sql.NullInt64
	return db.QueryRowContext(ctx, "SELECT @@global."+v).Scan(&n) == nil && n.Valid && n.Int64 != 0
}

// ioMode decides how this run's connections wait: conns is how many the
// run opens at most, tr what the run is made of. The reason is for the
// log when blocking was asked for but not used, or chosen for the user
// (IOAuto).
func ioMode(asked string, conns int, tr traffic) (mode, reason string) {
	switch {
	case asked == IOPoller:
		return IOPoller, ""
	case asked == IOAuto && conns > autoBlockingConns():
		return IOPoller, fmt.Sprintf("%d connections, more than %d per CPU: waiting on the poller (--io %s: a thread each)", conns, blockingPerCPU, IOBlocking)
	case asked == IOAuto && tr.favoursPoller():
		return IOPoller, fmt.Sprintf("a transaction that writes every %.0f statements (%d in %d), on targets that write their log at each COMMIT: waiting on the poller, which takes the replies of a group commit in one wake-up (--io %s: a thread each)",
			float64(tr.statements)/float64(tr.writeTrx), tr.writeTrx, tr.statements, IOBlocking)
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
