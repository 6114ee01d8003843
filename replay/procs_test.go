package replay

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/tandemdb/tandem/targets"
)

// --io auto (the default) gives each connection a thread up to 8 per CPU
// and waits on the poller beyond, saying so in the log only; --io blocking
// is honoured up to the Ps it may add.
func TestIOMode(t *testing.T) {
	auto := 8 * runtime.GOMAXPROCS(0)
	for _, c := range []struct {
		asked      string
		conns      int
		want, note string
	}{
		{IOAuto, 1, IOBlocking, ""},
		{IOAuto, auto, IOBlocking, ""},
		{IOAuto, auto + 1, IOPoller, fmt.Sprintf("%d connections, more than 8 per CPU: waiting on the poller", auto+1)},
		{IOAuto, maxBlockingConns + 1, IOPoller, "more than 8 per CPU"},
		{IOBlocking, 16, IOBlocking, ""},
		{IOBlocking, auto + 1, IOBlocking, ""},
		{IOBlocking, maxBlockingConns, IOBlocking, ""},
		{IOBlocking, maxBlockingConns + 1, IOPoller, "513 connections need more than the 512 Ps --io blocking allows"},
		{IOPoller, 16, IOPoller, ""},
	} {
		got, why := ioMode(c.asked, c.conns, traffic{})
		if got != c.want || c.note == "" && why != "" || !strings.Contains(why, c.note) {
			t.Errorf("ioMode(%q, %d) = %q, %q; want %q, %q…", c.asked, c.conns, got, why, c.want, c.note)
		}
	}
}

// --io auto waits on the poller for transactions that write, one in 40
// statements or more, over two connections or more, where every target
// logs each COMMIT; not for reads, autocommit writes, rarer write
// transactions, one connection, nor on a target that does not log each
// COMMIT. An explicit --io is kept.
func TestIOModeByTraffic(t *testing.T) {
	rw := traffic{statements: 1300, writeTrx: 100, perTarget: 8, logsEachCommit: true}
	// per: rw over n connections to each target.
	per := func(n int) traffic { t := rw; t.perTarget = n; return t }
	for _, c := range []struct {
		asked      string
		conns      int // to all targets
		tr         traffic
		want, note string
	}{
		{IOAuto, 8, rw, IOPoller, "a transaction that writes every 13 statements (100 in 1300), on targets that write their log at each COMMIT: waiting on the poller"},
		{IOAuto, 2, per(2), IOPoller, "every 13 statements"},
		{IOAuto, 1, per(1), IOBlocking, ""},
		{IOAuto, 2, per(1), IOBlocking, ""}, // one connection to each of two targets
		{IOAuto, 8, per(4), IOPoller, "every 13 statements"},
		{IOAuto, 8, traffic{statements: 4000, writeTrx: 100, perTarget: 8, logsEachCommit: true}, IOPoller, "every 40 statements"},
		{IOAuto, 8, traffic{statements: 4001, writeTrx: 100, perTarget: 8, logsEachCommit: true}, IOBlocking, ""},
		{IOAuto, 8, traffic{statements: 1300, perTarget: 8, logsEachCommit: true}, IOBlocking, ""}, // reads, autocommit writes
		{IOAuto, 8, traffic{statements: 1300, writeTrx: 100, perTarget: 8}, IOBlocking, ""},        // a target that logs once a second
		{IOAuto, 8, traffic{}, IOBlocking, ""},
		{IOBlocking, 8, rw, IOBlocking, ""},
		{IOPoller, 8, rw, IOPoller, ""},
	} {
		got, why := ioMode(c.asked, c.conns, c.tr)
		if got != c.want || c.note == "" && why != "" || !strings.Contains(why, c.note) {
			t.Errorf("ioMode(%q, %d, %+v) = %q, %q; want %q, %q…", c.asked, c.conns, c.tr, got, why, c.want, c.note)
		}
	}
}

func TestConfigIO(t *testing.T) {
	base := Config{Capture: "c", RunDir: "r", Targets: []targets.Target{{Name: "a", DSN: "root@tcp(127.0.0.1:1)/"}}}
	c := base
	if err := c.check(); err != nil || c.IO != IOAuto {
		t.Fatalf("default: IO %q, err %v; want auto", c.IO, err)
	}
	c = base
	c.IO = "epoll"
	if err := c.check(); err == nil || !strings.Contains(err.Error(), `--io "epoll": want auto, blocking or poller`) {
		t.Fatalf("--io epoll: %v", err)
	}
}

// Runs at once add their Ps up; the last one out restores the setting.
// The CPUs --io auto counts are the setting found, not the Ps added.
func TestAddProcsNests(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	undoA := addProcs(3)
	undoB := addProcs(5)
	if got := runtime.GOMAXPROCS(0); got != before+8 {
		t.Fatalf("two runs: GOMAXPROCS %d, want %d", got, before+8)
	}
	if got := cpus(); got != before {
		t.Errorf("two runs: %d CPUs for --io auto, want %d (GOMAXPROCS before them)", got, before)
	}
	undoA()
	if got := runtime.GOMAXPROCS(0); got != before+5 {
		t.Fatalf("one run left: GOMAXPROCS %d, want %d", got, before+5)
	}
	undoB()
	if got := runtime.GOMAXPROCS(0); got != before {
		t.Fatalf("none left: GOMAXPROCS %d, want %d", got, before)
	}
}
