package invariant

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"strings"
)

// Bank is Jepsen's bank test with a ledger: accounts whose balances a
// transfer moves money between (read FOR UPDATE, new balances computed by
// the client and written as literals), each transfer logged in a table
// keyed by AUTO_INCREMENT, and readers that total everything in one
// snapshot. A few accounts are hot.
//
// Invariants: the balances add up to the starting total; no balance is
// negative; every account's balance is its starting balance plus what
// the ledger says it received minus what it sent.
type Bank struct {
	// Accounts (default 16), of which Hot (default 4) get most transfers.
	Accounts, Hot int
}

const bankStart = 1000 // every account's starting balance

func (b Bank) accounts() (n, hot int) {
	n, hot = b.Accounts, b.Hot
	if n <= 1 {
		n = 16
	}
	if hot <= 1 || hot > n {
		hot = min(4, n)
	}
	return n, hot
}

func (Bank) Name() string     { return "bank" }
func (Bank) Tables() []string { return []string{"accounts", "transfers"} }

func (b Bank) Setup(ctx context.Context, db *sql.DB, engine string) error {
	err := createTables(ctx, db, engine, b.Tables(), []string{
		"CREATE TABLE accounts (id INT PRIMARY KEY, balance BIGINT NOT NULL)",
		"CREATE TABLE transfers (id BIGINT AUTO_INCREMENT PRIMARY KEY, from_id INT NOT NULL, to_id INT NOT NULL, amount BIGINT NOT NULL, KEY (from_id), KEY (to_id))",
	})
	if err != nil {
		return err
	}
	n, _ := b.accounts()
	vals := make([]string, n)
	for i := range vals {
		vals[i] = fmt.Sprintf("(%d, %d)", i+1, bankStart)
	}
	_, err = db.ExecContext(ctx, "INSERT INTO accounts VALUES "+strings.Join(vals, ", "))
	return err
}

func (b Bank) Check(ctx context.Context, db *sql.DB) ([]string, error) {
	n, _ := b.accounts()
	c := &checker{ctx: ctx, db: db}
	c.each(fmt.Sprintf("SELECT COUNT(*), SUM(balance) FROM accounts HAVING COUNT(*) <> %d OR SUM(balance) <> %d", n, n*bankStart), 2,
		func(v []string) string {
			return fmt.Sprintf("accounts: %s accounts hold %s in all, want %d holding %d", v[0], v[1], n, n*bankStart)
		})
	c.each("SELECT id, balance FROM accounts WHERE balance < 0", 2, func(v []string) string {
		return fmt.Sprintf("accounts: account %s is overdrawn (%s)", v[0], v[1])
	})
	c.each(fmt.Sprintf(`SELECT a.id, a.balance, %d + COALESCE(i.s, 0) - COALESCE(o.s, 0) FROM accounts a
		LEFT JOIN (SELECT to_id, SUM(amount) s FROM transfers GROUP BY to_id) i ON i.to_id = a.id
		LEFT JOIN (SELECT from_id, SUM(amount) s FROM transfers GROUP BY from_id) o ON o.from_id = a.id
		WHERE a.balance <> %d + COALESCE(i.s, 0) - COALESCE(o.s, 0) ORDER BY a.id`, bankStart, bankStart), 3,
		func(v []string) string {
			return fmt.Sprintf("transfers: account %s holds %s, its transfers say %s", v[0], v[1], v[2])
		})
	return c.result()
}

type bankClient struct {
	n, hot int
	sts    []*sql.Stmt
	lock   *sql.Stmt
	set    *sql.Stmt
	log    *sql.Stmt
	total  *sql.Stmt
	ledger *sql.Stmt
}

func (b Bank) prepare(ctx context.Context, db *sql.DB) (client, error) {
	sts, err := prepareAll(ctx, db,
		"SELECT id, balance FROM accounts WHERE id IN (?, ?) ORDER BY id FOR UPDATE",
		"UPDATE accounts SET balance = ? WHERE id = ?",
		"INSERT INTO transfers (from_id, to_id, amount) VALUES (?, ?, ?)",
		"SELECT SUM(balance) FROM accounts",
		"SELECT COUNT(*), COALESCE(SUM(amount), 0), COALESCE(MAX(id), 0) FROM transfers")
	if err != nil {
		return nil, err
	}
	n, hot := b.accounts()
	return &bankClient{n: n, hot: hot, sts: sts, lock: sts[0], set: sts[1], log: sts[2], total: sts[3], ledger: sts[4]}, nil
}

func (b *bankClient) close() { closeAll(b.sts) }

func (b *bankClient) pick(rng *rand.Rand) int {
	if rng.IntN(10) < 8 {
		return 1 + rng.IntN(b.hot)
	}
	return 1 + rng.IntN(b.n)
}

func (b *bankClient) txn(ctx context.Context, db *sql.DB, rng *rand.Rand) (bool, error) {
	if rng.IntN(10) == 0 { // a reader: one snapshot of everything
		return inTx(ctx, db, func(ctx context.Context, tx *sql.Tx) (bool, error) {
			var total, count, sum, maxID int64
			if err := tx.Stmt(b.total).QueryRowContext(ctx).Scan(&total); err != nil {
				return false, err
			}
			return true, tx.Stmt(b.ledger).QueryRowContext(ctx).Scan(&count, &sum, &maxID)
		})
	}
	from, to := b.pick(rng), b.pick(rng)
	for to == from {
		to = 1 + rng.IntN(b.n)
	}
	amount := int64(1 + rng.IntN(50))
	return inTx(ctx, db, func(ctx context.Context, tx *sql.Tx) (bool, error) {
		rows, err := tx.Stmt(b.lock).QueryContext(ctx, from, to)
		if err != nil {
			return false, err
		}
		bal := map[int]int64{}
		for rows.Next() {
			var id int
			var v int64
			if err := rows.Scan(&id, &v); err != nil {
				rows.Close()
				return false, err
			}
			bal[id] = v
		}
		if err := rows.Close(); err != nil {
			return false, err
		}
		if err := rows.Err(); err != nil {
			return false, err
		}
		if bal[from] < amount {
			return false, nil // not enough money: the client rolls back
		}
		if _, err := tx.Stmt(b.set).ExecContext(ctx, bal[from]-amount, from); err != nil {
			return false, err
		}
		if _, err := tx.Stmt(b.set).ExecContext(ctx, bal[to]+amount, to); err != nil {
			return false, err
		}
		if _, err := tx.Stmt(b.log).ExecContext(ctx, from, to, amount); err != nil {
			return false, err
		}
		return true, nil
	})
}
