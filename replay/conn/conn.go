// Package conn is one connection to one target server, for replay and
// live shadows: it dials and authenticates (go-mysql's client does the
// handshake, with its authentication plugins), then owns the socket alone
// and sends every command on Tandem's own wire codec — text queries,
// prepared statements with their captured types, long data, cursor
// fetches, schema changes — and reads each response to its end, folding it
// into a Result (rows, row checksums, the final OK's counts, or the error,
// even one after several result sets). It knows nothing of scheduling.
//
// Every call honours its context: a deadline bounds the call, and a
// context that ends closes the connection, so a hung server never holds a
// caller. A connection is used by one goroutine at a time; BusyFor may be
// read from any.
package conn

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/pingcap/tidb/pkg/parser/charset"
	"github.com/tandemdb/tandem/store"
	"github.com/tandemdb/tandem/wire"
)

// Capabilities a captured session's client may have asked for that change
// what the server answers; the rest are the connection's own business.
const ResultCaps = mysql.CLIENT_FOUND_ROWS | mysql.CLIENT_IGNORE_SPACE | mysql.CLIENT_MULTI_STATEMENTS |
	mysql.CLIENT_MULTI_RESULTS | mysql.CLIENT_PS_MULTI_RESULTS | mysql.CLIENT_LOCAL_FILES

// DefaultCaps are asked for when the capture did not record the client's:
// multi-statement texts and CALLs answer as most clients want.
const DefaultCaps = mysql.CLIENT_MULTI_STATEMENTS | mysql.CLIENT_MULTI_RESULTS | mysql.CLIENT_PS_MULTI_RESULTS

// Config says how to reach and log in to a server.
type Config struct {
	Addr, User, Password string
	// DB is the schema to start in ("" for none).
	DB string
	// Caps are the result-relevant capabilities (ResultCaps) to ask for.
	Caps uint32
	// CacheMetadata asks a MariaDB server for MARIADB_CLIENT_CACHE_METADATA
	// (as the captured client did): executes of a prepared statement then
	// come without the column definitions the prepare already gave.
	CacheMetadata bool
	// Interactive makes the session's wait_timeout the server's
	// interactive_timeout, as CLIENT_INTERACTIVE does.
	Interactive bool
	// Collation is the handshake's collation id (0: go-mysql's default,
	// utf8mb4_general_ci).
	Collation byte
	TLS       *tls.Config
	// TLSFallback: a server that offers no TLS is reached in clear
	// (go-sql-driver's tls=preferred).
	TLSFallback bool
	// Vars are session variables set right after login ("name" =
	// "value" as the DSN gives them, e.g. innodb_lock_wait_timeout=1),
	// in order, as go-sql-driver sets a DSN's parameters.
	Vars [][2]string
	// Dial opens the TCP connection (internal/blockio or rawio); nil uses
	// net.Dialer.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Timeout bounds the dial and the handshake. Default 10s.
	Timeout time.Duration
}

// bufSize is a replay connection's read and write buffer, as MariaDB's
// client library's (net_buffer_length): a replay holds one connection per
// captured session, and the proxy's 64 KiB each way came to 128 MiB of a
// thousand-session replay's heap. The buffers are pooled
// (wire.NewPooledConn): a connection holds them only while a call runs.
const bufSize = 16 << 10

// Cause says what went wrong when an error is not the server's.
type Cause = byte

// Error is a failure that is not the server's answer: the connection is
// broken after it.
type Error struct {
	Cause Cause // store.Cause*
	Op    string
	Err   error
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: %s: %v", e.Op, store.CauseText(e.Cause), e.Err)
}
func (e *Error) Unwrap() error { return e.Err }

// ServerError is an ERR packet.
type ServerError struct {
	Code    uint16
	State   string
	Message string
}

func (e *ServerError) Error() string {
	return fmt.Sprintf("error %d (%s): %s", e.Code, e.State, e.Message)
}

// Result is a response folded for comparison.
type Result struct {
	// Results counts the results read: one, or several for a CALL or a
	// multi-statement text (an error ends the response and counts too).
	Results int
	// Sets counts the result sets among them; Columns is the last one's.
	Sets    int
	Columns uint32
	// Rows and Sums are over every result set.
	Rows uint64
	Sums wire.RowSums
	// Affected, InsertID and Warnings are the last OK's (or EOF's warnings).
	Affected, InsertID uint64
	Warnings           uint16
	Status             uint16
}

