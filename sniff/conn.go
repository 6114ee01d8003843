package sniff

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"fmt"
	"io"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/tandemdb/tandem/capture"
	"github.com/tandemdb/tandem/internal/textclip"
	"github.com/tandemdb/tandem/sqlinfo"
	"github.com/tandemdb/tandem/store"
	"github.com/tandemdb/tandem/wire"
)

// state is where a connection's conversation is.
type state uint8

const (
	stGreeting    state = iota // the server's greeting comes (the SYN was seen)
	stResponse                 // the client's handshake response comes
	stAuth                     // authentication, until the server's OK or ERR
	stCommand                  // between commands
	stAnswer                   // the server answers a command
	stClientTurn               // the client's packet inside an answer (authentication data)
	stFile                     // the client's LOCAL INFILE frames, up to an empty one
	stLongCommand              // the frames after a command's first of MaxPayload bytes
	stIgnored                  // nothing more is read: TLS, a binlog dump, a session not followed
)

// Directions.
const (
	fromClient = 0
	fromServer = 1
)

// unfollowedCaps are capabilities that change the conversation in ways
// this reader does not decode: a session that negotiated one is counted
// and not recorded.
var unfollowedCaps = []struct {
	bit  uint64
	name string
}{
	{uint64(mysql.CLIENT_ZSTD_COMPRESSION_ALGORITHM), "zstd protocol compression"},
	{uint64(mysql.CLIENT_QUERY_ATTRIBUTES), "query attributes"},
	{uint64(mysql.CLIENT_OPTIONAL_RESULTSET_METADATA), "optional result set metadata"},
	{wire.MariaDBClientComMulti, "COM_MULTI"},
	{wire.MariaDBClientBulkUnitResults, "per-row results of bulk executes"},
}

// conn follows one TCP connection to a server port: both directions'
// reassembly, the MySQL framing, and the capture.Session that builds its
// records.
type conn struct {
	d              *Decoder
	id             uint64
	client, server endpoint
	half           [2]half
	fr             [2]framer
	st             state
	cs             *capture.Session
	started        time.Time // the SYN, or the first packet
	loginAt        time.Time // the greeting
	connID         uint32
	serverCaps     uint64
	user, schema   string
	caps           uint64
	collation      byte
	compress       bool

	// foundOpen: the connection began before the capture; joined: its
	// records go to the capture (a session found open joins at the first
	// answer that says no transaction is open). everJoined: it did once.
	foundOpen, joined, everJoined bool
	// firstWrite is when a command read before the session joined first
	// changed rows (zero: none did). trxBefore: an answer before it joined
	// said a transaction was open (begun before the capture, so it may
	// have written); lastBefore is the start of its last command then.
	firstWrite time.Time
	trxBefore  bool
	lastBefore time.Time
	// known are the statements prepared as far as the capture knows.
	known map[uint32]bool
	// cmd collects a command of MaxPayload bytes or more (bounded).
	cmd      []byte
	cmdLen   int
	cmdStart time.Time
	closed   [2]bool
	// read: a command of the session was read (it speaks plain MySQL).
	// lostStands: a record stands for what the client sent since its last
	// command read (FlagLost, or the first write of a session found open).
	read, lostStands bool
	// srvCont: the server's last frame in an answer had MaxPayload bytes,
	// so the next continues its packet.
	srvCont bool
	// answersGone: the commands being read were acknowledged by the
	// server before the capture wrote them (see data). afterHole: the
	// client's bytes handed on now were held behind bytes it lost, and
	// the server answered meanwhile: those answers cannot be told from
	// the lost commands' (both are recorded with their answers lost).
	answersGone, afterHole bool
	// srcs are the sources its packets came from (Decoder.src; bit 63:
	// the 64th and later).
	srcs uint64
	pipeline
}

