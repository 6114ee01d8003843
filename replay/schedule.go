package replay

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/tandemdb/tandem/replay/order"
	"maps"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tandemdb/tandem/internal/blockio"
	"github.com/tandemdb/tandem/internal/pace"
	"github.com/tandemdb/tandem/internal/rawio"
	"github.com/tandemdb/tandem/internal/textclip"
	"github.com/tandemdb/tandem/replay/conn"
	"github.com/tandemdb/tandem/sqlinfo"
	"github.com/tandemdb/tandem/store"
	"github.com/tandemdb/tandem/targets"
)

// runner replays the capture against one target. It reads the capture on
// its own, so a slow target never holds back another, and keeps the
// capture's order between sessions on its own gate.
type runner struct {
	idx, point int
	t          targets.Target
	cfg        *Config
	src        source   // where the records come from
	obs        Observer // told each outcome as it is final (nil: none)
	x          *captureIndex
	an         *sqlinfo.Analyzer
	r          *store.Reader
	run        *store.RunWriter
	reg        *digestRegistry
	gate       *order.Gate
	connCfg    conn.Config
	db         string // the DSN's schema: every session runs in it
	// connIDs maps a captured session's connection id to the target
	// connection replaying it (session mode), for KILL (mapKill).
	connIDs sync.Map // uint32 → uint32
	// kills keeps, by captured connection id and pass (killKey), the
	// connection of a session a KILL ended (captureIndex.killedQuits)
	// until that KILL has run, or nil for a KILL that ran first
	// (meetKill).
	kills struct {
		sync.Mutex
		m map[uint64]*conn.Conn
	}

	start    time.Time // the shared wall-clock instant replay begins
	capStart int64     // start of the capture's first record, ns
	capSpan  int64     // from first start to last start, ns
	end      time.Time // when this target finished (its own elapsed time)

	ctx    context.Context // ends when the target fails
	cancel context.CancelFunc
	// down is set once the target has failed (mu.failed says why): every
	// record asks, so it is not behind the lock.
	down atomic.Bool
	// xidKept: an XA transaction kept its xid on a shared server (xid),
	// which is logged once.
	xidKept atomic.Bool
	// side is sideDB's handle.
	side struct {
		sync.Once
		db *sql.DB
	}

	mu struct {
		sync.Mutex
		workers []*worker // the live ones (retireWorker takes the closed out)
		// reorders and failures of closed workers (see retireWorker)
		reorders []store.Reorder
		failures []store.FailedTrx
		conns    map[*conn.Conn]struct{}
		failed   string
		outErr   error
		rewrites map[string]rewritten
		// prepared: XA transactions sessions left prepared, their xids'
		// texts by key (leftPrepared).
		prepared map[string]string
	}
	// stats are the target's statistics, in shards its workers share
	// (statsFor); nextShard picks the next worker's.
	stats     []*wstats
	nextShard atomic.Uint64
	// retired holds the shards' statistics up to the last interval
	// (wstats.retireInto); mergeInto adds the shards' since.
	retired struct {
		sync.Mutex
		t totals
	}
	// board orders the statements of regrouped units running at once.
	board *order.Board
	// ordered: records take tickets at the gate (--order capture, and the
	// capture changes something: nothingToOrder).
	ordered bool
	// commitOrder: records that commit keep the server's commit order on
	// this target (Config.commitOrdered).
	commitOrder bool
	// active counts the connections replaying now (progress lines' thds).
	active atomic.Int64
	// pass is the pass over the capture under way (1-based; metrics).
	pass atomic.Int64
	// footprintBefore: the tables' sizes before the point ran.
	footprintBefore []store.TableFootprint
	blocking        bool
	pinned          atomic.Int64
	// downMsg says why the last connection attempt failed ("" once one
	// succeeds): a shadow holds its feed while it is set (live.waitUp).
	downMsg atomic.Pointer[string]
	// unreachable is when connection attempts began to fail with none
	// succeeding since (unix ns; 0: the last one succeeded), and
	// dialErr the last failure's message: the watchdog fails a target
	// that cannot be reached for longer than --target-timeout.
	unreachable atomic.Int64
	dialErr     atomic.Pointer[string]
	// pks are the primary keys of the capture's tables on this target,
	// by captured name, and autoinc their AUTO_INCREMENT columns ("" for
	// none; absent: not known) (loadPrimaryKeys).
	pks     map[string][]string
	autoinc map[string]string
	// clock: whether a write to each of the capture's tables can read
	// the session's clock (clockFree, clockTakes; by the target's
	// "schema.table", lower-case; nil: not known), and funcs the target's
	// stored functions' names (lower-case): takesClock.
	clock map[string]byte
	funcs map[string]bool
	// uniqueKeys are the tables' other unique keys whose columns are all
	// NOT NULL, by captured name (loadPrimaryKeys; the tied-order check).
	uniqueKeys map[string][][]string
	// live reads a followed run's keys as its tables appear (liveKeys).
	live *liveKeys
	// access: units carry what they read and change, and wait only for
	// the earlier units they depend on (see Access); tangled (nil: not
	// known, no Access) are the tables a statement cannot name all the
	// rows of, uniq the unique secondary key columns of each table, by
	// captured name, intKeyed whether its primary key is integers
	// (loadAccessTables).
	access   bool
	tangled  map[string]bool
	uniq     map[string][]string
	intKeyed map[string]bool // the primary key's columns are all integers
}

// setDown records the outcome of a connection attempt.
func (rn *runner) setDown(err error) {
	if !rn.src.followed() {
		return
	}
	if err == nil {
		if rn.downMsg.Load() != nil {
			rn.downMsg.Store(nil)
			rn.cfg.Logger.Info("shadow is up again", "shadow", rn.t.Name)
		}
		return
	}
	msg := err.Error()
	if rn.downMsg.Swap(&msg) == nil {
		rn.cfg.Logger.Warn("shadow is down; its feed waits and retries with backoff", "shadow", rn.t.Name, "err", msg)
	}
}

// downReason says why the target is down, "" while it is up.
func (rn *runner) downReason() string {
	if p := rn.downMsg.Load(); p != nil {
		return *p
	}
	return ""
}

// probe tries one connection to the target, to learn it is up again.
func (rn *runner) probe(ctx context.Context) {
	c, err := conn.Dial(ctx, rn.connCfg)
	if err == nil {
		c.Close()
	}
	rn.setDown(err)
}

type rewritten struct {
	sql string
	err error
}

func newRunner(ctx context.Context, idx int, t targets.Target, cfg *Config, x *captureIndex, an *sqlinfo.Analyzer, r *store.Reader,
	run *store.RunWriter, reg *digestRegistry, rs *runState) (*runner, error) {
	cc, err := t.Conn() // the DSN's address, credentials, TLS and session variables
	if err != nil {
		return nil, err
	}
	rn := &runner{idx: idx, t: t, cfg: cfg, src: rs.src, obs: rs.obs, x: x, an: an, r: r, run: run, reg: reg, db: t.Database(),
		gate: order.NewGate(cfg.OrderInflight, cfg.OrderTimeout), commitOrder: cfg.commitOrdered(x) && !rs.src.followed(),
		ordered: cfg.Order == OrderCapture && !nothingToOrder(x, rs.src.followed())}
	rn.access = rn.ordered && !x.schemaChanges && !rs.src.followed() // see Access
	cc.Dial, cc.Timeout = rn.dial, 10*time.Second
	rn.connCfg = cc
	rn.ctx, rn.cancel = context.WithCancel(ctx)
	rn.mu.conns = map[*conn.Conn]struct{}{}
	rn.mu.rewrites = map[string]rewritten{}
	rn.stats = newStatShards()
	return rn, nil
}

