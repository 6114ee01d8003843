// Package invariant holds OLTP workloads whose correctness can be checked
// on a database's rows alone, by invariants, without comparing it with
// another: a bank whose balances always add up (Jepsen's bank test, with
// a transfers ledger on an AUTO_INCREMENT key) and an order-entry
// workload in the style of TPC-C (a next-order id in a parent row,
// dependent inserts, running totals; TPC-C clause 3.3.2's consistency
// conditions).
//
// Two replayed copies that agree can both be wrong in the same way (a
// replay that commits part of a transaction everywhere); an invariant
// that no engine breaks by itself catches that. The workloads behave as
// an application does: server-side prepared statements prepared once per
// connection, multi-statement transactions with SELECT … FOR UPDATE on hot
// rows, values computed by the client from what it read (a new balance, a
// next order id) written back as literals, and a transaction rolled back
// and retried from its start when the server answers 1213 (deadlock) or
// 1205 (lock wait timeout).
//
// Run drives a workload against any DSN (a server, or a proxy in front of
// one); Setup gives every database the same starting rows; Check lists
// the invariants a database breaks.
package invariant

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Workload is one invariant workload.
type Workload interface {
	// Name is the workload's name ("bank", "orders").
	Name() string
	// Tables lists its tables, in creation order.
	Tables() []string
	// Setup drops and creates the tables (ENGINE=engine unless engine is
	// "") and loads the starting rows: the same rows on every database.
	Setup(ctx context.Context, db *sql.DB, engine string) error
	// Check returns a line per invariant the database's rows break.
	Check(ctx context.Context, db *sql.DB) ([]string, error)
	// prepare prepares the workload's statements on db's pool (each
	// connection prepares each statement once, on first use).
	prepare(ctx context.Context, db *sql.DB) (client, error)
}

// client runs one workload's transactions.
type client interface {
	// txn runs one transaction on a connection of db's pool: committed,
	// or rolled back by the client's own choice (false), or the error
	// that ended it.
	txn(ctx context.Context, db *sql.DB, rng *rand.Rand) (committed bool, err error)
	close()
}

// Stats is what a Run did.
type Stats struct {
	Committed, RolledBack int64 // by the client's own decision
	// Retries counts transactions started again after the server's 1213
	// or 1205, by code; Failed those given up after MaxRetries.
	Retries map[uint16]int64
	Failed  int64
}

// MaxRetries is how often a client starts a transaction again after a
// deadlock or lock wait timeout before it gives up on it.
const MaxRetries = 10

// Run runs w from threads connections to dsn for d (or until ctx ends),
// each connection with its statements prepared once, and returns what
// happened. An error other than a deadlock or lock wait timeout ends the
// run.
func Run(ctx context.Context, dsn string, w Workload, threads int, d time.Duration, seed uint64) (Stats, error) {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return Stats{}, err
	}
	defer db.Close()
	db.SetMaxOpenConns(threads)
	db.SetMaxIdleConns(threads)
	cl, err := w.prepare(ctx, db)
	if err != nil {
		return Stats{}, err
	}
	defer cl.close()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var (
		mu    sync.Mutex
		total = Stats{Retries: map[uint16]int64{}}
		errs  []error
		wg    sync.WaitGroup
	)
	for i := range threads {
		wg.Go(func() {
			st, err := runClient(ctx, db, cl, rand.New(rand.NewPCG(seed, uint64(i))))
			mu.Lock()
			defer mu.Unlock()
			total.Committed += st.Committed
			total.RolledBack += st.RolledBack
			total.Failed += st.Failed
			for k, v := range st.Retries {
				total.Retries[k] += v
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("connection %d: %w", i, err))
			}
		})
	}
	wg.Wait()
	return total, errors.Join(errs...)
}