// framer splits one direction's bytes into MySQL packets (inside the
// compressed protocol's packets once a session negotiated it).
type framer struct {
	buf  []byte
	off  int
	sync bool // buf begins at a packet boundary
	comp bool
	raw  []byte // compressed packets not yet inflated
	zr   io.ReadCloser
}

func newConn(d *Decoder, client, server endpoint, at time.Time, syn bool) *conn {
	d.nextID++
	c := &conn{d: d, id: d.nextID, client: client, server: server, started: at, known: map[uint32]bool{}}
	if syn {
		c.st = stGreeting
		c.fr[fromClient].sync, c.fr[fromServer].sync = true, true
		return c
	}
	c.beginFoundOpen()
	return c
}

// beginFoundOpen follows a session whose login the capture did not see.
func (c *conn) beginFoundOpen() {
	c.foundOpen = true
	c.d.stats.Sessions++
	c.d.stats.FoundOpen++
	c.d.sample("found_open", fmt.Sprintf("session %d, %s -> %s, first seen at %s", c.id, c.client, c.server, c.started.Format(time.RFC3339Nano)))
	c.st = stCommand
	c.fr[fromClient].sync, c.fr[fromServer].sync = false, false
	c.cs = capture.NewSession(c.id, capture.State{Schema: c.d.cfg.Schema, Unknown: true}, c.d.cfg.Capture, c)
}

// Record is the session's sink: a joined session's records go to the
// capture, marked where the capture knows less than a proxy would; those
// of a session found open before it joins are counted, and whether they
// changed rows is noted.
func (c *conn) Record(r *store.Record) {
	if !c.joined {
		c.d.stats.CommandsBeforeJoin++
		if c.firstWrite.IsZero() && capture.MayHaveWritten(r) {
			c.firstWrite = r.Start
		}
		if inTransaction(&r.Resp) && c.firstWrite.IsZero() {
			// A transaction open at the capture's start may have written
			// before it: its writes show at its commit, when the session
			// joins. Noted as a change there unless one comes first.
			c.trxBefore = true
		}
		c.lastBefore = r.Start
		return
	}
	switch r.Kind {
	case store.KindPrepare:
		if r.Resp.Kind == store.RespOK {
			c.known[r.StmtID] = true
		}
	case store.KindClose:
		delete(c.known, r.StmtID)
	case store.KindResetConnection, store.KindChangeUser:
		if r.Resp.Kind == store.RespOK {
			clear(c.known)
		}
	case store.KindExecute:
		if !c.known[r.StmtID] {
			c.d.stats.UnknownStatements++
			c.d.sample("unknown_statements", fmt.Sprintf("session %d executes statement %d, prepared before the capture saw it", c.id, r.StmtID))
		}
	}
	if c.foundOpen && r.Schema == "" && (r.Kind == store.KindQuery || r.Kind == store.KindPrepare || r.Kind == store.KindExecute) {
		if _, use := sqlinfo.UseSchema(r.SQL); !use || r.Kind != store.KindQuery {
			r.Flags |= store.FlagSchemaUnknown | store.FlagNotReplayable
			c.d.stats.SchemaUnknown++
			c.d.sample("schema_unknown", fmt.Sprintf("session %d: %s", c.id, textclip.Clip(r.SQL, 80)))
		}
	}
	if r.Flags&store.FlagAnswerLost != 0 {
		c.d.stats.AnswersLost++
	}
	c.d.sink.Record(r)
}

// inTransaction reports whether an answer's last status says a
// transaction is open.
func inTransaction(r *store.Response) bool {
	st, _ := capture.AnswerStatus(r)
	return (r.Kind == store.RespOK || r.Kind == store.RespResultSet) && st&mysql.SERVER_STATUS_IN_TRANS != 0
}

// lostRecord stands, in the capture, for commands the session may have
// run that the capture could not record (once until its next command is
// read: one record stands for all of them).
func (c *conn) lostRecord(at time.Time) {
	if c.lostStands {
		return
	}
	c.lostStands = true
	c.d.sink.Record(&store.Record{Session: c.id, Start: at, Kind: store.KindOther, Flags: store.FlagLost | store.FlagNotReplayable})
}

