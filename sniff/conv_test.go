package sniff

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/gopacket/gopacket/layers"

	"github.com/tandemdb/tandem/capture"
	"github.com/tandemdb/tandem/store"
	"github.com/tandemdb/tandem/wire"
)

// conv plays one TCP connection between a client and a server on port
// 3306 into a Decoder, segment by segment as a capture shows it: each
// side's sequence numbers kept, each segment acknowledging all the other
// side sent (what the capture lost included: the peer received it).
type conv struct {
	t    *testing.T
	d    *Decoder
	sink recSink
	at   time.Time
	next [2]uint32 // the next byte each side sends (fromClient, fromServer)
}

type recSink struct{ recs []*store.Record }

func (s *recSink) Record(r *store.Record) { s.recs = append(s.recs, r.Clone()) }

func newConv(t *testing.T) *conv {
	k := &conv{t: t, at: time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC), next: [2]uint32{1000, 90000}}
	k.d = New(Config{Ports: []uint16{3306}, Schema: "shop", Capture: capture.Options{MaxRecordBytes: 1 << 20}}, &k.sink)
	return k
}

// TCP flags of the segments conv writes.
const (
	flagsData = tcpACK | 0x08 // PSH, ACK
)

// write hands the decoder one segment of dir's stream beginning at seq,
// of which the first captured bytes were captured (the snapshot length
// cut the rest).
func (k *conv) write(dir int, seq uint32, flags byte, payload []byte, captured int) {
	k.t.Helper()
	k.at = k.at.Add(time.Millisecond)
	src, dst := uint16(40000), uint16(3306)
	if dir == fromServer {
		src, dst = dst, src
	}
	fr := tcpFrame(src, dst, seq, k.next[1-dir], flags, payload)
	orig := len(fr)
	k.d.Packet(k.at, layers.LinkTypeEthernet, fr[:orig-len(payload)+captured], orig)
}

// send writes dir's next bytes as one segment.
func (k *conv) send(dir int, b []byte) {
	k.t.Helper()
	k.write(dir, k.next[dir], flagsData, b, len(b))
	k.next[dir] += uint32(len(b))
}

// sendSplit writes dir's next bytes in segments of at most n bytes.
func (k *conv) sendSplit(dir int, b []byte, n int) {
	k.t.Helper()
	for len(b) > 0 {
		m := min(n, len(b))
		k.send(dir, b[:m])
		b = b[m:]
	}
}

// lose sends dir's next bytes without the capture seeing them.
func (k *conv) lose(dir int, b []byte) { k.next[dir] += uint32(len(b)) }

// connect opens the connection with a login the capture sees: the
// client's capabilities are caps (the server offers every one).
func (k *conv) connect(caps uint64) {
	k.t.Helper()
	k.next[fromClient]--
	k.write(fromClient, k.next[fromClient], tcpSYN, nil, 0)
	k.next[fromClient]++
	k.next[fromServer]--
	k.write(fromServer, k.next[fromServer], tcpSYN|tcpACK, nil, 0)
	k.next[fromServer]++
	g := wire.Greeting{Protocol: 10, ServerVersion: []byte("10.11.19-MariaDB"), ConnID: 77, Caps: 0xffffffff&^uint64(mysql.CLIENT_LONG_PASSWORD) | wire.MariaDBClientProgress,
		Charset: 45, Status: 2, AuthDataLen: 21, AuthData2: []byte("abcdefghijkl\x00"), AuthPlugin: []byte("mysql_native_password")}
	k.send(fromServer, pkt(0, g.Append(nil)))
	hr := wire.HandshakeResponse{Caps: caps, MaxPacket: 1 << 24, Charset: 45, User: []byte("app"), AuthResponse: bytes.Repeat([]byte{7}, 20), Database: []byte("shop"), HasDatabase: true}
	k.send(fromClient, pkt(1, hr.Append(nil)))
	k.send(fromServer, pkt(2, okp(0, 2)))
}

// close ends the connection both ways.
func (k *conv) close() {
	k.t.Helper()
	k.write(fromClient, k.next[fromClient], tcpFIN|tcpACK, nil, 0)
	k.next[fromClient]++
	k.write(fromServer, k.next[fromServer], tcpFIN|tcpACK, nil, 0)
	k.next[fromServer]++
}

