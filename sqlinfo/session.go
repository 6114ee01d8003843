package sqlinfo

import (
	"slices"
	"strings"
)

// UseSchema returns the schema a "USE db" statement selects.
func UseSchema(sql string) (string, bool) {
	s := skipBlanksAndComments(sql)
	if len(s) < 4 || !strings.EqualFold(s[:3], "use") || isWord(s[3]) {
		return "", false // the cheap test first: the proxy asks of every query
	}
	toks, err := Lex(sql)
	if err != nil {
		return "", false
	}
	if len(toks) > 0 && toks[len(toks)-1].IsPunct(sql, ";") {
		toks = toks[:len(toks)-1]
	}
	if len(toks) != 2 || !toks[0].Is(sql, "USE") {
		return "", false
	}
	switch toks[1].Kind {
	case TokIdent:
		return toks[1].Text(sql), true
	case TokQuotedIdent:
		db := Unquote(toks[1].Text(sql))
		return db, db != ""
	}
	return "", false
}

// IsLoadDataLocal reports LOAD DATA LOCAL / LOAD XML LOCAL, whose file was
// on the client's machine and cannot be read again.
func IsLoadDataLocal(sql string) bool {
	s := skipBlanksAndComments(sql)
	if len(s) < 5 || !strings.EqualFold(s[:4], "load") {
		return false
	}
	toks, _ := Lex(sql[:min(len(sql), 512)])
	w := words(sql, toks, 6)
	if len(w) < 3 || w[0] != "LOAD" || w[1] != "DATA" && w[1] != "XML" {
		return false
	}
	for _, x := range w[2:] {
		if x == "LOCAL" {
			return true
		}
	}
	return false
}

// skipBlanksAndComments drops leading blanks and plain comments (not
// executable ones, whose inside is code).
func skipBlanksAndComments(s string) string {
	for {
		s = strings.TrimLeft(s, " \t\r\n\f\v")
		switch {
		case strings.HasPrefix(s, "/*") && !strings.HasPrefix(s, "/*!") && !strings.HasPrefix(s, "/*M!"):
			end := strings.Index(s[2:], "*/")
			if end < 0 {
				return ""
			}
			s = s[2+end+2:]
		case strings.HasPrefix(s, "#"), strings.HasPrefix(s, "--") && (len(s) == 2 || isSpace(s[2])):
			end := strings.IndexByte(s, '\n')
			if end < 0 {
				return ""
			}
			s = s[end+1:]
		default:
			return s
		}
	}
}

// Assignment is one variable a SET statement assigns.
type Assignment struct {
	// Name identifies the variable: "@name" for a user variable, the
	// lower-cased name for a session variable (its scope dropped), "names"
	// for SET NAMES and SET CHARACTER SET.
	Name string
	// Value is the value expression as written.
	Value string
	// Text is the assignment as a statement of its own ("SET SESSION
	// sql_mode = 'ANSI_QUOTES'").
	Text string
}

// SetAssignments returns the session and user variables a SET statement
// assigns, in order, and false when sql is not such a statement (SET
// GLOBAL, SET PASSWORD, SET ROLE, SET STATEMENT … FOR, SET TRANSACTION, a
// multi-statement text, or not a SET at all).
func SetAssignments(sql string) ([]Assignment, bool) {
	toks, err := Lex(sql)
	if err != nil {
		return nil, false
	}
	stmts := Statements(sql, toks)
	if len(stmts) != 1 {
		return nil, false
	}
	return setAssignments(sql, stmts[0])
}

