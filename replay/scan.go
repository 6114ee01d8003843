package replay

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/tandemdb/tandem/capture"
	"github.com/tandemdb/tandem/compare"
	"github.com/tandemdb/tandem/internal/charset"
	"github.com/tandemdb/tandem/sqlinfo"
	"github.com/tandemdb/tandem/store"
)

// captureIndex is what replay learns of a capture in one pass before any
// statement runs: its sessions, statement digests by count, the tables it
// touches and creates, the sessions whose state cannot move between
// connections, and the commits that decide whether a difference is
// order-ambiguous.
type captureIndex struct {
	records uint64
	// statements: the records that are statements (countsAsStatement);
	// writeTrx: the transactions among them that committed writes
	// (scanSession.commit), not counting autocommit writes. IOAuto
	// weighs the two (ioMode).
	statements, writeTrx uint64
	sessions             []uint64
	// recordsOf counts each session's records (a shard's share).
	recordsOf map[uint64]uint64
	// first and last record start (ns, the capture's clock).
	first, last int64
	digests     map[string]*digestCount
	// tables the capture touches, "schema.name" with the captured schema
	// (or as qualified in the statement).
	tables  []string
	created []string
	// createdDropped: tables the capture created and dropped again, or
	// created temporary.
	createdDropped int
	pinned         map[uint64]bool
	commits        *compare.Commits
	// gaps: writes replay skips (not replayable, truncated, masked).
	gaps *compare.Gaps
	// chosen: writes of values each server chooses anew (UUID(), RAND()
	// …: sqlinfo.Info.ChosenValues), and writes that copied from a table
	// such a write had reached: from there the table's rows differ
	// between targets and from the capture (compare.ReasonChosenValues).
	chosen *compare.Gaps
	// srv: what the targets' schemas choose on their own (column
	// defaults, triggers, stored routines), read at the run's start; nil:
	// none.
	// A followed capture is indexed as it is written, while its run sets
	// this.
	srv atomic.Pointer[serverChoices]
	// lostCmds: where a packet capture lost a session's bytes (FlagLost, not
	// at a join): its transaction's state is unknown from there, so the
	// order the targets ran others in may differ by it (between targets).
	lostCmds *compare.Gaps
	// lostEnded: transactions open where a packet capture lost their
	// session's commands, which replay commits there.
	lostEnded int
	// killedQuits: the end records (by seq) of sessions another session's
	// KILL ended, recorded before that KILL's answer (scanner.kill).
	killedQuits map[uint64]bool
	// xaEnded: the xids (sqlinfo.XidKey, as captured) that a captured XA
	// COMMIT or ROLLBACK ended: a transaction prepared under any other is
	// never ended in the capture (worker.detachXA).
	xaEnded map[string]bool
	// synthetic: written by tandem synth (its timings are made up).
	synthetic bool
	// changes: some record changes what other sessions see, or may (the
	// rule of trxChanges: a write, DDL, a locking read, a statement of
	// unknown effect, one replay cannot run). Without one, --order
	// capture has nothing to order (runner.ordered).
	changes bool
	// writes: some statement replay runs writes what a read-only server
	// refuses (read_only, for an account without READ ONLY ADMIN): a
	// table other than its session's temporary ones, DDL, a locking read,
	// LOCK TABLES, or what the analysis cannot tell. Named locks,
	// transactions and temporary tables are changes, not such writes.
	writes bool
	// schemaChanges: some statement may change what a table is (DDL, a
	// statement replay cannot analyse, an execute of one prepared before
	// the capture): the tables' views, triggers and keys read at the
	// start may not hold to the end (runner.access).
	schemaChanges bool
	// clockDDL: the tables (captured names, lower-case) the capture's
	// DDL names; clockAll: it may change what any table's writes read of
	// the clock (CREATE TRIGGER, CREATE FUNCTION, CALL, dynamic SQL).
	// Both leave writes their captured time (noteClock).
	clockDDL map[string]bool
	clockAll bool
	// lost: the records the capture lacks (a crash, a damaged file).
	lost store.SeqGaps
	// writers: which sessions write each table (for --order none).
	writers *compare.Writers
	// how sessions entered and left the capture (open at its start or
	// stop, on a running proxy).
	sessionsBy store.CaptureSessions
	// ranks: the server's commit order over the records (nil: the
	// capture holds no GTIDs; a followed capture's are not ranked).
	ranks *commitRanks
}

