package replay

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/tandemdb/tandem/capture/synth"
	"github.com/tandemdb/tandem/compare"
	"github.com/tandemdb/tandem/prepare"
	"github.com/tandemdb/tandem/report"
	"github.com/tandemdb/tandem/sandbox/sandboxtest"
	"github.com/tandemdb/tandem/store"
	"github.com/tandemdb/tandem/targets"
)

func TestMain(m *testing.M) {
	// Units and records a --concurrency replay hands back are poisoned and
	// dropped, not reused, in every test that does not ask for them
	// (Config.spares): a use after the hand-back then runs a statement no
	// capture holds, and the test's exact counts fail.
	poisonSpares = true
	code := sandboxtest.Main(m)
	if truthCaptures.root != "" {
		os.RemoveAll(truthCaptures.root)
	}
	os.Exit(code)
}

func tgt(t testing.TB, name, dsn, extra string) targets.Target {
	t.Helper()
	x, err := targets.Parse(name + "=" + dsn + extra)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// databaseOf is the name of the database db's connections use.
func databaseOf(t *testing.T, db *sql.DB) string {
	t.Helper()
	var name string
	if err := db.QueryRow("SELECT DATABASE()").Scan(&name); err != nil {
		t.Fatal(err)
	}
	return name
}

// twoInnoDB gives two fresh databases on the shared InnoDB server, as
// targets "a" and "b", with a handle on each.
func twoInnoDB(t *testing.T) (ta, tb targets.Target, dba, dbb *sql.DB) {
	t.Helper()
	srv := sandboxtest.Server(t, "innodb")
	dba, a := srv.FreshDB(t)
	dbb, b := srv.FreshDB(t)
	return tgt(t, "a", a, ""), tgt(t, "b", b, ""), dba, dbb
}

// prepared makes identical sbtest tables (same seed) on each target.
func prepared(t *testing.T, tables, size int, ts ...targets.Target) {
	t.Helper()
	_, err := prepare.Run(context.Background(), prepare.Config{Targets: ts, Tables: tables, TableSize: size, Threads: 2,
		AutoInc: true, CreateSecondary: true, Seed: 9})
	if err != nil {
		t.Fatal(err)
	}
}

func synthCapture(t *testing.T, workload string, mod func(*synth.Config)) string {
	t.Helper()
	cfg := synth.Config{Dir: filepath.Join(t.TempDir(), "cap"), Workload: workload, Options: synth.DefaultOptions(),
		Dist: synth.DefaultDist(), Threads: 1, Events: 100, Seed: 5}
	cfg.Tables, cfg.TableSize = 2, 2000
	if mod != nil {
		mod(&cfg)
	}
	if _, err := synth.Run(context.Background(), cfg, nil); err != nil {
		t.Fatal(err)
	}
	return cfg.Dir
}

// testReport is a report's one point seen as the tests read it: targets
// in order, each non-baseline target's divergences from the baseline, and
// every target's from the capture.
type testReport struct {
	*report.Report
	Targets     []report.Target
	Divergences []*store.Divergences
	VsCapture   []*store.Divergences
	IO          string
}

func wrapReport(r *report.Report) *testReport {
	pt := r.Points[0]
	tr := &testReport{Report: r, Targets: pt.Targets, IO: pt.IO}
	for _, x := range pt.Targets {
		if x.Name != r.Baseline {
			tr.Divergences = append(tr.Divergences, x.VsBaseline)
		}
		tr.VsCapture = append(tr.VsCapture, x.VsCapture)
	}
	return tr
}

func replayRun(t testing.TB, capDir string, mod func(*Config), ts ...targets.Target) *testReport {
	t.Helper()
	cfg := Config{Capture: capDir, RunDir: filepath.Join(t.TempDir(), "run"), Targets: ts, Speed: 0}
	if mod != nil {
		mod(&cfg)
	}
	keepOnFailure(t, capDir, cfg.RunDir)
	res, err := Run(context.Background(), cfg, nil)
	return wrapReport(loadRun(t, res, err))
}

// keepOnFailure copies a failing test's capture and run directory to
// $TANDEM_KEEP_FAILED/<test name>, when that is set, so a failure seen
// once (under load, in CI) can be read afterwards with tandem inspect and
// tandem report.
func keepOnFailure(t testing.TB, capDir, runDir string) {
	keep := os.Getenv("TANDEM_KEEP_FAILED")
	if keep == "" {
		return
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		dst := filepath.Join(keep, strings.NewReplacer("/", "_", " ", "_", "=", "-").Replace(t.Name()))
		for src, name := range map[string]string{capDir: "capture", runDir: "run"} {
			if err := os.CopyFS(filepath.Join(dst, name), os.DirFS(src)); err != nil {
				t.Logf("keeping %s: %v", src, err)
			}
		}
		t.Logf("kept the capture and the run in %s", dst)
	})
}

