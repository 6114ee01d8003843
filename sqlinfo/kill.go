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
	found := false
	begins := true // at a statement's start
	for _, t := range toks {
		if t.IsPunct(sql, ";") {
			begins = true
			continue
		}
		if begins && t.Is(sql, "KILL") {
			if found {
				return Kill{}, true // two: none to map
			}
			found = true
		}
		begins = false
	}
	if !found {
		return Kill{}, false
	}
	// The one mappable form: the whole text is KILL [HARD|SOFT]
	// [CONNECTION|QUERY] number [;].
	if err != nil || len(toks) == 0 || !toks[0].Is(sql, "KILL") {
		return Kill{}, true
	}
	var k Kill
	i := 1
	if i < len(toks) && (toks[i].Is(sql, "HARD") || toks[i].Is(sql, "SOFT")) {
		i++
	}
	if i < len(toks) && toks[i].Is(sql, "CONNECTION") {
		i++
	} else if i < len(toks) && toks[i].Is(sql, "QUERY") {
		k.Query = true
		i++
	}
	if i >= len(toks) || toks[i].Kind != TokNumber {
		return Kill{}, true // QUERY ID, USER, an expression
	}
	id, perr := strconv.ParseUint(toks[i].Text(sql), 10, 64)
	if perr != nil || id == 0 {
		return Kill{}, true
	}
	end := i + 1
	if end < len(toks) && toks[end].IsPunct(sql, ";") {
		end++
	}
	if end != len(toks) {
		return Kill{}, true
	}
	k.ID, k.IDStart, k.IDEnd = id, toks[i].Start, toks[i].End
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
