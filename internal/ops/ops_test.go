package ops

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

type readySink struct {
	name string
	err  error
}

func (s readySink) Name() string { return s.name }
func (s readySink) Ready() error { return s.err }

type plainSink struct{}

func TestServerEndpoints(t *testing.T) {
	reg := NewRegistry("test")
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "archiver_test_total", Help: "t"})
	reg.MustRegister(c)
	c.Add(3)
	s := NewServer(reg, nil)
	nats := &readySink{name: "nats://x"}
	s.AddCheck("sinks", ReadyCheck[any](plainSink{}, nats))
	if err := s.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	base := "http://" + s.Addr()

	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Fatalf("/healthz = %d", code)
	}
	code, body := get("/metrics")
	if code != 200 || !strings.Contains(body, "archiver_test_total 3") || !strings.Contains(body, "archiver_build_info{") ||
		!strings.Contains(body, "go_goroutines") {
		t.Fatalf("/metrics = %d\n%s", code, body)
	}
	if code, body := get("/readyz"); code != 200 {
		t.Fatalf("/readyz = %d %s", code, body)
	}
	if err := Probe(context.Background(), s.Addr()); err != nil {
		t.Fatalf("Probe: %v", err)
	}
	nats.err = errors.New("not connected")
	code, body = get("/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "nats://x: not connected") {
		t.Fatalf("/readyz = %d %s", code, body)
	}
	if err := Probe(context.Background(), s.Addr()); err == nil || !strings.Contains(err.Error(), "not connected") {
		t.Fatalf("Probe = %v, want unready", err)
	}
}

// TestProfiling: /debug/pprof/ is served only when asked for, and then
// answers real profiles (a one-second CPU profile, the goroutine dump).
func TestProfiling(t *testing.T) {
	for _, enabled := range []bool{false, true} {
		s := NewServer(nil, nil)
		if enabled {
			s.EnableProfiling()
		}
		if err := s.Listen("127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		base := "http://" + s.Addr()
		for _, path := range []string{"/debug/pprof/", "/debug/pprof/goroutine?debug=1", "/debug/pprof/profile?seconds=1"} {
			resp, err := http.Get(base + path)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			switch {
			case !enabled && resp.StatusCode != http.StatusNotFound:
				t.Errorf("profiling off: %s = %d, want 404", path, resp.StatusCode)
			case enabled && (resp.StatusCode != http.StatusOK || len(b) == 0):
				t.Errorf("profiling on: %s = %d with %d bytes", path, resp.StatusCode, len(b))
			case enabled && strings.Contains(path, "goroutine") && !strings.Contains(string(b), "goroutine profile"):
				t.Errorf("profiling on: %s is not a goroutine dump:\n%.200s", path, b)
			}
		}
		_ = s.Close(context.Background())
	}
}

func TestCachedCheck(t *testing.T) {
	n := 0
	c := CachedCheck(func(context.Context) error { n++; return nil }, time.Hour)
	for i := 0; i < 3; i++ {
		_ = c(context.Background())
	}
	if n != 1 {
		t.Fatalf("check ran %d times, want 1", n)
	}
}

func TestEMF(t *testing.T) {
	reg := prometheus.NewRegistry()
	cv := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "archiver_events_total", Help: "t"}, []string{"table", "kind"})
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "archiver_ttl_lag_seconds", Help: "t"})
	reg.MustRegister(cv, h, prometheus.NewCounter(prometheus.CounterOpts{Name: "other_total", Help: "ignored"}))
	cv.WithLabelValues("T", "expired").Add(5)
	h.Observe(2)
	var buf bytes.Buffer
	e := &EMF{Gatherer: reg, W: &buf, Now: func() time.Time { return time.UnixMilli(1000) }}
	if err := e.Export(); err != nil {
		t.Fatal(err)
	}
	cv.WithLabelValues("T", "expired").Add(2)
	if err := e.Export(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("want 4 documents, got %d:\n%s", len(lines), buf.String())
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(lines[2]), &doc); err != nil {
		t.Fatal(err)
	}
	if doc["archiver_events_total"] != 2.0 || doc["table"] != "T" || doc["kind"] != "expired" {
		t.Fatalf("second export of the counter = %v, want delta 2 with labels", doc)
	}
	aws := doc["_aws"].(map[string]any)
	cw := aws["CloudWatchMetrics"].([]any)[0].(map[string]any)
	if cw["Namespace"] != "TTLArchiver" || aws["Timestamp"] != 1000.0 {
		t.Fatalf("_aws = %v", aws)
	}
	if !strings.Contains(lines[1], `"archiver_ttl_lag_seconds_count":1`) {
		t.Fatalf("histogram doc = %s", lines[1])
	}
}
