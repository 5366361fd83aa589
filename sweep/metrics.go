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
	reasonTooOld    = "ttl_too_old"    // the TTL lies more than five years before now (0 and negative ones too): DynamoDB's TTL ignores it too
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

	clockSkew   prometheus.Gauge
	clockPaused prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, table string) *metrics {
	counter := func(o prometheus.CounterOpts) prometheus.Counter {
		return promreg.Register(reg, prometheus.NewCounterVec(o, []string{"table"})).WithLabelValues(table)
	}
	gauge := func(o prometheus.GaugeOpts) prometheus.Gauge {
		return promreg.Register(reg, prometheus.NewGaugeVec(o, []string{"table"})).WithLabelValues(table)
	}
	return &metrics{
		deleted: counter(prometheus.CounterOpts{
			Name: "archiver_sweep_deleted_total", Help: "Items the sweeper deleted (its conditional DeleteItem succeeded), by table.",
		}),
		skipped: promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "archiver_sweep_skipped_total", Help: "Items the sweeper found due but did not delete, by table and reason: ttl_extended (the conditional delete failed), gone (already deleted), ttl_not_number and ttl_too_old (a TTL more than five years before now, 0 and negative ones included; left to DynamoDB's TTL, which ignores both).",
		}, []string{"table", "reason"})).MustCurryWith(prometheus.Labels{"table": table}),
		refiled: counter(prometheus.CounterOpts{
			Name: "archiver_sweep_refiled_total", Help: "Items of a closing window whose TTL lay outside it, moved to the window of their TTL, by table.",
		}),
		behind: gauge(prometheus.GaugeOpts{
			Name: "archiver_sweep_windows_behind", Help: "Windows between the sweeper's cursor and the window holding now, by table.",
		}),
		cursorAge: gauge(prometheus.GaugeOpts{
			Name: "archiver_sweep_cursor_age_seconds", Help: "Now minus the start of the cursor's window, by table.",
		}),
		lag: promreg.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "archiver_sweep_lag_seconds", Help: "For items the sweeper deleted: deletion time minus the TTL value, by table.",
			Buckets: []float64{0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 900, 3600, 6 * 3600, 24 * 3600},
		}, []string{"table"})).WithLabelValues(table),
		throttles: counter(prometheus.CounterOpts{
			Name: "archiver_sweep_throttles_total", Help: "DynamoDB calls of the sweeper that were throttled (each is retried), by table.",
		}),
		errors: counter(prometheus.CounterOpts{
			Name: "archiver_sweep_errors_total", Help: "DynamoDB calls of the sweeper that failed other than by throttling or a condition (retried, or left to the next pass), by table.",
		}),
		passes: counter(prometheus.CounterOpts{
			Name: "archiver_sweep_passes_total", Help: "Passes the sweeper made, by table.",
		}),
		clockSkew: gauge(prometheus.GaugeOpts{
			Name: "archiver_sweep_clock_skew_seconds", Help: "DynamoDB's clock (the Date header of its latest response) minus the sweeper's, by table; uncertain by up to a second.",
		}),
		clockPaused: counter(prometheus.CounterOpts{
			Name: "archiver_sweep_clock_paused_total", Help: "Passes that held their deletes back because the sweeper's clock disagreed with DynamoDB's by more than --max-clock-skew, by table.",
		}),
	}
}
