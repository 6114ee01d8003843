package order

import (
	"hash/maphash"
	"slices"
	"time"
)

// commitOrder keeps commits in the server's own order: the order of the
// GTIDs a capture holds for them (replay's --commit-order gtid). A ticket
// ranked Commit (1, 2, … in that order over the commits the replay runs;
// Floor is the first rank of its replication domain) goes to the server
// only once every ticket of its domain ranked below it whose transaction
// conflicts with its own (Footprint.conflicts) is done.
//
// Why this makes writes certain: the engines decide a locking statement
// (a write, a locking read) under strict two-phase locking, so a schedule
// is equivalent to running its transactions one after another in the
// order they committed; only conflicting pairs' order matters. Two
// schedules whose conflicting commits come in the same order are
// equivalent to the same serial one, and every locking statement reads
// the same rows in both. A replay that keeps the capture's GTID order
// between conflicting commits then gives each locking statement the
// answer it had in the capture (or, on another engine, that engine's
// own), whatever the timing; only plain reads, which read a snapshot
// taken at a moment, stay order-ambiguous where they overlapped a
// commit. Commits that do not conflict go as the capture's clock lets
// them, together. A commit that cannot wait (released by the hard bound,
// or behind a ticket that waits for it) is marked like any released
// ticket.
//
// Tickets come in start order, commits in GTID order: where commits
// overlapped, a rank can be registered after the next one, so a commit
// waits until every rank below it is registered. Registration is tracked
// by a low-water mark (every rank below low is registered) and the
// registered ranks above it; a rank not registered when maxAhead later
// ones have been never will be (its record is lost, or replay does not
// run it), as none will once the caller says so (CloseCommits).
type commitOrder struct {
	// pending holds the registered commits by rank; done ones leave from
	// the front (tickets are registered nearly in rank order, so
	// insertion is at or near the back).
	pending []*Ticket
	low     int64          // every rank below it is registered
	above   map[int64]bool // registered ranks at or above low
	closed  bool           // every rank that will come has come
	// reg, made by a waiter for an unregistered rank, is closed at the
	// next registration (or CloseCommits).
	reg chan struct{}
}

// maxAhead bounds how far registration runs ahead of a missing rank
// before that rank is taken as never coming (and the above set's size).
const maxAhead = 4096

func newCommitOrder() commitOrder {
	return commitOrder{low: 1, above: map[int64]bool{}}
}

// add registers t's rank (under the gate's lock).
func (co *commitOrder) add(t *Ticket) {
	if t.Commit == 0 {
		return
	}
	if !t.done {
		co.insert(t)
	}
	switch {
	case t.Commit < co.low:
	case t.Commit == co.low:
		co.low++
		co.advance()
	default:
		co.above[t.Commit] = true
		if len(co.above) > maxAhead {
			// The rank at low never came: go past it.
			co.low++
			co.advance()
		}
	}
	if co.reg != nil {
		close(co.reg)
		co.reg = nil
	}
}

// insert puts t in pending, by rank.
func (co *commitOrder) insert(t *Ticket) {
	if t.inCommits {
		return
	}
	i := len(co.pending)
	for i > 0 && co.pending[i-1].Commit > t.Commit {
		i--
	}
	co.pending = slices.Insert(co.pending, i, t)
	t.inCommits = true
}

// pop drops the done commits at the front.
func (co *commitOrder) pop() {
	n := 0
	for n < len(co.pending) && co.pending[n].done {
		co.pending[n].inCommits = false
		n++
	}
	if n > 0 {
		clear(co.pending[:n])
		co.pending = co.pending[n:]
	}
}

func (co *commitOrder) advance() {
	for co.above[co.low] {
		delete(co.above, co.low)
		co.low++
	}
}

// registered reports whether rank r has been registered, or never will.
func (co *commitOrder) registered(r int64) bool {
	return co.closed || r < co.low || co.above[r]
}

// CloseCommits says that every commit rank that will be registered has
// been (the capture is read): a ticket waiting for one that was not
// goes ahead.
func (g *Gate) CloseCommits() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.commits.closed = true
	if g.commits.reg != nil {
		close(g.commits.reg)
		g.commits.reg = nil
	}
}

// commitBlockerLocked returns the earliest commit t must follow that is
// not done (nil when there is none), or, while a rank below t's is not
// registered, a channel closed at the next registration.
func (g *Gate) commitBlockerLocked(t *Ticket) (*Ticket, <-chan struct{}) {
	if t.Commit == 0 {
		return nil, nil
	}
	co := &g.commits
	if !co.closed && co.low < t.Commit {
		if co.reg == nil {
			co.reg = make(chan struct{})
		}
		return nil, co.reg
	}
	for _, p := range co.pending {
		if p.Commit >= t.Commit {
			break
		}
		if !p.done && p.Commit >= t.Floor && t.Trx.conflicts(p.Trx) {
			return p, nil
		}
	}
	return nil, nil
}

// commitWaitLocked returns, for t that commits (t.Commit), the earliest
// conflicting commit before it that is not done, or a channel closed when
// the ranks below t's may all be registered; with patience > 0, the ticket stuck on the server
// behind it (see blockerLocked); and whether it waits behind t itself
// (t then goes ahead, marked).
func (g *Gate) commitWaitLocked(t *Ticket, patience int, h *Cursor, wake time.Duration) (*Ticket, <-chan struct{}, []*Ticket, bool, time.Duration) {
	p, reg := g.commitBlockerLocked(t)
	if p == nil {
		return nil, reg, nil, false, wake
	}
	if dependsOn(p, t, 0) {
		return nil, nil, nil, true, wake
	}
	if patience > 0 {
		if s := g.inflightOf(p, 0); s != nil {
			var stuck bool
			if stuck, wake = g.stuckLocked(h, s, patience, wake, g.now().UnixNano()); stuck {
				return p, nil, []*Ticket{s}, false, wake
			}
		}
	}
	return p, nil, nil, false, wake
}

