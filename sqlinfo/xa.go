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