// Stmt is a statement prepared on a connection.
type Stmt struct {
	ID      uint32
	Params  int
	Columns int
	// bound are the parameter types the server holds for the statement,
	// from the last execute that sent them (nil: none it is sure of). An
	// execute whose types are these need not send them again, as
	// libmysqlclient does not.
	bound []wire.ParamType
}

// Conn is an authenticated connection.
type Conn struct {
	nc          net.Conn
	wc          *wire.Conn
	life        context.Context
	stop        func() bool
	broken      error
	dl          time.Time
	buf         []byte
	params      []wire.Param
	busy        atomic.Int64 // when the call in progress began (unix ns), 0 when idle
	interrupted atomic.Bool  // Interrupt ended it
	seq         byte         // the sequence id of the last packet read
	// ID is the server's connection id; TLS the cipher suite it runs
	// ("" in clear).
	ID  uint32
	TLS string
	// Bulk: the login asked for MariaDB's bulk execute (BulkExecute).
	Bulk bool
	// CacheMetadata: the login asked for MariaDB's metadata caching (see
	// Config), and result sets say whether column definitions follow.
	CacheMetadata bool
	// setVars sets the session variables of Config (Vars, Interactive)
	// again after a reset.
	setVars string
	// prelude is a text query that goes out with the next command.
	prelude []byte
	// hold: the connection keeps its buffers between calls (Hold).
	hold bool
}

// Dial connects and logs in. The connection lives until Close or until
// ctx ends.
func Dial(ctx context.Context, cfg Config) (*Conn, error) {
	c, err := dial(ctx, cfg)
	if err != nil && cfg.TLS != nil && cfg.TLSFallback && errors.Is(err, errNoServerTLS) {
		cfg.TLS = nil
		return dial(ctx, cfg)
	}
	return c, err
}

// errNoServerTLS: TLS was asked for and the server offers none.
var errNoServerTLS = errors.New("the server offers no TLS")

func dial(ctx context.Context, cfg Config) (*Conn, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	dial := cfg.Dial
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	deadline := time.Now().Add(cfg.Timeout)
	dctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	var raw net.Conn
	var login *extLogin
	want := wire.MariaDBClientStmtBulkOps
	if cfg.CacheMetadata {
		want |= wire.MariaDBClientCacheMetadata
	}
	dialer := func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err == nil {
			c.SetDeadline(deadline) // the handshake is bounded too
			raw = c
			login = &extLogin{Conn: c, want: want}
			return login, nil
		}
		return c, err
	}
	caps := cfg.Caps & ResultCaps
	gc, err := client.ConnectWithDialer(dctx, "tcp", cfg.Addr, cfg.User, cfg.Password, cfg.DB, dialer, func(c *client.Conn) error {
		for _, f := range []uint32{mysql.CLIENT_FOUND_ROWS, mysql.CLIENT_IGNORE_SPACE, mysql.CLIENT_MULTI_STATEMENTS,
			mysql.CLIENT_MULTI_RESULTS, mysql.CLIENT_PS_MULTI_RESULTS, mysql.CLIENT_LOCAL_FILES} {
			if caps&f != 0 {
				c.SetCapability(f)
			} else {
				c.UnsetCapability(f)
			}
		}
		// The classic COM_STMT_EXECUTE layout, which the wire codec writes.
		c.UnsetCapability(mysql.CLIENT_QUERY_ATTRIBUTES)
		if cfg.TLS != nil {
			c.SetTLSConfig(cfg.TLS)
		}
		if cfg.Collation != 0 {
			if col, err := collationName(cfg.Collation); err == nil {
				return c.SetCollation(col)
			}
		}
		return nil
	})
	if err != nil {
		if raw != nil {
			raw.Close()
		}
		if cfg.TLS != nil && strings.Contains(err.Error(), "does not support TLS") {
			err = fmt.Errorf("%w: %v", errNoServerTLS, err)
		}
		return nil, dialError(err)
	}
	c := &Conn{nc: gc.Conn.Conn, life: ctx, ID: gc.GetConnectionID(),
		Bulk: login.asked&wire.MariaDBClientStmtBulkOps != 0, CacheMetadata: login.asked&wire.MariaDBClientCacheMetadata != 0}
	if c.nc == login {
		c.nc = raw // in clear: the login is done, read and write the socket itself
	}
	if tc, ok := c.nc.(*tls.Conn); ok {
		c.TLS = tls.CipherSuiteName(tc.ConnectionState().CipherSuite)
	}
	c.wc = wire.NewPooledConn(c.nc, bufSize, bufSize)
	c.nc.SetDeadline(time.Time{})
	c.stop = context.AfterFunc(ctx, func() { c.nc.Close() })
	var set []string
	if cfg.Interactive {
		set = append(set, "wait_timeout = @@global.interactive_timeout")
	}
	for _, v := range cfg.Vars {
		set = append(set, v[0]+" = "+v[1])
	}
	if len(set) > 0 {
		var r Result
		c.setVars = "SET SESSION " + strings.Join(set, ", ")
		if err := c.Query(ctx, c.setVars, &r); err != nil {
			c.Close()
			return nil, fmt.Errorf("conn: setting the session variables %s: %w", strings.Join(set, ", "), err)
		}
	}
	return c, nil
}