func setAssignments(sql string, st []Token) ([]Assignment, bool) {
	if len(st) < 2 || !st[0].Is(sql, "SET") {
		return nil, false
	}
	body := st[1:]
	switch w := strings.ToUpper(body[0].Text(sql)); {
	case body[0].Kind != TokIdent:
	case w == "NAMES" || w == "CHARSET" || w == "CHARACTER" && len(body) > 2 && body[1].Is(sql, "SET"):
		v := 1
		if w == "CHARACTER" {
			v = 2
		}
		if v >= len(body) {
			return nil, false
		}
		return []Assignment{{Name: "names", Value: sql[body[v].Start:body[len(body)-1].End],
			Text: sql[st[0].Start:body[len(body)-1].End]}}, true
	case w == "PASSWORD", w == "GLOBAL", w == "STATEMENT", w == "ROLE", w == "DEFAULT", w == "TRANSACTION":
		return nil, false
	case w == "SESSION" || w == "LOCAL":
		if len(body) > 1 && body[1].Is(sql, "TRANSACTION") {
			// Its isolation level and its access mode are set apart (a
			// pool sets the one once and toggles the other): each its own
			// name, so that the one does not replace the other.
			name := "transaction"
			for _, t := range body[2:] {
				switch {
				case t.Is(sql, "ISOLATION"):
					name += " isolation"
				case t.Is(sql, "ONLY") || t.Is(sql, "WRITE"):
					name += " access"
				}
			}
			return []Assignment{{Name: name, Value: sql[body[1].Start:body[len(body)-1].End],
				Text: sql[st[0].Start:body[len(body)-1].End]}}, true
		}
	}
	var out []Assignment
	depth, start := 0, 0
	for i := 0; i <= len(body); i++ {
		if i < len(body) {
			switch {
			case body[i].IsPunct(sql, "("):
				depth++
			case body[i].IsPunct(sql, ")"):
				depth--
			}
			if !(depth == 0 && body[i].IsPunct(sql, ",")) {
				continue
			}
		}
		a, ok := assignment(sql, body[start:i])
		if !ok {
			return nil, false
		}
		out = append(out, a)
		start = i + 1
	}
	return out, len(out) > 0
}

// SetsGlobal reports whether sql is made of SET statements only, one of
// which assigns a server-wide variable: SET GLOBAL, SET PERSIST or
// PERSIST_ONLY (MySQL), or @@global. / @@persist. / @@persist_only.
// names. Replayed, such a statement would change the target server's
// settings for every session on it, not the replayed session's.
func SetsGlobal(sql string) bool {
	// Most texts are not SETs: only one that begins with SET or with a
	// comment is lexed.
	head := strings.TrimLeft(sql, " \t\r\n(")
	if len(head) < 3 || !strings.EqualFold(head[:3], "SET") && head[0] != '/' && head[0] != '#' && head[0] != '-' {
		return false
	}
	toks, err := Lex(sql)
	if err != nil {
		return false
	}
	global := false
	for _, st := range Statements(sql, toks) {
		if len(st) < 2 || !st[0].Is(sql, "SET") {
			return false
		}
		depth := 0
		for i, t := range st[1:] {
			switch {
			case t.IsPunct(sql, "("):
				depth++
			case t.IsPunct(sql, ")"):
				depth--
			}
			// An assignment begins the statement's body or follows a
			// comma outside parentheses: SET GLOBAL x = 1, SET a = 1,
			// GLOBAL b = 2, SET @@global.x = 1.
			if depth != 0 || i > 0 && !st[i].IsPunct(sql, ",") {
				continue
			}
			switch {
			case t.Kind == TokVariable:
				v := strings.ToLower(t.Text(sql))
				global = global || strings.HasPrefix(v, "@@global.") || strings.HasPrefix(v, "@@persist.") || strings.HasPrefix(v, "@@persist_only.")
			case t.Kind == TokIdent:
				global = global || t.Is(sql, "GLOBAL") || t.Is(sql, "PERSIST") || t.Is(sql, "PERSIST_ONLY")
			}
		}
	}
	return global
}

