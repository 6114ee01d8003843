package sqlinfo

import "testing"

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

// SetNext is SET TRANSACTION without a scope: for the next transaction
// only; with SESSION it is session state (SetAssignments), with GLOBAL
// the server's.
func TestSetNext(t *testing.T) {
	an := NewAnalyzer()
	for sql, want := range map[string]bool{
		"SET TRANSACTION ISOLATION LEVEL SERIALIZABLE": true,
		"set transaction read only":                    true,
		"SET SESSION TRANSACTION READ ONLY":            false,
		"SET GLOBAL TRANSACTION READ ONLY":             false,
		"SET @transaction = 1":                         false,
		"SET tx_isolation = 'READ-COMMITTED'":          false,
		"SELECT 1":                                     false,
	} {
		if got := an.Info(sql).SetNext; got != want {
			t.Errorf("%q: SetNext %v; want %v", sql, got, want)
		}
	}
}
