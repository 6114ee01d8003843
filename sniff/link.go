package sniff

import (
	"encoding/binary"
	"net/netip"

	"github.com/gopacket/gopacket/layers"
)

// endpoint is one end of a TCP connection.
type endpoint struct {
	addr netip.Addr
	port uint16
}

func (e endpoint) String() string { return netip.AddrPortFrom(e.addr, e.port).String() }

// segment is what a packet carries for TCP reassembly.
type segment struct {
	src, dst      endpoint
	seq, ack      uint32
	syn, fin, rst bool
	hasAck        bool
	payload       []byte
	// missing counts payload bytes the packet carried beyond what was
	// captured (a snapshot length shorter than the packet).
	missing int
}

// TCP flag bits.
const (
	tcpFIN = 0x01
	tcpSYN = 0x02
	tcpRST = 0x04
	tcpACK = 0x10
)

// decode reads a TCP segment out of a captured frame of link type lt, in
// place. origLen is the frame's length on the wire. It reports false for
// anything else (another protocol, an IP fragment, a frame cut inside its
// headers).
func decode(lt layers.LinkType, data []byte, origLen int, sg *segment) bool {
	cut := max(origLen-len(data), 0)
	var proto uint16 // an ethertype
	switch lt {
	case layers.LinkTypeEthernet:
		if len(data) < 14 {
			return false
		}
		proto, data = binary.BigEndian.Uint16(data[12:]), data[14:]
	case layers.LinkTypeNull, layers.LinkTypeLoop:
		// A 4-byte address family, in the capturing host's byte order
		// (Null) or network order (Loop): 2 is IPv4, 24, 28 and 30 IPv6.
		if len(data) < 4 {
			return false
		}
		fam := binary.LittleEndian.Uint32(data)
		if lt == layers.LinkTypeLoop || fam > 0xffff {
			fam = binary.BigEndian.Uint32(data)
		}
		switch fam {
		case 2:
			proto = 0x0800
		case 24, 28, 30:
			proto = 0x86dd
		default:
			return false
		}
		data = data[4:]
	case layers.LinkTypeLinuxSLL:
		if len(data) < 16 {
			return false
		}
		proto, data = binary.BigEndian.Uint16(data[14:]), data[16:]
	case layers.LinkTypeLinuxSLL2:
		if len(data) < 20 {
			return false
		}
		proto, data = binary.BigEndian.Uint16(data[0:]), data[20:]
	case layers.LinkTypeRaw, layers.LinkTypeIPv4, layers.LinkTypeIPv6, 12: // 12: DLT_RAW on some systems
		if len(data) < 1 {
			return false
		}
		proto = 0x0800
		if data[0]>>4 == 6 {
			proto = 0x86dd
		}
	default:
		return false
	}
	// VLAN tags (802.1Q, 802.1ad, QinQ).
	for proto == 0x8100 || proto == 0x88a8 || proto == 0x9100 {
		if len(data) < 4 {
			return false
		}
		proto, data = binary.BigEndian.Uint16(data[2:]), data[4:]
	}
	var tcp []byte
	switch proto {
	case 0x0800:
		if len(data) < 20 || data[0]>>4 != 4 {
			return false
		}
		ihl := int(data[0]&0x0f) * 4
		total := int(binary.BigEndian.Uint16(data[2:]))
		if ihl < 20 || len(data) < ihl || data[9] != 6 {
			return false
		}
		if frag := binary.BigEndian.Uint16(data[6:]); frag&0x3fff != 0 {
			return false // a fragment (more fragments, or an offset)
		}
		sg.src.addr = netip.AddrFrom4([4]byte(data[12:16]))
		sg.dst.addr = netip.AddrFrom4([4]byte(data[16:20]))
		tcp, cut = ipPayload(data, ihl, total, cut)
	case 0x86dd:
		if len(data) < 40 || data[0]>>4 != 6 {
			return false
		}
		next, off := data[6], 40
		total := 40 + int(binary.BigEndian.Uint16(data[4:]))
		// Extension headers: hop-by-hop, routing, destination options.
		for next == 0 || next == 43 || next == 60 {
			if len(data) < off+8 {
				return false
			}
			next, off = data[off], off+(int(data[off+1])+1)*8
		}
		if next != 6 || len(data) < off {
			return false // not TCP, or a fragment (44)
		}
		sg.src.addr = netip.AddrFrom16([16]byte(data[8:24]))
		sg.dst.addr = netip.AddrFrom16([16]byte(data[24:40]))
		tcp, cut = ipPayload(data, off, total, cut)
	default:
		return false
	}
	if len(tcp) < 20 {
		return false
	}
	hl := int(tcp[12]>>4) * 4
	if hl < 20 || len(tcp) < hl {
		return false
	}
	sg.src.port = binary.BigEndian.Uint16(tcp[0:])
	sg.dst.port = binary.BigEndian.Uint16(tcp[2:])
	sg.seq = binary.BigEndian.Uint32(tcp[4:])
	sg.ack = binary.BigEndian.Uint32(tcp[8:])
	fl := tcp[13]
	sg.syn, sg.fin, sg.rst, sg.hasAck = fl&tcpSYN != 0, fl&tcpFIN != 0, fl&tcpRST != 0, fl&tcpACK != 0
	sg.payload, sg.missing = tcp[hl:], cut
	return true
}

// ipPayload returns an IP packet's payload (trimming a link layer's
// padding by the IP length) and how many of its bytes the capture cut.
func ipPayload(ip []byte, hdr, total, cut int) ([]byte, int) {
	if total >= hdr && total <= len(ip) {
		return ip[hdr:total], 0
	}
	if total > len(ip) {
		// The snapshot length cut the packet: the IP length says how much.
		return ip[hdr:], total - len(ip)
	}
	return ip[hdr:], cut // a zero length (TSO): trust the frame
}
