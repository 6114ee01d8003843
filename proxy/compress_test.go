package proxy

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	stdlog "log"
	"os"
	"strings"
	"sync"
	"testing"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/tandemdb/tandem/sandbox/sandboxtest"
	"github.com/tandemdb/tandem/store"
)

// A client that asks for compression gets it through the proxy as
// directly: the mariadb CLI's --compress sees the same answers, both legs
// are compressed (the server's Compression status and the CLI's own
// status say so), and the capture holds what an uncompressed session's
// would.
func TestCompressedProtocolWithMariaDBCLI(t *testing.T) {
	srv := sandboxtest.Server(t, "innodb")
	_, dsn := srv.FreshDB(t)
	db := dsn[strings.LastIndex(dsn, "/")+1:]
	tp := startProxy(t, srv.Addr(), true, nil)

	script := "CREATE TABLE t (id INT PRIMARY KEY, b LONGBLOB);\n" +
		"DELIMITER //\nSELECT 1; SELECT 2; SELECT 3//\nDELIMITER ;\n" +
		"INSERT INTO t VALUES (1, REPEAT('x', 100000));\nINSERT INTO t VALUES (1, 'dup');\nSELECT COUNT(*), LENGTH(b) FROM t;\n" +
		"SHOW SESSION STATUS LIKE 'Compression';\nstatus\n"
	through, err := mariadbCLI(t, tp.Addr().String(), db, []byte(script), "--compress", "--force", "-N")
	if err != nil {
		t.Fatalf("through the proxy: %v\n%s", err, through)
	}
	for _, want := range []string{"Compression\tON", "ERROR 1062 (23000) at line 6", "1\t100000"} {
		if !strings.Contains(through, want) {
			t.Errorf("through the proxy, the CLI's output lacks %q:\n%s", want, through)
		}
	}
	if !strings.Contains(through, "Protocol:\t\tCompressed") {
		t.Errorf("the CLI's status does not say its connection is compressed:\n%s", through)
	}

	// A 20 MiB blob: a command and a row larger than one compressed
	// packet (16 MiB before compression), random so that it does not
	// shrink.
	blob := make([]byte, 20<<20)
	rand.Read(blob)
	hexBlob := strings.ToUpper(hex.EncodeToString(blob))
	if out, err := mariadbCLI(t, tp.Addr().String(), db, []byte("INSERT INTO t VALUES (2, 0x"+hexBlob+");\n"), "--compress"); err != nil {
		t.Fatalf("insert 20 MiB blob: %v\n%s", err, out[:min(len(out), 500)])
	}
	out, err := mariadbCLI(t, tp.Addr().String(), db, nil, "--compress", "-N", "-B", "-e", "SELECT HEX(b) FROM t WHERE id=2")
	if err != nil {
		t.Fatalf("select blob: %v", err)
	}
	if got := strings.TrimSpace(out); got != hexBlob {
		t.Fatalf("the blob came back different: %d hex chars, want %d", len(got), len(hexBlob))
	}

	recs := tp.records(t)
	var multi, dup, counts, status int
	for _, r := range recs {
		switch {
		case r.Kind == store.KindQuery && r.SQL == "SELECT 1; SELECT 2; SELECT 3":
			multi++
			if r.Resp.Kind != store.RespResultSet || len(r.Resp.More) != 2 {
				t.Errorf("multi-statement response = %+v, want 3 result sets", r.Resp)
			}
		case r.Kind == store.KindQuery && r.Resp.ErrCode == 1062:
			dup++
		case r.Kind == store.KindQuery && r.SQL == "SELECT COUNT(*), LENGTH(b) FROM t":
			counts++
			if r.Resp.Rows != 1 {
				t.Errorf("SELECT COUNT(*) recorded %d rows, want 1", r.Resp.Rows)
			}
		case r.Kind == store.KindQuery && strings.HasPrefix(r.SQL, "SHOW SESSION STATUS"):
			status++
		}
	}
	if multi != 1 || dup != 1 || counts != 1 || status != 1 {
		t.Fatalf("capture of the compressed session: multi=%d dup=%d count=%d status=%d, want 1 each", multi, dup, counts, status)
	}
}

