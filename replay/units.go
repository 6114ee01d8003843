package replay

import (
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/tandemdb/tandem/capture"
	"github.com/tandemdb/tandem/replay/conn"
	"github.com/tandemdb/tandem/replay/order"
	"github.com/tandemdb/tandem/sqlinfo"
	"github.com/tandemdb/tandem/store"
	"github.com/tandemdb/tandem/wire"
)

// job is one record to run.
type job struct {
	rec      *store.Record
	loop     int
	intended time.Time
	// sql is a query's text or an execute's prepared SQL; info its analysis.
	sql  string
	info *sqlinfo.Info
	t    *order.Ticket // session mode: the record's place in the order
	// setVersion: the session's state version this job's SET gives it
	// (--concurrency), for the worker not to send it again (adopt).
	setVersion int
	// unrunnable: an execute whose prepare's text cannot run (masked,
	// truncated, not replayable; see unrunnablePrepare), the skip reason.
	// Regrouping sets it: a regrouped worker never sees the prepare.
	unrunnable byte
	// keys: rowKeys of the statement, once keyed is set (runner.jobKeys):
	// the unit's ticket, the board and the gate's lock sets each ask for
	// them, and a point statement's keys are built from its parameters.
	keys  []string
	keyed bool
}

// setVar is one variable of a session's state: its latest assignment.
type setVar struct {
	// text is the assignment as a statement of its own; value its value
	// as written.
	name, text, value string
	version           int
	// ok: the server accepted it in the capture (a synthetic SET of a
	// session open at the capture's start was accepted too): failing on a
	// target is then that target's error, not the capture's.
	ok bool
}

// unit is what --concurrency runs on one connection at once: a
// transaction (BEGIN … COMMIT, or statements up to COMMIT with autocommit
// off), or one statement outside a transaction, with the session state it
// needs: schema, variables (the latest value of each), client flags.
type unit struct {
	session uint64
	schema  string
	sets    []setVar
	version int
	// resetAt: the session's state version at its last change of user
	// or reset: a connection that carries an older state of it is reset
	// (adopt), not given only the newer SETs.
	resetAt int
	client  clientFlags
	jobs    []job
	// start and end bound the unit in the capture (ns, loop-adjusted);
	// commitStart is when its last statement (the COMMIT) started, and for
	// a lone change, when it ended (see lone).
	start, end, commitStart int64
	// lone: a change on its own (autocommit). It commits as it ends, not
	// as it starts: one that waited on the server for another
	// transaction's lock started before that transaction's COMMIT and
	// committed after it. So it goes out after the units whose COMMIT
	// started before it ended, and waits for them (not only for those
	// committed when it started) before it runs.
	lone bool
	// open: the capture ended (or the session quit) with the transaction
	// open; the server rolled it back (but for an XA transaction the
	// session prepared: worker.detachXA). atStop: the capture ended then,
	// not the session.
	open, atStop bool
	// manual: the session had autocommit off when the unit began.
	manual bool
	// commitAtEnd: the capture's server committed the unit implicitly
	// after its last record (a BEGIN or SET autocommit=1 that followed),
	// or may have, in commands a packet capture lost.
	commitAtEnd bool
	// lead counts the jobs at its start that set the session's next
	// statement only (SET TRANSACTION, SET insert_id: regrouper.addTo),
	// with SETs of session state between them and it.
	lead int
	t    *order.Ticket
	// prep: what t is made of, worked out as the unit closed
	// (runner.prepTicket).
	prep ticketPrep
	// first holds jobs[0] of a unit of one job (most units outside
	// transactions), so that such a unit is one allocation, not two.
	first [1]job
}

// clientFlags are the captured client's result-relevant flags.
type clientFlags struct {
	caps        uint32
	interactive bool
	collation   byte
	// cacheMetadata: the client asked for MariaDB's metadata caching, so
	// the server skipped the column definitions of its executes.
	cacheMetadata bool
}

// regroupSession is what regrouping tracks of a captured session.
type regroupSession struct {
	schema string
	sqlOf  map[uint32]string
	// unrunnable: the statements whose prepare cannot run, and why.
	unrunnable map[uint32]byte
	sets       []setVar
	version    int
	resetAt    int         // the version of its last change of user or reset
	trx        sqlinfo.Trx // where its transactions open and end
	client     clientFlags
	open       *unit
}

// regrouper turns records, in capture order, into units.
type regrouper struct {
	an       *sqlinfo.Analyzer
	sessions map[uint64]*regroupSession
	offset   func(rec *store.Record, loop int) int64
	done     []*unit // add's result, reused
	spares   *spares // nil: every unit and record is a new one
	// versions numbers the sessions' states across all of them and every
	// pass (--loop): a session that ends and comes back (the next pass)
	// never reuses a version a worker may still hold for it (adopt).
	versions int
}

