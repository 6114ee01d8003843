package sqlinfo

import (
	"fmt"
	"slices"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/opcode"
	"github.com/pingcap/tidb/pkg/parser/test_driver"
)

// Point says which rows a statement touches when its text names them by
// equality: one table, and either a WHERE that is a conjunction of
// column = value and column IN (value, …), or the rows an INSERT (or
// REPLACE) … VALUES writes. Values are the statement's literals or its
// parameters (?, by position), which a caller resolves with an execute's
// bound values. Replay's ordering gate uses it to tell, with the table's
// primary key, whether two statements can lock the same row.
type Point struct {
	Table Table
	// Where: each column constrained by equality, with its values
	// (column names lower-case).
	Where map[string][]PointValue
	// Cols and Rows: an INSERT's columns (lower-case) and the values of
	// each row it writes.
	Cols []string
	Rows [][]PointValue
	// Set lists the columns an UPDATE, or an INSERT's ON DUPLICATE KEY
	// UPDATE, assigns (lower-case): an assignment to a key column moves
	// the row to a key the statement does not name.
	Set []string
	// Subquery: the statement holds a subquery, which may read rows,
	// of its own table too, that neither Where nor Rows names.
	Subquery bool
}

// PointValue is a literal (Param -1), the Param-th parameter, or an
// expression whose value the text does not give (unknownValue).
type PointValue struct {
	Param int
	Lit   string
}

const unknownValue = -2

// pointOf reads the rows of a single-table statement.
func pointOf(st ast.StmtNode) *Point {
	p := pointOfStmt(st)
	if p != nil {
		v := &subqueryVisitor{}
		st.Accept(v)
		p.Subquery = v.found
	}
	return p
}

func pointOfStmt(st ast.StmtNode) *Point {
	params := paramOrder(st)
	switch x := st.(type) {
	case *ast.UpdateStmt:
		if t, ok := singleTable(x.TableRefs); ok {
			p := whereOf(t, x.Where, params)
			if p != nil {
				p.Set = assigned(x.List)
			}
			return p
		}
	case *ast.DeleteStmt:
		if x.IsMultiTable {
			return nil
		}
		if t, ok := singleTable(x.TableRefs); ok {
			return whereOf(t, x.Where, params)
		}
	case *ast.SelectStmt:
		if x.From != nil {
			if t, ok := singleTable(x.From); ok {
				return whereOf(t, x.Where, params)
			}
		}
	case *ast.InsertStmt:
		if x.Select != nil || len(x.Columns) == 0 || len(x.Lists) == 0 {
			return nil
		}
		t, ok := singleTable(x.Table)
		if !ok {
			return nil
		}
		p := &Point{Table: t}
		for _, c := range x.Columns {
			p.Cols = append(p.Cols, c.Name.L)
		}
		for _, row := range x.Lists {
			if len(row) != len(p.Cols) {
				return nil
			}
			vals := make([]PointValue, len(row))
			for i, e := range row {
				v, ok := valueOf(e, params)
				if !ok {
					// An expression: a row with it in a key column is not
					// named (Keys), in another it names its row all the same
					// (the writes rebuilt from row images: CAST(X'…' AS BINARY)).
					v = PointValue{Param: unknownValue}
				}
				vals[i] = v
			}
			p.Rows = append(p.Rows, vals)
		}
		p.Set = assigned(x.OnDuplicate)
		return p
	}
	return nil
}

// assigned lists the columns assignments set (lower-case).
func assigned(as []*ast.Assignment) []string {
	var cols []string
	for _, a := range as {
		if a.Column != nil && !slices.Contains(cols, a.Column.Name.L) {
			cols = append(cols, a.Column.Name.L)
		}
	}
	return cols
}

// subqueryVisitor finds a subquery anywhere in a statement.
type subqueryVisitor struct{ found bool }

func (v *subqueryVisitor) Enter(n ast.Node) (ast.Node, bool) {
	if _, ok := n.(*ast.SubqueryExpr); ok {
		v.found = true
	}
	return n, v.found
}

func (v *subqueryVisitor) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// singleTable returns the one table a FROM (or UPDATE's table list)
// names, without a join or subquery.
func singleTable(refs *ast.TableRefsClause) (Table, bool) {
	if refs == nil || refs.TableRefs == nil || refs.TableRefs.Right != nil {
		return Table{}, false
	}
	src, ok := refs.TableRefs.Left.(*ast.TableSource)
	if !ok {
		return Table{}, false
	}
	tn, ok := src.Source.(*ast.TableName)
	if !ok {
		return Table{}, false
	}
	return Table{tn.Schema.O, tn.Name.O}, true
}

// whereOf reads a WHERE that is a conjunction of equalities and IN lists.
func whereOf(t Table, where ast.ExprNode, params map[int]int) *Point {
	p := &Point{Table: t, Where: map[string][]PointValue{}}
	if where == nil || !p.conj(where, params) || len(p.Where) == 0 {
		return nil
	}
	return p
}

