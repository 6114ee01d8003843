package replay

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/tandemdb/tandem/store"
	"github.com/tandemdb/tandem/target"
)

// runner replays the capture against one target. It reads the capture on
// its own, so a slow target never holds back another.
type runner struct {
	idx   int
	t     target.Target
	cfg   *Config
	r     *store.Reader
	an    *analyzer
	stats *targetStats
	run   *store.RunStore

	addr, user, pass, db string
	start                time.Time // the shared wall-clock instant replay begins
	capStart             int64     // start of the capture's first record, ns
	capSpan              int64     // from first start to last start, ns

	rewriteMu sync.Mutex
	rewrites  map[string]string
	outMu     sync.Mutex
	outErr    error // the first failure to write outcomes
	// end is when this target finished replaying (its own elapsed time).
	end time.Time
	// active counts the connections replaying now (progress lines' thds).
	active atomic.Int64
	// blocking: connections wait for replies in blocking reads (IOBlocking).
	blocking bool
}

func newRunner(idx int, t target.Target, cfg *Config, r *store.Reader, an *analyzer, run *store.RunStore) (*runner, error) {
	c, err := mysql.ParseDSN(t.DSN)
	if err != nil {
		return nil, fmt.Errorf("target %s: %w", t.Name, err)
	}
	return &runner{idx: idx, t: t, cfg: cfg, r: r, an: an, run: run, stats: newTargetStats(),
		addr: c.Addr, user: c.User, pass: c.Passwd, db: c.DBName, rewrites: map[string]string{}}, nil
}

// schemaFor maps a captured schema to the target's: a target whose DSN
// names a database uses it for every session.
func (rn *runner) schemaFor(captured string) string {
	if rn.db != "" {
		return rn.db
	}
	return captured
}

// rewrite applies the target's engine and options to table DDL.
func (rn *runner) rewrite(sql string) string {
	rn.rewriteMu.Lock()
	defer rn.rewriteMu.Unlock()
	if out, ok := rn.rewrites[sql]; ok {
		return out
	}
	out, _ := rewriteEngine(sql, rn.t.Engine, rn.t.Options)
	rn.rewrites[sql] = out
	return out
}

// intended is when a record should be sent: the capture's pacing scaled by
// Speed, from the shared start; loop shifts it by whole capture spans.
func (rn *runner) intended(rec *store.Record, loop int) time.Time {
	if rn.cfg.Speed <= 0 {
		return time.Time{}
	}
	off := float64(rec.Start.UnixNano()-rn.capStart+int64(loop)*(rn.capSpan+int64(time.Millisecond))) / rn.cfg.Speed
	return rn.start.Add(time.Duration(off))
}

// finish records an executed statement: stats and the run store. A
// transaction ends with COMMIT or ROLLBACK, or with any statement sent
// outside BEGIN … COMMIT (as sysbench counts events).
func (rn *runner) finish(w *worker, si *StmtInfo, o *store.Outcome, intended time.Time, replayed bool) {
	if replayed && si != nil { // a statement: latency, throughput, transactions
		var lag time.Duration
		paced := !intended.IsZero()
		if paced {
			lag = time.Since(intended)
		}
		o.Lag = lag
		trxEnd := si.End || !w.inTrx && !si.Begin
		switch {
		case si.Begin:
			w.inTrx = true
		case si.End:
			w.inTrx = false
		}
		rn.stats.add(si, o.Service, lag, paced, o.ErrCode, trxEnd)
	} else if o.Flags&store.OutcomeSkipped != 0 {
		rn.stats.mu.Lock()
		rn.stats.skipped++
		rn.stats.mu.Unlock()
	}
	if !replayed && o.Flags&store.OutcomeSkipped == 0 {
		return // lifecycle records (close, quit) are not compared
	}
	w.out.Add(o)
	if w.out.Len() >= w.outBatch {
		rn.commit(w)
	}
}

