package sqlinfo

import (
	"strconv"
	"strings"
)

// Kill is a KILL statement, as MariaDB and MySQL take it:
// KILL [HARD | SOFT] [CONNECTION | QUERY] id, KILL … QUERY ID query_id,
// KILL … USER name.
type Kill struct {
	// ID is the connection id it names; 0 when it names none replay can
	// map: a query id (QUERY ID), a user (USER), an expression, or a
	// text with more than the one KILL statement.
	ID uint64
	// Query: it ends the connection's statement, not the connection.
	Query bool
	// IDStart and IDEnd are the id's byte offsets in the text, for
	// putting another id in its place (Rewrite).
	IDStart, IDEnd int
}

// ParseKill reports whether sql holds a KILL statement (in any of its
// statements, or in an executable comment), and which.
func ParseKill(sql string) (Kill, bool) {
	toks, err := Lex(sql)
	stmts := Statements(sql, toks)
	kills := 0
	for _, st := range stmts {
		if st[0].Is(sql, "KILL") {
			kills++
		}
	}
	if kills == 0 {
		return Kill{}, false
	}
	// The one mappable form: the whole text is KILL [HARD|SOFT]
	// [CONNECTION|QUERY] number [;].
	if err != nil || len(stmts) != 1 {
		return Kill{}, true
	}
	st := stmts[0]
	var k Kill
	i := 1
	if i < len(st) && (st[i].Is(sql, "HARD") || st[i].Is(sql, "SOFT")) {
		i++
	}
	if i < len(st) && st[i].Is(sql, "CONNECTION") {
		i++
	} else if i < len(st) && st[i].Is(sql, "QUERY") {
		k.Query = true
		i++
	}
	if i != len(st)-1 || st[i].Kind != TokNumber {
		return Kill{}, true // QUERY ID, USER, an expression, more after the id
	}
	id, perr := strconv.ParseUint(st[i].Text(sql), 10, 64)
	if perr != nil || id == 0 {
		return Kill{}, true
	}
	k.ID, k.IDStart, k.IDEnd = id, st[i].Start, st[i].End
	return k, true
}

// Rewrite returns sql (the text k was parsed from) naming id instead.
func (k Kill) Rewrite(sql string, id uint64) string {
	var b strings.Builder
	b.WriteString(sql[:k.IDStart])
	b.WriteString(strconv.FormatUint(id, 10))
	b.WriteString(sql[k.IDEnd:])
	return b.String()
}
