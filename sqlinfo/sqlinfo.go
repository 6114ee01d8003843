// Package sqlinfo is Tandem's one analysis of statement texts, used by the
// proxy, capture and replay alike: a statement's digest (its shape, with
// literals as ?), its class (read, write, other, as sysbench counts), the
// tables it reads and writes, transaction boundaries, whether its result
// can be deterministic and whether ORDER BY fixes its row order, session
// state it sets up (USE, SET, temporary tables, locks), secrets it may
// carry (masking), and the engine of table DDL (rewriting).
//
// Everything starts from a lexer of MySQL/MariaDB text (lex.go) that
// knows strings, quoted names, comments and executable comments, so no
// question is answered by a regular expression over raw text. Where the
// TiDB parser understands a statement, its syntax tree refines the answer
// (tables, nondeterministic functions, ORDER BY); where it does not —
// MariaDB's own syntax, or a statement it panics on — the lexer's answer
// stands and Info.Unanalysable says so. Nothing here panics.
package sqlinfo

import (
	"fmt"
	"strings"
	"sync"

	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
	_ "github.com/pingcap/tidb/pkg/parser/test_driver" // literal values for the parser (point.go reads them)
)

// Class is how sysbench counts a statement.
type Class uint8

const (
	ClassOther Class = iota
	ClassRead
	ClassWrite
)

// Classes lists the classes in report order.
var Classes = []Class{ClassRead, ClassWrite, ClassOther}

func (c Class) String() string {
	switch c {
	case ClassRead:
		return "read"
	case ClassWrite:
		return "write"
	}
	return "other"
}

// Table names a table; Schema is "" when the statement leaves it to the
// session's current schema.
type Table struct {
	Schema, Name string
}

// In returns t with an empty schema replaced by current.
func (t Table) In(current string) Table {
	if t.Schema == "" {
		t.Schema = current
	}
	return t
}

func (t Table) String() string {
	if t.Schema == "" {
		return t.Name
	}
	return t.Schema + "." + t.Name
}

