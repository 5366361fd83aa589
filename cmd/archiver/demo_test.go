package main

import (
	"bytes"
	"io"
	"regexp"
	"strconv"
	"testing"
)

// TestDemo runs `archiver demo --duration 10s` and checks its summary: every
// session written to expire was archived and published on NATS, every user
// delete was seen and none archived.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for 10s")
	}
	var out bytes.Buffer
	archive := t.TempDir()
	code := dispatch(t.Context(), []string{"demo", "--duration", "10s", "--archive", archive},
		env{stdout: &out, stderr: io.Discard, getenv: envMap(nil)})
	if code != 0 {
		t.Fatalf("exit code %d\n%s", code, out.String())
	}
	s := out.String()
	num := func(re string) int {
		t.Helper()
		m := regexp.MustCompile(re).FindStringSubmatch(s)
		if m == nil {
			t.Fatalf("summary lacks %q:\n%s", re, s)
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	written := num(`sessions written: +(\d+) expiring`)
	deletes := num(`expiring, (\d+) deleted by users`)
	if written < 4 || deletes < 1 {
		t.Fatalf("demo wrote %d expiring sessions and %d deletes; want some of each:\n%s", written, deletes, s)
	}
	if got := num(`expired archived: +(\d+)`); got != written {
		t.Errorf("expired archived = %d, want %d", got, written)
	}
	if got := num(`published on NATS: +(\d+)`); got != written {
		t.Errorf("published on NATS = %d, want %d", got, written)
	}
	if got := num(`user deletes seen: +(\d+)`); got != deletes {
		t.Errorf("user deletes seen = %d, want %d", got, deletes)
	}
	if got := num(`\(not archived: (\d+) in the archive\)`); got != 0 {
		t.Errorf("%d user deletes archived, want 0", got)
	}
	if !regexp.MustCompile(`TTL lag p50/max: +\S+ / \S+`).MatchString(s) {
		t.Errorf("summary lacks the TTL lag line:\n%s", s)
	}
	if t.Failed() {
		t.Logf("demo output:\n%s", s)
	}
}
