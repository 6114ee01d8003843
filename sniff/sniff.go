// Package sniff builds a capture from a MySQL server's traffic as packets
// show it — pcap and pcapng files (tcpdump -w), or a live interface —
// for servers that cannot get a proxy in front of them.
//
// Each TCP connection to one of the server ports is reassembled both
// ways (half) and its MySQL conversation followed (conn) by the same
// capture.Session the proxy feeds, so its records are a proxy's: commands,
// prepared statements with their parameters, the answers summarised
// (affected rows, row counts, checksums of the rows).
//
// What a packet capture cannot know is labelled, never guessed:
//
//   - A session that began before the capture has no login: it is recorded
//     from the first answer that says no transaction is open, with a
//     synthetic connect (store.FlagOpenAtStart) in the schema given
//     (Config.Schema; none: its statements are store.FlagSchemaUnknown,
//     not replayable, until it says USE). What it changed before is one
//     store.FlagLost record at its first change (a transaction it was in
//     when first seen began before the capture and may have written: its
//     commit counts as a change). Its capabilities are
//     learned from its answers; executes of statements it prepared before
//     the capture are counted (replay skips them).
//   - Bytes lost (a full capture buffer, a cut file): on the client's side
//     the session's commands there are unknown: a store.FlagLost record
//     stands for them (replay counts any table as possibly written from
//     there, and commits a transaction open there: sqlinfo.Trx.Lost),
//     and the session is recorded again from its next command
//     (a packet numbered 0 that begins a segment). A packet numbered
//     otherwise where a command begins is such a loss too. On the
//     server's side, only the answer under way is lost
//     (store.FlagAnswerLost).
//   - A client that pipelines (sends commands before the answers to
//     those before them) has each answer paired with its own command:
//     the server answers in order. Where that can no longer be told (the
//     answers to pipelined commands lost, or more commands sent ahead
//     than the reader holds), every command of the session from there is
//     recorded with its answer lost.
//   - TLS sessions cannot be read: counted and skipped. Compressed ones
//     are read when their login was seen, until they lose their place
//     (their packets cannot be found again: not followed further).
//
// Memory is bounded by the open connections (each holds at most a packet
// and maxPending bytes behind a hole per direction, and maxQueued bytes
// of pipelined commands), not by the input's size. Time: each record is
// stamped with its packets' capture times (a pipelined command's begins
// when the answer before it ended, as a proxy would stamp it).
package sniff

import (
	"log/slog"
	"slices"
	"time"

	"github.com/gopacket/gopacket/layers"

	"github.com/tandemdb/tandem/capture"
	"github.com/tandemdb/tandem/store"
)

// Config says what a Decoder reads and keeps.
type Config struct {
	// Ports are the servers' ports: a connection is one whose one end has
	// one of them.
	Ports []uint16
	// Schema is the schema assumed for sessions whose login the capture
	// did not see (empty: unknown).
	Schema string
	// Capture says what the sessions' records keep.
	Capture capture.Options
	Log     *slog.Logger
}

// connKey names a connection by its two ends, client first.
type connKey struct{ client, server endpoint }

// Decoder turns packets into capture records. Not safe for concurrent
// use.
type Decoder struct {
	cfg   Config
	sink  capture.Sink
	conns map[connKey]*conn
	stats store.SourceStats
	last  time.Time
	sg    segment
	// nextID numbers sessions in the order they were first seen.
	nextID uint64
	// src is the source (file) of the packet being read, files the spans
	// of the sources read together (ReadFiles; none: one source).
	src   int
	files []span
}

// span is when a source's packets were taken: its first and last.
type span struct{ first, last time.Time }

// New returns a Decoder whose records go to sink.
func New(cfg Config, sink capture.Sink) *Decoder {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Decoder{cfg: cfg, sink: sink, conns: map[connKey]*conn{}}
}

// Stats is what the Decoder met so far.
func (d *Decoder) Stats() *store.SourceStats { return &d.stats }

// Open is the number of connections followed now.
func (d *Decoder) Open() int { return len(d.conns) }

// Last is the time of the last packet read.
func (d *Decoder) Last() time.Time { return d.last }

func (d *Decoder) sample(kind, s string) {
	if d.stats.Samples == nil {
		d.stats.Samples = map[string]string{}
	}
	if _, ok := d.stats.Samples[kind]; !ok {
		d.stats.Samples[kind] = s
	}
}

func (d *Decoder) isServer(e endpoint) bool { return slices.Contains(d.cfg.Ports, e.port) }

// Packet reads one captured frame of link type lt, taken at at; origLen
// is its length on the wire (more than len(data) when the snapshot length
// cut it). data is not kept.
func (d *Decoder) Packet(at time.Time, lt layers.LinkType, data []byte, origLen int) {
	d.stats.Packets++
	if at.After(d.last) {
		d.last = at
	}
	sg := &d.sg
	if !decode(lt, data, origLen, sg) {
		d.stats.PacketsSkipped++
		return
	}
	var key connKey
	dir := fromClient
	switch {
	case d.isServer(sg.dst):
		key = connKey{sg.src, sg.dst}
	case d.isServer(sg.src):
		key, dir = connKey{sg.dst, sg.src}, fromServer
	default:
		d.stats.PacketsSkipped++
		return
	}
	c := d.conns[key]
	if sg.syn && dir == fromClient && !sg.hasAck && c != nil && (c.closed[0] || c.closed[1] || c.half[fromClient].next != sg.seq+1) {
		// The port pair is used again by a new connection.
		c.end(at, true)
		delete(d.conns, key)
		c = nil
	}
	if c == nil {
		if !sg.syn && (sg.rst || len(sg.payload) == 0) {
			return // an end or an acknowledgement of a connection not followed
		}
		c = newConn(d, key.client, key.server, at, sg.syn)
		d.conns[key] = c
	}
	c.srcs |= 1 << min(d.src, 63)
	c.packetIn(at, dir, sg)
	if c.closed[fromClient] && c.closed[fromServer] {
		c.end(at, true)
		delete(d.conns, key)
	}
}

// Finish ends what is still open at the capture's end: each session
// open then gets a synthetic end (store.FlagOpenAtStop) where the capture
// stopped seeing it (endOf).
func (d *Decoder) Finish() {
	keys := make([]connKey, 0, len(d.conns))
	for k := range d.conns {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b connKey) int { return int(d.conns[a].id) - int(d.conns[b].id) })
	for _, k := range keys {
		c := d.conns[k]
		c.end(d.endOf(c), c.closed[fromClient] || c.closed[fromServer])
		delete(d.conns, k)
	}
}

// endOf is when the capture stopped seeing c's traffic: the last packet
// of the files it came from, or of files that began after them (rotated
// files, the same interface's). A file that ended before others read
// with it (taken on another interface for longer) did not see what its
// connections did after its end: they end with it, not with the others.
func (d *Decoder) endOf(c *conn) time.Time {
	if len(d.files) < 2 || len(d.files) > 63 {
		return d.last
	}
	var end time.Time
	for i, f := range d.files {
		if c.srcs&(1<<i) != 0 && f.last.After(end) {
			end = f.last
		}
	}
	for more := true; more; {
		more = false
		for _, f := range d.files {
			if !f.first.Before(end) && f.last.After(end) {
				end, more = f.last, true
			}
		}
	}
	if end.IsZero() || end.After(d.last) {
		return d.last
	}
	return end
}
