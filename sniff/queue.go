package sniff

import (
	"fmt"
	"time"

	"github.com/tandemdb/tandem/wire"
)

// maxQueued bounds the bytes of the commands a connection holds while
// the answers before them come (each costs queuedCost more, which bounds
// their number too). A client can have no more on the wire unanswered
// than the server's receive buffer holds (Linux grows it to 6 MiB by
// default); the first command queued is held whatever its size.
const (
	maxQueued  = 16 << 20
	queuedCost = 64
)

// pipeline is what a connection keeps of a client that pipelines: sends
// commands before the answers to those before them (MariaDB Connector/J 3
// and the Node.js connector do; Connector/C's execute direct sends a
// prepare and its execute together). The server answers in order, so
// each command queued is handed to the session once the answer before it
// has ended, and gets its own answer.
type pipeline struct {
	queue  []queued
	queueN int // what the queue costs (maxQueued)
	// pipelines: the client was seen doing it. unpaired: answers can no
	// longer be paired with their commands (answers of commands that were
	// not read are still to come, where the packets cannot tell): every
	// command from then on is recorded with its answer lost.
	pipelines, unpaired bool
	feeding             bool // feedQueued is running
}

// queued is a command waiting for the answers before it.
type queued struct {
	p    []byte    // its bytes (of a long command, at most cmdLimit)
	n    int       // its length: more than len(p) when cut
	more bool      // a long command whose next frames have not come yet
	at   time.Time // when it was captured
}

func (q *queued) cost() int { return len(q.p) + queuedCost }

// enqueue takes a command sent while an answer was under way.
func (c *conn) enqueue(at time.Time, p []byte) {
	c.pipelines = true
	keep := len(p)
	if len(p) == wire.MaxPayload {
		keep = min(keep, c.cmdLimit())
	}
	if len(c.queue) > 0 && c.queueN+keep+queuedCost > maxQueued {
		c.d.sample("answers_lost", fmt.Sprintf("session %d (%s): more than %d bytes of commands sent ahead of their answers at %s: answers are not paired with commands from there",
			c.id, c.client, maxQueued, at.Format(time.RFC3339Nano)))
		c.abandon(at, true)
		c.command(at, 0, p) // recorded with its answer lost
		return
	}
	c.queue = append(c.queue, queued{p: append([]byte(nil), p[:keep]...), n: len(p), more: len(p) == wire.MaxPayload, at: at})
	c.queueN += keep + queuedCost
}

// queueFrame takes the next frame of the long command last queued.
func (c *conn) queueFrame(p []byte) {
	q := &c.queue[len(c.queue)-1]
	keep := max(min(len(p), c.cmdLimit()-len(q.p), maxQueued-c.queueN), 0)
	q.p = append(q.p, p[:keep]...)
	q.n += len(p)
	q.more = len(p) == wire.MaxPayload
	c.queueN += keep
}

// feedQueued hands the session the commands queued once the answer before
// them has ended, at at (when the server could begin them: a proxy, which
// relays one command at a time, stamps them so too) or when the command
// was captured if later (the answer's end can be stamped before it: a
// segment held behind a hole keeps its own time), until one waits for its
// answer.
func (c *conn) feedQueued(at time.Time) {
	if c.feeding {
		return // a command fed ended at once: the loop below goes on
	}
	c.feeding = true
	defer func() { c.feeding = false }()
	for c.st == stCommand && len(c.queue) > 0 {
		q := c.queue[0]
		c.queue[0] = queued{}
		c.queue = c.queue[1:]
		c.queueN -= q.cost()
		c.read, c.lostStands = true, false
		start := at
		if q.at.After(start) {
			start = q.at
		}
		if q.more {
			// Its next frames are still to come (none is queued after it).
			c.cmd, c.cmdLen, c.cmdStart, c.st = q.p, q.n, start, stLongCommand
			break
		}
		c.run(start, q.p, q.n > len(q.p))
	}
	if len(c.queue) == 0 {
		c.queue, c.queueN = nil, 0
	}
}

// unpair stops pairing answers with commands on the connection: the
// server's stream holds answers of commands that were not read (or whose
// answers were lost) ahead of those of the commands to come, and no
// packet says where they end.
func (c *conn) unpair() {
	if !c.unpaired {
		c.d.sample("answers_lost", fmt.Sprintf("session %d (%s): answers of pipelined commands lost; answers are not paired with commands from there", c.id, c.client))
	}
	c.unpaired = true
}

// dropQueue forgets the commands queued (the session is not followed).
func (c *conn) dropQueue() { c.queue, c.queueN = nil, 0 }