// Info is what Tandem needs to know of a statement's shape. It is the same
// for every text with the same digest, so it may be cached by digest; facts
// that depend on literal values (USE's schema name is not one; SET's values
// and secrets are) have functions of their own.
type Info struct {
	Digest Digest
	Class  Class
	// Verb is the statement's first keyword, upper-cased (SELECT, INSERT,
	// BEGIN, CREATE …), "" when it has none.
	Verb string
	// Kill: one of its statements is a KILL (ParseKill says which).
	Kill bool
	// Statements is the number of statements in the text (more than one
	// for a multi-statement query).
	Statements int
	// Nondeterministic: NOW(), RAND(), UUID(), CONNECTION_ID(), a variable,
	// LIMIT without ORDER BY and the like; its content is not compared.
	Nondeterministic bool
	// Ordered: ORDER BY fixes the row order, so order differences count.
	Ordered bool
	// OrderColumns are the columns a top-level SELECT's ORDER BY names,
	// lower-cased, when it names only columns (nil otherwise: an
	// expression, a position, a UNION); Limit: it has a top-level LIMIT.
	// Rows tied on the ORDER BY come in the server's order, and LIMIT
	// picks among tied rows as it likes, unless the columns hold a unique
	// key (compare.Statement.TiedOrder).
	OrderColumns []string
	Limit        bool
	// TableDDL: CREATE TABLE or ALTER TABLE, rewritten per target engine.
	TableDDL bool
	// Created lists the tables a CREATE TABLE makes.
	Created []Table
	// LockingRead: SELECT … FOR UPDATE, FOR SHARE, LOCK IN SHARE MODE: a
	// read that takes row locks.
	LockingRead bool
	// Begin: BEGIN / START TRANSACTION. End: COMMIT or ROLLBACK (not
	// ROLLBACK TO SAVEPOINT). ImplicitCommit: the statement commits an open
	// transaction (DDL, LOCK TABLES, BEGIN itself …).
	Begin, End, ImplicitCommit bool
	// Chain: COMMIT/ROLLBACK … AND CHAIN (a new transaction opens at once).
	// XARollback: XA ROLLBACK (End set; XA START is a Begin, XA COMMIT an
	// End). XAPrepare: XA PREPARE (the server keeps the transaction,
	// prepared, when its client goes away); XARecover: XA RECOVER.
	Chain, XARollback, XAPrepare, XARecover bool
	// Use: USE db (UseSchema gives the schema). Set: a SET of session or
	// user variables only (SetAssignments gives them); SetAutocommit
	// holds autocommit's new value when the SET names it: '0', '1' or 0.
	Use, Set      bool
	SetAutocommit byte
	// SetNext: SET TRANSACTION without SESSION or GLOBAL (or SET
	// @@tx_isolation, @@tx_read_only without a scope), which gives the
	// session's next transaction (the next statement, with autocommit)
	// its isolation level or access mode, and no later one.
	SetNext bool
	// LoadLocal: LOAD DATA LOCAL / LOAD XML LOCAL, whose file was on the
	// client's machine.
	LoadLocal bool
	// Reads and Writes are the tables the statement reads and writes, as
	// written in it. WritesUnknown: it may write tables it does not name
	// (CALL, a statement the analysis could not read).
	Reads, Writes []Table
	WritesUnknown bool
	// Session state that cannot move to another connection: CREATE or
	// DROP TEMPORARY TABLE, LOCK TABLES, GET_LOCK(), a user variable
	// assigned outside SET (SELECT @x := …, … INTO @x), SQL-level PREPARE.
	TempTable, LockTables, NamedLock, UserVarAssign, SQLPrepare bool
	// SequenceWrite: NEXTVAL(), SETVAL() or NEXT VALUE FOR advances a
	// sequence (MariaDB): a write, which a read-only server refuses.
	SequenceWrite bool
	// ChosenValues: it writes tables (Writes) with values each server
	// chooses anew, which replay cannot give the targets as the captured
	// server had them: UUID(), UUID_SHORT(), SYS_GUID(), RAND() without
	// a seed, SYSDATE() (which ignores SET timestamp), CONNECTION_ID(),
	// the user functions (replay's user). What the tables hold from then
	// on differs between the targets and from the capture although no
	// engine differs. (NOW() and its kind follow the SET timestamp replay
	// sends with each write.)
	ChosenValues bool
	// Clock: the text reads the session's clock, which SET timestamp
	// sets: NOW() and its kind (CURRENT_TIMESTAMP, CURDATE(),
	// UNIX_TIMESTAMP() …, with or without parentheses where the server
	// allows none), @@timestamp, FOR SYSTEM_TIME (and see TimeValue).
	// What the text does not name — a column's DEFAULT or ON UPDATE
	// CURRENT_TIMESTAMP, a trigger, a view, a stored function — is the
	// schema's (replay's runner.takesClock and runner.readsClock).
	Clock bool
	// TimeValue: the text makes a TIME value (MAKETIME(), TIME '09:00',
	// CAST(… AS TIME): timeFuncs), which a DATETIME or DATE column, or a
	// comparison with one, takes with the session's current date (SET
	// timestamp sets it): the clock is read where such a value meets a
	// date, which the text alone does not tell.
	TimeValue bool
	// Calls are the functions the text calls by name (CalledFunctions),
	// builtins and stored functions alike; nil when none or the text
	// cannot be lexed.
	Calls []Table
	// Unanalysable: the TiDB parser could not read the statement (MariaDB
	// syntax, or it failed); the lexer's answers stand.
	Unanalysable bool
	// LexError is set when even the lexer could not read the text.
	LexError string
	// Point says which rows the statement touches when it names them by
	// equality (nil when it does not, or is several statements).
	Point *Point
	// literal: a field above depends on the text's literal values
	// (SetAutocommit, a Point value written as a literal), so another
	// text of the same digest needs an Info of its own (Analyzer.Info).
	literal bool
}

// literalDependent reports whether i holds a literal value of its text.
func (i *Info) literalDependent() bool {
	if i.SetAutocommit != 0 {
		return true
	}
	if p := i.Point; p != nil {
		for _, vs := range p.Where {
			for _, v := range vs {
				if v.Param == -1 {
					return true
				}
			}
		}
		for _, row := range p.Rows {
			for _, v := range row {
				if v.Param == -1 {
					return true
				}
			}
		}
	}
	return false
}

// Changes reports whether the statement can change what other sessions
// see or wait for: a write, DDL, a locking read, a CALL, the end of a
// transaction, or anything the analysis could not read. Replay keeps reads
// after the changes that preceded them, and changes after everything.
func (i *Info) Changes() bool {
	return i.Class == ClassWrite || i.WritesUnknown || i.LockingRead || i.End || i.ImplicitCommit && !i.Begin || len(i.Writes) > 0 ||
		i.Unanalysable && i.Class != ClassRead || i.LockTables || i.NamedLock || i.Kill
}