// assignment reads "[SESSION|LOCAL] name = expr", "@@[session.]name = expr"
// or "@user = expr".
func assignment(sql string, el []Token) (Assignment, bool) {
	if len(el) < 3 {
		return Assignment{}, false
	}
	i := 0
	var name string
	switch t := el[0]; {
	case t.Kind == TokVariable:
		v := t.Text(sql)
		if strings.HasPrefix(v, "@@") {
			n := strings.ToLower(v[2:])
			switch {
			case strings.HasPrefix(n, "global."):
				return Assignment{}, false
			case strings.HasPrefix(n, "session."):
				n = n[len("session."):]
			case strings.HasPrefix(n, "local."):
				n = n[len("local."):]
			case nextOnly[n]:
				// @@tx_isolation without a scope sets the next transaction
				// only, as SET TRANSACTION does (asked of MariaDB 10.11:
				// the session's value stays); SET tx_isolation sets the
				// session's.
				n = nextPrefix + n
			}
			name = n
		} else {
			name = "@" + Unquote(v)
		}
		i = 1
	case t.Is(sql, "GLOBAL"):
		return Assignment{}, false
	case t.Is(sql, "SESSION") || t.Is(sql, "LOCAL"):
		if el[1].Kind != TokIdent && el[1].Kind != TokQuotedIdent {
			return Assignment{}, false
		}
		name, i = strings.ToLower(Unquote(el[1].Text(sql))), 2
	case t.Kind == TokIdent || t.Kind == TokQuotedIdent:
		name, i = strings.ToLower(Unquote(t.Text(sql))), 1
	default:
		return Assignment{}, false
	}
	if i >= len(el)-1 || !el[i].IsPunct(sql, "=") && !el[i].IsPunct(sql, ":=") {
		return Assignment{}, false
	}
	value := sql[el[i+1].Start:el[len(el)-1].End]
	return Assignment{Name: name, Value: value, Text: "SET " + sql[el[0].Start:el[len(el)-1].End]}, true
}

// secretStarts are the statements that can carry a password, by their
// first words.
var secretStarts = [][]string{
	{"CREATE", "USER"}, {"CREATE", "OR", "REPLACE", "USER"}, {"ALTER", "USER"}, {"SET", "PASSWORD"}, {"GRANT"},
	{"CREATE", "ROLE"}, {"CHANGE", "MASTER"}, {"CHANGE", "REPLICATION", "SOURCE"}, {"CREATE", "SERVER"},
	{"CREATE", "OR", "REPLACE", "SERVER"}, {"ALTER", "SERVER"}, {"START", "SLAVE"}, {"START", "REPLICA"},
}

// secretHints are words without which no statement carries a password;
// a text with none of them is not lexed at all.
var secretHints = []string{"user", "password", "grant", "identified", "master", "server", "slave", "replica", "role", "source",
	"connection", "wsrep_sst_auth", "authentication_string", "global_priv", "spider"}

// hintsByFirst are secretHints by their first letter, in either case
// (every hint begins with a lower-case letter: TestSecretHints).
var hintsByFirst = func() (by [256][]string) {
	for _, h := range secretHints {
		by[h[0]] = append(by[h[0]], h)
		by[h[0]&^0x20] = append(by[h[0]&^0x20], h)
	}
	return by
}()

// mayCarrySecret is the filter every recorded text goes through (a
// capture calls MaskSecrets on each COM_QUERY and COM_STMT_PREPARE).
func mayCarrySecret(sql string) bool {
	for i := 0; i < len(sql); i++ {
		for _, h := range hintsByFirst[sql[i]] {
			if len(sql)-i >= len(h) && strings.EqualFold(sql[i:i+len(h)], h) {
				return true
			}
		}
	}
	return false
}

// CarriesSecret reports whether sql holds a statement that can carry a
// password: in any statement of a multi-statement text, inside an
// executable comment, or as the text of a string (PREPARE s FROM '…',
// EXECUTE IMMEDIATE '…', SET @q = '…').
// It says so for a statement with no literal to mask too: a prepared
// SET PASSWORD = PASSWORD(?) gets its password as a parameter.
func CarriesSecret(sql string) bool { return carries(sql, 0) }

func carries(sql string, depth int) bool {
	if !mayCarrySecret(sql) || depth > 3 {
		return false
	}
	toks, err := Lex(sql)
	if err != nil {
		return true // a hint word in a text that cannot be read: assume the worst
	}
	for _, st := range Statements(sql, toks) {
		if secretStatement(sql, st, depth) {
			return true
		}
	}
	return false
}