// collationName names a handshake collation id.
func collationName(id byte) (string, error) {
	c, err := charset.GetCollationByID(int(id))
	if err != nil {
		return "", err
	}
	return c.Name, nil
}

// dialError classifies a failure to connect or log in.
func dialError(err error) error {
	var me *mysql.MyError
	if errors.As(err, &me) {
		if me.Code == mysql.ER_CON_COUNT_ERROR {
			return &Error{Cause: store.CauseTooMany, Op: "connect", Err: &ServerError{Code: me.Code, State: me.State, Message: me.Message}}
		}
		return &ServerError{Code: me.Code, State: me.State, Message: me.Message}
	}
	cause := store.CauseRefused
	if isTimeout(err) {
		cause = store.CauseTimeout
	} else if errors.Is(err, context.Canceled) {
		cause = store.CauseCancelled
	}
	return &Error{Cause: cause, Op: "connect", Err: err}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// BusyFor is how long the call in progress has run (0 when idle).
func (c *Conn) BusyFor() time.Duration {
	if b := c.busy.Load(); b != 0 {
		return time.Duration(time.Now().UnixNano() - b)
	}
	return 0
}

// Broken reports the failure that broke the connection, or nil.
func (c *Conn) Broken() error { return c.broken }

// begin starts a call: it applies ctx's deadline and, for a context other
// than the connection's own, closes the connection if ctx ends first. The
// call ends with c.end(stop) (deferred), stop being what begin returned:
// nil for the connection's own context, so that a call allocates nothing
// for its bookkeeping (a closure per statement was one of the replay's
// allocations per statement).
func (c *Conn) begin(ctx context.Context, op string) (stop func() bool, err error) {
	if c.broken != nil {
		return nil, c.broken
	}
	if err := ctx.Err(); err != nil {
		return nil, c.fail(op, err, ctx)
	}
	dl, _ := ctx.Deadline()
	if !dl.Equal(c.dl) {
		c.nc.SetDeadline(dl)
		c.dl = dl
	}
	c.busy.Store(time.Now().UnixNano())
	if ctx == c.life || ctx.Done() == nil {
		return nil, nil
	}
	return context.AfterFunc(ctx, func() { c.nc.Close() }), nil
}

// end ends a call begun by begin, which returned stop. The connection's
// buffers go back to their pools unless it holds them (Hold) or something
// is left in them (a call that failed, or a prelude answered ahead).
func (c *Conn) end(stop func() bool) {
	if stop != nil {
		stop()
	}
	if !c.hold {
		c.wc.Release()
	}
	c.busy.Store(0)
}

// fail classifies a client-side failure; the connection is broken after it.
func (c *Conn) fail(op string, err error, ctx context.Context) error {
	var se *ServerError
	if errors.As(err, &se) {
		return err
	}
	cause := store.CauseReset
	switch {
	case c.interrupted.Load():
		cause = store.CauseTimeout
	case ctx != nil && ctx.Err() != nil || c.life.Err() != nil:
		cause = store.CauseCancelled
		if ctx == nil || ctx.Err() == nil {
			ctx = c.life // a call with no context of its own (a close) ended with the connection's life
		}
		if errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
			cause = store.CauseTimeout
		}
	case isTimeout(err):
		cause = store.CauseTimeout
	case errors.Is(err, wire.ErrMalformed):
		cause = store.CauseProtocol
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE), errors.Is(err, net.ErrClosed):
		cause = store.CauseReset
	}
	e := &Error{Cause: cause, Op: op, Err: err}
	if c.broken == nil {
		c.broken = e
		c.nc.Close()
	}
	return e
}

