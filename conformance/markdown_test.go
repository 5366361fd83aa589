package conformance_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ttl-archiver/archiver/conformance"
)

// TestMarkdown: a row per check and a column per endpoint, the delay a
// passing check measured, the grade, then what each endpoint's checks
// that did not pass said (pipes escaped), and why one was not measured.
func TestMarkdown(t *testing.T) {
	good := &conformance.Report{ExpiryBound: 2 * time.Minute, Passed: 1, Grade: "A", Results: []conformance.Result{
		{Name: "ttl-expiry", Status: conformance.Pass, Delay: 1234 * time.Millisecond}}}
	bad := &conformance.Report{ExpiryBound: time.Minute, Passed: 0, Failed: 1, Skipped: 1, Grade: "F", Results: []conformance.Result{
		{Name: "ttl-expiry", Status: conformance.Fail, Detail: "deleted nothing | at all"},
		{Name: "stream-lineage", Status: conformance.Skip, Detail: "no global tables"},
		{Name: "global-replicas", Status: conformance.Skip, Detail: "no global tables"}}}
	md := conformance.Markdown([]conformance.Column{{Name: "engine", Report: good}, {Name: "peer", Report: bad}, {Name: "gone", Missing: "npm install failed"}})
	for _, w := range []string{
		"| check | engine | peer | gone |\n|---|---|---|---|\n",
		"| `ttl-expiry` | PASS (1.234s) | FAIL | – |\n",
		"| `global-replicas` | not run | SKIP | – |\n",
		"| **grade** | **A** (1 of 1) | **F** (0 of 1) | not measured |\n",
		"**engine** passed every check (expiry bound 2m0s).",
		"**peer** (expiry bound 1m0s):\n\n- `ttl-expiry` FAIL: deleted nothing \\| at all\n- `stream-lineage`, `global-replicas` SKIP: no global tables\n",
		"**gone** was not measured: npm install failed\n",
	} {
		if !strings.Contains(md, w) {
			t.Errorf("the table lacks %q:\n%s", w, md)
		}
	}
	if rows := strings.Count(md, "\n| `"); rows != len(conformance.Checks()) {
		t.Errorf("%d check rows, want %d", rows, len(conformance.Checks()))
	}
}
