package conformance_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ttl-archiver/archiver/conformance"
	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/engine/enginetest"
)

// only runs the named checks against e and returns their results by name.
func only(t *testing.T, e *conformance.Env, names ...string) map[string]conformance.Result {
	t.Helper()
	checks, err := conformance.Select(conformance.Checks(), names, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]conformance.Result{}
	for _, r := range conformance.Run(t.Context(), e, checks, nil).Results {
		t.Log(r.Line())
		got[r.Name] = r
	}
	return got
}

// want fails t unless the check's result has the status and its detail
// holds every fragment.
func want(t *testing.T, got map[string]conformance.Result, name string, status conformance.Status, fragments ...string) {
	t.Helper()
	r := got[name]
	if r.Status != status {
		t.Errorf("%s: %s, want %s", name, r.Line(), status)
	}
	for _, f := range fragments {
		if !strings.Contains(r.Detail, f) {
			t.Errorf("%s: detail %q lacks %q", name, r.Detail, f)
		}
	}
}

// TestNoTTL: an engine whose sweeper is off (DynamoDB Local's behaviour)
// fails the TTL checks; the first waits the bound, the later ones fail at
// once, naming it.
func TestNoTTL(t *testing.T) {
	b := enginetest.Start(t, engine.Options{TTLInterval: -1})
	e := envOf(b)
	e.Bound = 300 * time.Millisecond
	got := only(t, e, "ttl-expiry", "ttl-five-years", "ttl-service-identity")
	want(t, got, "ttl-expiry", conformance.Fail, "TTL deleted nothing within the bound (300ms)")
	want(t, got, "ttl-five-years", conformance.Fail, "seen first in ttl-expiry", "nothing can be said")
	want(t, got, "ttl-service-identity", conformance.Fail, "seen first in ttl-expiry")
}

// TestNoRollover: without the control API and with shards that close
// after four hours, lineage cannot be measured (a skip) and ShardFilter
// is asked of the open shard only.
func TestNoRollover(t *testing.T) {
	b := enginetest.Start(t, engine.Options{TTLInterval: -1})
	got := only(t, envOf(b), "stream-lineage", "stream-shard-filter")
	want(t, got, "stream-lineage", conformance.Skip, "no shard closed after 400 writes")
	want(t, got, "stream-shard-filter", conformance.Pass, "an open shard's CHILD_SHARDS are none")
}

// TestNoGlobalTables: no second Region, or an endpoint that refuses
// ReplicaUpdates, is a skip that says why.
func TestNoGlobalTables(t *testing.T) {
	b := enginetest.Start(t, engine.Options{TTLInterval: -1})
	e := envOf(b)
	e.In = nil
	want(t, only(t, e, "global-replicas"), "global-replicas", conformance.Skip, "no second Region")
	b.Engine.SetHook(func(op string, _ *http.Request) error {
		if op == "UpdateTable" {
			return engine.NewError("ValidationException", "ReplicaUpdates is not supported", 400)
		}
		return nil
	})
	want(t, only(t, envOf(b), "global-replicas"), "global-replicas", conformance.Skip,
		"the endpoint has no global tables: UpdateTable ReplicaUpdates Create: ValidationException: ReplicaUpdates is not supported")
}

// TestDivergences: an endpoint that ignores ShardFilter and leaves
// userIdentity out of TTL's records (what a proxy in front of the engine
// makes of it: the engine itself cannot be made to) fails those checks,
// saying what it got.
func TestDivergences(t *testing.T) {
	b := enginetest.Start(t, engine.Options{TTLInterval: -1})
	p := httptest.NewServer(divergingProxy(b.Endpoint))
	t.Cleanup(p.Close)
	e := envOf(b)
	e.Endpoint = p.URL
	e.DynamoDB = enginetest.ClientAt(p.URL, enginetest.DefaultKey)
	e.Streams = enginetest.StreamsClientAt(p.URL, enginetest.DefaultKey)
	e.Control = conformance.NewControl(b.Endpoint)
	got := only(t, e, "stream-shard-filter", "ttl-service-identity")
	want(t, got, "stream-shard-filter", conformance.Fail, "ShardFilter CHILD_SHARDS of", "want its children")
	want(t, got, "ttl-service-identity", conformance.Fail, `the TTL deletion's REMOVE has userIdentity none, want Type "Service"`)
}