// dial opens a connection on raw system calls. With IOBlocking a worker
// waits for each reply in the kernel, keeping its thread and P as a C
// client does (internal/blockio, WrapRaw); with IOPoller it parks on Go's
// poller (internal/rawio). Go's own socket calls cost a scheduler hand-off
// each. Figures: scripts/bench-replay.sh.
func (rn *runner) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if rn.blocking {
		return blockio.DialRaw(ctx, network, addr)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return rawio.Wrap(c), nil
}

// schemaFor maps a captured schema to the target's: a target whose DSN
// names a database uses it for every session.
func (rn *runner) schemaFor(captured string) string {
	if rn.db != "" {
		return rn.db
	}
	return captured
}

// rewrite applies the target's engine and options to table DDL, once per
// text. A statement that cannot be rewritten stops the target (the
// default) or is skipped (--on-unrewritable skip).
func (rn *runner) rewrite(sql string) (string, error) {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	if r, ok := rn.mu.rewrites[sql]; ok {
		return r.sql, r.err
	}
	out, err := sqlinfo.RewriteEngine(sql, rn.t.Engine, rn.t.Options)
	rn.mu.rewrites[sql] = rewritten{out, err}
	if err != nil && rn.cfg.OnUnrewritable != UnrewritableSkip {
		rn.failLocked(fmt.Sprintf("cannot set engine %s in %q: %v; the target stopped there (--on-unrewritable skip runs the rest without such statements)",
			rn.t.Engine, textclip.Clip(sql, 120), err))
	}
	return out, err
}

// xid returns an XA statement with the xid this target gives it in pass
// loop (0-based): the captured one, or one with a branch qualifier of its
// own (sqlinfo.MoveXid) on a server that an earlier target (or shadow) is
// on too (targets.Target.Shared), and in every --loop pass after the
// first. A server's xids are its own, not a database's: the second XA
// START of one xid would be refused (1440), and a captured XA ROLLBACK or
// COMMIT of a prepared xid would end the other target's transaction; and
// a transaction the capture left prepared (its commit not captured) holds
// its xid into the next pass.
func (rn *runner) xid(sql string, loop int) string {
	suffix := rn.xidSuffix(loop)
	if suffix == "" {
		return sql
	}
	moved, ok := sqlinfo.MoveXid(sql, suffix)
	if !ok && rn.an.Info(sql).Begin && rn.xidKept.CompareAndSwap(false, true) {
		rn.cfg.Logger.Warn("an XA transaction keeps its captured xid where xids are moved (a server another target shares, or a --loop pass after the first): its branch qualifier cannot take the suffix, or its form is not known; its transactions of that xid may collide (1440, XAER_DUPID)",
			"target", rn.t.Name, "statement", textclip.Clip(sql, 120))
	}
	return moved
}

// xidSuffix is what xid appends to the branch qualifiers of pass loop
// ("" none).
func (rn *runner) xidSuffix(loop int) string {
	var b strings.Builder
	if rn.t.Shared > 0 || loop > 0 {
		b.WriteString("~tandem")
	}
	if rn.t.Shared > 0 {
		b.WriteString(strconv.Itoa(rn.t.Shared))
	}
	if loop > 0 {
		b.WriteString("p" + strconv.Itoa(loop+1))
	}
	return b.String()
}

// movesXids reports whether XA RECOVER's answer here cannot be the
// capture's: some pass's xids are moved (xid), or the server is another
// target's too (it then lists that target's xids as well). Its answer is
// not compared.
func (rn *runner) movesXids() bool {
	return rn.cfg.sharedServer || rn.t.Shared > 0 || rn.cfg.Loop > 1 || rn.cfg.Duration > 0
}

// leftPrepared notes an XA transaction a session left prepared on the
// target (worker.leave): the server keeps it for whoever commits or
// rolls it back by its xid, which settled then notes. One still there at
// the run's end is rolled back (rollbackLeftPrepared).
// Both take the xid's sqlinfo.XidKey; leftPrepared also its text, to
// roll it back by.
func (rn *runner) leftPrepared(key, text string) {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	if rn.mu.prepared == nil {
		rn.mu.prepared = map[string]string{}
	}
	rn.mu.prepared[key] = text
}

func (rn *runner) settled(key string) {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	delete(rn.mu.prepared, key)
}

// rollbackLeftPrepared rolls back, at the run's end, the XA transactions
// sessions left prepared whose commit the capture does not hold (a
// transaction manager's recovery that bypassed the proxy, a capture that
// stopped first): they would hold their rows' locks on the target, and
// their xids, after the replay.
func (rn *runner) rollbackLeftPrepared() {
	rn.mu.Lock()
	xids := slices.Sorted(maps.Values(rn.mu.prepared))
	rn.mu.prepared = nil
	rn.mu.Unlock()
	db := rn.sideDB()
	if len(xids) == 0 || db == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, x := range xids {
		if _, err := db.ExecContext(ctx, "XA ROLLBACK "+x); err != nil {
			rn.cfg.Logger.Debug("rolling back an XA transaction left prepared", "target", rn.t.Name, "xid", x, "err", err)
		}
	}
}

// awaitGone waits, up to 2 s, until the server no longer lists connection
// id: a prepared XA transaction its client left is the server's to commit
// by its xid only once the connection's end has detached it (asked at
// once, another connection's XA COMMIT of it fails with 1397, XAER_NOTA,
// about a third of the time on MariaDB 10.11). It asks on the runner's
// side connection (sideDB).
func (rn *runner) awaitGone(id uint32) {
	db := rn.sideDB()
	if db == nil || id == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(rn.ctx, 2*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		var n int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?", id).Scan(&n); err != nil || n == 0 {
			return
		}
		pace.SleepUntil(ctx, time.Now().Add(time.Millisecond))
	}
}

// sideDB is a handle on the target for what replay asks of it beside the
// sessions (awaitGone), opened at the first use (nil if it cannot be) and
// closed with closeSide.
func (rn *runner) sideDB() *sql.DB {
	rn.side.Do(func() {
		if db, err := openDB(rn); err == nil {
			db.SetMaxOpenConns(1)
			rn.side.db = db
		}
	})
	return rn.side.db
}

func (rn *runner) closeSide() {
	rn.side.Do(func() {}) // none opened after this
	if rn.side.db != nil {
		rn.side.db.Close()
	}
}

// fail stops the target: every record after this is skipped, its
// connections close, and the report says why.
func (rn *runner) fail(reason string) {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	rn.failLocked(reason)
}

func (rn *runner) failLocked(reason string) {
	if rn.mu.failed != "" {
		return
	}
	rn.mu.failed = reason
	rn.down.Store(true)
	rn.cfg.Logger.Warn("target failed", "target", rn.t.Name, "reason", reason)
	rn.cancel()
}

func (rn *runner) failed() string {
	if !rn.down.Load() {
		return ""
	}
	rn.mu.Lock()
	defer rn.mu.Unlock()
	return rn.mu.failed
}

func (rn *runner) addWorker(w *worker) {
	rn.mu.Lock()
	rn.mu.workers = append(rn.mu.workers, w)
	rn.mu.Unlock()
}

// statsFor is the statistics shard of a new worker: each in turn.
func (rn *runner) statsFor() *wstats {
	return rn.stats[(rn.nextShard.Add(1)-1)%uint64(len(rn.stats))]
}

// retireWorker moves a closed worker's reorders and failures into the
// runner, and forgets the worker (its statistics are in its shard). A
// capture's sessions come and go (an application that connects per
// request has millions in a day): kept to the end of the run, every
// closed session's worker held its maps and buffers.
func (rn *runner) retireWorker(w *worker) {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	if i := slices.Index(rn.mu.workers, w); i >= 0 {
		last := len(rn.mu.workers) - 1
		rn.mu.workers[i] = rn.mu.workers[last]
		rn.mu.workers[last] = nil
		rn.mu.workers = rn.mu.workers[:last]
	}
	rn.mu.reorders = keepFirst(append(rn.mu.reorders, w.reorders...), reorderAt)
	rn.mu.failures = keepFirst(append(rn.mu.failures, w.failures...), failureAt)
}

