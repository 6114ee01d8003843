package sqlinfo

// Trx follows one session's transaction as the server sees it, one
// statement at a time: the one state machine that every consumer of a
// session's transactions asks (replay's workers, its retries, the
// capture's scan for commit moments, regrouping, samples, shadows), so
// that they never disagree about where a transaction begins and ends.
//
// The rules are the server's (MySQL and MariaDB alike):
//   - BEGIN, START TRANSACTION and XA START open a transaction, committing
//     one already open first.
//   - COMMIT and ROLLBACK (XA COMMIT, XA ROLLBACK) end it; … AND CHAIN opens
//     the next at once. ROLLBACK TO SAVEPOINT does not end it.
//   - With autocommit=0, any statement opens one when none is open; SET
//     autocommit=1 commits the open one (when autocommit was 0).
//   - A statement that commits implicitly (DDL, LOCK TABLES, GRANT …)
//     commits the open transaction before it runs, and runs on its own.
//   - A deadlock (1213; MyRocks answers snapshot conflicts so too) rolls
//     the whole transaction back. A lock wait timeout (1205) rolls back
//     the statement only (innodb_rollback_on_timeout=OFF, the default);
//     so does any other error.
//   - A new login, COM_CHANGE_USER or COM_RESET_CONNECTION rolls back and
//     starts over with autocommit=1 (Reset).
//
// One rule is the capture's, not the server's: commands a packet capture
// lost (Lost) may have ended the open transaction, and nothing later says
// when. Every consumer ends it there, by a commit.
//
// The zero value is a session just logged in with autocommit=1.
type Trx struct {
	manual bool // autocommit=0
	open   bool
}

// End is how a statement left the transaction it ran in.
type End uint8

const (
	EndNone     End = iota // still open, or the statement ran on its own
	EndCommit              // committed by it (COMMIT, AND CHAIN's first part)
	EndRollback            // rolled back by it (ROLLBACK, or an error that rolls back)
)

// Step is what one statement did to its session's transaction.
type Step struct {
	// CommitBefore: a transaction was open and the statement committed it
	// before it ran (BEGIN, DDL, LOCK TABLES, SET autocommit=1 …).
	CommitBefore bool
	// In: the statement ran inside a transaction (BEGIN and COMMIT
	// included): rolling that transaction back undoes it. False: it ran
	// on its own, a transaction of one statement.
	In bool
	// End: how the transaction it ran in ended with it.
	End End
	// Opened: the statement opened the transaction it ran in.
	Opened bool
}

// Open reports whether a transaction is open.
func (t *Trx) Open() bool { return t.open }

// Autocommit reports the session's autocommit.
func (t *Trx) Autocommit() bool { return !t.manual }

// Reset starts over as after a login.
func (t *Trx) Reset() { *t = Trx{} }

// Lost moves the state past commands a packet capture lost (a session's
// missing bytes, store.Record.CommandsLost): the open transaction ends
// there, committed (Step.CommitBefore when one was open). The lost
// commands may have been its COMMIT (or a BEGIN, which commits), and the
// answers after them cannot tell a transaction that went on from a new
// one. Ending it at the earliest point it may have ended is the choice
// that holds no lock longer than the captured session did: a transaction
// held on past a commit that happened would block, on the target, the
// statements the capture ran after that commit, and no order can then be
// kept. A commit, not a rollback: a transaction's writes are usually
// committed. What it costs — the rest of a transaction that went on runs
// on its own — is the replay's to label (what follows is counted apart).
// The session's autocommit is kept: the answers after the gap do not say
// whether the lost commands changed it.
func (t *Trx) Lost() Step {
	s := Step{CommitBefore: t.open}
	t.open = false
	return s
}

// Apply moves the state past one statement that the server answered with
// errCode (0: it succeeded) and says what the statement did.
func (t *Trx) Apply(info *Info, errCode uint16) Step {
	var s Step
	commits := info.ImplicitCommit && !info.Set || info.Begin
	if info.Set && info.SetAutocommit == '1' && t.manual {
		commits = true // autocommit 0 -> 1 commits
	}
	if commits && t.open {
		s.CommitBefore = true
		t.open = false
	}
	failed := errCode != 0
	switch {
	case info.Begin:
		if !failed {
			t.open, s.In, s.Opened = true, true, true
		}
	case info.End:
		if t.open {
			s.In = true
			s.End = EndCommit
			if info.Verb == "ROLLBACK" || info.XARollback {
				s.End = EndRollback
			}
			t.open = false
		}
		if info.Chain && !failed {
			t.open = true
		}
	case info.ImplicitCommit && !info.Set:
		// Runs on its own; nothing is open after it.
	default:
		if !t.open && t.manual && !info.Set { // a SET touches no table: it opens nothing
			t.open, s.Opened = true, true
		}
		s.In = t.open
	}
	if info.Set && info.SetAutocommit != 0 {
		t.manual = info.SetAutocommit == '0'
	}
	if errCode == ErrDeadlock && t.open && s.In {
		s.End = EndRollback
		t.open = false
	}
	return s
}

// Error codes that decide what a failed statement did to its transaction.
const (
	ErrDeadlock        = 1213 // ER_LOCK_DEADLOCK: the whole transaction is rolled back
	ErrLockWaitTimeout = 1205 // ER_LOCK_WAIT_TIMEOUT: the statement only (by default)
)