// Interrupt ends the call under way (from another goroutine): the
// connection closes, and the call fails with cause timeout. A shadow's
// watchdog uses it on a server that stopped answering.
func (c *Conn) Interrupt() {
	c.interrupted.Store(true)
	c.nc.Close()
}

// Close closes the connection without a word to the server.
func (c *Conn) Close() error {
	if c.stop != nil {
		c.stop()
	}
	if c.broken == nil {
		c.broken = &Error{Cause: store.CauseReset, Op: "use", Err: net.ErrClosed}
	}
	return c.nc.Close()
}

// Quit sends COM_QUIT and closes the connection.
func (c *Conn) Quit() {
	if c.broken == nil {
		c.prelude = nil // nothing of it matters once the session ends
		c.buf = append(c.buf[:0], mysql.COM_QUIT)
		c.send()
	}
	c.Hold(false)
	c.Close()
}

// Hold(true) keeps the connection's buffers between calls, for one that
// runs call after call (a connection of --concurrency, which takes a
// batch of units at a time): by default they go back to the pools shared
// by all connections at the end of every call, as suits the connections
// of a thousand captured sessions that mostly wait. Hold(false) gives
// them back if nothing is left in them. Call it between calls.
func (c *Conn) Hold(on bool) {
	c.hold = on
	c.wc.Hold(on)
}

// send writes c.buf as a command (sequence 0).
func (c *Conn) send() error {
	if c.prelude != nil {
		if _, err := c.wc.WritePacket(0, c.prelude); err != nil {
			return err
		}
	}
	if _, err := c.wc.WritePacket(0, c.buf); err != nil {
		return err
	}
	return c.wc.Flush()
}

// Prelude makes the next command go out behind a text query, in the same
// write (the server reads commands in order): SET insert_id before an
// INSERT costs no round trip of its own. The query's own answer is read
// first; an error it gets is its own (a broken connection is the
// command's).
func (c *Conn) Prelude(sql string) {
	c.prelude = append(append(c.prelude[:0], mysql.COM_QUERY), sql...)
}

// readPrelude reads the answer to a prelude sent with the command.
func (c *Conn) readPrelude(ctx context.Context, op string) error {
	if c.prelude == nil {
		return nil
	}
	c.prelude = nil
	var r Result
	err := c.readResults(ctx, op, false, &r)
	var se *ServerError
	if errors.As(err, &se) {
		return nil
	}
	return err
}

// readPacket reads one payload, joining the frames of a payload of 16 MiB
// or more. Valid until the next read.
func (c *Conn) readPacket() ([]byte, error) {
	seq, p, err := c.wc.ReadFrame()
	c.seq = seq
	if err != nil || len(p) < wire.MaxPayload {
		return p, err
	}
	big := append([]byte(nil), p...)
	for {
		seq, p, err := c.wc.ReadFrame()
		c.seq = seq
		if err != nil {
			return nil, err
		}
		big = append(big, p...)
		if len(p) < wire.MaxPayload {
			return big, nil
		}
	}
}

func serverError(p []byte) error {
	e, err := wire.ParseErr(p)
	if err != nil {
		return err
	}
	return &ServerError{Code: e.Code, State: e.State, Message: e.Message}
}

// simple sends a command answered by one OK or ERR.
func (c *Conn) simple(ctx context.Context, op string, payload []byte) error {
	stop, err := c.begin(ctx, op)
	if err != nil {
		return err
	}
	defer c.end(stop)
	c.buf = append(c.buf[:0], payload...)
	if err := c.send(); err != nil {
		return c.fail(op, err, ctx)
	}
	if err := c.readPrelude(ctx, op); err != nil {
		return err
	}
	p, err := c.readPacket()
	if err != nil {
		return c.fail(op, err, ctx)
	}
	if len(p) > 0 && p[0] == wire.HeaderErr {
		return serverError(p)
	}
	if len(p) == 0 || p[0] != wire.HeaderOK && !(p[0] == wire.HeaderEOF && len(p) < 9) { // COM_SET_OPTION's answer is an EOF
		return c.fail(op, fmt.Errorf("%w: expected OK, got %d bytes starting %#x", wire.ErrMalformed, len(p), first(p)), ctx)
	}
	return nil
}

