package capture

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/tandemdb/tandem/sqlinfo"
	"github.com/tandemdb/tandem/store"
)

// MaxSets bounds the session variables a Session keeps to rebuild its
// state when a capture starts while it is open; SETs beyond it are counted
// (SetsBeyond), and the capture's start says so.
const MaxSets = 64

// A Session follows its state whether or not anything is recorded: a
// capture can start while it is open (Join) and stop before it ends
// (Leave). What it keeps for that, besides the schema, user and prepared
// statements every session keeps:
//
//   - the session variables it SET (SET NAMES, SET SESSION …, SET @v …),
//     in order, at most MaxSets;
//   - from the server's status flags on each statement's answer: whether
//     autocommit is on, whether a transaction is open, and whether that
//     transaction has written (a statement in it changed rows).
//
// Reads of the server's answers only: nothing is asked of the server.

// noteState updates what Join needs from the command just ended (called
// by End with every command, recorded or not).
func (s *Session) noteState() {
	r := &s.rec
	switch r.Kind {
	case store.KindResetConnection, store.KindChangeUser:
		if r.Resp.Kind == store.RespOK {
			s.sets, s.setsBeyond = s.sets[:0], 0
			s.autocommitOff, s.inTrx, s.trxWrote, s.beforeStart = false, false, false, false
		}
		return
	case store.KindQuery, store.KindExecute, store.KindFetch:
	default:
		return
	}
	if r.Resp.Kind != store.RespOK && r.Resp.Kind != store.RespResultSet {
		// An error says nothing of the transaction (a deadlock rolled it
		// back, a lock wait timeout did not): the state stays as it was
		// until an answer says, which errs towards "it wrote".
		return
	}
	status, self := AnswerStatus(&r.Resp)
	if r.Kind == store.KindQuery && r.Resp.Kind == store.RespOK && len(r.Resp.More) == 0 && r.Flags&store.FlagMasked == 0 && isSet(r.SQL) {
		s.keepSet(r.SQL)
	}
	s.statusSeen = true
	s.autocommitOff = status&mysql.SERVER_STATUS_AUTOCOMMIT == 0
	if status&mysql.SERVER_STATUS_IN_TRANS != 0 {
		s.inTrx, s.trxWrote = true, s.trxWrote || self
		return
	}
	s.inTrx, s.trxWrote, s.beforeStart = false, false, false
}

// isSet reports whether sql is a SET of session or user variables (not
// GLOBAL, not a password, not SET TRANSACTION for the next transaction
// only). The first word is looked at before the statement is analysed.
func isSet(sql string) bool {
	t := strings.TrimLeft(sql, " \t\r\n(")
	if len(t) < 4 || !strings.EqualFold(t[:3], "set") {
		return false
	}
	return sqlinfo.Analyze(sql).Set
}

// keepSet appends a SET to those Join replays, once, where it was first
// run: a later SET may read what it assigned (SET @old = @@sql_mode, …,
// SET sql_mode = @old), which moving a repeat to the end would break.
// Autocommit, which a repeat toggles back (SET autocommit=1, =0, =1), is
// set last from the server's status (Join).
func (s *Session) keepSet(sql string) {
	if slices.Contains(s.sets, sql) {
		return
	}
	if as, ok := sqlinfo.SetAssignments(sql); ok && slices.ContainsFunc(as, func(a sqlinfo.Assignment) bool { return sqlinfo.OneShot(a.Name) }) {
		// Its one-shot assignments were for the statement after it, long
		// done (SET insert_id): no state of the session's. The rest is.
		var rest []string
		for _, a := range as {
			if !sqlinfo.OneShot(a.Name) {
				rest = append(rest, strings.TrimPrefix(a.Text, "SET "))
			}
		}
		if len(rest) == 0 {
			return
		}
		sql = "SET " + strings.Join(rest, ", ")
		if slices.Contains(s.sets, sql) {
			return
		}
	}
	if len(s.sets) >= MaxSets {
		s.setsBeyond++
		return
	}
	s.sets = append(s.sets, sql)
}