// join starts recording a session found open, between two transactions.
func (c *conn) join(at time.Time) {
	if c.firstWrite.IsZero() && c.trxBefore {
		c.firstWrite = c.lastBefore // the commit of what it may have written
	}
	if !c.firstWrite.IsZero() {
		// Part of what rebuilds the session as it joins, at a transaction
		// boundary: its writes before are unknown, its state is not.
		c.d.sink.Record(&store.Record{Session: c.id, Start: c.firstWrite, Kind: store.KindOther,
			Flags: store.FlagLost | store.FlagNotReplayable | store.FlagOpenAtStart})
		c.firstWrite = time.Time{}
	}
	c.joined, c.everJoined = true, true
	c.cs.Join(c, c.d.cfg.Capture, at)
}

// packetIn routes a TCP segment of this connection.
func (c *conn) packetIn(at time.Time, dir int, sg *segment) {
	h, peer := &c.half[dir], &c.half[1-dir]
	if sg.syn {
		h.syn(sg.seq)
	}
	if sg.hasAck {
		peer.ack(sg.ack)
	}
	if len(sg.payload) > 0 || sg.missing > 0 {
		// The peer answers: what it acknowledged and the capture missed
		// is lost for good.
		peer.settle(at, dirOut{c, 1 - dir})
		c.afterHole = false
	}
	if !sg.syn {
		end := sg.seq + uint32(len(sg.payload))
		if h.segment(at, sg.seq, sg.payload, dirOut{c, dir}) {
			c.d.stats.Retransmitted++
		}
		if sg.missing > 0 && h.next == end {
			// The bytes the snapshot length cut follow what was handed on.
			// Not when the segment was seen before (a retransmission),
			// held behind a hole, or empty away from the stream's place:
			// its bytes are then not the ones missing next.
			c.lost(dir, at, uint32(sg.missing))
			h.next += uint32(sg.missing)
		}
	}
	if sg.fin && h.started && h.next == sg.seq+uint32(len(sg.payload))+uint32(sg.missing) {
		h.fin = true
		h.next++
	}
	if sg.fin || sg.rst {
		c.closed[dir] = true
		if sg.rst {
			c.closed[1-dir] = true
		}
	}
}

// dirOut hands one direction's bytes to the connection.
type dirOut struct {
	c   *conn
	dir int
}

func (o dirOut) data(at time.Time, b []byte, fresh bool) { o.c.data(o.dir, at, b, fresh) }
func (o dirOut) lost(at time.Time, n uint32)             { o.c.lost(o.dir, at, n) }

// lost is n bytes missing from one direction.
func (c *conn) lost(dir int, at time.Time, n uint32) {
	if n == 0 || c.st == stIgnored || dir == fromServer && !c.fr[dir].sync && c.st == stCommand {
		// Nothing followed was lost: the server's stream is skipped to
		// the answer to the client's next command anyway. (The client's
		// is too, but the bytes lost there may be commands.)
		return
	}
	c.d.stats.Gaps++
	c.d.stats.GapBytes += uint64(n)
	side := "client"
	if dir == fromServer {
		side = "server"
	}
	c.d.sample("gaps", fmt.Sprintf("session %d (%s): %d bytes from the %s lost at %s", c.id, c.client, n, side, at.Format(time.RFC3339Nano)))
	if c.fr[fromClient].comp {
		// Compressed packets cannot be found again in the stream.
		c.abandon(at, true)
		c.unfollow(at, "a compressed session lost bytes")
		return
	}
	switch c.st {
	case stGreeting, stResponse, stAuth:
		// The login is lost: follow the session as one found open.
		c.beginFoundOpen()
		return
	}
	if dir == fromClient {
		c.clientLost(at)
		return
	}
	if c.st == stCommand || c.st == stLongCommand {
		// Between answers: the answer to the client's next command is
		// found from there.
		c.fr[fromServer].reset(false)
		return
	}
	// A client that pipelines may have sent its next command already: the
	// rest of the answer lost is not that command's (as in clientLost).
	c.abandon(at, c.pipelines)
}

