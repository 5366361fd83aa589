package main

import (
	"bytes"
	"io"
	"path/filepath"
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
	// A relative --archive: the demo hands the archiver an absolute
	// file:// URL (file://archive would name the host "archive").
	work := t.TempDir()
	t.Chdir(work)
	archive := "archive"
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
	if got := readArchive(t, filepath.Join(work, archive)); len(got) == 0 {
		t.Errorf("nothing archived under %s", filepath.Join(work, archive))
	}
	if t.Failed() {
		t.Logf("demo output:\n%s", s)
	}
}

// TestDemoPrecise runs `archiver demo --precise`: the engine's own TTL runs
// up to 30 s late, `archiver sweep` deletes the sessions, and the archiver
// (--expired-when past-ttl) publishes each as an expiry.
func TestDemoPrecise(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for 10s")
	}
	var out bytes.Buffer
	code := dispatch(t.Context(), []string{"demo", "--precise", "--duration", "10s", "--archive", t.TempDir()},
		env{stdout: &out, stderr: io.Discard, getenv: envMap(nil)})
	s := out.String()
	if code != 0 {
		t.Fatalf("exit code %d\n%s", code, s)
	}
	m := regexp.MustCompile(`sessions written: +(\d+) expiring(?s:.*)published on NATS: +(\d+)(?s:.*)deleted by: +(\d+) archiver sweep, (\d+) the engine's TTL`).FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("summary lacks the written, published or deleted-by lines:\n%s", s)
	}
	n := func(i int) int { v, _ := strconv.Atoi(m[i]); return v }
	written, published, bySweeper, byTTL := n(1), n(2), n(3), n(4)
	if written < 4 || published != written {
		t.Errorf("%d sessions written to expire, %d published on NATS; want all of at least 4", written, published)
	}
	if bySweeper == 0 || bySweeper+byTTL != published {
		t.Errorf("deleted by the sweeper %d, by the engine's TTL %d, of %d published: want most by the sweeper, all counted", bySweeper, byTTL, published)
	}
	if t.Failed() {
		t.Logf("demo output:\n%s", s)
	}
}
