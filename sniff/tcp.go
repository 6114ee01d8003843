package sniff

import (
	"slices"
	"time"
)

// half reassembles one direction of a TCP connection: it hands the bytes
// on in sequence order, once, and says where bytes are missing.
//
// A capture misses bytes when the capture tool dropped packets (a full
// buffer), when a file was cut or filtered, or when a connection began
// before the capture. Bytes are known missing when the peer acknowledged
// them (it received what the capture did not see) and the other side has
// answered since, when more than maxPending bytes wait behind a hole, or
// at the capture's end. The peer's acknowledgement alone is not enough:
// some captures write a packet after the acknowledgement of it.
//
// A connection the capture joined starts each direction at the first of
// the peer's acknowledgements or segments seen, whichever comes first: a
// command the capture missed before the client's first segment is then
// seen missing, not skipped.
type half struct {
	started bool   // next is known
	next    uint32 // the next byte expected
	// fromAck: next is the peer's first acknowledgement, and nothing of
	// this direction was handed on or declared lost yet. A first segment
	// that begins before it was written after its acknowledgement: the
	// stream starts there instead.
	fromAck bool
	acked   uint32 // the peer acknowledged up to here (valid if ackSeen)
	ackSeen bool
	fin     bool
	pend    []pending // out of order, by sequence
	pendN   int
}

type pending struct {
	seq  uint32
	data []byte
	at   time.Time
}

// out is where a half hands its bytes.
type out interface {
	// data is bytes in order; fresh: they begin a segment (a client
	// command begins one).
	data(at time.Time, b []byte, fresh bool)
	// lost is n bytes missing before what comes next.
	lost(at time.Time, n uint32)
}

// maxPending bounds the bytes a half holds behind a hole.
const maxPending = 4 << 20

func after(a, b uint32) bool { return int32(a-b) > 0 }

// syn starts the stream at a SYN.
func (h *half) syn(seq uint32) {
	h.started, h.next, h.fin, h.fromAck = true, seq+1, false, false
	h.pend, h.pendN = h.pend[:0], 0
}

// ack notes the peer's acknowledgement.
func (h *half) ack(a uint32) {
	if !h.started {
		h.started, h.next, h.fromAck = true, a, true // a connection the capture joined
	}
	if !h.ackSeen || after(a, h.acked) {
		h.acked, h.ackSeen = a, true
	}
}

// segment takes a segment's payload. It reports whether every byte of
// it was seen before (a retransmission, or a packet captured twice).
func (h *half) segment(at time.Time, seq uint32, b []byte, o out) (again bool) {
	if !h.started {
		h.started, h.next = true, seq // a connection the capture joined
	}
	if len(b) == 0 {
		return false
	}
	if h.fromAck {
		h.fromAck = false
		if after(h.next, seq) {
			h.next = seq
		}
	}
	end := seq + uint32(len(b))
	switch {
	case !after(end, h.next):
		return true // all seen before
	case after(h.next, seq):
		b, seq = b[h.next-seq:], h.next // partly seen before
		o.data(at, b, false)
		h.next = end
	case seq == h.next:
		o.data(at, b, true)
		h.next = end
	default:
		h.hold(at, seq, b)
		if h.pendN > maxPending {
			h.skip(h.pend[0].at, o)
		}
	}
	h.drain(o)
	return false
}

func (h *half) hold(at time.Time, seq uint32, b []byte) {
	i, _ := slices.BinarySearchFunc(h.pend, seq, func(p pending, s uint32) int {
		switch {
		case after(p.seq, s):
			return 1
		case p.seq == s:
			return 0
		}
		return -1
	})
	if i < len(h.pend) && h.pend[i].seq == seq && len(h.pend[i].data) >= len(b) {
		return
	}
	h.pend = slices.Insert(h.pend, i, pending{seq: seq, data: append([]byte(nil), b...), at: at})
	h.pendN += len(b)
}

// drain hands on what is held once the hole before it is filled. A hole
// the peer acknowledged is not declared lost here: the packet may still
// come, written after its acknowledgement (settle, skip and finish
// declare it).
func (h *half) drain(o out) {
	for len(h.pend) > 0 {
		p := h.pend[0]
		end := p.seq + uint32(len(p.data))
		if after(p.seq, h.next) {
			return
		}
		h.pend = h.pend[1:]
		h.pendN -= len(p.data)
		if after(end, h.next) {
			o.data(p.at, p.data[h.next-p.seq:], p.seq == h.next)
			h.next = end
		}
	}
}

// skip declares lost the bytes before the first held segment.
func (h *half) skip(at time.Time, o out) {
	if len(h.pend) == 0 {
		return
	}
	h.fromAck = false
	o.lost(at, h.pend[0].seq-h.next)
	h.next = h.pend[0].seq
	h.drain(o)
}

// settle declares lost what the peer acknowledged and the capture never
// saw: the other side is about to be read past it.
func (h *half) settle(at time.Time, o out) {
	if !h.started || !h.ackSeen || h.fin {
		return
	}
	for len(h.pend) > 0 {
		if after(h.pend[0].seq, h.acked) {
			return
		}
		// What the hole held was sent before the segment held after it.
		h.skip(earliest(at, h.pend[0].at), o)
	}
	if after(h.acked, h.next) {
		h.fromAck = false
		o.lost(at, h.acked-h.next)
		h.next = h.acked
	}
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// finish declares lost every hole left at the capture's end.
func (h *half) finish(at time.Time, o out) {
	for len(h.pend) > 0 {
		h.skip(at, o)
	}
	h.settle(at, o)
}
