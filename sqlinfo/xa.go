package sqlinfo

import (
	"encoding/hex"
	"fmt"
	"strings"
)

// MaxBqual is the longest branch qualifier an xid takes, in bytes
// (MAXBQUALSIZE, MariaDB and MySQL alike).
const MaxBqual = 64

// MoveXid returns sql, an XA statement that names an xid (XA START, BEGIN,
// END, PREPARE, COMMIT or ROLLBACK xid …), with suffix appended to the
// xid's branch qualifier, and true. The server's xids are its own, not a
// database's: two replay targets that are databases of one server would
// otherwise take the same xid, and the second XA START be refused with
// 1440 (XAER_DUPID) — or a captured XA ROLLBACK of a prepared xid end
// the other target's transaction. The global transaction id and the
// format id are kept, so the xid stays one the server takes (MariaDB
// takes the same gtrid with another bqual as another xid).
//
// The qualifier keeps its form: inside quotes the suffix goes before the
// closing quote (whatever escapes come before it), in hexadecimal or
// binary as its bytes in that notation, and a missing qualifier (empty by
// default) becomes the suffix alone. suffix must be plain ASCII letters,
// digits, '~', '-', '_' or '.', which need no escape anywhere.
//
// It returns sql as it is and false when sql is not such a statement (XA
// RECOVER, another statement, more than one, one in an executable
// comment), or when the qualifier cannot take the suffix within MaxBqual
// bytes.
func MoveXid(sql, suffix string) (string, bool) {
	x, ok := parseXid(sql)
	if !ok {
		return sql, false
	}
	if !x.hasBqual {
		// No qualifier: the server's default is the empty one.
		return sql[:x.gtridEnd] + ", '" + suffix + "'" + sql[x.gtridEnd:], true
	}
	bq := x.bqual
	if bq.bytes+len(suffix) > MaxBqual {
		return sql, false
	}
	var add string
	switch bq.form {
	case 'x':
		add = hex.EncodeToString([]byte(suffix))
	case 'b':
		var b strings.Builder
		for _, c := range []byte(suffix) {
			fmt.Fprintf(&b, "%08b", c)
		}
		add = b.String()
	default:
		add = suffix
	}
	return sql[:bq.at] + add + sql[bq.at:], true
}

// XidText returns the xid an XA statement names (XA START, BEGIN, END,
// PREPARE, COMMIT or ROLLBACK xid …) as text a statement can name it by
// again ("'pay-7','b1'"): its parts' source text, joined by commas. It is
// false for any other text (MoveXid's rules).
func XidText(sql string) (string, bool) {
	x, ok := parseXid(sql)
	if !ok {
		return "", false
	}
	parts := make([]string, len(x.parts))
	for i, p := range x.parts {
		parts[i] = sql[p[0]:p[1]]
	}
	return strings.Join(parts, ","), true
}

// XidKey returns the xid an XA statement names (as XidText) as the server
// tells xids apart: its global transaction id's bytes, its branch
// qualifier's (empty when not given) and its format id (1 when not
// given). So 'g' is one key with "g", X'67', 0x67, and 'g' with an empty
// qualifier and format 1: a transaction manager's recovery names an xid
// as XA RECOVER FORMAT='SQL' writes it, X'…',X'…',N, not as its XA START
// did. Quoted text is read with the server's default escapes (backslash
// and doubled quotes).
func XidKey(sql string) (string, bool) {
	x, ok := parseXid(sql)
	if !ok {
		return "", false
	}
	key := make([]string, 3)
	key[1], key[2] = "", "1"
	for i, p := range x.parts {
		text := sql[p[0]:p[1]]
		if i == 2 {
			key[2] = strings.TrimLeft(text, "0")
			continue
		}
		b, ok := literalBytes(text)
		if !ok {
			return "", false
		}
		key[i] = hex.EncodeToString(b)
	}
	return strings.Join(key, ","), true
}

// literalBytes reads an xid string literal's bytes: 'text', "text",
// X'hex', 0xhex, B'bits' or 0bbits.
func literalBytes(text string) ([]byte, bool) {
	switch {
	case len(text) >= 2 && (text[0] == '\'' || text[0] == '"'):
		q, in := text[0], text[1:len(text)-1]
		var out []byte
		for i := 0; i < len(in); i++ {
			c := in[i]
			switch {
			case c == q && i+1 < len(in) && in[i+1] == q:
				i++
			case c == '\\' && i+1 < len(in):
				i++
				switch e := in[i]; e {
				case '0':
					c = 0
				case 'b':
					c = '\b'
				case 'n':
					c = '\n'
				case 'r':
					c = '\r'
				case 't':
					c = '\t'
				case 'Z':
					c = 26
				case '%', '_':
					out = append(out, '\\') // kept with its backslash
					c = e
				default:
					c = e
				}
			}
			out = append(out, c)
		}
		return out, true
	case len(text) >= 3 && (text[0] == 'x' || text[0] == 'X') && text[1] == '\'':
		return hexBytes(text[2 : len(text)-1])
	case len(text) >= 3 && (text[0] == 'b' || text[0] == 'B') && text[1] == '\'':
		return bitBytes(text[2 : len(text)-1])
	case len(text) > 2 && text[:2] == "0x":
		return hexBytes(text[2:])
	case len(text) > 2 && text[:2] == "0b":
		return bitBytes(text[2:])
	}
	return nil, false
}