// keepFirst bounds the closed workers' lists: past twice store.MaxFailures
// entries it keeps the first MaxFailures in the capture's order (all a
// run's results keep).
func keepFirst[T any](l []T, at func(T) (int64, uint64)) []T {
	if len(l) <= 2*store.MaxFailures {
		return l
	}
	sortInCaptureOrder(l, at)
	clear(l[store.MaxFailures:])
	return l[:store.MaxFailures]
}

func (rn *runner) track(c *conn.Conn) {
	rn.mu.Lock()
	rn.mu.conns[c] = struct{}{}
	rn.mu.Unlock()
}

func (rn *runner) untrack(c *conn.Conn) {
	rn.mu.Lock()
	delete(rn.mu.conns, c)
	rn.mu.Unlock()
}

// commit writes w's buffered outcomes; the first failure is kept.
func (rn *runner) commit(w *worker) {
	if err := w.out.Commit(); err != nil {
		rn.mu.Lock()
		if rn.mu.outErr == nil {
			rn.mu.outErr = err
		}
		// Replaying on without recording would only lose more.
		rn.failLocked("its outcomes cannot be recorded: " + err.Error())
		rn.mu.Unlock()
	}
}

// watchdog fails the target when a call runs longer than --target-timeout
// (a hung or stopped server), or when no connection can be made to it for
// that long (a server gone): its connections close, the others go on. (A
// shadow is down instead, and waits.)
func (rn *runner) watchdog(stop <-chan struct{}) {
	if rn.cfg.TargetTimeout <= 0 {
		return
	}
	t := time.NewTicker(min(rn.cfg.TargetTimeout/4, 500*time.Millisecond))
	defer t.Stop()
	waitWarned := false
	// answeredAt is when the server last answered a new connection while
	// a call waited past --target-timeout: it is asked again once per
	// --target-timeout, not at every tick (up to twice a second, each a
	// login on a server that may be busy with the very wait).
	var answeredAt time.Time
	for {
		select {
		case <-stop:
			return
		case <-rn.ctx.Done():
			return
		case <-t.C:
		}
		rn.mu.Lock()
		var stuck time.Duration
		for c := range rn.mu.conns {
			stuck = max(stuck, c.BusyFor())
		}
		rn.mu.Unlock()
		if stuck <= rn.cfg.TargetTimeout {
			answeredAt = time.Time{}
		}
		if since := rn.unreachable.Load(); since != 0 && !rn.src.followed() && time.Since(time.Unix(0, since)) > rn.cfg.TargetTimeout {
			msg := ""
			if p := rn.dialErr.Load(); p != nil {
				msg = *p
			}
			rn.fail(fmt.Sprintf("no connection could be made for %s (--target-timeout %s): %s",
				time.Since(time.Unix(0, since)).Round(time.Millisecond), rn.cfg.TargetTimeout, msg))
			return
		}
		if stuck > rn.cfg.TargetTimeout {
			why := fmt.Sprintf("a call got no answer for %s (--target-timeout %s): the server is hung, stopped or unreachable",
				stuck.Round(time.Millisecond), rn.cfg.TargetTimeout)
			if rn.src.followed() {
				// A shadow is not failed for good: its stuck calls end
				// unanswered, it is down, and its feed waits (probing) until
				// the server answers again.
				rn.setDown(errors.New(why))
				rn.mu.Lock()
				for c := range rn.mu.conns {
					if c.BusyFor() > rn.cfg.TargetTimeout {
						c.Interrupt()
					}
				}
				rn.mu.Unlock()
				continue
			}
			answers := time.Since(answeredAt) < rn.cfg.TargetTimeout
			if !answers && rn.answers() {
				answers, answeredAt = true, time.Now()
			}
			switch {
			case answers && stuck <= maxAnsweredWaits*rn.cfg.TargetTimeout:
				// The server answers a new connection: the call waits on
				// its work (a row lock another session holds, a long
				// statement), which is not the server failing. (A target
				// on a loaded machine was failed as hung for a lock wait
				// of 3 s: make faults, target-killed.)
				if !waitWarned {
					waitWarned = true
					rn.cfg.Logger.Warn("a call has waited past --target-timeout while the server answers new connections: a lock wait or a long statement; the target is not failed for it",
						"target", rn.t.Name, "waited", stuck.Round(time.Millisecond), "target_timeout", rn.cfg.TargetTimeout)
				}
				continue
			case answers:
				why = fmt.Sprintf("a call waited %s while the server answered new connections (--target-timeout %s, %dx): a lock that is never released, or a statement that does not end",
					stuck.Round(time.Millisecond), rn.cfg.TargetTimeout, maxAnsweredWaits)
			}
			rn.fail(why)
			return
		}
	}
}

// maxAnsweredWaits bounds, in --target-timeouts, how long a call may wait
// while its server answers new connections before the target is failed.
const maxAnsweredWaits = 10

// answers reports whether the target's server completes a new
// connection's handshake within --target-timeout (at most 5 s): a server
// that is stopped, hung or unreachable does not.
func (rn *runner) answers() bool {
	ctx, cancel := context.WithTimeout(rn.ctx, min(rn.cfg.TargetTimeout, 5*time.Second))
	defer cancel()
	c, err := conn.Dial(ctx, rn.connCfg)
	if err != nil {
		return false
	}
	c.Quit() // a word to the server: a connection closed without one counts as an aborted client
	return true
}

// offset is a record's start on the capture's clock, shifted by whole
// capture spans for later passes (--loop), so passes keep their order.
func (rn *runner) offset(rec *store.Record, loop int) int64 {
	return rec.Start.UnixNano() + loopShift(rn.capSpan, loop)
}

// loopShift is how far --loop pass loop is moved on replay's timeline,
// for a capture spanning capSpan: each pass follows the last by 1 ms.
func loopShift(capSpan int64, loop int) int64 {
	return int64(loop) * (capSpan + int64(time.Millisecond))
}

// intended is when a record should be sent: the capture's pacing scaled by
// Speed, from the shared start.
func (rn *runner) intended(rec *store.Record, loop int) time.Time {
	if rn.cfg.Speed <= 0 {
		return time.Time{}
	}
	off := float64(rn.offset(rec, loop)-rn.capStart) / rn.cfg.Speed
	return rn.start.Add(time.Duration(off))
}

// ticket registers a record's (or unit's) place in the order, in the
// session at c: its captured interval, the statements it runs, and the
// keys of the rows those that change what others see lock (nil when one
// does not name its rows: see rowKeys).
// mapKill puts, in place of the connection id a captured KILL names, the
// id of the target connection that replays that session. ok is false when
// there is none — the id is no captured session's (its KILL failed in the
// capture, or named a connection that did not pass through the proxy),
// the session has not connected here yet, the KILL names no single
// connection (USER, QUERY ID, an expression), or sessions are regrouped
// (--concurrency): such a KILL is never sent, since on the target the id
// is some other connection's, replay's own included.
func (rn *runner) mapKill(sql string) (string, bool) {
	k, _ := sqlinfo.ParseKill(sql)
	if k.ID == 0 || k.ID > math.MaxUint32 {
		return "", false
	}
	v, ok := rn.connIDs.Load(uint32(k.ID))
	if !ok {
		return "", false
	}
	return k.Rewrite(sql, uint64(v.(uint32))), true
}

