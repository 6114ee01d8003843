// Package targets describes a server Tandem works against — a name, a DSN
// (credentials come from here, never from a capture), a storage engine and
// its create options — and checks one before anything runs on it.
package targets

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/tandemdb/tandem/sqlinfo"
)

// Sentinel errors.
var (
	ErrBadSpec       = errors.New("target: bad target")
	ErrUnreachable   = errors.New("target: unreachable")
	ErrLogin         = errors.New("target: login refused")
	ErrEngineMissing = errors.New("target: engine not available")
	ErrNoDatabase    = errors.New("target: no such database")
)

// Target is one server to work against.
type Target struct {
	Name string
	DSN  string
	// Engine is the storage engine tables get (canonical, as SHOW ENGINES
	// names it when known: InnoDB, ROCKSDB, TokuDB, Aria, MyISAM …).
	Engine string
	// Options are extra table options, e.g. "ROW_FORMAT=COMPRESSED KEY_BLOCK_SIZE=8".
	Options  string
	Baseline bool
	// CA is a PEM file of the CA that signed the server's certificate:
	// every connection is TLS, verified against it (see connect.go).
	CA string
	// Shared is set by replay and the proxy, never by a spec: how many
	// targets before this one are on its server (Servers), and for a
	// shadow one more (it may be on the primary's server). A server's
	// xids are its own, not a database's: a target with Shared > 0 gives
	// its XA statements xids of their own (replay; sqlinfo.MoveXid).
	Shared int
}

// Known engine spellings, mapped to what SHOW ENGINES says.
var engineNames = map[string]string{
	"innodb": "InnoDB", "rocksdb": "ROCKSDB", "myrocks": "ROCKSDB", "tokudb": "TokuDB",
	"aria": "Aria", "myisam": "MyISAM", "memory": "MEMORY",
}

// CanonicalEngine returns the SHOW ENGINES spelling of an engine name.
func CanonicalEngine(name string) string {
	if c, ok := engineNames[strings.ToLower(name)]; ok {
		return c
	}
	return name
}

// Parse reads "name=DSN[,engine=X][,options=…][,ca=FILE][,baseline]". An
// options value may hold commas (options=COMMENT='a, b'): a comma starts a
// new key only when a known key follows it.
func Parse(spec string) (Target, error) {
	name, rest, ok := strings.Cut(spec, "=")
	// A name holding what a DSN holds is a DSN given without a name (its
	// "=" was a parameter's).
	if !ok || name == "" || rest == "" || strings.ContainsAny(name, "@:/(") {
		return Target{}, fmt.Errorf("%w %q: want name=DSN[,engine=X][,options=…][,ca=FILE][,baseline], e.g. innodb=root@tcp(127.0.0.1:3306)/sbtest,engine=innodb", ErrBadSpec, redactSpec(spec))
	}
	parts := strings.Split(rest, ",")
	t := Target{Name: name, DSN: parts[0], Engine: "InnoDB"}
	last := ""
	for _, p := range parts[1:] {
		k, v, _ := strings.Cut(p, "=")
		switch key := strings.ToLower(strings.TrimSpace(k)); {
		case key == "engine":
			if strings.TrimSpace(v) == "" {
				return Target{}, fmt.Errorf("%w %q: engine= names no engine (innodb, rocksdb, tokudb, …)", ErrBadSpec, redactSpec(spec))
			}
			t.Engine = CanonicalEngine(strings.TrimSpace(v))
		case key == "options":
			t.Options = strings.TrimSpace(v)
		case key == "baseline" && v == "":
			t.Baseline = true
		case key == "ca":
			t.CA = strings.TrimSpace(v)
		case last == "options":
			t.Options += "," + p // a comma inside the options
			continue
		case !plainKey(k):
			// Not a key at all: the DSN went on past a comma (one in a
			// password?); the text is not quoted, it may be the password.
			return Target{}, fmt.Errorf("%w %s: after the DSN, a comma is followed by text that is no key (engine, options, ca, baseline); a DSN cannot hold a comma here (a password with one: use --config, whose dsn may)", ErrBadSpec, name)
		default:
			return Target{}, fmt.Errorf("%w %q: unknown key %q (engine, options, ca, baseline)", ErrBadSpec, redactSpec(spec), k)
		}
		last = strings.ToLower(strings.TrimSpace(k))
	}
	if err := t.validate(); err != nil {
		return Target{}, err
	}
	return t, nil
}