// hexBytes decodes hexadecimal digits, an odd count padded in front.
func hexBytes(h string) ([]byte, bool) {
	if len(h)%2 == 1 {
		h = "0" + h
	}
	b, err := hex.DecodeString(h)
	return b, err == nil
}

// bitBytes decodes binary digits, padded in front to whole bytes.
func bitBytes(bits string) ([]byte, bool) {
	if pad := len(bits) % 8; pad != 0 {
		bits = strings.Repeat("0", 8-pad) + bits
	}
	out := make([]byte, 0, len(bits)/8)
	for i := 0; i < len(bits); i += 8 {
		var c byte
		for _, d := range bits[i : i+8] {
			if d != '0' && d != '1' {
				return nil, false
			}
			c = c<<1 | byte(d-'0')
		}
		out = append(out, c)
	}
	return out, true
}

// xid is an XA statement's xid: its parts' spans in the text (gtrid,
// then bqual and formatID when given), where the gtrid ends, and the
// qualifier's literal.
type xid struct {
	parts    [][2]int
	gtridEnd int
	hasBqual bool
	bqual    xidLiteral
}

// parseXid reads the xid of a single XA statement that names one.
func parseXid(sql string) (xid, bool) {
	toks, err := Lex(sql)
	if err != nil || len(toks) < 3 || !toks[0].Is(sql, "XA") {
		return xid{}, false
	}
	for _, t := range toks {
		if t.Exec {
			return xid{}, false
		}
	}
	if sts := Statements(sql, toks); len(sts) != 1 {
		return xid{}, false
	}
	switch strings.ToUpper(toks[1].Text(sql)) {
	case "START", "BEGIN", "END", "PREPARE", "COMMIT", "ROLLBACK":
	default:
		return xid{}, false
	}
	gtrid, ok := xidPart(sql, toks, 2)
	if !ok {
		return xid{}, false
	}
	x := xid{gtridEnd: toks[gtrid.next-1].End}
	x.parts = append(x.parts, [2]int{toks[2].Start, x.gtridEnd})
	i := gtrid.next
	if i >= len(toks) || !toks[i].IsPunct(sql, ",") {
		return x, true
	}
	bq, ok := xidPart(sql, toks, i+1)
	if !ok {
		return xid{}, false
	}
	x.hasBqual, x.bqual = true, bq
	x.parts = append(x.parts, [2]int{toks[i+1].Start, toks[bq.next-1].End})
	if j := bq.next; j+1 < len(toks) && toks[j].IsPunct(sql, ",") && toks[j+1].Kind == TokNumber {
		x.parts = append(x.parts, [2]int{toks[j+1].Start, toks[j+1].End})
	}
	return x, true
}

// xidLiteral is one string of an xid as the statement spells it: where
// the suffix goes (at), in what form ('q' quoted, 'x' hexadecimal, 'b'
// binary), its length in bytes at most, and the index of the token after
// it.
type xidLiteral struct {
	at, bytes, next int
	form            byte
}

// xidPart reads the xid string at toks[i]: 'text', "text", X'hex',
// 0xhex, B'bits' or 0bbits (the server's text_string).
func xidPart(sql string, toks []Token, i int) (xidLiteral, bool) {
	if i >= len(toks) {
		return xidLiteral{}, false
	}
	t := toks[i]
	switch t.Kind {
	case TokString:
		// Escapes make the bytes fewer than the text: the text's length
		// bounds them.
		return xidLiteral{at: t.End - 1, bytes: t.End - t.Start - 2, next: i + 1, form: 'q'}, true
	case TokIdent:
		// X'…' and B'…' lex as a word and the string right after it.
		if i+1 >= len(toks) || toks[i+1].Kind != TokString || toks[i+1].Start != t.End || sql[toks[i+1].Start] != '\'' {
			return xidLiteral{}, false
		}
		s := toks[i+1]
		n := s.End - s.Start - 2
		switch strings.ToUpper(t.Text(sql)) {
		case "X":
			return xidLiteral{at: s.End - 1, bytes: n / 2, next: i + 2, form: 'x'}, true
		case "B":
			return xidLiteral{at: s.End - 1, bytes: (n + 7) / 8, next: i + 2, form: 'b'}, true
		}
	case TokNumber:
		text := t.Text(sql)
		if len(text) > 2 && text[0] == '0' {
			switch text[1] {
			case 'x':
				return xidLiteral{at: t.End, bytes: (len(text) - 1) / 2, next: i + 1, form: 'x'}, true
			case 'b':
				return xidLiteral{at: t.End, bytes: (len(text) - 2 + 7) / 8, next: i + 1, form: 'b'}, true
			}
		}
	}
	return xidLiteral{}, false
}
