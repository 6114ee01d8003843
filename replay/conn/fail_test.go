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
