package sqlinfo

import (
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
			return []Assignment{{Name: "transaction", Value: sql[body[1].Start:body[len(body)-1].End],
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
	"connection", "wsrep_sst_auth", "authentication_string", "global_priv"}

// hintsByFirst are secretHints by their first letter (either case).
var hintsByFirst = func() (by [256][]string) {
	for _, h := range secretHints {
		by[h[0]] = append(by[h[0]], h)
		by[h[0]-'a'+'A'] = append(by[h[0]-'a'+'A'], h)
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
		return secretWords(sql, toks) || strings.Contains(strings.ToUpper(sql), "IDENTIFIED")
	}
	for _, st := range Statements(sql, toks) {
		if secretStatement(sql, st, depth) {
			return true
		}
		for _, t := range st {
			if t.Kind == TokString && carries(Unquote(t.Text(sql)), depth+1) {
				return true
			}
		}
	}
	return false
}

// MaskSecrets returns sql with every string literal of every statement that
// can carry a password replaced by '***' (and every string whose text is
// such a statement), and whether it changed anything. Other text comes back
// as it is. A text that cannot be lexed but names such a statement is
// masked from its first quote to its end.
func MaskSecrets(sql string) (string, bool) {
	return mask(sql, 0)
}

func mask(sql string, depth int) (string, bool) {
	if !mayCarrySecret(sql) || depth > 3 {
		return sql, false
	}
	toks, err := Lex(sql)
	if err != nil {
		if !secretWords(sql, toks) && !strings.Contains(strings.ToUpper(sql), "IDENTIFIED") {
			return sql, false
		}
		q := strings.IndexAny(sql, "'\"")
		if q < 0 {
			return sql, false
		}
		return sql[:q] + "'***'", true
	}
	var cut []Token
	for _, st := range Statements(sql, toks) {
		if !secretStatement(sql, st, depth) {
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
//     a stored program's body);
//   - with SET PASSWORD where a statement can begin inside another: a stored
//     program's body (after BEGIN, THEN, ELSE, DO, FOR EACH ROW, a label,
//     ")" of the routine's parameters) and SET STATEMENT … FOR;
//   - with the functions PASSWORD( and OLD_PASSWORD( anywhere;
//   - with MASTER_PASSWORD, wsrep_sst_auth (user:password) or
//     authentication_string (a hash MariaDB logs in with), and when it
//     names the grant tables mysql.user or mysql.global_priv;
//   - a CREATE or ALTER with CONNECTION = '…' (FEDERATED and CONNECT
//     tables: mysql://user:password@host/…);
//   - holding a string whose text is such a statement, or holds a literal
//     such a statement would mask (PREPARE s FROM '…', EXECUTE IMMEDIATE
//     '…', SET @q = '…', CONCAT('CREATE USER u IDENTIFIED BY ', …)).
//
// A password in a user variable (SET @pw = '…') or built from pieces no
// one of which says what it is cannot be told from any other value.
func secretStatement(sql string, st []Token, depth int) bool {
	if secretWords(sql, st) {
		return true
	}
	ddl := len(st) > 0 && (st[0].Is(sql, "CREATE") || st[0].Is(sql, "ALTER"))
	for i, t := range st {
		switch t.Kind {
		case TokIdent:
			w := strings.ToUpper(t.Text(sql))
			switch w {
			case "IDENTIFIED", "MASTER_PASSWORD", "WSREP_SST_AUTH", "AUTHENTICATION_STRING":
				return true
			case "PASSWORD", "OLD_PASSWORD":
				if i+1 < len(st) && st[i+1].Kind == TokPunct && strings.HasPrefix(st[i+1].Text(sql), "(") {
					return true
				}
				if w == "PASSWORD" && i > 0 && st[i-1].Is(sql, "SET") && statementCanStart(sql, st, i-1) {
					return true
				}
			case "CONNECTION":
				if ddl && connectionString(sql, st[i+1:]) {
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
		case TokString:
			inner := Unquote(t.Text(sql))
			if _, masked := mask(inner, depth+1); masked {
				return true
			}
			if itoks, err := Lex(inner); err == nil && mayCarrySecret(inner) {
				for _, ist := range Statements(inner, itoks) {
					if secretWords(inner, ist) {
						return true
					}
				}
			}
		}
	}
	return false
}

// statementCanStart reports whether a statement can begin at st[i]: the
// first token, or after a word or mark that ends a compound statement's
// head (BEGIN [NOT ATOMIC], THEN, ELSE, DO, LOOP, REPEAT, FOR EACH ROW,
// SET STATEMENT … FOR), a label's ":" or a routine's ")". An UPDATE's
// SET follows a table's name, which is none of these.
func statementCanStart(sql string, st []Token, i int) bool {
	if i == 0 {
		return true
	}
	p := st[i-1]
	if p.Kind == TokPunct {
		t := p.Text(sql)
		return strings.HasSuffix(t, ")") || strings.HasSuffix(t, ":")
	}
	for _, w := range []string{"BEGIN", "ATOMIC", "THEN", "ELSE", "DO", "LOOP", "REPEAT", "ROW", "FOR"} {
		if p.Is(sql, w) {
			return true
		}
	}
	return false
}

// connectionString reports whether rest begins [=] 'text': a table's
// CONNECTION option.
func connectionString(sql string, rest []Token) bool {
	if len(rest) > 0 && rest[0].IsPunct(sql, "=") {
		rest = rest[1:]
	}
	return len(rest) > 0 && rest[0].Kind == TokString
}

// grantTable reports whether rest begins . user or . global_priv (after
// mysql): a grant table, whose rows hold credentials.
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
	return strings.EqualFold(name, "user") || strings.EqualFold(name, "global_priv")
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