type digestCount struct {
	text  string
	class sqlinfo.Class
	n     uint64
}

// scanSession is the scan's view of one captured session.
type scanSession struct {
	schema   string
	sqlOf    map[uint32]string
	trx      sqlinfo.Trx     // where its transactions open and end
	writes   map[string]bool // tables its open transaction wrote: true if it deleted rows of one
	lostData map[uint32]bool // statements whose long data the capture cut
	// temp: the temporary tables it created (schema.name), which a
	// read-only server lets it write.
	temp    map[string]bool
	unknown bool
	conn    uint32 // the connection id the captured server gave it
	// changedAt: when its open transaction's first change (a write, a
	// locking read) started (ns; 0: none yet).
	changedAt int64
	// cs follows the session's character_set_client.
	cs charset.Session
	// chosenVars: its user variables that hold a value the targets cannot
	// have as captured (flowVars), by lower-cased name. varsUnknown: so
	// may any variable it did not assign since (setVars): a session open
	// before the capture (what it set then is not in the capture, or
	// only as SET texts a join runs again), or one a statement replay
	// skips and the scan could not read may have assigned.
	chosenVars, setVars map[string]bool
	varsUnknown         bool
}

// resetVars starts the session's user variables afresh: a new connection,
// a reset, a change of user; unknown if the session was open before the
// capture (its connect is synthetic).
func (s *scanSession) resetVars(unknown bool) {
	clear(s.chosenVars)
	clear(s.setVars)
	s.varsUnknown = unknown
}

// heldVar reports whether the session's variable n may hold a value the
// targets cannot have as captured.
func (s *scanSession) heldVar(n string) bool {
	return s.chosenVars[n] || s.varsUnknown && !s.setVars[n]
}

// flowVars follows the session's user variables through sql, a statement
// that ran in the capture. It reports whether sql reads one that may hold
// a value the targets cannot have as the captured server had it, and
// marks those it assigns such a value: one each server chooses anew
// (UUID() …), one read from such a variable or from a table such a value
// reached (fromTables), any value when replay does not run the statement
// (skipped: the variable keeps what it held on the target), and any value
// of a SET that a session open at the capture's start ran again when it
// joined (joined: capture.Session.Join keeps SET texts once each, not
// what the session assigned otherwise, and runs them long after). An
// assignment of any other value clears the mark, but one that may assign
// nothing (SELECT … INTO that finds no row) leaves it. inOnly are the
// variables a CALL passes to IN parameters only (serverChoices.inOnly):
// the routine does not assign them. calls: sql calls a stored function
// whose value each server chooses anew (serverChoices.calledFunctions):
// whatever it assigns may hold one.
func (s *scanSession) flowVars(sql string, skipped, joined, fromTables, calls bool, inOnly map[string]bool) bool {
	assigns, reads, ok := sqlinfo.UserVarFlow(sql)
	if !ok {
		if skipped {
			// What it assigned is not known: every variable may hold
			// anything from here.
			s.resetVars(true)
		}
		return false
	}
	held := func(names []string) bool { return slices.ContainsFunc(names, s.heldVar) }
	readsChosen := held(reads)
	for _, a := range assigns {
		if inOnly[a.Name] {
			continue
		}
		from := held(a.Reads)
		readsChosen = readsChosen || from
		switch {
		case skipped || joined || a.Chosen || calls || from || fromTables:
			if s.chosenVars == nil {
				s.chosenVars = map[string]bool{}
			}
			s.chosenVars[a.Name] = true
		case a.Keeps:
		default:
			delete(s.chosenVars, a.Name)
			if s.varsUnknown {
				if s.setVars == nil {
					s.setVars = map[string]bool{}
				}
				s.setVars[a.Name] = true
			}
		}
	}
	return readsChosen
}

