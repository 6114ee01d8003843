package proxy

import (
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/tandemdb/tandem/wire"
)

// Capabilities the proxy takes out of the server's greeting, so that clients
// never turn on what it does not parse: zstd compression (MySQL 8's; no
// MariaDB server offers it, and zlib stays), MySQL 8's query attributes
// and optional metadata, and MariaDB's progress reports, COM_MULTI and
// bulk unit results (per-row results of a bulk execute). A client that
// would have used one of them runs as against a server without it.
// Compression (zlib, both legs), bulk execute (MariaDB's
// COM_STMT_BULK_EXECUTE), CLIENT_DEPRECATE_EOF, MariaDB's extended type
// metadata and its metadata caching (executes without column
// definitions: less work for the server, as clients get it without a
// proxy) are parsed and stay. StrippedCaps lists them for --help.
const strippedCaps = uint64(mysql.CLIENT_ZSTD_COMPRESSION_ALGORITHM|
	mysql.CLIENT_QUERY_ATTRIBUTES|mysql.CLIENT_OPTIONAL_RESULTSET_METADATA) |
	wire.MariaDBClientProgress | wire.MariaDBClientComMulti | wire.MariaDBClientBulkUnitResults

// StrippedCaps names what the proxy takes out of the server's greeting
// (strippedCaps), for the proxy's --help.
const StrippedCaps = "zstd protocol compression (MySQL 8; zlib compression is relayed), query attributes and optional result metadata (MySQL 8), " +
	"progress reports, COM_MULTI and per-row results of bulk executes (MariaDB; bulk execute itself is relayed)"

// Why a connection failed, as metrics and logs name it.
// maxHandshakePacket bounds a client packet before authentication (a
// handshake response with connection attributes is a few KiB).
const maxHandshakePacket = 1 << 20

const (
	reasonBackendUnreachable = "backend_unreachable"
	reasonMalformed          = "malformed"
	reasonTLS                = "tls"
	reasonUnsupported        = "unsupported"
	reasonAuthFailed         = "auth_failed"
	reasonTooMany            = "too_many_connections"
	reasonClientGone         = "client_gone"
	reasonBackendGone        = "backend_gone"
)

// connError is a failure that ends a connection, with what the client is
// told (nil: nothing, the client is gone or was already answered).
type connError struct {
	reason string
	err    error
	client *wire.Err
}

func (e *connError) Error() string { return e.reason + ": " + e.err.Error() }
func (e *connError) Unwrap() error { return e.err }

func fail(reason string, err error, client *wire.Err) error {
	return &connError{reason: reason, err: err, client: client}
}

// proxyErr builds the ERR packet the proxy itself sends; all such errors go
// through here so that clients see one consistent form.
func proxyErr(code uint16, state, format string, args ...any) *wire.Err {
	return &wire.Err{Code: code, HasState: true, State: state, Message: "tandem proxy: " + fmt.Sprintf(format, args...)}
}

