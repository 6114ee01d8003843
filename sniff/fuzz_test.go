package sniff

import (
	"testing"
	"time"

	"github.com/gopacket/gopacket/layers"

	"github.com/tandemdb/tandem/store"
)

type discard struct{ n int }

func (d *discard) Record(*store.Record) { d.n++ }

// Whatever the packets hold — garbage, a flipped byte in a capture file,
// a protocol this reader half knows — decoding them never panics.
func FuzzPackets(f *testing.F) {
	greeting := []byte("\x4a\x00\x00\x00\x0a" + "10.11.19-MariaDB\x00" + "\x01\x00\x00\x00" + "abcdefgh\x00" + "\xfe\xf7\x08\x02\x00\xff\x81\x15" + "\x00\x00\x00\x00\x00\x00\x1d\x00\x00\x00" + "ijklmnopqrst\x00" + "mysql_native_password\x00")
	f.Add([]byte("\x05\x00\x00\x00\x03ping"), false, uint32(1))
	f.Add(greeting, true, uint32(0))
	f.Add([]byte("\x01\x00\x00\x01\x01\x17\x00\x00\x02\x03def"), true, uint32(7))
	f.Add([]byte("\x17\x03\x03\x00\x10garbage"), false, uint32(9))
	f.Fuzz(func(t *testing.T, payload []byte, fromServer bool, seq uint32) {
		var sink discard
		d := New(Config{Ports: []uint16{3306}}, &sink)
		at := time.Unix(0, 0)
		for i := range 3 { // the same bytes again, shifted: retransmissions, holes
			src, dst := uint16(40000), uint16(3306)
			if fromServer {
				src, dst = dst, src
			}
			b := frameTCP(src, dst, seq+uint32(i*len(payload)/2), payload)
			d.Packet(at.Add(time.Duration(i)*time.Millisecond), layers.LinkTypeEthernet, b, len(b))
			fromServer = !fromServer
		}
		d.Finish()
	})
}

// frameTCP builds an Ethernet/IPv4/TCP frame by hand (no checksums: the
// decoder does not read them).
func frameTCP(src, dst uint16, seq uint32, payload []byte) []byte {
	b := make([]byte, 14+20+20, 14+20+20+len(payload))
	b[12], b[13] = 0x08, 0x00
	ip := b[14:]
	ip[0] = 0x45
	total := 20 + 20 + len(payload)
	ip[2], ip[3] = byte(total>>8), byte(total)
	ip[9] = 6
	copy(ip[12:], []byte{127, 0, 0, 1})
	copy(ip[16:], []byte{127, 0, 0, 1})
	tcp := ip[20:]
	tcp[0], tcp[1], tcp[2], tcp[3] = byte(src>>8), byte(src), byte(dst>>8), byte(dst)
	tcp[4], tcp[5], tcp[6], tcp[7] = byte(seq>>24), byte(seq>>16), byte(seq>>8), byte(seq)
	tcp[12] = 5 << 4
	tcp[13] = 0x18 // PSH, ACK
	return append(b, payload...)
}