// go-sql-driver's compress=true through the proxy: text and prepared
// statements, a 20 MiB value both ways, and the capture records each
// statement with its response as for an uncompressed client.
func TestCompressedProtocolWithGoDriver(t *testing.T) {
	srv := sandboxtest.Server(t, "innodb")
	_, dsn := srv.FreshDB(t)
	tp := startProxy(t, srv.Addr(), true, nil)
	// The driver warns of packets out of sequence, which a server that
	// numbers its answers from the compressed packets it read never sends.
	var warned strings.Builder
	gomysql.SetLogger(stdlog.New(&lockedWriter{w: &warned}, "", 0))
	t.Cleanup(func() {
		gomysql.SetLogger(gomysql.Logger(stdlog.New(os.Stderr, "[mysql] ", stdlog.Ldate|stdlog.Ltime|stdlog.Lshortfile)))
	})
	db := openDB(t, dsnVia(t, dsn, tp.Addr().String(), func(c *gomysql.Config) {
		c.Apply(gomysql.EnableCompression(true))
		c.InterpolateParams = false
		c.MaxAllowedPacket = 64 << 20
	}))
	db.SetMaxOpenConns(1)
	mustExec := func(q string, args ...any) sql.Result {
		t.Helper()
		res, err := db.Exec(q, args...)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return res
	}
	mustExec("CREATE TABLE c (id INT PRIMARY KEY, v LONGBLOB)")
	for i := range 50 {
		mustExec("INSERT INTO c VALUES (?, ?)", i, strings.Repeat(fmt.Sprint(i), 200))
	}
	big := make([]byte, 20<<20)
	rand.Read(big)
	mustExec("INSERT INTO c VALUES (?, ?)", 1000, big)
	var got []byte
	if err := db.QueryRow("SELECT v FROM c WHERE id = ?", 1000).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if string(got) != string(big) {
		t.Fatalf("the 20 MiB value came back different (%d bytes)", len(got))
	}
	var n, sum int
	if err := db.QueryRow("SELECT COUNT(*), SUM(LENGTH(v)) FROM c WHERE id < 1000").Scan(&n, &sum); err != nil {
		t.Fatal(err)
	}
	if n != 50 || sum != 50*200+40*200 { // ids 10..49 have two digits
		t.Fatalf("count %d, total length %d; want 50 and %d", n, sum, 50*200+40*200)
	}
	var name, value string
	if err := db.QueryRow("SHOW SESSION STATUS LIKE 'Compression'").Scan(&name, &value); err != nil || value != "ON" {
		t.Fatalf("the backend leg: Compression %q (%v), want ON", value, err)
	}
	db.Close()

	recs := tp.records(t)
	var inserts, long, selects int
	for _, r := range recs {
		if r.Kind != store.KindExecute {
			continue
		}
		switch {
		case r.Resp.Kind == store.RespOK && r.Resp.AffectedRows == 1 && len(r.Params) == 2:
			inserts++
		case r.Resp.Kind == store.RespOK && r.Resp.AffectedRows == 1 && r.Flags&store.FlagTruncated != 0:
			long++ // past --max-record-bytes: kept as far as it goes, not replayable
		case r.Resp.Kind == store.RespResultSet && r.Resp.Rows == 1:
			selects++
		}
	}
	if inserts != 50 || long != 1 || selects != 1 {
		t.Fatalf("capture of the compressed session: %d inserts, %d long ones and %d one-row selects as executes, want 50, 1 and 1 (kinds %v)", inserts, long, selects, countKinds(recs))
	}
	if warned.Len() > 0 {
		t.Fatalf("the driver warned (packets numbered unlike a server's):\n%s", warned.String())
	}
}

type lockedWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Under compression the proxy's own question for a transaction's GTID
// goes in compressed packets of its own, and the client's command after
// it: every written transaction's GTID is captured, and the client reads
// only its own answers.
func TestCompressedSessionGTIDsAreAsked(t *testing.T) {
	srv := sandboxtest.Server(t, "primary")
	_, dsn := srv.FreshDB(t)
	tp := startProxy(t, srv.Addr(), true, func(c *Config) { c.Commits = true })
	db := openDB(t, dsnVia(t, dsn, tp.Addr().String(), func(c *gomysql.Config) { c.Apply(gomysql.EnableCompression(true)) }))
	db.SetMaxOpenConns(1)
	for _, q := range []string{"CREATE TABLE g (id INT PRIMARY KEY)", "INSERT INTO g VALUES (1)", "INSERT INTO g VALUES (2)",
		"BEGIN", "INSERT INTO g VALUES (3)", "UPDATE g SET id = 4 WHERE id = 3", "COMMIT"} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM g").Scan(&n); err != nil || n != 3 {
		t.Fatalf("COUNT(*) = %d (%v), want 3", n, err)
	}
	db.Close()
	tp.records(t)
	r, err := store.Open(tp.dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	g, err := r.GTIDs()
	if err != nil {
		t.Fatal(err)
	}
	if len(g) != 4 { // the CREATE, two inserts, the transaction
		t.Fatalf("%d GTIDs captured, want 4: %v", len(g), g)
	}
}