// SetMultiStatements sends COM_SET_OPTION: multi-statement texts on or
// off for the rest of the session, as a captured client turned them.
func (c *Conn) SetMultiStatements(ctx context.Context, on bool) error {
	opt := byte(1) // MYSQL_OPTION_MULTI_STATEMENTS_OFF
	if on {
		opt = 0
	}
	return c.simple(ctx, "set-option", []byte{mysql.COM_SET_OPTION, opt, 0})
}

func first(p []byte) byte {
	if len(p) == 0 {
		return 0
	}
	return p[0]
}

// InitDB sends COM_INIT_DB: always, whatever schema the connection is in
// (a schema dropped and created again must be selected again).
func (c *Conn) InitDB(ctx context.Context, db string) error {
	return c.simple(ctx, "init-db", append([]byte{mysql.COM_INIT_DB}, db...))
}

// Ping sends COM_PING.
func (c *Conn) Ping(ctx context.Context) error { return c.simple(ctx, "ping", []byte{mysql.COM_PING}) }

// ResetConnection sends COM_RESET_CONNECTION: session variables, user
// variables, temporary tables and prepared statements are gone; the schema
// stays.
func (c *Conn) ResetConnection(ctx context.Context) error {
	if err := c.simple(ctx, "reset-connection", []byte{mysql.COM_RESET_CONNECTION}); err != nil {
		return err
	}
	if c.setVars == "" {
		return nil
	}
	var r Result // the reset cleared them: the target's own session variables again
	return c.Query(ctx, c.setVars, &r)
}

// Query sends COM_QUERY and reads every result into r.
func (c *Conn) Query(ctx context.Context, sql string, r *Result) error {
	stop, err := c.begin(ctx, "query")
	if err != nil {
		return err
	}
	defer c.end(stop)
	c.buf = append(append(c.buf[:0], mysql.COM_QUERY), sql...)
	if err := c.send(); err != nil {
		return c.fail("query", err, ctx)
	}
	if err := c.readPrelude(ctx, "query"); err != nil {
		return err
	}
	return c.readResults(ctx, "query", false, r)
}

// Prepare sends COM_STMT_PREPARE and reads its definitions.
func (c *Conn) Prepare(ctx context.Context, sql string) (*Stmt, error) {
	stop, err := c.begin(ctx, "prepare")
	if err != nil {
		return nil, err
	}
	defer c.end(stop)
	c.buf = append(append(c.buf[:0], mysql.COM_STMT_PREPARE), sql...)
	if err := c.send(); err != nil {
		return nil, c.fail("prepare", err, ctx)
	}
	if err := c.readPrelude(ctx, "prepare"); err != nil {
		return nil, err
	}
	p, err := c.readPacket()
	if err != nil {
		return nil, c.fail("prepare", err, ctx)
	}
	if len(p) > 0 && p[0] == wire.HeaderErr {
		return nil, serverError(p)
	}
	ok, err := wire.ParsePrepareOK(p)
	if err != nil {
		return nil, c.fail("prepare", err, ctx)
	}
	for _, n := range []uint16{ok.Params, ok.Columns} {
		if n == 0 {
			continue
		}
		if err := c.skip(int(n) + 1); err != nil { // definitions, then EOF
			return nil, c.fail("prepare", err, ctx)
		}
	}
	return &Stmt{ID: ok.StmtID, Params: int(ok.Params), Columns: int(ok.Columns)}, nil
}

func (c *Conn) skip(n int) error {
	for range n {
		if _, err := c.readPacket(); err != nil {
			return err
		}
	}
	return nil
}

