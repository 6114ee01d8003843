package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/tandemdb/tandem/report"
	"github.com/tandemdb/tandem/sqlinfo"
	"github.com/tandemdb/tandem/store"
)

// tcpdump records the loopback traffic of a TCP port into a pcap file
// until the returned function stops it; packets the kernel dropped fail
// the test.
func tcpdump(t *testing.T, port int, file string) func() {
	t.Helper()
	stop := tcpdumpDropping(t, port, file)
	return func() {
		if dropped := stop(); dropped != "" {
			t.Errorf("tcpdump lost packets (the machine was too busy), so the capture cannot be exact: %s", dropped)
		}
	}
}

// tcpdumpDropping is tcpdump, whose stop returns what tcpdump said when it
// dropped packets ("" when it dropped none). tcpdump runs at a higher
// priority than the tests (nice -10): on 2 cores busy with servers and
// load generators it otherwise fell behind and the kernel dropped
// thousands of packets.
func tcpdumpDropping(t *testing.T, port int, file string) func() string {
	t.Helper()
	if _, err := exec.LookPath("tcpdump"); err != nil {
		t.Fatalf("tcpdump is not installed (make deps installs it): %v", err)
	}
	// --immediate-mode: tcpdump otherwise reads packets in blocks and loses
	// the last block's when stopped. No -U (a write per packet): on a
	// loaded machine tcpdump then falls behind and the kernel drops
	// packets; its buffer is written out when it stops. -B: 256 MiB.
	cmd := exec.Command("nice", "-n", "-10", "tcpdump", "-i", "lo", "-s", "0", "-B", "262144", "--immediate-mode", "-w", file, fmt.Sprintf("tcp port %d", port))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	var said strings.Builder
	for sc.Scan() { // "listening on lo, …" once it captures
		said.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "listening on") {
			break
		}
	}
	if !strings.Contains(said.String(), "listening on") {
		cmd.Wait()
		t.Fatalf("tcpdump did not start: %s", said.String())
	}
	rest := make(chan string, 1)
	go func() { b, _ := io.ReadAll(stderr); rest <- string(b) }()
	stopped, dropped := false, ""
	stop := func() string {
		if stopped {
			return dropped
		}
		stopped = true
		// tcpdump can be seconds behind on a busy machine, and what it
		// has not read when stopped is lost: wait until it writes nothing.
		last, still := int64(-1), 0
		for deadline := time.Now().Add(30 * time.Second); still < 5 && time.Now().Before(deadline); {
			time.Sleep(100 * time.Millisecond)
			if st, err := os.Stat(file); err == nil && st.Size() == last {
				still++
			} else if err == nil {
				last, still = st.Size(), 0
			}
		}
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
		if out := <-rest; !regexp.MustCompile(`(?m)^0 packets dropped by kernel`).MatchString(out) {
			dropped = out
		}
		return dropped
	}
	t.Cleanup(func() { stop() })
	return stop
}

// eachRecord calls fn with every record of the capture in dir.
func eachRecord(t *testing.T, dir string, fn func(*store.Record)) {
	t.Helper()
	r, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for rec, err := range r.Records() {
		if err != nil {
			t.Fatal(err)
		}
		fn(rec)
	}
}

// recordsBySession reads a capture into one line per record, per session
// named by its connection id (the server's, the same whoever recorded
// it), leaving out what differs by who recorded it (times, session
// numbers, sequence numbers).
func recordsBySession(t *testing.T, dir string) map[uint32][]string {
	t.Helper()
	conn := map[uint64]uint32{}
	out := map[uint32][]string{}
	eachRecord(t, dir, func(rec *store.Record) {
		if rec.Kind == store.KindConnect {
			conn[rec.Session] = rec.ConnID
		}
		id, ok := conn[rec.Session]
		if !ok {
			t.Fatalf("%s: session %d has records before its connect", dir, rec.Session)
		}
		rs := rec.Resp
		line := fmt.Sprintf("%s flags=%d sql=%q stmt=%d params=%v cursor=%d user=%q schema=%q caps=%#x | %s rows=%d cols=%d affected=%d id=%d err=%d sums=%x/%x/%v more=%d",
			rec.Kind, rec.Flags, rec.SQL, rec.StmtID, rec.Params, rec.CursorType, rec.User, rec.Schema, rec.ClientCaps,
			rs.Kind, rs.Rows, rs.Columns, rs.AffectedRows, rs.InsertID, rs.ErrCode, rs.Ordered, rs.Unordered, rs.HasChecksums, len(rs.More))
		out[id] = append(out[id], line)
	})
	return out
}