// nextVersion is a state version no session had before.
func (g *regrouper) nextVersion() int {
	g.versions++
	return g.versions
}

func newRegrouper(an *sqlinfo.Analyzer, offset func(*store.Record, int) int64) *regrouper {
	return &regrouper{an: an, sessions: map[uint64]*regroupSession{}, offset: offset}
}

func (g *regrouper) session(rec *store.Record) *regroupSession {
	s := g.sessions[rec.Session]
	if s == nil {
		s = &regroupSession{schema: rec.Schema, sqlOf: map[uint32]string{}, unrunnable: map[uint32]byte{}, client: defaultClient}
		s.version = g.nextVersion()
		s.resetAt = s.version // a new session: the server's defaults
		g.sessions[rec.Session] = s
	}
	return s
}

var defaultClient = clientFlags{caps: defaultCaps}

// add takes the next record (rec is not kept: jobs hold clones) and returns
// the units it completes, in order, in a slice that is the regrouper's:
// valid until the next add.
func (g *regrouper) add(rec *store.Record, loop int, intended time.Time) []*unit {
	clear(g.done)
	g.done = g.addTo(g.done[:0], rec, loop, intended)
	return g.done
}

// addTo is add, appending the completed units to done.
func (g *regrouper) addTo(done []*unit, rec *store.Record, loop int, intended time.Time) []*unit {
	s := g.session(rec)
	closeOpen := func() {
		if s.open != nil {
			done = append(done, s.open)
			s.open = nil
		}
	}
	switch rec.Kind {
	case store.KindConnect:
		s.schema, s.client = rec.Schema, clientOf(rec)
		return nil
	case store.KindInitDB:
		if rec.Resp.Kind != store.RespError {
			s.schema = rec.Schema
			if s.leading() {
				s.open.schema = s.schema // the statement the unit waits for runs there
			}
		}
		return nil
	case store.KindChangeUser, store.KindResetConnection:
		if rec.Kind == store.KindChangeUser {
			s.schema = rec.Schema
		}
		s.sets, s.sqlOf = nil, map[uint32]string{}
		clear(s.unrunnable)
		s.trx.Reset()
		s.version = g.nextVersion()
		s.resetAt = s.version // the server's defaults again (adopt)
		if s.open != nil {
			s.open.open = true
			closeOpen()
		}
		return done
	case store.KindPrepare:
		delete(s.unrunnable, rec.StmtID)
		switch why := unrunnablePrepare(rec); {
		case why != 0:
			delete(s.sqlOf, rec.StmtID) // its executes are skipped (a truncated text must not run)
			s.unrunnable[rec.StmtID] = why
		case rec.Resp.Kind == store.RespError:
		default:
			s.sqlOf[rec.StmtID] = rec.SQL
		}
		return nil
	case store.KindOther:
		if on, ok := capture.MultiStatementsOption(rec); ok && rec.Resp.Kind != store.RespError {
			// The session's next units run with multi-statement texts on
			// or off (adopt sets it on the connection).
			s.client.setMultiStatements(on)
			if s.leading() {
				s.open.client = s.client
			}
		}
		if rec.CommandsLost() && s.trx.Lost().CommitBefore && s.open != nil {
			// The lost commands may have ended the transaction
			// (sqlinfo.Trx.Lost): the unit ends there, committed.
			s.open.commitAtEnd = true
			closeOpen()
		}
		return done
	case store.KindClose, store.KindPing, store.KindReset, store.KindFetch:
		return nil
	case store.KindQuit:
		if s.open != nil {
			s.open.open = true
			s.open.atStop = rec.Flags&store.FlagOpenAtStop != 0
			closeOpen()
		}
		delete(g.sessions, rec.Session)
		return done
	}
	j := job{rec: g.spares.clone(rec), loop: loop, intended: intended}
	switch rec.Kind {
	case store.KindLongData:
		// Long data goes with the execute that follows it.
		j.sql = s.sqlOf[rec.StmtID]
		if s.open == nil {
			s.open = g.newUnit(rec, loop, s)
		}
		s.open.jobs = append(s.open.jobs, j)
		return nil
	case store.KindQuery:
		j.sql = rec.SQL
	case store.KindExecute:
		j.sql = s.sqlOf[rec.StmtID]
		j.unrunnable = s.unrunnable[rec.StmtID]
	}
	j.info = g.an.Info(j.sql)
	info := j.info
	manual := !s.trx.Autocommit() // as the session stood when the statement began
	step := s.trx.Apply(info, capturedError(rec))
	if step.CommitBefore && (info.Begin || info.Set) && s.open != nil {
		// BEGIN and SET autocommit=1 commit the transaction before them,
		// and are not part of it: the unit ends with that commit. (A DDL's
		// implicit commit stays the unit's last statement, on the
		// connection that holds the transaction.)
		s.open.commitAtEnd = true
		closeOpen()
	}
	// lead: a SET for the session's next statement only (SET TRANSACTION,
	// SET insert_id): it goes as a job with that statement, on its
	// connection, and is no part of the session's state that later units
	// carry; set on a unit's connection ahead of time, it applied to what
	// ran there next, maybe another session's, and not to its own.
	lead := info.SetNext && !step.In
	if info.Set {
		if as, ok := sqlinfo.SetAssignments(j.sql); ok {
			if slices.ContainsFunc(as, func(a sqlinfo.Assignment) bool { return sqlinfo.OneShot(a.Name) }) {
				lead = !step.In
				as = slices.DeleteFunc(slices.Clone(as), func(a sqlinfo.Assignment) bool { return sqlinfo.OneShot(a.Name) })
			}
			if len(as) > 0 {
				s.version = g.nextVersion()
				for _, a := range as {
					s.setVar(a, s.version, rec.Resp.Kind == store.RespOK)
				}
				j.setVersion = s.version
			}
			if s.open == nil && !lead {
				return done // state, applied before the session's next unit
			}
		}
	}
	if (info.Set || info.Use) && !step.In && s.leading() {
		// Between a one-shot SET and its statement: state, that this
		// unit's connection gets from the job.
		lead = true
	}
	if info.Use && s.open == nil {
		if db, ok := sqlinfo.UseSchema(j.sql); ok {
			s.schema = db // USE changes the session's schema, like COM_INIT_DB
			return done
		}
	}
	if s.open == nil {
		s.open = g.newUnit(rec, loop, s)
		s.open.manual = manual
	}
	u := s.open
	u.jobs = append(u.jobs, j)
	u.commitStart = g.offset(rec, loop)
	u.end = u.commitStart + int64(rec.Duration)
	if info.Use {
		if db, ok := sqlinfo.UseSchema(j.sql); ok {
			s.schema = db
		}
	}
	if lead && u.lead == len(u.jobs)-1 {
		u.lead++
		return done // the unit waits for its statement
	}
	if !step.In && len(u.jobs) == u.lead+1 && info.Changes() {
		u.lone, u.commitStart = true, u.end
	}
	if !step.In || step.End != sqlinfo.EndNone {
		closeOpen() // a statement on its own, or the transaction's end
	}
	return done
}