// PinsSession reports whether the statement creates session state that
// only its own connection has.
func (i *Info) PinsSession() bool {
	return i.TempTable || i.LockTables || i.NamedLock || i.UserVarAssign || i.SQLPrepare
}

// Analyze analyzes sql. It never panics.
func Analyze(sql string) *Info {
	info := &Info{Digest: DigestOf(sql)}
	toks, err := Lex(sql)
	if err != nil {
		info.LexError = err.Error()
	}
	stmts := Statements(sql, toks)
	info.Statements = len(stmts)
	compound := false
	for k, st := range stmts {
		lexFacts(sql, st, info, k == 0, compound)
		if k == 0 {
			w := words(sql, st, 3)
			compound = len(w) == 3 && w[0] == "BEGIN" && w[1] == "NOT" && w[2] == "ATOMIC"
		}
	}
	if err == nil && strings.IndexByte(sql, '(') >= 0 {
		info.Calls = calledIn(sql, toks)
	}
	if err != nil || !parse(sql, info) {
		info.Unanalysable = true
		for _, st := range stmts {
			lexTables(sql, st, info)
		}
	}
	if info.Class == ClassWrite && len(info.Writes) == 0 || info.Verb == "CALL" || info.Verb == "EXECUTE" {
		info.WritesUnknown = true
	}
	if len(info.Writes) == 0 {
		info.ChosenValues = false // a read's own answer only: Nondeterministic says it
	}
	if info.Statements != 1 {
		info.SetNext = false // a text of several: it runs as one, not ahead of the next
	}
	return info
}

// orderColumns are the columns of its table a SELECT's ORDER BY names
// (a select-list alias of a column resolved to it), nil when it names
// anything else, or when which rows can tie is not read this simply: a
// join, GROUP BY, DISTINCT.
func orderColumns(x *ast.SelectStmt) []string {
	if x.OrderBy == nil || x.GroupBy != nil || x.Distinct || x.From == nil || x.From.TableRefs == nil || x.From.TableRefs.Right != nil {
		return nil
	}
	alias := map[string]string{} // select-list alias: its column, "" for an expression
	if x.Fields != nil {
		for _, f := range x.Fields.Fields {
			if f.AsName.L == "" {
				continue
			}
			if c, ok := f.Expr.(*ast.ColumnNameExpr); ok {
				alias[f.AsName.L] = c.Name.Name.L
			} else {
				alias[f.AsName.L] = ""
			}
		}
	}
	var cols []string
	for _, it := range x.OrderBy.Items {
		c, ok := it.Expr.(*ast.ColumnNameExpr)
		if !ok {
			return nil
		}
		name := c.Name.Name.L
		if a, isAlias := alias[name]; isAlias && c.Name.Table.L == "" {
			if a == "" {
				return nil // an alias of an expression
			}
			name = a
		}
		cols = append(cols, name)
	}
	return cols
}

// tableAt reports whether st[i] stands where a table's name does (after
// INTO, UPDATE, TABLE, FROM, JOIN or a schema's dot): INSERT INTO user
// (id) names a table, not the function USER().
func tableAt(sql string, st []Token, i int) bool {
	if i == 0 {
		return false
	}
	p := st[i-1]
	return p.IsPunct(sql, ".") || p.Is(sql, "INTO") || p.Is(sql, "UPDATE") || p.Is(sql, "TABLE") || p.Is(sql, "FROM") || p.Is(sql, "JOIN")
}

// chosenFuncs are the functions whose value the server chooses on each
// run, beyond what replay sets (Info.ChosenValues); RAND only without a
// seed.
var chosenFuncs = map[string]bool{
	"uuid": true, "uuid_short": true, "sys_guid": true, "rand": true, "sysdate": true, "connection_id": true,
	"user": true, "current_user": true, "session_user": true, "system_user": true, "current_role": true,
}

var nondeterministicFuncs = map[string]bool{
	"now": true, "sysdate": true, "current_timestamp": true, "curdate": true, "current_date": true,
	"curtime": true, "current_time": true, "localtime": true, "localtimestamp": true, "utc_timestamp": true,
	"utc_date": true, "utc_time": true, "unix_timestamp": true, "rand": true, "uuid": true, "uuid_short": true,
	"sys_guid": true, "connection_id": true, "last_insert_id": true, "found_rows": true, "row_count": true, "sleep": true,
	"benchmark": true, "get_lock": true, "release_lock": true, "is_free_lock": true, "is_used_lock": true,
	"database": true, "schema": true, "user": true, "current_user": true, "session_user": true, "system_user": true,
	"current_role": true, "master_pos_wait": true, "nextval": true, "lastval": true,
}

