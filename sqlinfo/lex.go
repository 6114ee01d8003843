package sqlinfo

import (
	"errors"
	"fmt"
	"strings"
)

// TokKind is a lexical token's kind.
type TokKind uint8

const (
	TokIdent       TokKind = iota + 1 // a bare word: keyword or identifier
	TokQuotedIdent                    // `name`
	TokString                         // 'text' or "text"
	TokNumber                         // 12, 1.5e3, 0x1f
	TokVariable                       // @name, @'name', @@name, @@session.name
	TokParam                          // ?
	TokPunct                          // one or more operator characters: ( ) , ; . = := …
)

// Token is one token of a statement text. Start and End are byte offsets
// into the text; Exec is set for a token inside an executable comment
// (/*! … */ or /*M! … */), which the server runs as code.
type Token struct {
	Kind       TokKind
	Start, End int
	Exec       bool
}

// ErrLex is wrapped by lexing errors: an unterminated string, quoted
// name or comment.
var ErrLex = errors.New("sqlinfo: cannot lex statement")

// Text is the token's source text.
func (t Token) Text(sql string) string { return sql[t.Start:t.End] }

// Is reports whether t is the bare word w (case-insensitive).
func (t Token) Is(sql, w string) bool {
	return t.Kind == TokIdent && strings.EqualFold(sql[t.Start:t.End], w)
}

// IsPunct reports whether t is the punctuation p.
func (t Token) IsPunct(sql, p string) bool { return t.Kind == TokPunct && sql[t.Start:t.End] == p }

// Lex splits sql into tokens, skipping blanks and comments but lexing the
// inside of executable comments. It returns the tokens it could read and
// an error wrapping ErrLex when the text ends inside a string, quoted name
// or comment. It never panics, whatever the input.
func Lex(sql string) ([]Token, error) {
	toks := make([]Token, 0, 16)
	exec := false // inside /*! … */
	i, n := 0, len(sql)
	for i < n {
		c := sql[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' || c == 0:
			// A NUL is space: mariadb-slap ends its queries with one, and
			// an engine clause must go before it, not after.
			i++
		case exec && c == '*' && i+1 < n && sql[i+1] == '/':
			exec = false
			i += 2
		case c == '#' || c == '-' && i+1 < n && sql[i+1] == '-' && (i+2 == n || isSpace(sql[i+2])):
			for i < n && sql[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < n && sql[i+1] == '*':
			// /*! and /*M! are executable: the server runs what is inside
			// (after an optional version number) as code.
			j := i + 2
			if j < n && sql[j] == 'M' && j+1 < n && sql[j+1] == '!' {
				j++
			}
			if j < n && sql[j] == '!' && !exec {
				j++
				for j < n && sql[j] >= '0' && sql[j] <= '9' {
					j++
				}
				exec = true
				i = j
				continue
			}
			end := strings.Index(sql[i+2:], "*/")
			if end < 0 {
				return toks, errorf("unterminated comment at byte %d", i)
			}
			i += 2 + end + 2
		case c == '\'' || c == '"':
			end, ok := skipQuoted(sql, i, c, true)
			if !ok {
				return toks, errorf("unterminated string at byte %d", i)
			}
			toks = append(toks, Token{TokString, i, end, exec})
			i = end
		case c == '`':
			end, ok := skipQuoted(sql, i, c, false)
			if !ok {
				return toks, errorf("unterminated quoted name at byte %d", i)
			}
			toks = append(toks, Token{TokQuotedIdent, i, end, exec})
			i = end
		case c == '@' && len(toks) > 0 && toks[len(toks)-1].End == i && toks[len(toks)-1].Kind <= TokString:
			// 'user'@'host': the @ joins a name to its host.
			toks = append(toks, Token{TokPunct, i, i + 1, exec})
			i++
		case c == '@':
			j := i + 1
			if j < n && sql[j] == '@' {
				j++
			}
			if j < n && (sql[j] == '\'' || sql[j] == '"' || sql[j] == '`') {
				end, ok := skipQuoted(sql, j, sql[j], sql[j] != '`')
				if !ok {
					return toks, errorf("unterminated variable name at byte %d", i)
				}
				j = end
			} else {
				for j < n && (isWord(sql[j]) || sql[j] == '.' || sql[j] == '$') {
					j++
				}
			}
			toks = append(toks, Token{TokVariable, i, j, exec})
			i = j
		case c == '?':
			toks = append(toks, Token{TokParam, i, i + 1, exec})
			i++
		case c >= '0' && c <= '9' || c == '.' && i+1 < n && sql[i+1] >= '0' && sql[i+1] <= '9':
			j := i + 1
			for j < n && (isWord(sql[j]) || sql[j] == '.' ||
				(sql[j] == '+' || sql[j] == '-') && (sql[j-1] == 'e' || sql[j-1] == 'E') && numeric(sql[i:j-1])) {
				j++
			}
			// 12abc is a name (MySQL allows names that start with digits).
			kind := TokIdent
			if numeric(sql[i:j]) {
				kind = TokNumber
			}
			toks = append(toks, Token{kind, i, j, exec})
			i = j
		case isWord(c):
			j := i + 1
			for j < n && (isWord(sql[j]) || sql[j] == '$') {
				j++
			}
			toks = append(toks, Token{TokIdent, i, j, exec})
			i = j
		default:
			// Operators: a run of operator characters that is a known
			// multi-character operator, else one character.
			j := i + 1
			for _, op := range multiOps {
				if strings.HasPrefix(sql[i:], op) {
					j = i + len(op)
					break
				}
			}
			toks = append(toks, Token{TokPunct, i, j, exec})
			i = j
		}
	}
	if exec {
		return toks, errorf("unterminated executable comment")
	}
	return toks, nil
}

var multiOps = []string{":=", "<=>", "<=", ">=", "<>", "!=", "<<", ">>", "&&", "||", "->>", "->"}

func errorf(format string, args ...any) error {
	return &lexError{msg: fmt.Sprintf(format, args...)}
}

// numeric reports whether s is a number literal: digits with an optional
// fraction and exponent, or 0x… / 0b….
func numeric(s string) bool {
	if len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X' || s[1] == 'b' || s[1] == 'B') {
		for i := 2; i < len(s); i++ {
			c := s[i]
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
				return false
			}
		}
		return true
	}
	digits, dot, exp := false, false, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digits = true
		case c == '.' && !dot && !exp:
			dot = true
		case (c == 'e' || c == 'E') && digits && !exp:
			exp = true
			if i+1 < len(s) && (s[i+1] == '+' || s[i+1] == '-') {
				i++
			}
			digits = false
		default:
			return false
		}
	}
	return digits
}