// plainKey reports whether k looks like an option's key: letters and
// underscores.
func plainKey(k string) bool {
	k = strings.TrimSpace(k)
	for _, c := range k {
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && c != '_' {
			return false
		}
	}
	return k != ""
}

// Baseline checks a list of targets as one command uses them: no two
// share a name, and at most one is marked baseline. It returns the
// baseline's index: the one marked, else the first. Replay, sweep,
// footprint and prepare all choose it here.
func Baseline(ts []Target) (int, error) {
	base, marked := 0, ""
	for i, t := range ts {
		for _, o := range ts[:i] {
			if o.Name == t.Name {
				return 0, fmt.Errorf("two targets are named %q; give each its own name (name=DSN)", t.Name)
			}
		}
		if t.Baseline {
			if marked != "" {
				return 0, fmt.Errorf("targets %s and %s are both marked baseline; mark one", marked, t.Name)
			}
			base, marked = i, t.Name
		}
	}
	return base, nil
}

// validate checks the DSN and the options.
func (t Target) validate() error {
	if t.DSN == "" {
		return fmt.Errorf("%w %s: no DSN", ErrBadSpec, t.Name)
	}
	if _, err := mysql.ParseDSN(t.DSN); err != nil {
		return fmt.Errorf("%w %s: DSN %q: %v", ErrBadSpec, t.Name, RedactDSN(t.DSN), err)
	}
	if _, err := sqlinfo.ParseOptions(t.Options); err != nil {
		return fmt.Errorf("%w %s: %v", ErrBadSpec, t.Name, err)
	}
	if _, err := t.config(); err != nil {
		return err
	}
	return nil
}

// Database is the schema the DSN names ("" if none).
func (t Target) Database() string {
	c, err := mysql.ParseDSN(t.DSN)
	if err != nil {
		return ""
	}
	return c.DBName
}

// Addr is the DSN's address, for messages.
func (t Target) Addr() string {
	c, err := mysql.ParseDSN(t.DSN)
	if err != nil {
		return "?"
	}
	return c.Addr
}

// Engine is one row of SHOW ENGINES.
type Engine struct {
	Name    string
	Support string // YES, DEFAULT, NO, DISABLED
}

// Info is what Check found out.
type Info struct {
	Version string
	Engines []Engine
	// TLS is the cipher the check's connection negotiated ("" in clear).
	TLS string
}

// Available lists the engines the server can use.
func (i Info) Available() []string {
	var out []string
	for _, e := range i.Engines {
		if e.Support == "YES" || e.Support == "DEFAULT" {
			out = append(out, e.Name)
		}
	}
	return out
}

// Open opens the target's database handle (the DSN's schema need not
// exist), with the DSN's TLS, timeouts and session variables (see
// connect.go).
func (t Target) Open() (*sql.DB, error) {
	dsn, err := t.sqlDSN()
	if err != nil {
		return nil, err
	}
	return sql.Open("mysql", dsn)
}

// CheckDatabase verifies that the database the DSN names exists: replay
// connects to it (a DSN naming none connects to none, and passes).
func (t Target) CheckDatabase(ctx context.Context, db *sql.DB) error {
	name := t.Database()
	if name == "" {
		return nil
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", name).Scan(&n); err != nil {
		if err := t.loginErr(err); err != nil {
			return err
		}
		return fmt.Errorf("%w: target %s: cannot look for database %s on %s: %v", ErrUnreachable, t.Name, name, t.Addr(), err)
	}
	if n == 0 {
		return fmt.Errorf("%w: target %s: database %q does not exist on %s; create it and load the starting data (tandem prepare, or a dump of the primary) before replaying, or name another in the DSN",
			ErrNoDatabase, t.Name, name, t.Addr())
	}
	return nil
}

