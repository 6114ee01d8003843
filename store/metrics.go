package store

import (
	"github.com/cockroachdb/pebble/v2"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the capture writer's Prometheus metrics. Several writers may
// share one Metrics.
type Metrics struct {
	appended prometheus.Counter
	dropped  prometheus.Counter
	bytes    prometheus.Counter
	commit   prometheus.Histogram
}

// NewMetrics creates the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		appended: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tandem_store_records_appended_total",
			Help: "Records accepted by capture writers.",
		}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tandem_store_records_dropped_total",
			Help: "Records dropped because the capture writer was behind.",
		}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tandem_store_record_bytes_total",
			Help: "Encoded bytes (key and value) of the accepted records.",
		}),
		commit: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "tandem_store_commit_duration_seconds",
			Help:    "Time to commit (and sync) one batch of records.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
	}
	reg.MustRegister(m.appended, m.dropped, m.bytes, m.commit)
	return m
}

// Collector returns a Prometheus collector of the writer's health: the
// capture queue (records appended but not yet committed, and their bytes),
// the capture's state (recording, or stopped and why), and Pebble's own
// (WAL, memtables, flushes, compactions, disk usage, read amplification).
// Register it with the registry that serves the writer's process.
func (w *Writer) Collector() prometheus.Collector { return writerCollector{w} }

type writerCollector struct{ w *Writer }

var (
	descQueue     = prometheus.NewDesc("tandem_capture_queue_records", "Records accepted by the capture writer and not yet committed.", nil, nil)
	descPending   = prometheus.NewDesc("tandem_capture_pending_bytes", "Encoded bytes of the records not yet committed (the writer blocks or drops past its budget).", nil, nil)
	descState     = prometheus.NewDesc("tandem_capture_state", "1 for the capture's current state: recording, stopped (its budget or free-space floor; reason says why), failed (the store could not write: reason says why) or closed; relaying goes on in every state.", []string{"state", "reason"}, nil)
	descWALBytes  = prometheus.NewDesc("tandem_store_wal_bytes_total", "Bytes written to the capture's write-ahead log.", nil, nil)
	descWALSize   = prometheus.NewDesc("tandem_store_wal_size_bytes", "Size of the capture's live write-ahead log files.", nil, nil)
	descMemtable  = prometheus.NewDesc("tandem_pebble_memtable_bytes", "Bytes allocated by the capture store's memtables.", nil, nil)
	descFlushes   = prometheus.NewDesc("tandem_pebble_flushes_total", "Memtable flushes of the capture store.", nil, nil)
	descCompacts  = prometheus.NewDesc("tandem_pebble_compactions_total", "Compactions of the capture store.", nil, nil)
	descDisk      = prometheus.NewDesc("tandem_pebble_disk_usage_bytes", "Disk space the capture store uses (tables, WAL, manifests).", nil, nil)
	descReadAmp   = prometheus.NewDesc("tandem_pebble_read_amplification", "Sublevels and levels a read may have to consult.", nil, nil)
	writerDescAll = []*prometheus.Desc{descQueue, descPending, descState, descWALBytes, descWALSize, descMemtable, descFlushes, descCompacts, descDisk, descReadAmp}
)

func (c writerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range writerDescAll {
		ch <- d
	}
}

func (c writerCollector) Collect(ch chan<- prometheus.Metric) {
	w := c.w
	st := w.Stats()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(descQueue, float64(st.Appended-st.Committed))
	gauge(descPending, float64(st.PendingBytes))
	w.mu.Lock()
	closed, err := w.mu.closed, w.mu.err
	w.mu.Unlock()
	// Pebble's metrics, read while the writer cannot close the store, and
	// never from a failed one: its parked goroutines hold its locks.
	var m *pebble.Metrics
	w.dbMu.RLock()
	if !w.dbClosed && !w.isFailed() {
		m = w.db.Metrics()
	}
	w.dbMu.RUnlock()
	switch {
	case err != nil:
		reason := err.Error()
		if len(reason) > 160 {
			reason = reason[:160]
		}
		state := "stopped"
		if w.isFailed() {
			state = "failed"
		}
		gauge(descState, 1, state, reason)
	case closed:
		gauge(descState, 1, "closed", "")
	default:
		gauge(descState, 1, "recording", "")
	}
	if m == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(descWALBytes, prometheus.CounterValue, float64(m.WAL.BytesWritten))
	gauge(descWALSize, float64(m.WAL.Size))
	gauge(descMemtable, float64(m.MemTable.Size))
	ch <- prometheus.MustNewConstMetric(descFlushes, prometheus.CounterValue, float64(m.Flush.Count))
	ch <- prometheus.MustNewConstMetric(descCompacts, prometheus.CounterValue, float64(m.Compact.Count))
	gauge(descDisk, float64(m.DiskSpaceUsage()))
	gauge(descReadAmp, float64(m.ReadAmp()))
}