// CloseStmt sends COM_STMT_CLOSE, which has no response.
func (c *Conn) CloseStmt(st *Stmt) {
	if c.broken != nil {
		return
	}
	c.buf = append(c.buf[:0], mysql.COM_STMT_CLOSE, byte(st.ID), byte(st.ID>>8), byte(st.ID>>16), byte(st.ID>>24))
	if err := c.send(); err != nil {
		c.fail("close", err, nil)
		return
	}
	c.readPrelude(c.life, "close") // a close has no answer; a prelude has
}

// ResetStmt sends COM_STMT_RESET (its long data and cursor are dropped).
func (c *Conn) ResetStmt(ctx context.Context, st *Stmt) error {
	return c.simple(ctx, "reset", []byte{mysql.COM_STMT_RESET, byte(st.ID), byte(st.ID >> 8), byte(st.ID >> 16), byte(st.ID >> 24)})
}

// SendLongData sends one COM_STMT_SEND_LONG_DATA chunk, which has no response.
func (c *Conn) SendLongData(ctx context.Context, st *Stmt, param uint16, data []byte) error {
	stop, err := c.begin(ctx, "long-data")
	if err != nil {
		return err
	}
	defer c.end(stop)
	l := wire.LongData{StmtID: st.ID, Param: param, Data: data}
	c.buf = l.Append(c.buf[:0])
	if err := c.send(); err != nil {
		return c.fail("long-data", err, ctx)
	}
	if err := c.readPrelude(ctx, "long-data"); err != nil {
		return err
	}
	return nil
}

// Execute runs st with the captured parameters (their types as the client
// sent them; long-data parameters are not sent, the server has them) and
// reads the response into r. With a cursor type, the server keeps the rows
// for Fetch. The types go with the execute when sendTypes (the captured
// client sent them with it) or when they are not those the server holds
// for st, so that the server sets up its conversions as often as it did
// for the captured client: a C client sends them once after binding, some
// drivers with every execute.
func (c *Conn) Execute(ctx context.Context, st *Stmt, ps []store.Value, cursor byte, sendTypes bool, r *Result) error {
	if len(ps) != st.Params {
		// What the server answers to an execute with the wrong count; not
		// sent, since the packet cannot be framed for it (nor its prelude,
		// which would go out with the next command).
		c.prelude = nil
		return &ServerError{Code: mysql.ER_WRONG_ARGUMENTS, State: "HY000",
			Message: fmt.Sprintf("the capture has %d parameters for a statement that takes %d", len(ps), st.Params)}
	}
	stop, err := c.begin(ctx, "execute")
	if err != nil {
		return err
	}
	defer c.end(stop)
	c.params = wireParams(c.params[:0], ps)
	e := wire.Execute{StmtID: st.ID, CursorType: cursor, Iterations: 1, NewParamsBound: sendTypes || !st.holds(c.params), Params: c.params}
	c.buf = e.Append(c.buf[:0])
	// Until the server answers, it is not known to hold what was sent.
	if e.NewParamsBound {
		st.bound = st.bound[:0]
		for i := range c.params {
			st.bound = append(st.bound, c.params[i].ParamType)
		}
	}
	held := st.bound
	st.bound = nil
	if err := c.send(); err != nil {
		return c.fail("execute", err, ctx)
	}
	if err := c.readPrelude(ctx, "execute"); err != nil {
		return err
	}
	if err := c.readResults(ctx, "execute", true, r); err != nil {
		return err
	}
	st.bound = held
	return nil
}

// holds reports whether the server holds ps's types for st.
func (st *Stmt) holds(ps []wire.Param) bool {
	if st.bound == nil || len(st.bound) != len(ps) {
		return false
	}
	for i := range ps {
		if st.bound[i] != ps[i].ParamType {
			return false
		}
	}
	return true
}

// Fetch sends COM_STMT_FETCH for rows of st's open cursor into r.
func (c *Conn) Fetch(ctx context.Context, st *Stmt, rows uint32, r *Result) error {
	stop, err := c.begin(ctx, "fetch")
	if err != nil {
		return err
	}
	defer c.end(stop)
	cmd := wire.StmtCommand{Command: mysql.COM_STMT_FETCH, StmtID: st.ID, Rows: rows}
	c.buf = cmd.Append(c.buf[:0])
	if err := c.send(); err != nil {
		return c.fail("fetch", err, ctx)
	}
	if err := c.readPrelude(ctx, "fetch"); err != nil {
		return err
	}
	// Rows of the cursor's result set, whose columns the execute described.
	r.Results, r.Sets, r.Columns = 1, 1, uint32(st.Columns)
	if err := c.readRows(true, r); err != nil {
		return c.rowsErr("fetch", err, ctx)
	}
	return nil
}

