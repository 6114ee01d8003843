package conn

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/tandemdb/tandem/store"
	"github.com/tandemdb/tandem/wire"
)

// A statement closed on a connection whose life has ended (a replay
// interrupted with Ctrl-C) is a cancelled call, not a panic: the close
// has no context of its own, and the classification read the cause of a
// nil one. Found by make bench-scale: SIGINT during a stuck replay.
func TestCloseAfterTheConnectionsLifeEndedIsCancelled(t *testing.T) {
	life, cancel := context.WithCancel(context.Background())
	cancel()
	client, server := net.Pipe()
	server.Close() // the write fails
	c := &Conn{nc: client, wc: wire.NewConn(client), life: life}
	c.CloseStmt(&Stmt{ID: 7})
	var e *Error
	if !errors.As(c.broken, &e) || e.Cause != store.CauseCancelled || e.Op != "close" {
		t.Fatalf("broken %v, want a cancelled close", c.broken)
	}
}

// A command refused before it is sent (an execute whose captured
// parameters do not fit the statement, a bulk execute the target does not
// offer) drops its prelude: it went out with the next command, and a
// stale SET insert_id could then give an unrelated INSERT its id.
func TestARefusedCommandDropsItsPrelude(t *testing.T) {
	c := &Conn{life: context.Background()}
	c.Prelude("SET insert_id = 7")
	if err := c.Execute(context.Background(), &Stmt{ID: 1, Params: 2}, nil, 0, false, &Result{}); err == nil || c.prelude != nil {
		t.Errorf("execute with the wrong count: %v, prelude %q left", err, c.prelude)
	}
	c.Prelude("SET insert_id = 8")
	if err := c.BulkExecute(context.Background(), &Stmt{ID: 1}, nil, &Result{}); err == nil || c.prelude != nil {
		t.Errorf("bulk execute on a target without it: %v, prelude %q left", err, c.prelude)
	}
}
