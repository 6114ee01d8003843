package invariant

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
)

// Orders is order entry in the style of TPC-C: one warehouse, a few hot
// districts, a stock of items. New-order reads its district's next order
// id FOR UPDATE and writes the next one back as a literal, takes each
// item's stock FOR UPDATE and writes the new quantity back, and inserts
// the order, its lines and a new-order row; payment adds to the
// warehouse's and the district's year-to-date totals and logs a history
// row (AUTO_INCREMENT); delivery reads its district's next order to
// deliver FOR UPDATE (a point lookup: a locking range read lets MyRocks
// resolve snapshot conflicts inside the scan, counted by the server and
// never seen by the client), deletes its new-order row, marks it
// delivered and moves the district's pointer on.
//
// Invariants (TPC-C 3.3.2's consistency conditions, and the stock's):
// the warehouse's ytd is the sum of its districts'; the history adds up to
// what payments added; each district's next_o_id - 1 is its largest order
// id and its orders are numbered 1, 2, … without a gap; each order has as
// many lines as it says, and its total is theirs; the orders below the
// district's delivery pointer are delivered and have no new-order row,
// the others are undelivered and have one; each item's quantity plus what
// its order lines took is its starting quantity, and its ytd and order
// count are its lines'.
type Orders struct {
	// Districts (default 4) and Items (default 50).
	Districts, Items int
}

const (
	ordersStock    = 1000000    // every item's starting quantity
	ordersDistYTD  = "30000.00" // every district's starting ytd
	ordersItemCost = 100        // item i costs (i % ordersItemCost + 1) dollars
)

func (o Orders) size() (districts, items int) {
	districts, items = o.Districts, o.Items
	if districts <= 0 {
		districts = 4
	}
	if items <= 0 {
		items = 50
	}
	return districts, items
}

func (Orders) Name() string { return "orders" }
func (Orders) Tables() []string {
	return []string{"warehouse", "district", "stock", "orders", "order_line", "new_order", "history"}
}

