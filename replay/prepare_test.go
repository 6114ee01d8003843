package replay

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/tandemdb/tandem/sandbox/sandboxtest"
	"github.com/tandemdb/tandem/store"
)

// An execute whose statement the target must prepare first (a regrouped
// connection's first use of the text; a session's after a reconnect) is
// timed from the execute, not from that prepare: the capture's execute had
// no prepare in its time. The target's prepares are made a second slower
// here by a relay; the old code counted that second as the execute's
// latency.
func TestExecuteLatencyLeavesOutThePrepareItNeeded(t *testing.T) {
	srv := sandboxtest.Server(t, "innodb")
	dba, dsn := srv.FreshDB(t)
	exec(t, dba, "CREATE TABLE t (id INT PRIMARY KEY)", "INSERT INTO t VALUES (1)")
	const delay = time.Second
	const text = "SELECT COUNT(*) FROM t"
	slow := regexp.MustCompile(`tcp\([^)]*\)`).ReplaceAllString(dsn, "tcp("+slowPrepares(t, srv.Addr(), text, delay)+")")
	at := msClock()
	capDir := writeRecords(t, []store.Record{
		{Session: 1, Start: at(0), Kind: store.KindConnect, User: "app"},
		{Session: 1, Start: at(1), Kind: store.KindPrepare, StmtID: 1, SQL: text},
		{Session: 1, Start: at(2), Kind: store.KindExecute, StmtID: 1},
		{Session: 1, Start: at(3), Kind: store.KindQuit},
	})
	runDir := t.TempDir() + "/run"
	r := replayRun(t, capDir, func(c *Config) { c.Concurrency, c.RunDir = 1, runDir }, tgt(t, "slow", slow, "")).Targets[0]
	if r.Reads != 1 || r.Errors != 0 {
		t.Fatalf("%d reads, %d errors; want the execute read", r.Reads, r.Errors)
	}
	rr, err := store.OpenRun(runDir)
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Close()
	var service []time.Duration
	for o, err := range rr.Outcomes(0, 0) {
		if err != nil {
			t.Fatal(err)
		}
		if seq, _ := store.SplitOutcomeSeq(o.Seq); seq == 3 { // the execute
			service = append(service, o.Service)
		}
	}
	if len(service) != 1 || service[0] >= delay {
		t.Errorf("the execute's latency %v; want one, under the %v its prepare took", service, delay)
	}
}

// slowPrepares relays connections to addr and holds each prepare of text
// (COM_STMT_PREPARE) for d before passing it on; it returns the address
// to connect to. Plain connections only.
func slowPrepares(t *testing.T, addr, text string, d time.Duration) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", addr)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, s)
			mu.Unlock()
			go io.Copy(c, s)
			go func() {
				defer s.Close()
				hdr := make([]byte, 4)
				for {
					if _, err := io.ReadFull(c, hdr); err != nil {
						return
					}
					p := make([]byte, int(binary.LittleEndian.Uint32(append(hdr[:3:3], 0))))
					if _, err := io.ReadFull(c, p); err != nil {
						return
					}
					if hdr[3] == 0 && len(p) > 0 && p[0] == 0x16 && string(p[1:]) == text { // COM_STMT_PREPARE
						time.Sleep(d)
					}
					if _, err := s.Write(append(hdr, p...)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return l.Addr().String()
}

// A client that turns multi-statement texts on for a while
// (COM_SET_OPTION: PHP's mysqli_multi_query does around each call) has
// them on, on the targets, for that while: its multi-statement query ran
// into 1064 there, in both replay modes, and what it wrote was lost.
func TestSetOptionTurnsMultiStatementsOnAndOff(t *testing.T) {
	_, tb, _, _ := twoInnoDB(t)
	at := msClock()
	option := func(ms int, opt byte) store.Record {
		return store.Record{Session: 1, Start: at(ms), Kind: store.KindOther, Command: mysql.COM_SET_OPTION, Data: []byte{opt, 0},
			Resp: store.Response{Kind: store.RespOK}}
	}
	rows := store.Response{Kind: store.RespResultSet, Columns: 1, Rows: 1}
	capDir := writeRecords(t, []store.Record{
		{Session: 1, Start: at(0), Kind: store.KindConnect, User: "app", ClientCaps: uint64(mysql.CLIENT_PROTOCOL_41 | mysql.CLIENT_MULTI_RESULTS),
			Resp: store.Response{Kind: store.RespOK}},
		option(1, 0), // on
		{Session: 1, Start: at(2), Kind: store.KindQuery, SQL: "SELECT 1; SELECT 2", Resp: store.Response{Kind: store.RespResultSet, Columns: 1, Rows: 1,
			More: []store.Response{rows}}},
		option(3, 1), // off
		{Session: 1, Start: at(4), Kind: store.KindQuery, SQL: "SELECT 3; SELECT 4", Resp: store.Response{Kind: store.RespError, ErrCode: 1064}},
		{Session: 1, Start: at(5), Kind: store.KindQuit},
	})
	for name, mod := range map[string]func(*Config){"sessions": nil, "--concurrency 1": func(c *Config) { c.Concurrency = 1 }} {
		r := replayRun(t, capDir, mod, tb).Targets[0]
		if fmt.Sprint(r.ErrorCodes) != "map[1064:1]" || r.Reads+r.Other != 2 || r.Skipped != 0 {
			t.Errorf("%s: errors %v, %d statements, %d skipped; want the second text's 1064 only (as captured), 2 statements, none skipped", name, r.ErrorCodes, r.Reads+r.Other, r.Skipped)
		}
	}
}
