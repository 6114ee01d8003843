package sniff

import (
	"testing"

	"golang.org/x/net/bpf"
)

// The live capture's kernel filter, run in x/net/bpf's interpreter on
// cooked frames (from the IP header): TCP to or from a listed port passes
// whole, over IPv4 with any header length and over IPv6; other ports,
// UDP, later fragments and what is not IP are dropped.
func TestPortFilterPassesOnlyTheServersTCP(t *testing.T) {
	prog, err := portFilter([]uint16{3306, 4000}, 0)
	if err != nil {
		t.Fatal(err)
	}
	vm, err := bpf.NewVM(disassemble(t, prog))
	if err != nil {
		t.Fatal(err)
	}
	v4 := func(src, dst uint16, opts int, mod func([]byte)) []byte {
		b := frameTCP(src, dst, 1, []byte("payload"))[14:]
		if opts > 0 { // IP options: the TCP header moves
			b = append(b[:20:20], append(make([]byte, opts), b[20:]...)...)
			b[0] = 0x45 + byte(opts/4)
		}
		if mod != nil {
			mod(b)
		}
		return b
	}
	v6 := func(src, dst uint16, next byte) []byte {
		b := make([]byte, 40+20+3)
		b[0], b[6] = 0x60, next
		b[40], b[41], b[42], b[43] = byte(src>>8), byte(src), byte(dst>>8), byte(dst)
		return b
	}
	for _, c := range []struct {
		name  string
		frame []byte
		pass  bool
	}{
		{"v4 to the server", v4(40000, 3306, 0, nil), true},
		{"v4 from the second server", v4(4000, 40000, 0, nil), true},
		{"v4 with 8 bytes of options", v4(40000, 3306, 8, nil), true},
		{"v4 another port", v4(40000, 3307, 0, nil), false},
		{"v4 UDP", v4(40000, 3306, 0, func(b []byte) { b[9] = 17 }), false},
		{"v4 a later fragment", v4(40000, 3306, 0, func(b []byte) { b[7] = 0x10 }), false},
		{"v4 the first fragment", v4(40000, 3306, 0, func(b []byte) { b[6] = 0x20 }), true},
		{"v6 to the server", v6(40000, 3306, 6), true},
		{"v6 another port", v6(40000, 80, 6), false},
		{"v6 UDP", v6(40000, 3306, 17), false},
		{"not IP", []byte{0x12, 0x34, 0, 0}, false},
	} {
		n, err := vm.Run(c.frame)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := n > 0; got != c.pass || (got && n < len(c.frame)) {
			t.Errorf("%s: keeps %d of %d bytes, want pass=%v", c.name, n, len(c.frame), c.pass)
		}
	}
	if _, err := portFilter(nil, 0); err == nil {
		t.Error("a filter of no port: no error")
	}
}

func disassemble(t *testing.T, raw []bpf.RawInstruction) []bpf.Instruction {
	t.Helper()
	ins, ok := bpf.Disassemble(raw)
	if !ok {
		t.Fatal("the program does not disassemble")
	}
	return ins
}