// qualify names tables as "schema.name", unqualified ones in schema.
func qualify(ts []sqlinfo.Table, schema string, dst []string) []string {
	for _, t := range ts {
		q := t.In(schema).String()
		if !slices.Contains(dst, q) {
			dst = append(dst, q)
		}
	}
	return dst
}

// scanCapture reads the capture once.
func scanCapture(ctx context.Context, r *store.Reader, an *sqlinfo.Analyzer, srv *serverChoices) (*captureIndex, error) {
	sc := newScanner(an)
	sc.x.srv.Store(srv)
	x := sc.x
	x.synthetic = strings.HasPrefix(r.Meta().Source, "synth ")
	first, last, ok, err := r.StartSpan()
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errors.New("replay: the capture holds no records")
	}
	x.first, x.last = first.UnixNano(), last.UnixNano()
	lostFrom := x.first - 1 // records lost before the first found: from the start
	gtids, err := r.GTIDs()
	if err != nil {
		return nil, err
	}
	var commits []gtidAt
	unparsed := 0
	for rec, err := range r.Records() {
		if err != nil {
			return nil, err
		}
		if x.records%65536 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if rec.Seq < store.BypassedSeqBase { // applied bypassed records have seqs of their own
			if rec.Seq > x.lost.Last()+1 {
				// Records lost before this one ended after the one before
				// it (records are written as they end): any of them may
				// have written any table, for every session from then on.
				x.gaps.Add(0, lostFrom, []string{compare.AnyTable})
			}
			x.lost.Note(rec.Seq)
			lostFrom = rec.Start.UnixNano() + int64(rec.Duration)
		}
		if len(gtids) > 0 || rec.Session >= store.BypassedSessionBase {
			commits = collectCommit(commits, gtids, rec, &unparsed)
		}
		sc.add(rec)
	}
	if x.ranks = newCommitRanks(commits); x.ranks != nil {
		x.ranks.completeness(r, unparsed)
	}
	x.sessions, err = r.Sessions()
	if err != nil {
		return nil, err
	}
	sc.finish()
	return x, nil
}

// scanner builds a captureIndex one record at a time: from a whole
// capture (scanCapture), or as a live capture is followed (shadows).
type scanner struct {
	x               *captureIndex
	an              *sqlinfo.Analyzer
	sessions        map[uint64]*scanSession
	tables, created map[string]bool
	scratch         []string
	// ended: sessions that ended without a COM_QUIT, by their connection
	// id: their end record's seq and start (nil: not kept, for a followed
	// capture).
	ended map[uint32]endedAt
	// followed: a live capture, indexed as long as it runs: nothing is
	// kept per session beyond the session's end (recordsOf, for shards
	// of a whole capture, is not kept).
	followed bool
}

type endedAt struct {
	seq uint64
	at  int64
}

// kill notes a KILL of a connection that started at start and succeeded:
// when the session it names ended without a COM_QUIT while the KILL was
// under way, that end is the KILL's doing, though the capture recorded it
// first (the server closes the connection before it answers the KILL):
// replay leaves the connection for the KILL to end
// (captureIndex.killedQuits).
func (sc *scanner) kill(sql string, start int64) {
	id, ok := killsConnection(sql)
	if !ok {
		return
	}
	if e, ok := sc.ended[id]; ok && e.at >= start {
		if sc.x.killedQuits == nil {
			sc.x.killedQuits = map[uint64]bool{}
		}
		sc.x.killedQuits[e.seq] = true
	}
}

// killsConnection reports the connection id a KILL ends, when sql is one
// that ends a connection (not KILL QUERY) named by an id replay can map.
func killsConnection(sql string) (uint32, bool) {
	k, _ := sqlinfo.ParseKill(sql)
	if k.ID == 0 || k.Query || k.ID > math.MaxUint32 {
		return 0, false
	}
	return uint32(k.ID), true
}