// handshake relays the greeting and authentication. On success the session
// knows the client's capabilities, user and schema.
func (s *session) handshake() error {
	deadline := time.Now().Add(s.p.cfg.HandshakeTimeout)
	s.client.SetDeadline(deadline)
	s.backend.SetDeadline(deadline)
	defer s.client.SetDeadline(time.Time{})
	defer s.backend.SetDeadline(time.Time{})
	// Before authentication a client's packets are small: bound them.
	s.client.MaxPacket = maxHandshakePacket
	defer func() { s.client.MaxPacket = 0 }()

	_, gb, err := s.backend.ReadPacket()
	if err != nil {
		return fail(reasonBackendGone, fmt.Errorf("read greeting: %w", err), proxyErr(1105, "HY000", "backend %s closed before greeting: %v", s.p.cfg.Backend, err))
	}
	if len(gb) > 0 && gb[0] == wire.HeaderErr {
		// The server refused us (too many connections, host blocked): the
		// client hears it as the server said it.
		s.client.WritePacket(0, gb)
		s.client.Flush()
		e, _ := wire.ParseErr(gb)
		return fail(reasonBackendGone, fmt.Errorf("backend refused the connection: %v", e), nil)
	}
	g, err := wire.ParseGreeting(gb)
	if err != nil {
		return fail(reasonMalformed, fmt.Errorf("backend greeting: %w", err), proxyErr(1105, "HY000", "cannot parse the backend's greeting"))
	}
	serverCaps := g.Caps
	s.connID = g.ConnID // the client's CONNECTION_ID(), relayed as the server gave it
	g.Caps &^= strippedCaps
	if s.p.tlsServer != nil {
		g.Caps |= uint64(mysql.CLIENT_SSL)
	} else {
		g.Caps &^= uint64(mysql.CLIENT_SSL)
	}
	if err := s.writeClient(0, g.Append(nil)); err != nil {
		return fail(reasonClientGone, err, nil)
	}
	s.errSeq = 2 // after the greeting and the client's response

	cseq, hb, err := s.client.ReadPacket()
	if err != nil {
		return fail(reasonClientGone, fmt.Errorf("read handshake response: %w", err), nil)
	}
	hr, err := wire.ParseHandshakeResponse(hb)
	if err != nil {
		return fail(reasonMalformed, fmt.Errorf("client handshake response: %w", err), proxyErr(1043, "08S01", "bad handshake"))
	}
	if hr.SSLRequest {
		if s.p.tlsServer == nil {
			return fail(reasonTLS, errors.New("client asked for TLS, which the proxy did not offer"), proxyErr(1105, "08S01", "TLS is not enabled; start the proxy with --tls-cert and --tls-key"))
		}
		tc := tls.Server(s.client.Detach(), s.p.tlsServer)
		if err := tc.Handshake(); err != nil {
			return fail(reasonTLS, fmt.Errorf("client TLS handshake: %w", err), nil)
		}
		if err := s.client.Upgrade(tc); err != nil {
			return fail(reasonMalformed, err, nil)
		}
		s.clientTLS = true
		s.errSeq = 3
		if cseq, hb, err = s.client.ReadPacket(); err != nil {
			return fail(reasonClientGone, fmt.Errorf("read handshake response after TLS: %w", err), nil)
		}
		if hr, err = wire.ParseHandshakeResponse(hb); err != nil || hr.SSLRequest {
			return fail(reasonMalformed, fmt.Errorf("client handshake response after TLS: %v", err), proxyErr(1043, "08S01", "bad handshake"))
		}
	}
	if hr.Caps&uint64(mysql.CLIENT_ZSTD_COMPRESSION_ALGORITHM) != 0 {
		// The greeting did not offer it; a client that asks all the same
		// would send a level byte the handshake relay does not carry.
		return fail(reasonUnsupported, errors.New("client asked for zstd compression, which the greeting did not offer"),
			proxyErr(1105, "08S01", "zstd compression was not offered; connect with zlib compression or none"))
	}
	compress := hr.Caps&uint64(mysql.CLIENT_COMPRESS) != 0
	if compress && serverCaps&uint64(mysql.CLIENT_COMPRESS) == 0 {
		// The greeting relays the server's offer, so a client asks only
		// when the server offered it; one that asks anyway is refused, as
		// the server would refuse it.
		return fail(reasonUnsupported, errors.New("client asked for compression, which the server does not offer"),
			proxyErr(1105, "08S01", "the server %s does not offer compression; connect without it", s.p.cfg.Backend))
	}
	// A client asks only for what the greeting offered; remove what we strip
	// in case one does not, and change nothing else.
	hr.Caps &^= strippedCaps
	s.caps = hr.Caps &^ uint64(mysql.CLIENT_SSL)
	s.user, s.schema, s.collation = string(hr.User), string(hr.Database), hr.Charset

	bseq := byte(0)
	if s.p.cfg.BackendTLS {
		if uint32(serverCaps)&mysql.CLIENT_SSL == 0 {
			return fail(reasonTLS, errors.New("backend does not offer TLS"), proxyErr(1105, "08S01", "--backend-tls is set but backend %s does not offer TLS", s.p.cfg.Backend))
		}
		req := *hr
		req.SSLRequest = true
		req.Caps |= uint64(mysql.CLIENT_SSL)
		bseq++
		if err := s.writeBackend(bseq, req.Append(nil)); err != nil {
			return fail(reasonBackendGone, err, proxyErr(1105, "08S01", "backend gone during TLS"))
		}
		tc := tls.Client(s.backend.Detach(), s.p.tlsClient)
		if err := tc.Handshake(); err != nil {
			return fail(reasonTLS, fmt.Errorf("backend TLS handshake: %w", err), proxyErr(1105, "08S01", "TLS handshake with backend %s failed: %v", s.p.cfg.Backend, err))
		}
		if err := s.backend.Upgrade(tc); err != nil {
			return fail(reasonMalformed, err, nil)
		}
		hr.Caps |= uint64(mysql.CLIENT_SSL)
	} else {
		hr.Caps &^= uint64(mysql.CLIENT_SSL)
	}
	bseq++
	if err := s.writeBackend(bseq, hr.Append(nil)); err != nil {
		return fail(reasonBackendGone, err, proxyErr(1105, "08S01", "backend gone during authentication"))
	}
	ok, errPkt, err := s.relayAuth(cseq, bseq)
	if err != nil {
		return err
	}
	if !ok {
		return fail(reasonAuthFailed, fmt.Errorf("server refused login of user %q: %s", s.user, errPkt), nil)
	}
	if compress {
		// Both legs speak the compressed protocol from here on; the proxy
		// reads and records the packets inside it.
		if err := s.client.Compress(); err != nil {
			return fail(reasonMalformed, fmt.Errorf("client: %w", err), nil)
		}
		if err := s.backend.Compress(); err != nil {
			return fail(reasonMalformed, fmt.Errorf("backend: %w", err), nil)
		}
		s.compressed = true
	}
	return nil
}

