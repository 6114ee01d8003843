package wire

import (
	"bytes"
	"errors"
	"net"
	"testing"
)

// ReadPacket joins continuation frames only up to MaxPacket.
func TestReadPacketCap(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go func() {
		w := NewConn(a)
		big := bytes.Repeat([]byte{'x'}, MaxPayload)
		for i := range 3 { // 48 MiB announced, in full frames
			if w.WriteFrame(byte(i), big) != nil || w.Flush() != nil {
				return
			}
		}
	}()
	r := NewConn(b)
	r.MaxPacket = 20 << 20
	_, _, err := r.ReadPacket()
	if !errors.Is(err, ErrPacketTooLarge) {
		t.Fatalf("a 48 MiB packet under a 20 MiB cap: %v", err)
	}
}
