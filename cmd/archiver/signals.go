package main

import (
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// abandoned says what a forced stop leaves, read from the process's
// metrics: the records read and not covered by a saved checkpoint (the
// next start reads them again from the stream, so nothing is lost while
// the stream holds them) and the bytes each sink held unflushed.
func abandoned(g prometheus.Gatherer) string {
	mfs, err := g.Gather()
	if err != nil {
		return "what was not flushed is unknown: " + err.Error()
	}
	var records float64
	shards := 0
	var held []string
	for _, mf := range mfs {
		switch mf.GetName() {
		case "archiver_checkpoint_lag_records":
			for _, m := range mf.GetMetric() {
				if v := m.GetGauge().GetValue(); v > 0 {
					records += v
					shards++
				}
			}
		case "archiver_sink_buffered_bytes":
			for _, m := range mf.GetMetric() {
				if v := m.GetGauge().GetValue(); v > 0 {
					held = append(held, fmt.Sprintf("%s %.0f bytes", labelValue(m, "sink"), v))
				}
			}
		}
	}
	out := fmt.Sprintf("not checkpointed: %.0f records in %d shards (read again from the stream on the next start)", records, shards)
	if len(held) > 0 {
		out += "; unflushed in sinks: " + strings.Join(held, ", ")
	}
	return out
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