func (g *regrouper) newUnit(rec *store.Record, loop int, s *regroupSession) *unit {
	start := g.offset(rec, loop)
	u := g.spares.unit()
	jobs := u.jobs[:0] // a spare's, emptied (spares.refill): a transaction's jobs without growing them again
	*u = unit{session: rec.Session, schema: s.schema, sets: append([]setVar(nil), s.sets...), version: s.version, resetAt: s.resetAt,
		client: s.client, start: start, end: start + int64(rec.Duration), commitStart: start, manual: !s.trx.Autocommit()}
	if cap(jobs) > len(u.first) {
		u.jobs = jobs
	} else {
		u.jobs = u.first[:0]
	}
	return u
}

// leading reports whether the session's open unit holds only SETs for
// the statement it waits for (unit.lead).
func (s *regroupSession) leading() bool { return s.open != nil && s.open.lead == len(s.open.jobs) }

// setVar records a's value as the session's latest for its variable.
func (s *regroupSession) setVar(a sqlinfo.Assignment, version int, ok bool) {
	for i := range s.sets {
		if s.sets[i].name == a.Name {
			s.sets[i].text, s.sets[i].value, s.sets[i].version, s.sets[i].ok = a.Text, a.Value, version, ok
			return
		}
	}
	s.sets = append(s.sets, setVar{name: a.Name, text: a.Text, value: a.Value, version: version, ok: ok})
}

// flush returns the units still open when the capture ends: transactions
// never committed (the server rolled them back when the client left).
func (g *regrouper) flush() []*unit {
	var out []*unit
	for _, s := range g.sessions {
		if s.open != nil {
			s.open.open, s.open.atStop = true, true
			out = append(out, s.open)
			s.open = nil
		}
	}
	return out
}

// setMultiStatements turns CLIENT_MULTI_STATEMENTS on or off in c (a
// captured COM_SET_OPTION).
func (c *clientFlags) setMultiStatements(on bool) {
	if on {
		c.caps |= mysql.CLIENT_MULTI_STATEMENTS
	} else {
		c.caps &^= mysql.CLIENT_MULTI_STATEMENTS
	}
}

// clientOf reads a connect record's client flags.
func clientOf(rec *store.Record) clientFlags {
	if rec.ClientCaps == 0 {
		return defaultClient
	}
	return clientFlags{caps: uint32(rec.ClientCaps), interactive: rec.ClientCaps&clientInteractive != 0, collation: rec.Collation,
		cacheMetadata: rec.ClientCaps&wire.MariaDBClientCacheMetadata != 0}
}

