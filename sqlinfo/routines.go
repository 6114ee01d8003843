package sqlinfo

import "strings"

// ChoosesValues reports whether text — a column's DEFAULT expression as
// information_schema shows it, or the body of a trigger or stored
// procedure — calls a function whose value each server chooses anew
// (Info.ChosenValues): UUID(), RAND() without a seed, SYSDATE(),
// CONNECTION_ID(), the user functions. A text that cannot be lexed
// is taken to choose (what it does is not known).
func ChoosesValues(text string) bool {
	toks, err := Lex(text)
	if err != nil {
		return true
	}
	for i, t := range toks {
		switch {
		case t.Kind == TokIdent && i+1 < len(toks) && toks[i+1].IsPunct(text, "(") && !tableAt(text, toks, i):
			name := strings.ToLower(t.Text(text))
			if chosenFuncs[name] && (name != "rand" || i+2 < len(toks) && toks[i+2].IsPunct(text, ")")) {
				return true
			}
		case t.Is(text, "CURRENT_USER") || t.Is(text, "CURRENT_ROLE"):
			return true
		}
	}
	return false
}

// BodyWrites are the tables a trigger's or stored procedure's body
// writes, as it names them: those after INSERT [INTO], REPLACE [INTO],
// UPDATE (not ON DUPLICATE KEY UPDATE) and DELETE … FROM (what the
// procedures it CALLs write is theirs: BodyCalls). ok is false when the
// body cannot be lexed, or writes through something it does not name (a
// prepared statement, dynamic SQL).
func BodyWrites(body string) (writes []Table, ok bool) {
	toks, err := Lex(body)
	if err != nil {
		return nil, false
	}
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		if t.Kind != TokIdent {
			continue
		}
		j := -1
		switch strings.ToUpper(t.Text(body)) {
		case "EXECUTE", "PREPARE":
			return writes, false
		case "INSERT", "REPLACE":
			j = i + 1
			for j < len(toks) && toks[j].Kind == TokIdent && (isModifier(toks[j].Text(body)) || toks[j].Is(body, "INTO")) {
				j++
			}
		case "UPDATE":
			if i > 0 && toks[i-1].Is(body, "KEY") {
				continue // ON DUPLICATE KEY UPDATE
			}
			j = i + 1
			for j < len(toks) && toks[j].Kind == TokIdent && isModifier(toks[j].Text(body)) {
				j++
			}
		case "DELETE":
			for k := i + 1; k < len(toks) && k < i+4; k++ {
				if toks[k].Is(body, "FROM") {
					j = k + 1
					break
				}
			}
		}
		if j < 0 {
			continue
		}
		if tbl, next, ok := tableName(body, toks, j); ok {
			writes = appendTables(writes, tbl)
			i = next - 1
		}
	}
	return writes, true
}

// CalledFunctions are the functions text calls by name, as written
// (schema "" when unqualified): builtins and stored functions alike (a
// caller looks up the ones it knows). A text that cannot be lexed calls
// none that can be told.
func CalledFunctions(text string) []Table {
	if strings.IndexByte(text, '(') < 0 {
		return nil
	}
	toks, err := Lex(text)
	if err != nil {
		return nil
	}
	return calledIn(text, toks)
}

// calledIn is CalledFunctions of text lexed as toks.
func calledIn(text string, toks []Token) []Table {
	var fs []Table
	name := func(t Token) (string, bool) {
		switch t.Kind {
		case TokIdent:
			w := t.Text(text)
			return w, !isKeyword(w) && !syntaxBeforeParen[strings.ToUpper(w)] // VALUES (, IN (
		case TokQuotedIdent:
			return Unquote(t.Text(text)), true
		}
		return "", false
	}
	for i, t := range toks {
		if i+1 >= len(toks) || !toks[i+1].IsPunct(text, "(") {
			continue
		}
		n, ok := name(t)
		if !ok {
			continue
		}
		if i >= 2 && toks[i-1].IsPunct(text, ".") {
			if s, ok := name(toks[i-2]); ok && !notCall(text, toks, i-2) {
				fs = appendTables(fs, Table{s, n})
			}
			continue
		}
		if !notCall(text, toks, i) {
			fs = appendTables(fs, Table{"", n})
		}
	}
	return fs
}

