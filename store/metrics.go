package store

import "github.com/prometheus/client_golang/prometheus"

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