func killKey(connID uint32, loop int) uint64 { return uint64(loop)<<32 | uint64(connID) }

// leaveForKill keeps c, the connection of a session whose end in the
// capture was another session's KILL (captureIndex.killedQuits), open
// until that KILL has run on this target; closed at once if it ran.
// Closed here, the KILL would find no connection (1094) where the
// capture's succeeded.
func (rn *runner) leaveForKill(connID uint32, loop int, c *conn.Conn) {
	rn.meetKill(killKey(connID, loop), c)
}

// killRan closes the connection a KILL (its captured text sql) ended, if
// it waits for it (leaveForKill), or notes that it ran.
func (rn *runner) killRan(sql string, loop int) {
	if id, ok := killsConnection(sql); ok {
		rn.meetKill(killKey(id, loop), nil)
	}
}

// meetKill pairs a killed session's end (c) with its KILL (nil), in
// whichever order they come: the first leaves its part, the second closes
// the connection.
func (rn *runner) meetKill(k uint64, c *conn.Conn) {
	rn.kills.Lock()
	other, first := rn.kills.m[k]
	if !first {
		if rn.kills.m == nil {
			rn.kills.m = map[uint64]*conn.Conn{}
		}
		rn.kills.m[k] = c
		rn.kills.Unlock()
		return
	}
	delete(rn.kills.m, k)
	rn.kills.Unlock()
	if c == nil {
		c = other
	}
	if c != nil {
		rn.untrack(c)
		c.Quit()
		rn.awaitGone(c.ID) // a prepared XA transaction of its is the server's once it is gone
	}
}

// closeAwaitingKill closes the connections still left for a KILL that did
// not run here (see leaveForKill), once every session has ended.
func (rn *runner) closeAwaitingKill() {
	rn.kills.Lock()
	left := rn.kills.m
	rn.kills.m = nil
	rn.kills.Unlock()
	for _, c := range left {
		if c != nil {
			rn.untrack(c)
			c.Quit()
			rn.awaitGone(c.ID)
		}
	}
}

// ticket is the gate's ticket for a record (or a unit) whose statements
// are infos; changes says whether it changes what others see (trxChanges).
//
// cm places a record that commits in the server's commit order (nil:
// none).
// A bypassed write's ticket is unclocked (order.Ticket.Unclocked): its
// interval is its place in the server's order, not when it ran.
func (rn *runner) ticket(start, end int64, c *order.Cursor, keys []string, changes, unclocked bool, cm *commitPlace, acc *order.Access, infos ...*sqlinfo.Info) *order.Ticket {
	if !rn.ordered {
		return nil
	}
	tables, anyT := ticketTables(nil, infos...)
	t := &order.Ticket{Start: start, End: end, Changes: changes, Tables: tables, AnyTable: anyT || slices.Contains(infos, nil),
		Keys: keys, SendOrder: c != nil && changes && len(infos) > 0, // a record's statement (units: the board orders theirs)
		Unclocked: unclocked, Access: acc}
	if cm != nil {
		t.Commit, t.Floor, t.Trx = cm.rank, cm.floor, cm.trx
	}
	return rn.gate.Add(t, c)
}

// nothingToOrder reports whether the records of the capture x need no
// order between sessions: none changes what others see
// (captureIndex.changes), so under --order capture's rules (a read waits
// for the changes before it, a change for every record before it) none
// waits for another, and a ticket per record would cost the gate's time
// for nothing. A followed capture's records to come are not known yet:
// they are ordered.
func nothingToOrder(x *captureIndex, followed bool) bool { return !x.changes && !followed }

// commitPlace is a record's place in the server's commit order, and what
// its transaction locked.
type commitPlace struct {
	rank, floor int64
	trx         *order.Footprint
}

// idleTurn notes that w, about to run t, is not running a statement
// (the gate and the board); waitTurn starts with it, and a unit that has
// nothing to wait for (Gate.Ready) needs only it.
func (rn *runner) idleTurn(w *worker, t *order.Ticket) {
	w.released = false
	rn.gate.Idle(t)
	if rn.board != nil && w.regrouped {
		rn.board.Set(w.slot, -1, false, nil, nil)
	}
}

// waitTurn holds w until every record (or unit) that ended, in the
// capture, before threshold has completed; it counts how that went. When
// what it waits for is stuck on the server while w holds a transaction —
// most likely behind w's own locks — the transaction is rolled back so the
// other goes first, as it did in the capture, and waitTurn reports that
// the caller must run it again. (The servers' lock tables cannot settle
// whose lock it is: InnoDB was seen listing no wait for an UPDATE stuck
// for seconds behind a transaction waiting here.)
//
// first is the record t stands for (a unit's first, all its records in
// unit): when t, a change, goes ahead of a conflicting change not yet
// done, it is listed as a Reorder.
func (rn *runner) waitTurn(w *worker, t *order.Ticket, threshold int64, patience int, first *job, unit []job) (rerun bool) {
	rn.idleTurn(w, t)
	began := time.Now()
	var h *order.Cursor
	if patience > 0 {
		h = w.held(len(w.trx))
	}
	res, _ := rn.gate.Wait(rn.ctx, t, threshold, patience, rn.cfg.OrderTimeout, h)
	if res == order.Stalled {
		rerun = true
		w.st.count(func(c *counters) { c.orderReruns++ })
		w.noteRunAgain(store.ReorderYielded, w.trx, nil)
		if w.rollbackReopen(rn.ctx, w.trx) > 0 {
			// A session's records run again one by one, each in its turn
			// (rerunTrx); then t waits again.
			w.st.count(func(c *counters) { c.orderWaits++ })
			return true
		}
		res, _ = rn.gate.Wait(rn.ctx, t, threshold, 0, max(rn.cfg.OrderTimeout-time.Since(began), time.Millisecond), nil)
	}
	switch res {
	case order.Ordered, order.Stalled:
		w.st.count(func(c *counters) { c.orderWaits++ })
	case order.TimedOut, order.Released:
		w.released = true
		w.st.count(func(c *counters) { c.orderWaits++; c.orderReleased++ })
		var held []*job
		if h != nil {
			held = w.trx
		}
		w.noteReorder(t, first, unit, held)
	}
	return rerun
}

// noteReorder lists t's record (or unit) when the gate found it went
// ahead of a conflicting change not yet done (ticket.reordered). held are
// the records of the open transaction t waited in, holding their locks
// (nil: none): they went ahead with it, and the change overtaken may be
// one they block (see order.Gate.overtakeLocked), so their writes are
// listed too.
func (w *worker) noteReorder(t *order.Ticket, first *job, unit []job, held []*job) {
	if !t.TakeReordered() {
		return
	}
	w.st.count(func(c *counters) { c.reordered++ })
	if len(w.reorders) >= store.MaxFailures {
		return
	}
	r := store.Reorder{Session: first.rec.Session, Loop: first.loop, Seq: first.rec.Seq, At: w.rn.offset(first.rec, first.loop)}
	r.Tables = writesOf(first, nil)
	for i := range unit {
		r.Tables = writesOf(&unit[i], r.Tables)
	}
	for _, j := range held {
		r.Tables = writesOf(j, r.Tables)
	}
	w.reorders = append(w.reorders, r)
}

