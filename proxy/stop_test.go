package proxy

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tandemdb/tandem/gtid"
	"github.com/tandemdb/tandem/sandbox/sandboxtest"
	"github.com/tandemdb/tandem/store"
)

// A session inside a transaction that wrote when a capture stops is held
// (its next command waits) until the capture's end point is read: its
// COMMIT, sent right after it left the capture, then comes after the end
// point. Before, the COMMIT went through at once and landed inside the
// capture's range without being in the capture, so it was listed as a
// transaction that bypassed the proxy, and --apply-bypassed ran it on top
// of its captured statements (seen as a MyRocks lock wait that failed
// for good in the runtime-capture e2e test and in make demo). A session
// whose transaction only read is not held, and a transaction that really
// bypassed the proxy is still listed.
func TestStopHoldsAWritingSessionUntilTheEndPoint(t *testing.T) {
	db, dsn, tp, r := stopFixture(t, sandboxtest.Server(t, "primary"))
	ctx := context.Background()
	via := dsnVia(t, dsn, tp.Addr().String(), nil)
	conn := func() *sql.Conn {
		c, err := openDB(t, via).Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	writer, reader := conn(), conn()
	dir := startAndWrite(t, r, writer)
	if _, err := reader.ExecContext(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	var v int
	if err := reader.QueryRowContext(ctx, "SELECT v FROM h WHERE id = 2").Scan(&v); err != nil {
		t.Fatal(err)
	}
	// A write that bypasses the proxy, during the capture.
	if _, err := db.Exec("UPDATE h SET v = 5 WHERE id = 2"); err != nil {
		t.Fatal(err)
	}

	committed := make(chan time.Time, 2)
	var heldAt int
	r.afterLeave = func(held int) {
		heldAt = held
		// Both sessions have left; each commits now. The reader's COMMIT
		// goes through; the writer's waits for the end point.
		go func() {
			if _, err := reader.ExecContext(ctx, "COMMIT"); err != nil {
				t.Error(err)
			}
			committed <- time.Now()
		}()
		go func() {
			if _, err := writer.ExecContext(ctx, "COMMIT"); err != nil {
				t.Error(err)
			}
			committed <- time.Now()
		}()
		time.Sleep(300 * time.Millisecond) // ample for a COMMIT that is not held
	}
	if _, err := r.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	<-committed
	<-committed
	if err := db.QueryRow("SELECT v FROM h WHERE id = 1").Scan(&v); err != nil || v != 1 {
		t.Fatalf("the writer's UPDATE after its COMMIT: v = %d (%v), want 1", v, err)
	}
	_, b := bypassedOf(t, dir)
	if b.Transactions != 1 || b.Rows != 1 || len(b.Tables) != 1 {
		t.Fatalf("bypassed: %d transactions, %d rows, tables %+v; want the one direct UPDATE (the writer's COMMIT came after the end point)", b.Transactions, b.Rows, b.Tables)
	}
	if heldAt != 1 {
		t.Fatalf("%d sessions held at the stop, want 1 (the writer)", heldAt)
	}
}

// A transaction that wrote and is open when a capture with an end point
// stops ends in the capture (for up to the drain timeout): its COMMIT is
// recorded, and comes before the end point. Before, a session busy at the
// stop left by itself before its next command, and that command — its
// COMMIT — went through at once: inside the capture's range without being
// in it, listed as a transaction that bypassed the proxy. Replay
// --apply-bypassed then ran it whole beside its captured statements, each
// blocking the other on the same rows until --order-timeout released
// them, over and over: make demo's production replay once took 141 s
// instead of 20. Holding such a session until the end point was read
// instead (what the stop did with idle ones) keeps its locks held, and
// every session waiting for them, until the drain timeout: the second
// case here, where another session's UPDATE waits for the writer's row.
func TestStopLetsOpenTransactionsEndInTheCapture(t *testing.T) {
	srv := sandboxtest.Server(t, "primary")
	for _, tc := range []struct {
		name string
		// blocked: a second session through the proxy waits for the
		// writer's row at the stop (else the writer's own statement
		// waits for a row a direct session holds).
		blocked bool
		want    []string
	}{
		{"writer in a command", false, []string{
			`1 connect "" 0x10`, // the writer, open at the start
			`1 query "BEGIN" 0x0`,
			`1 query "UPDATE h SET v = 1 WHERE id = 1" 0x0`,
			`1 query "UPDATE h SET v = v + 1 WHERE id = 2" 0x0`,
			`1 query "COMMIT" 0x0`,
			`1 quit "" 0x40`, // left once its transaction ended
		}},
		{"another session waits for the writer's row", true, []string{
			`1 connect "" 0x10`,
			`1 query "BEGIN" 0x0`,
			`1 query "UPDATE h SET v = 1 WHERE id = 1" 0x0`,
			`1 query "COMMIT" 0x0`,
			`1 quit "" 0x40`,
			`2 connect "" 0x10`,
			`2 query "UPDATE h SET v = v + 1 WHERE id = 1" 0x0`,
			`2 quit "" 0x40`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, dsn, tp, r := stopFixture(t, srv)
			ctx := context.Background()
			via := openDB(t, dsnVia(t, dsn, tp.Addr().String(), nil))
			conn := func(db *sql.DB) *sql.Conn {
				c, err := db.Conn(ctx)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
				return c
			}
			writer := conn(via)
			var other *sql.Conn // the session through the proxy that waits (blocked)
			if tc.blocked {
				other = conn(via)
			}
			locker := conn(db) // straight to the server
			dir := startAndWrite(t, r, writer)
			done := make(chan error, 1)
			if tc.blocked {
				go func() {
					_, err := other.ExecContext(ctx, "UPDATE h SET v = v + 1 WHERE id = 1") // waits for the writer
					done <- err
				}()
			} else {
				// The locker holds row 2 (a locking read: no GTID); the
				// writer's next UPDATE waits for it, in a command at the stop.
				if _, err := locker.ExecContext(ctx, "BEGIN"); err != nil {
					t.Fatal(err)
				}
				var v int
				if err := locker.QueryRowContext(ctx, "SELECT v FROM h WHERE id = 2 FOR UPDATE").Scan(&v); err != nil {
					t.Fatal(err)
				}
				go func() {
					if _, err := writer.ExecContext(ctx, "UPDATE h SET v = v + 1 WHERE id = 2"); err != nil {
						done <- err
						return
					}
					_, err := writer.ExecContext(ctx, "COMMIT") // at once
					done <- err
				}()
			}
			// INNODB_TRX is a cache the server fills again only when it has
			// not been read for 0.1 s (trx0i_s.cc, CACHE_MIN_IDLE_TIME_US).
			// Read every 10 ms, it kept what the first read found: on a
			// loaded machine that read came before the UPDATE did, and the
			// wait was never seen (SHOW ENGINE INNODB STATUS had it waiting
			// for 10 s).
			waitFor(t, "a statement waiting for a row lock", func() bool {
				time.Sleep(150 * time.Millisecond)
				var n int
				// This test's statement only: the server is the package's.
				return db.QueryRow("SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT' AND trx_query LIKE 'UPDATE h SET v = v + 1 WHERE id = %'").Scan(&n) == nil && n == 1
			})
			held := -1
			r.afterLeave = func(n int) { held = n }
			stopped := make(chan error, 1)
			go func() {
				_, err := r.Stop(ctx)
				stopped <- err
			}()
			waitFor(t, "the stop to begin", func() bool { return tp.Proxy.live.Load() == nil })
			if tc.blocked {
				if _, err := writer.ExecContext(ctx, "COMMIT"); err != nil {
					t.Fatal(err)
				}
			} else if _, err := locker.ExecContext(ctx, "COMMIT"); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if err := <-stopped; err != nil {
				t.Fatal(err)
			}
			if held != 0 {
				t.Errorf("%d sessions held until the end point, want 0: every transaction ended in the capture", held)
			}
			var sum int
			if err := db.QueryRow("SELECT SUM(v) FROM h").Scan(&sum); err != nil || sum != 2 {
				t.Fatalf("SUM(v) = %d (%v), want 2", sum, err)
			}
			rd, b := bypassedOf(t, dir)
			if b.Transactions != 0 || b.Rows != 0 {
				t.Fatalf("bypassed: %d transactions, %d rows, tables %+v; want none (every commit is in the capture)", b.Transactions, b.Rows, b.Tables)
			}
			gtids, err := rd.GTIDs()
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			commits := 0
			for rec, err := range rd.Records() {
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, fmt.Sprintf("%d %s %q %#x", rec.Session, rec.Kind, rec.SQL, rec.Flags))
				if gtids[rec.Seq] != "" {
					commits++
				}
			}
			// Each session's in its order (two sessions' records ending at
			// once are written in either order).
			slices.SortStableFunc(got, func(a, b string) int { return strings.Compare(a[:2], b[:2]) })
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			if want := map[bool]int{false: 1, true: 2}[tc.blocked]; commits != want {
				t.Errorf("%d captured commits with their GTID, want %d", commits, want)
			}
		})
	}
}

// stopFixture is a fresh database on srv with table h (rows 1 and 2, v
// 0), a proxy in front of srv asking commits' GTIDs, and its capture
// runner reading the end points and the binary log as root.
func stopFixture(t *testing.T, srv *sandboxtest.Handle) (*sql.DB, string, *testProxy, *Runner) {
	t.Helper()
	db, dsn := srv.FreshDB(t)
	for _, q := range []string{"CREATE TABLE h (id INT PRIMARY KEY, v INT)", "INSERT INTO h VALUES (1, 0), (2, 0)"} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	tp := startProxy(t, srv.Addr(), false, func(c *Config) { c.Commits = true })
	r := newRunner(context.Background(), tp.Proxy, RunConfig{Config: tp.cfg, Binlog: &gtid.Account{User: "root"}}, prometheus.NewRegistry(), io.Discard)
	return db, dsn, tp, r
}

// startAndWrite starts a capture into a new directory, which it
// returns, and opens a transaction on writer that updates row 1 of h.
func startAndWrite(t *testing.T, r *Runner, writer *sql.Conn) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "cap")
	if _, err := r.Start(context.Background(), CaptureOptions{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"BEGIN", "UPDATE h SET v = 1 WHERE id = 1"} {
		if _, err := writer.ExecContext(context.Background(), q); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// bypassedOf opens the closed capture in dir (closed with the test) and
// returns it with its list of the transactions that bypassed the proxy,
// which must be there with its end point.
func bypassedOf(t *testing.T, dir string) (*store.Reader, *store.Bypassed) {
	t.Helper()
	rd, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rd.Close() })
	sum, ok := rd.Summary()
	if !ok || sum.End == nil || sum.Bypassed == nil {
		t.Fatalf("no end point or bypassed list: %+v", sum)
	}
	return rd, sum.Bypassed
}

// waitFor polls cond every 10 ms for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