// loginErr is ErrLogin for err when the server refused the login (1045,
// 1698), else nil: the server answered, so the network is not what to
// look at.
func (t Target) loginErr(err error) error {
	if me := (*mysql.MySQLError)(nil); errors.As(err, &me) && (me.Number == 1045 || me.Number == 1698) {
		return fmt.Errorf("%w: target %s: %s refused the login: %v; check the DSN's user and password", ErrLogin, t.Name, t.Addr(), err)
	}
	return nil
}

// Check connects, records the version, and verifies the engine is there.
func (t Target) Check(ctx context.Context, db *sql.DB) (Info, error) {
	var info Info
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&info.Version); err != nil {
		if err := t.loginErr(err); err != nil {
			return info, err
		}
		return info, fmt.Errorf("%w: target %s: cannot query %s: %v", ErrUnreachable, t.Name, t.Addr(), err)
	}
	var name string
	db.QueryRowContext(ctx, "SHOW SESSION STATUS LIKE 'Ssl_cipher'").Scan(&name, &info.TLS)
	rows, err := db.QueryContext(ctx, "SHOW ENGINES")
	if err != nil {
		return info, fmt.Errorf("target %s: SHOW ENGINES: %w", t.Name, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	for rows.Next() {
		vals := make([]sql.RawBytes, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return info, err
		}
		info.Engines = append(info.Engines, Engine{Name: string(vals[0]), Support: strings.ToUpper(string(vals[1]))})
	}
	if err := rows.Err(); err != nil {
		return info, err
	}
	sort.SliceStable(info.Engines, func(i, j int) bool {
		return info.Engines[i].Support == "DEFAULT" && info.Engines[j].Support != "DEFAULT"
	})
	for _, e := range info.Engines {
		if strings.EqualFold(e.Name, t.Engine) && (e.Support == "YES" || e.Support == "DEFAULT") {
			return info, nil
		}
	}
	return info, fmt.Errorf("%w: target %s: engine %s is not available on %s (available: %s)",
		ErrEngineMissing, t.Name, t.Engine, info.Version, strings.Join(info.Available(), ", "))
}

// SameTables returns an error naming the first two targets that are one
// server's one database (servers and unknown are what Servers returned
// for them): every write would run twice on the same rows, and comparing
// them would compare a server with itself. Two targets naming one
// database where one could not be told apart are refused too, saying
// why.
func SameTables(ts []Target, servers []int, unknown []error) error {
	for i := range ts {
		for j := range i {
			if ts[i].Database() != ts[j].Database() {
				continue
			}
			for _, k := range []int{j, i} {
				if unknown[k] != nil {
					return fmt.Errorf("targets %s and %s name one database (%q), and whether they are one server could not be told: %w", ts[j].Name, ts[i].Name, ts[i].Database(), unknown[k])
				}
			}
			if servers[i] == servers[j] {
				return fmt.Errorf("targets %s and %s are the same tables: one server (a lock taken through %s is held there as seen through %s) and one database (%q): each would get every write twice and compare with itself; give each target a database or server of its own",
					ts[j].Name, ts[i].Name, ts[j].Addr(), ts[i].Addr(), ts[i].Database())
			}
		}
	}
	return nil
}

// Servers tells which targets are one server (dbs[i] is ts[i]'s handle):
// servers[i] is the index of the first target on ts[i]'s server. It is
// proved, not guessed from addresses: a lock taken on one (GET_LOCK, of a
// name made for this check) is seen in use from the other only when they
// are one server, whatever address, DSN, proxy or container each was
// reached through. Targets on one server share what is the server's, not
// a database's: its xids (SharedBefore), and its tables when they name
// one database (SameTables). A target that cannot be asked (a server that
// refuses GET_LOCK, as some Galera nodes do) has servers[i] = -1 and
// unknown[i] saying why.
func Servers(ctx context.Context, ts []Target, dbs []*sql.DB) (servers []int, unknown []error) {
	servers, unknown = make([]int, len(ts)), make([]error, len(ts))
	for i := range servers {
		servers[i] = i
	}
	if len(ts) < 2 {
		return servers, unknown
	}
	tag := fmt.Sprintf("tandem-same-%d-%d", os.Getpid(), time.Now().UnixNano())
	conns := make([]*sql.Conn, len(ts))
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close() // ends the session, and its lock with it
			}
		}
	}()
	for i, db := range dbs {
		c, err := db.Conn(ctx)
		if err != nil {
			servers[i], unknown[i] = -1, fmt.Errorf("target %s: %w", ts[i].Name, err)
			continue
		}
		conns[i] = c
		var got sql.NullInt64
		if err := c.QueryRowContext(ctx, "SELECT GET_LOCK(?, 0)", fmt.Sprintf("%s-%d", tag, i)).Scan(&got); err != nil || got.Int64 != 1 {
			if err == nil {
				err = errors.New("the lock was not granted")
			}
			servers[i], unknown[i] = -1, fmt.Errorf("target %s: taking a lock to tell whether it is another target's server: %w", ts[i].Name, err)
		}
	}
	for i := range ts {
		if unknown[i] != nil {
			continue
		}
		for j := range i {
			if servers[j] != j {
				continue // asked through the first target of its server (or not known)
			}
			var holder sql.NullInt64
			if err := conns[i].QueryRowContext(ctx, "SELECT IS_USED_LOCK(?)", fmt.Sprintf("%s-%d", tag, j)).Scan(&holder); err != nil {
				servers[i], unknown[i] = -1, fmt.Errorf("target %s: %w", ts[i].Name, err)
				break
			}
			if holder.Valid {
				servers[i] = j
				break
			}
		}
	}
	return servers, unknown
}