// records lists what the decoder recorded, one line per record.
func (k *conv) records() []string {
	var out []string
	for _, r := range k.sink.recs {
		line := fmt.Sprintf("%s flags=%#x", r.Kind, r.Flags)
		if r.SQL != "" {
			line += fmt.Sprintf(" %q", r.SQL)
		}
		if r.StmtID != 0 {
			line += fmt.Sprintf(" stmt=%d", r.StmtID)
		}
		for _, p := range r.Params {
			if p.Bytes != nil {
				line += fmt.Sprintf(" param=%q", p.Bytes)
			} else {
				line += fmt.Sprintf(" param=%d", p.Int)
			}
		}
		if r.Data != nil {
			line += fmt.Sprintf(" data=%q", r.Data)
		}
		rs := r.Resp
		switch rs.Kind {
		case store.RespResultSet:
			line += fmt.Sprintf(" | resultset rows=%d", rs.Rows)
		case store.RespOK:
			line += fmt.Sprintf(" | ok affected=%d", rs.AffectedRows)
		case store.RespError:
			line += fmt.Sprintf(" | error %d", rs.ErrCode)
		}
		out = append(out, line)
	}
	return out
}

// check compares the records with want, line by line.
func (k *conv) check(want ...string) {
	k.t.Helper()
	if got := k.records(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		k.t.Errorf("records:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// stats is the decoder's counters without its samples.
func (k *conv) stats() store.SourceStats {
	st := *k.d.Stats()
	st.Samples = nil
	return st
}

// tcpFrame builds an Ethernet/IPv4/TCP frame by hand (no checksums: the
// decoder does not read them).
func tcpFrame(src, dst uint16, seq, ack uint32, flags byte, payload []byte) []byte {
	b := make([]byte, 54, 54+len(payload))
	b[12], b[13] = 0x08, 0x00
	ip := b[14:]
	ip[0], ip[9] = 0x45, 6
	binary.BigEndian.PutUint16(ip[2:], uint16(40+len(payload)))
	copy(ip[12:], []byte{10, 0, 0, 1, 10, 0, 0, 2})
	if src == 3306 {
		copy(ip[12:], []byte{10, 0, 0, 2, 10, 0, 0, 1})
	}
	tcp := ip[20:]
	binary.BigEndian.PutUint16(tcp[0:], src)
	binary.BigEndian.PutUint16(tcp[2:], dst)
	binary.BigEndian.PutUint32(tcp[4:], seq)
	binary.BigEndian.PutUint32(tcp[8:], ack)
	tcp[12], tcp[13] = 5<<4, flags
	return append(b, payload...)
}

// pkt frames a MySQL packet numbered seq.
func pkt(seq byte, payload []byte) []byte {
	return append([]byte{byte(len(payload)), byte(len(payload) >> 8), byte(len(payload) >> 16), seq}, payload...)
}

// pkts frames payloads as the packets numbered from seq on.
func pkts(seq byte, payloads ...[]byte) []byte {
	var b []byte
	for i, p := range payloads {
		b = append(b, pkt(seq+byte(i), p)...)
	}
	return b
}

func query(sql string) []byte { return pkt(0, append([]byte{mysql.COM_QUERY}, sql...)) }

// The client's capabilities in the sessions whose login is seen: EOF
// packets end column definitions and rows.
const clientCaps = uint64(mysql.CLIENT_PROTOCOL_41 | mysql.CLIENT_SECURE_CONNECTION | mysql.CLIENT_PLUGIN_AUTH | mysql.CLIENT_TRANSACTIONS |
	mysql.CLIENT_MULTI_RESULTS | mysql.CLIENT_CONNECT_WITH_DB)

func okp(affected uint64, status uint16) []byte {
	return (&wire.OK{AffectedRows: affected, Status: status}).Append(nil, clientCaps)
}

func eofp(status uint16) []byte { return (&wire.EOF{Status: status}).Append(nil) }

var colDef = []byte("\x03def\x00\x00\x00\x01c\x00\x0c\x08\x00\x0b\x00\x00\x00\x03\x00\x00\x00\x00\x00")

// resultSet is a one-column text result set of rows, numbered from 1,
// ending in status.
func resultSet(status uint16, rows ...string) []byte {
	ps := [][]byte{{1}, colDef, eofp(status)}
	for _, r := range rows {
		ps = append(ps, append([]byte{byte(len(r))}, r...))
	}
	return pkts(1, append(ps, eofp(status))...)
}

const autocommit = mysql.SERVER_STATUS_AUTOCOMMIT
