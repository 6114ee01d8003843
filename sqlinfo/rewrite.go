package sqlinfo

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/tandemdb/tandem/internal/textclip"
)

// ErrUnrewritable is wrapped by RewriteEngine's errors: a CREATE or ALTER
// TABLE whose engine cannot be set without guessing at its text.
var ErrUnrewritable = errors.New("sqlinfo: cannot set the table's engine")

// edit replaces sql[start:end] with text.
type edit struct {
	start, end int
	text       string
}

// option is a table option: NAME=value.
type option struct {
	name, value string
}

// ParseOptions reads table options as a target gives them
// ("ROW_FORMAT=COMPRESSED KEY_BLOCK_SIZE=8", "COMMENT='a, b'").
func ParseOptions(options string) ([]option, error) {
	toks, err := Lex(options)
	if err != nil {
		return nil, fmt.Errorf("%w: options %q: %v", ErrUnrewritable, options, err)
	}
	var out []option
	for i := 0; i < len(toks); {
		t := toks[i]
		if t.Kind != TokIdent {
			return nil, fmt.Errorf("%w: options %q: expected an option name at %q", ErrUnrewritable, options, t.Text(options))
		}
		name := strings.ToUpper(t.Text(options))
		i++
		if name == "DEFAULT" && i < len(toks) && toks[i].Kind == TokIdent {
			name += " " + strings.ToUpper(toks[i].Text(options))
			i++
		}
		if i < len(toks) && toks[i].IsPunct(options, "=") {
			i++
		}
		if i >= len(toks) || toks[i].Kind == TokPunct {
			return nil, fmt.Errorf("%w: options %q: option %s has no value", ErrUnrewritable, options, name)
		}
		out = append(out, option{name, toks[i].Text(options)})
		i++
		if i < len(toks) && toks[i].IsPunct(options, ",") {
			i++
		}
	}
	return out, nil
}

// RewriteEngine returns sql with the engine of every CREATE TABLE and of
// every ALTER TABLE … ENGINE in it set to engine, and the table options in
// options (ParseOptions' form) set or added, by editing the original text:
// only the engine name and the options change, everything else is kept
// byte for byte (MariaDB syntax the TiDB parser does not know included). A
// CREATE TABLE without an ENGINE gets one after its definitions; CREATE
// TABLE … LIKE copies its source's engine and is left alone, as is every
// other statement. An error wraps ErrUnrewritable.
func RewriteEngine(sql, engine, options string) (string, error) {
	opts, err := ParseOptions(options)
	if err != nil {
		return sql, err
	}
	toks, lexErr := Lex(sql)
	var edits []edit
	for _, st := range Statements(sql, toks) {
		if len(st) < 2 || !isTableDDL(sql, st) {
			continue
		}
		if lexErr != nil {
			return sql, fmt.Errorf("%w: %v", ErrUnrewritable, lexErr)
		}
		var es []edit
		var err error
		if st[0].Is(sql, "CREATE") {
			es, err = rewriteCreate(sql, st, engine, opts)
		} else {
			es, err = rewriteAlter(sql, st, engine, opts)
		}
		if err != nil {
			return sql, err
		}
		edits = append(edits, es...)
	}
	if lexErr != nil && len(toks) > 0 && isTableDDL(sql, toks) {
		return sql, fmt.Errorf("%w: %v", ErrUnrewritable, lexErr)
	}
	if len(edits) == 0 {
		return sql, nil
	}
	slices.SortStableFunc(edits, func(a, b edit) int { return a.start - b.start })
	var b strings.Builder
	at := 0
	for _, e := range edits {
		b.WriteString(sql[at:e.start])
		b.WriteString(e.text)
		at = e.end
	}
	b.WriteString(sql[at:])
	return b.String(), nil
}

// tableAfter returns the index of the token after "… TABLE [IF NOT EXISTS] name".
func tableAfter(sql string, st []Token) (int, error) {
	i := slices.IndexFunc(st, func(t Token) bool { return t.Is(sql, "TABLE") })
	if i < 0 {
		return 0, fmt.Errorf("%w: no TABLE keyword", ErrUnrewritable)
	}
	i++
	for i < len(st) && st[i].Kind == TokIdent && (st[i].Is(sql, "IF") || st[i].Is(sql, "NOT") || st[i].Is(sql, "EXISTS")) {
		i++
	}
	_, next, ok := tableName(sql, st, i)
	if !ok {
		return 0, fmt.Errorf("%w: cannot read the table name in %q", ErrUnrewritable, textclip.Clip(sql, 80))
	}
	return next, nil
}

