package sniff

import (
	"bufio"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/afpacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// frames is one source of captured frames.
type frames interface {
	ZeroCopyReadPacketData() ([]byte, gopacket.CaptureInfo, error)
}

// file is one capture file being read.
type file struct {
	path string
	f    *os.File
	src  frames
	lt   func(ci gopacket.CaptureInfo) layers.LinkType
	// The frame read and not yet decoded.
	data []byte
	ci   gopacket.CaptureInfo
	n    uint64 // frames read
	idx  int    // its place in Decoder.files
}

// openFile opens a pcap or pcapng file (by its magic number).
func openFile(path string) (*file, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(f, 1<<20)
	magic, err := br.Peek(4)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: not a packet capture (too short to hold a header)", path)
	}
	fl := &file{path: path, f: f}
	switch {
	case magic[0] == 0x0a && magic[1] == 0x0d && magic[2] == 0x0d && magic[3] == 0x0a:
		r, err := pcapgo.NewNgReader(br, pcapgo.NgReaderOptions{WantMixedLinkType: true, SkipUnknownVersion: true})
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: pcapng header: %w", path, err)
		}
		fl.src = r
		first := r.LinkType()
		fl.lt = func(ci gopacket.CaptureInfo) layers.LinkType {
			if len(ci.AncillaryData) > 0 {
				if lt, ok := ci.AncillaryData[0].(layers.LinkType); ok {
					return lt
				}
			}
			return first
		}
	default:
		r, err := pcapgo.NewReader(br)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: not a pcap or pcapng file (%v); write one with tcpdump -w", path, err)
		}
		fl.src = r
		lt := r.LinkType()
		fl.lt = func(gopacket.CaptureInfo) layers.LinkType { return lt }
	}
	return fl, nil
}

// read reads the file's next frame; false at its end (err says why, if
// not a clean end).
func (fl *file) read() (bool, error) {
	data, ci, err := fl.src.ZeroCopyReadPacketData()
	switch {
	case err == nil:
		fl.data, fl.ci = data, ci
		fl.n++
		return true, nil
	case errors.Is(err, io.EOF):
		return false, nil
	case errors.Is(err, io.ErrUnexpectedEOF):
		return false, errCut
	}
	return false, err
}

// errCut: a file ends inside a packet (the capture was killed while it
// wrote, or the file was cut).
var errCut = errors.New("ends inside a packet (cut short)")

// fileHeap orders the files by their next frame's time.
type fileHeap []*file