// noteChosen indexes a write, by session at start in schema, of values
// each server chooses anew (in its text, or in user variables it reads:
// vars), or of rows read from a table such a write had reached
// (x.chosen); a table created, dropped or truncated starts over.
func (x *captureIndex) noteChosen(session uint64, start int64, info *sqlinfo.Info, sql, schema string, skipped, vars bool, fc fnCalls) {
	writes := qualify(info.Writes, schema, nil)
	switch {
	case info.TableDDL && info.Verb == "CREATE":
		created := qualify(info.Created, schema, nil)
		x.chosen.Reset(start, created)
		writes = created // CREATE … SELECT fills it
	case info.Verb == "DROP" || info.Verb == "TRUNCATE":
		x.chosen.Reset(start, writes)
		return
	}
	if skipped {
		return
	}
	if srv := x.srv.Load(); srv != nil {
		// What the targets' defaults, triggers and stored routines
		// choose on their own; a CALL's arguments may hold such values.
		args := vars || fc.chooses || info.Verb == "CALL" && sqlinfo.ChoosesValues(sql) // (a CALL's ChosenValues: none, it names no writes)
		x.markChosen(srv, session, start, info, sql, schema, args, fc)
	}
	if len(writes) == 0 {
		return
	}
	chosen := info.ChosenValues || vars || fc.chooses
	if !chosen && x.chosen.Len() > 0 {
		// What it reads, the tables it makes aside (they start over).
		reads := slices.DeleteFunc(qualify(info.Reads, schema, nil), func(t string) bool { return info.Verb == "CREATE" && slices.Contains(writes, t) })
		_, chosen = x.chosen.Before(start, reads)
	}
	if chosen {
		x.chosen.Add(session, start, writes)
	}
}

func newScanner(an *sqlinfo.Analyzer) *scanner {
	x := &captureIndex{digests: map[string]*digestCount{}, pinned: map[uint64]bool{}, commits: compare.NewCommits(), gaps: compare.NewGaps(), chosen: compare.NewGaps(), lostCmds: compare.NewGaps(), recordsOf: map[uint64]uint64{},
		writers: compare.NewWriters()}
	return &scanner{x: x, an: an, sessions: map[uint64]*scanSession{}, tables: map[string]bool{}, created: map[string]bool{}, ended: map[uint32]endedAt{}}
}

// unknownWrites reports whether rec is one that replay skips and whose
// writes it cannot name: commands a packet capture lost (store.FlagLost),
// a statement whose schema the capture does not know
// (store.FlagSchemaUnknown), an execute of a statement prepared before the
// capture saw its session.
func unknownWrites(rec *store.Record, sqlOf map[uint32]string) bool {
	switch {
	case rec.Flags&(store.FlagLost|store.FlagSchemaUnknown) != 0:
		return true
	case rec.Kind == store.KindExecute && rec.Flags&store.FlagOpenAtStart == 0:
		_, ok := sqlOf[rec.StmtID]
		return !ok
	}
	return false
}