// notCall reports whether the name at i, followed by a parenthesis, is
// not a function called: a table (INSERT INTO t (a), INSERT t (a)), a
// derived table's or a CTE's column list (AS d (a, b), WITH c (n)), a
// key's or a reference's columns.
func notCall(sql string, st []Token, i int) bool {
	if tableAt(sql, st, i) {
		return true
	}
	if i == 0 {
		return false
	}
	switch p := st[i-1]; {
	case p.Is(sql, "AS"), p.Is(sql, "WITH"), p.Is(sql, "RECURSIVE"), p.Is(sql, "REFERENCES"), p.Is(sql, "KEY"), p.Is(sql, "INDEX"),
		p.Is(sql, "INSERT"), p.Is(sql, "REPLACE"), p.Is(sql, "IGNORE"), p.Is(sql, "CALL"):
		return true
	}
	return false
}

// BodyCalls are the procedures a routine's body CALLs, as written.
func BodyCalls(body string) []Table {
	toks, err := Lex(body)
	if err != nil {
		return nil
	}
	var calls []Table
	for i := 0; i+1 < len(toks); i++ {
		if !toks[i].Is(body, "CALL") {
			continue
		}
		if t, _, ok := tableName(body, toks, i+1); ok {
			calls = appendTables(calls, t)
		}
	}
	return calls
}

// syntaxBeforeParen are words of SQL's own that a parenthesis follows
// (FROM (SELECT …), KEY (a), IN (1, 2)): not functions.
var syntaxBeforeParen = map[string]bool{
	"FROM": true, "IN": true, "VALUES": true, "VALUE": true, "EXISTS": true, "ON": true, "USING": true, "AND": true, "OR": true,
	"NOT": true, "AS": true, "WHERE": true, "JOIN": true, "SELECT": true, "INTO": true, "TABLE": true, "KEY": true, "PRIMARY": true,
	"UNIQUE": true, "FOREIGN": true, "CHECK": true, "OVER": true, "PARTITION": true, "BY": true, "ROW": true, "ROWS": true,
	"SET": true, "ALL": true, "ANY": true, "SOME": true, "UNION": true, "WITH": true, "RETURN": true, "THEN": true, "ELSE": true,
	"WHEN": true, "DO": true, "LIKE": true, "IS": true, "INDEX": true, "REFERENCES": true, "HAVING": true, "LIMIT": true,
}

// TableNameAt reads a [schema.]name at token i of st (lexed from sql),
// skipping IF NOT EXISTS and IF EXISTS before it; next is the token after
// it.
func TableNameAt(sql string, st []Token, i int) (t Table, next int, ok bool) {
	if i+1 < len(st) && st[i].Is(sql, "IF") {
		i += 2 // IF EXISTS
		if st[i-1].Is(sql, "NOT") {
			i++ // IF NOT EXISTS
		}
	}
	return tableName(sql, st, i)
}

// AfterWords is the offset in sql just after words, read as consecutive
// tokens from token i of st on (e.g. FOR EACH ROW before a trigger's
// body); -1 when they do not come.
func AfterWords(sql string, st []Token, i int, words ...string) int {
	for j := i; j+len(words) <= len(st); j++ {
		match := true
		for k, w := range words {
			if !st[j+k].Is(sql, w) {
				match = false
				break
			}
		}
		if match {
			return st[j+len(words)-1].End
		}
	}
	return -1
}

// AfterParens is the offset in sql just after the parenthesised list
// that begins at token i of st (a routine's parameters), -1 when none
// begins there.
func AfterParens(sql string, st []Token, i int) int {
	if i >= len(st) || !st[i].IsPunct(sql, "(") {
		return -1
	}
	if j, ok := matching(sql, st, i); ok {
		return st[j].End
	}
	return -1
}

// DefaultsChoose reports whether a CREATE or ALTER TABLE gives a column a
// DEFAULT that calls a function each server chooses anew
// (ChoosesValues): DEFAULT (UUID()), DEFAULT uuid(). Other parentheses
// (an index named uuid, a CREATE … SELECT UUID()) are not defaults.
func DefaultsChoose(sql string) bool {
	toks, err := Lex(sql)
	if err != nil {
		return false
	}
	for i, t := range toks {
		if !t.Is(sql, "DEFAULT") || i+1 >= len(toks) {
			continue
		}
		// The expression: up to the comma or parenthesis that closes
		// its column's definition.
		depth, j := 0, i+1
		for ; j < len(toks); j++ {
			switch {
			case toks[j].IsPunct(sql, "("):
				depth++
			case toks[j].IsPunct(sql, ")"):
				depth--
			case depth == 0 && toks[j].IsPunct(sql, ","):
			default:
				continue
			}
			if depth < 0 || depth == 0 && toks[j].IsPunct(sql, ",") {
				break
			}
		}
		if ChoosesValues(sql[toks[i+1].Start:toks[min(j, len(toks)-1)].End]) {
			return true
		}
	}
	return false
}