func (p *Point) conj(e ast.ExprNode, params map[int]int) bool {
	switch x := e.(type) {
	case *ast.ParenthesesExpr:
		return p.conj(x.Expr, params)
	case *ast.BinaryOperationExpr:
		switch x.Op {
		case opcode.LogicAnd:
			return p.conj(x.L, params) && p.conj(x.R, params)
		case opcode.EQ:
			col, val := x.L, x.R
			if _, ok := col.(*ast.ColumnNameExpr); !ok {
				col, val = val, col
			}
			c, ok := col.(*ast.ColumnNameExpr)
			if !ok {
				return true // not a column's equality: it narrows nothing we know
			}
			v, ok := valueOf(val, params)
			if !ok {
				return true
			}
			p.add(c.Name.Name.L, v)
			return true
		}
		return true // another condition: the equalities still bound the rows
	case *ast.PatternInExpr:
		c, ok := x.Expr.(*ast.ColumnNameExpr)
		if !ok || x.Not || x.Sel != nil {
			return true
		}
		var vals []PointValue
		for _, e := range x.List {
			v, ok := valueOf(e, params)
			if !ok {
				return true
			}
			vals = append(vals, v)
		}
		p.addAll(c.Name.Name.L, vals)
		return true
	}
	return true
}

// add constrains col to v as well. (Two equalities on one column in a
// conjunction leave the rows of either: the keys of both are kept, which
// can only make two statements look like they conflict.)
func (p *Point) add(col string, v PointValue) {
	if !slices.Contains(p.Where[col], v) {
		p.Where[col] = append(p.Where[col], v)
	}
}

// addAll is add of each of vs: an IN list's values, found by a map
// past a few (each compared with every value before it, a list of 2,000
// cost 2 million comparisons, and replay analyses a text three times).
func (p *Point) addAll(col string, vs []PointValue) {
	have := p.Where[col]
	if len(have)+len(vs) <= 16 {
		for _, v := range vs {
			p.add(col, v)
		}
		return
	}
	seen := make(map[PointValue]bool, len(have)+len(vs))
	for _, v := range have {
		seen[v] = true
	}
	for _, v := range vs {
		if !seen[v] {
			seen[v] = true
			have = append(have, v)
		}
	}
	p.Where[col] = have
}

// valueOf reads a literal or a parameter marker.
func valueOf(e ast.ExprNode, params map[int]int) (PointValue, bool) {
	switch x := e.(type) {
	case *test_driver.ParamMarkerExpr:
		i, ok := params[x.Offset]
		return PointValue{Param: i}, ok
	case ast.ValueExpr:
		return PointValue{Param: -1, Lit: fmt.Sprint(x.GetValue())}, true
	case *ast.UnaryOperationExpr:
		if v, ok := x.V.(ast.ValueExpr); ok && x.Op == opcode.Minus {
			return PointValue{Param: -1, Lit: "-" + fmt.Sprint(v.GetValue())}, true
		}
	}
	return PointValue{}, false
}

// paramOrder numbers a statement's parameter markers by their place in
// the text (the order an execute binds them), keyed by offset.
func paramOrder(st ast.StmtNode) map[int]int {
	v := &paramVisitor{}
	st.Accept(v)
	slices.Sort(v.offsets)
	out := make(map[int]int, len(v.offsets))
	for i, o := range v.offsets {
		out[o] = i
	}
	return out
}

type paramVisitor struct{ offsets []int }

func (v *paramVisitor) Enter(n ast.Node) (ast.Node, bool) {
	if p, ok := n.(*test_driver.ParamMarkerExpr); ok {
		v.offsets = append(v.offsets, p.Offset)
	}
	return n, false
}

func (v *paramVisitor) Leave(n ast.Node) (ast.Node, bool) { return n, true }

// Keys returns the statement's rows as keys "table\x00v1\x01v2…" on the
// table's primary key pk (lower-case columns, in order): every
// combination of the values the key's columns are constrained to (at most
// maxKeys), or each inserted row's. resolve gives a parameter's value as
// text (false when it has none). Nil when the rows are not all named
// (a key column without an equality, too many combinations, a parameter
// without a value): the caller then knows only the table.
func (p *Point) Keys(table string, pk []string, resolve func(int) (string, bool)) []string {
	if p == nil || len(pk) == 0 {
		return nil
	}
	val := func(v PointValue) (string, bool) {
		switch {
		case v.Param == unknownValue:
			return "", false
		case v.Param < 0:
			return v.Lit, true
		}
		return resolve(v.Param)
	}
	prefix := strings.ToLower(table) + "\x00"
	if p.Rows != nil {
		idx := make([]int, len(pk))
		for i, c := range pk {
			if idx[i] = slices.Index(p.Cols, c); idx[i] < 0 {
				return nil
			}
		}
		keys := make([]string, 0, len(p.Rows))
		for _, row := range p.Rows {
			parts := make([]string, len(pk))
			for i := range pk {
				s, ok := val(row[idx[i]])
				if !ok {
					return nil
				}
				parts[i] = s
			}
			keys = append(keys, prefix+strings.Join(parts, "\x01"))
		}
		return keys
	}
	keys := []string{prefix}
	for i, c := range pk {
		vals := p.Where[c]
		if len(vals) == 0 || len(keys)*len(vals) > maxKeys {
			return nil
		}
		next := make([]string, 0, len(keys)*len(vals))
		for _, k := range keys {
			for _, v := range vals {
				s, ok := val(v)
				if !ok {
					return nil
				}
				if i > 0 {
					s = "\x01" + s
				}
				next = append(next, k+s)
			}
		}
		keys = next
	}
	return keys
}

// maxKeys bounds the keys of one statement.
const maxKeys = 64