// add indexes one record, in capture order.
func (sc *scanner) add(rec *store.Record) {
	x, an := sc.x, sc.an
	x.records++
	if countsAsStatement(rec.Kind) {
		x.statements++
	}
	if !sc.followed {
		x.recordsOf[rec.Session]++
	}
	x.sessionsBy.Add(rec)
	s := sc.sessions[rec.Session]
	if s == nil {
		s = &scanSession{sqlOf: map[uint32]string{}, schema: rec.Schema, writes: map[string]bool{}, lostData: map[uint32]bool{}, temp: map[string]bool{}}
		sc.sessions[rec.Session] = s
	}
	start, end := rec.Start.UnixNano(), rec.Start.UnixNano()+int64(rec.Duration)
	if unknownWrites(rec, s.sqlOf) {
		// Replay skips it and cannot name what it wrote: from here on any
		// table may differ from the capture's.
		x.changes = true
		x.schemaChanges = true
		// An execute of a prepare that failed in the capture runs all the
		// same (the session's worker prepares it again), writing who knows
		// what.
		x.writes = x.writes || rec.Kind == store.KindExecute
		if capture.MayHaveWritten(rec) {
			x.gaps.Add(rec.Session, start, []string{compare.AnyTable})
			x.writers.Add(compare.AnyTable, rec.Session)
		}
		if rec.CommandsLost() {
			// The lost commands may have ended the open transaction:
			// replay commits it here (sqlinfo.Trx.Lost), as soon as the
			// session's last statement seen is done. So its writes may
			// show, on a target, to what others ran from its first
			// change on, which the capture ran before the commit.
			from := start
			if s.trx.Open() && s.changedAt != 0 {
				from = min(from, s.changedAt)
			}
			if s.trx.Lost().CommitBefore {
				x.lostEnded++
				s.commit(x, rec.Session, from, start)
			}
			x.lostCmds.Add(rec.Session, from, []string{compare.AnyTable})
		}
		return
	}
	var sql string
	switch rec.Kind {
	case store.KindConnect, store.KindInitDB, store.KindChangeUser:
		if rec.Kind == store.KindConnect {
			s.conn = rec.ConnID
			clear(s.temp) // a new connection (replay's reconnects too)
			s.resetVars(rec.Flags&store.FlagOpenAtStart != 0)
		}
		if rec.Resp.Kind != store.RespError {
			if rec.Kind != store.KindInitDB {
				s.cs.Connect(rec.Collation)
			}
			s.schema = s.cs.ToUTF8(rec.Schema)
		}
		if rec.Kind == store.KindChangeUser {
			s.sqlOf = map[uint32]string{}
			clear(s.temp)
			s.resetVars(false)
			s.rollback()
			s.trx.Reset()
		}
		return
	case store.KindPrepare:
		switch {
		case rec.Resp.Kind == store.RespError:
		case unrunnablePrepare(rec) != 0:
			delete(s.sqlOf, rec.StmtID) // its executes are skipped (a truncated text must not run)
		default:
			s.sqlOf[rec.StmtID] = rec.SQL
		}
		if info := an.Info(rec.SQL); info.PinsSession() {
			x.pinned[rec.Session] = true
		}
		return
	case store.KindClose:
		delete(s.sqlOf, rec.StmtID)
		delete(s.lostData, rec.StmtID)
		return
	case store.KindLongData:
		if rec.Flags&store.FlagTruncated != 0 {
			s.lostData[rec.StmtID] = true // replay skips the execute it feeds
		}
		return
	case store.KindResetConnection:
		s.cs.Reset()
		s.sqlOf = map[uint32]string{}
		clear(s.temp)
		s.resetVars(false)
		s.rollback()
		s.trx.Reset()
		return
	case store.KindQuit:
		s.rollback()
		delete(sc.sessions, rec.Session)
		if rec.Command != mysql.COM_QUIT && s.conn != 0 && sc.ended != nil {
			// Ended without the client's COM_QUIT: the server (or the
			// client's socket) closed it, perhaps by another session's
			// KILL still under way (killedQuits).
			sc.ended[s.conn] = endedAt{seq: rec.Seq, at: start}
		}
		return
	case store.KindQuery:
		sql = rec.SQL
	case store.KindExecute:
		sql = s.sqlOf[rec.StmtID]
		if rec.CursorType != 0 {
			x.pinned[rec.Session] = true // an open cursor lives on its connection
		}
	default:
		return
	}
	if sql == "" {
		// An execute of a statement the session did not prepare here:
		// replay's worker takes it for a change (trxChanges).
		x.changes = x.changes || rec.Kind == store.KindExecute || an.Info(sql).Changes()
		x.schemaChanges = x.schemaChanges || rec.Kind == store.KindExecute || mayChangeSchema(an.Info(sql))
		// What it writes is not known (replay skips an execute of a
		// statement prepared before the capture: counting it errs on the
		// safe side).
		x.writes = x.writes || rec.Kind == store.KindExecute
		return
	}
	// Names in the statement are in the session's character set; the
	// targets' information_schema and the reports speak UTF-8.
	// Digests are the captured text's (replay's workers digest it as
	// captured), printed in UTF-8.
	info := an.Info(sql)
	if u := s.cs.ToUTF8(sql); u != sql {
		conv := *an.Info(u) // a copy: the analyzer's cache is shared
		conv.Digest.ID = info.Digest.ID
		info = &conv
	}
	if info.Kill && rec.Kind == store.KindQuery && rec.Resp.Kind == store.RespOK {
		sc.kill(rec.SQL, start)
	}
	if info.Verb == "XA" && info.End && rec.Resp.Kind == store.RespOK {
		if xid, ok := sqlinfo.XidKey(sql); ok {
			if x.xaEnded == nil {
				x.xaEnded = map[string]bool{}
			}
			x.xaEnded[xid] = true
		}
	}
	// An end of a transaction is a change only when the transaction
	// changed something, which set changes already.
	x.changes = x.changes || info.Changes() && !onlyEnds(info)
	x.schemaChanges = x.schemaChanges || mayChangeSchema(info)
	d := x.digests[info.Digest.ID]
	if d == nil {
		d = &digestCount{text: info.Digest.Text, class: info.Class}
		x.digests[info.Digest.ID] = d
	}
	d.n++
	if info.PinsSession() || info.Chain {
		// … AND CHAIN: the transaction it opens is the session's next
		// unit's, which --concurrency may run on another connection,
		// where nothing opened it.
		x.pinned[rec.Session] = true
	}
	if info.Use {
		if db, ok := sqlinfo.UseSchema(sql); ok && rec.Resp.Kind != store.RespError {
			s.schema = s.cs.ToUTF8(db)
		}
	}
	if info.Set && rec.Resp.Kind != store.RespError {
		s.cs.Statement(sql)
		if !x.pinned[rec.Session] && setsWhatItDid(sql) {
			x.pinned[rec.Session] = true
		}
	}
	sc.scratch = qualify(info.Reads, s.schema, sc.scratch[:0])
	sc.scratch = qualify(info.Writes, s.schema, sc.scratch)
	for _, t := range sc.scratch {
		sc.tables[t] = true
	}
	failed := rec.Resp.Kind == store.RespError
	for _, t := range qualify(info.Writes, s.schema, nil) {
		x.writers.Add(t, rec.Session)
	}
	if info.WritesUnknown {
		x.writers.Add(compare.AnyTable, rec.Session)
	}
	if !failed {
		for _, t := range qualify(info.Created, s.schema, nil) {
			switch {
			case !info.TempTable:
				sc.created[t] = true
			case !sc.created[t]:
				// A temporary table: gone with its session, in no
				// server's list of tables at the end.
				sc.created[t] = false
			}
		}
		if info.Verb == "DROP" && !info.TempTable { // DROP TEMPORARY leaves a table of that name
			for _, t := range qualify(info.Writes, s.schema, nil) {
				if sc.created[t] {
					sc.created[t] = false // the traffic dropped it again
				}
			}
		}
	}
	// Writes replay will not run, and tables that start over.
	skippedByReplay := rec.Flags&(store.FlagNotReplayable|store.FlagTruncated|store.FlagMasked) != 0 ||
		rec.Kind == store.KindExecute && s.lostData[rec.StmtID]
	if rec.Kind == store.KindExecute {
		delete(s.lostData, rec.StmtID)
	}
	if !x.writes && !skippedByReplay {
		x.writes = s.writesPermanent(info)
	}
	if !failed && !skippedByReplay && info.TempTable {
		for _, t := range qualify(info.Created, s.schema, nil) {
			s.temp[t] = true
		}
	}
	if !failed && info.Verb == "DROP" && len(s.temp) > 0 {
		for _, t := range qualify(info.Writes, s.schema, nil) {
			delete(s.temp, t) // DROP [TEMPORARY] TABLE drops the temporary one first
		}
	}
	x.noteClock(info, sql, s.schema) // failed or not: a statement may fail in part
	// What the capture's own DDL makes the servers choose from here on.
	if !failed && !skippedByReplay {
		if now := x.srv.Load().learn(info, sql, s.schema); len(now) > 0 {
			x.chosen.Add(rec.Session, start, now)
		}
	}
	// Values the targets cannot have as captured, carried by the
	// session's user variables into what it writes.
	varsChosen := false
	var fc fnCalls // what the stored functions it calls do (serverChoices)
	if !failed {
		fc = x.srv.Load().calledFunctions(sql, s.schema)
	}
	if !failed && strings.IndexByte(sql, '@') >= 0 {
		fromTables := false
		if len(info.Reads) > 0 && (x.chosen.Len() > 0 || x.gaps.Len() > 0) {
			reads := qualify(info.Reads, s.schema, nil)
			_, c := x.chosen.Before(start, reads)
			_, g := x.gaps.Before(start, reads)
			fromTables = c || g
		}
		skipped := skippedByReplay || rec.Kind == store.KindQuery && sqlinfo.SetsGlobal(sql)
		var inOnly map[string]bool
		if info.Verb == "CALL" && info.Statements == 1 {
			inOnly = x.srv.Load().inOnly(sql, s.schema)
		}
		varsChosen = s.flowVars(sql, skipped, rec.Flags&store.FlagOpenAtStart != 0, fromTables, fc.chooses, inOnly)
	}
	if !failed {
		switch {
		case skippedByReplay:
			x.gaps.Add(rec.Session, start, qualify(info.Writes, s.schema, nil))
		case info.TableDDL && info.Verb == "CREATE":
			x.gaps.Reset(start, qualify(info.Created, s.schema, nil))
		case info.Verb == "DROP" || info.Verb == "TRUNCATE":
			x.gaps.Reset(start, qualify(info.Writes, s.schema, nil))
		}
		x.noteChosen(rec.Session, start, info, sql, s.schema, skippedByReplay, varsChosen, fc)
	}
	// When writes become visible to other sessions.
	step := s.trx.Apply(info, capturedError(rec))
	if step.CommitBefore {
		s.commit(x, rec.Session, start, end) // an open transaction commits implicitly
	}
	if !failed {
		writes := qualify(info.Writes, s.schema, nil)
		switch {
		case step.In:
			if s.changedAt == 0 && info.Changes() {
				s.changedAt = start
			}
			for _, w := range writes {
				s.writes[w] = s.writes[w] || deletes(info)
			}
			s.unknown = s.unknown || info.WritesUnknown
		case len(writes) > 0 || info.WritesUnknown:
			var deleted []string
			if deletes(info) {
				deleted = writes
			}
			x.commits.AddDeleting(rec.Session, start, end, writes, deleted, info.WritesUnknown) // on its own
		}
	}
	switch step.End {
	case sqlinfo.EndCommit:
		if failed {
			s.rollback() // a COMMIT that failed committed nothing
		} else {
			if _, hi, ok := store.ParseBypassedCommit(rec.SQL); ok && rec.Session >= store.BypassedSessionBase && hi > end {
				end = hi // a bypassed transaction: it committed somewhere up to hi
			}
			s.commit(x, rec.Session, start, end)
		}
	case sqlinfo.EndRollback:
		s.rollback()
	}
}