// clientLost follows bytes lost from the client: what it sent there is
// unknown. One record stands for it (for a session found open that has
// not joined, a possible change where it joins), and the session goes on
// from its next command.
func (c *conn) clientLost(at time.Time) {
	// A client that pipelines may have sent commands there whose answers
	// come after those of the commands read: the answer after its next
	// command read is not known to be that command's.
	c.abandon(at, c.pipelines)
	c.afterHole = true
	if c.st == stLongCommand {
		// A long command queued was handed on as the answer ended: its
		// next frames are what the client lost.
		c.endCommand(at, true)
	}
	if c.joined {
		c.lostRecord(at)
	} else if !c.lostStands {
		c.lostStands = true
		if c.firstWrite.IsZero() {
			c.firstWrite = at
		}
	}
	c.fr[fromClient].reset(false)
}

// abandon gives up the answer under way (recorded lost) and the server
// stream's place. The commands queued behind it are recorded with their
// answers lost too; as those answers are still to come, answers are no
// longer paired with commands on this connection (unpair also asks that).
func (c *conn) abandon(at time.Time, unpair bool) {
	if unpair || len(c.queue) > 0 {
		c.unpair()
	}
	c.fr[fromServer].reset(false)
	c.endCommand(at, true)
	if c.st != stIgnored && c.st != stLongCommand {
		// stLongCommand: a long command queued was handed on as the answer
		// ended, and its next frames are still to come.
		c.st = stCommand
	}
}

// endCommand ends a command under way, its answer lost (lost) or not seen
// to its end.
func (c *conn) endCommand(at time.Time, lost bool) {
	switch c.st {
	case stAnswer, stClientTurn, stFile:
		c.cs.EndLost(at)
		c.afterEnd(at)
	case stLongCommand:
		c.cmdLen = 0
		c.st = stCommand
	}
}

// unfollow stops reading a session: what it does from here is not known.
func (c *conn) unfollow(at time.Time, why string) {
	c.dropQueue()
	if c.joined {
		c.lostRecord(at)
		c.cs.Leave(at)
		c.joined = false
	}
	c.d.stats.Undecoded++
	c.d.sample("undecoded", fmt.Sprintf("session %d (%s): %s", c.id, c.client, why))
	c.st = stIgnored
}

// data takes bytes of one direction in order.
func (c *conn) data(dir int, at time.Time, b []byte, fresh bool) {
	if c.st == stIgnored {
		return
	}
	f := &c.fr[dir]
	if dir == fromClient && c.afterHole && !c.answersGone {
		// Held behind a hole the server's answer declared: the client
		// sent them before that answer, which may be the lost commands'
		// or theirs. Their answers are lost; the server's stream is found
		// again at the next command.
		c.answersGone = true
		defer func() { c.answersGone = false }()
	}
	if !f.sync {
		if dir == fromServer {
			return // found again at the client's next command
		}
		if !fresh {
			c.unread(at)
			return
		}
		switch readsAs(b) {
		case asTLS:
			c.tls(at)
			return
		case asNothing:
			c.unread(at)
			return
		}
		f.reset(true)
		if h := &c.half[fromClient]; h.ackSeen && !after(h.next+uint32(len(b)), h.acked) {
			// The server had acknowledged these commands before the
			// capture wrote them (a packet written after its
			// acknowledgement): their answers may have come already,
			// unread. They are recorded with their answers lost, and the
			// server's stream is found again at the next command.
			c.answersGone = true
			defer func() { c.answersGone = false }()
		} else if !c.unpaired {
			c.fr[fromServer].reset(true) // the server's next bytes answer this command
		}
	}
	if err := f.add(b); err != nil {
		c.unfollow(at, err.Error())
		return
	}
	for c.st != stIgnored {
		seq, p, ok := f.next()
		if !ok {
			break
		}
		if dir == fromClient {
			c.fromClient(at, seq, p)
		} else {
			c.fromServer(at, seq, p)
		}
	}
	f.compact()
}

