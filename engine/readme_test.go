package engine

import (
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// readmeOperations returns the operations docs/ENGINE.md's "Supported
// operations" section names as served (its table) and as not served (the
// paragraph after it).
func readmeOperations(t *testing.T) (served, notServed []string) {
	t.Helper()
	b, err := os.ReadFile("../docs/ENGINE.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	start := strings.Index(s, "## Supported operations")
	if start < 0 {
		t.Fatal(`docs/ENGINE.md has no "## Supported operations" section`)
	}
	s = s[start+1:]
	s = s[:strings.Index(s, "\n#")]
	split := strings.Index(s, "Not served:")
	if split < 0 {
		t.Fatal(`docs/ENGINE.md's "Supported operations" has no "Not served:" paragraph`)
	}
	name := regexp.MustCompile("`([A-Z][A-Za-z]+)`")
	for _, m := range name.FindAllStringSubmatch(s[:split], -1) {
		served = append(served, m[1])
	}
	for _, m := range name.FindAllStringSubmatch(s[split:], -1) {
		notServed = append(notServed, m[1])
	}
	return served, notServed
}

// TestReadmeListsOperations keeps docs/ENGINE.md's list of operations true: every
// operation the engine serves is listed as served, everything listed as
// served is served, and everything listed as not served answers
// UnknownOperationException.
func TestReadmeListsOperations(t *testing.T) {
	served, notServed := readmeOperations(t)
	have := map[string]bool{}
	for op := range ops {
		have[op] = true
	}
	for op := range streamOps {
		have[op] = true
	}
	listed := map[string]bool{}
	for _, op := range served {
		listed[op] = true
		if !have[op] {
			t.Errorf("docs/ENGINE.md lists %s as served; the engine does not serve it", op)
		}
	}
	var missing []string
	for op := range have {
		if !listed[op] {
			missing = append(missing, op)
		}
	}
	sort.Strings(missing)
	for _, op := range missing {
		t.Errorf("the engine serves %s; docs/ENGINE.md's supported operations do not list it", op)
	}

	e, err := New(Options{TTLInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for _, op := range notServed {
		if have[op] {
			t.Errorf("docs/ENGINE.md lists %s as not served; the engine serves it", op)
			continue
		}
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader("{}"))
		r.Header.Set("X-Amz-Target", targetDynamoDB+op)
		w := httptest.NewRecorder()
		e.ServeHTTP(w, r)
		body := w.Body.String()
		if w.Code != 400 || !strings.Contains(body, "UnknownOperationException") || !strings.Contains(body, "Unknown operation: "+op) {
			t.Errorf("%s: got %d %s, want 400 UnknownOperationException naming it", op, w.Code, body)
		}
	}
	if len(notServed) < 20 {
		t.Errorf("docs/ENGINE.md's not-served list has %d operations; expected the whole rest of the DynamoDB API", len(notServed))
	}
}
