package sniff

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// tape records what a half hands on.
type tape struct{ b strings.Builder }

func (t *tape) data(_ time.Time, b []byte, fresh bool) {
	if fresh {
		t.b.WriteString("|")
	}
	t.b.Write(b)
}
func (t *tape) lost(_ time.Time, n uint32) { fmt.Fprintf(&t.b, "<lost %d>", n) }

func TestHalfReassembles(t *testing.T) {
	at := time.Unix(0, 0)
	const isn = 0xfffffff0 // sequence numbers wrap inside the test
	cases := []struct {
		name string
		run  func(h *half, o *tape)
		want string
	}{
		{"in order", func(h *half, o *tape) {
			h.syn(isn)
			h.segment(at, isn+1, []byte("abc"), o)
			h.segment(at, isn+4, []byte("def"), o)
		}, "|abc|def"},
		{"out of order and retransmitted", func(h *half, o *tape) {
			h.syn(isn)
			h.segment(at, isn+4, []byte("def"), o)
			h.segment(at, isn+1, []byte("abc"), o)
			h.segment(at, isn+1, []byte("abc"), o)
			h.segment(at, isn+2, []byte("bcdefg"), o)
		}, "|abc|defg"},
		{"a hole the peer acknowledged past is lost once the peer answers", func(h *half, o *tape) {
			h.syn(isn)
			h.segment(at, isn+1, []byte("abc"), o)
			h.ack(isn + 7) // "def" reached the peer, not the capture
			h.settle(at, o)
			h.segment(at, isn+7, []byte("ghi"), o)
		}, "|abc<lost 3>|ghi"},
		{"a held segment after a hole the peer acknowledged, once the peer answers", func(h *half, o *tape) {
			h.syn(isn)
			h.segment(at, isn+1, []byte("abc"), o)
			h.segment(at, isn+7, []byte("ghi"), o)
			h.ack(isn + 10)
			h.segment(at, isn+10, []byte("jkl"), o)
			h.settle(at, o)
		}, "|abc<lost 3>|ghi|jkl"},
		{"two holes the peer acknowledged, settled at once", func(h *half, o *tape) {
			h.syn(isn)
			h.segment(at, isn+1, []byte("abc"), o)
			h.segment(at, isn+7, []byte("ghi"), o)
			h.segment(at, isn+13, []byte("mno"), o)
			base := uint32(isn)
			h.ack(base + 16) // past the wrap
			h.settle(at, o)
		}, "|abc<lost 3>|ghi<lost 3>|mno"},
		{"a packet written after its acknowledgement and a later one", func(h *half, o *tape) {
			h.syn(isn)
			h.segment(at, isn+1, []byte("abc"), o)
			h.segment(at, isn+7, []byte("ghi"), o)
			h.ack(isn + 10)
			h.segment(at, isn+10, []byte("jkl"), o)
			h.segment(at, isn+4, []byte("def"), o)
		}, "|abc|def|ghi|jkl"},
		{"the peer's first acknowledgement starts a stream joined mid-way", func(h *half, o *tape) {
			h.ack(5000)
			h.ack(5004) // the peer answered bytes the capture missed
			h.settle(at, o)
			h.segment(at, 5004, []byte("xyz"), o)
		}, "<lost 4>|xyz"},
		{"a stream joined mid-way whose first segment was written after the acknowledgement of it", func(h *half, o *tape) {
			h.ack(5003)
			h.segment(at, 5000, []byte("xyz"), o)
			h.segment(at, 5003, []byte("w"), o)
		}, "|xyz|w"},
		{"an acknowledgement alone declares nothing", func(h *half, o *tape) {
			h.syn(isn)
			h.ack(isn + 7)
			h.segment(at, isn+1, []byte("abcdef"), o)
		}, "|abcdef"},
		{"joined mid-stream", func(h *half, o *tape) {
			h.segment(at, 5000, []byte("xyz"), o)
			h.segment(at, 5003, []byte("w"), o)
		}, "|xyz|w"},
		{"holes left at the end", func(h *half, o *tape) {
			h.syn(isn)
			h.segment(at, isn+4, []byte("def"), o)
			h.finish(at, o)
		}, "<lost 3>|def"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var h half
			var o tape
			c.run(&h, &o)
			if got := o.b.String(); got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

func TestHalfBoundsWhatItHolds(t *testing.T) {
	var h half
	var o tape
	h.syn(0)
	chunk := make([]byte, 64<<10)
	for i := range maxPending/len(chunk) + 1 {
		h.segment(time.Time{}, uint32(1+len(chunk)*(i+1)), chunk, &o) // never the first chunk
	}
	if !strings.HasPrefix(o.b.String(), fmt.Sprintf("<lost %d>", len(chunk))) || h.pendN != 0 {
		t.Errorf("after %d bytes behind a hole: %.20q…, %d held", maxPending, o.b.String(), h.pendN)
	}
}

// frame builds a captured frame of TCP payload on link type lt.
func frame(t *testing.T, lt layers.LinkType, v6, vlan bool, payload []byte) []byte {
	t.Helper()
	tcp := &layers.TCP{SrcPort: 40000, DstPort: 3306, Seq: 7, Ack: 9, ACK: true, PSH: true, Window: 100}
	var ip gopacket.SerializableLayer
	ethType := layers.EthernetTypeIPv4
	if v6 {
		ip6 := &layers.IPv6{Version: 6, NextHeader: layers.IPProtocolTCP, HopLimit: 64, SrcIP: net.ParseIP("::1"), DstIP: net.ParseIP("::2")}
		tcp.SetNetworkLayerForChecksum(ip6)
		ip, ethType = ip6, layers.EthernetTypeIPv6
	} else {
		ip4 := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolTCP, SrcIP: net.IP{127, 0, 0, 1}, DstIP: net.IP{127, 0, 0, 2}}
		tcp.SetNetworkLayerForChecksum(ip4)
		ip = ip4
	}
	var ls []gopacket.SerializableLayer
	switch lt {
	case layers.LinkTypeEthernet:
		eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{0, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{0, 0, 0, 0, 0, 2}, EthernetType: ethType}
		if vlan {
			eth.EthernetType = layers.EthernetTypeDot1Q
			ls = append(ls, eth, &layers.Dot1Q{VLANIdentifier: 12, Type: ethType})
		} else {
			ls = append(ls, eth)
		}
	case layers.LinkTypeNull:
		fam := layers.ProtocolFamilyIPv4
		if v6 {
			fam = layers.ProtocolFamilyIPv6BSD
		}
		ls = append(ls, &layers.Loopback{Family: fam})
	}
	ls = append(ls, ip, tcp, gopacket.Payload(payload))
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestDecodeLinkTypes(t *testing.T) {
	payload := []byte("\x05\x00\x00\x00\x03ping")
	for _, c := range []struct {
		name     string
		lt       layers.LinkType
		v6, vlan bool
	}{
		{"ethernet", layers.LinkTypeEthernet, false, false},
		{"ethernet ipv6", layers.LinkTypeEthernet, true, false},
		{"vlan", layers.LinkTypeEthernet, false, true},
		{"bsd loopback", layers.LinkTypeNull, false, false},
		{"bsd loopback ipv6", layers.LinkTypeNull, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := frame(t, c.lt, c.v6, c.vlan, payload)
			var sg segment
			if !decode(c.lt, b, len(b), &sg) {
				t.Fatal("not decoded")
			}
			if string(sg.payload) != string(payload) || sg.src.port != 40000 || sg.dst.port != 3306 || sg.seq != 7 || sg.ack != 9 || !sg.hasAck || sg.missing != 0 {
				t.Errorf("got %+v", sg)
			}
			// The snapshot length cut the last 4 bytes.
			if !decode(c.lt, b[:len(b)-4], len(b), &sg) || sg.missing != 4 || string(sg.payload) != string(payload[:len(payload)-4]) {
				t.Errorf("cut: payload %q, missing %d", sg.payload, sg.missing)
			}
		})
	}
	// Linux cooked captures (tcpdump -i any), by hand: SLL has the
	// protocol at 14 of 16 bytes, SLL2 (tcpdump 4.99) first of 20.
	eth := frame(t, layers.LinkTypeEthernet, false, false, payload)
	sll := append([]byte{0, 0, 0x03, 0x04, 0, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0x08, 0x00}, eth[14:]...)
	sll2 := append([]byte{0x08, 0x00, 0, 0, 0, 0, 0, 1, 0x03, 0x04, 0, 6, 0, 0, 0, 0, 0, 0, 0, 0}, eth[14:]...)
	var sg segment
	for lt, b := range map[layers.LinkType][]byte{layers.LinkTypeLinuxSLL: sll, layers.LinkTypeLinuxSLL2: sll2} {
		if !decode(lt, b, len(b), &sg) || string(sg.payload) != string(payload) || sg.dst.port != 3306 {
			t.Errorf("%s: %+v", lt, sg)
		}
	}
	// Not TCP, or a fragment: skipped.
	udp := append([]byte(nil), eth...)
	udp[14+9] = 17
	if decode(layers.LinkTypeEthernet, udp, len(udp), &sg) {
		t.Error("UDP decoded as TCP")
	}
	frag := append([]byte(nil), eth...)
	frag[14+6] |= 0x20 // more fragments
	if decode(layers.LinkTypeEthernet, frag, len(frag), &sg) {
		t.Error("a fragment decoded")
	}
}
