package proxy

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"database/sql"
	"encoding/pem"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	gomysql "github.com/go-sql-driver/mysql"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/tandemdb/tandem/capture"
	"github.com/tandemdb/tandem/sandbox/sandboxtest"
	"github.com/tandemdb/tandem/store"
	"github.com/tandemdb/tandem/wire"
)

func TestMain(m *testing.M) { os.Exit(sandboxtest.Main(m)) }

// ioEnv, when set, is the Config.IO every test's proxy uses.
const ioEnv = "TANDEM_PROXY_TEST_IO"

// testProxy is a proxy running in the test process.
type testProxy struct {
	*Proxy
	dir    string // capture directory, "" if not capturing
	cancel context.CancelFunc
	done   chan error
	reg    *prometheus.Registry
}

// startProxy starts a proxy in front of backend; capturing when capture is set.
func startProxy(t *testing.T, backend string, capturing bool, mod func(*Config)) *testProxy {
	t.Helper()
	tp := &testProxy{reg: prometheus.NewRegistry()}
	cfg := Config{Listen: "127.0.0.1:0", Backend: backend, Metrics: NewMetrics(tp.reg), DrainTimeout: 2 * time.Second, IO: os.Getenv(ioEnv),
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))}
	if capturing {
		tp.dir = filepath.Join(t.TempDir(), "capture")
		w, err := store.Create(tp.dir, store.WriterOptions{Source: "test", NoSync: true, Metrics: store.NewMetrics(tp.reg)})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Recorder = capture.NewRecorder(w, cfg.Logger)
	}
	if mod != nil {
		mod(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tp.Proxy = p
	ctx, cancel := context.WithCancel(context.Background())
	tp.cancel, tp.done = cancel, make(chan error, 1)
	go func() { tp.done <- p.Serve(ctx) }()
	t.Cleanup(func() { tp.stop(t) })
	return tp
}

// stop shuts the proxy down and closes its capture; it may be called twice.
func (tp *testProxy) stop(t *testing.T) {
	t.Helper()
	if tp.cancel == nil {
		return
	}
	tp.cancel()
	tp.cancel = nil
	if err := <-tp.done; err != nil {
		t.Errorf("Serve: %v", err)
	}
	if err := tp.cfg.Recorder.Close(); err != nil {
		t.Errorf("close capture: %v", err)
	}
}

// records stops the proxy and returns its capture.
func (tp *testProxy) records(t *testing.T) []store.Record {
	t.Helper()
	tp.stop(t)
	r, err := store.Open(tp.dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []store.Record
	for rec, err := range r.Records() {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, *rec.Clone())
	}
	return out
}

func countKinds(recs []store.Record) map[store.Kind]int {
	m := map[store.Kind]int{}
	for _, r := range recs {
		m[r.Kind]++
	}
	return m
}

// dsn points a go-sql-driver DSN at addr instead of the server.
func dsnVia(t *testing.T, dsn, addr string, mod func(*gomysql.Config)) string {
	t.Helper()
	c, err := gomysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	c.Addr = addr
	if mod != nil {
		mod(c)
	}
	return c.FormatDSN()
}

func openDB(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// selfSignedCert writes a certificate and key for 127.0.0.1 and returns their paths.
func selfSignedCert(t *testing.T) (string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "tandem-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	dir := t.TempDir()
	cert, keyf := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyf, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	return cert, keyf
}

// rawClient is a minimal client on our wire codec, for what no installed
// client sends: COM_CHANGE_USER, and deliberately broken packets.
type rawClient struct {
	*wire.Conn
	caps uint64
}

const rawCaps = uint64(mysql.CLIENT_PROTOCOL_41 | mysql.CLIENT_SECURE_CONNECTION | mysql.CLIENT_PLUGIN_AUTH |
	mysql.CLIENT_CONNECT_WITH_DB | mysql.CLIENT_TRANSACTIONS | mysql.CLIENT_DEPRECATE_EOF | mysql.CLIENT_LONG_PASSWORD)

// dialRaw connects and logs in as user (no password) to db.
func dialRaw(t *testing.T, addr, user, db string) *rawClient {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	caps := rawCaps
	if rawCapsOverride != 0 {
		caps = rawCapsOverride
	}
	c := &rawClient{Conn: wire.NewConn(nc), caps: caps}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, g, err := c.ReadPacket(); err != nil || g[0] != 10 {
		t.Fatalf("greeting: %x %v", g, err)
	}
	hr := &wire.HandshakeResponse{Caps: c.caps, MaxPacket: 1 << 24, Charset: 45, User: []byte(user),
		Database: []byte(db), HasDatabase: true, AuthPlugin: []byte("mysql_native_password"), HasPlugin: true}
	c.send(t, 1, hr.Append(nil))
	c.finishAuth(t, 2)
	return c
}

func (c *rawClient) send(t *testing.T, seq byte, p []byte) {
	t.Helper()
	if _, err := c.WritePacket(seq, p); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
}

// finishAuth answers auth switches with an empty password until OK.
func (c *rawClient) finishAuth(t *testing.T, seq byte) {
	t.Helper()
	for {
		s, p, err := c.ReadPacket()
		if err != nil {
			t.Fatalf("auth: %v", err)
		}
		switch p[0] {
		case wire.HeaderOK:
			return
		case wire.HeaderErr:
			e, _ := wire.ParseErr(p)
			t.Fatalf("auth refused: %+v", e)
		case wire.HeaderEOF: // auth switch: answer with an empty scramble
			c.send(t, s+1, nil)
		default:
			t.Fatalf("unexpected auth packet %x (seq %d, expected about %d)", p, s, seq)
		}
	}
}

// query sends COM_QUERY and returns the first column of each row as strings,
// or the server's error.
func (c *rawClient) query(t *testing.T, q string) ([]string, error) {
	t.Helper()
	c.send(t, 0, append([]byte{mysql.COM_QUERY}, q...))
	_, p, err := c.ReadPacket()
	if err != nil {
		t.Fatal(err)
	}
	switch p[0] {
	case wire.HeaderOK:
		return nil, nil
	case wire.HeaderErr:
		e, _ := wire.ParseErr(p)
		return nil, fmt.Errorf("%d: %s", e.Code, e.Message)
	}
	n, _, _ := wire.ParseColumnCount(p, c.caps&wire.MariaDBClientCacheMetadata != 0)
	for i := uint64(0); i < n; i++ {
		c.ReadPacket()
	}
	if c.caps&uint64(mysql.CLIENT_DEPRECATE_EOF) == 0 {
		c.ReadPacket() // the EOF after the columns
	}
	var rows []string
	for {
		_, p, err := c.ReadPacket()
		if err != nil {
			t.Fatal(err)
		}
		if wire.IsResultEnd(p, true) {
			return rows, nil
		}
		l := int(p[0])
		rows = append(rows, string(p[1:1+l]))
	}
}

var rawCapsOverride uint64
