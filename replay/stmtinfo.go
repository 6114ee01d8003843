package replay

import (
	"strings"
	"sync"

	"github.com/pingcap/tidb/pkg/parser"
	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/format"
	_ "github.com/pingcap/tidb/pkg/parser/test_driver" // literal values for the parser
	"github.com/tandemdb/tandem/sqldigest"
)

// Class is how sysbench counts a statement.
type Class uint8

const (
	ClassOther Class = iota
	ClassRead
	ClassWrite
)

func (c Class) String() string { return [...]string{"other", "read", "write"}[c] }

// StmtInfo is what replay needs to know of a statement shape.
type StmtInfo struct {
	Digest sqldigest.Digest
	Class  Class
	// Nondeterministic: NOW(), RAND(), UUID(), CONNECTION_ID(), LIMIT
	// without ORDER BY and the like; its content is not compared.
	Nondeterministic bool
	// Ordered: ORDER BY fixes the row order, so order differences count.
	Ordered bool
	// TableDDL: CREATE TABLE or ALTER TABLE, rewritten per target engine.
	TableDDL bool
	Begin    bool // BEGIN / START TRANSACTION
	End      bool // COMMIT / ROLLBACK
}

var nondeterministicFuncs = map[string]bool{
	"now": true, "sysdate": true, "current_timestamp": true, "curdate": true, "current_date": true,
	"curtime": true, "current_time": true, "localtime": true, "localtimestamp": true, "utc_timestamp": true,
	"utc_date": true, "utc_time": true, "unix_timestamp": true, "rand": true, "uuid": true, "uuid_short": true,
	"connection_id": true, "last_insert_id": true, "found_rows": true, "row_count": true, "sleep": true,
	"benchmark": true, "get_lock": true, "release_lock": true, "is_free_lock": true, "database": true, "user": true,
	"current_user": true, "session_user": true, "system_user": true,
}

// analyzer caches StmtInfo per digest, and per exact text so that a
// statement seen again (every execute of a prepared statement) costs a map
// lookup, not a lexer pass; safe for concurrent use.
type analyzer struct {
	mu     sync.Mutex
	cache  map[string]*StmtInfo // by digest ID
	textMu sync.RWMutex
	byText map[string]*StmtInfo
}

// Bounds of the analyzer's caches: a capture of text queries with literals
// has as many texts as statements.
const (
	maxCachedTexts = 50000
	maxCachedText  = 4096
)

func newAnalyzer() *analyzer {
	return &analyzer{cache: map[string]*StmtInfo{}, byText: map[string]*StmtInfo{}}
}

// info returns sql's StmtInfo, parsing once per digest.
func (a *analyzer) info(sql string) *StmtInfo {
	a.textMu.RLock()
	si := a.byText[sql]
	a.textMu.RUnlock()
	if si != nil {
		return si
	}
	si = a.byDigest(sql)
	if len(sql) <= maxCachedText {
		a.textMu.Lock()
		if len(a.byText) >= maxCachedTexts {
			clear(a.byText)
		}
		a.byText[sql] = si
		a.textMu.Unlock()
	}
	return si
}

func (a *analyzer) byDigest(sql string) *StmtInfo {
	d := sqldigest.Of(sql)
	a.mu.Lock()
	si := a.cache[d.ID]
	a.mu.Unlock()
	if si != nil {
		return si
	}
	si = analyze(sql)
	si.Digest = d
	a.mu.Lock()
	if len(a.cache) > 100000 {
		a.cache = map[string]*StmtInfo{} // a pathological capture; start over
	}
	a.cache[d.ID] = si
	a.mu.Unlock()
	return si
}

// detector walks an AST looking for nondeterminism.
type detector struct{ found bool }

func (d *detector) Enter(n ast.Node) (ast.Node, bool) {
	switch x := n.(type) {
	case *ast.FuncCallExpr:
		if nondeterministicFuncs[x.FnName.L] {
			d.found = true
		}
	case *ast.SelectStmt:
		if x.Limit != nil && x.OrderBy == nil {
			d.found = true
		}
	case *ast.VariableExpr:
		d.found = true // session or user variables depend on the session
	}
	return n, d.found
}

func (d *detector) Leave(n ast.Node) (ast.Node, bool) { return n, true }