// relayAuth relays an authentication exchange (after the handshake
// response or COM_CHANGE_USER) until the server's OK or ERR. cseq and bseq
// are the last sequence ids used on each side; they differ when TLS is
// terminated on one side only. It returns whether the server said OK, and
// its ERR message otherwise.
func (s *session) relayAuth(cseq, bseq byte) (bool, string, error) {
	for {
		seq, p, err := s.backend.ReadPacket()
		if err != nil {
			return false, "", fail(reasonBackendGone, fmt.Errorf("read auth reply: %w", err), proxyErr(1105, "08S01", "backend gone during authentication"))
		}
		bseq = seq
		cseq++
		if err := s.writeClient(cseq, p); err != nil {
			return false, "", fail(reasonClientGone, err, nil)
		}
		if len(p) == 0 {
			return false, "", fail(reasonMalformed, errors.New("empty auth packet from backend"), nil)
		}
		switch p[0] {
		case wire.HeaderOK:
			return true, "", nil
		case wire.HeaderErr:
			e, _ := wire.ParseErr(p)
			msg := "malformed ERR"
			if e != nil {
				msg = fmt.Sprintf("%d (%s) %s", e.Code, e.State, e.Message)
			}
			return false, msg, nil
		case 0x01:
			// AuthMoreData. caching_sha2_password's "fast auth success"
			// (0x01 0x03) is followed by OK without a client reply.
			if len(p) == 2 && p[1] == 0x03 {
				continue
			}
		}
		seq, p, err = s.client.ReadPacket()
		if err != nil {
			return false, "", fail(reasonClientGone, fmt.Errorf("read auth data: %w", err), nil)
		}
		cseq = seq
		bseq++
		if err := s.writeBackend(bseq, p); err != nil {
			return false, "", fail(reasonBackendGone, err, nil)
		}
	}
}

func (s *session) writeClient(seq byte, p []byte) error {
	if _, err := s.client.WritePacket(seq, p); err != nil {
		return err
	}
	return s.client.Flush()
}

func (s *session) writeBackend(seq byte, p []byte) error {
	if _, err := s.backend.WritePacket(seq, p); err != nil {
		return err
	}
	return s.backend.Flush()
}