// statementsBySession lists, per session (by connection id), the shape
// (digest) of each statement it ran, in order: queries, and executes by
// their prepared statement's text (a log writes them with their values).
func statementsBySession(t *testing.T, dir string) map[uint32][]string {
	t.Helper()
	conn := map[uint64]uint32{}
	prepared := map[[2]uint64]string{}
	out := map[uint32][]string{}
	eachRecord(t, dir, func(rec *store.Record) {
		switch rec.Kind {
		case store.KindConnect:
			conn[rec.Session] = rec.ConnID
		case store.KindPrepare:
			prepared[[2]uint64{rec.Session, uint64(rec.StmtID)}] = rec.SQL
		case store.KindQuery:
			out[conn[rec.Session]] = append(out[conn[rec.Session]], sqlinfo.Analyze(rec.SQL).Digest.Text)
		case store.KindExecute:
			out[conn[rec.Session]] = append(out[conn[rec.Session]], sqlinfo.Analyze(prepared[[2]uint64{rec.Session, uint64(rec.StmtID)}]).Digest.Text)
		}
	})
	return out
}

// sameStatements checks that a log's capture holds, session by session,
// the statements of the proxy's, and at most extra sessions more.
func sameStatements(t *testing.T, what string, want, got map[uint32][]string, extra int) {
	t.Helper()
	if len(got) < len(want) || len(got) > len(want)+extra {
		t.Errorf("%s: %d sessions, want %d (+%d of the test's own)", what, len(got), len(want), extra)
	}
	for id, w := range want {
		g := got[id]
		if len(g) != len(w) {
			t.Errorf("%s: connection %d: %d statements, the proxy's %d", what, id, len(g), len(w))
		}
		for i := range min(len(g), len(w)) {
			if g[i] != w[i] {
				t.Errorf("%s: connection %d, statement %d: %q, the proxy's %q", what, id, i, g[i], w[i])
				break
			}
		}
	}
}