// loadRun reads a run back as `tandem report` does, failing t on an error
// from the run or from reading it.
func loadRun(t testing.TB, res Result, err error) *report.Report {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	rep, err := report.Load(res.RunDir)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestIdenticalInnoDBSingleSessionReadWriteNoDivergence(t *testing.T) {
	ta, tb, _, _ := twoInnoDB(t)
	prepared(t, 2, 2000, ta, tb)
	rep := replayRun(t, synthCapture(t, "oltp_read_write", nil), nil, ta, tb)
	d := rep.Divergences[0]
	// 100 transactions of 20 statements, the connect and 20 prepares
	// (BEGIN, COMMIT, 9 statements x 2 tables).
	if d.Total() != 0 || d.Compared != 100*20+1+20 || d.Missing != 0 || d.Extra != 0 {
		t.Fatalf("divergences %+v (compared %d, want 2021)", d.ByClass, d.Compared)
	}
	for _, tr := range rep.Targets {
		if tr.Errors != 0 || tr.Transactions != 100 || tr.Reads != 1400 || tr.Writes != 400 || tr.Other != 200 {
			t.Errorf("%s: %+v", tr.Name, tr)
		}
	}
}

func TestInnoDBVsMyRocksReadOnlyEightSessions(t *testing.T) {
	inno, rocks := sandboxtest.Server(t, "innodb"), sandboxtest.Server(t, "rocksdb")
	_, a := inno.FreshDB(t)
	_, b := rocks.FreshDB(t)
	ta, tb := tgt(t, "innodb", a, ""), tgt(t, "myrocks", b, ",engine=rocksdb")
	prepared(t, 2, 2000, ta, tb)
	rep := replayRun(t, synthCapture(t, "oltp_read_only", func(c *synth.Config) { c.Threads, c.Events = 8, 200 }), nil, ta, tb)
	d := rep.Divergences[0]
	// 200 transactions of 16 statements; per session a connect and 12
	// prepares (BEGIN, COMMIT, 5 statements x 2 tables).
	if d.Compared != 200*16+8*13 {
		t.Fatalf("compared %d, want 3304", d.Compared)
	}
	for _, c := range []string{compare.Content, compare.RowCount, compare.Order, compare.ErrorVsOK} {
		if d.ByClass[c] != 0 {
			t.Errorf("%s divergences: %d (%+v)", c, d.ByClass[c], d.Samples)
		}
	}
	if rep.Targets[1].Engine != "ROCKSDB" || rep.Targets[1].Reads != 200*14 {
		t.Errorf("myrocks target %+v", rep.Targets[1])
	}
	// Both tables measured on both targets, before and after (rows are
	// the engine's estimate: InnoDB's samples pages).
	for _, tr := range rep.Targets {
		if len(tr.Footprint) != 2 || len(tr.FootprintBefore) != 2 || tr.FootprintError != "" {
			t.Fatalf("%s footprint %+v before %+v (%s)", tr.Target, tr.Footprint, tr.FootprintBefore, tr.FootprintError)
		}
		for i, f := range tr.Footprint {
			if f.Rows < 1800 || f.Rows > 2200 || f.DataBytes <= 0 || f.Table != tr.FootprintBefore[i].Table || !strings.HasSuffix(f.Table, fmt.Sprintf(".sbtest%d", i+1)) {
				t.Errorf("%s: %+v (before %+v)", tr.Target, f, tr.FootprintBefore[i])
			}
		}
	}
}

// writeCapture writes a hand-made capture: one session, text queries.
func writeCapture(t *testing.T, sqls []string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "cap")
	w, err := store.Create(dir, store.WriterOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	recs := []store.Record{{Session: 1, Start: now, Kind: store.KindConnect, User: "app", Schema: "whatever"}}
	for i, q := range sqls {
		recs = append(recs, store.Record{Session: 1, Start: now.Add(time.Duration(i+1) * time.Millisecond), Kind: store.KindQuery, SQL: q})
	}
	recs = append(recs, store.Record{Session: 1, Start: now.Add(time.Second), Kind: store.KindQuit})
	for i := range recs {
		if _, err := w.Append(&recs[i]); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	return dir
}

func exec(t *testing.T, db *sql.DB, qs ...string) {
	t.Helper()
	for _, q := range qs {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

func TestInjectedDifferencesAreFoundExactly(t *testing.T) {
	ta, tb, dba, dbb := twoInnoDB(t)
	for _, db := range []*sql.DB{dba, dbb} {
		exec(t, db, "CREATE TABLE t (id INT PRIMARY KEY, email VARCHAR(40), v INT)")
		for i := 1; i <= 20; i++ {
			exec(t, db, fmt.Sprintf("INSERT INTO t VALUES (%d, 'u%d@x', %d)", i, i, i*10))
		}
	}
	exec(t, dba, "CREATE UNIQUE INDEX u_email ON t (email)") // b lacks the unique index
	exec(t, dbb, "UPDATE t SET v = -1 WHERE id = 7")         // one row changed on b

	var sqls []string
	for i := 1; i <= 20; i++ {
		sqls = append(sqls, fmt.Sprintf("SELECT v FROM t WHERE id = %d", i)) // seqs 2..21
	}
	sqls = append(sqls,
		"SELECT id, v FROM t WHERE id BETWEEN 5 AND 9",   // 22: reads row 7
		"SELECT id, v FROM t WHERE id BETWEEN 10 AND 15", // 23
		"SELECT SUM(v) FROM t",                           // 24: reads row 7
		"INSERT INTO t VALUES (100, 'u3@x', 0)",          // 25: duplicate email on a only
		"SELECT NOW(), COUNT(*) FROM t WHERE id < 100",   // 26: nondeterministic
		"SELECT id FROM t ORDER BY id LIMIT 3",           // 27: deterministic with ORDER BY
		"SELECT v FROM t WHERE id = 7 AND v > 0 LIMIT 1", // 28: LIMIT without ORDER BY: nondeterministic
	)
	rep := replayRun(t, writeCapture(t, sqls), nil, ta, tb)
	d := rep.Divergences[0]
	got := map[string][]uint64{}
	for _, s := range d.Samples {
		got[s.Class] = append(got[s.Class], s.Seq)
	}
	want := map[string][]uint64{compare.Content: {8, 22, 24}, compare.ErrorVsOK: {25}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("divergent seqs by class %v, want %v (counts %v)", got, want, d.ByClass)
	}
	if d.ByClass[compare.Content] != 3 || d.ByClass[compare.ErrorVsOK] != 1 || d.Total() != 4 || d.Nondeterministic != 2 {
		t.Fatalf("counts %v, nondeterministic %d; want 3 row-content, 1 error-vs-ok, 2 nondeterministic", d.ByClass, d.Nondeterministic)
	}
	// The first differing row, from the read statements run again after the replay.
	wantDiff := map[uint64]string{
		8:  "first differing row (re-run after the replay): row 1 on a (70) is not on b (1 rows vs 1)",
		22: "first differing row (re-run after the replay): row 3 on a (7, 70) is not on b (5 rows vs 5)",
		24: "first differing row (re-run after the replay): row 1 on a ('2100') is not on b (1 rows vs 1)", // DECIMAL comes back as text
		25: "",
	}
	for _, s := range d.Samples {
		if s.Seq == 25 && (s.Baseline != "error 1062" || !strings.HasPrefix(s.Target, "ok, 1 affected")) {
			t.Errorf("duplicate insert sample %+v", s)
		}
		if s.FirstDiff != wantDiff[s.Seq] {
			t.Errorf("seq %d first differing row %q, want %q", s.Seq, s.FirstDiff, wantDiff[s.Seq])
		}
	}
	// A hand-written capture has no responses to compare with.
	for _, c := range rep.VsCapture {
		if c.Compared != 0 || c.Total() != 0 {
			t.Errorf("compared with capture: %+v", c)
		}
	}
}

func TestTableDDLFollowsTargetEngine(t *testing.T) {
	inno, rocks := sandboxtest.Server(t, "innodb"), sandboxtest.Server(t, "rocksdb")
	dba, a := inno.FreshDB(t)
	dbb, b := rocks.FreshDB(t)
	capDir := writeCapture(t, []string{"CREATE TABLE made (id INT PRIMARY KEY) ENGINE=MyISAM", "INSERT INTO made VALUES (1)"})
	rep := replayRun(t, capDir, nil, tgt(t, "inno", a, ",engine=innodb,options=ROW_FORMAT=COMPRESSED"), tgt(t, "rocks", b, ",engine=rocksdb"))
	if rep.Divergences[0].Total() != 0 || rep.Targets[0].Errors != 0 || rep.Targets[1].Errors != 0 {
		t.Fatalf("report %+v %+v", rep.Targets, rep.Divergences)
	}
	for _, c := range []struct {
		db             *sql.DB
		engine, rowFmt string
	}{{dba, "InnoDB", "Compressed"}, {dbb, "ROCKSDB", ""}} {
		var engine, rowFmt string
		c.db.QueryRow("SELECT ENGINE, ROW_FORMAT FROM information_schema.TABLES WHERE TABLE_SCHEMA=DATABASE() AND TABLE_NAME='made'").Scan(&engine, &rowFmt)
		if engine != c.engine || c.rowFmt != "" && rowFmt != c.rowFmt {
			t.Errorf("table made: engine %s row format %s, want %s %s", engine, rowFmt, c.engine, c.rowFmt)
		}
	}
}

func TestMissingEngineStopsBeforeAnyStatement(t *testing.T) {
	srv := sandboxtest.Server(t, "innodb")
	dba, a := srv.FreshDB(t)
	capDir := writeCapture(t, []string{"CREATE TABLE should_not_exist (id INT)"})
	_, err := Run(context.Background(), Config{Capture: capDir, RunDir: filepath.Join(t.TempDir(), "run"),
		Targets: []targets.Target{tgt(t, "inno", a, ""), tgt(t, "tokudb", a, ",engine=tokudb")}}, nil)
	if err == nil || !strings.Contains(err.Error(), "target tokudb: engine TokuDB is not available on 10.11") {
		t.Fatalf("err = %v", err)
	}
	var n int
	dba.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA=DATABASE()").Scan(&n)
	if n != 0 {
		t.Fatalf("a statement ran although a target was unusable")
	}
}

// Paced replay runs every captured event at its intended time, and
// measures for each how late it went (the lag). How close the achieved
// rate comes to the captured one is a measurement of the machine:
// BenchmarkPacedReplayKeepsUp and make bench-replay report it.
func TestPacingReplaysEveryEventAndMeasuresItsLag(t *testing.T) {
	t.Parallel() // as TestTruthWhenReplayCannotKeepOrder; the lag is measured, not bounded
	srv := sandboxtest.Server(t, "innodb")
	_, a := srv.FreshDB(t)
	ta := tgt(t, "a", a, "")
	prepared(t, 1, 1000, ta)
	const rate, secs = 200.0, 3
	capDir := synthCapture(t, "oltp_point_select", func(c *synth.Config) {
		c.Tables, c.TableSize, c.Threads, c.Events, c.Rate, c.Duration = 1, 1000, 4, 0, rate, secs*time.Second
	})
	// The capture's own rate: Poisson arrivals make its event count vary
	// (±2.9% at this size), so replay is held to what was captured.
	r, err := store.Open(capDir)
	if err != nil {
		t.Fatal(err)
	}
	var first, last int64
	var events int
	for rec, err := range r.Records() {
		if err != nil {
			t.Fatal(err)
		}
		s := rec.Start.UnixNano()
		if first == 0 || s < first {
			first = s
		}
		last = max(last, s)
		if rec.Kind == store.KindExecute {
			events++
		}
	}
	r.Close()
	captured := float64(events) / (float64(last-first) / 1e9)
	if math.Abs(captured-rate) > 4*math.Sqrt(rate*secs)/secs {
		t.Fatalf("captured rate %.1f/s is not Poisson around %v/s", captured, rate)
	}
	for _, speed := range []float64{1, 2} {
		rep := replayRun(t, capDir, func(c *Config) { c.Speed = speed }, ta)
		tr := rep.Targets[0]
		achieved := float64(tr.Transactions) / rep.Elapsed
		want := captured * speed
		t.Logf("speed %v: %d events in %.3fs = %.1f/s (captured rate x speed %.1f/s); lag from intended p50 %.3f p95 %.3f p99 %.3f max %.3f ms",
			speed, tr.Transactions, rep.Elapsed, achieved, want, tr.Lag.P50, tr.Lag.P95, tr.Lag.P99, tr.Lag.Max)
		if tr.Transactions != int64(events) || tr.Errors != 0 {
			t.Errorf("speed %v: %d events replayed with %d errors, want the capture's %d", speed, tr.Transactions, tr.Errors, events)
		}
		if tr.Lag == nil {
			t.Fatalf("speed %v: no lag measured", speed)
		}
		if tr.Lag.Count != tr.Transactions {
			t.Errorf("speed %v: lag measured for %d of %d statements", speed, tr.Lag.Count, tr.Transactions)
		}
	}
}

// With --loop, a statement diverging on every pass is reported once per
// pass, each sample naming its record in the capture and its pass.
func TestLoopedDivergenceSamplesNameTheirPass(t *testing.T) {
	ta, tb, dba, dbb := twoInnoDB(t)
	exec(t, dba, "CREATE TABLE t (id INT PRIMARY KEY, v INT)", "INSERT INTO t VALUES (1, 10)")
	exec(t, dbb, "CREATE TABLE t (id INT PRIMARY KEY, v INT)", "INSERT INTO t VALUES (1, 11)")
	rep := replayRun(t, writeCapture(t, []string{"SELECT v FROM t WHERE id = 1"}), func(c *Config) { c.Loop, c.Samples = 2, 5 }, ta, tb)
	d := rep.Divergences[0]
	var got []string
	for _, s := range d.Samples {
		got = append(got, fmt.Sprintf("%s seq %d loop %d", s.Class, s.Seq, s.Loop))
	}
	want := "[row-content seq 2 loop 0 row-content seq 2 loop 1]"
	if d.ByClass[compare.Content] != 2 || d.Total() != 2 || fmt.Sprint(got) != want {
		t.Fatalf("divergences %v, samples %v; want 2 row-content, samples %s", d.ByClass, got, want)
	}
}

// A replay stopped while statements are on the server (Ctrl-C) counts
// them as stopped, not as the targets' errors, and its report says first
// that it was interrupted. (Before: "2013 cancelled" errors, one per
// statement in flight, and no word of the interruption but in JSON.)
func TestInterruptedReplayCountsNoErrors(t *testing.T) {
	ta, tb, _, _ := twoInnoDB(t)
	capDir := writeCapture(t, []string{"SELECT 1", "SELECT SLEEP(5)", "SELECT 2"})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(1500*time.Millisecond, cancel)
	start := time.Now()
	res, err := Run(ctx, Config{Capture: capDir, RunDir: filepath.Join(t.TempDir(), "run"), Targets: []targets.Target{ta, tb}}, nil)
	if !res.Interrupted {
		t.Error("the result does not say the run was interrupted")
	}
	rep := loadRun(t, res, err)
	if took := time.Since(start); took > 4500*time.Millisecond {
		t.Errorf("the interrupted replay took %v: it waited for SLEEP(5)", took)
	}
	if rep.Finished {
		t.Error("report says finished")
	}
	for _, x := range rep.Points[0].Targets {
		if x.Errors != 0 || len(x.ErrorCodes) != 0 || x.FailedTransactions != 0 || x.SkippedBy["not run to its end: the replay was stopped"] != 2 {
			// The SLEEP, stopped on the server, and SELECT 2, queued behind it.
			t.Errorf("%s: errors %d %v, failed trx %d, skipped %v; want no error, the SLEEP and SELECT 2 skipped as stopped", x.Name, x.Errors, x.ErrorCodes, x.FailedTransactions, x.SkippedBy)
		}
	}
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(text.String(), "INTERRUPTED after ") || strings.Contains(text.String(), "cancelled") {
		t.Errorf("text report:\n%s", text.String())
	}
}

// A target naming a database that does not exist is refused before
// anything runs (it passed the checks, ran nothing, exited 0 and blamed
// 4,000 skips on statements prepared before the capture began).
func TestTargetWithoutItsDatabaseIsRefused(t *testing.T) {
	srv := sandboxtest.Server(t, "innodb")
	_, a := srv.FreshDB(t)
	ta, missing := tgt(t, "a", a, ""), tgt(t, "b", srv.DSN("tandem_no_such_db"), "")
	_, err := Run(context.Background(), Config{Capture: writeCapture(t, []string{"SELECT 1"}), RunDir: filepath.Join(t.TempDir(), "run"), Targets: []targets.Target{ta, missing}}, nil)
	if !errors.Is(err, targets.ErrNoDatabase) || !strings.Contains(err.Error(), `target b: database "tandem_no_such_db" does not exist on `) {
		t.Fatalf("err %v, want ErrNoDatabase naming target b and its database", err)
	}
}

// Two targets that are one server's one database are refused before
// anything runs: each write ran twice on the same rows and the end state
// was "same as baseline", the server compared with itself. Another
// database on the same server is another target.
func TestTargetsThatAreTheSameTablesAreRefused(t *testing.T) {
	srv := sandboxtest.Server(t, "innodb")
	_, a := srv.FreshDB(t)
	_, other := srv.FreshDB(t)
	name := tgt(t, "a", a, "").Database()
	capDir := writeCapture(t, []string{"SELECT 1"})
	// The same server through its socket: another address, found out by
	// the server's own lock, not by comparing addresses.
	ta, again := tgt(t, "a", a, ""), tgt(t, "b", "root@unix("+filepath.Join(srv.Dir, "mysqld.sock")+")/"+name, "")
	_, err := Run(context.Background(), Config{Capture: capDir, RunDir: filepath.Join(t.TempDir(), "run"), Targets: []targets.Target{ta, again}}, nil)
	if err == nil || !strings.Contains(err.Error(), "targets a and b are the same tables: one server (a lock taken through 127.0.0.1:") || !strings.Contains(err.Error(), fmt.Sprintf("and one database (%q)", name)) {
		t.Fatalf("err %v, want targets a and b refused as the same tables", err)
	}
	// Another server with a database of that name is another target.
	other2 := sandboxtest.Server(t, "rocksdb")
	odb, err := sql.Open("mysql", other2.DSN(""))
	if err != nil {
		t.Fatal(err)
	}
	defer odb.Close()
	if _, err := odb.Exec("CREATE DATABASE IF NOT EXISTS " + name); err != nil {
		t.Fatal(err)
	}
	defer odb.Exec("DROP DATABASE " + name)
	if _, err := Run(context.Background(), Config{Capture: capDir, RunDir: filepath.Join(t.TempDir(), "run"), Targets: []targets.Target{ta, tgt(t, "c", other2.DSN(name), "")}}, nil); err != nil {
		t.Fatalf("a database of the same name on another server: %v", err)
	}
	res, err := Run(context.Background(), Config{Capture: capDir, RunDir: filepath.Join(t.TempDir(), "run"), Targets: []targets.Target{ta, tgt(t, "b", other, "")}}, nil)
	if err != nil || res.RunDir == "" {
		t.Fatalf("another database on the same server: %v", err)
	}
}

// --duration is kept: when it runs out, what is queued for each
// connection is not run — only what is on the server ends — in session
// mode and regrouped alike. (A 2 s replay ran 3.8 s, sweep points of 2 s
// 3.9–11.6 s, and their rates were over the longer time.) The capture is
// 400 statements of 20 ms in one session, 8 s of work: replay had queued
// them all and ran them to the end. The bound is on stopping, not speed.
func TestDurationIsKept(t *testing.T) {
	srv := sandboxtest.Server(t, "innodb")
	_, a := srv.FreshDB(t)
	ta := tgt(t, "a", a, "")
	sqls := make([]string, 400)
	for i := range sqls {
		sqls[i] = "SELECT SLEEP(0.02)"
	}
	capDir := writeCapture(t, sqls)
	for _, mode := range []struct {
		name string
		mod  func(*Config)
	}{
		// Paced as captured (1 ms apart): the statements fall behind at
		// once, and the capture's second pass would begin only at 1 s. (At
		// speed 0 each pass of a read-only capture opens its sessions at
		// once: reads do not wait for reads.)
		{"sessions", func(c *Config) { c.Speed, c.Duration = 1, time.Second }},
		{"concurrency=4", func(c *Config) { c.Speed, c.Duration, c.Concurrency = 1, time.Second, 4 }},
	} {
		t.Run(mode.name, func(t *testing.T) {
			rep := replayRun(t, capDir, mode.mod, ta)
			tr := rep.Targets[0]
			t.Logf("%s: elapsed %.2fs, %d statements (%.1f/s)", mode.name, tr.Elapsed, tr.Reads, tr.QPS)
			if tr.Elapsed > 1.5 || tr.Elapsed < 1 {
				t.Errorf("a 1 s replay ran %.2fs", tr.Elapsed)
			}
			if tr.Errors != 0 || tr.Reads == 0 || tr.Reads >= 400 {
				t.Errorf("%d errors %v, %d statements run of 400", tr.Errors, tr.ErrorCodes, tr.Reads)
			}
		})
	}
}

// A capture that lacks records — a crash that emptied a WAL in the middle
// lost 3,912 of 11,643, and inspect said "records up to its last sync are
// here" — is found out by the records' sequence numbers: inspect counts
// what is lost, replay refuses it, and with --skip-damaged replays it and
// says what is missing.
// loseRecords deletes records from a closed capture, and its summary, as
// a crash that emptied a WAL leaves it.
func loseRecords(t *testing.T, capDir string, seqs ...uint64) {
	t.Helper()
	db, err := pebble.Open(capDir, &pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, seq := range seqs {
		if err := db.Delete(binary.BigEndian.AppendUint64([]byte{0x02}, seq), pebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Delete([]byte("\x00summary"), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestCaptureWithLostRecords(t *testing.T) {
	ta, tb, _, _ := twoInnoDB(t)
	sqls := make([]string, 20)
	for i := range sqls {
		sqls[i] = fmt.Sprintf("SELECT %d", i)
	}
	capDir := writeCapture(t, sqls)
	// As a crash leaves it: records 5 to 9 gone, and no summary (the
	// writer never closed).
	loseRecords(t, capDir, 5, 6, 7, 8, 9)
	ins, err := report.Inspect(context.Background(), capDir, report.InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ins.Records != 17 || ins.Lost != 5 || ins.LostRuns != "5 records lost, in 1 run (seq 5 to 9)" {
		t.Fatalf("inspect: %d records, lost %d %q; want 17 and 5 (seq 5 to 9)", ins.Records, ins.Lost, ins.LostRuns)
	}
	_, err = Run(context.Background(), Config{Capture: capDir, RunDir: filepath.Join(t.TempDir(), "run"), Targets: []targets.Target{ta, tb}}, nil)
	if err == nil || !strings.Contains(err.Error(), "lacks records: 5 records lost, in 1 run (seq 5 to 9)") || !strings.Contains(err.Error(), "--skip-damaged") {
		t.Fatalf("replay of a damaged capture: %v", err)
	}
	rep := replayRun(t, capDir, func(c *Config) { c.SkipDamaged = true }, ta, tb)
	if notes := strings.Join(rep.Notes, " "); !strings.Contains(notes, "the capture lacks records (5 records lost") || rep.Targets[1].Reads != 15 ||
		!strings.Contains(notes, "not closed cleanly") || !strings.Contains(notes, "up to its last record (seq 22)") {
		t.Errorf("--skip-damaged: notes %q, %d reads on b (want the 15 SELECTs that are there)", rep.Notes, rep.Targets[1].Reads)
	}
}

// A synthesized capture's sessions run freely (--order none): replayed
// onto two identical InnoDB copies, what a statement saw of the others'
// writes depends on the order replay gave them, on each copy its own.
// None of that is a divergence; end states that differ say why. (The
// demo reported 35–40 row-content divergences between InnoDB and
// compressed InnoDB this way.)
func TestFreeOrderDifferencesAreNotDivergences(t *testing.T) {
	ta, tb, _, _ := twoInnoDB(t)
	prepared(t, 2, 500, ta, tb)
	capDir := synthCapture(t, "oltp_read_write", func(c *synth.Config) { c.Tables, c.TableSize, c.Threads, c.Events = 2, 500, 8, 400 })
	rep := replayRun(t, capDir, func(c *Config) { c.Speed = 0 }, ta, tb)
	d := rep.Divergences[0]
	t.Logf("compared %d, divergent %d %v, ambiguous %d %v", d.Compared, d.Total(), d.ByClass, d.Ambiguous, d.AmbiguousBy)
	if d.Total() != 0 || d.AmbiguousBy[compare.ReasonReplayOrder] == 0 {
		for _, s := range d.Samples {
			if !s.Ambiguous {
				t.Logf("divergent [%s] session %d: %s (%s vs %s)", s.Class, s.Session, s.Statement, s.Baseline, s.Target)
			}
		}
		t.Errorf("%d divergences %v; want 0, the differences labelled %s", d.Total(), d.ByClass, compare.ReasonReplayOrder)
	}
	for _, ts := range rep.Targets[1].EndState.Tables {
		if ts.Differs && !strings.Contains(ts.Because, "--order none") {
			t.Errorf("end state: %s differs, unexplained (%q)", ts.Table, ts.Because)
		}
	}
}

// A capture whose one table file is damaged from some record on, to the
// last: replay refuses it, and with --skip-damaged replays the records
// before the damage and says which file it passed over. (That file held
// the records to the last, so the records read leave no gap in the
// sequence: the note came only from gaps, and said nothing.)
func TestCaptureDamagedToTheLast(t *testing.T) {
	ta, tb, _, _ := twoInnoDB(t)
	sqls := make([]string, 3000)
	for i := range sqls {
		sqls[i] = fmt.Sprintf("SELECT %d, '%0120d'", i, i)
	}
	capDir := writeCapture(t, sqls)
	ssts, _ := filepath.Glob(filepath.Join(capDir, "*.sst"))
	if len(ssts) != 1 {
		t.Fatalf("%d table files, want 1", len(ssts))
	}
	b, err := os.ReadFile(ssts[0])
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(ssts[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := store.Open(capDir)
	if err != nil {
		t.Fatal(err)
	}
	v, err := r.Verify()
	r.Close()
	if err != nil || len(v.Damaged) != 1 || !v.Damaged[0].ToLast || v.Readable < 2 || v.Readable >= 3002 {
		t.Fatalf("Verify: %+v, %v; want the file damaged to the last, some records before it", v, err)
	}
	if _, err := Run(context.Background(), Config{Capture: capDir, RunDir: filepath.Join(t.TempDir(), "run"), Targets: []targets.Target{ta, tb}}, nil); err == nil ||
		!strings.Contains(err.Error(), filepath.Base(ssts[0])+" is damaged") {
		t.Fatalf("replay of a damaged capture: %v", err)
	}
	rep := replayRun(t, capDir, func(c *Config) { c.SkipDamaged = true }, ta, tb)
	notes := strings.Join(rep.Notes, " ")
	if want := "the capture lacks records (" + filepath.Base(ssts[0]) + " is damaged"; !strings.Contains(notes, want) || !strings.Contains(notes, "records 1 to the last were passed over") {
		t.Errorf("--skip-damaged: notes %q; want %q and the records it held", rep.Notes, want)
	}
	// The connect is the first record read; every SELECT read is replayed.
	if got := rep.Targets[1].Reads; got != int64(v.Readable)-1 {
		t.Errorf("--skip-damaged: %d reads on b, want the %d SELECTs read before the damage", got, v.Readable-1)
	}
}