// unread notes client bytes skipped while the reader looks for a command
// (the rest of one begun before the capture, or after a loss): what they
// were is unknown. A session that joined has a lost record standing for
// them already (clientLost); one not joined yet may have written there,
// which its join says (firstWrite). (A TCP keepalive's one byte counts
// too: it cannot be told from a command's last byte.)
func (c *conn) unread(at time.Time) {
	if !c.joined && !c.lostStands {
		c.lostStands = true
		if c.firstWrite.IsZero() {
			c.firstWrite = at
		}
	}
}

// What the first bytes of a client's segment read as, where the client's
// stream is looked for.
const (
	asNothing = iota
	asCommand // a command begins it
	asTLS     // TLS records (the session cannot be read)
)

// readsAs says what a client's segment b reads as. A command whose length
// is 0x0315 to 0x0317 (plus 65536 times up to 4) begins as a TLS record
// does (15|16|17 03 0k): the MySQL reading is taken when it fits the
// segment whole (it ends it, or another command follows), TLS when its
// records hold to the segment's end, and MySQL again when its packet goes
// on past the segment.
func readsAs(b []byte) int {
	n, ok := commandHeader(b)
	switch {
	case ok && (n+4 == len(b) || n+4 < len(b) && n < wire.MaxPayload && looksLikeCommand(b[n+4:])):
		return asCommand
	case looksLikeTLS(b):
		return asTLS
	case ok && n+4 > len(b):
		return asCommand
	}
	return asNothing
}

// looksLikeCommand reports whether b can begin a client's command: a
// packet numbered 0 whose command byte is one a client sends, whose
// length agrees with the segment.
func looksLikeCommand(b []byte) bool {
	n, ok := commandHeader(b)
	return ok && (n+4 >= len(b) || n >= wire.MaxPayload || looksLikeCommand(b[n+4:]))
}

// commandHeader reads the length of the packet b begins if it can be a
// command's: numbered 0, not empty, its first byte a command a client
// sends.
func commandHeader(b []byte) (int, bool) {
	if len(b) < 5 || b[3] != 0 {
		return 0, false
	}
	n := int(b[0]) | int(b[1])<<8 | int(b[2])<<16
	cmd := b[4]
	return n, n > 0 && (cmd <= mysql.COM_RESET_CONNECTION || cmd == wire.ComStmtBulkExecute)
}

// maxTLSRecord is the longest TLS record (TLSCiphertext: 2^14 bytes and
// 2048 of expansion).
const maxTLSRecord = 1<<14 + 2048

// looksLikeTLS reports whether b is TLS records (application data,
// handshake or alert, TLS 1.0 to 1.3): each header holds and the records
// follow each other to the segment's end (the last may go on past it).
func looksLikeTLS(b []byte) bool {
	if len(b) < 5 {
		return false
	}
	for len(b) > 0 {
		if b[0] < 0x15 || b[0] > 0x17 || len(b) > 1 && b[1] != 3 || len(b) > 2 && b[2] > 4 {
			return false
		}
		if len(b) < 5 {
			return true // the next header goes on in the next segment
		}
		n := 5 + (int(b[3])<<8 | int(b[4]))
		if n > 5+maxTLSRecord {
			return false
		}
		if n >= len(b) {
			return true
		}
		b = b[n:]
	}
	return true
}

func (c *conn) tls(at time.Time) {
	if c.read || c.joined {
		// A session read until now: TLS begins at a login, never in the
		// middle of a session, so what follows is not what it seemed.
		c.unfollow(at, "bytes that read as TLS in the middle of the session")
		return
	}
	c.d.stats.TLS++
	c.d.sample("tls", fmt.Sprintf("session %d, %s -> %s, at %s", c.id, c.client, c.server, at.Format(time.RFC3339Nano)))
	if c.foundOpen {
		c.d.stats.FoundOpen-- // counted as TLS instead
		c.d.stats.Sessions--
	}
	c.st = stIgnored
}

