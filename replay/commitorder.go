package replay

import (
	"cmp"
	"fmt"
	"slices"
	"sort"

	"github.com/tandemdb/tandem/gtid"
	"github.com/tandemdb/tandem/replay/order"
	"github.com/tandemdb/tandem/sqlinfo"
	"github.com/tandemdb/tandem/store"
)

// Commit orders (Config.CommitOrder).
const (
	// CommitOrderGTID keeps, on each target, the server's own commit
	// order: the GTIDs a capture holds for its commits (the proxy asks
	// the backend for each). A commit goes only once the one before it
	// in that order is done (see order.commitOrder).
	CommitOrderGTID = "gtid"
	// CommitOrderTime orders commits as every other record: after what
	// ended before them in the capture; commits that overlapped are
	// unordered.
	CommitOrderTime = "time"
)

// commitRanks is the server's commit order over a capture's records: each
// record that ended a transaction the server gave a GTID (a COMMIT, a
// write outside a transaction, an applied bypassed transaction's COMMIT),
// ranked by its GTID within its replication domain.
type commitRanks struct {
	seqs  []uint64 // record seqs, ascending
	rank  []int64  // rank of seqs[i] (1, 2, …)
	floor []int64  // the first rank of seqs[i]'s replication domain
	n     int64    // ranks in one pass
	// complete: every captured transaction that wrote has its GTID here
	// (the capture's binary-log check found none it could not ask for),
	// so the order is the server's whole commit order over what the
	// capture holds, and a locking statement's answer is certain.
	complete bool
	// why complete is false, for the report.
	incomplete string
}

type gtidAt struct {
	g   gtid.GTID
	seq uint64
}

// collectCommit notes rec's GTID, when it has one (gtids: the capture's).
func collectCommit(found []gtidAt, gtids map[uint64]string, rec *store.Record, bad *int) []gtidAt {
	s, ok := gtids[rec.Seq]
	if !ok && rec.Session >= store.BypassedSessionBase {
		s, _, ok = store.ParseBypassedCommit(rec.SQL)
	}
	if !ok {
		return found
	}
	g, err := gtid.ParseGTID(s)
	if err != nil {
		*bad++ // not a MariaDB GTID (MySQL's uuid:n): not ordered
		return found
	}
	return append(found, gtidAt{g, rec.Seq})
}

// newCommitRanks ranks the commits found (nil when there are none).
func newCommitRanks(found []gtidAt) *commitRanks {
	if len(found) == 0 {
		return nil
	}
	slices.SortFunc(found, func(a, b gtidAt) int {
		return cmp.Or(cmp.Compare(a.g.Domain, b.g.Domain), cmp.Compare(a.g.Seq, b.g.Seq), cmp.Compare(a.seq, b.seq))
	})
	type ranked struct {
		seq         uint64
		rank, floor int64
	}
	rs := make([]ranked, len(found))
	for i, f := range found {
		rs[i] = ranked{seq: f.seq, rank: int64(i + 1), floor: int64(i + 1)}
		if i > 0 && found[i-1].g.Domain == f.g.Domain {
			rs[i].floor = rs[i-1].floor
		}
	}
	slices.SortFunc(rs, func(a, b ranked) int { return cmp.Compare(a.seq, b.seq) })
	c := &commitRanks{n: int64(len(rs)), seqs: make([]uint64, len(rs)), rank: make([]int64, len(rs)), floor: make([]int64, len(rs))}
	for i, r := range rs {
		c.seqs[i], c.rank[i], c.floor[i] = r.seq, r.rank, r.floor
	}
	return c
}

// of returns the rank of record seq in pass loop, and the first rank of
// its domain in that pass (0, 0: it commits nothing ranked). Passes
// follow each other: a pass's commits never wait for the one before's
// (its records ended before the next pass starts).
func (c *commitRanks) of(seq uint64, loop int) (rank, floor int64) {
	if c == nil {
		return 0, 0
	}
	i := sort.Search(len(c.seqs), func(i int) bool { return c.seqs[i] >= seq })
	if i == len(c.seqs) || c.seqs[i] != seq {
		return 0, 0
	}
	base := int64(loop) * c.n
	return base + c.rank[i], base + c.floor[i]
}

// has reports whether record seq commits with a rank.
func (c *commitRanks) has(seq uint64) bool {
	r, _ := c.of(seq, 0)
	return r != 0
}

// completeness decides whether the capture's GTIDs are all its commits'.
func (c *commitRanks) completeness(r *store.Reader, unparsed int) {
	sum, closed := r.Summary()
	switch {
	case unparsed > 0:
		c.incomplete = fmt.Sprintf("%d of its GTIDs are not MariaDB's (domain-server-seq)", unparsed)
	case !closed || sum.End == nil:
		c.incomplete = "the capture has no end point, so the binary log was not checked for commits it lacks"
	case sum.Bypassed == nil:
		c.incomplete = "the capture was taken without the binary-log check (--binlog-user), so commits it lacks are unknown"
	case sum.Bypassed.Error != "":
		c.incomplete = "the binary log was not read to the capture's end point"
	case sum.Bypassed.Unasked > 0:
		c.incomplete = fmt.Sprintf("%d captured transactions that wrote have no GTID (see inspect)", sum.Bypassed.Unasked)
	default:
		c.complete = true
	}
}

