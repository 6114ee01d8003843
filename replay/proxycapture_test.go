package replay

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	driver "github.com/go-sql-driver/mysql"
	"github.com/tandemdb/tandem/capture"
	"github.com/tandemdb/tandem/compare"
	"github.com/tandemdb/tandem/internal/charset"
	"github.com/tandemdb/tandem/internal/typestest"
	"github.com/tandemdb/tandem/proxy"
	"github.com/tandemdb/tandem/report"
	"github.com/tandemdb/tandem/sandbox/sandboxtest"
	"github.com/tandemdb/tandem/store"
)

// captureProxy starts a capturing proxy (row checksums on) in front of the
// sandbox's InnoDB; dsn rewrites a sandbox DSN to go through it, and
// finish stops it and returns the capture directory.
func captureProxy(t *testing.T) (dsn func(string) string, finish func() string) {
	t.Helper()
	srv := sandboxtest.Server(t, "innodb")
	_, backend := srv.FreshDB(t)
	bcfg, err := driver.ParseDSN(backend)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "capture")
	w, err := store.Create(dir, store.WriterOptions{Source: "replay test", NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	rec := capture.NewRecorder(w, nil)
	p, err := proxy.New(proxy.Config{Listen: "127.0.0.1:0", Backend: bcfg.Addr, Recorder: rec, CaptureResults: proxy.ResultsChecksum})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx) }()
	dsn = func(s string) string {
		cfg, err := driver.ParseDSN(s)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Addr, cfg.InterpolateParams, cfg.ParseTime = p.Addr().String(), false, true
		return cfg.FormatDSN()
	}
	finish = func() string {
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if err := rec.Close(); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	return dsn, finish
}

// captureThroughProxy runs fn with a go-sql-driver pool of one connection
// (server-side prepared statements) through a capturing proxy, on a fresh
// database, and returns the capture.
func captureThroughProxy(t *testing.T, fn func(db *sql.DB)) string {
	t.Helper()
	via, finish := captureProxy(t)
	_, dsn := sandboxtest.Server(t, "innodb").FreshDB(t)
	db, err := sql.Open("mysql", via(dsn))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1) // one session: its order is the replay's order
	fn(db)
	db.Close()
	return finish()
}

