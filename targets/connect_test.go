package targets

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// One parse of the DSN feeds replay's connections what go-sql-driver gets:
// TLS as asked, session variables, credentials.
func TestConnCarriesTheDSNsTLSAndVariables(t *testing.T) {
	for _, c := range []struct {
		spec     string
		mode     string
		fallback bool
	}{
		{"a=u:pw@tcp(127.0.0.1:3306)/db", "", false},
		{"a=u:pw@tcp(127.0.0.1:3306)/db?tls=false", "", false},
		{"a=u:pw@tcp(127.0.0.1:3306)/db?tls=true", "verified", false},
		{"a=u:pw@tcp(127.0.0.1:3306)/db?tls=skip-verify", "skip-verify", false},
		{"a=u:pw@tcp(127.0.0.1:3306)/db?tls=preferred", "preferred", true},
	} {
		tg, err := Parse(c.spec)
		if err != nil {
			t.Fatal(err)
		}
		cc, err := tg.Conn()
		if err != nil {
			t.Fatal(err)
		}
		if tg.TLSMode() != c.mode || (cc.TLS != nil) != (c.mode != "") || cc.TLSFallback != c.fallback ||
			cc.Addr != "127.0.0.1:3306" || cc.User != "u" || cc.Password != "pw" {
			t.Errorf("%s: mode %q, TLS %v, fallback %v, %s %s", c.spec, tg.TLSMode(), cc.TLS != nil, cc.TLSFallback, cc.Addr, cc.User)
		}
		if c.mode == "verified" && (cc.TLS.InsecureSkipVerify || cc.TLS.ServerName != "127.0.0.1") {
			t.Errorf("%s: verified TLS skips verification or names %q", c.spec, cc.TLS.ServerName)
		}
	}
	tg, _ := Parse("a=u@tcp(127.0.0.1:3306)/db?innodb_lock_wait_timeout=1&sql_mode=%27ANSI%27")
	cc, _ := tg.Conn()
	if want := [][2]string{{"innodb_lock_wait_timeout", "1"}, {"sql_mode", "'ANSI'"}}; !slices.Equal(cc.Vars, want) {
		t.Errorf("vars %q, want %q", cc.Vars, want)
	}
}

// ca=FILE verifies the server against that CA, on every client stack; a
// CA that does not load is a clear error at parse time.
func TestCAOption(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.pem")
	os.WriteFile(bad, []byte("not a certificate"), 0o600)
	if _, err := Parse("a=u@tcp(127.0.0.1:3306)/db,ca=" + bad); !errors.Is(err, ErrTLS) {
		t.Errorf("a CA file without a certificate: %v", err)
	}
	if _, err := Parse("a=u@tcp(127.0.0.1:3306)/db,ca=" + filepath.Join(dir, "missing.pem")); !errors.Is(err, ErrTLS) {
		t.Errorf("a missing CA file: %v", err)
	}
	ca := filepath.Join(dir, "ca.pem")
	os.WriteFile(ca, testCA(t), 0o600)
	tg, err := Parse("a=u@tcp(db.example:3306)/db,engine=rocksdb,ca=" + ca)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := tg.Conn()
	if err != nil || cc.TLS == nil || cc.TLS.RootCAs == nil || cc.TLS.ServerName != "db.example" || tg.TLSMode() != "verified" || tg.Engine != "ROCKSDB" {
		t.Fatalf("ca=: %+v %v (mode %q, engine %s)", cc.TLS, err, tg.TLSMode(), tg.Engine)
	}
	if _, err := tg.Open(); err != nil {
		t.Errorf("database/sql with ca=: %v", err)
	}
}

// testCA makes a self-signed CA certificate, PEM-encoded.
func testCA(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