func (c *Conn) rowsErr(op string, err error, ctx context.Context) error {
	var se *ServerError
	if errors.As(err, &se) {
		return err
	}
	return c.fail(op, err, ctx)
}

// readResults reads a response of one or more results: OK, ERR, result
// set, or a LOCAL INFILE request (answered with an empty file: its
// contents were on the client's machine).
func (c *Conn) readResults(ctx context.Context, op string, binary bool, r *Result) error {
	for {
		p, err := c.readPacket()
		if err != nil {
			return c.fail(op, err, ctx)
		}
		if len(p) == 0 {
			return c.fail(op, fmt.Errorf("%w: empty response packet", wire.ErrMalformed), ctx)
		}
		r.Results++
		var status uint16
		switch p[0] {
		case wire.HeaderErr:
			return serverError(p) // ends the response, even after result sets
		case wire.HeaderOK:
			ok, err := wire.ParseOK(p, uint64(mysql.CLIENT_PROTOCOL_41|mysql.CLIENT_TRANSACTIONS))
			if err != nil {
				return c.fail(op, err, ctx)
			}
			r.Affected, r.InsertID, r.Warnings, status = ok.AffectedRows, ok.InsertID, ok.Warnings, ok.Status
		case wire.HeaderLocalInfile:
			if binary {
				return c.fail(op, fmt.Errorf("%w: LOCAL INFILE request answering an execute", wire.ErrMalformed), ctx)
			}
			if _, err := c.wc.WritePacket(c.seq+1, nil); err != nil { // an empty file
				return c.fail(op, err, ctx)
			}
			if err := c.wc.Flush(); err != nil {
				return c.fail(op, err, ctx)
			}
			r.Results--
			continue
		default:
			n, metadata, err := wire.ParseColumnCount(p, c.CacheMetadata)
			if err != nil {
				return c.fail(op, err, ctx)
			}
			r.Sets++
			r.Columns = uint32(n)
			if metadata {
				if err := c.skip(int(n)); err != nil { // column definitions
					return c.fail(op, err, ctx)
				}
			}
			p, err := c.readPacket() // the EOF after them
			if err != nil {
				return c.fail(op, err, ctx)
			}
			eof, err := wire.ParseEOF(p)
			if err != nil {
				return c.fail(op, err, ctx)
			}
			if binary && eof.Status&mysql.SERVER_STATUS_CURSOR_EXISTS != 0 {
				r.Status = eof.Status // rows come with COM_STMT_FETCH
				return nil
			}
			if err := c.readRows(binary, r); err != nil {
				return c.rowsErr(op, err, ctx)
			}
			status = r.Status
		}
		r.Status = status
		if status&mysql.SERVER_MORE_RESULTS_EXISTS == 0 {
			return nil
		}
	}
}

// readRows reads rows to the result set's end into r.
func (c *Conn) readRows(binary bool, r *Result) error {
	for {
		p, err := c.readPacket()
		if err != nil {
			return err
		}
		switch {
		case len(p) > 0 && p[0] == wire.HeaderErr:
			return serverError(p) // the statement failed while sending rows
		case wire.IsResultEnd(p, false):
			eof, err := wire.ParseEOF(p)
			if err != nil {
				return err
			}
			r.Affected, r.InsertID, r.Warnings, r.Status = 0, 0, eof.Warnings, eof.Status
			return nil
		}
		r.Sums.AddRow(p)
		r.Rows++
	}
}

// wireParams appends store values as execute parameters to dst: the
// inverse of capture.Params, for sending a captured execute again.
func wireParams(dst []wire.Param, vs []store.Value) []wire.Param {
	for i := range vs {
		v := &vs[i]
		p := wire.Param{ParamType: wire.ParamType{Type: v.Type}, Null: v.Null, LongData: v.LongData, Int: v.Int, Float: v.Float, Bytes: v.Bytes}
		if v.Unsigned {
			p.Flag = 0x80
		}
		dst = append(dst, p)
	}
	return dst
}