// Joinable reports whether the session can join a capture now: it is not
// inside a transaction that has already written. Such a transaction's
// writes happened before the capture and cannot be replayed; its session
// joins once it ends (its commit is one the capture did not see: with the
// backend's binary log it is listed among those that bypassed the proxy).
func (s *Session) Joinable() bool { return !(s.inTrx && s.trxWrote) }

// StatusSeen reports whether an answer has told the session's
// transaction state yet (a session found open knows it only then).
func (s *Session) StatusSeen() bool { return s.statusSeen }

// InTransaction reports whether the server said a transaction is open.
func (s *Session) InTransaction() bool { return s.inTrx }

// SetsBeyond counts the SETs beyond MaxSets that Join cannot replay.
func (s *Session) SetsBeyond() int { return s.setsBeyond }

// Recording reports whether the session records into a sink.
func (s *Session) Recording() bool { return s.sink != nil }

// Record starts recording a session that has not logged in yet (one that
// connected while a capture runs): its Connect is the capture's first
// record of it.
func (s *Session) Record(sink Sink, opts Options) {
	s.sink, s.opts, s.quit = sink, opts, false
}

// Join starts recording an open session into sink, between two commands,
// with opts. It writes synthetic records (store.FlagOpenAtStart), all at
// at: its connect with the state it has now, its session variables, SET
// autocommit=0 if autocommit is off, START TRANSACTION if a transaction
// (one that has not written: see Joinable) is open, and a prepare of each
// statement it has prepared. The records of that open transaction, up to
// its end, carry store.FlagBeforeStart. It reports whether the session
// joined inside a transaction.
func (s *Session) Join(sink Sink, opts Options, at time.Time) bool {
	s.Record(sink, opts)
	s.wrote, s.ended, s.endedSelf = false, false, false
	syn := func(r store.Record) {
		r.Session, r.Start, r.Flags = s.id, at, r.Flags|store.FlagOpenAtStart
		if r.Schema == "" {
			r.Schema = s.st.Schema
		}
		if r.Resp.Kind == store.RespNone {
			r.Resp.Kind = store.RespOK
		}
		s.record(&r)
	}
	syn(store.Record{Kind: store.KindConnect, User: s.st.User, ClientCaps: s.st.Caps, Collation: s.st.Collation, ConnID: s.st.ConnID})
	for _, q := range s.sets {
		syn(store.Record{Kind: store.KindQuery, SQL: q})
	}
	switch {
	case s.autocommitOff:
		syn(store.Record{Kind: store.KindQuery, SQL: "SET autocommit=0"})
	case slices.ContainsFunc(s.sets, func(q string) bool { return strings.Contains(strings.ToLower(q), "autocommit") }):
		// On, as the server said last, whatever order the SETs that
		// toggled it are replayed in.
		syn(store.Record{Kind: store.KindQuery, SQL: "SET autocommit=1"})
	}
	s.beforeStart = s.inTrx
	if s.inTrx {
		syn(store.Record{Kind: store.KindQuery, SQL: "START TRANSACTION", Flags: store.FlagBeforeStart})
	}
	for _, id := range slices.Sorted(maps.Keys(s.stmts)) { // the order they were prepared in: the server's ids grow
		st := s.stmts[id]
		r := store.Record{Kind: store.KindPrepare, SQL: st.sql, StmtID: id, Resp: store.Response{Kind: store.RespOK, Params: uint16(st.params), Columns: uint32(st.columns)}}
		if st.masked {
			r.Flags |= store.FlagMasked
		}
		if st.broken {
			r.Flags |= store.FlagNotReplayable
		}
		syn(r)
	}
	return s.inTrx
}

// Leave stops recording the session, between two commands: a synthetic
// end (store.FlagOpenAtStop) at at ends it in the capture. Replay closes
// its connection there, which rolls back a transaction it left open.
func (s *Session) Leave(at time.Time) {
	if s.sink == nil {
		return
	}
	if !s.quit {
		s.record(&store.Record{Session: s.id, Start: at, Kind: store.KindQuit, Flags: store.FlagOpenAtStop})
	}
	s.sink, s.beforeStart = nil, false
	s.opts.Commits = false
}
