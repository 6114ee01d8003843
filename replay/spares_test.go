package replay

import (
	"reflect"
	"testing"

	"github.com/tandemdb/tandem/capture/synth"
	"github.com/tandemdb/tandem/store"
)

// The regrouper fills again the units and records the connections handed
// back: the same memory, the unit zero, the record a clone of the next one.
func TestSparesFillAgainWhatRan(t *testing.T) {
	rec := func(seq uint64, id int64) *store.Record {
		return &store.Record{Seq: seq, Session: 3, Kind: store.KindExecute, StmtID: 1, Params: []store.Value{{Type: store.TypeLong, Int: id}}}
	}
	var counted sparesReused
	sp := newSpares(1, &counted)
	u, r := sp.unit(), sp.clone(rec(1, 10))
	u.session, u.schema, u.sets = 3, "sbtest", []setVar{{name: "x"}}
	u.jobs = append(u.first[:0], job{rec: r, sql: "SELECT 1"})

	sp.give([]*unit{u})
	u2, r2 := sp.unit(), sp.clone(rec(2, 20))
	if u2 != u || r2 != r {
		t.Fatalf("unit %p record %p, want the ones handed back (%p, %p)", u2, r2, u, r)
	}
	if !reflect.DeepEqual(*u2, unit{}) {
		t.Errorf("a spare unit comes back as %+v, want zero", *u2)
	}
	if !reflect.DeepEqual(r2, rec(2, 20)) {
		t.Errorf("a spare record comes back as %+v, want the record cloned into it", r2)
	}
	if counted.units.Load() != 1 || counted.records.Load() != 1 {
		t.Errorf("counted %d units, %d records; want 1, 1", counted.units.Load(), counted.records.Load())
	}
	// A transaction's jobs give back each record once (jobs[0] is also
	// first[0] once jobs has grown past it).
	u2.jobs = append(u2.first[:0], job{rec: r2})
	u2.jobs = append(u2.jobs, job{rec: sp.clone(rec(3, 30))}, job{rec: sp.clone(rec(4, 40))})
	sp.give([]*unit{u2})
	if sp.refill(); len(sp.units) != 1 || len(sp.recs) != 3 {
		t.Errorf("a unit of 3 jobs gave back %d units, %d records; want 1, 3", len(sp.units), len(sp.recs))
	}
	// With a batch waiting already, the next is dropped (left to the
	// collector), not waited for.
	sp.units, sp.recs = nil, nil
	a, b := &unit{}, &unit{}
	a.jobs, b.jobs = []job{{rec: rec(5, 50)}}, []job{{rec: rec(6, 60)}}
	sp.give([]*unit{a})
	sp.give([]*unit{b})
	if got := sp.unit(); got != a {
		t.Errorf("took %p, want the first batch's unit %p", got, a)
	}
	if got := sp.unit(); got == b {
		t.Errorf("a batch given to a full channel came back")
	}

	// Poisoned (what this package's tests run with): overwritten and
	// dropped, never filled again.
	p := newSpares(1, nil)
	if !p.poison {
		t.Fatal("the package's tests run without poisoned spares")
	}
	pu, pr := p.unit(), p.clone(rec(7, 70))
	pu.jobs = append(pu.first[:0], job{rec: pr})
	p.give([]*unit{pu})
	if got := p.unit(); got == pu || pu.session != poisonUnit.session {
		t.Errorf("poisoned: unit %p reused (handed back %p) or not poisoned (session %d)", got, pu, pu.session)
	}
	if got := p.clone(rec(8, 80)); got == pr || pr.SQL != poisonRecord.SQL {
		t.Errorf("poisoned: record reused or not poisoned: %+v", pr)
	}

	// No spares (a followed run's, whose observer may keep records): new
	// ones every time.
	var none *spares
	none.give([]*unit{u})
	if none.unit() == u || none.clone(r) == r {
		t.Error("nil spares reused something")
	}
}

// A --concurrency replay that fills units and records again runs every
// statement as captured: the same counts on two identical copies, no
// divergence, and spares were filled (the rest of this package's tests
// poison them instead).
func TestConcurrencyReplayFillsSparesAgain(t *testing.T) {
	ta, tb, _, _ := twoInnoDB(t)
	prepared(t, 2, 2000, ta, tb)
	// Over 3 s of the capture's time: the reader holds units back for
	// half a second of it (runConcurrent), so a shorter capture's units
	// are all made before any runs.
	capDir := synthCapture(t, "oltp_point_select", func(c *synth.Config) { c.Threads, c.Events, c.Rate = 8, 3000, 1000 })
	var counted sparesReused
	rep := replayRun(t, capDir, func(c *Config) { c.Concurrency, c.spares = 2, &counted }, ta, tb)
	for _, tr := range rep.Targets {
		if tr.Reads != 3000 || tr.Writes != 0 || tr.Errors != 0 {
			t.Errorf("%s: reads %d writes %d errors %d; want 3000, 0, 0", tr.Name, tr.Reads, tr.Writes, tr.Errors)
		}
	}
	if d := rep.Divergences[0]; d.Compared != 3000 || d.Total() != 0 || d.Missing != 0 || d.Extra != 0 {
		t.Errorf("compared %d (want 3000), divergent %v, missing %d, extra %d", d.Compared, d.ByClass, d.Missing, d.Extra)
	}
	units, records := counted.units.Load(), counted.records.Load()
	if units == 0 || records == 0 || units > 2*3000 || records > 2*3000 {
		t.Errorf("filled again %d units and %d records of two targets' 3,000 each; want some, at most all", units, records)
	}
	t.Logf("filled again: %d units, %d records", units, records)
}
