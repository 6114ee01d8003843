package targets

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/tandemdb/tandem/replay/conn"
)

// How a target is reached. One function, config, reads the target's DSN
// and options once, and both client stacks Tandem uses take what it says:
// database/sql through go-sql-driver (Open: checks, checksums, footprint,
// prepare, the samples' re-runs) and replay's own connections (Conn:
// replay, sweeps, shadows). So a DSN's TLS (tls=true, skip-verify,
// preferred, or a CA given as ca=FILE), timeouts and session variables
// reach every connection: a target checked over TLS is replayed over TLS.

// ErrTLS: the target's TLS settings cannot be used (a CA file that does
// not load, a tls= value go-sql-driver does not know).
var ErrTLS = errors.New("target: TLS")

// config parses the DSN with the target's options applied.
func (t Target) config() (*mysql.Config, error) {
	c, err := mysql.ParseDSN(t.DSN)
	if err != nil {
		return nil, fmt.Errorf("%w %s: DSN %q: %v", ErrBadSpec, t.Name, RedactDSN(t.DSN), err)
	}
	if t.CA != "" {
		tc, err := caConfig(t.CA, c.Addr)
		if err != nil {
			return nil, fmt.Errorf("%w: target %s: %v", ErrTLS, t.Name, err)
		}
		c.TLS = tc
	}
	if c.Timeout == 0 {
		c.Timeout = 5 * time.Second
	}
	return c, nil
}

// caConfig verifies the server's certificate against the CA in file, for
// the DSN's host.
func caConfig(file, addr string) (*tls.Config, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("ca=%s: %v", file, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("ca=%s holds no PEM certificate", file)
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	return &tls.Config{RootCAs: pool, ServerName: host, MinVersion: tls.VersionTLS12}, nil
}

// Conn is the target's config for replay's own connections: address,
// credentials, the DSN's TLS (with fallback for tls=preferred) and session
// variables. dial and timeout are the caller's.
func (t Target) Conn() (conn.Config, error) {
	c, err := t.config()
	if err != nil {
		return conn.Config{}, err
	}
	cfg := conn.Config{Addr: c.Addr, User: c.User, Password: c.Passwd, TLS: c.TLS, TLSFallback: c.AllowFallbackToPlaintext}
	for k, v := range c.Params {
		cfg.Vars = append(cfg.Vars, [2]string{k, v})
	}
	slices.SortFunc(cfg.Vars, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	return cfg, nil
}

// TLSMode says how the DSN asks for TLS: "" for none, else "verified",
// "skip-verify" or "preferred".
func (t Target) TLSMode() string {
	c, err := t.config()
	switch {
	case err != nil || c.TLS == nil:
		return ""
	case c.AllowFallbackToPlaintext:
		return "preferred"
	case c.TLS.InsecureSkipVerify:
		return "skip-verify"
	}
	return "verified"
}

// registered names the go-sql-driver TLS configs made for ca= options.
var registered struct {
	sync.Mutex
	n int
}

// sqlDSN is the DSN go-sql-driver opens: the target's, without its schema,
// with a ca= option registered as its TLS config.
func (t Target) sqlDSN() (string, error) {
	c, err := t.config()
	if err != nil {
		return "", err
	}
	c.DBName = ""
	if t.CA != "" {
		registered.Lock()
		registered.n++
		name := fmt.Sprintf("tandem-ca-%d", registered.n)
		registered.Unlock()
		if err := mysql.RegisterTLSConfig(name, c.TLS); err != nil {
			return "", fmt.Errorf("%w: target %s: %v", ErrTLS, t.Name, err)
		}
		c.TLSConfig = name
	}
	return c.FormatDSN(), nil
}