// clockFuncs are the functions that read the session's clock (which SET
// timestamp sets; SYSDATE() does not, but a server started with
// --sysdate-is-now makes it NOW()); clockWords, the words that read it
// without parentheses.
var clockFuncs = map[string]bool{
	"now": true, "sysdate": true, "current_timestamp": true, "curdate": true, "current_date": true,
	"curtime": true, "current_time": true, "localtime": true, "localtimestamp": true, "utc_timestamp": true,
	"utc_date": true, "utc_time": true, "unix_timestamp": true,
}

// timeFuncs give a TIME value (STR_TO_DATE does when its format has no
// date; TIMESTAMP() and ADDTIME() convert one): a TIME stored into a
// DATETIME or DATE column, or compared with one, takes the current date,
// which SET timestamp sets (MariaDB 10.3 and later, MySQL 8). The
// statement reads the clock, though its answer alone does not show it
// (not nondeterministic).
var timeFuncs = map[string]bool{
	"maketime": true, "sec_to_time": true, "timediff": true, "subtime": true, "addtime": true, "time": true,
	"str_to_date": true, "timestamp": true,
}

var clockWords = []string{"CURRENT_TIMESTAMP", "CURRENT_DATE", "CURRENT_TIME", "LOCALTIME", "LOCALTIMESTAMP",
	"UTC_TIMESTAMP", "UTC_DATE", "UTC_TIME", "SYSTEM_TIME"}

// castTo reports whether the type name at i is what a CAST(… AS type)
// or a CONVERT(…, type) converts to: the call's parenthesis, found back
// past nested ones, follows CAST or CONVERT.
func castTo(sql string, st []Token, i int) bool {
	if i == 0 || !st[i-1].Is(sql, "AS") && !st[i-1].IsPunct(sql, ",") {
		return false
	}
	depth := 0
	for j := i - 1; j > 0; j-- {
		switch {
		case st[j].IsPunct(sql, ")"):
			depth++
		case st[j].IsPunct(sql, "("):
			if depth == 0 {
				return st[j-1].Is(sql, "CAST") || st[j-1].Is(sql, "CONVERT")
			}
			depth--
		}
	}
	return false
}

func isClockWord(w string) bool {
	if len(w) < 8 || len(w) > 17 {
		return false
	}
	for _, c := range clockWords {
		if strings.EqualFold(w, c) {
			return true
		}
	}
	return false
}