// noteRunAgain lists the open transaction trx (with failed, its
// statement that failed, or nil), about to be rolled back and run again,
// as a Reorder of kind on the tables it locked — store.ReorderYielded: so
// that a statement stuck behind its locks goes first (an order rerun);
// store.ReorderRetried: after a deadlock or lock wait timeout the capture
// did not have. A change of another session that waited on the server
// for one of those locks goes on at the rollback, ahead of the
// transaction's writes (those run again, and those not run yet) that came
// before it in the capture. Nothing can hold it back (it is on the server
// already), so from then on those tables may differ by replay's doing. A
// transaction that locked nothing is not listed, nor one already listed
// as it starts over again.
func (w *worker) noteRunAgain(kind string, trx []*job, failed *job) {
	var tables []string
	var first *job
	for _, j := range append(trx[:len(trx):len(trx)], failed) {
		if j == nil || j.info == nil || !j.info.Changes() {
			continue
		}
		n := len(tables)
		tables = writesOf(j, tables)
		if j.info.LockingRead {
			tables = qualify(j.info.Reads, j.rec.Schema, tables)
		}
		if first == nil && len(tables) > n {
			first = j
		}
	}
	if first == nil || len(w.reorders) >= store.MaxFailures {
		return
	}
	r := store.Reorder{Session: first.rec.Session, Loop: first.loop, Seq: first.rec.Seq, At: w.rn.offset(first.rec, first.loop), Tables: tables, Kind: kind}
	if n := len(w.reorders); n > 0 && w.reorders[n-1].Kind == r.Kind && w.reorders[n-1].Seq == r.Seq && w.reorders[n-1].Loop == r.Loop &&
		w.reorders[n-1].Session == r.Session && len(w.reorders[n-1].Tables) >= len(tables) {
		return // the same transaction, starting over again
	}
	w.reorders = append(w.reorders, r)
}

// noteLacking lists j, a change the target lacks (kind
// store.ReorderUnsent: not sent; store.ReorderFailed: it failed there
// where the capture's succeeded), with the reorders, on the tables it
// writes, from its end: what differs there afterwards follows from it
// (compare.Failures).
func (w *worker) noteLacking(j *job, kind string) {
	if j.info == nil || len(w.reorders) >= store.MaxFailures {
		return
	}
	// Tables it names only: a failed CALL (whose writes are not known)
	// would otherwise explain every later difference of the run.
	tables := qualify(j.info.Created, j.rec.Schema, slices.DeleteFunc(writesOf(j, nil), func(t string) bool { return t == anyTable }))
	if len(tables) == 0 {
		return
	}
	at := w.rn.offset(j.rec, j.loop) + int64(j.rec.Duration)
	w.reorders = append(w.reorders, store.Reorder{Session: j.rec.Session, Loop: j.loop, Seq: j.rec.Seq, At: at, Tables: tables, Kind: kind})
}

// pastDeadline reports whether --duration has run out: the connections
// then run no more of what is queued for them (what is on the server
// ends), so that the point lasts what was asked and its rates are over
// the time it ran.
func (rn *runner) pastDeadline() bool {
	return rn.cfg.Duration > 0 && !rn.src.followed() && time.Since(rn.start) > rn.cfg.Duration
}

// sessionRunner feeds one captured session's records to a worker of its own.
type sessionRunner struct {
	wg       sync.WaitGroup
	sessions map[uint64]*jobQueue
	// backlog counts the records read and not yet run, in all sessions:
	// the reader waits for any records to finish, never for a given
	// session's (see sessionBacklog).
	backlog backlog
	cursors map[uint64]*order.Cursor     // where each session stands in its tickets
	trx     map[uint64]*trxChanges       // whether each session's open transaction changed anything
	foot    map[uint64]*order.Footprint  // what each session's open transaction locked (commit order)
	sqlOf   map[uint64]map[uint32]string // each session's prepared statements
	state   map[uint64]*sessionTrx       // each session's transaction, for its records' Access
}

func (rn *runner) newSessionRunner() *sessionRunner {
	sr := &sessionRunner{sessions: map[uint64]*jobQueue{}, cursors: map[uint64]*order.Cursor{}, trx: map[uint64]*trxChanges{},
		foot: map[uint64]*order.Footprint{}, sqlOf: map[uint64]map[uint32]string{}, state: map[uint64]*sessionTrx{}}
	sr.backlog.grew = func(to int64, idle time.Duration) {
		rn.cfg.Logger.Info("nothing was done on the target with the read-ahead full: reading further into the capture, where a statement the sessions wait for (a lock holder's COMMIT) may lie",
			"target", rn.t.Name, "idle", idle, "read_ahead", to, "read_ahead_max", int64(backlogStalledMax))
	}
	return sr
}

// statementOf returns the analysis of rec's statement for its ticket, in
// one (no allocation per record): a query's, an execute's prepared SQL's
// (nil when the session prepared none: it may change anything); none for
// other records, which change nothing others see.
func (rn *runner) statementOf(sr *sessionRunner, key uint64, rec *store.Record, one *[1]*sqlinfo.Info) []*sqlinfo.Info {
	switch rec.Kind {
	case store.KindPrepare:
		if sr.sqlOf[key] == nil {
			sr.sqlOf[key] = map[uint32]string{}
		}
		sr.sqlOf[key][rec.StmtID] = rec.SQL
	case store.KindQuery:
		one[0] = rn.an.Info(rec.SQL)
		return one[:]
	case store.KindExecute:
		one[0] = nil
		if sql, ok := sr.sqlOf[key][rec.StmtID]; ok {
			one[0] = rn.an.Info(sql)
		}
		return one[:]
	}
	return nil
}

func (rn *runner) spawn(ctx context.Context, sr *sessionRunner) *jobQueue {
	q := newJobQueue()
	sr.wg.Add(1)
	go func() {
		defer sr.wg.Done()
		rn.active.Add(1)
		defer rn.active.Add(-1)
		w := newWorker(rn, 256) // many sessions: small outcome batches each
		defer w.close()
		for {
			j, ok := q.next()
			if !ok {
				return
			}
			if rn.pastDeadline() && !w.ctrx.Open() {
				// --duration ran out: what is queued is not run (a
				// transaction under way ends first).
				rn.gate.Finish(j.t)
				sr.backlog.done()
				continue
			}
			w.cur = j.t
			if j.t != nil {
				w.cursor = j.t.Session()
				j.t.Current()
			}
			w.handle(ctx, &j)
			rn.gate.Finish(j.t)
			sr.backlog.done()
			if rn.obs != nil {
				rn.obs.Finished(j.rec.Seq)
			}
		}
	}()
	return q
}

// sessionBacklog bounds the records read ahead of the session workers,
// in all sessions. A bound per session (each session's queue holding up
// to 1,024 records) made memory grow with the sessions (at a thousand, a
// million records could be queued), and made the reader wait for one
// given session: if that one was stuck on a row lock whose holder's
// COMMIT was still unread, both waited until the server's lock wait
// timeout. With a bound in all, the reader waits until any record is
// done, and a session may fall behind by up to the whole backlog.
//
// The bound grows with the sessions open, backlogPerSession each, from
// backlogMin up to sessionBacklog: how far the reader must read to reach
// a lock holder's COMMIT grows with the sessions whose records come
// between. A fixed 16,384 held some 12,000 records (7 MiB and their
// tickets) read ahead of 64 sessions once a replay had run for a few
// seconds: memory a short replay never reached, so its peak grew with
// the capture's length. 4,096 for all widths made 256 and 1,024 sessions
// a third slower, and released records at --order-timeout at 1,024.
const (
	sessionBacklog    = 16 << 10
	backlogMin        = 4 << 10
	backlogPerSession = 64
)

// backlogFor is the backlog's bound with n sessions open.
func backlogFor(n int) int64 {
	return min(max(int64(n)*backlogPerSession, backlogMin), sessionBacklog)
}