// fromClient takes one of the client's packets.
func (c *conn) fromClient(at time.Time, seq byte, p []byte) {
	if n := len(c.queue); n > 0 && c.queue[n-1].more {
		c.queueFrame(p) // the next frame of a long command queued
		return
	}
	switch c.st {
	case stResponse:
		c.response(at, p)
	case stAuth, stGreeting:
		// Authentication data: never read, never stored.
	case stAnswer:
		if seq == 0 {
			// A command sent before the answer under way ended: the
			// client pipelines. The server answers in order: it is read
			// once that answer (and those before it) have ended.
			c.enqueue(at, p)
			return
		}
		c.command(at, seq, p)
	case stCommand:
		c.command(at, seq, p)
	case stLongCommand:
		if room := c.d.cfg.Capture.MaxRecordBytes - len(c.cmd); room > 0 {
			c.cmd = append(c.cmd, p[:min(len(p), room)]...)
		}
		c.cmdLen += len(p)
		if len(p) < wire.MaxPayload {
			c.st = stCommand
			c.run(c.cmdStart, c.cmd, c.cmdLen > len(c.cmd))
		}
	case stClientTurn:
		if len(p) < wire.MaxPayload {
			c.st = stAnswer
		}
	case stFile:
		if len(p) == 0 {
			c.st = stAnswer
		}
	}
}

// command begins a client's command, nothing being outstanding.
func (c *conn) command(at time.Time, seq byte, p []byte) {
	if seq != 0 {
		c.misnumbered(at, seq)
		return
	}
	c.read, c.lostStands = true, false
	if srv := &c.fr[fromServer]; !c.unpaired && srv.off < len(srv.buf) {
		// Bytes still buffered are what is left of a broken answer.
		srv.reset(true)
	}
	if len(p) == wire.MaxPayload {
		c.cmd = append(c.cmd[:0], p[:min(len(p), c.cmdLimit())]...)
		c.cmdLen, c.cmdStart, c.st = len(p), at, stLongCommand
		return
	}
	c.run(at, p, false)
}

// cmdLimit is the most of a long command kept.
func (c *conn) cmdLimit() int {
	if l := c.d.cfg.Capture.MaxRecordBytes; l > 0 {
		return l
	}
	return 1 << 30
}

// misnumbered takes a client's packet numbered seq where a command
// begins: the stream is not where it seemed (bytes lost unseen, or a
// packet misread), and what the client sent there is unknown.
func (c *conn) misnumbered(at time.Time, seq byte) {
	c.d.stats.Gaps++
	c.d.sample("gaps", fmt.Sprintf("session %d (%s): a packet numbered %d where a command begins, at %s", c.id, c.client, seq, at.Format(time.RFC3339Nano)))
	if c.fr[fromClient].comp {
		// Compressed packets cannot be found again in the stream.
		c.abandon(at, true)
		c.unfollow(at, fmt.Sprintf("a compressed session's packet numbered %d where a command begins", seq))
		return
	}
	c.clientLost(at)
}

// run hands a whole command to the session.
func (c *conn) run(at time.Time, p []byte, truncated bool) {
	switch c.cs.Command(p, truncated, at) {
	case capture.Read:
		if c.unpaired || c.answersGone {
			// Its answer comes behind answers that were not read, or came
			// before it was read: which bytes are its cannot be told.
			c.cs.EndLost(at)
			c.afterEnd(at)
			return
		}
		if srv := &c.fr[fromServer]; !srv.sync {
			// The server's stream lost its place between answers, and
			// nothing is outstanding: its next bytes answer this command.
			srv.reset(true)
		}
		c.st, c.srvCont = stAnswer, false
	case capture.Raw:
		c.cs.End(at)
		c.unfollow(at, fmt.Sprintf("command 0x%02x (a replication stream) is not followed", p[0]))
	default:
		c.cs.End(at)
		c.afterEnd(at)
	}
}