// SharedBefore returns, for each target, how many targets before it are
// on its server (servers as Servers returned): 0 for a server's first.
// A target whose server is not known may share one: it gets a number no
// other target has (len(servers) + i).
func SharedBefore(servers []int) []int {
	out := make([]int, len(servers))
	for i, s := range servers {
		if s < 0 {
			out[i] = len(servers) + i
			continue
		}
		for j := range i {
			if servers[j] == s {
				out[i]++
			}
		}
	}
	return out
}

// RedactDSN returns dsn with its password, if it has one, replaced by
// "***", for messages: a DSN that does not parse is quoted back to say
// what is wrong with it, and its password must not go with it. It reads
// as go-sql-driver does, on text the driver would refuse too: the user
// information is what comes before the last "@" before the last "/" (a
// password may hold "@"; parameters after the "/" may too), and the
// password what follows its first ":". A text without that "@" whose
// first ":" comes before any "(" or "/" is taken for user:password cut
// short (a password holding ",", which --target splits at).
func RedactDSN(dsn string) string {
	head := dsn
	if slash := strings.LastIndexByte(dsn, '/'); slash >= 0 {
		head = dsn[:slash]
	}
	if at := strings.LastIndexByte(head, '@'); at >= 0 {
		if colon := strings.IndexByte(dsn[:at], ':'); colon >= 0 {
			return dsn[:colon+1] + "***" + dsn[at:]
		}
		return dsn
	}
	colon := strings.IndexByte(dsn, ':')
	if colon >= 0 && !strings.ContainsAny(dsn[:colon], "(/") {
		end := len(dsn)
		if i := strings.IndexAny(dsn[colon:], "(/"); i >= 0 {
			end = colon + i
		}
		return dsn[:colon+1] + "***" + dsn[end:]
	}
	return dsn
}

// redactSpec is RedactDSN for a whole --target value, name=DSN[,key=…].
func redactSpec(spec string) string {
	name, rest, ok := strings.Cut(spec, "=")
	if !ok || strings.ContainsAny(name, "@:/(") {
		return RedactDSN(spec) // no name: the text may be a DSN alone
	}
	return name + "=" + RedactDSN(rest)
}