func (o Orders) Setup(ctx context.Context, db *sql.DB, engine string) error {
	err := createTables(ctx, db, engine, o.Tables(), []string{
		"CREATE TABLE warehouse (id INT PRIMARY KEY, ytd DECIMAL(14,2) NOT NULL)",
		"CREATE TABLE district (id INT PRIMARY KEY, next_o_id INT NOT NULL, next_d_o_id INT NOT NULL, ytd DECIMAL(14,2) NOT NULL)",
		"CREATE TABLE stock (item INT PRIMARY KEY, qty INT NOT NULL, ytd INT NOT NULL, order_cnt INT NOT NULL)",
		"CREATE TABLE orders (d_id INT NOT NULL, o_id INT NOT NULL, line_cnt INT NOT NULL, total DECIMAL(12,2) NOT NULL, carrier INT NULL, PRIMARY KEY (d_id, o_id))",
		"CREATE TABLE order_line (d_id INT NOT NULL, o_id INT NOT NULL, number INT NOT NULL, item INT NOT NULL, qty INT NOT NULL, amount DECIMAL(10,2) NOT NULL, PRIMARY KEY (d_id, o_id, number))",
		"CREATE TABLE new_order (d_id INT NOT NULL, o_id INT NOT NULL, PRIMARY KEY (d_id, o_id))",
		"CREATE TABLE history (id BIGINT AUTO_INCREMENT PRIMARY KEY, d_id INT NOT NULL, amount DECIMAL(10,2) NOT NULL)",
	})
	if err != nil {
		return err
	}
	districts, items := o.size()
	var ds, ss []string
	for d := 1; d <= districts; d++ {
		ds = append(ds, fmt.Sprintf("(%d, 1, 1, %s)", d, ordersDistYTD))
	}
	for i := 1; i <= items; i++ {
		ss = append(ss, fmt.Sprintf("(%d, %d, 0, 0)", i, ordersStock))
	}
	for _, q := range []string{
		fmt.Sprintf("INSERT INTO warehouse VALUES (1, %d * %s)", districts, ordersDistYTD),
		"INSERT INTO district VALUES " + strings.Join(ds, ", "),
		"INSERT INTO stock VALUES " + strings.Join(ss, ", "),
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

func (o Orders) Check(ctx context.Context, db *sql.DB) ([]string, error) {
	districts, _ := o.size()
	c := &checker{ctx: ctx, db: db}
	c.each("SELECT w.ytd, d.s FROM warehouse w, (SELECT SUM(ytd) s FROM district) d WHERE w.ytd <> d.s", 2, func(v []string) string {
		return fmt.Sprintf("warehouse: ytd %s, its districts' ytd add up to %s", v[0], v[1])
	})
	c.each(fmt.Sprintf("SELECT d.s, h.s FROM (SELECT SUM(ytd) - %d * %s s FROM district) d, (SELECT COALESCE(SUM(amount), 0) s FROM history) h WHERE d.s <> h.s",
		districts, ordersDistYTD), 2, func(v []string) string {
		return fmt.Sprintf("history: payments added %s to the districts' ytd, the history holds %s", v[0], v[1])
	})
	c.each(`SELECT d.id, d.next_o_id, COALESCE(MAX(o.o_id), 0), COUNT(o.o_id) FROM district d LEFT JOIN orders o ON o.d_id = d.id
		GROUP BY d.id, d.next_o_id HAVING d.next_o_id - 1 <> COALESCE(MAX(o.o_id), 0) OR COUNT(o.o_id) <> COALESCE(MAX(o.o_id), 0) ORDER BY d.id`, 4,
		func(v []string) string {
			return fmt.Sprintf("district %s: next_o_id %s, its largest order id %s, %s orders", v[0], v[1], v[2], v[3])
		})
	c.each(`SELECT o.d_id, o.o_id, o.line_cnt, COUNT(l.number), o.total, COALESCE(SUM(l.amount), 0) FROM orders o
		LEFT JOIN order_line l ON l.d_id = o.d_id AND l.o_id = o.o_id GROUP BY o.d_id, o.o_id, o.line_cnt, o.total
		HAVING o.line_cnt <> COUNT(l.number) OR o.total <> COALESCE(SUM(l.amount), 0) ORDER BY o.d_id, o.o_id`, 6,
		func(v []string) string {
			return fmt.Sprintf("order %s/%s: %s lines and total %s, its order lines %s and %s", v[0], v[1], v[2], v[4], v[3], v[5])
		})
	c.each(`SELECT l.d_id, l.o_id, COUNT(*) FROM order_line l LEFT JOIN orders o ON o.d_id = l.d_id AND o.o_id = l.o_id
		WHERE o.o_id IS NULL GROUP BY l.d_id, l.o_id ORDER BY l.d_id, l.o_id`, 3, func(v []string) string {
		return fmt.Sprintf("order_line: %s lines of order %s/%s, which does not exist", v[2], v[0], v[1])
	})
	c.each(`SELECT o.d_id, o.o_id, o.carrier IS NULL, n.o_id IS NOT NULL, d.next_d_o_id FROM orders o JOIN district d ON d.id = o.d_id
		LEFT JOIN new_order n ON n.d_id = o.d_id AND n.o_id = o.o_id
		WHERE (o.carrier IS NULL) <> (n.o_id IS NOT NULL) OR (o.carrier IS NULL) <> (o.o_id >= d.next_d_o_id) ORDER BY o.d_id, o.o_id`, 5, func(v []string) string {
		return fmt.Sprintf("new_order: order %s/%s is undelivered %s, in new_order %s, the district delivers from %s", v[0], v[1], v[2], v[3], v[4])
	})
	c.each("SELECT id, next_d_o_id, next_o_id FROM district WHERE next_d_o_id < 1 OR next_d_o_id > next_o_id ORDER BY id", 3, func(v []string) string {
		return fmt.Sprintf("district %s: delivers from %s, its next order is %s", v[0], v[1], v[2])
	})
	c.each(`SELECT n.d_id, n.o_id FROM new_order n LEFT JOIN orders o ON o.d_id = n.d_id AND o.o_id = n.o_id WHERE o.o_id IS NULL ORDER BY n.d_id, n.o_id`, 2,
		func(v []string) string { return fmt.Sprintf("new_order: order %s/%s does not exist", v[0], v[1]) })
	c.each(fmt.Sprintf(`SELECT s.item, s.qty, s.ytd, s.order_cnt, COALESCE(SUM(l.qty), 0), COUNT(l.item) FROM stock s LEFT JOIN order_line l ON l.item = s.item
		GROUP BY s.item, s.qty, s.ytd, s.order_cnt HAVING s.qty + COALESCE(SUM(l.qty), 0) <> %d OR s.ytd <> COALESCE(SUM(l.qty), 0) OR s.order_cnt <> COUNT(l.item)
		ORDER BY s.item`, ordersStock), 6, func(v []string) string {
		return fmt.Sprintf("stock: item %s has qty %s, ytd %s, %s orders; its order lines took %s in %s lines", v[0], v[1], v[2], v[3], v[4], v[5])
	})
	return c.result()
}

type ordersClient struct {
	districts, items  int
	sts               []*sql.Stmt
	nextID, setNext   *sql.Stmt
	stock, setStock   *sql.Stmt
	line, order, neu  *sql.Stmt
	payW, payD, hist  *sql.Stmt
	toDeliver, setDel *sql.Stmt
	deliver, carry    *sql.Stmt
}

func (o Orders) prepare(ctx context.Context, db *sql.DB) (client, error) {
	sts, err := prepareAll(ctx, db,
		"SELECT next_o_id FROM district WHERE id = ? FOR UPDATE",
		"UPDATE district SET next_o_id = ? WHERE id = ?",
		"SELECT qty FROM stock WHERE item = ? FOR UPDATE",
		"UPDATE stock SET qty = ?, ytd = ytd + ?, order_cnt = order_cnt + 1 WHERE item = ?",
		"INSERT INTO order_line (d_id, o_id, number, item, qty, amount) VALUES (?, ?, ?, ?, ?, ?)",
		"INSERT INTO orders (d_id, o_id, line_cnt, total) VALUES (?, ?, ?, ?)",
		"INSERT INTO new_order (d_id, o_id) VALUES (?, ?)",
		"UPDATE warehouse SET ytd = ytd + ? WHERE id = 1",
		"UPDATE district SET ytd = ytd + ? WHERE id = ?",
		"INSERT INTO history (d_id, amount) VALUES (?, ?)",
		"SELECT next_d_o_id, next_o_id FROM district WHERE id = ? FOR UPDATE",
		"UPDATE district SET next_d_o_id = ? WHERE id = ?",
		"DELETE FROM new_order WHERE d_id = ? AND o_id = ?",
		"UPDATE orders SET carrier = ? WHERE d_id = ? AND o_id = ?")
	if err != nil {
		return nil, err
	}
	districts, items := o.size()
	return &ordersClient{districts: districts, items: items, sts: sts, nextID: sts[0], setNext: sts[1], stock: sts[2], setStock: sts[3],
		line: sts[4], order: sts[5], neu: sts[6], payW: sts[7], payD: sts[8], hist: sts[9], toDeliver: sts[10], setDel: sts[11], deliver: sts[12], carry: sts[13]}, nil
}

func (c *ordersClient) close() { closeAll(c.sts) }

// cents formats an amount in cents as a DECIMAL literal.
func cents(c int64) string { return fmt.Sprintf("%d.%02d", c/100, c%100) }

func (c *ordersClient) txn(ctx context.Context, db *sql.DB, rng *rand.Rand) (bool, error) {
	d := 1 + rng.IntN(c.districts)
	switch p := rng.IntN(100); {
	case p < 45:
		return c.newOrder(ctx, db, rng, d)
	case p < 88:
		amount := cents(int64(100 + rng.IntN(500000)))
		return inTx(ctx, db, func(ctx context.Context, tx *sql.Tx) (bool, error) {
			for _, x := range []struct {
				st   *sql.Stmt
				args []any
			}{{c.payW, []any{amount}}, {c.payD, []any{amount, d}}, {c.hist, []any{d, amount}}} {
				if _, err := tx.Stmt(x.st).ExecContext(ctx, x.args...); err != nil {
					return false, err
				}
			}
			return true, nil
		})
	default:
		return inTx(ctx, db, func(ctx context.Context, tx *sql.Tx) (bool, error) {
			var oid, next int64
			if err := tx.Stmt(c.toDeliver).QueryRowContext(ctx, d).Scan(&oid, &next); err != nil {
				return false, err
			}
			if oid >= next {
				return true, nil // nothing to deliver
			}
			for _, x := range []struct {
				st   *sql.Stmt
				args []any
			}{{c.deliver, []any{d, oid}}, {c.carry, []any{1 + rng.IntN(10), d, oid}}, {c.setDel, []any{oid + 1, d}}} {
				if _, err := tx.Stmt(x.st).ExecContext(ctx, x.args...); err != nil {
					return false, err
				}
			}
			return true, nil
		})
	}
}

func (c *ordersClient) newOrder(ctx context.Context, db *sql.DB, rng *rand.Rand, d int) (bool, error) {
	n := 5 + rng.IntN(6)
	items := make([]int, 0, n)
	for len(items) < n {
		// Skewed: a third of the lines take one of the first five items.
		it := 1 + rng.IntN(c.items)
		if rng.IntN(3) == 0 {
			it = 1 + rng.IntN(min(5, c.items))
		}
		if !slices.Contains(items, it) {
			items = append(items, it)
		}
	}
	qtys := make([]int, n)
	for i := range qtys {
		qtys[i] = 1 + rng.IntN(10)
	}
	return inTx(ctx, db, func(ctx context.Context, tx *sql.Tx) (bool, error) {
		var oid int64
		if err := tx.Stmt(c.nextID).QueryRowContext(ctx, d).Scan(&oid); err != nil {
			return false, err
		}
		if _, err := tx.Stmt(c.setNext).ExecContext(ctx, oid+1, d); err != nil {
			return false, err
		}
		var total int64
		for i, it := range items {
			var qty int64
			if err := tx.Stmt(c.stock).QueryRowContext(ctx, it).Scan(&qty); err != nil {
				return false, err
			}
			if _, err := tx.Stmt(c.setStock).ExecContext(ctx, qty-int64(qtys[i]), qtys[i], it); err != nil {
				return false, err
			}
			amount := int64(qtys[i]) * int64(it%ordersItemCost+1) * 100
			total += amount
			if _, err := tx.Stmt(c.line).ExecContext(ctx, d, oid, i+1, it, qtys[i], cents(amount)); err != nil {
				return false, err
			}
		}
		if _, err := tx.Stmt(c.order).ExecContext(ctx, d, oid, n, cents(total)); err != nil {
			return false, err
		}
		_, err := tx.Stmt(c.neu).ExecContext(ctx, d, oid)
		return err == nil, err
	})
}
