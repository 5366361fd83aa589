package ops

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// EMF writes the registry's archiver_* metrics (and the process CPU and
// memory figures) to W as CloudWatch embedded metric format documents, one
// JSON object per line, so CloudWatch Logs (awslogs) turns them into metrics
// without a Prometheus server. Counters are written as the increase since
// the previous export, gauges as their value, histograms and summaries as
// _count and _sum increases. Each label becomes a dimension, except the
// labels in emfCollapsed: series that differ only in those are merged into
// one document (gauges by their maximum, counters and histograms by the sum
// of their increases). Metrics in emfRollups are also published under the
// table dimension alone. Every document is one Write of one line, so W may
// be shared with a line-oriented logger.
type EMF struct {
	Gatherer  prometheus.Gatherer
	W         io.Writer
	Namespace string        // default "TTLArchiver"
	Interval  time.Duration // default 60s
	Now       func() time.Time

	mu   sync.Mutex
	prev map[string]float64
}

// Run exports every Interval until ctx ends, then exports once more so the
// last increments are not lost, and returns nil.
func (e *EMF) Run(ctx context.Context) error {
	iv := e.Interval
	if iv <= 0 {
		iv = time.Minute
	}
	t := time.NewTicker(iv)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return e.Export()
		case <-t.C:
			if err := e.Export(); err != nil {
				return err
			}
		}
	}
}

func emfUnit(name string) string {
	switch {
	case strings.HasSuffix(name, "_seconds"), strings.HasSuffix(name, "_seconds_total"),
		strings.HasSuffix(name, "_seconds_sum"):
		return "Seconds"
	case strings.HasSuffix(name, "_bytes"), strings.HasSuffix(name, "_bytes_total"):
		return "Bytes"
	case strings.HasSuffix(name, "_total"), strings.HasSuffix(name, "_count"):
		return "Count"
	}
	return "None"
}

// emfCollapsed are labels that never become CloudWatch dimensions. A
// stream's shards come and go every few hours: as a dimension, each shard
// would make new CloudWatch metrics (billed per metric and month) that no
// alarm can name in advance. Per-shard gauges (checkpoint lag, oldest
// unacknowledged age) therefore reach CloudWatch as their maximum over the
// table's shards, the figure an alarm wants; Prometheus keeps the shard.
var emfCollapsed = map[string]bool{"shard": true}

// emfRollups are metrics published twice: with all their dimensions and
// with the table dimension alone, so that one alarm per table covers every
// value of the other labels (a CloudWatch alarm names exact dimensions).
var emfRollups = map[string]bool{
	"archiver_dead_lettered_records_total": true, // {table,sink,reason}
}

func emfWanted(name string) bool {
	return (strings.HasPrefix(name, "archiver_") && name != "archiver_build_info") ||
		name == "process_cpu_seconds_total" || name == "process_resident_memory_bytes"
}

// Export gathers once and writes the documents.
func (e *EMF) Export() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.prev == nil {
		e.prev = map[string]float64{}
	}
	fams, err := e.Gatherer.Gather()
	if err != nil {
		return fmt.Errorf("emf: gather: %w", err)
	}
	now := time.Now
	if e.Now != nil {
		now = e.Now
	}
	ns := e.Namespace
	if ns == "" {
		ns = "TTLArchiver"
	}
	ts := now().UnixMilli()
	seen := make(map[string]bool, len(e.prev))
	for _, f := range fams {
		if !emfWanted(f.GetName()) {
			continue
		}
		// One document per label set left after collapsing, in the order
		// the registry gathered them.
		var docs []*emfDoc
		byKey := map[string]*emfDoc{}
		for _, m := range f.GetMetric() {
			values := map[string]float64{}
			gauge := false
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				values[f.GetName()] = e.delta(seen, f.GetName(), m, m.GetCounter().GetValue())
			case dto.MetricType_GAUGE:
				values[f.GetName()] = m.GetGauge().GetValue()
				gauge = true
			case dto.MetricType_UNTYPED:
				values[f.GetName()] = m.GetUntyped().GetValue()
				gauge = true
			case dto.MetricType_HISTOGRAM:
				values[f.GetName()+"_count"] = e.delta(seen, f.GetName()+"_count", m, float64(m.GetHistogram().GetSampleCount()))
				values[f.GetName()+"_sum"] = e.delta(seen, f.GetName()+"_sum", m, m.GetHistogram().GetSampleSum())
			case dto.MetricType_SUMMARY:
				values[f.GetName()+"_count"] = e.delta(seen, f.GetName()+"_count", m, float64(m.GetSummary().GetSampleCount()))
				values[f.GetName()+"_sum"] = e.delta(seen, f.GetName()+"_sum", m, m.GetSummary().GetSampleSum())
			default:
				continue
			}
			labels := make([]*dto.LabelPair, 0, len(m.GetLabel()))
			var key strings.Builder
			for _, l := range m.GetLabel() {
				if emfCollapsed[l.GetName()] {
					continue
				}
				labels = append(labels, l)
				key.WriteString(l.GetName() + "=" + l.GetValue() + "\xff")
			}
			d := byKey[key.String()]
			if d == nil {
				d = &emfDoc{labels: labels, values: values}
				byKey[key.String()] = d
				docs = append(docs, d)
				continue
			}
			for n, v := range values {
				if !gauge {
					d.values[n] += v
				} else if v > d.values[n] {
					d.values[n] = v
				}
			}
		}
		for _, d := range docs {
			if err := writeEMF(e.W, ns, ts, d.labels, emfRollups[f.GetName()], d.values); err != nil {
				return err
			}
		}
	}
	// Forget series that are gone (a shard's, once it ended), so the map
	// follows the live series.
	for k := range e.prev {
		if !seen[k] {
			delete(e.prev, k)
		}
	}
	return nil
}

type emfDoc struct {
	labels []*dto.LabelPair
	values map[string]float64
}

func (e *EMF) delta(seen map[string]bool, name string, m *dto.Metric, v float64) float64 {
	var b strings.Builder
	b.WriteString(name)
	for _, l := range m.GetLabel() {
		b.WriteString("\xff" + l.GetName() + "=" + l.GetValue())
	}
	k := b.String()
	seen[k] = true
	d := v - e.prev[k]
	if d < 0 { // counter reset
		d = v
	}
	e.prev[k] = v
	return d
}

// writeEMF writes one document. With rollup, a series that has a table
// label and others is also published under the table dimension alone.
func writeEMF(w io.Writer, ns string, ts int64, labels []*dto.LabelPair, rollup bool, values map[string]float64) error {
	doc := map[string]any{}
	dims := []string{}
	hasTable := false
	for _, l := range labels {
		doc[l.GetName()] = l.GetValue()
		dims = append(dims, l.GetName())
		hasTable = hasTable || l.GetName() == "table"
	}
	dimSets := [][]string{dims}
	if rollup && hasTable && len(dims) > 1 {
		dimSets = append(dimSets, []string{"table"})
	}
	names := make([]string, 0, len(values))
	for n := range values {
		names = append(names, n)
	}
	sort.Strings(names)
	metrics := make([]map[string]string, 0, len(names))
	for _, n := range names {
		doc[n] = values[n]
		metrics = append(metrics, map[string]string{"Name": n, "Unit": emfUnit(n)})
	}
	doc["_aws"] = map[string]any{
		"Timestamp": ts,
		"CloudWatchMetrics": []any{map[string]any{
			"Namespace":  ns,
			"Dimensions": dimSets,
			"Metrics":    metrics,
		}},
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("emf: encode: %w", err)
	}
	b = append(b, '\n')
	_, err = w.Write(b)
	return err
}
