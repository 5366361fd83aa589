package ops

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// emfDocs exports once and returns the documents by metric name and table.
func emfDocs(t *testing.T, e *EMF, buf *bytes.Buffer) map[string][]map[string]any {
	t.Helper()
	buf.Reset()
	if err := e.Export(); err != nil {
		t.Fatal(err)
	}
	out := map[string][]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var doc map[string]any
		if err := json.Unmarshal([]byte(line), &doc); err != nil {
			t.Fatalf("not JSON: %s", line)
		}
		cw := doc["_aws"].(map[string]any)["CloudWatchMetrics"].([]any)[0].(map[string]any)
		for _, m := range cw["Metrics"].([]any) {
			name := m.(map[string]any)["Name"].(string)
			out[name] = append(out[name], doc)
		}
	}
	return out
}

func dimensions(doc map[string]any) [][]string {
	cw := doc["_aws"].(map[string]any)["CloudWatchMetrics"].([]any)[0].(map[string]any)
	var out [][]string
	for _, set := range cw["Dimensions"].([]any) {
		var s []string
		for _, d := range set.([]any) {
			s = append(s, d.(string))
		}
		out = append(out, s)
	}
	return out
}

// TestEMFCollapsesShards: per-shard series reach CloudWatch per table, gauges
// as the maximum over shards, counters as the sum of their increases, and
// never with a shard dimension.
func TestEMFCollapsesShards(t *testing.T) {
	reg := prometheus.NewRegistry()
	age := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "archiver_oldest_unacked_age_seconds", Help: "t"}, []string{"table", "shard"})
	cnt := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "archiver_test_shard_total", Help: "t"}, []string{"table", "shard"})
	reg.MustRegister(age, cnt)
	age.WithLabelValues("T", "s1").Set(5)
	age.WithLabelValues("T", "s2").Set(900)
	age.WithLabelValues("T", "s3").Set(7)
	age.WithLabelValues("U", "s9").Set(3)
	cnt.WithLabelValues("T", "s1").Add(2)
	cnt.WithLabelValues("T", "s2").Add(3)
	var buf bytes.Buffer
	e := &EMF{Gatherer: reg, W: &buf, Now: func() time.Time { return time.UnixMilli(1000) }}

	docs := emfDocs(t, e, &buf)
	if strings.Contains(buf.String(), `"shard"`) {
		t.Fatalf("a document carries the shard:\n%s", buf.String())
	}
	got := map[string]float64{}
	for _, d := range docs["archiver_oldest_unacked_age_seconds"] {
		got[d["table"].(string)] = d["archiver_oldest_unacked_age_seconds"].(float64)
		if dims := dimensions(d); !reflect.DeepEqual(dims, [][]string{{"table"}}) {
			t.Errorf("dimensions %v, want [[table]]", dims)
		}
	}
	if !reflect.DeepEqual(got, map[string]float64{"T": 900, "U": 3}) {
		t.Errorf("oldest unacked age per table = %v, want the maximum over shards", got)
	}
	if c := docs["archiver_test_shard_total"]; len(c) != 1 || c[0]["archiver_test_shard_total"] != 5.0 {
		t.Fatalf("counter documents %v, want one for T with 5", c)
	}

	// Increases are summed per series: a shard that ended (its series
	// deleted) neither subtracts nor counts again.
	cnt.DeleteLabelValues("T", "s1")
	cnt.WithLabelValues("T", "s2").Add(1)
	cnt.WithLabelValues("T", "s4").Add(4)
	docs = emfDocs(t, e, &buf)
	if c := docs["archiver_test_shard_total"]; len(c) != 1 || c[0]["archiver_test_shard_total"] != 5.0 {
		t.Fatalf("second export: counter documents %v, want one for T with 1+4", c)
	}
	for k := range e.prev {
		if strings.Contains(k, "=s1") {
			t.Errorf("the ended shard's counter is still remembered: %q", k)
		}
	}
}

// TestEMFRollup: the dead-letter counter is published by table alone too, so
// one alarm per table sees every sink and reason.
func TestEMFRollup(t *testing.T) {
	reg := prometheus.NewRegistry()
	dl := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "archiver_dead_lettered_records_total", Help: "t"}, []string{"table", "sink", "reason"})
	ev := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "archiver_events_total", Help: "t"}, []string{"table", "kind"})
	reg.MustRegister(dl, ev)
	dl.WithLabelValues("T", "s3", "permanent").Add(3)
	ev.WithLabelValues("T", "expired").Add(1)
	var buf bytes.Buffer
	e := &EMF{Gatherer: reg, W: &buf}
	docs := emfDocs(t, e, &buf)
	d := docs["archiver_dead_lettered_records_total"]
	if len(d) != 1 || d[0]["sink"] != "s3" || d[0]["reason"] != "permanent" || d[0]["archiver_dead_lettered_records_total"] != 3.0 {
		t.Fatalf("dead-letter documents %v", d)
	}
	if dims := dimensions(d[0]); !reflect.DeepEqual(dims, [][]string{{"reason", "sink", "table"}, {"table"}}) {
		t.Errorf("dead-letter dimensions %v, want the full set and [table]", dims)
	}
	if dims := dimensions(docs["archiver_events_total"][0]); !reflect.DeepEqual(dims, [][]string{{"kind", "table"}}) {
		t.Errorf("events dimensions %v: only metrics in emfRollups get the table rollup", dims)
	}
}