// lexFacts fills what the tokens of one statement tell.
//
// In a compound statement (BEGIN NOT ATOMIC …, the first's), a BEGIN
// opens a block, not a transaction.
func lexFacts(sql string, st []Token, info *Info, first, compound bool) {
	w := words(sql, st, 6)
	verb := ""
	if len(w) > 0 {
		verb = w[0]
	} else if len(st) > 0 && st[0].IsPunct(sql, "(") {
		verb = "("
	}
	if first {
		info.Verb = verb
		switch verb {
		case "SELECT", "WITH", "(", "VALUES", "TABLE":
			info.Class = ClassRead
		case "INSERT", "UPDATE", "DELETE", "REPLACE", "LOAD":
			info.Class = ClassWrite
		}
	}
	at := func(i int, s string) bool { return i < len(w) && w[i] == s }
	switch verb {
	case "KILL":
		info.Kill = true
	case "BEGIN":
		if compound || at(1, "NOT") && at(2, "ATOMIC") {
			// MariaDB's compound statement (BEGIN NOT ATOMIC … END), not
			// a transaction's start: it runs its statements as a
			// procedure's body does, each in autocommit's way; what it
			// writes is not known, as of a CALL.
			info.WritesUnknown = true
			break
		}
		info.Begin, info.ImplicitCommit = true, true
	case "START":
		if at(1, "TRANSACTION") {
			info.Begin, info.ImplicitCommit = true, true
		}
	case "COMMIT":
		info.End = true
		info.Chain = chained(w)
	case "ROLLBACK":
		// ROLLBACK [WORK] TO [SAVEPOINT] keeps the transaction open.
		if !at(1, "TO") && !(at(1, "WORK") && at(2, "TO")) {
			info.End = true
			info.Chain = chained(w)
		}
	case "XA":
		switch {
		case at(1, "START") || at(1, "BEGIN"):
			info.Begin, info.ImplicitCommit = true, true
		case at(1, "COMMIT"):
			info.End = true
		case at(1, "ROLLBACK"):
			info.End, info.XARollback = true, true
		case at(1, "PREPARE"):
			info.XAPrepare = true
		case at(1, "RECOVER"):
			info.XARecover = true
		}
	case "CREATE", "ALTER", "DROP", "RENAME", "TRUNCATE":
		info.ImplicitCommit = true
		if verb == "CREATE" || verb == "ALTER" {
			if isTableDDL(sql, st) {
				info.TableDDL = true
			}
		}
		if verb == "CREATE" && containsWord(sql, st, 4, "TEMPORARY") || verb == "DROP" && containsWord(sql, st, 2, "TEMPORARY") {
			info.TempTable = true
			info.ImplicitCommit = false // CREATE and DROP TEMPORARY TABLE do not commit
		}
	case "LOCK":
		info.LockTables, info.ImplicitCommit = true, true
	case "UNLOCK":
		info.ImplicitCommit = true
	case "USE":
		info.Use = true
	case "SET":
		if at(1, "TRANSACTION") {
			info.SetNext = true
		}
		if as, ok := setAssignments(sql, st); ok {
			info.Set = true
			for _, a := range as {
				if strings.HasPrefix(a.Name, nextPrefix) {
					info.SetNext = true
				}
				if a.Name == "autocommit" {
					info.SetAutocommit = autocommitValue(a.Value)
					if info.SetAutocommit == '1' {
						info.ImplicitCommit = true
					}
				}
			}
		}
	case "LOAD":
		if at(1, "DATA") || at(1, "XML") {
			for _, x := range w[2:] {
				if x == "LOCAL" {
					info.LoadLocal = true
				}
			}
		}
	case "PREPARE", "EXECUTE", "DEALLOCATE":
		info.SQLPrepare = verb != "EXECUTE" || !at(1, "IMMEDIATE")
	case "GRANT", "REVOKE":
		info.ImplicitCommit = true
	case "SHOW":
		// Server counters and state (SHOW [GLOBAL|SESSION] STATUS, SHOW
		// PROCESSLIST, SHOW ENGINE … STATUS, SHOW MASTER STATUS): their
		// values belong to the server and the connection (its TLS, its
		// uptime), not to the data; compared for errors only.
		for _, x := range w[1:] {
			if x == "STATUS" || x == "PROCESSLIST" || x == "MUTEX" {
				info.Nondeterministic = true
			}
		}
	}
	for i, t := range st {
		switch {
		case t.Kind == TokIdent && i+1 < len(st) && st[i+1].IsPunct(sql, "(") && !tableAt(sql, st, i):
			name := strings.ToLower(t.Text(sql))
			switch name {
			case "get_lock":
				info.NamedLock = true
			case "nextval", "setval":
				info.SequenceWrite = true
			}
			if nondeterministicFuncs[name] {
				info.Nondeterministic = true
			}
			if clockFuncs[name] {
				info.Clock = true
			}
			if timeFuncs[name] {
				info.TimeValue = true
			}
			if chosenFuncs[name] && (name != "rand" || i+2 < len(st) && st[i+2].IsPunct(sql, ")")) {
				info.ChosenValues = true
			}
		case i+2 < len(st) && t.Is(sql, "NEXT") && st[i+1].Is(sql, "VALUE") && st[i+2].Is(sql, "FOR"):
			info.SequenceWrite = true
		case t.Is(sql, "CURRENT_USER") || t.Is(sql, "CURRENT_ROLE"): // written without parentheses
			info.ChosenValues = true
		case t.Kind == TokIdent && isClockWord(t.Text(sql)):
			info.Clock = true // CURRENT_TIMESTAMP, LOCALTIME … without parentheses; FOR SYSTEM_TIME
			if !t.Is(sql, "SYSTEM_TIME") {
				// As with parentheses (nondeterministicFuncs): an answer
				// that shows the clock, which the parser, when it reads
				// the statement, says too.
				info.Nondeterministic = true
			}
		case t.Is(sql, "TIME") && (i+1 < len(st) && st[i+1].Kind == TokString || castTo(sql, st, i)):
			// A TIME literal (TIME '09:00'), CAST(… AS TIME), CONVERT(…,
			// TIME): a TIME value, as from timeFuncs. (Not a column or
			// an alias named time.)
			info.TimeValue = true
		case t.Kind == TokVariable:
			if v := t.Text(sql); strings.HasPrefix(v, "@@") && len(v) >= 11 && strings.EqualFold(v[len(v)-9:], "timestamp") {
				info.Clock = true // @@timestamp, @@session.timestamp
			}
			if verb != "SET" {
				info.Nondeterministic = true // depends on the session
			}
			if i+1 < len(st) && st[i+1].IsPunct(sql, ":=") || i > 0 && st[i-1].Is(sql, "INTO") {
				info.UserVarAssign = true
			}
		}
	}
	if first && info.Class == ClassRead {
		for i, t := range st {
			if t.Is(sql, "FOR") && i+1 < len(st) && (st[i+1].Is(sql, "UPDATE") || st[i+1].Is(sql, "SHARE")) ||
				t.Is(sql, "LOCK") && i+2 < len(st) && st[i+1].Is(sql, "IN") && st[i+2].Is(sql, "SHARE") {
				info.LockingRead = true
			}
		}
		// ORDER BY at the top level fixes the order; LIMIT without it
		// picks rows the engine chooses.
		order, limit := false, false
		depth := 0
		for i, t := range st {
			switch {
			case t.IsPunct(sql, "("):
				depth++
			case t.IsPunct(sql, ")"):
				depth--
			case depth == 0 && t.Is(sql, "ORDER") && i+1 < len(st) && st[i+1].Is(sql, "BY"):
				order = true
			case depth == 0 && t.Is(sql, "LIMIT"):
				limit = true
			case depth == 0 && t.Is(sql, "UNION"):
				order = false // ORDER BY of a branch orders nothing
			}
		}
		info.Ordered, info.Limit = order, limit
		if limit && !order {
			info.Nondeterministic = true
		}
	}
}

