package proxy

import (
	"time"

	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"github.com/go-mysql-org/go-mysql/mysql"
	gomysql "github.com/go-sql-driver/mysql"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/tandemdb/tandem/sandbox/sandboxtest"
	"github.com/tandemdb/tandem/store"
	"github.com/tandemdb/tandem/wire"
)

func sysbench(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("sysbench", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("sysbench %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestSysbenchThroughProxyIsCapturedExactly(t *testing.T) {
	srv := sandboxtest.Server(t, "innodb")
	_, dsn := srv.FreshDB(t)
	db := dsn[strings.LastIndex(dsn, "/")+1:]
	common := []string{"oltp_read_write", "--db-driver=mysql", "--mysql-host=127.0.0.1", "--mysql-user=root", "--mysql-db=" + db, "--tables=2", "--table-size=1000"}
	sysbench(t, append(common, fmt.Sprintf("--mysql-port=%d", srv.Port), "prepare")...)

	tp := startProxy(t, srv.Addr(), true, nil)
	_, port, _ := net.SplitHostPort(tp.Addr().String())
	out := sysbench(t, append(common, "--mysql-port="+port, "--threads=2", "--events=300", "--time=0", "run")...)
	m := regexp.MustCompile(`queries:\s+(\d+)`).FindStringSubmatch(out)
	e := regexp.MustCompile(`ignored errors:\s+(\d+)`).FindStringSubmatch(out)
	if m == nil || e == nil {
		t.Fatalf("sysbench output without counts:\n%s", out)
	}
	queries, _ := strconv.Atoi(m[1])
	// sysbench retries a transaction that hit a deadlock and reports it as
	// an ignored error: engine behaviour, which the capture must show too.
	ignored, _ := strconv.Atoi(e[1])
	recs := tp.records(t)
	k := countKinds(recs)
	// Prepared statements are on by default: every statement is an execute.
	// sysbench counts a statement that failed with an ignored error under
	// "ignored errors", not under "queries"; the proxy saw it all the same.
	if got := k[store.KindQuery] + k[store.KindExecute]; got != queries+ignored {
		t.Fatalf("capture has %d queries+executes, sysbench reports %d queries and %d ignored errors (kinds %v)", got, queries, ignored, k)
	}
	if k[store.KindConnect] != 2 || k[store.KindQuit] != 2 {
		t.Errorf("connects %d, quits %d; want 2 and 2 (one per thread)", k[store.KindConnect], k[store.KindQuit])
	}
	var errs int
	for _, r := range recs {
		if r.Resp.Kind == store.RespError {
			errs++
			if r.Resp.ErrCode != 1213 && r.Resp.ErrCode != 1205 {
				t.Errorf("captured error %d (%s); only deadlocks and lock waits are expected", r.Resp.ErrCode, r.Resp.Message)
			}
		}
	}
	if errs != ignored {
		t.Errorf("%d error responses captured, sysbench reports %d ignored errors", errs, ignored)
	}
	t.Logf("sysbench: %d queries; capture: %v", queries, k)
}

// mariadbCLI runs the mariadb client against addr.
func mariadbCLI(t *testing.T, addr, db string, stdin []byte, args ...string) (string, error) {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	base := []string{"-h" + host, "-P" + port, "-uroot", "--max-allowed-packet=256M"}
	if db != "" {
		base = append(base, "-D"+db)
	}
	cmd := exec.Command("mariadb", append(base, args...)...)
	cmd.Stdin = bytes.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestMariaDBCLIBatchesErrorsAndBigBlob(t *testing.T) {
	srv := sandboxtest.Server(t, "innodb")
	_, dsn := srv.FreshDB(t)
	db := dsn[strings.LastIndex(dsn, "/")+1:]
	tp := startProxy(t, srv.Addr(), true, nil)
	addr := tp.Addr().String()

	// Several statements in one COM_QUERY (DELIMITER makes the CLI send
	// them together), then an error in the middle of a batch with --force.
	script := "CREATE TABLE t (id INT PRIMARY KEY, b LONGBLOB);\n" +
		"DELIMITER //\nSELECT 1; SELECT 2; SELECT 3//\nDELIMITER ;\n" +
		"INSERT INTO t VALUES (1, 'x');\nINSERT INTO t VALUES (1, 'dup');\nSELECT COUNT(*) FROM t;\n" +
		"SELECT 'after the error';\n"
	out, err := mariadbCLI(t, addr, db, []byte(script), "--force", "-N")
	if err != nil || !strings.Contains(out, "ERROR 1062 (23000) at line 6") {
		t.Fatalf("want the duplicate key error reported, the batch going on; got %v:\n%s", err, out)
	}
	want := []string{"1", "2", "3", "1", "after the error"}
	// Keep result lines: drop errors and the statements the CLI echoes
	// between rules before an error.
	var got []string
	echo := false
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		switch {
		case strings.HasPrefix(l, "-----"):
			echo = !echo
		case echo, l == "", strings.HasPrefix(l, "ERROR"):
		default:
			got = append(got, strings.TrimSpace(l))
		}
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("CLI output lines %q, want %q\n%s", got, want, out)
	}

	// A 20 MiB blob goes in as a 40 MiB hex literal (a multi-packet
	// COM_QUERY) and comes back as a 40 MiB hex value (a multi-packet row).
	blob := make([]byte, 20<<20)
	rand.Read(blob)
	hexBlob := strings.ToUpper(hex.EncodeToString(blob))
	ins := []byte("INSERT INTO t VALUES (2, 0x" + hexBlob + ");\n")
	if out, err := mariadbCLI(t, addr, db, ins); err != nil {
		t.Fatalf("insert 20 MiB blob: %v\n%s", err, out[:min(len(out), 500)])
	}
	out, err = mariadbCLI(t, addr, db, nil, "-N", "-B", "-e", "SELECT HEX(b) FROM t WHERE id=2")
	if err != nil {
		t.Fatalf("select blob: %v", err)
	}
	if got := strings.TrimSpace(out); got != hexBlob {
		t.Fatalf("blob came back different: %d hex chars, want %d", len(got), len(hexBlob))
	}

	recs := tp.records(t)
	var multi, dupErr, truncatedInsert int
	for _, r := range recs {
		switch {
		case r.Kind == store.KindQuery && r.SQL == "SELECT 1; SELECT 2; SELECT 3":
			multi++
			if r.Resp.Kind != store.RespResultSet || len(r.Resp.More) != 2 || r.Resp.More[1].Rows != 1 {
				t.Errorf("multi-statement response = %+v, want 3 result sets", r.Resp)
			}
		case r.Kind == store.KindQuery && r.Resp.ErrCode == 1062:
			dupErr++
		case r.Kind == store.KindQuery && strings.HasPrefix(r.SQL, "INSERT INTO t VALUES (2, 0x"):
			truncatedInsert++
			// The 1 MiB bound covers the command payload, command byte included.
			if r.Flags&store.FlagTruncated == 0 || r.Flags&store.FlagNotReplayable == 0 || len(r.SQL) != 1<<20-1 || r.Resp.AffectedRows != 1 {
				t.Errorf("big insert recorded with flags %b, %d SQL bytes, response %+v", r.Flags, len(r.SQL), r.Resp)
			}
		}
	}
	if multi != 1 || dupErr != 1 || truncatedInsert != 1 {
		t.Fatalf("found multi=%d dupErr=%d bigInsert=%d, want 1 each", multi, dupErr, truncatedInsert)
	}
}

func TestLoadDataLocalIsRelayedAndMarked(t *testing.T) {
	srv := sandboxtest.Server(t, "innodb")
	sqlDB, dsn := srv.FreshDB(t)
	db := dsn[strings.LastIndex(dsn, "/")+1:]
	if _, err := sqlDB.Exec("CREATE TABLE l (id INT PRIMARY KEY, v VARCHAR(10))"); err != nil {
		t.Fatal(err)
	}
	if _, err := sqlDB.Exec("SET GLOBAL local_infile = 1"); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "rows.tsv")
	os.WriteFile(f, []byte("1\ta\n2\tb\n3\tc\n"), 0o644)
	tp := startProxy(t, srv.Addr(), true, nil)
	out, err := mariadbCLI(t, tp.Addr().String(), db, nil, "--local-infile=1", "-N", "-e",
		fmt.Sprintf("LOAD DATA LOCAL INFILE '%s' INTO TABLE l; SELECT COUNT(*) FROM l", f))
	if err != nil || strings.TrimSpace(out) != "3" {
		t.Fatalf("LOAD DATA LOCAL through the proxy: %v\n%s", err, out)
	}
	for _, r := range tp.records(t) {
		if strings.HasPrefix(r.SQL, "LOAD DATA LOCAL") {
			if r.Flags&store.FlagNotReplayable == 0 || r.Resp.AffectedRows != 3 {
				t.Fatalf("LOAD DATA LOCAL recorded as %+v", r)
			}
			return
		}
	}
	t.Fatal("LOAD DATA LOCAL not recorded")
}

func TestTLSFromClientWithMariaDBCLI(t *testing.T) {
	srv := sandboxtest.Server(t, "innodb")
	cert, key := selfSignedCert(t)
	tp := startProxy(t, srv.Addr(), true, func(c *Config) { c.TLSCert, c.TLSKey = cert, key })
	out, err := mariadbCLI(t, tp.Addr().String(), "", nil, "--ssl", "-e", "status; SELECT 40+2 AS answer;")
	if err != nil {
		t.Fatalf("mariadb --ssl through the proxy: %v\n%s", err, out)
	}
	if !regexp.MustCompile(`SSL:\s+Cipher in use is \S+`).MatchString(out) || !strings.Contains(out, "42") {
		t.Fatalf("no TLS cipher or no answer in:\n%s", out)
	}
	k := countKinds(tp.records(t))
	if k[store.KindConnect] != 1 || k[store.KindQuery] < 2 || k[store.KindQuit] != 1 {
		t.Fatalf("capture over TLS: %v", k)
	}
}

// go-sql-driver sends its SSLRequest and its TLS ClientHello back to back;
// the proxy read the hello into its buffer and then waited for it on the
// socket (every connection hung 30 s). Five connections in a row now get
// TLS at once.
func TestTLSFromGoDriverHelloBehindSSLRequest(t *testing.T) {
	srv := sandboxtest.Server(t, "innodb")
	_, dsn := srv.FreshDB(t)
	cert, key := selfSignedCert(t)
	tp := startProxy(t, srv.Addr(), false, func(c *Config) { c.TLSCert, c.TLSKey, c.HandshakeTimeout = cert, key, 5*time.Second })
	db := openDB(t, dsnVia(t, dsn, tp.Addr().String(), func(c *gomysql.Config) { c.TLSConfig = "skip-verify" }))
	db.SetMaxIdleConns(0) // a new connection, and handshake, each time
	for i := range 5 {
		var cipher, v string
		if err := db.QueryRow("SHOW SESSION STATUS LIKE 'Ssl_cipher'").Scan(&v, &cipher); err != nil {
			t.Fatalf("connection %d over TLS: %v", i, err)
		}
		// (the status is the backend's: the proxy's backend link is plain)
		var n int
		if err := db.QueryRow("SELECT 6*7").Scan(&n); err != nil || n != 42 {
			t.Fatalf("connection %d: %d %v", i, n, err)
		}
	}
}

// LOAD DATA LOCAL run as a prepared statement (Perl DBD::MariaDB with
// server-side prepare does): MariaDB asks for the file in answer to the
// execute; the proxy relays it as for a query instead of closing the
// connection, and marks the execute not replayable.
func TestLoadDataLocalPrepared(t *testing.T) {
	srv := sandboxtest.Server(t, "innodb")
	sqlDB, dsn := srv.FreshDB(t)
	if _, err := sqlDB.Exec("SET GLOBAL local_infile = 1"); err != nil {
		t.Fatal(err)
	}
	if _, err := sqlDB.Exec("CREATE TABLE t (a INT, b VARCHAR(10))"); err != nil {
		t.Fatal(err)
	}
	cfg, _ := gomysql.ParseDSN(dsn)
	tp := startProxy(t, srv.Addr(), true, nil)
	rawCapsOverride = rawCaps | uint64(mysql.CLIENT_LOCAL_FILES)
	c := dialRaw(t, tp.Addr().String(), "root", cfg.DBName)
	rawCapsOverride = 0
	c.send(t, 0, append([]byte{mysql.COM_STMT_PREPARE}, "LOAD DATA LOCAL INFILE 'rows.tsv' INTO TABLE t"...))
	_, p, err := c.ReadPacket()
	if err != nil || p[0] != wire.HeaderOK {
		t.Fatalf("prepare: %x %v", p, err)
	}
	id := p[1:5]
	c.send(t, 0, append(append([]byte{mysql.COM_STMT_EXECUTE}, id...), 0, 1, 0, 0, 0))
	seq, p, err := c.ReadPacket()
	if err != nil || p[0] != wire.HeaderLocalInfile || string(p[1:]) != "rows.tsv" {
		t.Fatalf("execute: want the server's request for rows.tsv, got %q %v", p, err)
	}
	c.send(t, seq+1, []byte("1\tx\n2\ty\n3\tz\n"))
	c.send(t, seq+2, nil)
	_, p, err = c.ReadPacket()
	if err != nil || p[0] != wire.HeaderOK {
		t.Fatalf("after the file: %x %v", p, err)
	}
	if rows, err := c.query(t, "SELECT COUNT(*) FROM t"); err != nil || len(rows) != 1 || rows[0] != "3" {
		t.Fatalf("rows loaded: %v %v", rows, err)
	}
	for _, r := range tp.records(t) {
		if r.Kind == store.KindExecute {
			if r.Flags&store.FlagNotReplayable == 0 || r.Resp.AffectedRows != 3 {
				t.Fatalf("the execute recorded as %+v", r)
			}
			return
		}
	}
	t.Fatal("the execute was not recorded")
}
