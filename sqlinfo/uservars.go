package sqlinfo

import (
	"slices"
	"strings"
)

// A VarAssign is a user variable a statement assigns, and what its value
// comes from (UserVarFlow).
type VarAssign struct {
	// Name is the variable's name, lower-cased (user variables' names are
	// not case-sensitive), without its @.
	Name string
	// Reads are the user variables its value reads.
	Reads []string
	// Chosen: its value holds a function whose value each server chooses
	// anew, beyond what replay sets (Info.ChosenValues): UUID(), RAND()
	// without a seed, SYSDATE() …; or a stored procedure may have given
	// it one (CALL p(@out): the routine's body is not in the capture).
	Chosen bool
	// Keeps: the variable keeps its value when the statement assigns it
	// nothing (SELECT … INTO that finds no row): the old value may stay.
	Keeps bool
}

// UserVarFlow reads how sql moves values through user variables: the
// ones it assigns, in order (SET @a = …, @b = …; SELECT … INTO @a, @b;
// @a := …), and the ones it reads besides. A SET's assignments are read
// one by one (a := inside one's value assigns with it); any other
// statement's assignments take their value from the whole statement. The
// definition of a routine, trigger or event runs nothing: it has none.
// ok is false for a text that names a user variable and cannot be lexed.
func UserVarFlow(sql string) (assigns []VarAssign, reads []string, ok bool) {
	if strings.IndexByte(sql, '@') < 0 {
		return nil, nil, true
	}
	toks, err := Lex(sql)
	if err != nil {
		return nil, nil, false
	}
	for _, st := range Statements(sql, toks) {
		if defines(sql, st) {
			return assigns, reads, true // its body is the rest of the text
		}
		if as, ok := setAssignments(sql, st); ok && !(len(as) == 1 && as[0].Name == "names" && strings.Contains(as[0].Value, ",")) {
			// (SET NAMES x, @a = …: the assignment reader takes the rest
			// for the names' value; read below, as a whole statement.)
			for _, a := range as {
				if !strings.HasPrefix(a.Name, "@") || strings.HasPrefix(a.Name, "@@") {
					continue // a session variable
				}
				vt, err := Lex(a.Value)
				if err != nil {
					return nil, nil, false
				}
				va := VarAssign{Name: strings.ToLower(a.Name[1:])}
				var inner []string
				va.Reads, va.Chosen, inner = valueFlow(a.Value, vt, nil)
				for _, n := range inner {
					assigns = append(assigns, VarAssign{Name: n, Reads: va.Reads, Chosen: va.Chosen})
				}
				assigns = append(assigns, va)
			}
			continue
		}
		var names []string
		into := false
		for i, t := range st {
			if t.Kind != TokVariable || strings.HasPrefix(t.Text(sql), "@@") {
				continue
			}
			switch {
			case i+1 < len(st) && st[i+1].IsPunct(sql, ":="):
				names = append(names, userVarName(sql, t))
			case intoList(sql, st, i):
				names, into = append(names, userVarName(sql, t)), true
			case st[0].Is(sql, "SET") && i+1 < len(st) && st[i+1].IsPunct(sql, "=") && (i == 1 || st[i-1].IsPunct(sql, ",")):
				// A SET the assignment reader leaves (SET GLOBAL x = 1,
				// @a = 2): replay does not run it either.
				names = append(names, userVarName(sql, t))
			}
		}
		vr, chosen, _ := valueFlow(sql, st, names)
		outs := callArguments(sql, st)
		if len(names) == 0 && len(outs) == 0 {
			reads = append(reads, vr...)
			continue
		}
		for _, n := range names {
			assigns = append(assigns, VarAssign{Name: n, Reads: vr, Chosen: chosen, Keeps: into})
		}
		if len(names) == 0 {
			reads = append(reads, vr...)
		}
		for _, n := range outs {
			// An OUT or INOUT parameter gets what the routine chose, which
			// the capture does not show; an IN one keeps its value.
			assigns = append(assigns, VarAssign{Name: n, Reads: []string{n}, Chosen: true, Keeps: true})
		}
	}
	return assigns, reads, true
}

