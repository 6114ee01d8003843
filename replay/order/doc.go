// Package order keeps a replay in the capture's order between sessions,
// on each target, without deadlocking against the server's row locks. It
// is the specification replay's workers follow; it knows nothing of
// connections, records or servers, and uses only the standard library.
//
// It has two parts. A Gate orders tickets, each a record or a regrouped
// transaction with its captured interval; a Board orders the statements
// of the transactions that run at once on regrouped connections
// (--concurrency). Wait results and outcomes that the gate makes
// uncertain (a ticket released by its hard bound, a transaction run
// again, a ticket overtaken) are reported to the caller, which labels
// the records (store.OutcomeOrderReleased, store.OutcomeOrderRerun) and
// counts their divergences as order-ambiguous.
//
// # The gate
//
// A Gate keeps one target's records in the capture's order between sessions.
// A ticket stands for a record (or, with --concurrency, a transaction) and
// its captured interval [start, end]. Gate.Wait(t) returns once every ticket
// whose end is before t's start is done. Tickets that overlapped in the
// capture never wait for each other, so the server's own locks decide
// between them as they did in the capture.
//
// Reads need not wait for reads. A ticket that only reads waits for the
// earlier tickets that change what others see (writes, COMMITs, locking
// reads: sqlinfo.Info.Changes); a ticket that changes waits for every
// earlier ticket, reads included, so that no read sees a change made after
// it in the capture. The Gate keeps the two sets apart (lanes), so a
// read-only workload never waits at all.
//
// A ticket whose reads and changes are all known (Ticket.Access: the rows
// its statements name by key, the tables of those that name none) waits
// only for the earlier tickets it depends on: one of the two changes a
// row (a table, when either names no rows there) the other reads or
// changes. Two tickets that depend on neither's rows read the same and
// leave the same data in either order, so the order between them is the
// server's to choose, as between tickets that overlapped. A ticket
// without Access depends on every other, as above. Replay gives Access to
// regrouped units (--concurrency) and says when it cannot (see replay's
// Access). The Board passes a unit it does not depend on in the same way.
//
// The Gate can deadlock against the server's row locks: a statement in
// flight, blocked on a lock held by a transaction whose next statement
// waits here for it. Statements that overlapped in the capture can take a
// lock in the other order in replay, so this happens. Wait reports such a
// stall, and the waiter, which holds a transaction, rolls it back, waits
// for the stalled ticket and runs its transaction again (wound-wait, in
// the capture's order): the lock then goes as it went in the capture. A
// waiter that holds no transaction cannot be in the way and waits on.
//
// Conflicting locking statements that overlapped in the capture got their
// locks there in the order they ended (a waiter's statement returns once
// it has its locks). So a record that changes what others see goes to the
// server only after every ticket that changes what others see on one of
// its rows (its tables, when either does not name its rows by key: see
// replay's row keys), overlapped it, and ended before it, has been sent when that
// one locks a single row it names (the server queues lock requests in
// the order they come), and is done when it locks several or rows it does
// not name (it takes them one after another, and would otherwise lose one
// it has not reached yet); a record run again after its transaction
// yielded waits until all of them are done. These waits too go from a
// ticket to tickets that ended before it: the Gate never waits in a
// cycle.
//
// Which in-flight statement s can a waiter's transaction block? Only one
// whose lock one of the transaction's statements p took in replay but not
// in the capture. If p ended, in the capture, before s started, p held
// its locks there first too, and s would have waited for the waiter's
// transaction there and ended after it — after the record that now waits
// for s: impossible. So a waiter may block s only if one of its
// statements that took locks (a write, a locking read) did not end before
// s started and touches one of s's tables (holder.mayBlock; unknown tables
// count as any; a plain read, which takes no row locks, is never blocked
// by them). Such a stall is reported as soon as s has been in flight
// for lockBound (2 times its captured duration, between 1 and 2 ms): a
// statement stuck on a lock never finishes on its own, and a merely slow
// one costs a needless rerun (measured on the invariant workloads: a
// 10 ms bound made the bank's replay 20 % slower than its capture, 1 ms
// tripled the needless reruns of order entry). A rerun is not free of
// order either: a change of a third session that waited on the server
// for one of the rolled-back locks (rightly: it came after the
// transaction in the capture) is granted it at the rollback, ahead of
// the writes that run again. The caller lists such a transaction as it
// lists a ticket overtaken (replay's Reorder, of kind yielded; a retry
// after a deadlock is listed alike, of kind retried), so that what
// differs on its tables from then on is labelled, not taken for the
// engine's. Any other statement the waiter waits
// for, directly or behind its own session's, is stalled only past
// inflightBound (at least --order-inflight, and 20 times its captured
// duration, doubled for each time the waiter has started over): locks the
// capture does not explain (the target's engine locks more, a gap lock),
// or a chain through other sessions. No wait lasts longer than hardBound
// (--order-timeout) past the last progress it saw (its blocker done, or
// sent when it waited for that; counted from when that happened): a wait
// behind tickets that keep getting done is the replay catching up, not a
// stall — at --speed 0 a session
// runs ahead of the others as far as the target lets it, and at a
// thousand sessions such waits took longer than 2 s by the hundreds. A
// record released by it is marked
// (OutcomeOrderReleased), as are the records of a transaction run again
// (OutcomeOrderRerun), and their divergences are counted as
// order-ambiguous.
//
// # Commit order
//
// A capture that holds its commits' GTIDs gives the server's own commit
// order, which the capture's clock does not always show (an answer read
// late makes a commit, or a write outside a transaction, look as if it
// ended after one the server committed later). A ticket that commits
// (Ticket.Commit, its rank in that order; Ticket.Trx, what its
// transaction locked) goes to the server only once every lower-ranked
// commit of its domain whose transaction conflicts with its own (a shared
// row key, or a table one locked without naming rows) is done; commits
// that do not conflict go together, as the clock lets them. A change does
// not wait, in lock order, for a change that commits after it
// (commitsAfter). Under two-phase locking, two schedules whose
// conflicting commits come in the same order are equivalent to the same
// serial one: every write and locking read gets the same rows (see
// commitOrder). The waits go from a rank to a lower one, and a time wait
// from a commit to one that ended before it started, which the server
// committed first: the two kinds never form a cycle. A commit stuck
// behind a waiter's locks makes it yield (Stalled) as above; one released
// by the hard bound marks the commit it overtook, and that one's
// session's current ticket, overtaken. A commit waits until every rank
// below it is registered (a low-water mark); a rank that never comes
// (its record lost) counts as come once maxAhead later ranks have, or at
// CloseCommits. Finding the conflicting commits walks the pending commits
// (those registered and not done: about one per session).
//
// # Cost
//
// What a ticket costs depends on the tickets it overlapped in the
// capture, not on how many sessions the capture has. With P tickets
// pending (registered, not done) in a lane and W waiters:
//
//   - Add (Register) inserts the ticket in its lanes, kept sorted by end,
//     searching from the back: tickets arrive in start order, so it moves
//     past only the pending tickets that started before it and end after
//     it — those in flight around it in the capture. O(k), k at most the
//     sessions with a statement in flight at its start.
//   - Wait's common case is one atomic load (nothing earlier is pending).
//     Otherwise it walks the lane's front up to its threshold: the
//     tickets that ended before it and are not yet popped (done ones
//     leave the front as soon as the oldest pending one is done), plus,
//     for a statement sent in lock order, a binary search (O(log P)) to
//     the conflicting changes that overlapped it. A waiter parks in a
//     heap ordered by threshold: O(log W). A waiter with Access walks
//     past the tickets it does not depend on (each compared by footprint:
//     O(r·s) for r and s keys, on hashes), at most maxPassed (256) of
//     them, to the first it does (or the one past those), and parks
//     until that one is done.
//   - Finish pops the done front (amortized O(1) per ticket, each leaves
//     once) and wakes the waiters it releases (O(log W) each).
//
// The one case that is linear in the backlog: a ticket that stays
// pending long (a slow statement, a stall) holds the front; tickets done
// after it wait to be popped, and each waiter's walk passes them. The
// in-flight and hard bounds above limit how long that lasts. One mutex
// per target serializes the Gate: the walks are short because what can
// overlap in a capture is bounded by the sessions active at once, which a
// server's max_connections bounds too.
//
// BenchmarkGateSessions measures it alone: N sessions' changes at --speed
// 0, each session a goroutine, almost every ticket parking once; make
// bench-scale prints the time per ticket from 16 to 1,024 sessions and its
// growth against log N.
//
// The stall check (BenchmarkGateSessionsTrx: BenchmarkGateSessions with
// every session in a transaction, so that its waits check for stalls)
// walks a waiter's backlog only when something in it can be stuck. A
// statement can be stuck for a waiter h when it has been in flight for
// the least in-flight bound (--order-inflight), or when a lock chain
// leads to it from h — and every chain blocksLocked finds ends at a
// statement in flight that h's own locks may block. The gate files the
// changes sent and not done by the rows they name (by table those that
// name none; changeIndex), so h looks for the second at the changes filed
// under its own rows: O(rows h holds × changes in flight on them). For the first, one
// look at the tickets in flight (at most one per worker; the gate lists
// them as they are sent and done) every half of --order-inflight, for the
// whole gate, lists those in flight for half of it or more; a statement
// in flight for the bound now is among them. When neither exists (no
// conflict: nearly always), the look costs what a waiter's that holds no
// transaction does: the earliest blocker. Otherwise (h holds a lock that
// names no rows or tables, or something may be stuck) it walks as it
// did: a ticket queued behind its worker's current one is passed over
// (that one came earlier in the walk), each statement in flight is looked
// at once, and the search for a lock chain asks the lock index only for
// the open transactions whose locks may block a statement (those on its
// rows, or, naming none, on its tables): O(candidates), not
// O(transactions). Filing costs O(1) a row: lists that grow with the
// sessions (a table's holders, every holder) keep their members' places,
// and a transaction's next set, its last one with the statement that ran
// appended, costs that statement's names: each list a set is filed in
// counts the statements that put it there (O(names of the statement),
// not O(names of the transaction), which made a transaction of n changes
// O(n^3)).
//
// A waiter whose look found neither (calm) looks again only on an event,
// not on a clock: a blocker moves (done, or sent); a change its locks may
// block is sent — Sent asks the lock index for the waiting transactions
// whose locks may block it (O(candidates), and only while a waiter is
// parked) and pokes them, and the waiter marks itself before it looks, so
// that a change sent meanwhile is either seen by the look or pokes it; or
// a statement in flight may reach the least in-flight bound (from the
// scan above: at most half of --order-inflight away). A waiter that found
// something that may become stuck looks again when it may (its lockBound,
// its in-flight bound), at least 2 ms and then 4, 8, … up to 64 ms apart
// while nothing is, so that a thousand waiters do not take the one mutex
// every 2 ms each. Looking on a clock while calm too (2, 4, 8 … ms) made
// half the looks at a thousand sessions, and saw a stall behind a change
// sent later up to 64 ms late. A waiter that holds no
// transaction looks again only every quarter of the hard bound (for
// progress and cycles): looking every --order-inflight made three
// quarters of the gate's wake-ups at a thousand sessions.
package order
