package sweep

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ttl-archiver/archiver/internal/promreg"
)

// Reasons of archiver_sweep_skipped_total.
const (
	reasonExtended  = "ttl_extended"   // the conditional delete failed: the TTL moved (or the item changed)
	reasonGone      = "gone"           // the conditional delete failed: the item was already deleted
	reasonNotNumber = "ttl_not_number" // the TTL attribute is missing or not a Number: DynamoDB's TTL ignores it too
)

// metrics are the sweeper's collectors, curried to one table.
type metrics struct {
	deleted   prometheus.Counter
	skipped   *prometheus.CounterVec // by reason
	refiled   prometheus.Counter
	behind    prometheus.Gauge
	cursorAge prometheus.Gauge
	lag       prometheus.Observer
	throttles prometheus.Counter
	errors    prometheus.Counter
	passes    prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, table string) *metrics {
	counter := func(name, help string) prometheus.Counter {
		return promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"table"})).WithLabelValues(table)
	}
	gauge := func(name, help string) prometheus.Gauge {
		return promreg.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, []string{"table"})).WithLabelValues(table)
	}
	m := &metrics{
		deleted:   counter("archiver_sweep_deleted_total", "Items the sweeper deleted (conditional DeleteItem succeeded), by table."),
		refiled:   counter("archiver_sweep_refiled_total", "Items whose TTL lay outside their window, moved to the window of their TTL, by table."),
		behind:    gauge("archiver_sweep_windows_behind", "Windows between the sweeper's cursor and the window holding now, by table."),
		cursorAge: gauge("archiver_sweep_cursor_age_seconds", "Now minus the start of the cursor's window, by table."),
		throttles: counter("archiver_sweep_throttles_total", "DynamoDB calls of the sweeper that were throttled (each is retried), by table."),
		errors:    counter("archiver_sweep_errors_total", "DynamoDB calls of the sweeper that failed other than by throttling or a condition, by table."),
		passes:    counter("archiver_sweep_passes_total", "Passes the sweeper made, by table."),
	}
	m.skipped = promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "archiver_sweep_skipped_total", Help: "Due items the sweeper did not delete, by table and reason: ttl_extended (the conditional delete failed), gone (already deleted), ttl_not_number (left to DynamoDB's TTL).",
	}, []string{"table", "reason"})).MustCurryWith(prometheus.Labels{"table": table})
	m.lag = promreg.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "archiver_sweep_lag_seconds", Help: "For items the sweeper deleted: deletion time minus the TTL value, by table.",
		Buckets: []float64{0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 900, 3600, 6 * 3600, 24 * 3600},
	}, []string{"table"})).WithLabelValues(table)
	return m
}