// commit writes w's buffered outcomes; the first failure is kept.
func (rn *runner) commit(w *worker) {
	if err := w.out.Commit(); err != nil {
		rn.outMu.Lock()
		if rn.outErr == nil {
			rn.outErr = err
		}
		rn.outMu.Unlock()
	}
}

// loops runs body over the capture as many times as Loop and Duration ask.
func (rn *runner) loops(ctx context.Context, body func(rec *store.Record, loop int) bool) error {
	deadline := time.Time{}
	if rn.cfg.Duration > 0 {
		deadline = rn.start.Add(rn.cfg.Duration)
	}
	for loop := 0; ; loop++ {
		for rec, err := range rn.r.Records() {
			if err != nil {
				return err
			}
			if ctx.Err() != nil || !deadline.IsZero() && time.Now().After(deadline) {
				return nil
			}
			if !body(rec, loop) {
				return nil
			}
		}
		if loop+1 >= rn.cfg.Loop && (deadline.IsZero() || time.Now().After(deadline)) {
			return nil
		}
	}
}

func sleepUntil(ctx context.Context, t time.Time) {
	if d := time.Until(t); d > 0 {
		tm := time.NewTimer(d)
		select {
		case <-tm.C:
		case <-ctx.Done():
			tm.Stop()
		}
	}
}

// outcomeSeq keeps outcome keys unique across loops of the capture.
func outcomeSeq(seq uint64, loop int) uint64 { return uint64(loop)<<40 | seq }

type job struct {
	rec      *store.Record
	loop     int
	intended time.Time
	execSQL  string
	si       *StmtInfo // --concurrency: analysed once, by the dispatcher
}

// runSessions replays each captured session on its own connection, in order.
func (rn *runner) runSessions(ctx context.Context) error {
	sessions := map[uint64]chan job{}
	var wg sync.WaitGroup
	spawn := func() chan job {
		ch := make(chan job, 1024)
		wg.Add(1)
		go func() {
			defer wg.Done()
			rn.active.Add(1)
			defer rn.active.Add(-1)
			w := newWorker(rn, 256) // many sessions: small outcome batches each
			defer w.close()
			for j := range ch {
				sleepUntil(ctx, j.intended)
				o := store.Outcome{Seq: outcomeSeq(j.rec.Seq, j.loop)}
				si, replayed := w.run(ctx, j.rec, "", nil, &o)
				rn.finish(w, si, &o, j.intended, replayed)
			}
		}()
		return ch
	}
	err := rn.loops(ctx, func(rec *store.Record, loop int) bool {
		key := rec.Session<<8 | uint64(loop&0xff)
		ch := sessions[key]
		if ch == nil {
			ch = spawn()
			sessions[key] = ch
		}
		ch <- job{rec: rec.Clone(), loop: loop, intended: rn.intended(rec, loop)}
		if rec.Kind == store.KindQuit {
			close(ch)
			delete(sessions, key)
		}
		return true
	})
	for _, ch := range sessions {
		close(ch)
	}
	wg.Wait()
	return err
}

// unit is a transaction (BEGIN … COMMIT) or a single statement outside one,
// with what its session had set up.
type unit struct {
	session uint64
	schema  string
	sets    []string
	jobs    []job
}

// sessionState is what --concurrency tracks of a captured session.
type sessionState struct {
	schema string
	sqlOf  map[uint32]string
	sets   []string
	open   *unit
}