// commitsAfter reports whether p commits after t in the server's order
// (both are ranked, in one domain: writes outside a transaction, each its
// own commit).
// Then p did not hold a lock t needed before t did, whatever the
// capture's clock says (an answer read late makes a write look as if it
// ended after one that locked its row after it): t does not go after p.
func commitsAfter(p, t *Ticket) bool {
	return p.Commit != 0 && t.Commit != 0 && p.Commit > t.Commit && p.Floor == t.Floor
}

// Footprint is what a transaction locked, for the commit order: the rows
// its statements that name them lock (replay's row keys), the tables of
// those that name none, every table it changes, and whether it may have
// changed any. Nil: anything.
type Footprint struct {
	Keys    []string
	Keyless []string
	Tables  []string
	Any     bool
	// sums are Keys' hashes (maphash, keySeed), kept by Add: footprints compared
	// often (Access, for every earlier ticket a waiter looks at) compare
	// numbers, not strings; equal sums of two different keys only make
	// two footprints look as if they conflict.
	sums []uint64
	// mask has bit sum%64 set for each of sums: two footprints whose
	// masks share no bit share no key, told by one AND (a waiter's walk
	// compares its footprints with those of every earlier ticket).
	mask uint64
	// at gives, past footprintMapped keys, the place in Keys of the first
	// key of each sum: Add finds a key it has, and conflicts a shared
	// sum, without a scan of every key (a unit of 20,000 updates spent
	// its replay's CPU comparing each new key with those before).
	at map[uint64]int
}

// footprintMapped is the number of keys from which a footprint indexes
// their sums (at).
const footprintMapped = 32

// keySeed seeds the row keys' hashes (Footprint.sums).
var keySeed = maphash.MakeSeed()

// conflicts reports whether two transactions may have locked a row in
// common: a shared row key, or a table one of them locked without naming
// its rows that the other changed (nil or Any: always).
func (f *Footprint) conflicts(o *Footprint) bool {
	if f == nil || o == nil || f.Any || o.Any {
		return true
	}
	if len(f.sums) == len(f.Keys) && len(o.sums) == len(o.Keys) {
		if f.mask&o.mask != 0 && f.sharedSum(o) {
			return true
		}
	} else if sharedKey(f.Keys, o.Keys) {
		return true
	}
	for _, t := range f.Keyless {
		if slices.Contains(o.Tables, t) {
			return true
		}
	}
	for _, t := range o.Keyless {
		if slices.Contains(f.Tables, t) {
			return true
		}
	}
	return false
}

// none reports whether f holds nothing: no table, not Any.
func (f *Footprint) none() bool { return !f.Any && len(f.Tables) == 0 && len(f.Keys) == 0 }

// Grow makes room for n more row keys (a unit's, one or so per
// statement), so that Add does not grow its lists key by key.
func (f *Footprint) Grow(n int) {
	f.Keys = slices.Grow(f.Keys, n)
	f.sums = slices.Grow(f.sums, n)
}

// Add adds a statement that changes what others see: its tables, its
// row keys (nil: it names no rows), whether it may touch any table.
func (f *Footprint) Add(tables, keys []string, anyTable bool) {
	f.Any = f.Any || anyTable
	for _, t := range tables {
		if !slices.Contains(f.Tables, t) {
			f.Tables = append(f.Tables, t)
		}
		if keys == nil && !slices.Contains(f.Keyless, t) {
			f.Keyless = append(f.Keyless, t)
		}
	}
	for _, k := range keys {
		sum := maphash.String(keySeed, k)
		if f.has(k, sum) {
			continue
		}
		f.Keys = append(f.Keys, k)
		f.sums = append(f.sums, sum)
		f.mask |= 1 << (sum % 64)
		switch {
		case f.at != nil:
			if _, ok := f.at[sum]; !ok {
				f.at[sum] = len(f.Keys) - 1
			}
		case len(f.Keys) > footprintMapped:
			f.at = make(map[uint64]int, 2*len(f.Keys))
			for i := len(f.sums) - 1; i >= 0; i-- {
				f.at[f.sums[i]] = i
			}
		}
	}
}

// has reports whether f holds key k, whose sum is sum.
func (f *Footprint) has(k string, sum uint64) bool {
	if f.at == nil {
		return slices.Contains(f.Keys, k)
	}
	i, ok := f.at[sum]
	if !ok {
		return false
	}
	// Two keys of one sum: the first is indexed, the others are after it.
	return f.Keys[i] == k || slices.Contains(f.Keys[i+1:], k)
}

// sharedSum reports whether f and o hold a key's sum in common: a look-up
// of the smaller's sums in the larger's index, if it has one.
func (f *Footprint) sharedSum(o *Footprint) bool {
	if len(f.sums) < len(o.sums) {
		f, o = o, f
	}
	if f.at == nil {
		return sharedSum(f.sums, o.sums)
	}
	for _, x := range o.sums {
		if _, ok := f.at[x]; ok {
			return true
		}
	}
	return false
}

// sharedSum reports whether a and b hold a number in common.
func sharedSum(a, b []uint64) bool {
	for _, x := range a {
		if slices.Contains(b, x) {
			return true
		}
	}
	return false
}