func analyze(sql string) *StmtInfo {
	si := &StmtInfo{}
	first := strings.ToUpper(firstWord(sql))
	switch first {
	case "SELECT", "WITH", "(":
		si.Class = ClassRead
	case "INSERT", "UPDATE", "DELETE", "REPLACE", "LOAD":
		si.Class = ClassWrite
	case "BEGIN":
		si.Begin = true
	case "START":
		si.Begin = strings.Contains(strings.ToUpper(sql), "TRANSACTION")
	case "COMMIT", "ROLLBACK":
		si.End = true
	}
	stmts, _, err := parser.New().ParseSQL(sql)
	if err != nil || len(stmts) == 0 {
		return si
	}
	for _, st := range stmts {
		d := &detector{}
		st.Accept(d)
		si.Nondeterministic = si.Nondeterministic || d.found
		switch x := st.(type) {
		case *ast.SelectStmt:
			si.Ordered = x.OrderBy != nil
		case *ast.SetOprStmt:
			si.Ordered = x.OrderBy != nil
		case *ast.CreateTableStmt, *ast.AlterTableStmt:
			si.TableDDL = true
		}
	}
	return si
}

// skipComments drops leading blanks and comments (not /*! … */, which
// the server runs).
func skipComments(sql string) string {
	s := strings.TrimLeft(sql, " \t\r\n")
	for strings.HasPrefix(s, "/*") && !strings.HasPrefix(s, "/*!") {
		end := strings.Index(s, "*/")
		if end < 0 {
			return ""
		}
		s = strings.TrimLeft(s[end+2:], " \t\r\n")
	}
	return s
}

func firstWord(sql string) string {
	s := skipComments(sql)
	if strings.HasPrefix(s, "(") {
		return "("
	}
	if i := strings.IndexAny(s, " \t\r\n(;"); i >= 0 {
		return s[:i]
	}
	return s
}

// rewriteEngine returns sql with its table engine set to engine and the
// table options in options applied (CREATE TABLE gets an ENGINE if it had
// none; ALTER TABLE changes only an ENGINE it names). ok is false when sql
// cannot be parsed or restored; the caller then runs it as it is.
func rewriteEngine(sql, engine, options string) (string, bool) {
	p := parser.New()
	st, err := p.ParseOneStmt(sql, "", "")
	if err != nil {
		return sql, false
	}
	extra, err := optionList(p, options)
	if err != nil {
		return sql, false
	}
	set := func(opts []*ast.TableOption, add bool) []*ast.TableOption {
		found := false
		for _, o := range opts {
			if o.Tp == ast.TableOptionEngine {
				o.StrValue, found = engine, true
			}
		}
		if !found && !add {
			return opts
		}
		if !found {
			opts = append(opts, &ast.TableOption{Tp: ast.TableOptionEngine, StrValue: engine})
		}
		for _, e := range extra {
			replaced := false
			for i, o := range opts {
				if o.Tp == e.Tp {
					opts[i], replaced = e, true
				}
			}
			if !replaced {
				opts = append(opts, e)
			}
		}
		return opts
	}
	switch x := st.(type) {
	case *ast.CreateTableStmt:
		if x.ReferTable != nil {
			return sql, true // CREATE TABLE … LIKE copies the source's engine
		}
		x.Options = set(x.Options, true)
	case *ast.AlterTableStmt:
		for _, spec := range x.Specs {
			if spec.Tp == ast.AlterTableOption {
				spec.Options = set(spec.Options, false)
			}
		}
	default:
		return sql, true
	}
	var b strings.Builder
	if err := st.Restore(format.NewRestoreCtx(format.DefaultRestoreFlags, &b)); err != nil {
		return sql, false
	}
	return b.String(), true
}

// optionList parses "ROW_FORMAT=COMPRESSED KEY_BLOCK_SIZE=8" as table options.
func optionList(p *parser.Parser, options string) ([]*ast.TableOption, error) {
	if strings.TrimSpace(options) == "" {
		return nil, nil
	}
	st, err := p.ParseOneStmt("CREATE TABLE t (a INT) "+options, "", "")
	if err != nil {
		return nil, err
	}
	return st.(*ast.CreateTableStmt).Options, nil
}
