package sqlinfo

import (
	"strings"
	"testing"
)

func TestSetsGlobal(t *testing.T) {
	for sql, want := range map[string]bool{
		"SET GLOBAL general_log = 1":                      true,
		"set global max_connections=500":                  true,
		"SET @@global.sql_mode = ''":                      true,
		"SET @@GLOBAL.sql_mode = ''":                      true,
		"SET PERSIST max_connections = 200":               true,
		"SET PERSIST_ONLY innodb_log_file_size = 1":       true,
		"SET @@persist.max_connections = 200":             true,
		"SET autocommit = 0, GLOBAL general_log = 1":      true,
		"/* admin */ SET GLOBAL slow_query_log = 0":       true,
		"SET GLOBAL a = 1; SET GLOBAL b = 2":              true,
		"SET SESSION sql_mode = ''":                       false,
		"SET @@session.sql_mode = ''":                     false,
		"SET autocommit = 0":                              false,
		"SET @global = 1":                                 false,
		"SET NAMES utf8mb4":                               false,
		"SET sql_mode = 'GLOBAL'":                         false,
		"SET GLOBAL a = 1; UPDATE t SET v = 1":            false, // it writes rows too: run it
		"SELECT @@global.max_connections":                 false,
		"UPDATE t SET global = 1":                         false,
		"SET TRANSACTION ISOLATION LEVEL READ COMMITTED":  false,
		"SET STATEMENT max_statement_time=1 FOR SELECT 1": false,
		"SET @x = (SELECT @@global.max_connections)":      false, // reads a global only
	} {
		if got := SetsGlobal(sql); got != want {
			t.Errorf("SetsGlobal(%q) = %v, want %v", sql, got, want)
		}
	}
}

// SetNext is SET TRANSACTION without a scope, or SET @@tx_isolation
// (@@tx_read_only) without one: for the next transaction only, as asked
// of MariaDB 10.11; with SESSION it is session state (SetAssignments),
// with GLOBAL the server's. OneShot says so of the assignment.
func TestSetNext(t *testing.T) {
	an := NewAnalyzer()
	for sql, want := range map[string]bool{
		"SET TRANSACTION ISOLATION LEVEL SERIALIZABLE":        true,
		"set transaction read only":                           true,
		"SET SESSION TRANSACTION READ ONLY":                   false,
		"SET GLOBAL TRANSACTION READ ONLY":                    false,
		"SET @transaction = 1":                                false,
		"SET tx_isolation = 'READ-COMMITTED'":                 false, // the session's
		"SET @@tx_isolation = 'READ-COMMITTED'":               true,  // without a scope: the next transaction's
		"SET @@tx_read_only = 1, @x = 2":                      true,
		"SET @@session.tx_read_only = 1":                      false,
		"SET @@transaction_isolation = 'SERIALIZABLE'":        true,  // MySQL's name
		"INSERT INTO t VALUES (1); SET TRANSACTION READ ONLY": false, // a text of several runs as one
		"SELECT 1": false,
	} {
		if got := an.Info(sql).SetNext; got != want {
			t.Errorf("%q: SetNext %v; want %v", sql, got, want)
		}
	}
}

func TestOneShotNamesTheNextTransactionsVariables(t *testing.T) {
	for sql, want := range map[string]string{
		"SET @@tx_isolation = 'SERIALIZABLE'":         "next tx_isolation",
		"SET tx_isolation = 'SERIALIZABLE'":           "tx_isolation",
		"SET @@session.tx_isolation = 'SERIALIZABLE'": "tx_isolation",
		"SET @@TX_READ_ONLY = 1":                      "next tx_read_only",
	} {
		as, ok := SetAssignments(sql)
		if !ok || len(as) != 1 || as[0].Name != want || OneShot(as[0].Name) != strings.HasPrefix(want, "next ") {
			t.Errorf("%q: %+v %v; want the name %q", sql, as, ok, want)
		}
	}
}