// divergingProxy forwards to the engine at target, dropping ShardFilter
// from DescribeStream requests and userIdentity from GetRecords answers.
func divergingProxy(target string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		op := r.Header.Get("X-Amz-Target")
		if strings.HasSuffix(op, ".DescribeStream") {
			body = rewrite(body, func(m map[string]any) { delete(m, "ShardFilter") })
		}
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, target+r.URL.Path, bytes.NewReader(body))
		req.Header = r.Header.Clone()
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		if strings.HasSuffix(op, ".GetRecords") {
			out = rewrite(out, func(m map[string]any) {
				recs, _ := m["Records"].([]any)
				for _, rec := range recs {
					delete(rec.(map[string]any), "userIdentity")
				}
			})
		}
		for k, v := range resp.Header {
			if !strings.EqualFold(k, "X-Amz-Crc32") && !strings.EqualFold(k, "Content-Length") {
				w.Header()[k] = v
			}
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(out)))
		w.WriteHeader(resp.StatusCode)
		w.Write(out)
	})
}

// rewrite applies f to a JSON object; anything else is left as it is.
func rewrite(data []byte, f func(map[string]any)) []byte {
	var m map[string]any
	if json.Unmarshal(data, &m) != nil {
		return data
	}
	f(m)
	out, _ := json.Marshal(m)
	return out
}

// TestPanicFails: a check that panics fails, naming the panic, and the
// run goes on.
func TestPanicFails(t *testing.T) {
	b := enginetest.Start(t, engine.Options{TTLInterval: -1})
	checks := []conformance.Check{
		{Name: "boom", Run: func(context.Context, *conformance.Env) conformance.Outcome { panic("decoder blew up") }},
		{Name: "fine", Run: func(context.Context, *conformance.Env) conformance.Outcome {
			return conformance.Outcome{Status: conformance.Pass}
		}},
	}
	rep := conformance.Run(t.Context(), envOf(b), checks, nil)
	if len(rep.Results) != 2 || rep.Results[0].Status != conformance.Fail || !strings.Contains(rep.Results[0].Detail, "panic: decoder blew up") ||
		rep.Results[1].Status != conformance.Pass {
		t.Errorf("results %+v; want boom failed naming its panic, fine passed", rep.Results)
	}
	if rep.Grade != "D" {
		t.Errorf("grade %s for 1 of 2, want D", rep.Grade)
	}
}

// TestInterrupted: a run whose context has ended runs nothing more and
// says how many checks it left.
func TestInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rep := conformance.Run(ctx, &conformance.Env{Bound: time.Second}, conformance.Checks(), nil)
	if rep.NotRun != len(conformance.Checks()) || !strings.Contains(rep.Summary(), "interrupted") {
		t.Errorf("NotRun %d, summary %q; want every check not run, said", rep.NotRun, rep.Summary())
	}
}

// TestInterruptedMidCheck: a check that fails because the run was
// stopped under it is not counted a failure of the endpoint.
func TestInterruptedMidCheck(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	checks := []conformance.Check{
		{Name: "stopped", Run: func(ctx context.Context, _ *conformance.Env) conformance.Outcome {
			cancel()
			return conformance.Outcome{Status: conformance.Fail, Detail: ctx.Err().Error()}
		}},
		{Name: "never", Run: func(context.Context, *conformance.Env) conformance.Outcome { panic("must not run") }},
	}
	rep := conformance.Run(ctx, &conformance.Env{Bound: time.Second}, checks, nil)
	if len(rep.Results) != 1 || rep.Results[0].Status != conformance.Skip || rep.Results[0].Detail != "interrupted: context canceled" || rep.NotRun != 1 {
		t.Errorf("report %+v; want the stopped check skipped as interrupted and one not run", rep)
	}
}

func TestGrade(t *testing.T) {
	for _, c := range []struct {
		passed, applicable int
		want               string
	}{{0, 0, "-"}, {14, 14, "A"}, {12, 13, "B"}, {11, 13, "C"}, {10, 13, "C"}, {9, 13, "D"}, {7, 13, "D"}, {6, 13, "F"}, {0, 5, "F"}} {
		if got := conformance.Grade(c.passed, c.applicable); got != c.want {
			t.Errorf("Grade(%d, %d) = %s, want %s", c.passed, c.applicable, got, c.want)
		}
	}
}

func TestSelect(t *testing.T) {
	all := conformance.Checks()
	got, err := conformance.Select(all, []string{"stream-lineage", "ttl-expiry"}, []string{"stream-lineage"})
	if err != nil || len(got) != 1 || got[0].Name != "ttl-expiry" {
		t.Errorf("Select = %v, %v; want ttl-expiry alone", got, err)
	}
	if _, err := conformance.Select(all, []string{"ttl-expiri"}, nil); err == nil || !strings.Contains(err.Error(), `no check named "ttl-expiri"`) {
		t.Errorf("an unknown name: %v", err)
	}
	names := map[string]bool{}
	for _, c := range all {
		if names[c.Name] || c.Asserts == "" || c.Run == nil {
			t.Errorf("check %q: a duplicate name, or no assertion or Run", c.Name)
		}
		names[c.Name] = true
	}
}