// backlog counts records read and not yet run. The reader, once it has
// its limit of them, waits until no more than 7/8 of that are left:
// waking it for every record done cost a wake-up per record (a quarter of
// a 64-session replay's speed).
//
// While it waits, when no record at all is done for backlogStall, every
// session is waiting on the target, and it may be on a record not read
// yet: sessions waiting for a row lock whose holder's next statement (its
// COMMIT) lies beyond the records the backlog holds, so nothing can end
// until the server's lock wait timeout. The backlog then doubles its room,
// up to backlogStalledMax, and goes back to its limit once it has drained
// below it. (make faults, target-killed: an InnoDB target's sessions
// waited 30 s on the locks of a session whose next statement was not
// read, and the target was failed as hung.)
type backlog struct {
	n       atomic.Int64
	limit   atomic.Int64 // 0: backlogMin (setLimit)
	grown   atomic.Int64 // room added past limit while stalled
	doneN   atomic.Int64 // records done, ever: whether any progress is made
	waiting atomic.Bool
	once    sync.Once
	room    chan struct{} // signalled by done when a waiting reader has room (roomCh)
	stalls  atomic.Int64  // times the room grew
	// grew, if set, is told (by the reader, in add) each time the room
	// grows: to how many records, and how long nothing was done.
	grew func(to int64, idle time.Duration)
}

func (b *backlog) roomCh() chan struct{} {
	b.once.Do(func() { b.room = make(chan struct{}, 1) })
	return b.room
}

// backlogStall is how long the reader waits with no record done before the
// backlog grows; backlogStalledMax bounds how far it grows (about 600
// bytes a record: 150 MB at most).
var backlogStall = 200 * time.Millisecond

const backlogStalledMax = 256 << 10

// setLimit sets the bound; only the reader calls it, between its adds.
func (b *backlog) setLimit(n int64) { b.limit.Store(n) }

func (b *backlog) base() int64 {
	if l := b.limit.Load(); l > 0 {
		return l
	}
	return backlogMin
}

func (b *backlog) max() int64 { return b.base() + b.grown.Load() }

// add counts a record read, first waiting for room.
func (b *backlog) add() {
	if b.n.Add(1) <= b.max() {
		return
	}
	room := b.roomCh()
	t := time.NewTimer(backlogStall)
	defer t.Stop()
	b.waiting.Store(true) // before the check: done sees it if it lowered n after
	defer b.waiting.Store(false)
	progress := b.doneN.Load() // as the timer starts
	idle := time.Duration(0)   // how long nothing has been done
	for {
		if b.n.Load() <= b.max()*7/8 {
			return
		}
		select {
		case <-room:
		case <-t.C:
			if b.doneN.Load() != progress {
				idle = 0
			} else if idle += backlogStall; b.max() < backlogStalledMax {
				// Nothing done for backlogStall: make room.
				b.grown.Store(min(2*b.max(), backlogStalledMax) - b.base())
				b.stalls.Add(1)
				if b.grew != nil {
					b.grew(b.max(), idle)
				}
			}
			progress = b.doneN.Load()
			t.Reset(backlogStall)
		}
	}
}

// done counts a record run (or dropped), waking the reader when there is
// room again. A backlog that grew goes back to its limit once it has
// drained below it.
func (b *backlog) done() {
	b.doneN.Add(1)
	n := b.n.Add(-1)
	if b.grown.Load() > 0 && n < b.base() {
		b.grown.Store(0)
	}
	if n <= b.max()*7/8 && b.waiting.Load() {
		select {
		case b.roomCh() <- struct{}{}:
		default:
		}
	}
}

// jobQueue is a session's records read and not yet run: unbounded by
// itself (sessionRunner.backlog bounds them all), taken in order by its
// worker.
type jobQueue struct {
	mu     sync.Mutex
	jobs   fifo[job]
	closed bool
	ready  chan struct{} // a job came or the queue closed
}

func newJobQueue() *jobQueue { return &jobQueue{ready: make(chan struct{}, 1)} }

func (q *jobQueue) push(j job) {
	q.mu.Lock()
	q.jobs.items = append(q.jobs.items, j)
	q.mu.Unlock()
	q.signal()
}

func (q *jobQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.signal()
}

func (q *jobQueue) signal() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// next returns the next job, waiting for one; false once the queue is
// closed and empty.
func (q *jobQueue) next() (job, bool) {
	for {
		q.mu.Lock()
		if q.jobs.len() > 0 {
			j := q.jobs.pop()
			q.mu.Unlock()
			return j, true
		}
		closed := q.closed
		q.mu.Unlock()
		if closed {
			return job{}, false
		}
		<-q.ready
	}
}

// dispatchSession sends rec to its session's worker.
func (rn *runner) dispatchSession(ctx context.Context, sr *sessionRunner, rec *store.Record, loop int) {
	key := rec.Session<<8 | uint64(loop&0xff)
	q := sr.sessions[key]
	if q == nil {
		q = rn.spawn(ctx, sr)
		sr.sessions[key] = q
		sr.backlog.setLimit(backlogFor(len(sr.sessions)))
	}
	start := rn.offset(rec, loop)
	c := sr.cursors[key]
	if c == nil {
		c = &order.Cursor{}
		sr.cursors[key] = c
	}
	var one [1]*sqlinfo.Info
	infos := rn.statementOf(sr, key, rec, &one)
	var keys []string
	if len(infos) == 1 && infos[0] != nil && infos[0].Changes() {
		keys = rn.rowKeys(infos[0], rec)
	}
	tc := sr.trx[key]
	if tc == nil {
		tc = &trxChanges{}
		sr.trx[key] = tc
	}
	changes := tc.record(rec, infos)
	var cm *commitPlace
	if rn.commitOrder {
		cm = sr.footprint(key, rec, infos, keys, rn.x.ranks, loop)
	}
	st := sr.state[key]
	if st == nil {
		st = &sessionTrx{}
		sr.state[key] = st
	}
	acc := rn.recordAccess(st, rec, infos, keys)
	t := rn.ticket(start, start+int64(rec.Duration), c, keys, changes, rec.Session >= store.BypassedSessionBase, cm, acc, infos...)
	if t != nil && isLockError(capturedError(rec)) {
		// Not sent (rolledBack): its rollback, which the capture's server
		// did as the deadlock formed, before the answer, waits for no lock
		// queue.
		t.SendOrder = false
	}
	sr.backlog.add() // done by the worker when the record has run
	j := job{rec: rec.Clone(), loop: loop, intended: rn.intended(rec, loop), t: t}
	if rec.Kind == store.KindQuery {
		// The worker's (resolve) too: a text longer than the analyzer
		// caches (sqlinfo.maxCachedText) would be parsed again.
		j.info = infos[0]
	}
	q.push(j)
	if rec.Kind == store.KindQuit {
		q.close()
		delete(sr.sessions, key)
		sr.backlog.setLimit(backlogFor(len(sr.sessions)))
		delete(sr.cursors, key)
		delete(sr.sqlOf, key)
		delete(sr.foot, key)
		delete(sr.state, key)
	}
}

func (sr *sessionRunner) closeAll() {
	for _, q := range sr.sessions {
		q.close()
	}
	sr.wg.Wait()
}

// runSessions replays each captured session on its own connection, in order.
func (rn *runner) runSessions(ctx context.Context) error {
	sr := rn.newSessionRunner()
	err := rn.src.records(ctx, rn, func(rec *store.Record, loop int) bool {
		if rn.inShard(rec.Session) {
			rn.dispatchSession(ctx, sr, rec, loop)
		}
		return true
	})
	if rn.gate != nil {
		rn.gate.CloseCommits() // a rank not registered by now never will be
	}
	sr.closeAll()
	rn.closeAwaitingKill()
	return err
}

// inShard reports whether a session is replayed by this run.
func (rn *runner) inShard(session uint64) bool {
	return rn.cfg.Shard.Count <= 1 || shardOf(session, rn.cfg.Shard.Count) == rn.cfg.Shard.Index
}