// afterEnd follows a command's end: a session found open joins once an
// answer says no transaction is open.
func (c *conn) afterEnd(at time.Time) {
	if c.st != stIgnored {
		c.st = stCommand
	}
	if !c.joined && c.st == stCommand && c.cs.StatusSeen() && !c.cs.InTransaction() {
		c.join(at)
	}
	c.feedQueued(at)
}

// fromServer takes one of the server's packets.
func (c *conn) fromServer(at time.Time, seq byte, p []byte) {
	switch c.st {
	case stGreeting:
		c.greeting(at, p)
	case stAuth:
		c.auth(at, p)
	case stAnswer, stClientTurn, stFile:
		cont := c.srvCont
		c.srvCont = len(p) == wire.MaxPayload
		if !cont && len(p) >= 3 && p[0] == wire.HeaderErr && p[1] == 0xff && p[2] == 0xff {
			// A progress report (MariaDB), not part of the answer: no error
			// has the code 0xffff, so it is one whatever the client asked
			// (a session found open has no login to say).
			return
		}
		switch c.cs.Server(p) {
		case capture.Read:
			c.st = stAnswer
		case capture.Done:
			c.cs.End(at)
			c.afterEnd(at)
		case capture.ClientTurn:
			c.st = stClientTurn
		case capture.SendFile:
			c.st = stFile
		default:
			why := "an answer that does not decode"
			if err := c.cs.Err(); err != nil {
				why += ": " + err.Error()
			}
			c.d.sample("answers_lost", fmt.Sprintf("session %d: %s", c.id, why))
			c.abandon(at, c.pipelines) // counted by Record
		}
	case stCommand:
		if c.cs != nil && !c.cs.Stray(p) {
			c.d.stats.StrayPackets++
		}
	}
}

// greeting reads the server's greeting.
func (c *conn) greeting(at time.Time, p []byte) {
	if len(p) > 0 && p[0] == wire.HeaderErr {
		c.st = stIgnored // refused before the client said who it is: nothing to record
		return
	}
	g, err := wire.ParseGreeting(p)
	if err != nil {
		c.unfollow(at, "greeting: "+err.Error())
		return
	}
	c.connID, c.serverCaps, c.loginAt, c.st = g.ConnID, g.Caps, at, stResponse
}

// response reads the client's handshake response.
func (c *conn) response(at time.Time, p []byte) {
	hr, err := wire.ParseHandshakeResponse(p)
	if err != nil {
		c.unfollow(at, "handshake response: "+err.Error())
		return
	}
	if hr.SSLRequest {
		c.tls(at)
		return
	}
	caps := hr.Caps & c.serverCaps
	for _, u := range unfollowedCaps {
		if caps&u.bit != 0 {
			c.unfollow(at, "negotiated "+u.name+", which this reader does not follow")
			return
		}
	}
	c.caps = caps &^ uint64(mysql.CLIENT_SSL)
	c.user, c.schema, c.collation = string(hr.User), string(hr.Database), hr.Charset
	c.compress = caps&uint64(mysql.CLIENT_COMPRESS) != 0
	c.st = stAuth
}

// auth follows the authentication exchange to its end.
func (c *conn) auth(at time.Time, p []byte) {
	if len(p) == 0 {
		return
	}
	switch p[0] {
	case wire.HeaderOK:
	case wire.HeaderErr:
		msg := "malformed ERR"
		if e, err := wire.ParseErr(p); err == nil {
			msg = fmt.Sprintf("%d (%s) %s", e.Code, e.State, e.Message)
		}
		c.openSession()
		c.cs.Connect(c.loginAt, at.Sub(c.loginAt), false, msg)
		c.st = stIgnored
		return
	default:
		return // auth switch, more data: the client answers
	}
	c.openSession()
	c.cs.Connect(c.loginAt, at.Sub(c.loginAt), true, "")
	c.st = stCommand
	if c.compress {
		c.fr[fromClient].comp, c.fr[fromServer].comp = true, true
	}
}

