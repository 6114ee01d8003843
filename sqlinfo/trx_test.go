package sqlinfo

import (
	"fmt"
	"strings"
	"testing"
)

// Each case is a session's statements, in order, with the error code the
// server answered (" !1213"), and what the state machine must say of
// each: c commit-before, i in a transaction, o opened it, C ended it with
// a commit, R with a rollback; "-" for none of these.
func TestTrxFollowsTheServer(t *testing.T) {
	for _, tc := range []struct {
		name  string
		stmts []string
		want  string
	}{
		{"autocommit statements run alone", []string{"SELECT 1", "UPDATE t SET a = 1", "INSERT INTO t VALUES (1)"}, "- - -"},
		{"begin commit", []string{"BEGIN", "UPDATE t SET a = 1", "SELECT a FROM t", "COMMIT", "SELECT 1"}, "io i i iC -"},
		{"start transaction read only, rollback", []string{"START TRANSACTION READ ONLY", "SELECT a FROM t", "ROLLBACK"}, "io i iR"},
		{"rollback to savepoint stays open", []string{"BEGIN", "SAVEPOINT s", "UPDATE t SET a = 1", "ROLLBACK TO SAVEPOINT s", "COMMIT"}, "io i i i iC"},
		{"begin commits the open one", []string{"BEGIN", "UPDATE t SET a = 1", "BEGIN", "COMMIT"}, "io i cio iC"},
		{"ddl commits before it and runs alone", []string{"BEGIN", "UPDATE t SET a = 1", "CREATE TABLE u (a INT)", "UPDATE t SET a = 2"}, "io i c -"},
		{"temporary table does not commit", []string{"BEGIN", "CREATE TEMPORARY TABLE u (a INT)", "DROP TEMPORARY TABLE u", "COMMIT"}, "io i i iC"},
		{"autocommit=0 opens on every first statement", []string{"SET autocommit = 0", "SELECT a FROM t", "UPDATE t SET a = 1", "COMMIT", "UPDATE t SET a = 2", "ROLLBACK"},
			"- io i iC io iR"},
		{"a SET opens nothing under autocommit=0", []string{"SET autocommit = 0", "SET @x = 1", "UPDATE t SET a = 1", "COMMIT"}, "- - io iC"},
		{"autocommit=1 commits what autocommit=0 opened", []string{"SET autocommit = 0", "UPDATE t SET a = 1", "SET autocommit = 1", "UPDATE t SET a = 2"}, "- io c -"},
		{"autocommit=1 inside BEGIN commits nothing", []string{"BEGIN", "UPDATE t SET a = 1", "SET autocommit = 1", "COMMIT"}, "io i i iC"},
		{"lock tables commits", []string{"SET autocommit = 0", "UPDATE t SET a = 1", "LOCK TABLES t WRITE", "UPDATE t SET a = 2", "UNLOCK TABLES"}, "- io c io c"},
		{"commit and chain reopens", []string{"BEGIN", "UPDATE t SET a = 1", "COMMIT AND CHAIN", "UPDATE t SET a = 2", "ROLLBACK AND NO CHAIN", "SELECT 1"}, "io i iC i iR -"},
		{"rollback work and chain", []string{"BEGIN", "ROLLBACK WORK AND CHAIN", "COMMIT"}, "io iR iC"},
		{"deadlock rolls the whole transaction back", []string{"BEGIN", "UPDATE t SET a = 1", "UPDATE t SET a = 2 !1213", "UPDATE t SET a = 3", "COMMIT"}, "io i iR - -"},
		{"deadlock under autocommit=0, the next statement opens anew", []string{"SET autocommit = 0", "UPDATE t SET a = 1", "UPDATE t SET a = 2 !1213", "UPDATE t SET a = 3", "COMMIT"},
			"- io iR io iC"},
		{"a lock wait timeout rolls back the statement only", []string{"BEGIN", "UPDATE t SET a = 1", "UPDATE t SET a = 2 !1205", "COMMIT"}, "io i i iC"},
		{"a failed statement keeps the transaction", []string{"BEGIN", "INSERT INTO t VALUES (1) !1062", "COMMIT"}, "io i iC"},
		{"a stray commit ends nothing", []string{"COMMIT", "ROLLBACK"}, "- -"},
		{"xa", []string{"XA START 'x'", "UPDATE t SET a = 1", "XA END 'x'", "XA PREPARE 'x'", "XA COMMIT 'x'", "XA START 'y'", "XA END 'y'", "XA ROLLBACK 'y'"},
			"io i i i iC io i iR"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tr Trx
			var got []string
			for _, s := range tc.stmts {
				var code uint16
				if i := strings.Index(s, " !"); i >= 0 {
					fmt.Sscan(s[i+2:], &code)
					s = s[:i]
				}
				st := tr.Apply(Analyze(s), code)
				var b strings.Builder
				if st.CommitBefore {
					b.WriteByte('c')
				}
				if st.In {
					b.WriteByte('i')
				}
				if st.Opened {
					b.WriteByte('o')
				}
				switch st.End {
				case EndCommit:
					b.WriteByte('C')
				case EndRollback:
					b.WriteByte('R')
				}
				if b.Len() == 0 {
					b.WriteByte('-')
				}
				got = append(got, b.String())
			}
			if g := strings.Join(got, " "); g != tc.want {
				t.Errorf("got  %s\nwant %s", g, tc.want)
			}
		})
	}
}