func (h fileHeap) Len() int           { return len(h) }
func (h fileHeap) Less(i, j int) bool { return h[i].ci.Timestamp.Before(h[j].ci.Timestamp) }
func (h fileHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *fileHeap) Push(x any)        { *h = append(*h, x.(*file)) }
func (h *fileHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// FileNote is something reading a file met that is not an error: a file
// cut inside a packet.
type FileNote struct {
	Path string
	Note string
}

// ReadFiles reads the frames of every file in time order (files taken at
// the same time on several interfaces merge; rotated files follow each
// other) into d, and ends what is still open at the end: a connection
// where the files it was seen in (and those that followed them) ended,
// not where a file of another interface taken for longer did. A file cut
// inside a packet is read up to there and noted; any other read error
// (a damaged record) stops with the file named, what was read ended
// there. progress, if set, is called about once a
// second with the frames read.
func ReadFiles(ctx context.Context, paths []string, d *Decoder, progress func(frames uint64)) ([]FileNote, error) {
	var h fileHeap
	defer func() {
		for _, fl := range h {
			fl.f.Close()
		}
	}()
	var notes []FileNote
	for _, p := range paths {
		fl, err := openFile(p)
		if err != nil {
			return nil, err
		}
		ok, err := fl.read()
		switch {
		case err == errCut:
			notes = append(notes, FileNote{p, "ends inside its first packet: nothing read"})
			fl.f.Close()
			continue
		case err != nil:
			fl.f.Close()
			return nil, fmt.Errorf("%s: %w", p, err)
		case !ok:
			notes = append(notes, FileNote{p, "holds no packets"})
			fl.f.Close()
			continue
		}
		fl.idx = len(d.files)
		d.files = append(d.files, span{fl.ci.Timestamp, fl.ci.Timestamp})
		h = append(h, fl)
	}
	heap.Init(&h)
	var total uint64
	lastReport := time.Now()
	for h.Len() > 0 {
		fl := h[0]
		if sp := &d.files[fl.idx]; fl.ci.Timestamp.After(sp.last) {
			sp.last = fl.ci.Timestamp
		}
		d.src = fl.idx
		d.Packet(fl.ci.Timestamp, fl.lt(fl.ci), fl.data, fl.ci.Length)
		total++
		if total%4096 == 0 {
			if err := ctx.Err(); err != nil {
				d.Finish()
				return notes, err
			}
			if progress != nil && time.Since(lastReport) >= time.Second {
				progress(total)
				lastReport = time.Now()
			}
		}
		ok, err := fl.read()
		switch {
		case err == errCut:
			notes = append(notes, FileNote{fl.path, fmt.Sprintf("ends inside a packet after %d packets (cut short): read up to there", fl.n)})
		case err != nil:
			// What was read stays, its sessions ended here: a damaged
			// record's lengths leave nothing to find the next one by.
			d.Finish()
			return notes, fmt.Errorf("%s: after %d packets: %w", fl.path, fl.n, err)
		}
		if ok {
			heap.Fix(&h, 0)
			continue
		}
		fl.f.Close()
		heap.Pop(&h)
	}
	d.Finish()
	return notes, nil
}

// LiveSource is a network interface opened for reading (OpenLive).
type LiveSource struct {
	h     *afpacket.TPacket
	iface string
	start time.Time
}

// OpenLive opens a network interface ("any": every interface) for Read:
// a memory-mapped ring of ringMB MiB (AF_PACKET, TPACKET_V3) in cooked
// mode (frames from their IP header, whatever the link), behind a kernel
// filter that passes only TCP to or from ports and drops loopback's
// outgoing copies. The kernel drops what does not fit while the reader is
// behind, which shows as gaps. It needs CAP_NET_RAW (root, or setcap
// cap_net_raw+ep on the binary); the error says so. Opening before
// anything else is made lets a command fail on a wrong interface, a
// missing capability or a ring the kernel refuses without leaving an
// empty capture behind.
func OpenLive(iface string, ringMB int, ports []uint16) (*LiveSource, error) {
	bind := iface
	if iface == "any" {
		bind = ""
	} else if _, err := net.InterfaceByName(iface); err != nil {
		return nil, fmt.Errorf("interface %q: %w (ip link lists them; \"any\" reads every one)", iface, err)
	}
	filter, err := portFilter(ports, loopbackIndex())
	if err != nil {
		return nil, err
	}
	const block = 1 << 20
	h, err := afpacket.NewTPacket(afpacket.OptInterface(bind), afpacket.SocketDgram, afpacket.OptFrameSize(1<<16), afpacket.OptBlockSize(block),
		afpacket.OptNumBlocks(max(ringMB, 4)), afpacket.OptPollTimeout(200*time.Millisecond), afpacket.OptBlockTimeout(10*time.Millisecond))
	if err != nil {
		if errors.Is(err, os.ErrPermission) || isPerm(err) {
			return nil, fmt.Errorf("capturing on %s needs CAP_NET_RAW: run as root, or give the binary the capability (setcap cap_net_raw+ep %s): %w", iface, os.Args[0], err)
		}
		if strings.Contains(err.Error(), "packet_rx_ring") {
			return nil, fmt.Errorf("capture on interface %s: the kernel refused a packet ring of %d MiB (--ring-mb; the default is 64): %w", iface, max(ringMB, 4), err)
		}
		return nil, fmt.Errorf("capture on interface %s: %w", iface, err)
	}
	if err := h.SetBPF(filter); err != nil {
		h.Close()
		return nil, fmt.Errorf("capture on interface %s: the port filter: %w", iface, err)
	}
	// The capture begins once the filter is in place: the ring may hold
	// frames of any kind taken before it.
	return &LiveSource{h: h, iface: iface, start: time.Now()}, nil
}

// Close releases the interface (Read does when it returns).
func (s *LiveSource) Close() { s.h.Close() }

// Read hands the interface's frames to d until ctx ends, then ends what
// is still open, and closes the source.
func (s *LiveSource) Read(ctx context.Context, d *Decoder, progress func(frames uint64)) error {
	h, iface := s.h, s.iface
	defer h.Close()
	var total uint64
	lastReport := time.Now()
	for ctx.Err() == nil {
		data, ci, err := h.ZeroCopyReadPacketData()
		switch {
		case errors.Is(err, afpacket.ErrTimeout) || errors.Is(err, afpacket.ErrPoll):
			continue
		case err != nil:
			d.Finish()
			return fmt.Errorf("capture on interface %s: %w", iface, err)
		}
		if ci.Timestamp.Before(s.start) {
			continue
		}
		d.Packet(ci.Timestamp, layers.LinkTypeRaw, data, ci.Length)
		total++
		if progress != nil && time.Since(lastReport) >= time.Second {
			progress(total)
			lastReport = time.Now()
		}
	}
	if _, v3, err := h.SocketStats(); err == nil && v3.Drops() > 0 {
		d.sample("gaps", fmt.Sprintf("the kernel dropped %d packets (the ring was full: a larger --ring-mb)", v3.Drops()))
	}
	d.Finish()
	return nil
}

// loopbackIndex is the loopback interface's index (0: none found).
func loopbackIndex() int {
	ifs, err := net.Interfaces()
	if err != nil {
		return 0
	}
	for _, i := range ifs {
		if i.Flags&net.FlagLoopback != 0 {
			return i.Index
		}
	}
	return 0
}

// isPerm reports whether err says the process may not open a packet
// socket.
func isPerm(err error) bool {
	s := err.Error()
	return strings.Contains(s, "operation not permitted") || strings.Contains(s, "permission denied")
}

// FirstTime is the time of a file's first packet (zero: it holds none).
func FirstTime(path string) (time.Time, error) {
	fl, err := openFile(path)
	if err != nil {
		return time.Time{}, err
	}
	defer fl.f.Close()
	if ok, err := fl.read(); err != nil && err != errCut {
		return time.Time{}, fmt.Errorf("%s: %w", path, err)
	} else if !ok {
		return time.Time{}, nil
	}
	return fl.ci.Timestamp, nil
}