// finish fills the index's table lists from what add saw.
func (sc *scanner) finish() {
	x := sc.x
	x.tables, x.created, x.createdDropped = x.tables[:0], x.created[:0], 0
	for t := range sc.tables {
		x.tables = append(x.tables, t)
	}
	for t, there := range sc.created {
		if there {
			x.created = append(x.created, t)
		} else {
			x.createdDropped++
		}
	}
	slices.Sort(x.tables)
	slices.Sort(x.created)
}

// commit ends the session's open transaction: its writes become visible
// over [start, end].
func (s *scanSession) commit(x *captureIndex, session uint64, start, end int64) {
	if len(s.writes) > 0 || s.unknown {
		x.writeTrx++
		ws := make([]string, 0, len(s.writes))
		var deleted []string
		for w, del := range s.writes {
			ws = append(ws, w)
			if del {
				deleted = append(deleted, w)
			}
		}
		slices.Sort(ws)
		x.commits.AddDeleting(session, start, end, ws, deleted, s.unknown)
	}
	s.rollback()
}

// writesPermanent reports whether the statement writes what a read-only
// server refuses (captureIndex.writes).
func (s *scanSession) writesPermanent(info *sqlinfo.Info) bool {
	switch {
	case info.WritesUnknown, info.Unanalysable && info.Class != sqlinfo.ClassRead:
		return true
	case info.Statements > 1:
		// Its flags may be any one statement's, its verb the first's:
		// judged as a whole, it may write.
		return true
	case info.LockingRead, info.LockTables, info.SequenceWrite:
		// MariaDB 10.11 refuses FOR UPDATE and LOCK TABLES … WRITE (not
		// LOCK IN SHARE MODE, nor … READ; both are refused here), and
		// NEXTVAL() and SETVAL().
		return true
	case info.TempTable: // CREATE TEMPORARY TABLE [… SELECT], DROP TEMPORARY TABLE
		return false
	case len(info.Writes) > 0:
		for _, t := range qualify(info.Writes, s.schema, nil) {
			if !s.temp[t] {
				return true
			}
		}
		return false // its session's temporary tables only
	}
	switch info.Verb {
	case "CREATE", "ALTER", "DROP", "RENAME", "TRUNCATE", "GRANT", "REVOKE", "ANALYZE", "OPTIMIZE", "REPAIR":
		return true // of a database, a view, a user …; table maintenance
	}
	return info.Class == sqlinfo.ClassWrite
}

