// Package ops holds what every long-running archiver process needs around its
// business logic besides its logger (internal/logging): the Prometheus
// registry, the metrics and health HTTP server with pluggable readiness
// checks, the CloudWatch embedded-metric-format exporter and the memory
// limit.
package ops

import (
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// NewRegistry returns the registry every component of one process registers
// its metrics on, with the Go runtime and process collectors and an
// archiver_build_info gauge (always 1) labelled with version and Go version
// already in it.
func NewRegistry(version string) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector())
	reg.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	bi := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "archiver_build_info",
		Help:        "Always 1; labels carry the archiver's version and the Go version it was built with.",
		ConstLabels: prometheus.Labels{"version": version, "goversion": runtime.Version()},
	})
	bi.Set(1)
	reg.MustRegister(bi)
	return reg
}

// Version returns v when set (the release build sets it with -ldflags),
// else the module version recorded in the binary, else "dev".
func Version(v string) string {
	if v != "" {
		return v
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