// chained reports … AND CHAIN (not AND NO CHAIN) among a COMMIT's or
// ROLLBACK's first words.
func chained(w []string) bool {
	for i := 1; i+1 < len(w); i++ {
		if w[i] == "AND" {
			return w[i+1] == "CHAIN"
		}
	}
	return false
}

func autocommitValue(v string) byte {
	switch strings.ToUpper(strings.Trim(strings.TrimSpace(v), "'\"")) {
	case "0", "OFF", "FALSE":
		return '0'
	case "1", "ON", "TRUE":
		return '1'
	}
	return 0
}

func containsWord(sql string, st []Token, n int, w string) bool {
	for _, x := range words(sql, st, n) {
		if x == w {
			return true
		}
	}
	return false
}

// isTableDDL reports CREATE [OR REPLACE] [TEMPORARY] TABLE and ALTER
// [ONLINE] [IGNORE] TABLE.
func isTableDDL(sql string, st []Token) bool {
	for _, t := range st[1:min(len(st), 6)] {
		if t.Kind != TokIdent {
			return false
		}
		switch strings.ToUpper(t.Text(sql)) {
		case "TABLE":
			return true
		case "OR", "REPLACE", "TEMPORARY", "ONLINE", "IGNORE":
		default:
			return false
		}
	}
	return false
}

// parsers are TiDB parsers for reuse (a parser is not safe for concurrent use).
var parsers = sync.Pool{New: func() any { return parser.New() }}

// parse refines info with the TiDB parser's syntax tree; false when it
// cannot read sql (or panics on it).
func parse(sql string, info *Info) (ok bool) {
	p := parsers.Get().(*parser.Parser)
	defer func() {
		if r := recover(); r != nil {
			ok = false // a parser bug: the lexer's answers stand; drop this parser
			return
		}
		parsers.Put(p)
	}()
	stmts, _, err := p.ParseSQL(sql)
	if err != nil || len(stmts) == 0 {
		return false
	}
	if len(stmts) == 1 {
		info.Point = pointOf(stmts[0])
	}
	for k, st := range stmts {
		v := &tableVisitor{}
		st.Accept(v)
		if v.nondet {
			info.Nondeterministic = true
		}
		info.Reads = appendTables(info.Reads, v.tables...)
		switch x := st.(type) {
		case *ast.SelectStmt:
			if k == 0 {
				info.Ordered = x.OrderBy != nil
				if x.Limit != nil && x.OrderBy == nil {
					info.Nondeterministic = true
				}
				info.OrderColumns = orderColumns(x)
			}
		case *ast.SetOprStmt:
			if k == 0 {
				info.Ordered = x.OrderBy != nil
			}
		case *ast.InsertStmt:
			info.Writes = appendTables(info.Writes, tablesOf(x.Table)...)
		case *ast.UpdateStmt:
			info.Writes = appendTables(info.Writes, tablesOf(x.TableRefs)...)
		case *ast.DeleteStmt:
			if x.IsMultiTable && x.Tables != nil {
				for _, t := range x.Tables.Tables {
					info.Writes = appendTables(info.Writes, Table{t.Schema.O, t.Name.O})
				}
			} else {
				info.Writes = appendTables(info.Writes, tablesOf(x.TableRefs)...)
			}
		case *ast.LoadDataStmt:
			if x.Table != nil {
				info.Writes = appendTables(info.Writes, Table{x.Table.Schema.O, x.Table.Name.O})
			}
		case *ast.CreateTableStmt:
			t := Table{x.Table.Schema.O, x.Table.Name.O}
			info.Writes = appendTables(info.Writes, t)
			info.Created = appendTables(info.Created, t)
			info.TableDDL = true
		case *ast.AlterTableStmt, *ast.DropTableStmt, *ast.TruncateTableStmt, *ast.RenameTableStmt,
			*ast.CreateIndexStmt, *ast.DropIndexStmt:
			info.Writes = appendTables(info.Writes, v.tables...)
		}
	}
	return true
}