// runConcurrent regroups whole transactions onto Concurrency connections:
// each unit goes to the first free connection, starts
// only after every unit that committed before it began (in the capture)
// has completed, commits only after every unit that committed before its
// COMMIT began has, and carries its session's state. Units are handed out
// in commit order, so a unit only ever waits for units handed out before
// it: whatever the number of connections, there is no deadlock between
// them, and transactions that wrote the same rows commit in the capture's
// order (a unit stuck behind another's locks is rolled back and run
// again). Sessions whose state cannot move (temporary tables, locks, user
// variables, cursors) keep a connection of their own.
func (rn *runner) runConcurrent(ctx context.Context) error {
	// One queue, in commit-start order, that every connection takes from:
	// a unit waits for a free connection, never behind a given unit.
	// Unpaced, units go in batches when every connection is busy: one
	// channel operation (and at most one wake-up) per batch instead of per
	// transaction. A unit waits only for units before it, and batches are
	// taken and run in order, so the earliest unfinished unit is always the
	// one its connection is running: batching cannot deadlock the gate.
	batch := 1
	if rn.cfg.Speed <= 0 {
		batch = 32
	}
	units := make(chan []*unit, 2*rn.cfg.Concurrency)
	// The reader goes on once the connections have taken half of a full
	// queue, not at every batch taken: a goroutine parked and woken costs
	// its thread a search for other work and another thread a wake-up.
	// Woken at every batch, the reader parked once per 32 statements of a
	// point-select replay (1,000 times a second), and the threads' search
	// for work was 6 % of its CPU.
	room := make(chan struct{}, 1)
	// idle counts the connections waiting for a batch (all of them at
	// first, before their goroutines run): while more wait than batches
	// are queued, a unit goes out alone at once (see send).
	var idle atomic.Int32
	idle.Store(int32(rn.cfg.Concurrency))
	if rn.cfg.Order == OrderCapture {
		rn.board = order.NewBoard(rn.cfg.Concurrency, rn.cfg.boardWait)
	}
	var sp *spares
	if rn.obs == nil { // an observer may keep the records (see spares)
		sp = newSpares(2*rn.cfg.Concurrency, rn.cfg.spares)
	}
	var wg sync.WaitGroup
	for slot := range rn.cfg.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rn.active.Add(1)
			defer rn.active.Add(-1)
			// Up to 4,096 outcomes a commit; OutcomeBatch.Full cuts a batch
			// first once it would take a quarter of the run store's memtable
			// (about 1,100 point-select outcomes).
			w := newWorker(rn, 4096)
			w.regrouped, w.slot = true, slot
			defer w.close()
			queue := &order.Cursor{}
			w.cursor = queue
			var rest []*unit // the batch's units not run yet, in order (but for those readyNext ran first)
			for ; ; idle.Add(1) {
				if len(units) == 0 && w.c != nil {
					// Nothing queued: the connection's buffers go back to
					// the pools while it waits (it holds them while it
					// runs batch after batch; see conn.Hold).
					w.c.Hold(false)
				}
				us, ok := <-units
				idle.Add(-1)
				if !ok {
					break
				}
				if w.c != nil {
					w.c.Hold(true)
				}
				if len(units) <= cap(units)/2 {
					select {
					case room <- struct{}{}:
					default:
					}
				}
				for _, u := range us {
					u.t.Queue(queue)
				}
				rest = append(rest[:0], us...)
				for len(rest) > 0 {
					i, ready := 0, false
					if rn.failed() == "" && !rn.pastDeadline() {
						i, ready = rn.readyNext(rest)
					}
					u := rest[i]
					rest = slices.Delete(rest, i, i+1)
					if rn.pastDeadline() {
						rn.gate.Finish(u.t) // --duration ran out: not run
						continue
					}
					w.cur = u.t
					queue.At(u.t)
					if rn.failed() == "" {
						pace.SleepUntil(ctx, u.jobs[0].intended)
						switch {
						case u.t == nil:
						case ready:
							rn.idleTurn(w, u.t) // nothing to wait for (Gate.Ready)
						default:
							rn.waitTurn(w, u.t, u.turnAt(), 0, &u.jobs[0], u.jobs)
						}
					}
					w.runUnit(rn.ctx, u)
					rn.gate.Finish(u.t)
				}
				sp.give(us)
			}
		}()
	}
	var pending []*unit
	flush := func() bool {
		if len(pending) == 0 {
			return true
		}
		for {
			select {
			case units <- pending:
				pending = make([]*unit, 0, batch)
				return true
			default:
			}
			// Full: wait until a connection has taken a batch that leaves
			// the queue at most half full (a token left from earlier only
			// makes this look again).
			select {
			case <-room:
			case <-ctx.Done():
				return false
			}
		}
	}
	send := func(u *unit) bool {
		if len(u.jobs) == 0 {
			return true
		}
		// A unit's ticket ends where its COMMIT starts (a lone change's
		// where it ends: see unit.lone): units wait for those
		// whose COMMIT began before they did (to start) and before their own
		// COMMIT began (to commit). Commit starts, not ends, because a
		// transaction blocked on another's locks is released inside the
		// other's COMMIT, before the proxy saw that COMMIT end: their commit
		// intervals can overlap, their commit starts cannot.
		if rn.ordered { // else there is no ticket (runner.ticket): nothing to work out for it
			p := &u.prep
			u.t = rn.ticket(u.start, u.commitStart, nil, p.keys, p.changes, false, nil, p.access, p.infos...) // queued where it is taken
		}

		pending = append(pending, u)
		if len(pending) >= batch {
			return flush()
		}
		if int(idle.Load()) > len(units) {
			// A connection waits with no batch queued for it: no reason
			// to hold the unit back. (Only while connections wait: held
			// until a full queue, the units of a short capture went out
			// as one batch, on one connection, and transactions that ran
			// at once in the capture ran one after the other.)
			select {
			case units <- pending:
				pending = make([]*unit, 0, batch)
			default:
			}
		}
		return true
	}
	sr := rn.newSessionRunner()
	pinned := map[uint64]bool{}
	g := newRegrouper(rn.an, rn.offset)
	g.spares = sp
	// Units close in the order their COMMITs end (the capture's order);
	// they go out in the order their COMMITs started, once no record still
	// to come can hold a COMMIT that started earlier (none lasted longer
	// than the longest seen so far).
	var held unitQueue
	var longest int64
	release := func(upTo int64) bool {
		for held.len() > 0 && held.front().commitStart < upTo {
			if !send(held.pop()) {
				return false
			}
		}
		return true
	}
	err := rn.src.records(ctx, rn, func(rec *store.Record, loop int) bool {
		if !rn.inShard(rec.Session) {
			return true
		}
		if rn.x.pinned[rec.Session] {
			if !pinned[rec.Session] {
				pinned[rec.Session] = true
				rn.pinned.Add(1)
			}
			rn.dispatchSession(ctx, sr, rec, loop)
			return true
		}
		for _, u := range g.add(rec, loop, rn.intended(rec, loop)) {
			rn.prepTicket(u)
			held.push(u)
			longest = max(longest, u.end-u.commitStart)
		}
		// Records arrive about in the order they ended: hold units back by
		// twice the longest COMMIT seen, and at least half a second.
		return release(rn.offset(rec, loop) - max(2*longest, int64(500*time.Millisecond)))
	})
	for _, u := range g.flush() {
		rn.prepTicket(u)
		held.push(u)
	}
	release(math.MaxInt64)
	// The last units, which would wait for a batch that never fills, go
	// out spread over the connections: as one batch they ran one after
	// another on one connection while the others had nothing to do.
	for _, b := range spread(pending, rn.cfg.Concurrency) {
		pending = b
		if !flush() {
			break
		}
	}
	close(units)
	wg.Wait()
	sr.closeAll()
	rn.closeAwaitingKill()
	return err
}

