package lease

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

type leaseMetrics struct {
	held                  prometheus.Gauge
	takes, steals, losses prometheus.Counter
	renewals              prometheus.Counter
	renewFailures         prometheus.Counter
	throttles             prometheus.Counter
}

func newLeaseMetrics(reg prometheus.Registerer) (*leaseMetrics, error) {
	m := &leaseMetrics{
		held: prometheus.NewGauge(prometheus.GaugeOpts{Name: "archiver_leases_held",
			Help: "Shard leases this worker holds."}),
		takes: prometheus.NewCounter(prometheus.CounterOpts{Name: "archiver_lease_takes_total",
			Help: "Free, expired or new shard leases this worker took."}),
		steals: prometheus.NewCounter(prometheus.CounterOpts{Name: "archiver_lease_steals_total",
			Help: "Leases this worker received from another worker by hand-off (balancing)."}),
		losses: prometheus.NewCounter(prometheus.CounterOpts{Name: "archiver_lease_losses_total",
			Help: "Leases this worker found taken by another worker."}),
		renewals: prometheus.NewCounter(prometheus.CounterOpts{Name: "archiver_lease_renewals_total",
			Help: "Lease renewals that succeeded."}),
		renewFailures: prometheus.NewCounter(prometheus.CounterOpts{Name: "archiver_lease_renew_failures_total",
			Help: "Lease renewals that failed (throttling, errors); the lease is renewed again or given up before it expires."}),
		throttles: prometheus.NewCounter(prometheus.CounterOpts{Name: "archiver_lease_table_retries_total",
			Help: "Lease table requests retried after throttling or a transient error."}),
	}
	if reg == nil {
		return m, nil
	}
	var regErr error
	register := func(c prometheus.Collector) prometheus.Collector {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				return are.ExistingCollector
			}
			regErr = err
		}
		return c
	}
	m.held = register(m.held).(prometheus.Gauge)
	m.takes = register(m.takes).(prometheus.Counter)
	m.steals = register(m.steals).(prometheus.Counter)
	m.losses = register(m.losses).(prometheus.Counter)
	m.renewals = register(m.renewals).(prometheus.Counter)
	m.renewFailures = register(m.renewFailures).(prometheus.Counter)
	m.throttles = register(m.throttles).(prometheus.Counter)
	if regErr != nil {
		return nil, fmt.Errorf("checkpoint: register lease metrics: %w", regErr)
	}
	return m, nil
}
