package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ttl-archiver/archiver/conformance"
	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/engine/enginetest"
)

// conformanceRun runs archiver conformance with args against the engine
// of bed and returns the exit code, stdout and stderr.
func conformanceRun(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := dispatch(context.Background(), append([]string{"conformance"}, args...),
		env{stdout: &stdout, stderr: &stderr, getenv: func(string) string { return "" }})
	return code, stdout.String(), stderr.String()
}

// TestConformanceCommand: against the engine through its control API,
// one line per check, a summary and grade A, exit 0; --json carries the
// same as one object.
func TestConformanceCommand(t *testing.T) {
	bed := enginetest.Start(t, engine.Options{TTLInterval: -1})
	args := []string{"--endpoint", bed.Endpoint, "--engine-control", "--only", "ttl-expiry,stream-real-changes,global-replicas"}
	code, out, errs := conformanceRun(t, args...)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	for _, w := range []string{"PASS ttl-expiry ", "PASS stream-real-changes ", "PASS global-replicas ", "conformance: 3 passed, 0 failed, 0 skipped\n", "grade: A (3 of 3 applicable checks passed)\n"} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	code, out, errs = conformanceRun(t, append(args, "--json")...)
	var rep conformance.Report
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil {
		t.Fatalf("--json: exit %d, %v\n%s%s", code, err, out, errs)
	}
	if rep.Passed != 3 || rep.Grade != "A" || !rep.EngineControl || len(rep.Results) != 3 || rep.Results[0].Asserts == "" {
		t.Errorf("--json report %+v", rep)
	}
}

// TestConformanceFailsExit1: a failing check makes exit 1, naming the
// count and the grade; an endpoint that does not answer is one error.
func TestConformanceFailsExit1(t *testing.T) {
	bed := enginetest.Start(t, engine.Options{TTLInterval: -1})
	code, out, errs := conformanceRun(t, "--endpoint", bed.Endpoint, "--expiry-bound", "200ms", "--only", "ttl-expiry")
	if code != 1 || !strings.Contains(out, "FAIL ttl-expiry ") || !strings.Contains(errs, "archiver conformance: 1 of 1 applicable checks failed (grade F)") {
		t.Errorf("exit %d\n%s%s", code, out, errs)
	}
	bed.Server.Close()
	code, _, errs = conformanceRun(t, "--endpoint", bed.Endpoint)
	if code != 1 || !strings.Contains(errs, "does not answer as DynamoDB: ListTables: ") {
		t.Errorf("a closed endpoint: exit %d, %s", code, errs)
	}
}

func TestConformanceFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--endpoint", "127.0.0.1:8000"}, "--endpoint: \"127.0.0.1:8000\" is not a URL"},
		{[]string{"--endpoint", "http://127.0.0.1:8000", "--expiry-bound", "0s"}, "--expiry-bound: 0s must be positive"},
		{[]string{"--endpoint", "http://127.0.0.1:8000", "--only", "ttl-expiri"}, `no check named "ttl-expiri"`},
		{[]string{"--endpoint", "http://127.0.0.1:8000", "--other-region", "Mars"}, `--other-region: "Mars" is not a region name`},
		{[]string{"--engine-control"}, "--engine-control: needs --endpoint"},
		{[]string{"--endpoint", "http://127.0.0.1:8000", "--expiry-bund", "1m"}, "did you mean --expiry-bound?"},
	} {
		code, _, errs := conformanceRun(t, c.args...)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", c.args, code, errs, c.want)
		}
	}
	code, out, _ := conformanceRun(t, "--list")
	if code != 0 || strings.Count(out, "\n") != len(conformance.Checks()) || !strings.Contains(out, "ttl-five-years ") {
		t.Errorf("--list: exit %d\n%s", code, out)
	}
}