func runClient(ctx context.Context, db *sql.DB, cl client, rng *rand.Rand) (Stats, error) {
	st := Stats{Retries: map[uint16]int64{}}
	for ctx.Err() == nil {
		for attempt := 0; ; attempt++ {
			committed, err := cl.txn(ctx, db, rng)
			if err == nil {
				if committed {
					st.Committed++
				} else {
					st.RolledBack++
				}
				break
			}
			code := retryable(err)
			if code == 0 {
				return st, ignoreEnd(ctx, err)
			}
			if attempt == MaxRetries {
				st.Failed++
				break
			}
			st.Retries[code]++
		}
	}
	return st, nil
}

// retryable returns 1213 or 1205 when err is a deadlock or lock wait
// timeout, else 0.
func retryable(err error) uint16 {
	var me *mysql.MySQLError
	if errors.As(err, &me) && (me.Number == 1213 || me.Number == 1205) {
		return me.Number
	}
	return 0
}

// ignoreEnd drops the errors of a run ending (its context done).
func ignoreEnd(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// inTx runs body in a transaction on a connection of db's pool:
// committed when body returns true, rolled back when it returns false or
// fails. A transaction under way is not cut short when ctx ends.
func inTx(ctx context.Context, db *sql.DB, body func(ctx context.Context, tx *sql.Tx) (bool, error)) (bool, error) {
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	ctx = context.WithoutCancel(ctx)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	ok, err := body(ctx, tx)
	if err != nil || !ok {
		tx.Rollback()
		return false, err
	}
	return true, tx.Commit()
}

// prepareAll prepares each text on db, in order.
func prepareAll(ctx context.Context, db *sql.DB, texts ...string) ([]*sql.Stmt, error) {
	out := make([]*sql.Stmt, 0, len(texts))
	for _, q := range texts {
		st, err := db.PrepareContext(ctx, q)
		if err != nil {
			closeAll(out)
			return nil, fmt.Errorf("prepare %q: %w", q, err)
		}
		out = append(out, st)
	}
	return out, nil
}

func closeAll(sts []*sql.Stmt) {
	for _, s := range sts {
		s.Close()
	}
}

// createTables drops and creates tables, each DDL given without its
// engine clause.
func createTables(ctx context.Context, db *sql.DB, engine string, names []string, ddl []string) error {
	for i := len(names) - 1; i >= 0; i-- {
		if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+names[i]); err != nil {
			return err
		}
	}
	for _, q := range ddl {
		if engine != "" {
			q += " ENGINE=" + engine
		}
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", strings.Fields(q)[2], err)
		}
	}
	return nil
}

// checker collects violated invariants.
type checker struct {
	ctx  context.Context
	db   *sql.DB
	bad  []string
	errs []error
}

// rows runs q and calls f with each row's scanner.
func (c *checker) rows(q string, f func(scan func(...any) error) error) {
	rs, err := c.db.QueryContext(c.ctx, q)
	if err != nil {
		c.errs = append(c.errs, fmt.Errorf("%s: %w", q, err))
		return
	}
	defer rs.Close()
	for rs.Next() {
		if err := f(rs.Scan); err != nil {
			c.errs = append(c.errs, fmt.Errorf("%s: %w", q, err))
			return
		}
	}
	if err := rs.Err(); err != nil {
		c.errs = append(c.errs, fmt.Errorf("%s: %w", q, err))
	}
}

// each reports every row q returns as a violation, formatted by f.
func (c *checker) each(q string, n int, f func(vals []string) string) {
	c.rows(q, func(scan func(...any) error) error {
		vals := make([]sql.NullString, n)
		ptrs := make([]any, n)
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := scan(ptrs...); err != nil {
			return err
		}
		strs := make([]string, n)
		for i, v := range vals {
			strs[i] = v.String
			if !v.Valid {
				strs[i] = "NULL"
			}
		}
		c.bad = append(c.bad, f(strs))
		return nil
	})
}

func (c *checker) result() ([]string, error) { return c.bad, errors.Join(c.errs...) }
