package restore

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestJournalCutsATornLastLineAndKeepsItsStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "resume")
	t0 := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	j, err := openJournal(path, "T1", t0)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b"} {
		if err := j.record(id, false); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.close(); err != nil {
		t.Fatal(err)
	}
	// A kill in the middle of a line leaves part of it.
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("tor")
	f.Close()
	j, err = openJournal(path, "T1", t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if !j.has("a") || !j.has("b") || j.has("tor") || !j.head.Start.Equal(t0) {
		t.Errorf("reopened: done %v, start %s", j.done, j.head.Start)
	}
	if err := j.record("c", true); err != nil {
		t.Fatal(err)
	}
	j.close()
	b, _ := os.ReadFile(path)
	if lines := strings.Split(string(b), "\n"); len(lines) != 5 || lines[3] != "c" {
		t.Errorf("file after the torn line was cut: %q", b)
	}
	if _, err := openJournal(path, "T2", t0); err == nil || !strings.Contains(err.Error(), `"T1"`) {
		t.Errorf("another table: %v", err)
	}
	os.WriteFile(path, []byte("not a header\n"), 0o644)
	if _, err := openJournal(path, "T1", t0); err == nil || !strings.Contains(err.Error(), "not a resume file") {
		t.Errorf("a foreign file: %v", err)
	}
}

func TestLimiterPacesAndHonoursContext(t *testing.T) {
	l := newLimiter(100) // a token every 10ms, burst of 10
	ctx := context.Background()
	start := time.Now()
	for range 30 {
		if err := l.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// 10 at once, then 20 more at 10ms each.
	if el := time.Since(start); el < 180*time.Millisecond {
		t.Errorf("30 tokens at 100/s took %s", el)
	}
	slow := newLimiter(0.5)
	_ = slow.Wait(ctx) // the burst token
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := slow.Wait(cctx); err == nil {
		t.Error("Wait outlived its context")
	}
	if newLimiter(0).Wait(ctx) != nil {
		t.Error("no limit must not wait")
	}
}
