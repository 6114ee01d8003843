package sandbox

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Every sandboxed server offers TLS, with certificates the sandbox makes
// for it: a CA of its own and a server certificate for 127.0.0.1,
// ::1 and localhost, signed by it. Clients may connect with or without
// TLS; with it, they verify the server against CAFile. The files live in
// the server's directory, under tls/.
func (s Server) tlsDir() string { return filepath.Join(s.Dir, "tls") }

// CAFile is the PEM certificate of the CA that signed the server's
// certificate: what a client (or tandem proxy --backend-ca) verifies it with.
func (s Server) CAFile() string { return filepath.Join(s.tlsDir(), "ca.pem") }

// CertFile and KeyFile are the server's PEM certificate and key. Tests
// also use them as the certificate of a proxy in front of the server.
func (s Server) CertFile() string { return filepath.Join(s.tlsDir(), "server-cert.pem") }
func (s Server) KeyFile() string  { return filepath.Join(s.tlsDir(), "server-key.pem") }

// tlsOptions makes the certificates if the server has none yet, and
// returns the server options that use them.
func (s Server) tlsOptions() ([]string, error) {
	if _, err := os.Stat(s.KeyFile()); errors.Is(err, os.ErrNotExist) {
		if err := makeCerts(s.tlsDir(), s.CAFile(), s.CertFile(), s.KeyFile()); err != nil {
			return nil, fmt.Errorf("sandbox: make TLS certificates in %s: %w", s.tlsDir(), err)
		}
	}
	return []string{"--ssl-ca=" + s.CAFile(), "--ssl-cert=" + s.CertFile(), "--ssl-key=" + s.KeyFile()}, nil
}

// makeCerts writes a new CA and a server certificate signed by it, valid
// for ten years: a sandbox is for tests and demos, and a stopped one can
// be started again much later.
func makeCerts(dir, caFile, certFile, keyFile string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	ca := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "tandem sandbox CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(10, 0, 0),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(10, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	for _, f := range []struct {
		path, typ string
		der       []byte
		mode      os.FileMode
	}{
		{caFile, "CERTIFICATE", caDER, 0o644},
		{certFile, "CERTIFICATE", leafDER, 0o644},
		{keyFile, "PRIVATE KEY", keyDER, 0o600},
	} {
		if err := os.WriteFile(f.path, pem.EncodeToMemory(&pem.Block{Type: f.typ, Bytes: f.der}), f.mode); err != nil {
			return err
		}
	}
	return nil
}