func tablesOf(n ast.Node) []Table {
	if n == nil {
		return nil
	}
	v := &tableVisitor{}
	n.Accept(v)
	return v.tables
}

func appendTables(dst []Table, ts ...Table) []Table {
	for _, t := range ts {
		dup := false
		for _, d := range dst {
			if d == t {
				dup = true
				break
			}
		}
		if !dup && t.Name != "" {
			dst = append(dst, t)
		}
	}
	return dst
}

// tableVisitor collects table names and notes nondeterminism.
type tableVisitor struct {
	tables []Table
	nondet bool
}

func (v *tableVisitor) Enter(n ast.Node) (ast.Node, bool) {
	switch x := n.(type) {
	case *ast.TableName:
		v.tables = appendTables(v.tables, Table{x.Schema.O, x.Name.O})
	case *ast.FuncCallExpr:
		if nondeterministicFuncs[x.FnName.L] {
			v.nondet = true
		}
	case *ast.VariableExpr:
		v.nondet = true // session or user variables depend on the session
	}
	return n, false
}

func (v *tableVisitor) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// lexTables finds table names where the parser could not: the names after
// FROM, JOIN, INTO, UPDATE, TABLE (and the like), as written.
func lexTables(sql string, st []Token, info *Info) {
	write := false
	for i := 0; i < len(st); i++ {
		t := st[i]
		if t.Kind != TokIdent {
			continue
		}
		kw := strings.ToUpper(t.Text(sql))
		switch kw {
		case "FROM", "JOIN", "INTO", "UPDATE", "TABLE", "TABLES":
		default:
			continue
		}
		write = kw == "INTO" && info.Class == ClassWrite || kw == "UPDATE" && i == 0 || info.TableDDL && kw == "TABLE" ||
			info.Verb == "DELETE" && kw == "FROM" || info.Verb == "TRUNCATE" || info.Verb == "DROP"
		j := i + 1
		for j < len(st) && st[j].Kind == TokIdent && isModifier(st[j].Text(sql)) {
			j++
		}
		tbl, next, ok := tableName(sql, st, j)
		if !ok {
			continue
		}
		info.Reads = appendTables(info.Reads, tbl)
		if write {
			info.Writes = appendTables(info.Writes, tbl)
		}
		if info.TableDDL && info.Verb == "CREATE" && kw == "TABLE" {
			info.Created = appendTables(info.Created, tbl)
		}
		i = next - 1
	}
}

func isModifier(w string) bool {
	switch strings.ToUpper(w) {
	case "IF", "NOT", "EXISTS", "LOW_PRIORITY", "DELAYED", "HIGH_PRIORITY", "IGNORE", "QUICK", "ONLY", "STRAIGHT_JOIN":
		return true
	}
	return false
}

// tableName reads [schema.]name at st[i]; next is the index after it.
func tableName(sql string, st []Token, i int) (Table, int, bool) {
	name := func(t Token) (string, bool) {
		switch t.Kind {
		case TokIdent:
			return t.Text(sql), !isKeyword(t.Text(sql))
		case TokQuotedIdent:
			return Unquote(t.Text(sql)), true
		}
		return "", false
	}
	if i >= len(st) {
		return Table{}, i, false
	}
	a, ok := name(st[i])
	if !ok {
		return Table{}, i, false
	}
	if i+2 < len(st) && st[i+1].IsPunct(sql, ".") {
		if b, ok := name(st[i+2]); ok {
			return Table{a, b}, i + 3, true
		}
	}
	return Table{Name: a}, i + 1, true
}