// callArguments are the user variables a CALL passes as whole arguments
// (CALL p(1, @out)): the routine may assign them.
func callArguments(sql string, st []Token) []string {
	var names []string
	for _, n := range callArgs(sql, st) {
		if n != "" && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return names
}

// callArgs are a CALL's arguments by position: a user variable passed
// whole (lower-cased, without its @), "" for anything else.
func callArgs(sql string, st []Token) []string {
	if len(st) < 4 || !st[0].Is(sql, "CALL") {
		return nil
	}
	var args []string
	depth, arg := 0, -1
	for i, t := range st {
		switch {
		case t.IsPunct(sql, "("):
			depth++
			if depth == 1 {
				arg = 0
				args = append(args, "")
			}
		case t.IsPunct(sql, ")"):
			depth--
		case depth == 1 && t.IsPunct(sql, ","):
			arg++
			args = append(args, "")
		case t.Kind == TokVariable && depth == 1 && !strings.HasPrefix(t.Text(sql), "@@") &&
			(st[i-1].IsPunct(sql, "(") || st[i-1].IsPunct(sql, ",")) &&
			i+1 < len(st) && (st[i+1].IsPunct(sql, ")") || st[i+1].IsPunct(sql, ",")):
			args[arg] = userVarName(sql, t)
		}
	}
	return args
}

// CallArguments reads a CALL: the procedure's schema (as written, "" when
// unqualified) and name, and its arguments by position (callArgs). ok is
// false for any other statement.
func CallArguments(sql string) (schema, name string, args []string, ok bool) {
	toks, err := Lex(sql)
	if err != nil || len(toks) < 2 || !toks[0].Is(sql, "CALL") {
		return "", "", nil, false
	}
	part := func(t Token) string { return Unquote(t.Text(sql)) }
	schema, name = "", part(toks[1])
	if len(toks) >= 4 && toks[2].IsPunct(sql, ".") {
		schema, name = part(toks[1]), part(toks[3])
	}
	return schema, name, callArgs(sql, toks), true
}

// defines reports whether st begins the definition of a stored routine,
// trigger or event (CREATE [OR REPLACE] [DEFINER = …] PROCEDURE …).
func defines(sql string, st []Token) bool {
	if len(st) < 2 || !st[0].Is(sql, "CREATE") {
		return false
	}
	for _, t := range st[1:min(len(st), 12)] {
		if t.Is(sql, "PROCEDURE") || t.Is(sql, "FUNCTION") || t.Is(sql, "TRIGGER") || t.Is(sql, "EVENT") {
			return true
		}
	}
	return false
}

// userVarName is a user variable token's name, lower-cased, without @.
func userVarName(sql string, t Token) string {
	return strings.ToLower(Unquote(t.Text(sql)[1:]))
}

// intoList reports whether the variable at i is one of an INTO's targets
// (SELECT … INTO @a, @b).
func intoList(sql string, st []Token, i int) bool {
	for j := i - 1; j >= 0; j-- {
		switch {
		case st[j].Is(sql, "INTO"):
			return true
		case st[j].IsPunct(sql, ","):
			if j == 0 || st[j-1].Kind != TokVariable {
				return false
			}
			j-- // the variable before the comma
		default:
			return false
		}
	}
	return false
}

// valueFlow reads the value tokens toks of sql: the user variables it
// reads (but the ones named in assigned), whether it holds a chosen value
// (VarAssign), and the variables a := inside it assigns.
func valueFlow(sql string, toks []Token, assigned []string) (reads []string, chosen bool, inner []string) {
	for i, t := range toks {
		switch {
		case t.Kind == TokVariable:
			if strings.HasPrefix(t.Text(sql), "@@") {
				continue // a session variable
			}
			name := userVarName(sql, t)
			switch {
			case i+1 < len(toks) && toks[i+1].IsPunct(sql, ":="):
				if !slices.Contains(assigned, name) {
					inner = append(inner, name)
				}
				continue // assigned here, not read
			case slices.Contains(assigned, name) && (intoList(sql, toks, i) || i+1 < len(toks) && toks[i+1].IsPunct(sql, "=")):
				continue
			}
			reads = append(reads, name)
		case t.Kind == TokIdent && i+1 < len(toks) && toks[i+1].IsPunct(sql, "(") && !tableAt(sql, toks, i):
			name := strings.ToLower(t.Text(sql))
			if chosenFuncs[name] && (name != "rand" || i+2 < len(toks) && toks[i+2].IsPunct(sql, ")")) {
				chosen = true
			}
		case t.Is(sql, "CURRENT_USER") || t.Is(sql, "CURRENT_ROLE"):
			chosen = true
		}
	}
	return reads, chosen, inner
}