func rewriteCreate(sql string, st []Token, engine string, opts []option) ([]edit, error) {
	i, err := tableAfter(sql, st)
	if err != nil {
		return nil, err
	}
	insertAt := st[i-1].End // after the name
	if i < len(st) && st[i].Is(sql, "LIKE") || i+1 < len(st) && st[i].IsPunct(sql, "(") && st[i+1].Is(sql, "LIKE") {
		return nil, nil // CREATE TABLE … LIKE copies the source's engine
	}
	if i < len(st) && st[i].IsPunct(sql, "(") && !(i+1 < len(st) && (st[i+1].Is(sql, "SELECT") || st[i+1].Is(sql, "WITH"))) {
		end, ok := matching(sql, st, i)
		if !ok {
			return nil, fmt.Errorf("%w: the definitions of %q do not close", ErrUnrewritable, textclip.Clip(sql, 80))
		}
		insertAt = st[end].End
		i = end + 1
	}
	// The table options run to PARTITION, the SELECT, or the end.
	regionEnd := len(st)
	for j := i; j < len(st); j++ {
		afterEq := j > 0 && st[j-1].IsPunct(sql, "=")
		if afterEq {
			continue
		}
		if st[j].Kind == TokIdent && slices.Contains([]string{"PARTITION", "SELECT", "WITH", "AS", "IGNORE", "REPLACE", "VALUES", "TABLE"}, strings.ToUpper(st[j].Text(sql))) ||
			st[j].IsPunct(sql, "(") {
			regionEnd = j
			break
		}
	}
	if regionEnd > i {
		insertAt = st[regionEnd-1].End
	}
	return setOptions(sql, st[i:regionEnd], st[regionEnd:], insertAt, engine, opts, true)
}

func rewriteAlter(sql string, st []Token, engine string, opts []option) ([]edit, error) {
	i, err := tableAfter(sql, st)
	if err != nil {
		return nil, err
	}
	// Table options in an ALTER stand at the top level, at the start of a
	// specification or after another option's value.
	var region []Token
	depth := 0
	for j := i; j < len(st); j++ {
		switch {
		case st[j].IsPunct(sql, "("):
			depth++
		case st[j].IsPunct(sql, ")"):
			depth--
		}
		if depth == 0 && st[j].Is(sql, "PARTITION") {
			return setOptions(sql, region, st[j:], 0, engine, nil, false)
		}
		if depth == 0 {
			region = append(region, st[j])
		}
	}
	return setOptions(sql, region, nil, 0, engine, opts, false)
}

// setOptions edits the ENGINE in region (and in the partition clause part)
// and applies opts. With add, a missing ENGINE and missing options are
// inserted at insertAt; without, options are applied only when the region
// names an ENGINE (an ALTER that changes the engine).
func setOptions(sql string, region, part []Token, insertAt int, engine string, opts []option, add bool) ([]edit, error) {
	var edits []edit
	found := false
	valueAt := func(toks []Token, k int) int { // index of the value of the option named at k
		if k+1 < len(toks) && toks[k+1].IsPunct(sql, "=") {
			k++
		}
		if k+1 < len(toks) && toks[k+1].Kind != TokPunct {
			return k + 1
		}
		return -1
	}
	engineAt := func(toks []Token, k int, top bool) bool {
		if !toks[k].Is(sql, "ENGINE") {
			return false
		}
		if k+1 < len(toks) && toks[k+1].IsPunct(sql, "=") {
			return true
		}
		// ENGINE without "=": only where a table option can stand, so that
		// a column named engine is never taken for one.
		if !top || k == 0 {
			return top
		}
		p := toks[k-1]
		return p.IsPunct(sql, ",") || p.IsPunct(sql, ")") || k >= 2 && toks[k-2].IsPunct(sql, "=") || p.Is(sql, "STORAGE")
	}
	for k := range region {
		if engineAt(region, k, true) {
			if v := valueAt(region, k); v >= 0 {
				edits = append(edits, edit{region[v].Start, region[v].End, engine})
				found = true
			}
		}
	}
	for k := range part {
		if engineAt(part, k, false) {
			if v := valueAt(part, k); v >= 0 {
				edits = append(edits, edit{part[v].Start, part[v].End, engine})
			}
		}
	}
	if !found && add {
		edits = append(edits, edit{insertAt, insertAt, " ENGINE=" + engine})
	}
	if !found && !add {
		return edits, nil
	}
	for _, o := range opts {
		words := strings.Fields(o.name)
		done := false
		for k := range region {
			if !region[k].Is(sql, words[0]) || len(words) == 2 && !(k+1 < len(region) && region[k+1].Is(sql, words[1])) {
				continue
			}
			if v := valueAt(region, k+len(words)-1); v >= 0 {
				edits = append(edits, edit{region[v].Start, region[v].End, o.value})
				done = true
				break
			}
		}
		if !done {
			at := insertAt
			if !add && len(region) > 0 {
				at = region[len(region)-1].End
			}
			edits = append(edits, edit{at, at, " " + o.name + "=" + o.value})
		}
	}
	return edits, nil
}

// matching returns the index of the ")" closing the "(" at st[i].
func matching(sql string, st []Token, i int) (int, bool) {
	depth := 0
	for j := i; j < len(st); j++ {
		switch {
		case st[j].IsPunct(sql, "("):
			depth++
		case st[j].IsPunct(sql, ")"):
			depth--
			if depth == 0 {
				return j, true
			}
		}
	}
	return 0, false
}