// dropPackets copies a pcap file without one packet in every hundred
// (chosen at random, seeded) and returns how many it dropped.
func dropPackets(t *testing.T, in, out string, every int) int {
	t.Helper()
	f, err := os.Open(in)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	g, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	w := pcapgo.NewWriterNanos(g)
	if err := w.WriteFileHeader(r.Snaplen(), r.LinkType()); err != nil {
		t.Fatal(err)
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	dropped := 0
	for {
		data, ci, err := r.ReadPacketData()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if rnd.IntN(every) == 0 {
			dropped++
			continue
		}
		if err := w.WritePacket(ci, data); err != nil {
			t.Fatal(err)
		}
	}
	return dropped
}

// countFlag counts a capture's records with flag f.
func countFlag(t *testing.T, dir string, f store.Flags) int {
	t.Helper()
	n := 0
	eachRecord(t, dir, func(rec *store.Record) {
		if rec.Flags&f != 0 {
			n++
		}
	})
	return n
}

// captureFrom runs tandem capture --from-pcap and returns its output.
func captureFrom(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, stderr, code := run(t, nil, append([]string{"capture", "--from-pcap"}, append(args, dir)...)...)
	if code != 0 {
		t.Fatalf("capture --from-pcap: exit %d: %s%s", code, out, stderr)
	}
	return out
}

func sourceStats(t *testing.T, dir string) *store.SourceStats {
	t.Helper()
	return sourceStatsOf(t, dir, store.OriginPcap)
}

func sourceStatsOf(t *testing.T, dir, kind string) *store.SourceStats {
	t.Helper()
	rep, err := report.Inspect(context.Background(), dir, report.InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.SourceStats == nil || rep.Origin == nil || rep.Origin.Kind != kind {
		t.Fatalf("%s: origin %+v, source stats %+v", dir, rep.Origin, rep.SourceStats)
	}
	return rep.SourceStats
}

// freshCopies makes two databases with the sysbench tables as tandem
// prepare loads them (as the test's primary began).
func freshCopies(t *testing.T, port int) []string {
	t.Helper()
	var dsns []string
	for i := range 2 {
		db := fmt.Sprintf("copy%d_%d", i, time.Now().UnixNano())
		rootSQL(t, port, "CREATE DATABASE "+db)
		dsns = append(dsns, fmt.Sprintf("root@tcp(127.0.0.1:%d)/%s", port, db))
	}
	loadSbtest(t, 2, 2000, dsns...)
	return dsns
}

// snapshotCopies copies the primary's sysbench tables into two new
// databases while they hold no write under way (LOCK TABLES … READ waits
// for the transactions that wrote them and holds back new writes), and
// calls then (which starts a capture) before the writers go on: the
// copies hold the rows the primary held when the capture began.
func snapshotCopies(t *testing.T, port int, primary string, then func()) []string {
	t.Helper()
	ctx := context.Background()
	db, err := sql.Open("mysql", fmt.Sprintf("root@tcp(127.0.0.1:%d)/", port))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var dsns, locks, copies []string
	for _, tab := range []string{"sbtest1", "sbtest2"} {
		locks = append(locks, primary+"."+tab+" READ")
	}
	for i := range 2 {
		name := fmt.Sprintf("snap%d_%d", i, time.Now().UnixNano())
		dsns = append(dsns, fmt.Sprintf("root@tcp(127.0.0.1:%d)/%s", port, name))
		if _, err := db.Exec("CREATE DATABASE " + name); err != nil {
			t.Fatal(err)
		}
		for _, tab := range []string{"sbtest1", "sbtest2"} {
			if _, err := db.Exec(fmt.Sprintf("CREATE TABLE %s.%s LIKE %s.%s", name, tab, primary, tab)); err != nil {
				t.Fatal(err)
			}
			locks = append(locks, name+"."+tab+" WRITE")
			copies = append(copies, fmt.Sprintf("INSERT INTO %s.%s SELECT * FROM %s.%s", name, tab, primary, tab))
		}
	}
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for try := 0; ; try++ {
		_, err := c.ExecContext(ctx, "LOCK TABLES "+strings.Join(locks, ", "))
		if err == nil {
			break
		}
		if try == 5 {
			t.Fatalf("lock tables: %v", err)
		}
	}
	for _, q := range copies {
		if _, err := c.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	then()
	if _, err := c.ExecContext(ctx, "UNLOCK TABLES"); err != nil {
		t.Fatal(err)
	}
	return dsns
}

// replayOntoCopies replays a capture onto two identical copies (dsns)
// and checks that they agree: 0 divergent between them, the same end
// state, and nothing unlabelled against the capture.
func replayOntoCopies(t *testing.T, capDir string, dsns []string, speed string, inexact bool) report.Target {
	t.Helper()
	runDir := filepath.Join(t.TempDir(), "run")
	rep := replayJSONIn(t, runDir, capDir, "--speed", speed, "--target", "a="+dsns[0], "--target", "b="+dsns[1])
	ts := rep.Points[0].Targets
	if d := ts[1].VsBaseline; d == nil || d.Total() != 0 || d.Compared == 0 {
		t.Errorf("%s: b vs a: %+v, want 0 divergent of many compared", capDir, d)
		if d != nil {
			explainDivergences(t, capDir, runDir, d.Samples)
		}
	}
	// The same end state; from an inexact capture (a log, whose times are
	// too coarse to keep every lock's order; a pcap that lost packets, so
	// answers and the order they give), differences each explained (a
	// transaction that failed for good on one side, or was run again:
	// labelled, counted apart).
	if es := ts[1].EndState; es == nil || es.Error != "" || !es.Same && !inexact {
		t.Errorf("%s: end state %+v", capDir, es)
	} else if !es.Same {
		for _, tab := range es.Tables {
			if tab.Differs && tab.Because == "" {
				t.Errorf("%s: %s differs with nothing to explain it: %+v", capDir, tab.Table, es)
			}
		}
	}
	for _, tg := range ts {
		if d := tg.VsCapture; d != nil && d.Total() != 0 {
			t.Errorf("%s: %s vs the capture: %+v, want nothing outside what is labelled", capDir, tg.Name, d)
		}
	}
	return ts[0]
}

// explainDivergences logs, for each divergence sample that is not
// labelled, the writes to its tables and the COMMITs of other sessions
// that ran around its transaction in the capture (from 20 ms before its
// first statement to 20 ms after it), with each target's outcome flags (store.Outcome*: 0x40 released,
// 0x200 run again): what a failure seen only in CI needs to be read.
func explainDivergences(t *testing.T, capDir, runDir string, samples []store.Sample) {
	t.Helper()
	var recs []*store.Record
	eachRecord(t, capDir, func(rec *store.Record) { recs = append(recs, rec.Clone()) })
	rr, err := store.OpenRun(runDir)
	if err != nil {
		t.Logf("explain: %v", err)
		return
	}
	defer rr.Close()
	flags := [2]map[uint64]uint32{{}, {}}
	for k := range flags {
		for o, err := range rr.Outcomes(0, k) {
			if err != nil {
				break
			}
			flags[k][o.Seq] = uint32(o.Flags)
		}
	}
	for _, sm := range samples {
		if sm.Ambiguous {
			continue
		}
		at := slices.IndexFunc(recs, func(r *store.Record) bool { return r.Seq == sm.Seq })
		if at < 0 {
			t.Logf("explain seq %d: not in the capture", sm.Seq)
			continue
		}
		s := recs[at]
		from := s.Start
		for i := at; i >= 0; i-- { // back to its transaction's BEGIN
			if r := recs[i]; r.Session == s.Session && r.Kind == store.KindQuery && strings.EqualFold(strings.TrimSpace(r.SQL), "BEGIN") {
				from = r.Start
				break
			}
		}
		lo, hi := from.Add(-20*time.Millisecond), s.Start.Add(s.Duration+20*time.Millisecond)
		its := map[string]bool{}
		si := sqlinfo.Analyze(s.SQL)
		for _, tb := range append(si.Reads, si.Writes...) {
			its[strings.ToLower(tb.Name)] = true
		}
		touches := func(in *sqlinfo.Info) bool { // a COMMIT names no table: always shown
			for _, tb := range in.Writes {
				if its[strings.ToLower(tb.Name)] {
					return true
				}
			}
			return in.End
		}
		t.Logf("explain seq %d (session %d, %s): its transaction from %s, the statement at +%v for %v; changes of other sessions around it:",
			s.Seq, s.Session, s.SQL, from.Format("15:04:05.000000"), s.Start.Sub(from), s.Duration)
		n := 0
		for _, r := range recs {
			if r.Session == s.Session || r.Kind != store.KindQuery || r.Start.Add(r.Duration).Before(lo) || r.Start.After(hi) || !touches(sqlinfo.Analyze(r.SQL)) {
				continue
			}
			if n++; n > 80 {
				t.Logf("  …")
				break
			}
			t.Logf("  seq %d session %d at %+v for %v flags a %#x b %#x: %.90s", r.Seq, r.Session, r.Start.Sub(from), r.Duration,
				flags[0][store.OutcomeSeq(r.Seq, 0)], flags[1][store.OutcomeSeq(r.Seq, 0)], r.SQL)
		}
	}
}

// pcapSysbenchSecs is how long the pcap test's sysbench runs: 4 s in
// make test, $TANDEM_PCAP_SECS (e.g. 20, as #28 asks) when set.
func pcapSysbenchSecs() string {
	if s := os.Getenv("TANDEM_PCAP_SECS"); s != "" {
		return s
	}
	return "4"
}

// pcapSysbenchRate is the transactions per second the pcap test's
// sysbench runs at: 200 in make test, $TANDEM_PCAP_RATE when set (0: as
// fast as the server goes). Unthrottled, sysbench took both cores from
// the tests running beside it, and tcpdump, left behind, lost packets.
func pcapSysbenchRate() string {
	if s := os.Getenv("TANDEM_PCAP_RATE"); s != "" {
		return "--rate=" + s
	}
	return "--rate=200"
}

// sysbench oltp_read_write, 8 threads, through tandem proxy --capture
// while tcpdump records the backend's port: the capture read from the
// packets holds, session by session (by connection id), the very records
// the proxy wrote — every statement, its parameters, affected rows, row
// counts and row checksums. It replays onto two identical copies with 0
// divergences. The same packets cut to begin 5 s into the run, and with
// 1 % of them dropped, decode with what they lack counted and labelled,
// and replay with nothing unlabelled.
func TestPcapCaptureHoldsWhatTheProxyRecorded(t *testing.T) {
	if testing.Short() {
		t.Skip("needs MariaDB servers, sysbench and tcpdump; skipped with -short")
	}
	t.Parallel()
	srv, _ := ownServer(t, "--plugin-load-add=server_audit.so")
	port := srv.Port
	// The copies replays run on live on another server: the captures hold
	// the test's SET GLOBALs that turn the logs on and off, which replay
	// runs as captured.
	copies, _ := ownServer(t)
	rootSQL(t, port, "CREATE DATABASE sb")
	loadSbtest(t, 2, 2000, fmt.Sprintf("root@tcp(127.0.0.1:%d)/sb", port))
	dir := t.TempDir()
	pcap := filepath.Join(dir, "traffic.pcap")
	logs := map[string]string{"general": filepath.Join(dir, "general.log"), "audit": filepath.Join(dir, "audit.log"), "slow": filepath.Join(dir, "slow.log")}
	// Each log on, the general and audit logs last: a log holds the
	// statements after the one that turned it on.
	rootSQL(t, port, fmt.Sprintf("SET GLOBAL slow_query_log_file='%s'; SET GLOBAL long_query_time=0; SET GLOBAL slow_query_log=1", logs["slow"]))
	rootSQL(t, port, fmt.Sprintf("SET GLOBAL general_log_file='%s'; SET GLOBAL general_log=1", logs["general"]))
	rootSQL(t, port, fmt.Sprintf("SET GLOBAL server_audit_file_path='%s'; SET GLOBAL server_audit_file_rotations=0; SET GLOBAL server_audit_events='CONNECT,QUERY'; SET GLOBAL server_audit_logging=ON", logs["audit"]))
	stopDump := tcpdump(t, port, pcap)
	r := startShadowProxy(t, fmt.Sprintf("127.0.0.1:%d", port), fmt.Sprintf("root@tcp(127.0.0.1:%d)/sb", port), "--capture-results", "checksum")
	trx := r.sysbench("--threads=8", "--time="+pcapSysbenchSecs(), pcapSysbenchRate(), "--tables=2", "--table-size=2000")
	r.stop()
	stopDump()
	rootSQL(t, port, "SET GLOBAL general_log=0; SET GLOBAL server_audit_logging=OFF; SET GLOBAL slow_query_log=0")

	fromPackets := filepath.Join(dir, "from-pcap")
	out := captureFrom(t, fromPackets, pcap, "--port", fmt.Sprint(port))
	if !strings.Contains(out, " 8 sessions") {
		t.Errorf("capture --from-pcap said:\n%s", out)
	}
	want, got := recordsBySession(t, r.capDir), recordsBySession(t, fromPackets)
	if len(want) != 8 || len(got) != 8 {
		t.Fatalf("sessions: proxy %d, pcap %d, want 8 each", len(want), len(got))
	}
	total := 0
	for id, w := range want {
		g := got[id]
		total += len(w)
		if len(g) != len(w) {
			t.Errorf("connection %d: %d records from the packets, %d from the proxy", id, len(g), len(w))
		}
		for i := range min(len(g), len(w)) {
			if g[i] != w[i] {
				t.Errorf("connection %d, record %d:\n  pcap  %s\n  proxy %s", id, i, g[i], w[i])
				break
			}
		}
	}
	// sysbench: 18 statements and BEGIN, COMMIT a transaction, each an
	// execute; per session a connect, 18+2 prepares and closes, a quit.
	if min := trx * 20; total < min {
		t.Errorf("%d records for %d transactions, want at least %d", total, trx, min)
	}
	t.Logf("pcap: %d records in 8 sessions, each equal to the proxy's (%d transactions)", total, trx)
	st := sourceStats(t, fromPackets)
	if st.Sessions != 8 || st.FoundOpen != 0 || st.Gaps != 0 || st.TLS != 0 || st.Undecoded != 0 || st.AnswersLost != 0 || st.UnknownStatements != 0 || st.StrayPackets != 0 {
		t.Errorf("source stats %+v, want 8 sessions and nothing else", st)
	}
	tg := replayOntoCopies(t, fromPackets, freshCopies(t, copies.Port), "1", false)
	if tg.VsCapture == nil || tg.VsCapture.Compared < int64(trx*18) {
		t.Errorf("pcap replay compared %+v with the capture, want every statement of %d transactions", tg.VsCapture, trx)
	} else {
		t.Logf("pcap replay: %d compared with the capture, %d counted apart, %d divergent", tg.VsCapture.Compared, tg.VsCapture.Ambiguous, tg.VsCapture.Total())
	}

	// The server's own logs of the same run: the same statements, session
	// by session (each log has up to three sessions more: the test's, that
	// turned the logs on and off; the slow log has no connects, so its
	// sessions are all found open). Replayed, they compare targets with
	// each other only.
	proxyStatements := statementsBySession(t, r.capDir)
	for _, f := range []string{"general", "audit", "slow"} {
		logCap := filepath.Join(dir, f)
		out, stderr, code := run(t, nil, "capture", "--from-log", logs[f], "--format", f, "--log-time-zone", "Local", logCap)
		if code != 0 {
			t.Fatalf("capture --from-log %s: %s%s", f, out, stderr)
		}
		logStatements := statementsBySession(t, logCap)
		sameStatements(t, f+" log", proxyStatements, logStatements, 3)
		n := 0
		for id := range proxyStatements {
			n += len(logStatements[id])
		}
		t.Logf("%s log: %d sessions, the proxy's %d hold %d statements in the proxy's order", f, len(logStatements), len(proxyStatements), n)
		if f == "slow" {
			continue
		}
		tg := replayOntoCopies(t, logCap, freshCopies(t, copies.Port), "1", true)
		if tg.VsCapture != nil && tg.VsCapture.Compared != 0 {
			t.Errorf("%s log: %d compared with the capture, which holds no answers", f, tg.VsCapture.Compared)
		}
	}

	// tcpdump started 5 s into a run of text statements: every session
	// was open, and joins at its first answer outside a transaction.
	//
	// tcpdump on a loaded loopback can drop packets, or miss them without
	// counting them as dropped (CI saw a pcap lacking 1 ms of both
	// directions of one session: 28 gaps); what was lost is then not what
	// this part tests, and its exact counts need a whole capture (the 1 %
	// dropped below is the part about losses). Such a capture is taken
	// again, up to three times, each attempt's losses logged.
	//
	// The copies and tcpdump must be done while sysbench still runs: on a
	// loaded machine they can take the 3 s left of its 8, and a run that
	// ends less than a second after them is taken again, twice as long.
	var lateCap string
	var lateCopies []string
	benchSecs := 8
	for attempt := 1; ; attempt++ {
		late := filepath.Join(dir, fmt.Sprintf("late%d.pcap", attempt))
		common := []string{"oltp_read_write", "--db-driver=mysql", "--mysql-host=127.0.0.1", fmt.Sprintf("--mysql-port=%d", port), "--mysql-user=root", "--mysql-db=sb",
			"--tables=2", "--table-size=2000", "--threads=8", fmt.Sprintf("--time=%d", benchSecs), pcapSysbenchRate(), "--db-ps-mode=disable", "--report-interval=0", "run"}
		bench := exec.Command("sysbench", common...)
		var benchOut strings.Builder
		bench.Stdout, bench.Stderr = &benchOut, &benchOut
		if err := bench.Start(); err != nil {
			t.Fatal(err)
		}
		var benchErr error
		var benchEnded time.Time
		benchDone := make(chan struct{})
		go func() { benchErr = bench.Wait(); benchEnded = time.Now(); close(benchDone) }()
		time.Sleep(5 * time.Second)
		var stopLate func() string
		lateCopies = snapshotCopies(t, port, "sb", func() { stopLate = tcpdumpDropping(t, port, late) })
		copied := time.Now()
		<-benchDone
		if benchErr != nil {
			t.Fatalf("sysbench: %v: %s", benchErr, benchOut.String())
		}
		dropped := stopLate()
		if left := benchEnded.Sub(copied); left < time.Second {
			if attempt == 3 {
				t.Fatalf("late pcap: sysbench ended %v after the copies and tcpdump were ready, 3 times (--time up to %d s): the machine is too loaded for this part", left.Round(time.Millisecond), benchSecs)
			}
			benchSecs *= 2
			t.Logf("late pcap, attempt %d: sysbench ended %v after the copies and tcpdump were ready; again with --time=%d", attempt, left.Round(time.Millisecond), benchSecs)
			continue
		}
		lateCap = filepath.Join(dir, fmt.Sprintf("late%d", attempt))
		out = captureFrom(t, lateCap, late, "--port", fmt.Sprint(port), "--schema", "sb")
		st = sourceStats(t, lateCap)
		if st.Gaps == 0 && dropped == "" {
			break
		}
		if attempt == 3 {
			t.Fatalf("late pcap: packets lost in each of 3 captures (tcpdump missed or dropped them), the last: %+v\n%s%s", st, dropped, out)
		}
		t.Logf("late pcap, attempt %d: %d gaps (%d bytes); tcpdump: %s; capturing again", attempt, st.Gaps, st.GapBytes, strings.TrimSpace(strings.ReplaceAll(dropped, "\n", ", ")))
	}
	// 9: sysbench's 8 and the one that held the tables while the copies
	// were taken (its UNLOCK TABLES is the first command seen of it).
	if st.Sessions != 9 || st.FoundOpen != 9 || st.Unjoined != 0 || st.CommandsBeforeJoin == 0 || st.Gaps != 0 || st.UnknownStatements != 0 || st.AnswersLost != 0 {
		t.Errorf("late pcap: %+v, want 9 sessions found open, each joined, no gap\n%s", st, out)
	}
	if lost := countFlag(t, lateCap, store.FlagLost); lost == 0 || lost > 9 {
		t.Errorf("late pcap: %d lost-commands records, want one per session that may have written before it joined (1-9)", lost)
	}
	tg = replayOntoCopies(t, lateCap, lateCopies, "0", false)
	t.Logf("late pcap: %d sessions found open, %d commands before they joined, %d lost-commands records; replay: %d compared with the capture, %d counted apart, %d divergent; %.1f s, %d released by --order-timeout",
		st.FoundOpen, st.CommandsBeforeJoin, countFlag(t, lateCap, store.FlagLost), tg.VsCapture.Compared, tg.VsCapture.Ambiguous, tg.VsCapture.Total(), tg.Elapsed, tg.OrderReleased)

	// 1 % of the packets dropped.
	lossy := filepath.Join(dir, "lossy.pcap")
	n := dropPackets(t, pcap, lossy, 100)
	lossyCap := filepath.Join(dir, "lossy")
	captureFrom(t, lossyCap, lossy, "--port", fmt.Sprint(port), "--schema", "sb")
	st = sourceStats(t, lossyCap)
	if n == 0 || st.Gaps == 0 || st.GapBytes == 0 {
		t.Errorf("lossy pcap (%d packets dropped): %+v, want gaps counted", n, st)
	}
	// Sessions that lost answers ran on in states the capture cannot
	// tell: replay stalls more behind their locks and runs transactions
	// again more often, and such a rerun can leave the copies apart (CI
	// saw sbtest1 differ once, explained: "replay rolled back a
	// transaction of session 5 … and ran it again"). Explained only.
	tg = replayOntoCopies(t, lossyCap, freshCopies(t, copies.Port), "0", true)
	t.Logf("1%% dropped: %d of the packets, %d gaps (%d bytes), %d answers lost, %d unknown statements; replay: %d compared with the capture, %d counted apart, %d divergent; %.1f s, %d released by --order-timeout",
		n, st.Gaps, st.GapBytes, st.AnswersLost, st.UnknownStatements, tg.VsCapture.Compared, tg.VsCapture.Ambiguous, tg.VsCapture.Total(), tg.Elapsed, tg.OrderReleased)
}

// tandem capture --interface reads a live interface (as root): mariadb
// CLI sessions' statements with their answers, the compressed protocol
// included, until --duration; a TLS session is counted and not read.
func TestCaptureFromALiveInterface(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a MariaDB server; skipped with -short")
	}
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("reading an interface needs CAP_NET_RAW (root)")
	}
	srv, _ := ownServer(t)
	// lo, and every interface: the same records, each packet read once
	// (a socket on every interface sees loopback's packets twice).
	for i, iface := range []string{"lo", "any"} {
		t.Run(iface, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "live")
			cmd := exec.Command(tandemBin, "capture", "--interface", iface, "--port", fmt.Sprint(srv.Port), "--duration", "4s", dir)
			var out strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Second) // the ring is open
			db := fmt.Sprintf("live%d", i)
			rootSQL(t, srv.Port, fmt.Sprintf("SELECT 41+1; CREATE DATABASE %[1]s; CREATE TABLE %[1]s.t (id INT PRIMARY KEY); INSERT INTO %[1]s.t VALUES (1),(2),(3)", db))
			// A session with the compressed protocol (read: its login was
			// seen), and one over TLS (counted, not read).
			for _, opt := range []string{"--compress", "--ssl"} {
				args := []string{"--protocol=tcp", "-h", "127.0.0.1", "-P", fmt.Sprint(srv.Port), "-u", "root", opt, "-e", "SELECT 'compressed or not', REPEAT('x', 5000)"}
				if opt == "--compress" {
					args = append(args, "--skip-ssl")
				}
				if b, err := exec.Command("mariadb", args...).CombinedOutput(); err != nil {
					t.Fatalf("mariadb %s: %v: %s", opt, err, b)
				}
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("capture --interface: %v\n%s", err, out.String())
			}
			st := sourceStatsOf(t, dir, store.OriginInterface)
			// A loaded machine can make loopback TCP send a segment
			// again (a tail-loss probe: CI saw one, in the TLS session).
			// Reading both copies of every loopback packet would count
			// each of the 30 segments with a payload twice instead.
			if st.Sessions != 2 || st.TLS != 1 || st.Gaps != 0 || st.FoundOpen != 0 || st.Undecoded != 0 || st.Retransmitted > 2 || st.PacketsSkipped != 0 {
				t.Errorf("stats %+v, want 2 sessions read, 1 TLS session, no packet skipped, at most 2 segments sent again\n%s", st, out.String())
			}
			var got []string
			eachRecord(t, dir, func(rec *store.Record) {
				if rec.Kind == store.KindQuery && !strings.Contains(rec.SQL, "@@") {
					got = append(got, fmt.Sprintf("%s -> %s rows=%d affected=%d", rec.SQL, rec.Resp.Kind, rec.Resp.Rows, rec.Resp.AffectedRows))
				}
			})
			want := []string{"SELECT 41+1 -> resultset rows=1 affected=0", "CREATE DATABASE " + db + " -> ok rows=0 affected=1",
				"CREATE TABLE " + db + ".t (id INT PRIMARY KEY) -> ok rows=0 affected=0", "INSERT INTO " + db + ".t VALUES (1),(2),(3) -> ok rows=0 affected=3",
				"SELECT 'compressed or not', REPEAT('x', 5000) -> resultset rows=1 affected=0"}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("queries:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

// A pcap whose third record is damaged (its length flipped): the command
// fails, naming the file and where, and the capture keeps what was read,
// its session ended there.
func TestCaptureFromADamagedPcap(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "damaged.pcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := pcapgo.NewWriter(f)
	if err := w.WriteFileHeader(65536, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	query := []byte("\x09\x00\x00\x00\x03SELECT 1")
	ok := []byte("\x07\x00\x00\x01\x00\x00\x00\x02\x00\x00\x00")
	for i, fr := range [][]byte{ethTCP(40000, 3306, 100, 500, query), ethTCP(3306, 40000, 500, 100+uint32(len(query)), ok), ethTCP(40000, 3306, 100+uint32(len(query)), 500+uint32(len(ok)), query)} {
		ci := gopacket.CaptureInfo{Timestamp: at.Add(time.Duration(i) * time.Millisecond), CaptureLength: len(fr), Length: len(fr)}
		if err := w.WritePacket(ci, fr); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	b, _ := os.ReadFile(path)
	third := 24 + 2*16 + len(ethTCP(0, 0, 0, 0, query)) + len(ethTCP(0, 0, 0, 0, ok))
	b[third+8] ^= 0xff // its captured length
	os.WriteFile(path, b, 0o644)

	capDir := filepath.Join(dir, "capture")
	out, stderr, code := run(t, nil, "capture", "--from-pcap", path, "--port", "3306", capDir)
	if code != 1 || !strings.Contains(stderr, "damaged.pcap: after 2 packets") || !strings.Contains(stderr, "holds the 2 records read before it") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	rep, err := report.Inspect(context.Background(), capDir, report.InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The session was found open: its synthetic connect, and its synthetic
	// end where the file could no longer be read.
	if rep.Records != 2 || rep.SessionsBy.OpenAtStart != 1 || rep.SessionsBy.OpenAtStop != 1 || !rep.Closed {
		t.Errorf("capture: %d records, sessions %+v, closed %v", rep.Records, rep.SessionsBy, rep.Closed)
	}
}

// ethTCP builds an Ethernet/IPv4/TCP frame from src to dst carrying
// payload (PSH, ACK).
func ethTCP(src, dst uint16, seq, ack uint32, payload []byte) []byte {
	b := make([]byte, 54, 54+len(payload))
	b[12], b[13] = 0x08, 0x00
	ip := b[14:]
	ip[0], ip[9] = 0x45, 6
	total := 40 + len(payload)
	ip[2], ip[3] = byte(total>>8), byte(total)
	copy(ip[12:], []byte{127, 0, 0, 1, 127, 0, 0, 1})
	tcp := ip[20:]
	binary.BigEndian.PutUint16(tcp[0:], src)
	binary.BigEndian.PutUint16(tcp[2:], dst)
	binary.BigEndian.PutUint32(tcp[4:], seq)
	binary.BigEndian.PutUint32(tcp[8:], ack)
	tcp[12], tcp[13] = 5<<4, 0x18
	return append(b, payload...)
}