type lexError struct{ msg string }

func (e *lexError) Error() string { return "sqlinfo: cannot lex statement: " + e.msg }
func (e *lexError) Unwrap() error { return ErrLex }

// skipQuoted returns the offset after the quoted text starting at i with
// quote q: a doubled quote stands for itself, and with backslash a
// backslash escapes the next byte.
func skipQuoted(sql string, i int, q byte, backslash bool) (int, bool) {
	j := i + 1
	for j < len(sql) {
		switch sql[j] {
		case '\\':
			if backslash {
				j += 2
				continue
			}
		case q:
			if j+1 < len(sql) && sql[j+1] == q {
				j += 2
				continue
			}
			return j + 1, true
		}
		j++
	}
	return len(sql), false
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

func isWord(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c >= 0x80
}

// Unquote returns the value of a string token or the name of a quoted
// identifier or variable: quotes removed, doubled quotes and backslash
// escapes resolved. A bare word comes back as it is.
func Unquote(text string) string {
	if text == "" {
		return text
	}
	if text[0] == '@' {
		text = strings.TrimLeft(text, "@")
	}
	if len(text) < 2 {
		return text
	}
	q := text[0]
	if q != '\'' && q != '"' && q != '`' || text[len(text)-1] != q {
		return text
	}
	body := text[1 : len(text)-1]
	var b strings.Builder
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case c == q && i+1 < len(body) && body[i+1] == q:
			b.WriteByte(q)
			i++
		case c == '\\' && q != '`' && i+1 < len(body):
			i++
			switch body[i] {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case '0':
				b.WriteByte(0)
			case 'Z':
				b.WriteByte(26)
			case 'b':
				b.WriteByte('\b')
			default:
				b.WriteByte(body[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// Statements splits tokens at top-level semicolons: one slice of tokens
// per statement of a multi-statement text, empty statements dropped.
func Statements(sql string, toks []Token) [][]Token {
	var out [][]Token
	start := 0
	for i, t := range toks {
		if t.IsPunct(sql, ";") {
			if i > start {
				out = append(out, toks[start:i])
			}
			start = i + 1
		}
	}
	if start < len(toks) {
		out = append(out, toks[start:])
	}
	return out
}

// words returns the first n bare words of a statement's tokens, upper-cased,
// stopping at the first token that is not a bare word.
func words(sql string, toks []Token, n int) []string {
	out := make([]string, 0, n)
	for _, t := range toks {
		if len(out) == n || t.Kind != TokIdent {
			break
		}
		out = append(out, strings.ToUpper(t.Text(sql)))
	}
	return out
}
