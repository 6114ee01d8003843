package sniff

import (
	"fmt"

	"golang.org/x/net/bpf"
)

// portFilter is the kernel-side filter of a live capture: a classic BPF
// program for a packet socket in cooked mode (SOCK_DGRAM, so every frame
// begins at its IP header whatever the link) that passes TCP segments to
// or from one of ports, over IPv4 (no fragment after the first: it has
// no ports) or IPv6 (TCP as the first next header), and nothing else.
// What it drops never crosses into user space, so a busy host's other
// traffic costs the reader nothing.
//
// loIndex is the loopback interface's index (0: none). A socket on every
// interface ("any") sees each loopback packet twice, going out and coming
// in; the program drops the outgoing copy, as tcpdump does.
func portFilter(ports []uint16, loIndex int) ([]bpf.RawInstruction, error) {
	if len(ports) == 0 || len(ports) > 16 {
		return nil, fmt.Errorf("a live capture filters 1 to 16 ports, not %d", len(ports))
	}
	var a asm
	if loIndex > 0 {
		a.op(bpf.LoadExtension{Num: bpf.ExtInterfaceIndex})
		a.jump(bpf.JumpEqual, uint32(loIndex), "", "ip")
		a.op(bpf.LoadExtension{Num: bpf.ExtType})
		a.jump(bpf.JumpEqual, 4, "drop", "") // PACKET_OUTGOING
	}
	a.label("ip")
	a.op(bpf.LoadAbsolute{Off: 0, Size: 1})
	a.op(bpf.ALUOpConstant{Op: bpf.ALUOpShiftRight, Val: 4})
	a.jump(bpf.JumpEqual, 4, "v4", "")
	a.jump(bpf.JumpEqual, 6, "v6", "drop")

	a.label("v4")
	a.op(bpf.LoadAbsolute{Off: 9, Size: 1})
	a.jump(bpf.JumpEqual, 6, "", "drop")
	a.op(bpf.LoadAbsolute{Off: 6, Size: 2})
	a.jump(bpf.JumpBitsSet, 0x1fff, "drop", "")
	a.op(bpf.LoadMemShift{Off: 0}) // X = the IPv4 header's length
	for _, off := range []uint32{0, 2} {
		a.op(bpf.LoadIndirect{Off: off, Size: 2})
		for _, p := range ports {
			a.jump(bpf.JumpEqual, uint32(p), "pass", "")
		}
	}
	a.goTo("drop")

	a.label("v6")
	a.op(bpf.LoadAbsolute{Off: 6, Size: 1})
	a.jump(bpf.JumpEqual, 6, "", "drop")
	for _, off := range []uint32{40, 42} {
		a.op(bpf.LoadAbsolute{Off: off, Size: 2})
		for _, p := range ports {
			a.jump(bpf.JumpEqual, uint32(p), "pass", "")
		}
	}
	a.label("drop")
	a.op(bpf.RetConstant{Val: 0})
	a.label("pass")
	a.op(bpf.RetConstant{Val: 1 << 18})
	return a.assemble()
}

// asm assembles a BPF program whose jumps name labels ("" is the next
// instruction).
type asm struct {
	ins    []bpf.Instruction
	jumps  map[int][2]string
	labels map[string]int
}

func (a *asm) op(i bpf.Instruction) { a.ins = append(a.ins, i) }

func (a *asm) label(name string) {
	if a.labels == nil {
		a.labels = map[string]int{}
	}
	a.labels[name] = len(a.ins)
}

func (a *asm) jump(cond bpf.JumpTest, val uint32, ifTrue, ifFalse string) {
	a.refer(ifTrue, ifFalse)
	a.op(bpf.JumpIf{Cond: cond, Val: val})
}

func (a *asm) goTo(label string) {
	a.refer(label, "")
	a.op(bpf.Jump{})
}

// refer notes the labels the next instruction jumps to.
func (a *asm) refer(ifTrue, ifFalse string) {
	if a.jumps == nil {
		a.jumps = map[int][2]string{}
	}
	a.jumps[len(a.ins)] = [2]string{ifTrue, ifFalse}
}

func (a *asm) assemble() ([]bpf.RawInstruction, error) {
	// skip is how many instructions a jump at at passes over to reach
	// label to ("": none, the next instruction).
	skip := func(at int, to string, most int) (int, error) {
		if to == "" {
			return 0, nil
		}
		n, ok := a.labels[to]
		if !ok || n <= at || n-at-1 > most {
			return 0, fmt.Errorf("bpf: jump from %d to %q out of reach", at, to)
		}
		return n - at - 1, nil
	}
	for at, to := range a.jumps {
		switch j := a.ins[at].(type) {
		case bpf.Jump:
			n, err := skip(at, to[0], 1<<31)
			if err != nil {
				return nil, err
			}
			a.ins[at] = bpf.Jump{Skip: uint32(n)}
		case bpf.JumpIf:
			t, err := skip(at, to[0], 255)
			if err != nil {
				return nil, err
			}
			f, err := skip(at, to[1], 255)
			if err != nil {
				return nil, err
			}
			j.SkipTrue, j.SkipFalse = uint8(t), uint8(f)
			a.ins[at] = j
		}
	}
	return bpf.Assemble(a.ins)
}
