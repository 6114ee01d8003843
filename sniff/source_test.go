package sniff

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/tandemdb/tandem/store"
)

// exchange is a query and its answer on the connection from client port
// port (found open), at ms and ms+1 milliseconds.
type exchange struct {
	port uint16
	ms   int
}

// writePcap writes the exchanges into a pcap file, each connection's
// sequence numbers following on.
func writePcap(t *testing.T, path string, t0 time.Time, xs ...exchange) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := pcapgo.NewWriterNanos(f)
	if err := w.WriteFileHeader(65536, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	q, a := query("SELECT 1"), resultSet(autocommit, "1")
	for _, x := range xs {
		n := uint32(x.ms) // the exchanges of a connection come in order of time: numbered so
		for i, fr := range [][]byte{
			tcpFrame(x.port, 3306, 1000+n*uint32(len(q)), 9000+n*uint32(len(a)), flagsData, q),
			tcpFrame(3306, x.port, 9000+n*uint32(len(a)), 1000+(n+1)*uint32(len(q)), flagsData, a),
		} {
			ci := gopacket.CaptureInfo{Timestamp: t0.Add(time.Duration(x.ms+i) * time.Millisecond), CaptureLength: len(fr), Length: len(fr)}
			if err := w.WritePacket(ci, fr); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// Files read together end each connection where the capture stopped
// seeing it: a file taken on another interface that ended first, at that
// file's end; rotated files (one beginning after the other ended), at the
// last one's.
func TestFilesEndTheirConnectionsWhereTheyEnd(t *testing.T) {
	t0 := time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name string
		a, b []exchange
		want map[uint16]int // client port: its synthetic end, in ms
	}{
		{"two interfaces, one ending first", []exchange{{40001, 1}}, []exchange{{40002, 1}, {40002, 100}}, map[uint16]int{40001: 2, 40002: 101}},
		{"rotated files", []exchange{{40001, 1}}, []exchange{{40002, 50}, {40002, 100}}, map[uint16]int{40001: 101, 40002: 101}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			a, b := filepath.Join(dir, "a.pcap"), filepath.Join(dir, "b.pcap")
			writePcap(t, a, t0, c.a...)
			writePcap(t, b, t0, c.b...)
			var sink recSink
			d := New(Config{Ports: []uint16{3306}, Schema: "shop"}, &sink)
			if _, err := ReadFiles(context.Background(), []string{a, b}, d, nil); err != nil {
				t.Fatal(err)
			}
			// Sessions are numbered as first seen: the one of port 40001
			// first in both cases.
			got := map[uint16]int{}
			for _, r := range sink.recs {
				if r.Kind == store.KindQuit {
					if r.Flags != store.FlagOpenAtStop {
						t.Errorf("session %d ends with flags %#x", r.Session, r.Flags)
					}
					got[uint16(40000+r.Session)] = int(r.Start.Sub(t0) / time.Millisecond)
				}
			}
			if len(got) != len(c.want) {
				t.Fatalf("ends %v, want %v", got, c.want)
			}
			for port, ms := range c.want {
				if got[port] != ms {
					t.Errorf("port %d ends at %d ms, want %d (all: %v)", port, got[port], ms, got)
				}
			}
		})
	}
}