// Client flags replay reads from a captured connect.
const (
	defaultCaps       = conn.DefaultCaps
	clientInteractive = 0x400 // CLIENT_INTERACTIVE
)

// spares are units that ran, and the records of their jobs, handed back
// by the connections of a --concurrency replay for the regrouper to fill
// again. A point-select replay allocated some 600 bytes a statement for
// them (the record read ahead, 390; its unit, 210): most of what its
// garbage collector had to do. They go back a batch at a time, once every
// unit of the batch has run (nothing holds a unit, its jobs or their
// records after that: a worker's open transaction ends with its unit),
// and only when no observer is told of outcomes (Done holds the record).
// Only the unit, the record and the record's room for parameters are
// reused (store.Record.CloneInto), not the strings, slices and bytes they
// point to: those may still be referenced (by a ticket, an outcome, a
// connection's last execute). The package's tests poison what is handed
// back instead of reusing it (poisonSpares).
type spares struct {
	back  chan []*unit // batches that ran; a full channel drops them
	units []*unit
	recs  []*store.Record
	// poison (tests): units and records are overwritten as they are
	// handed back, with values no capture holds, and dropped: a use after
	// the hand-back runs or reports a record that was never captured.
	poison bool
	// reusedUnits and reusedRecords count what was filled again (tests;
	// nil: not counted).
	reusedUnits, reusedRecords *atomic.Int64
}

// sparesReused counts the units and records a run filled again (tests).
type sparesReused struct{ units, records atomic.Int64 }

func newSpares(batches int, reused *sparesReused) *spares {
	sp := &spares{back: make(chan []*unit, batches), poison: poisonSpares && reused == nil}
	if reused != nil {
		sp.reusedUnits, sp.reusedRecords = &reused.units, &reused.records
	}
	return sp
}

// poisonSpares: every run poisons its spares (see spares.poison) unless
// its Config asks for them reused and counted. Set by the package's tests.
var poisonSpares = false

// give hands back a batch of units that ran (a connection's side).
func (sp *spares) give(us []*unit) {
	if sp == nil {
		return
	}
	if sp.poison {
		for _, u := range us {
			for i := range u.jobs {
				r := u.jobs[i].rec
				if r != nil {
					*r = poisonRecord
				}
				u.jobs[i] = job{rec: r} // what a spare's room would be filled with
			}
			*u = poisonUnit
		}
		return
	}
	select {
	case sp.back <- us:
	default:
	}
}

// refill takes back what the connections handed back, if the regrouper
// has nothing spare.
func (sp *spares) refill() {
	for len(sp.units) == 0 || len(sp.recs) == 0 {
		var us []*unit
		select {
		case us = <-sp.back:
		default:
			return
		}
		for _, u := range us {
			for i := range u.jobs {
				if r := u.jobs[i].rec; r != nil {
					sp.recs = append(sp.recs, r)
				}
			}
			jobs := u.jobs
			clear(jobs) // what the jobs pointed to is not reused: see spares
			*u = unit{}
			if cap(jobs) > len(u.first) && cap(jobs) <= maxSpareJobs {
				u.jobs = jobs[:0] // its room is (newUnit)
			}
			sp.units = append(sp.units, u)
		}
	}
}

// maxSpareJobs bounds the room for jobs a spare unit keeps: one huge
// transaction's must not stay with the run.
const maxSpareJobs = 64

// poisonRecord and poisonUnit are what spares.poison overwrites with.
var (
	poisonRecord = store.Record{Seq: math.MaxUint64 - 1, Session: math.MaxUint64 - 1, Kind: store.KindQuery, SQL: "SELECT 'a record used after it was handed back'"}
	poisonUnit   = unit{session: math.MaxUint64 - 1, schema: "poisoned-unit"}
)

// clone is rec.Clone, into a spare record if there is one.
func (sp *spares) clone(rec *store.Record) *store.Record {
	if sp == nil {
		return rec.Clone()
	}
	sp.refill()
	if c, ok := popSpare(&sp.recs, sp.reusedRecords); ok {
		return rec.CloneInto(c)
	}
	return rec.Clone()
}

// unit returns a spare unit, zero, or a new one.
func (sp *spares) unit() *unit {
	if sp == nil {
		return new(unit)
	}
	sp.refill()
	if u, ok := popSpare(&sp.units, sp.reusedUnits); ok {
		return u
	}
	return new(unit)
}

// popSpare takes the last of *list, counting it in count (if not nil).
func popSpare[T any](list *[]T, count *atomic.Int64) (T, bool) {
	n := len(*list)
	if n == 0 {
		var zero T
		return zero, false
	}
	x := (*list)[n-1]
	*list = (*list)[:n-1]
	if count != nil {
		count.Add(1)
	}
	return x, true
}
