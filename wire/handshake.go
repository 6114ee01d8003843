package wire

import (
	"encoding/binary"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// Greeting is the server's initial handshake packet (protocol version 10).
// Caps holds all 64 capability bits: the lower 32 from the packet's two
// capability fields, the upper 32 from MariaDB's extended capabilities.
type Greeting struct {
	Protocol      byte
	ServerVersion []byte
	ConnID        uint32
	AuthData1     [8]byte
	Filler        byte
	Caps          uint64
	Charset       byte
	Status        uint16
	AuthDataLen   byte
	Reserved      [10]byte // last 4 are MariaDB's extended capabilities when Caps has no client-mysql bit
	AuthData2     []byte
	AuthPlugin    []byte
	// Short: the packet ended after the lower capability flags.
	Short bool
	// PluginNoNul: the plugin name was not NUL-terminated (some servers).
	PluginNoNul bool
}

// mariaDBExt reports whether the upper 32 capability bits travel in the
// reserved bytes: MariaDB clears the client-mysql bit to say so.
func mariaDBExt(caps uint64) bool { return uint32(caps)&clientMySQL == 0 }

// ParseGreeting parses the server's greeting.
func ParseGreeting(b []byte) (*Greeting, error) {
	r := reader{b: b}
	g := &Greeting{Protocol: r.u8()}
	if r.err == nil && g.Protocol != 10 {
		r.fail("protocol version is not 10")
	}
	g.ServerVersion = clone(r.nulString())
	g.ConnID = r.u32()
	copy(g.AuthData1[:], r.bytes(8))
	g.Filler = r.u8()
	g.Caps = uint64(r.u16())
	if r.err != nil {
		return nil, r.err
	}
	if r.left() == 0 {
		g.Short = true
		return g, nil
	}
	g.Charset = r.u8()
	g.Status = r.u16()
	g.Caps |= uint64(r.u16()) << 16
	g.AuthDataLen = r.u8()
	copy(g.Reserved[:], r.bytes(10))
	if r.err != nil {
		return nil, r.err
	}
	if mariaDBExt(g.Caps) {
		g.Caps |= uint64(binary.LittleEndian.Uint32(g.Reserved[6:])) << 32
	}
	if uint32(g.Caps)&mysql.CLIENT_SECURE_CONNECTION != 0 {
		n := 13
		if int(g.AuthDataLen)-8 > n {
			n = int(g.AuthDataLen) - 8
		}
		if n > r.left() {
			n = r.left() // some servers send less; keep what is there
		}
		g.AuthData2 = clone(r.bytes(n))
	}
	if uint32(g.Caps)&mysql.CLIENT_PLUGIN_AUTH != 0 && r.left() > 0 {
		rest := r.rest()
		if i := indexNul(rest); i >= 0 {
			g.AuthPlugin = clone(rest[:i])
			if i != len(rest)-1 {
				r.pos -= len(rest) - i - 1
				r.fail("bytes after the auth plugin name")
			}
		} else {
			g.AuthPlugin, g.PluginNoNul = clone(rest), true
		}
	}
	if r.err == nil && r.left() > 0 {
		r.fail("trailing bytes")
	}
	if r.err != nil {
		return nil, r.err
	}
	return g, nil
}

func indexNul(b []byte) int {
	for i, c := range b {
		if c == 0 {
			return i
		}
	}
	return -1
}

// Append encodes the greeting.
func (g *Greeting) Append(b []byte) []byte {
	b = append(b, g.Protocol)
	b = appendNul(b, g.ServerVersion)
	b = binary.LittleEndian.AppendUint32(b, g.ConnID)
	b = append(b, g.AuthData1[:]...)
	b = append(b, g.Filler)
	b = binary.LittleEndian.AppendUint16(b, uint16(g.Caps))
	if g.Short {
		return b
	}
	b = append(b, g.Charset)
	b = binary.LittleEndian.AppendUint16(b, g.Status)
	b = binary.LittleEndian.AppendUint16(b, uint16(g.Caps>>16))
	b = append(b, g.AuthDataLen)
	res := g.Reserved
	if mariaDBExt(g.Caps) {
		binary.LittleEndian.PutUint32(res[6:], uint32(g.Caps>>32))
	}
	b = append(b, res[:]...)
	if uint32(g.Caps)&mysql.CLIENT_SECURE_CONNECTION != 0 {
		b = append(b, g.AuthData2...)
	}
	if uint32(g.Caps)&mysql.CLIENT_PLUGIN_AUTH != 0 && (g.AuthPlugin != nil || g.PluginNoNul) {
		b = append(b, g.AuthPlugin...)
		if !g.PluginNoNul {
			b = append(b, 0)
		}
	}
	return b
}

// HandshakeResponse is the client's answer to the greeting
// (HandshakeResponse41), or, when SSLRequest is set, its 32-byte prefix
// asking to switch to TLS first.
type HandshakeResponse struct {
	Caps       uint64
	MaxPacket  uint32
	Charset    byte
	Filler     [23]byte // last 4 are MariaDB's extended capabilities when Caps has no client-mysql bit
	SSLRequest bool
	User       []byte
	// AuthResponse is auth data: relayed, never stored or logged.
	AuthResponse []byte
	Database     []byte
	AuthPlugin   []byte
	Attrs        []byte // the raw connection attributes block
	HasDatabase  bool
	HasPlugin    bool
	HasAttrs     bool
}

const sslRequestLen = 32

// ParseHandshakeResponse parses a HandshakeResponse41 or an SSLRequest.
func ParseHandshakeResponse(b []byte) (*HandshakeResponse, error) {
	r := reader{b: b}
	h := &HandshakeResponse{}
	h.Caps = uint64(r.u32())
	h.MaxPacket = r.u32()
	h.Charset = r.u8()
	copy(h.Filler[:], r.bytes(23))
	if r.err != nil {
		return nil, r.err
	}
	if uint32(h.Caps)&mysql.CLIENT_PROTOCOL_41 == 0 {
		r.fail("pre-4.1 handshake response")
		return nil, r.err
	}
	if mariaDBExt(h.Caps) {
		h.Caps |= uint64(binary.LittleEndian.Uint32(h.Filler[19:])) << 32
	}
	if r.left() == 0 {
		if uint32(h.Caps)&mysql.CLIENT_SSL == 0 {
			r.fail("handshake response without a user name")
			return nil, r.err
		}
		h.SSLRequest = true
		return h, nil
	}
	caps := uint32(h.Caps)
	h.User = clone(r.nulString())
	switch {
	case caps&mysql.CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA != 0:
		h.AuthResponse = clone(r.lenencBytes())
	case caps&mysql.CLIENT_SECURE_CONNECTION != 0:
		h.AuthResponse = clone(r.bytes(int(r.u8())))
	default:
		h.AuthResponse = clone(r.nulString())
	}
	if caps&mysql.CLIENT_CONNECT_WITH_DB != 0 && r.left() > 0 {
		h.Database, h.HasDatabase = clone(r.nulString()), true
	}
	if caps&mysql.CLIENT_PLUGIN_AUTH != 0 && r.left() > 0 {
		h.AuthPlugin, h.HasPlugin = clone(r.nulString()), true
	}
	if caps&mysql.CLIENT_CONNECT_ATTRS != 0 && r.left() > 0 {
		h.Attrs, h.HasAttrs = clone(r.lenencBytes()), true
	}
	if r.err == nil && r.left() > 0 {
		r.fail("trailing bytes")
	}
	if r.err != nil {
		return nil, r.err
	}
	return h, nil
}

// Append encodes the response (only the 32-byte prefix for an SSLRequest).
func (h *HandshakeResponse) Append(b []byte) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(h.Caps))
	b = binary.LittleEndian.AppendUint32(b, h.MaxPacket)
	b = append(b, h.Charset)
	f := h.Filler
	if mariaDBExt(h.Caps) {
		binary.LittleEndian.PutUint32(f[19:], uint32(h.Caps>>32))
	}
	b = append(b, f[:]...)
	if h.SSLRequest {
		return b
	}
	caps := uint32(h.Caps)
	b = appendNul(b, h.User)
	switch {
	case caps&mysql.CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA != 0:
		b = AppendLenencBytes(b, h.AuthResponse)
	case caps&mysql.CLIENT_SECURE_CONNECTION != 0:
		b = append(b, byte(len(h.AuthResponse)))
		b = append(b, h.AuthResponse...)
	default:
		b = appendNul(b, h.AuthResponse)
	}
	if h.HasDatabase {
		b = appendNul(b, h.Database)
	}
	if h.HasPlugin {
		b = appendNul(b, h.AuthPlugin)
	}
	if h.HasAttrs {
		b = AppendLenencBytes(b, h.Attrs)
	}
	return b
}