// runConcurrent regroups whole transactions, in capture order, onto
// Concurrency connections.
func (rn *runner) runConcurrent(ctx context.Context) error {
	// Unpaced, units go to the workers in batches: one channel operation
	// (and at most one wake-up) per batch instead of per transaction.
	batch := 1
	if rn.cfg.Speed <= 0 {
		batch = 32
	}
	units := make(chan []*unit, 16*rn.cfg.Concurrency)
	var wg sync.WaitGroup
	for i := 0; i < rn.cfg.Concurrency; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rn.active.Add(1)
			defer rn.active.Add(-1)
			w := newWorker(rn, 4096)
			defer w.close()
			for us := range units {
				for _, u := range us {
					rn.runUnit(ctx, w, u)
				}
			}
		}()
	}
	var pending []*unit
	send := func() bool {
		if len(pending) == 0 {
			return true
		}
		select {
		case units <- pending:
			pending = make([]*unit, 0, batch)
			return true
		case <-ctx.Done():
			return false
		}
	}
	states := map[uint64]*sessionState{}
	err := rn.loops(ctx, func(rec *store.Record, loop int) bool {
		st := states[rec.Session]
		if st == nil {
			st = &sessionState{sqlOf: map[uint32]string{}}
			states[rec.Session] = st
		}
		j := job{rec: rec, loop: loop, intended: rn.intended(rec, loop)}
		switch rec.Kind {
		case store.KindConnect, store.KindInitDB, store.KindChangeUser:
			st.schema = rec.Schema
			return true
		case store.KindPrepare:
			st.sqlOf[rec.StmtID] = rec.SQL
			return true
		case store.KindClose, store.KindQuit, store.KindReset, store.KindResetConnection, store.KindPing:
			if rec.Kind == store.KindQuit {
				delete(states, rec.Session)
			}
			return true
		case store.KindExecute:
			j.execSQL = st.sqlOf[rec.StmtID]
		}
		sql := j.execSQL
		if rec.Kind == store.KindQuery {
			sql = rec.SQL
		}
		si := rn.an.info(sql)
		j.si = si
		if rec.Kind == store.KindQuery && isSet(sql) {
			st.sets = append(st.sets, sql)
			return true
		}
		if rec.Kind == store.KindQuery && st.open == nil {
			if db, ok := useSchema(sql); ok { // USE changes the session's schema, like COM_INIT_DB
				st.schema = db
				return true
			}
		}
		j.rec = rec.Clone()
		if st.open == nil {
			st.open = &unit{session: rec.Session, schema: st.schema, sets: append([]string(nil), st.sets...)}
		}
		st.open.jobs = append(st.open.jobs, j)
		if !si.Begin && (si.End || len(st.open.jobs) == 1) {
			pending = append(pending, st.open)
			st.open = nil
			if len(pending) >= batch {
				return send()
			}
		}
		return true
	})
	send()
	close(units)
	wg.Wait()
	return err
}

// useSchema returns the schema of a USE statement.
func useSchema(sql string) (string, bool) {
	if !strings.EqualFold(firstWord(sql), "use") {
		return "", false
	}
	db := strings.TrimSpace(strings.TrimRight(skipComments(sql)[3:], "; \t\r\n"))
	if len(db) >= 2 && db[0] == '`' && db[len(db)-1] == '`' {
		db = strings.ReplaceAll(db[1:len(db)-1], "``", "`")
	}
	return db, db != ""
}

func isSet(sql string) bool {
	w := firstWord(sql)
	return len(w) == 3 && (w[0] == 'S' || w[0] == 's') && (w[1] == 'E' || w[1] == 'e') && (w[2] == 'T' || w[2] == 't')
}

// runUnit prepares w for u's session, then runs u's records.
func (rn *runner) runUnit(ctx context.Context, w *worker, u *unit) {
	sleepUntil(ctx, u.jobs[0].intended)
	if err := w.connect(ctx, u.schema); err == nil {
		w.adopt(u)
	}
	for _, j := range u.jobs {
		o := store.Outcome{Seq: outcomeSeq(j.rec.Seq, j.loop)}
		si, replayed := w.run(ctx, j.rec, j.execSQL, j.si, &o)
		rn.finish(w, si, &o, j.intended, replayed)
	}
}

// flush reports a failure to write outcomes (each worker commits its own
// when it ends).
func (rn *runner) flush() error {
	rn.outMu.Lock()
	defer rn.outMu.Unlock()
	return rn.outErr
}
