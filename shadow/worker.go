package shadow

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/rpc"
	"os"
	"path/filepath"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/tandemdb/tandem/store"
	"github.com/tandemdb/tandem/targets"
)

// mirrorMemTableSize is the memtable size of a worker's copy of the feed.
// A capture's 64 MiB (for a proxy that must never wait on its disk) made
// each shadow worker hold up to two of them: 230 MB after 40 s of sysbench
// oltp_write_only at 970 transactions a second. The mirror may wait on
// its disk for a moment: what waits is the worker's feed, which the
// proxy's feeder reads from the capture, not the clients.
const mirrorMemTableSize = 8 << 20

// Work is a shadow's worker process (WorkerCommand): it serves the
// proxy's calls on ctl and reads the capture's records from feed, until
// the proxy closes ctl. Its log lines go to log.
func Work(ctl net.Conn, feed io.Reader, log *slog.Logger) error {
	w := &worker{log: log, feed: feed, reg: prometheus.NewRegistry(), fedAll: make(chan struct{}), abort: make(chan struct{})}
	srv := rpc.NewServer()
	if err := srv.RegisterName("Worker", w); err != nil {
		return err
	}
	srv.ServeConn(ctl) // until the proxy closes it (or dies)
	w.abortOnce.Do(func() { close(w.abort) })
	return w.close()
}

type worker struct {
	log  *slog.Logger
	feed io.Reader
	reg  *prometheus.Registry

	mu        sync.Mutex
	args      WorkerStart
	mirror    *store.Writer
	shadows   *local
	fedAll    chan struct{} // the feed ended
	abort     chan struct{}
	abortOnce sync.Once
	finished  bool
}

// Start creates the mirror log, starts the shadow on it and begins
// reading the feed.
func (w *worker) Start(args WorkerStart, reply *string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mirror != nil {
		return errors.New("shadow worker: started twice")
	}
	if err := os.MkdirAll(filepath.Dir(args.RunDir), 0o755); err != nil {
		return fmt.Errorf("shadow run directory: %w", err)
	}
	// The mirror is a working copy, removed at the end: no fsync (a crash
	// of the machine ends the shadow anyway); the capture's free-space
	// floor, so that it never takes the capture's last bytes; memtables of
	// mirrorMemTableSize.
	m, err := store.Create(args.Mirror, store.WriterOptions{Source: args.Source, NoSync: true, Logger: w.log, MinFreeBytes: args.Config.MinFreeBytes, Key: args.Config.Key,
		MemTableSize: mirrorMemTableSize})
	if err != nil {
		return fmt.Errorf("shadow's copy of the capture: %w", err)
	}
	sh, err := args.Config.startLocal([]targets.Target{args.Target}, args.Capture, filepath.Dir(args.RunDir), m.Live(), w.reg, w.log)
	if err != nil {
		m.Close()
		os.RemoveAll(args.Mirror)
		return err
	}
	w.args, w.mirror, w.shadows = args, m, sh
	go w.read()
	*reply = "started"
	return nil
}

// read appends the fed records to the mirror, in order, until the end
// frame (or the proxy is gone).
func (w *worker) read() {
	defer close(w.fedAll)
	br := bufio.NewReaderSize(w.feed, 256<<10)
	var rec store.Record
	var buf []byte
	fail := func(err error) {
		why := err.Error()
		w.shadows.feedLost.Store(&why)
		w.log.Error("shadow worker: the feed broke off; replaying what arrived", "shadow", w.args.Target.Name, "err", err)
	}
	for {
		seq, err := binary.ReadUvarint(br)
		if err != nil {
			fail(fmt.Errorf("reading the feed: %w (did the proxy end?)", err))
			return
		}
		if seq == 0 {
			if err := w.mirror.Flush(); err != nil {
				fail(err)
			}
			return
		}
		n, err := binary.ReadUvarint(br)
		if err == nil && n > 1<<30 {
			err = fmt.Errorf("a frame of %d bytes", n)
		}
		if err != nil {
			fail(fmt.Errorf("reading the feed: %w", err))
			return
		}
		if uint64(cap(buf)) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(br, buf); err != nil {
			fail(fmt.Errorf("reading the feed: %w", err))
			return
		}
		rec = store.Record{}
		if err := store.DecodeRecord(buf, w.args.Base, &rec); err != nil {
			fail(fmt.Errorf("record seq %d: %w", seq, err))
			return
		}
		got, err := w.mirror.Append(&rec)
		if err == nil && got != seq {
			err = fmt.Errorf("the feed's record %d became %d in the copy: records were lost on the way", seq, got)
		}
		if err != nil {
			fail(err)
			return
		}
	}
}

// Gather returns the worker's metrics, protobuf-delimited.
func (w *worker) Gather(_ struct{}, reply *[]byte) error {
	mfs, err := w.reg.Gather()
	if err != nil {
		return err
	}
	var b bytes.Buffer
	enc := expfmt.NewEncoder(&b, expfmt.NewFormat(expfmt.TypeProtoDelim))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return err
		}
	}
	*reply = b.Bytes()
	return nil
}

// Finish waits for the end of the feed, lets the shadow replay all of
// it (until Abort), and returns its summary line.
func (w *worker) Finish(args WorkerFinish, reply *WorkerEnd) error {
	w.mu.Lock()
	sh := w.shadows
	w.mu.Unlock()
	if sh == nil {
		return errors.New("shadow worker: not started")
	}
	select {
	case <-w.fedAll:
	case <-w.abort:
	}
	var out bytes.Buffer
	if err := sh.stop(w.abort, &out, args.Bypassed); err != nil {
		reply.Err = err.Error()
	}
	reply.Line = out.String()
	w.mu.Lock()
	w.finished = true
	w.mu.Unlock()
	return nil
}

// Abort ends the shadow at once (the proxy's drain timeout).
func (w *worker) Abort(_ struct{}, _ *struct{}) error {
	w.abortOnce.Do(func() { close(w.abort) })
	return nil
}

// close ends what is still running and removes the mirror.
func (w *worker) close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mirror == nil {
		return nil
	}
	if !w.finished {
		// The proxy went away without Finish: end the shadow, keep its run.
		<-w.fedAll
		w.shadows.stop(w.abort, io.Discard, nil)
	}
	err := w.mirror.Close()
	if rmErr := os.RemoveAll(w.args.Mirror); rmErr != nil {
		err = errors.Join(err, rmErr)
	}
	return err
}