var keywords = map[string]bool{"SELECT": true, "WHERE": true, "SET": true, "VALUES": true, "VALUE": true, "DUAL": true,
	"LATERAL": true, "JSON_TABLE": true, "AS": true, "ON": true, "USING": true, "LIKE": true, "PARTITION": true, "WITH": true}

func isKeyword(w string) bool { return keywords[strings.ToUpper(w)] }

// Digest is a statement shape.
type Digest struct {
	// ID is the digester's hex SHA-256 of the normalized statement (64
	// characters).
	ID string
	// Text is the normalized statement.
	Text string
}

// Short is the first 16 characters of ID, enough to tell digests apart.
func (d Digest) Short() string {
	if len(d.ID) > 16 {
		return d.ID[:16]
	}
	return d.ID
}

// DigestOf returns sql's digest: literals replaced by "?", case and spacing
// normalized (the TiDB parser's digester), so a text query and the
// prepared statement it came from share one digest.
func DigestOf(sql string) (d Digest) {
	defer func() {
		if r := recover(); r != nil {
			// The digester's lexer failed: the text itself names the shape.
			d = Digest{ID: fmt.Sprintf("unlexable-%x", len(sql)), Text: sql[:min(len(sql), 200)]}
		}
	}()
	norm, dg := parser.NormalizeDigest(sql)
	if strings.Contains(norm, " count ( ? )") && countsStars(sql) {
		// The digester writes COUNT(*) as count ( ? ) (one digest with
		// COUNT(1)); the text shows what the statement says.
		norm = strings.ReplaceAll(norm, " count ( ? )", " count ( * )")
	}
	return Digest{ID: dg.String(), Text: norm}
}

// countsStars reports whether sql calls COUNT and every call is COUNT(*)
// (blanks allowed, any case); a literal naming count is a false alarm that
// only changes the digest's text, never its ID.
func countsStars(sql string) bool {
	n := 0
	for i := 0; i+5 <= len(sql); i++ {
		if !strings.EqualFold(sql[i:i+5], "count") || i > 0 && isWordByte(sql[i-1]) {
			continue
		}
		j := skipBlanks(sql, i+5)
		if j >= len(sql) || sql[j] != '(' {
			continue
		}
		j = skipBlanks(sql, j+1)
		if j >= len(sql) || sql[j] != '*' {
			return false
		}
		if j = skipBlanks(sql, j+1); j >= len(sql) || sql[j] != ')' {
			return false
		}
		n++
	}
	return n > 0
}

func skipBlanks(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

func isWordByte(c byte) bool {
	return c == '_' || c == '$' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// Analyzer caches Info by text and by digest, so that a statement seen
// again (every execute of a prepared statement) costs a map lookup; safe
// for concurrent use. The caches are bounded.
type Analyzer struct {
	mu       sync.RWMutex
	byText   map[string]*Info
	byDigest map[string]*Info
}

// Bounds of the analyzer's caches: a capture of text queries with literals
// has as many texts as statements.
const (
	maxCachedTexts   = 50000
	maxCachedText    = 4096
	maxCachedDigests = 100000
)

// NewAnalyzer returns an empty analyzer.
func NewAnalyzer() *Analyzer {
	return &Analyzer{byText: map[string]*Info{}, byDigest: map[string]*Info{}}
}

// Info returns sql's Info (shared: do not modify it).
func (a *Analyzer) Info(sql string) *Info {
	a.mu.RLock()
	info := a.byText[sql]
	a.mu.RUnlock()
	if info != nil {
		return info
	}
	d := DigestOf(sql)
	a.mu.RLock()
	info = a.byDigest[d.ID]
	a.mu.RUnlock()
	if info == nil || info.literal {
		// A digest's Info serves its other texts unless it holds one
		// text's literals: "SET autocommit=1" took "=0"'s value, and
		// "… WHERE id = 7" the row key 5 of the first text seen, so the
		// order gate missed real lock conflicts (and saw false ones).
		// Such texts are parsed each (identical ones still hit byText).
		info = Analyze(sql)
		info.literal = info.literalDependent()
	}
	a.mu.Lock()
	if len(a.byDigest) >= maxCachedDigests {
		clear(a.byDigest) // a pathological capture; start over
	}
	a.byDigest[d.ID] = info
	if len(sql) <= maxCachedText {
		if len(a.byText) >= maxCachedTexts {
			clear(a.byText)
		}
		a.byText[sql] = info
	}
	a.mu.Unlock()
	return info
}