// drain reads and closes what a Query returned; it fails t on an error.
func drain(t *testing.T, x any, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if rs, ok := x.(*sql.Rows); ok {
		for rs.Next() {
		}
		if err := rs.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestProxyCaptureOfManyTypesReplaysIdentically(t *testing.T) {
	when := typestest.Time
	capDir := captureThroughProxy(t, func(db *sql.DB) {
		must := func(x any, err error) { t.Helper(); drain(t, x, err) }
		must(db.Exec(typestest.Table))
		for _, r := range typestest.Rows() {
			must(db.Exec(typestest.Insert, r...))
		}
		for id := 1; id <= 4; id++ { // id 4 does not exist: an empty result
			must(db.Query("SELECT * FROM types WHERE id = ?", id))
		}
		// Typed parameters in WHERE: a wrongly replayed value finds no row.
		must(db.Query("SELECT id FROM types WHERE bi = ? AND bu = ? AND dtm = ? AND tm = ? AND dt = ? AND de = ? AND vb = ?",
			int64(math.MinInt64), uint64(math.MaxUint64), when, "-838:59:59.000000", "2026-11-30", "-123456789012345678.123456", []byte{0xde, 0xad}))
		must(db.Query("SELECT id, f, d FROM types WHERE f = ? OR d = ? ORDER BY id", float32(-0.25), math.Pi))
		must(db.Exec("UPDATE types SET vc = ?, y = ? WHERE iu = ?", "updated", int64(2000), uint64(math.MaxUint32)))
		must(db.Query("SELECT * FROM types ORDER BY id"))
		must(db.Query("SELECT COUNT(*), SUM(i), MAX(dtm) FROM types")) // text protocol: no arguments
		must(db.Exec("DELETE FROM types WHERE id = ?", 3))
		must(db.Query("SELECT id, en, st, js, bt FROM types ORDER BY id"))
	})

	// What the capture holds: statements with responses to compare.
	r, err := store.Open(capDir)
	if err != nil {
		t.Fatal(err)
	}
	statements, withChecksums := 0, 0
	for rec, err := range r.Records() {
		if err != nil {
			t.Fatal(err)
		}
		if (rec.Kind == store.KindQuery || rec.Kind == store.KindExecute) && rec.Resp.Kind != store.RespNone {
			statements++
			if rec.Resp.HasChecksums {
				withChecksums++
			}
		}
	}
	r.Close()
	// CREATE, 3 inserts, 4 + 1 + 1 selects, update, 2 selects, delete, select.
	if statements != 15 || withChecksums != 9 {
		t.Fatalf("capture holds %d statements (%d with row checksums); want 15 (9)", statements, withChecksums)
	}

	ta, tb, _, _ := twoInnoDB(t)
	rep := replayRun(t, capDir, nil, ta, tb)
	for _, tr := range rep.Targets {
		if tr.Errors != 0 || tr.Skipped != 0 || tr.Reads != 9 || tr.Writes != 5 || tr.Other != 1 {
			t.Errorf("%s: errors %d skipped %d r/w/o %d/%d/%d; want 0 0 9/5/1", tr.Name, tr.Errors, tr.Skipped, tr.Reads, tr.Writes, tr.Other)
		}
	}
	if d := rep.Divergences[0]; d.Total() != 0 || d.Missing != 0 || d.Extra != 0 {
		t.Errorf("b vs a: %v %+v", d.ByClass, d.Samples)
	}
	for _, d := range rep.VsCapture {
		if d.Compared != 15 || d.Total() != 0 {
			t.Errorf("vs capture: compared %d (want 15), divergent %v %+v", d.Compared, d.ByClass, d.Samples)
		}
	}
}

// A CALL executed as a prepared statement answers with several result sets
// and a final OK; replay reads them all (a leftover would break the next
// statement on the connection) and counts every row.
func TestProxyCaptureOfCallReplays(t *testing.T) {
	capDir := captureThroughProxy(t, func(db *sql.DB) {
		must := func(x any, err error) { t.Helper(); drain(t, x, err) }
		must(db.Exec("CREATE TABLE t (v INT PRIMARY KEY)"))
		must(db.Exec("INSERT INTO t VALUES (1), (2), (3), (4)"))
		must(db.Exec("CREATE PROCEDURE two_sets(IN n INT) BEGIN SELECT v FROM t WHERE v <= n ORDER BY v; SELECT COUNT(*) FROM t; END"))
		must(db.Exec("CREATE PROCEDURE bump(IN n INT) UPDATE t SET v = v + 10 WHERE v = n"))
		for _, n := range []int{2, 3} {
			rs, err := db.Query("CALL two_sets(?)", n)
			if err != nil {
				t.Fatal(err)
			}
			sets := 0
			for {
				for rs.Next() {
				}
				sets++
				if !rs.NextResultSet() {
					break
				}
			}
			if err := rs.Close(); err != nil || sets != 2 {
				t.Fatalf("CALL two_sets(%d): %d result sets, %v", n, sets, err)
			}
		}
		must(db.Exec("CALL bump(?)", 4))
		must(db.Query("SELECT v FROM t WHERE v > ?", 3)) // after the CALLs, on the same connection
	})
	ta, tb, _, _ := twoInnoDB(t)
	rep := replayRun(t, capDir, nil, ta, tb)
	for _, tr := range rep.Targets {
		if tr.Errors != 0 || tr.Skipped != 0 {
			t.Errorf("%s: errors %d skipped %d", tr.Name, tr.Errors, tr.Skipped)
		}
	}
	if d := rep.Divergences[0]; d.Total() != 0 || d.Missing != 0 || d.Extra != 0 {
		t.Errorf("b vs a: %v %+v", d.ByClass, d.Samples)
	}
	// CREATE x3, INSERT, three CALLs, the SELECT. The capture holds the
	// rows of every result set of a CALL; a count of the first set's only
	// would diverge by row count.
	for _, d := range rep.VsCapture {
		if d.Compared != 8 || d.Total() != 0 {
			t.Errorf("vs capture: compared %d (want 8), divergent %v %+v", d.Compared, d.ByClass, d.Samples)
		}
	}
}

// A client asking for CLIENT_FOUND_ROWS (go-sql-driver clientFoundRows,
// Connector/J's default) gets matched, not changed, rows as affected: the
// capture records the flag and replay asks for it, so an UPDATE that
// changes nothing replays with the captured count.
func TestFoundRowsReplaysAsCaptured(t *testing.T) {
	via, finish := captureProxy(t)
	_, dsn := sandboxtest.Server(t, "innodb").FreshDB(t)
	cfg, err := driver.ParseDSN(via(dsn))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ClientFoundRows = true
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	must := func(x any, err error) { t.Helper(); drain(t, x, err) }
	must(db.Exec("CREATE TABLE t (id INT PRIMARY KEY, v INT)"))
	must(db.Exec("INSERT INTO t VALUES (1, 1), (2, 1), (3, 1)"))
	res, err := db.Exec("UPDATE t SET v = 1")
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 3 {
		t.Fatalf("captured UPDATE affected %d, want 3 (found rows)", n)
	}
	db.Close()
	capDir := finish()
	ta, tb, _, _ := twoInnoDB(t)
	rep := replayRun(t, capDir, nil, ta, tb)
	for i, tr := range rep.Targets {
		vc := rep.VsCapture[i]
		if tr.Errors != 0 || vc.Total() != 0 {
			t.Errorf("%s: errors %d, differs from the capture %v %+v", tr.Name, tr.Errors, vc.ByClass, vc.Samples)
		}
	}
}

// A CALL that fails after its first result set (SIGNAL) is an error on the
// target where it fails, and an error-vs-ok divergence against a target
// whose procedure does not signal.
func TestSignalAfterAResultSet(t *testing.T) {
	capDir := captureThroughProxy(t, func(db *sql.DB) {
		must := func(x any, err error) { t.Helper(); drain(t, x, err) }
		must(db.Exec("CREATE TABLE t (v INT)"))
		must(db.Exec("INSERT INTO t VALUES (1)"))
		must(db.Exec("CREATE PROCEDURE p() BEGIN SELECT v FROM t; SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'nope'; END"))
		rs, err := db.Query("CALL p()")
		if err == nil {
			for rs.Next() {
			}
			for rs.NextResultSet() {
			}
			err = rs.Err()
			rs.Close()
		}
		if err == nil || !strings.Contains(err.Error(), "nope") {
			t.Fatalf("captured CALL: %v, want the SIGNAL", err)
		}
	})
	ta, tb, _, dbb := twoInnoDB(t)
	// On b the procedure exists already and does not signal: the replayed
	// CREATE PROCEDURE fails there (1304), and the CALL succeeds.
	if _, err := dbb.Exec("CREATE PROCEDURE p() SELECT 1"); err != nil {
		t.Fatal(err)
	}
	rep := replayRun(t, capDir, func(c *Config) { c.Speed = 0 }, ta, tb)
	ra := rep.Targets[0]
	if ra.Errors != 1 || ra.ErrorCodes["1644"] != 1 {
		t.Errorf("a: errors %d %v, want the CALL's 1644", ra.Errors, ra.ErrorCodes)
	}
	if vc := rep.VsCapture[0]; vc.Total() != 0 {
		t.Errorf("a differs from the capture: %v %+v", vc.ByClass, vc.Samples)
	}
	d := rep.Divergences[0]
	calls := 0
	for _, s := range d.Samples {
		if s.Class == compare.ErrorVsOK && strings.HasPrefix(s.Statement, "CALL p()") {
			calls++
			if !strings.Contains(s.Baseline, "1644") {
				t.Errorf("the CALL on a: %s", s.Baseline)
			}
		}
	}
	if d.ByClass[compare.ErrorVsOK] != 2 || calls != 1 {
		t.Errorf("b vs a: %v (CALL samples %d), want the CREATE's and the CALL's error-vs-ok", d.ByClass, calls)
	}
}

// A BLOB sent with COM_STMT_SEND_LONG_DATA (go-sql-driver does for a value
// past max_allowed_packet / (params+1)) replays as captured, not as NULL.
func TestLongDataReplaysAsCaptured(t *testing.T) {
	via, finish := captureProxy(t)
	_, dsn := sandboxtest.Server(t, "innodb").FreshDB(t)
	cfg, err := driver.ParseDSN(via(dsn))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxAllowedPacket = 4096 // values past 2 KiB go as long data
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	must := func(x any, err error) { t.Helper(); drain(t, x, err) }
	must(db.Exec("CREATE TABLE b (id INT PRIMARY KEY, data BLOB)"))
	blob := []byte(strings.Repeat("tandem-long-data ", 600)) // 10 KiB
	must(db.Exec("INSERT INTO b VALUES (?, ?)", 1, blob))
	var n int
	if err := db.QueryRow("SELECT LENGTH(data) FROM b WHERE id = ?", 1).Scan(&n); err != nil || n != len(blob) {
		t.Fatalf("captured: length %d, %v", n, err)
	}
	must(db.Query("SELECT data FROM b"))
	db.Close()
	capDir := finish()
	kinds := captureKinds(t, capDir)
	if kinds[store.KindLongData] == 0 {
		t.Fatalf("no long data in the capture: %v", kinds)
	}
	ta, tb, dba, _ := twoInnoDB(t)
	rep := replayRun(t, capDir, nil, ta, tb)
	for i, tr := range rep.Targets {
		vc := rep.VsCapture[i]
		if tr.Errors != 0 || tr.Skipped != 0 || vc.Total() != 0 {
			t.Errorf("%s: errors %d skipped %d, differs from the capture %v %+v", tr.Name, tr.Errors, tr.Skipped, vc.ByClass, vc.Samples)
		}
	}
	var got []byte
	if err := dba.QueryRow("SELECT data FROM b WHERE id = 1").Scan(&got); err != nil || string(got) != string(blob) {
		t.Errorf("replayed blob: %d bytes, %v", len(got), err)
	}
}

// A captured KILL names a connection by the id the capture's server gave
// it; on a target that number is some other connection, or none. Replay
// sends it with the id of the target connection that replays the named
// session, and never sends one it cannot map. (Here the target is the
// capture's server: the captured id is a closed connection's, and sent as
// captured the KILL fails with 1094 where the capture's succeeded.)
func TestReplayedKillNamesTheSessionsConnection(t *testing.T) {
	via, finish := captureProxy(t)
	_, dsn := sandboxtest.Server(t, "innodb").FreshDB(t)
	ctx := context.Background()
	open := func() (*sql.DB, *sql.Conn) {
		db, err := sql.Open("mysql", via(dsn))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return db, c
	}
	_, a := open()
	bdb, b := open()
	var aid uint32
	if err := a.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&aid); err != nil {
		t.Fatal(err)
	}
	must := func(x any, err error) { t.Helper(); drain(t, x, err) }
	must(b.ExecContext(ctx, fmt.Sprintf("KILL QUERY %d", aid))) // a is idle: it lives on
	must(a.ExecContext(ctx, "DO 2"))
	var me *driver.MySQLError
	if _, err := b.ExecContext(ctx, "KILL 4000000000"); !errors.As(err, &me) || me.Number != 1094 {
		t.Fatalf("KILL of no connection: %v, want 1094 unknown thread", err)
	}
	must(b.ExecContext(ctx, fmt.Sprintf("KILL %d", aid)))
	a.Close()
	b.Close()
	// b quits, as its client ends (a's connection the server ended): the
	// proxy's stop has no idle session to wait for (its drain timeout).
	bdb.Close()
	capDir := finish()

	r, err := store.Open(capDir)
	if err != nil {
		t.Fatal(err)
	}
	var ids []uint32
	for rec, err := range r.Records() {
		if err != nil {
			t.Fatal(err)
		}
		if rec.Kind == store.KindConnect {
			ids = append(ids, rec.ConnID)
		}
	}
	r.Close()
	if len(ids) != 2 || !slices.Contains(ids, aid) || ids[0] == ids[1] {
		t.Fatalf("captured connection ids %v, want two, one of them %d", ids, aid)
	}

	srv := sandboxtest.Server(t, "innodb")
	_, target := srv.FreshDB(t)
	rep := replayRun(t, capDir, nil, tgt(t, "a", target, ""))
	tr, vc := rep.Targets[0], rep.VsCapture[0]
	if n := tr.SkippedBy[store.SkipReasonText(store.SkipKill)]; n != 1 || tr.Skipped != 1 {
		t.Errorf("skipped %d %v, want only the KILL of no captured connection", tr.Skipped, tr.SkippedBy)
	}
	if tr.Errors != 0 || vc == nil || vc.Total() != 0 || vc.Compared < 4 {
		t.Errorf("errors %d %v; vs the capture %+v; want both KILLs of a to succeed as captured", tr.Errors, tr.ErrorCodes, vc)
	}
}

// The server closes a killed connection before it answers the KILL, so a
// capture records the killed session's end (no COM_QUIT: a synthetic
// quit) before the KILL ends, and the two overlap: in the capture's order
// either may go first. Replay leaves the killed session's connection open
// for the KILL (captureIndex.killedQuits). Here the KILL also waits, in
// the capture's order, for a slow read (SLEEP) that ended before it began,
// while the quit, which changes nothing, does not: before, the quit closed
// the connection first, and the KILL failed with 1094 where the capture's
// succeeded (CI saw this race in TestReplayedKillNamesTheSessionsConnection).
func TestKilledSessionsEndIsLeftToTheKill(t *testing.T) {
	at := func(ms float64) time.Time {
		return time.Unix(1700000000, 0).Add(time.Duration(ms * float64(time.Millisecond)))
	}
	ok := store.Response{Kind: store.RespOK}
	rows := store.Response{Kind: store.RespResultSet, Columns: 1, Rows: 1}
	q := func(s uint64, ms, durMs float64, sql string, resp store.Response) store.Record {
		return store.Record{Session: s, Start: at(ms), Duration: time.Duration(durMs * float64(time.Millisecond)), Kind: store.KindQuery, SQL: sql, Schema: "app", Resp: resp}
	}
	capDir := writeRecords(t, []store.Record{
		{Session: 1, Start: at(0), Kind: store.KindConnect, User: "app", Schema: "app", ConnID: 398, Resp: ok},
		{Session: 2, Start: at(0.2), Kind: store.KindConnect, User: "app", Schema: "app", ConnID: 399, Resp: ok},
		{Session: 3, Start: at(0.4), Kind: store.KindConnect, User: "app", Schema: "app", ConnID: 400, Resp: ok},
		q(1, 0.6, 0.1, "SELECT 1", rows),
		q(3, 1, 8.8, "SELECT SLEEP(0.3)", rows),
		{Session: 1, Start: at(10), Kind: store.KindQuit}, // the server closed it
		q(2, 9.9, 0.3, "KILL 398", ok),
		{Session: 2, Start: at(10.5), Kind: store.KindQuit, Command: mysql.COM_QUIT},
		{Session: 3, Start: at(10.6), Kind: store.KindQuit, Command: mysql.COM_QUIT},
	})
	_, target := sandboxtest.Server(t, "innodb").FreshDB(t)
	rep := replayRun(t, capDir, func(cfg *Config) { cfg.OrderTimeout = 30 * time.Second }, tgt(t, "a", target, ""))
	tr, vc := rep.Targets[0], rep.VsCapture[0]
	if tr.Errors != 0 || tr.Skipped != 0 || tr.OrderReleased != 0 || vc == nil || vc.Total() != 0 || vc.Compared != 3 {
		t.Errorf("errors %d %v, skipped %d, released %d; vs the capture %+v; want the KILL to succeed as captured, 3 statements compared, 0 divergent",
			tr.Errors, tr.ErrorCodes, tr.Skipped, tr.OrderReleased, vc)
	}
}

// Sessions that name tables in another character set (a KOI8-R client,
// a latin1 handshake): their tables are found on the targets, and
// reports and inspect name them in UTF-8 (before: the end state skipped
// the table, and it printed as `k2.??????? (not there) (not InnoDB!)`).
func TestTablesNamedInTheClientsCharacterSet(t *testing.T) {
	srv := sandboxtest.Server(t, "innodb")
	// The handshake collations the replay knows are the server's.
	root, _ := srv.FreshDB(t)
	rows, err := root.Query("SELECT ID, CHARACTER_SET_NAME FROM information_schema.COLLATIONS WHERE ID < 256")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for rows.Next() {
		var id int
		var name string
		if err := rows.Scan(&id, &name); err != nil {
			t.Fatal(err)
		}
		if s, ok := charset.OfCollation(byte(id)); ok && s.Name() != name && !(s.Name() == "utf8mb4" && (name == "utf8mb3" || name == "ascii" || name == "binary")) {
			t.Errorf("collation %d: %s, the server says %s", id, s.Name(), name)
		} else if ok {
			checked++
		}
	}
	rows.Close()
	if checked < 100 {
		t.Errorf("%d collations known", checked)
	}

	via, finish := captureProxy(t)
	_, dsn := srv.FreshDB(t)
	open := func(mod func(*driver.Config)) *sql.DB {
		cfg, err := driver.ParseDSN(via(dsn))
		if err != nil {
			t.Fatal(err)
		}
		mod(cfg)
		db, err := sql.Open("mysql", cfg.FormatDSN())
		if err != nil {
			t.Fatal(err)
		}
		db.SetMaxOpenConns(1)
		return db
	}
	must := func(x any, err error) { t.Helper(); drain(t, x, err) }
	koi := open(func(c *driver.Config) { c.Params = map[string]string{"charset": "koi8r"} }) // SET NAMES koi8r after the handshake
	must(koi.Exec("CREATE TABLE `\xd4\xc1\xc2\xcc\xc9\xc3\xc1` (id INT PRIMARY KEY, v VARCHAR(10))"))
	must(koi.Exec("INSERT INTO `\xd4\xc1\xc2\xcc\xc9\xc3\xc1` VALUES (1, '\xd0\xd2\xc9'), (2, 'b')"))
	koi.Close()
	lat := open(func(c *driver.Config) { c.Collation = "latin1_swedish_ci" }) // the handshake's collation
	must(lat.Exec("CREATE TABLE `caf\xe9` (id INT PRIMARY KEY)"))
	must(lat.Exec("INSERT INTO `caf\xe9` VALUES (1), (2), (3)"))
	lat.Close()
	capDir := finish()

	ta, tb, _, _ := twoInnoDB(t)
	rep := replayRun(t, capDir, nil, ta, tb)
	for _, tr := range rep.Targets {
		want := map[string]int64{"таблица": 2, "café": 3}
		for _, ts := range tr.EndState.Tables {
			_, name, _ := strings.Cut(ts.Table, ".")
			if n, ok := want[name]; ok && ts.Exists && ts.Rows == n {
				delete(want, name)
			}
		}
		if len(want) != 0 || len(tr.EndState.Tables) != 2 {
			t.Errorf("%s: end state %+v; missing %v", tr.Name, tr.EndState.Tables, want)
		}
		var created []string
		for _, c := range tr.Created {
			_, name, _ := strings.Cut(c.Table, ".")
			created = append(created, name+" "+c.Engine)
		}
		slices.Sort(created)
		if strings.Join(created, ", ") != "café InnoDB, таблица InnoDB" {
			t.Errorf("%s: created %v", tr.Name, created)
		}
		texts := ""
		for _, d := range tr.TopDigests {
			texts += d.Text + "\n"
		}
		if !strings.Contains(texts, "insert into `таблица`") || !strings.Contains(texts, "create table `café`") {
			t.Errorf("%s: digests\n%s", tr.Name, texts)
		}
	}
	if d := rep.Divergences[0]; d.Total() != 0 {
		t.Errorf("divergences %+v", d)
	}
	ins, err := report.Inspect(context.Background(), capDir, report.InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	texts := ""
	for _, d := range ins.TopDigests {
		texts += d.Text + "\n"
	}
	if !strings.Contains(texts, "insert into `таблица`") || !strings.Contains(texts, "create table `café`") {
		t.Errorf("inspect's digests\n%s", texts)
	}
}

// What follows records lost from a capture differs from the captured
// responses for that reason alone: such differences are counted apart
// (ambiguous, not-replayed), in every session, never as divergences.
// Here a session's second INSERT is lost, and another session's SELECT
// finds one row where the capture had two.
func TestDifferencesAfterLostRecordsAreLabelled(t *testing.T) {
	via, finish := captureProxy(t)
	_, dsn := sandboxtest.Server(t, "innodb").FreshDB(t)
	sqlOpen := func() *sql.DB {
		db, err := sql.Open("mysql", via(dsn))
		if err != nil {
			t.Fatal(err)
		}
		db.SetMaxOpenConns(1)
		return db
	}
	w := sqlOpen()
	must := func(x any, err error) { t.Helper(); drain(t, x, err) }
	must(w.Exec("CREATE TABLE t (id INT PRIMARY KEY)"))
	must(w.Exec("INSERT INTO t VALUES (1)"))
	must(w.Exec("INSERT INTO t VALUES (2)"))
	r := sqlOpen()
	var n int
	if err := r.QueryRow("SELECT COUNT(*) FROM t").Scan(&n); err != nil || n != 2 {
		t.Fatalf("captured count %d %v", n, err)
	}
	w.Close()
	r.Close()
	capDir := finish()

	// Lose the second INSERT, as a crash that emptied a WAL would.
	sr, err := store.Open(capDir)
	if err != nil {
		t.Fatal(err)
	}
	var lost uint64
	for rec, err := range sr.Records() {
		if err != nil {
			t.Fatal(err)
		}
		if rec.SQL == "INSERT INTO t VALUES (2)" {
			lost = rec.Seq
		}
	}
	sr.Close()
	loseRecords(t, capDir, lost)

	ta, tb, _, _ := twoInnoDB(t)
	rep := replayRun(t, capDir, func(c *Config) { c.SkipDamaged = true }, ta, tb)
	for i, tr := range rep.Targets {
		vc := rep.VsCapture[i]
		if vc == nil || vc.Total() != 0 || vc.Ambiguous != 1 || vc.AmbiguousBy[compare.ReasonNotReplayed] != 1 {
			t.Errorf("%s vs the capture: %+v; want the COUNT(*) counted apart, not divergent", tr.Name, vc)
		}
	}
	if d := rep.Divergences[0]; d.Total() != 0 || d.Ambiguous != 0 {
		t.Errorf("b vs a: %+v, want nothing", d)
	}
}