// ChangeUser is COM_CHANGE_USER.
type ChangeUser struct {
	User         []byte
	AuthResponse []byte // relayed, never stored
	Database     []byte
	Charset      uint16
	AuthPlugin   []byte
	Attrs        []byte
	HasCharset   bool
	HasPlugin    bool
	HasAttrs     bool
}

// ParseChangeUser parses COM_CHANGE_USER (command byte included) sent by a
// client whose capabilities are caps.
func ParseChangeUser(b []byte, caps uint64) (*ChangeUser, error) {
	r := reader{b: b}
	if r.u8() != mysql.COM_CHANGE_USER {
		r.pos = 0
		r.fail("not COM_CHANGE_USER")
		return nil, r.err
	}
	c := &ChangeUser{User: clone(r.nulString())}
	if uint32(caps)&mysql.CLIENT_SECURE_CONNECTION != 0 {
		c.AuthResponse = clone(r.bytes(int(r.u8())))
	} else {
		c.AuthResponse = clone(r.nulString())
	}
	c.Database = clone(r.nulString())
	if r.err == nil && r.left() >= 2 {
		c.Charset, c.HasCharset = r.u16(), true
		if uint32(caps)&mysql.CLIENT_PLUGIN_AUTH != 0 && r.left() > 0 {
			c.AuthPlugin, c.HasPlugin = clone(r.nulString()), true
		}
		if uint32(caps)&mysql.CLIENT_CONNECT_ATTRS != 0 && r.left() > 0 {
			c.Attrs, c.HasAttrs = clone(r.lenencBytes()), true
		}
	}
	if r.err == nil && r.left() > 0 {
		r.fail("trailing bytes")
	}
	if r.err != nil {
		return nil, r.err
	}
	return c, nil
}

// Append encodes the command for a client with capabilities caps.
func (c *ChangeUser) Append(b []byte, caps uint64) []byte {
	b = append(b, mysql.COM_CHANGE_USER)
	b = appendNul(b, c.User)
	if uint32(caps)&mysql.CLIENT_SECURE_CONNECTION != 0 {
		b = append(b, byte(len(c.AuthResponse)))
		b = append(b, c.AuthResponse...)
	} else {
		b = appendNul(b, c.AuthResponse)
	}
	b = appendNul(b, c.Database)
	if c.HasCharset {
		b = binary.LittleEndian.AppendUint16(b, c.Charset)
		if c.HasPlugin {
			b = appendNul(b, c.AuthPlugin)
		}
		if c.HasAttrs {
			b = AppendLenencBytes(b, c.Attrs)
		}
	}
	return b
}