// MaskSecrets returns sql with every string literal of every statement that
// can carry a password (secretStatement) replaced by '***', and whether it
// changed anything. Other text comes back as it is. A text that cannot be
// lexed (an unterminated string or comment) but holds a hint word is
// masked from its first quote to its end.
func MaskSecrets(sql string) (string, bool) {
	if !mayCarrySecret(sql) {
		return sql, false
	}
	toks, err := Lex(sql)
	if err != nil {
		q := strings.IndexAny(sql, "'\"")
		if q < 0 {
			return sql, false
		}
		return sql[:q] + "'***'", true
	}
	var cut []Token
	for _, st := range Statements(sql, toks) {
		if !secretStatement(sql, st, 0) {
			continue
		}
		for _, t := range st {
			if t.Kind == TokString {
				cut = append(cut, t)
			}
		}
	}
	if len(cut) == 0 {
		return sql, false
	}
	var b strings.Builder
	b.Grow(len(sql))
	at := 0
	for _, t := range cut {
		b.WriteString(sql[at:t.Start])
		b.WriteString("'***'")
		at = t.End
	}
	b.WriteString(sql[at:])
	return b.String(), true
}

// secretStatement reports whether one statement (its tokens) can carry a
// password, or a credential that logs in as well as one: then every
// string in it is masked (the rest of a statement that holds a password
// can hold pieces of it: EXECUTE IMMEDIATE '…' USING 'pw', CONCAT of
// parts). It does:
//   - when it begins as such a statement does (secretStarts);
//   - with IDENTIFIED anywhere (GRANT … IDENTIFIED BY, and such a clause in
//     a stored program's body or after SET STATEMENT … FOR);
//   - with SET PASSWORD anywhere (a stored program's body, a compound
//     statement, SET STATEMENT … FOR), unless the statement is an UPDATE,
//     INSERT, REPLACE or LOAD DATA, whose SET assigns a column;
//   - with PASSWORD 'text' (a server's OPTIONS, IDENTIFIED BY PASSWORD);
//   - with the functions PASSWORD(, OLD_PASSWORD( and ED25519_PASSWORD(
//     (not a key's or index's column named password), and Spider's
//     spider_direct_sql(, spider_bg_direct_sql(, spider_copy_tables(;
//   - with MASTER_PASSWORD, wsrep_sst_auth (user:password, as a name or
//     @@variable) or authentication_string (a hash MariaDB logs in with),
//     and when it names mysql.user, mysql.global_priv or mysql.servers;
//   - a CREATE or ALTER TABLE with a CONNECTION '…' (FEDERATED, CONNECT:
//     mysql://user:password@host/…), an OPTION_LIST holding a password or
//     such a URL (CONNECT), or a COMMENT doing so in a Spider table;
//   - holding a string whose text is SQL (it begins as a statement does)
//     that is such a statement (PREPARE s FROM '…', EXECUTE IMMEDIATE '…',
//     SET @q = '…', CONCAT('CREATE USER u IDENTIFIED BY ', …)). Other
//     strings are data, whatever words they hold.
//
// A password in a user variable (SET @pw = '…') or built from pieces no
// one of which says what it is cannot be told from any other value.
func secretStatement(sql string, st []Token, depth int) bool {
	if len(st) == 0 {
		return false
	}
	if secretWords(sql, st) {
		return true
	}
	verb := leadVerb(sql, st)
	columnSet := st[verb].Is(sql, "UPDATE") || st[verb].Is(sql, "INSERT") || st[verb].Is(sql, "REPLACE") || st[verb].Is(sql, "LOAD")
	object := ddlObject(sql, st, verb)
	next := func(i int) Token {
		if i+1 < len(st) {
			return st[i+1]
		}
		return Token{}
	}
	for i, t := range st {
		switch t.Kind {
		case TokIdent:
			switch w := strings.ToUpper(t.Text(sql)); w {
			case "IDENTIFIED", "MASTER_PASSWORD", "WSREP_SST_AUTH", "AUTHENTICATION_STRING":
				return true
			case "PASSWORD", "OLD_PASSWORD", "ED25519_PASSWORD":
				n := next(i)
				if n.IsPunct(sql, "(") && !keyColumn(sql, st, i, object) {
					return true
				}
				if w == "PASSWORD" && (n.Kind == TokString || i > 0 && st[i-1].Is(sql, "SET") && !columnSet) {
					return true
				}
			case "SPIDER_DIRECT_SQL", "SPIDER_BG_DIRECT_SQL", "SPIDER_COPY_TABLES":
				if next(i).IsPunct(sql, "(") {
					return true
				}
			case "CONNECTION", "OPTION_LIST", "COMMENT":
				if object != "TABLE" || i > 0 && st[i-1].IsPunct(sql, ".") {
					break
				}
				if w == "COMMENT" && !slices.ContainsFunc(st, func(t Token) bool { return t.Is(sql, "SPIDER") }) {
					break // a comment is Spider's connection only in a Spider table
				}
				if v, ok := optionString(sql, st[i+1:]); ok && (w == "CONNECTION" || credentialText(v)) {
					return true
				}
			case "MYSQL":
				if grantTable(sql, st[i+1:]) {
					return true
				}
			}
		case TokQuotedIdent:
			if strings.EqualFold(Unquote(t.Text(sql)), "mysql") && grantTable(sql, st[i+1:]) {
				return true
			}
		case TokVariable:
			name := strings.ToUpper(strings.TrimLeft(t.Text(sql), "@"))
			for _, scope := range []string{"GLOBAL.", "SESSION.", "LOCAL."} {
				name = strings.TrimPrefix(name, scope)
			}
			if name == "WSREP_SST_AUTH" {
				return true
			}
		case TokString:
			if inner := Unquote(t.Text(sql)); looksLikeSQL(inner) && carries(inner, depth+1) {
				return true
			}
		}
	}
	return false
}