func (c *conn) openSession() {
	c.d.stats.Sessions++
	c.joined, c.everJoined = true, true
	c.cs = capture.NewSession(c.id, capture.State{User: c.user, Schema: c.schema, Caps: c.caps, Collation: c.collation, ConnID: c.connID}, c.d.cfg.Capture, c)
}

// end closes the session: its connection ended (closed), or the capture
// did (a synthetic end: the session was still open).
func (c *conn) end(at time.Time, closed bool) {
	for dir := range c.half {
		c.half[dir].finish(at, dirOut{c, dir})
	}
	if len(c.queue) > 0 {
		c.unpair() // the answers to the commands queued were not seen
	}
	c.endCommand(at, true)
	switch {
	case c.cs == nil || !c.joined:
	case closed:
		c.cs.Close(at)
	default:
		c.cs.Leave(at)
	}
	if c.foundOpen && !c.everJoined && c.st != stIgnored {
		c.d.stats.Unjoined++
		c.d.sample("unjoined", fmt.Sprintf("session %d (%s): never between two transactions while the capture ran", c.id, c.client))
	}
	c.st = stIgnored
}

// reset drops what is buffered; sync says the next bytes begin a packet.
func (f *framer) reset(sync bool) {
	f.buf, f.off, f.raw, f.sync = f.buf[:0], 0, f.raw[:0], sync
}

// add appends bytes (inflating compressed packets).
func (f *framer) add(b []byte) error {
	if !f.comp {
		f.buf = append(f.buf, b...)
		return nil
	}
	f.raw = append(f.raw, b...)
	for len(f.raw) >= 7 {
		clen := int(f.raw[0]) | int(f.raw[1])<<8 | int(f.raw[2])<<16
		ulen := int(f.raw[4]) | int(f.raw[5])<<8 | int(f.raw[6])<<16
		if len(f.raw) < 7+clen {
			break
		}
		body := f.raw[7 : 7+clen]
		if ulen == 0 {
			f.buf = append(f.buf, body...)
		} else {
			var err error
			if f.zr == nil {
				f.zr, err = zlib.NewReader(bytes.NewReader(body))
			} else {
				err = f.zr.(zlib.Resetter).Reset(bytes.NewReader(body), nil)
			}
			if err != nil {
				return fmt.Errorf("a compressed packet does not inflate: %v", err)
			}
			n := len(f.buf)
			f.buf = append(f.buf, make([]byte, ulen)...)
			if _, err := io.ReadFull(f.zr, f.buf[n:]); err != nil {
				return fmt.Errorf("a compressed packet does not inflate: %v", err)
			}
		}
		f.raw = f.raw[7+clen:]
	}
	return nil
}

// next returns the next whole packet (valid until the next add).
func (f *framer) next() (byte, []byte, bool) {
	b := f.buf[f.off:]
	if len(b) < 4 {
		return 0, nil, false
	}
	n := int(binary.LittleEndian.Uint32(b) & 0xffffff)
	if len(b) < 4+n {
		return 0, nil, false
	}
	f.off += 4 + n
	return b[3], b[4 : 4+n], true
}

// compact drops the packets read.
func (f *framer) compact() {
	if f.off == 0 {
		return
	}
	n := copy(f.buf, f.buf[f.off:])
	f.buf, f.off = f.buf[:n], 0
	if cap(f.buf) > 1<<20 && n < 1<<16 {
		f.buf = append([]byte(nil), f.buf...) // let a long packet's buffer go
	}
	if len(f.raw) == 0 && cap(f.raw) > 1<<20 {
		f.raw = nil
	}
}
