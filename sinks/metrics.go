package sinks

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ttl-archiver/archiver/internal/promreg"
)

// metrics are the sinks' own figures, labelled by sink name. The consumer
// counts writes, failures and latency per sink; these say what happens
// inside: bytes and objects written, retries, what is buffered.
type metrics struct {
	bytes    *prometheus.CounterVec
	objects  *prometheus.CounterVec
	retries  *prometheus.CounterVec
	stalls   *prometheus.CounterVec
	buffered *prometheus.GaugeVec
}

type sinkMetrics struct {
	bytes, objects, retries, stalls prometheus.Counter
	buffered                        prometheus.Gauge
}

func newSinkMetrics(reg prometheus.Registerer, sink string) sinkMetrics {
	m := metrics{
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "archiver_sink_bytes_total", Help: "Bytes a sink wrote to its destination (after compression).",
		}, []string{"sink"}),
		objects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "archiver_sink_objects_total", Help: "Objects (S3), messages (NATS) or file appends a sink made durable.",
		}, []string{"sink"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "archiver_sink_retries_total", Help: "Attempts a sink repeated after a retryable failure.",
		}, []string{"sink"}),
		stalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "archiver_sink_stalls_total", Help: "Writes a sink had to start again because its destination had not yet acknowledged enough earlier ones (NATS: the publish window was full).",
		}, []string{"sink"}),
		buffered: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "archiver_sink_buffered_bytes", Help: "Bytes a sink holds that are not yet acknowledged.",
		}, []string{"sink"}),
	}
	if reg != nil {
		m.bytes = promreg.Register(reg, m.bytes)
		m.objects = promreg.Register(reg, m.objects)
		m.retries = promreg.Register(reg, m.retries)
		m.stalls = promreg.Register(reg, m.stalls)
		m.buffered = promreg.Register(reg, m.buffered)
	}
	return sinkMetrics{
		bytes:    m.bytes.WithLabelValues(sink),
		objects:  m.objects.WithLabelValues(sink),
		retries:  m.retries.WithLabelValues(sink),
		stalls:   m.stalls.WithLabelValues(sink),
		buffered: m.buffered.WithLabelValues(sink),
	}
}