// leadVerb is the index of the statement's own first word: after SET
// STATEMENT var = value, … FOR.
func leadVerb(sql string, st []Token) int {
	if len(st) > 1 && st[0].Is(sql, "SET") && st[1].Is(sql, "STATEMENT") {
		for i := 2; i+1 < len(st); i++ {
			if st[i].Is(sql, "FOR") {
				return i + 1
			}
		}
	}
	return 0
}

// ddlObject is what a CREATE or ALTER at st[verb] makes or changes, TABLE
// or INDEX (after OR REPLACE, TEMPORARY, ONLINE, IGNORE, UNIQUE …), or "".
func ddlObject(sql string, st []Token, verb int) string {
	if !st[verb].Is(sql, "CREATE") && !st[verb].Is(sql, "ALTER") {
		return ""
	}
	for i := verb + 1; i < len(st) && i <= verb+5; i++ {
		switch {
		case st[i].Is(sql, "TABLE"):
			return "TABLE"
		case st[i].Is(sql, "INDEX") || st[i].Is(sql, "KEY"):
			return "INDEX"
		}
	}
	return ""
}

// keyColumn reports whether the word at st[i], followed by "(", names a
// key or an index (KEY password (…)) or a column of one with a prefix
// length (INDEX ix (password(10))) in table or index DDL: not a call.
func keyColumn(sql string, st []Token, i int, object string) bool {
	if i == 0 {
		return false
	}
	p := st[i-1]
	for _, w := range []string{"KEY", "INDEX", "UNIQUE", "FULLTEXT", "SPATIAL"} {
		if p.Is(sql, w) {
			return true
		}
	}
	return object != "" && (p.IsPunct(sql, "(") || p.IsPunct(sql, ","))
}

// optionString returns the text of a table option's value: rest begins
// [=] 'text'.
func optionString(sql string, rest []Token) (string, bool) {
	if len(rest) > 0 && rest[0].IsPunct(sql, "=") {
		rest = rest[1:]
	}
	if len(rest) == 0 || rest[0].Kind != TokString {
		return "", false
	}
	return Unquote(rest[0].Text(sql)), true
}

// credentialText reports whether a table option's text holds a password
// (CONNECT's OPTION_LIST 'user=u,password=p', Spider's COMMENT 'password
// "p"') or a URL with one (scheme://user:password@host).
func credentialText(s string) bool {
	if strings.Contains(strings.ToLower(s), "password") {
		return true
	}
	if i := strings.Index(s, "://"); i >= 0 {
		rest := s[i+3:]
		if at := strings.IndexByte(rest, '@'); at > 0 && strings.Contains(rest[:at], ":") {
			return true
		}
	}
	return false
}