// rollback forgets the session's open transaction's writes.
func (s *scanSession) rollback() {
	s.unknown, s.changedAt = false, 0
	clear(s.writes)
}

// topDigests returns the k digests with the most statements.
func (x *captureIndex) topDigests(k int) []string {
	ids := make([]string, 0, len(x.digests))
	for id := range x.digests {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b string) int {
		if na, nb := x.digests[a].n, x.digests[b].n; na != nb {
			if na > nb {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	return ids[:min(k, len(ids))]
}

// recordsIn counts the records a shard replays (all with Count <= 1).
func (x *captureIndex) recordsIn(sh store.Shard) uint64 {
	if sh.Count <= 1 {
		return x.records
	}
	var n uint64
	for s, c := range x.recordsOf {
		if shardOf(s, sh.Count) == sh.Index {
			n += c
		}
	}
	return n
}

// preparedSQL is the SQL a session prepared under id, as the scan has seen
// it so far ("" if it has not, or the statement is closed).
func (sc *scanner) preparedSQL(session uint64, id uint32) string {
	if s := sc.sessions[session]; s != nil {
		return s.sqlOf[id]
	}
	return ""
}

// deletes reports whether a write deletes rows (DELETE, REPLACE).
func deletes(info *sqlinfo.Info) bool { return info.Verb == "DELETE" || info.Verb == "REPLACE" }

// setsWhatItDid reports whether a SET gives a variable a value of what
// the session did (NEXTVAL(s), @n + 1, LAST_INSERT_ID(), a subquery, a
// prepared statement's ?: not sqlinfo.Reevaluable). --concurrency carries
// a session's variables to each connection its units run on by setting
// them again there, which would evaluate such a value again, on other
// data: the session keeps a connection of its own instead, as one that
// assigns a variable inside a statement (@x := …) does.
func setsWhatItDid(sql string) bool {
	as, ok := sqlinfo.SetAssignments(sql)
	if !ok {
		return false
	}
	for _, a := range as {
		if !sqlinfo.OneShot(a.Name) && a.Name != "names" && !strings.HasPrefix(a.Name, "transaction") && !sqlinfo.Reevaluable(a.Value) {
			return true
		}
	}
	return false
}