func TestTrxResetAndAutocommit(t *testing.T) {
	var tr Trx
	tr.Apply(Analyze("SET autocommit = 0"), 0)
	tr.Apply(Analyze("UPDATE t SET a = 1"), 0)
	if !tr.Open() || tr.Autocommit() {
		t.Fatalf("open %v autocommit %v, want open and autocommit off", tr.Open(), tr.Autocommit())
	}
	tr.Reset()
	if tr.Open() || !tr.Autocommit() {
		t.Fatalf("after Reset: open %v autocommit %v", tr.Open(), tr.Autocommit())
	}
}

// Commands a packet capture lost end the open transaction (committed),
// whatever the autocommit; the autocommit stays as it was, and nothing
// open is nothing ended.
func TestTrxLostCommandsEndTheOpenTransaction(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before []string
		want   Step
		open   bool // after the statement that follows the loss
	}{
		{"after BEGIN and a write", []string{"BEGIN", "UPDATE t SET a = 1 WHERE id = 1"}, Step{CommitBefore: true}, false},
		{"nothing open", []string{"UPDATE t SET a = 1 WHERE id = 1"}, Step{}, false},
		{"autocommit off", []string{"SET autocommit = 0", "UPDATE t SET a = 1 WHERE id = 1"}, Step{CommitBefore: true}, true},
		{"ended before", []string{"BEGIN", "UPDATE t SET a = 1 WHERE id = 1", "COMMIT"}, Step{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tr Trx
			for _, q := range tc.before {
				tr.Apply(Analyze(q), 0)
			}
			auto := tr.Autocommit()
			if got := tr.Lost(); got != tc.want {
				t.Errorf("Lost() = %+v, want %+v", got, tc.want)
			}
			if tr.Open() || tr.Autocommit() != auto {
				t.Errorf("after Lost: open %v autocommit %v, want closed and autocommit %v", tr.Open(), tr.Autocommit(), auto)
			}
			// The statement after the gap: with autocommit off it opens
			// a new transaction, as the server's would after the commit.
			st := tr.Apply(Analyze("SELECT c FROM t WHERE id = 2"), 0)
			if tr.Open() != tc.open || st.Opened != tc.open || st.CommitBefore {
				t.Errorf("next statement: %+v, open %v; want opened %v", st, tr.Open(), tc.open)
			}
		})
	}
}