// grantTable reports whether rest begins . user, . global_priv or
// . servers (after mysql): tables whose rows hold credentials.
func grantTable(sql string, rest []Token) bool {
	if len(rest) < 2 || !rest[0].IsPunct(sql, ".") {
		return false
	}
	name := rest[1].Text(sql)
	if rest[1].Kind == TokQuotedIdent {
		name = Unquote(name)
	} else if rest[1].Kind != TokIdent {
		return false
	}
	return strings.EqualFold(name, "user") || strings.EqualFold(name, "global_priv") || strings.EqualFold(name, "servers")
}

// sqlVerbs are the words a statement can begin with.
var sqlVerbs = map[string]bool{"ALTER": true, "BEGIN": true, "CALL": true, "CHANGE": true, "CREATE": true, "DELETE": true, "DO": true, "DROP": true,
	"EXECUTE": true, "GRANT": true, "IF": true, "INSERT": true, "INSTALL": true, "LOAD": true, "PREPARE": true, "RENAME": true, "REPLACE": true,
	"REVOKE": true, "SELECT": true, "SET": true, "START": true, "STOP": true, "UPDATE": true, "WITH": true}

// looksLikeSQL reports whether a string's text begins as a statement
// does (after blanks, an executable comment's opening, parentheses): only
// such a string is read as SQL.
func looksLikeSQL(s string) bool {
	s = strings.TrimLeft(s, " \t\r\n(")
	s = strings.TrimPrefix(strings.TrimPrefix(s, "/*M!"), "/*!")
	for len(s) > 0 && s[0] >= '0' && s[0] <= '9' { // /*!50001 …
		s = s[1:]
	}
	s = strings.TrimLeft(s, " \t\r\n")
	n := 0
	for n < len(s) && (s[n]|0x20 >= 'a' && s[n]|0x20 <= 'z' || s[n] == '_') {
		n++
	}
	return n > 0 && sqlVerbs[strings.ToUpper(s[:n])]
}

// secretWords reports whether a statement's first words are those of a
// statement that can carry a password.
func secretWords(sql string, st []Token) bool {
	w := words(sql, st, 4)
	for _, s := range secretStarts {
		if len(w) < len(s) {
			continue
		}
		match := true
		for i := range s {
			if w[i] != s[i] {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}

// OneShot reports whether a session variable (an Assignment's Name) is
// one the next statement consumes, or that only replication sets
// (insert_id, last_insert_id, rand_seed1, rand_seed2, gtid_seq_no), or
// the next transaction's isolation level or access mode (@@tx_isolation
// without a scope): its SET belongs to that statement, and is no state
// of the session's to set again later.
func OneShot(name string) bool { return oneShotVars[name] || strings.HasPrefix(name, nextPrefix) }

var oneShotVars = map[string]bool{"insert_id": true, "last_insert_id": true, "rand_seed1": true, "rand_seed2": true, "gtid_seq_no": true}

// nextOnly are the variables that @@name = … without a scope sets for the
// next transaction only; nextPrefix marks such an Assignment's Name
// ("next tx_isolation"), which OneShot reports.
var nextOnly = map[string]bool{"tx_isolation": true, "tx_read_only": true, "transaction_isolation": true, "transaction_read_only": true}

const nextPrefix = "next "

// Reevaluable reports whether a SET's value expression gives, on a new
// connection, what it gave the session: it depends on nothing the session
// did — literals, system variables (@@sql_mode: a new connection starts
// with them as the session did), functions of those (CONCAT) — and not
// on user variables, a prepared statement's ?, a subquery, a sequence or
// a nondeterministic function (NEXTVAL(s), LAST_INSERT_ID(), UUID()).
func Reevaluable(value string) bool {
	toks, err := Lex(value)
	if err != nil || len(toks) == 0 {
		return false
	}
	for i, t := range toks {
		switch t.Kind {
		case TokParam:
			return false
		case TokVariable:
			if !strings.HasPrefix(t.Text(value), "@@") {
				return false
			}
		case TokIdent:
			name := strings.ToLower(t.Text(value))
			if nondeterministicFuncs[name] || name == "select" || name == "setval" ||
				i+1 < len(toks) && toks[i+1].IsPunct(value, "(") && chosenFuncs[name] {
				return false
			}
		}
	}
	return true
}
