// Package sinkmetrics holds the sinks' own metrics, labelled by sink name:
// bytes and objects written, retries, stalls, repairs, what is buffered.
package sinkmetrics

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
	repairs  *prometheus.CounterVec
	buffered *prometheus.GaugeVec
}

// Sink is one sink's series of the sinks' metrics.
type Sink struct {
	Bytes, Objects, Retries, Stalls, Repairs prometheus.Counter
	Buffered                                 prometheus.Gauge
}

// New returns sink's series, registering the metrics with reg (none when
// reg is nil; several sinks may share one reg).
func New(reg prometheus.Registerer, sink string) Sink {
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
		repairs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "archiver_sink_repairs_total", Help: "Torn tails a sink cut off what a writer killed mid-append left (file sink: kept in DIR/_archiver/torn/; their records are delivered again).",
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
		m.repairs = promreg.Register(reg, m.repairs)
		m.buffered = promreg.Register(reg, m.buffered)
	}
	return Sink{
		Bytes:    m.bytes.WithLabelValues(sink),
		Objects:  m.objects.WithLabelValues(sink),
		Retries:  m.retries.WithLabelValues(sink),
		Stalls:   m.stalls.WithLabelValues(sink),
		Repairs:  m.repairs.WithLabelValues(sink),
		Buffered: m.buffered.WithLabelValues(sink),
	}
}
