package proxy

import (
	"encoding/binary"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/tandemdb/tandem/capture"
	"github.com/tandemdb/tandem/gtid"
	"github.com/tandemdb/tandem/store"
	"github.com/tandemdb/tandem/wire"
)

// The proxy's own logic that needs no server: these run under -short.

// okPacket is an OK packet (protocol 4.1) with affected rows and status.
func okPacket(affected byte, status uint16) []byte {
	p := []byte{0x00, affected, 0}
	p = binary.LittleEndian.AppendUint16(p, status)
	return binary.LittleEndian.AppendUint16(p, 0)
}

// gtidSession is a session whose recorder writes a capture in a temporary
// directory and notes commits (Config.Commits), with no sockets: the
// relay loop is not involved, only the GTID bookkeeping it calls.
func gtidSession(t *testing.T) (*session, *capture.Recorder) {
	t.Helper()
	w, err := store.Create(filepath.Join(t.TempDir(), "cap"), store.WriterOptions{Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	rec := capture.NewRecorder(w, nil)
	t.Cleanup(func() { rec.Close() })
	p := &Proxy{log: slog.New(slog.DiscardHandler)}
	caps := uint64(mysql.CLIENT_PROTOCOL_41 | mysql.CLIENT_TRANSACTIONS)
	s := &session{p: p, id: 1, caps: caps, joined: &liveCapture{rec: rec}}
	s.cs = capture.NewSession(1, capture.State{Caps: caps}, capture.Options{Commits: true}, rec)
	return s, rec
}

// command feeds the session one text query and its OK answer and ends it,
// as the relay loop does, then notes a commit if it ended one.
func command(t *testing.T, s *session, sql string, ok []byte) {
	t.Helper()
	if step := s.cs.Command(append([]byte{mysql.COM_QUERY}, sql...), false, time.Now()); step != capture.Read {
		t.Fatalf("%s: command step %v", sql, step)
	}
	if step := s.cs.Server(ok); step != capture.Done {
		t.Fatalf("%s: answer step %v", sql, step)
	}
	s.cs.End(time.Now())
	s.noteCommit()
}

// Which client commands the GTID question may go ahead of, once a commit
// is waiting for it: never one that reads the diagnostics, has no answer,
// continues another, or is too big to hold in one packet.
func TestGTIDQuestionGoesAheadOf(t *testing.T) {
	s, _ := gtidSession(t)
	q := func(sql string) []byte { return append([]byte{mysql.COM_QUERY}, sql...) }
	cases := []struct {
		name string
		p    []byte
		want bool
	}{
		{"a SELECT", q("SELECT 1"), true},
		{"ROW_COUNT()", q("SELECT ROW_COUNT()"), false},
		{"SHOW WARNINGS", q("show warnings"), false},
		{"FOUND_ROWS()", q("SELECT found_rows()"), false},
		{"an UPDATE", q("UPDATE t SET v = 1"), true},
		{"a prepare", append([]byte{mysql.COM_STMT_PREPARE}, "SELECT ?"...), true},
		{"a prepare that reads diagnostics", append([]byte{mysql.COM_STMT_PREPARE}, "SELECT @@warning_count"...), false},
		{"an execute of an unknown statement", []byte{mysql.COM_STMT_EXECUTE, 9, 0, 0, 0, 0, 1, 0, 0, 0}, false},
		{"a ping", []byte{mysql.COM_PING}, true},
		{"a quit", []byte{mysql.COM_QUIT}, true},
		{"init db", append([]byte{mysql.COM_INIT_DB}, "db"...), true},
		{"reset connection", []byte{mysql.COM_RESET_CONNECTION}, true},
		{"a close (no answer)", []byte{mysql.COM_STMT_CLOSE, 1, 0, 0, 0}, false},
		{"long data (no answer)", []byte{mysql.COM_STMT_SEND_LONG_DATA, 1, 0, 0, 0, 0, 0}, false},
		{"a cursor's fetch", []byte{mysql.COM_STMT_FETCH, 1, 0, 0, 0, 10, 0, 0, 0}, false},
		{"a query of 16 MiB", q(strings.Repeat("x", wire.MaxPayload)), false},
	}
	for _, c := range cases {
		if got := s.askBefore(c.p); got {
			t.Errorf("%s: asked with no commit waiting", c.name)
		}
	}
	command(t, s, "INSERT INTO t VALUES (1)", okPacket(1, mysql.SERVER_STATUS_AUTOCOMMIT))
	if !s.ask.ok {
		t.Fatal("an autocommit INSERT that wrote a row left no question to ask")
	}
	for _, c := range cases {
		if got := s.askBefore(c.p); got != c.want {
			t.Errorf("%s: ask before it %v, want %v", c.name, got, c.want)
		}
	}
}

// Each written transaction is either given its GTID or counted unasked,
// never both and never neither.
func TestGTIDBookkeeping(t *testing.T) {
	s, rec := gtidSession(t)
	// A read and an open transaction's write leave nothing to ask.
	command(t, s, "SELECT 1", okPacket(0, mysql.SERVER_STATUS_AUTOCOMMIT))
	command(t, s, "BEGIN", okPacket(0, mysql.SERVER_STATUS_IN_TRANS))
	command(t, s, "UPDATE t SET v = 2", okPacket(1, mysql.SERVER_STATUS_IN_TRANS))
	if s.ask.ok || s.unasked() != 0 {
		t.Fatalf("before COMMIT: ask %v, unasked %d", s.ask.ok, s.unasked())
	}
	command(t, s, "COMMIT", okPacket(0, mysql.SERVER_STATUS_AUTOCOMMIT))
	if !s.ask.ok || s.unasked() != 1 {
		t.Fatalf("after COMMIT: ask %v, unasked %d; want one question waiting", s.ask.ok, s.unasked())
	}
	commitSeq := s.ask.Seq
	if err := s.learnGTID("0-1-5", nil); err != nil {
		t.Fatal(err)
	}
	if pts := rec.CommitPoints(); len(pts) != 1 || pts["0-1-5"].Seq != commitSeq || commitSeq == 0 {
		t.Errorf("commit points %v, want 0-1-5 at the COMMIT's record %d", pts, commitSeq)
	}
	if s.unasked() != 0 {
		t.Errorf("unasked %d after the answer", s.unasked())
	}
	// The same GTID again: nothing was logged (a false alarm), not a commit.
	command(t, s, "INSERT INTO t VALUES (2)", okPacket(1, mysql.SERVER_STATUS_AUTOCOMMIT))
	if err := s.learnGTID("0-1-5", nil); err != nil || len(rec.CommitPoints()) != 1 {
		t.Errorf("a repeated GTID: %v, %d points", err, len(rec.CommitPoints()))
	}
	// Two commits before the question could go: the first is lost.
	command(t, s, "INSERT INTO t VALUES (3)", okPacket(1, mysql.SERVER_STATUS_AUTOCOMMIT))
	command(t, s, "INSERT INTO t VALUES (4)", okPacket(1, mysql.SERVER_STATUS_AUTOCOMMIT))
	if s.unasked() != 2 {
		t.Errorf("two commits, none asked: unasked %d, want 2 (one lost, one waiting)", s.unasked())
	}
	// The backend refuses the question: that commit and every later one
	// are counted, and nothing is asked again.
	if err := s.learnGTID("", &gtidQueryError{msg: "1064 no such variable"}); err != nil {
		t.Fatal(err)
	}
	command(t, s, "INSERT INTO t VALUES (5)", okPacket(1, mysql.SERVER_STATUS_AUTOCOMMIT))
	command(t, s, "INSERT INTO t VALUES (6)", okPacket(1, mysql.SERVER_STATUS_AUTOCOMMIT))
	if s.askBefore([]byte{mysql.COM_PING}) || s.unasked() != 4 {
		t.Errorf("after a refusal: ask %v, unasked %d; want never asked, 4 unasked", s.askBefore([]byte{mysql.COM_PING}), s.unasked())
	}
	if len(rec.CommitPoints()) != 1 {
		t.Errorf("%d commit points, want 1", len(rec.CommitPoints()))
	}
}

// A zero Config gets the documented defaults; a wrong one a message that
// says what to give.
func TestConfigDefaults(t *testing.T) {
	c := Config{Backend: "127.0.0.1:3306"}
	if err := c.defaults(); err != nil {
		t.Fatal(err)
	}
	if c.CaptureResults != ResultsSummary || c.IO != IOPoller || c.MaxConnections != 1000 || c.MaxRecordBytes != 1<<20 ||
		c.DialTimeout != 5*time.Second || c.MaxHandshakes != 64 || c.HandshakeTimeout != 5*time.Second || c.DrainTimeout != 5*time.Second ||
		c.Logger == nil || c.Metrics == nil {
		t.Errorf("defaults %+v", c)
	}
	for _, bad := range []struct {
		c    Config
		want string
	}{
		{Config{}, "proxy: no backend; give --backend HOST:PORT"},
		{Config{Backend: "db"}, `proxy: backend "db" is not HOST:PORT`},
		{Config{Backend: "db:"}, `proxy: backend "db:" is not HOST:PORT`},
		{Config{Backend: "db:1", CaptureResults: "rows"}, `proxy: --capture-results "rows": want summary or checksum`},
		{Config{Backend: "db:1", TLSCert: "c.pem"}, "proxy: --tls-cert and --tls-key go together"},
		{Config{Backend: "db:1", IO: "epoll"}, `proxy: --io "epoll": want poller or blocking`},
	} {
		if err := bad.c.defaults(); err == nil || err.Error() != bad.want {
			t.Errorf("%+v: %v, want %q", bad.c, err, bad.want)
		}
	}
}

// A transaction that bypassed the proxy goes where the server committed
// it among the captured commits: from the latest start of a COMMIT (or
// end of an autocommit write) before it in GTID order, never after a
// captured write that followed it on the server. The regression: T1's
// COMMIT answer ended after W's, W committed after B on the server; B was
// placed at T1's answer end, after W, and replay applied W's row before
// B's (a table ended with production's row count, another checksum).
func TestBypassedSlots(t *testing.T) {
	ms := func(n int) time.Time { return time.Unix(1000, 0).Add(time.Duration(n) * time.Millisecond) }
	points := map[string]capture.CommitPoint{
		"0-1-10": {Seq: 40, From: ms(100), End: ms(130)}, // T1: BEGIN … COMMIT, its COMMIT from 100 to 130
		"0-1-12": {Seq: 38, From: ms(120), End: ms(120)}, // W: an autocommit write answered at 120
		"0-1-14": {Seq: 0, From: ms(150), End: ms(150)},  // its record dropped: nothing to follow
		"0-1-16": {Seq: 50, From: ms(140), End: ms(145)},
		"1-2-3":  {Seq: 45, From: ms(200), End: ms(210)}, // another domain
	}
	s := newBypassedSlots(points, ms(0), ms(1000))
	g := func(v string) gtid.GTID {
		id, err := gtid.ParseGTID(v)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	for _, c := range []struct {
		gtid   string
		after  uint64
		lo, hi time.Time
	}{
		{"0-1-5", 0, ms(0), ms(120)},     // before every captured commit
		{"0-1-11", 40, ms(100), ms(120)}, // B: from T1's COMMIT start, before W's end (was lo 130, after W)
		{"0-1-13", 38, ms(120), ms(145)}, // after W: W's end is later than T1's COMMIT start
		{"0-1-15", 38, ms(120), ms(145)}, // the dropped commit changes nothing
		{"0-1-17", 50, ms(140), ms(1000)},
		{"1-2-1", 0, ms(0), ms(210)},
		{"1-2-4", 45, ms(200), ms(1000)},
		{"3-1-1", 0, ms(0), ms(1000)}, // a domain with no captured commit
	} {
		after, lo, hi := s.slot(g(c.gtid))
		if after != c.after || !lo.Equal(c.lo) || !hi.Equal(c.hi) {
			t.Errorf("%s: after %d, from %v to %v; want after %d, from %v to %v", c.gtid, after, lo.Sub(ms(0)), hi.Sub(ms(0)), c.after, c.lo.Sub(ms(0)), c.hi.Sub(ms(0)))
		}
	}
}