// commitOrdered reports whether this replay keeps the server's commit
// order on every target: a whole capture with GTIDs, --order capture,
// --commit-order gtid, each session on its own connection.
func (c *Config) commitOrdered(x *captureIndex) bool {
	return x.ranks != nil && c.CommitOrder == CommitOrderGTID && c.Order == OrderCapture && c.Concurrency == 0
}

// lockedInOrder reports whether a statement's answer is decided by the
// commit order the replay kept: it locks exactly the rows it names (a
// write or a locking read of one table, naming its rows by primary key,
// reading no other table), and its transaction committed with a GTID.
// Two schedules with the same commit order give such a statement the same
// rows under two-phase locking, on any engine that locks the rows it
// writes; a statement that reads other tables, scans a range or names
// rows by another key is left to the capture's timing (an engine without
// gap locks, MyRocks, may then see rows another did not). One exception
// the comparison keeps apart (compare.Commits.OverlappingDelete): InnoDB
// skips a row deleted by a transaction it waited for, even when that
// transaction inserted it again, so there the answer depends on whether
// the statement waited.
func lockedInOrder(info *sqlinfo.Info, keys []string) bool {
	if info == nil || keys == nil || info.Point == nil || info.WritesUnknown || info.Unanalysable {
		return false
	}
	if !(info.Class == sqlinfo.ClassWrite || info.LockingRead) {
		return false
	}
	for _, t := range info.Reads {
		if t != info.Point.Table {
			return false
		}
	}
	return true
}

// commitOrderNote says how commits were ordered, when the capture holds
// their GTIDs.
func commitOrderNote(cfg *Config, x *captureIndex) string {
	c := x.ranks
	switch {
	case c == nil || cfg.Order != OrderCapture:
		return ""
	case cfg.CommitOrder == CommitOrderTime:
		return fmt.Sprintf("commits were ordered by the capture's clock (--commit-order time), not by the %d GTIDs the capture holds: a difference on a statement that overlapped another session's commit is order-ambiguous", c.n)
	case cfg.Concurrency > 0:
		return fmt.Sprintf("transactions were regrouped (--concurrency): commits were ordered by the capture's clock, not by the %d GTIDs the capture holds (that order is kept with each session on its own connection)", c.n)
	case !c.complete:
		return fmt.Sprintf("commits kept the server's order (the %d GTIDs the capture holds), but %s: a difference on a statement that overlapped another session's commit stays order-ambiguous", c.n, c.incomplete)
	}
	return fmt.Sprintf("commits kept the server's order (the capture's %d GTIDs; the binary log lists no captured commit without one): a write or locking read that names its rows by primary key got the answer that order decides, so its differences are verdicts even where it overlapped another session's commit, unless that transaction deleted rows of its table (InnoDB skips a row deleted by a transaction it waited for, so the answer depends on whether it waited); plain reads, range writes and statements reading other tables that overlapped a commit stay order-ambiguous", c.n)
}

// footprint follows what the session's open transaction locked (with
// --commit-order gtid) and returns rec's place in the commit order when
// rec commits with a GTID (nil otherwise): its rank, and the footprint of
// the transaction it ends (its own, outside one). keys are rec's row keys
// (rowKeys; nil: it names none).
func (sr *sessionRunner) footprint(key uint64, rec *store.Record, infos []*sqlinfo.Info, keys []string, ranks *commitRanks, loop int) *commitPlace {
	f := sr.foot[key]
	switch rec.Kind {
	case store.KindConnect, store.KindQuit, store.KindResetConnection, store.KindChangeUser:
		delete(sr.foot, key) // the server rolls back what was open
		return nil
	}
	for _, info := range infos {
		if info != nil && (onlyEnds(info) || !info.Changes()) {
			continue
		}
		if info != nil && info.ImplicitCommit && !info.Begin {
			f = nil // DDL: what was open committed before it
		}
		if f == nil {
			f = &order.Footprint{}
		}
		if info == nil {
			f.Any = true // an execute of a statement prepared before the capture
			continue
		}
		tables, anyT := ticketTables(nil, info)
		k := keys
		if len(infos) != 1 {
			k = nil
		}
		f.Add(tables, k, anyT || info.Unanalysable)
	}
	sr.foot[key] = f
	rank, floor := ranks.of(rec.Seq, loop)
	ends := false
	for _, info := range infos {
		ends = ends || info != nil && (onlyEnds(info) || info.ImplicitCommit)
	}
	if rank == 0 {
		if ends {
			delete(sr.foot, key) // ended without a GTID (nothing written, a rollback)
		}
		return nil
	}
	delete(sr.foot, key) // a GTID ends the transaction
	return &commitPlace{rank: rank, floor: floor, trx: f}
}