// turnAt is when, in the capture, u may start: every unit that
// committed before then goes first (see runner.waitTurn).
func (u *unit) turnAt() int64 {
	if u.lone {
		return u.t.End // see unit.lone
	}
	return u.t.Start
}

// readyAhead bounds how many units of its batch a connection looks at
// past the first one, which must wait (readyNext).
const readyAhead = 8

// readyNext is which of a connection's units not run yet (rest, in the
// order handed out) it runs next, and whether that one has nothing to
// wait for (Gate.Ready: it needs no waitTurn): the first, unless it
// must wait for a unit of another connection and one of the next
// readyAhead need not and depends on none before it (their tickets'
// Access), which then runs while the first waits. Batched, the unit
// waited for was often far back in its own connection's batch: a
// conflict-free read/write replay (one unit in a hundred waiting) kept
// its connections idle 12 % of the time, 36 ms a wait, and its COMMITs
// reached the server one by one where sysbench's are synced together.
//
// Order is kept: the unit run ahead depends on no unit not yet done
// that committed before its own COMMIT began (Gate.Ready at its end),
// nor on any it goes ahead of here, and is of none of their sessions;
// those wait for it only if they depend on it, and it waits for
// nothing. A unit whose Access is not known (nil) depends on every
// other.
func (rn *runner) readyNext(rest []*unit) (int, bool) {
	if len(rest) < 2 || !rn.access || rest[0].t == nil {
		return 0, false
	}
	if rn.gate.Ready(rest[0].t, rest[0].turnAt()) {
		return 0, true
	}
	for k := 1; k < len(rest) && k <= readyAhead; k++ {
		v := rest[k]
		if v.t == nil || v.t.Access == nil {
			return 0, false
		}
		for _, x := range rest[:k] {
			// A unit of the same session carries the session's state as
			// of its own place (adopt sends only what is newer than the
			// connection has): the earlier one must run first.
			if x.session == v.session || !order.Independent(v.t, x.t) {
				v = nil
				break
			}
		}
		// Ready up to its COMMIT (t.End), not only its start: one that
		// waited there for a unit queued behind the first (still to
		// run here) would wait for itself, and the gate would let it
		// commit out of order.
		if v != nil && rn.gate.Ready(v.t, v.t.End) {
			return k, true
		}
	}
	return 0, false
}

// ticketPrep is what a regrouped unit's ticket is made of (see
// runner.ticket), but for its place in the order.
type ticketPrep struct {
	infos   []*sqlinfo.Info
	keys    []string // the rows its changes name; nil: not all known
	changes bool
	access  *order.Access
}

// prepTicket works out u's ticketPrep as u closes, its records just
// read. Its ticket is made when it goes out, in the order COMMITs
// started, up to half a second of the capture later, thousands of
// records on: read again then, the records had left the CPU's caches.
func (rn *runner) prepTicket(u *unit) {
	if !rn.ordered || len(u.jobs) == 0 {
		return
	}
	p := &u.prep
	p.infos = make([]*sqlinfo.Info, 0, len(u.jobs))
	keyed := true
	var tc trxChanges // a unit is one transaction: its end is a change if it changed anything
	for i := range u.jobs {
		j := &u.jobs[i]
		if statementRecord(j.rec) {
			p.changes = tc.statement(j.info) || p.changes
		}
		if j.info != nil {
			p.infos = append(p.infos, j.info)
			if j.info.Changes() && keyed {
				k := rn.jobKeys(j)
				keyed = k != nil
				p.keys = append(p.keys, k...)
			}
		}
	}
	if !keyed {
		p.keys = nil
	}
	p.access = rn.unitAccess(u.jobs)
}

// spread cuts us, in order, into at most n batches of sizes that differ by
// at most one. Batches are taken in order and run in order, so any cut
// keeps the earliest unfinished unit on a running connection.
func spread(us []*unit, n int) [][]*unit {
	if len(us) == 0 {
		return nil
	}
	n = min(max(n, 1), len(us))
	out := make([][]*unit, 0, n)
	for i := range n {
		out = append(out, us[i*len(us)/n:(i+1)*len(us)/n])
	}
	return out
}

// unitQueue holds units in the order of their COMMIT's start (units with
// the same start in the order they came). Units come about in that order
// (they close as their COMMITs end), so one goes in at the back and moves
// forward only past the units whose COMMIT started after its own and
// ended before it: O(1) for most, and none leaves out of order.
type unitQueue struct{ fifo[*unit] }

func (q *unitQueue) front() *unit { return q.items[q.head] }

func (q *unitQueue) push(u *unit) {
	q.items = append(q.items, u)
	i := len(q.items) - 1
	for ; i > q.head && q.items[i-1].commitStart > u.commitStart; i-- {
		q.items[i] = q.items[i-1]
	}
	q.items[i] = u
}

// fifo is a queue on a slice: items leave from the front, whose room is
// reused once it is half the slice (and at least fifoKeep/2 items). Its
// room follows its depth: a slice emptied with more than fifoKeep items
// of room is let go, and one at least four times as large as what it
// holds is halved when the room is reused. Otherwise a queue keeps the
// room of its deepest moment, or hundreds of items it never holds at
// once, and each of a replay's sessions has one: a 64-session replay of
// 200,000 records held 2.6 MiB of empty job queue room, some 36,000
// slots, beside a backlog of 4,096 records; then, with the emptied
// queues' room let go, still 3 MiB in queues that never emptied, each
// holding a few dozen jobs in room for 512 or more.
type fifo[T any] struct {
	items []T
	head  int // items[:head] are gone
}

// fifoKeep is the room an emptied fifo keeps.
const fifoKeep = 64

func (q *fifo[T]) len() int { return len(q.items) - q.head }

func (q *fifo[T]) pop() T {
	var zero T
	v := q.items[q.head]
	q.items[q.head] = zero
	q.head++
	switch {
	case q.head == len(q.items):
		if cap(q.items) > fifoKeep {
			q.items = nil
		}
		q.items, q.head = q.items[:0], 0
	case q.head >= fifoKeep/2 && 2*q.head >= len(q.items):
		// At least as many items left since the last move as the n
		// moved now: O(1) per item.
		n := len(q.items) - q.head
		if c := cap(q.items); c > fifoKeep && c >= 4*n {
			s := make([]T, n, max(2*n, fifoKeep))
			copy(s, q.items[q.head:])
			q.items, q.head = s, 0
			break
		}
		copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	return v
}

// collect merges the shards' interval statistics every interval, stores
// them as the target's series and feeds the progress lines, until stop.
func (rn *runner) collect(every time.Duration, prog *progressLines, stop <-chan struct{}) {
	t := time.NewTicker(every)
	defer t.Stop()
	n := 0
	last := rn.start
	take := func(now time.Time) {
		iv := store.Interval{Start: last.Sub(rn.start), Length: now.Sub(last), Threads: uint64(rn.active.Load())}
		rn.retired.Lock()
		for _, st := range rn.stats {
			st.takeInterval(&iv)
			st.retireInto(&rn.retired.t)
		}
		rn.retired.Unlock()
		if iv.Length > 0 {
			rn.run.PutInterval(rn.point, rn.idx, n, &iv)
			n++
			prog.add(rn.t.Name, &iv, now.Sub(rn.start))
		}
		last = now
	}
	for {
		select {
		case <-stop:
			take(time.Now())
			return
		case now := <-t.C:
			if now.Before(rn.start) {
				last = rn.start
				continue
			}
			take(now)
		}
	}
}

// totals merges the target's statistics (after its workers have stopped).
func (rn *runner) totals() *totals {
	var t totals
	var records int64
	rn.mergeInto(&t, &records)
	return &t
}
