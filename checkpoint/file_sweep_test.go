package checkpoint

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var (
	sweepWin0 = time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	sweepWin1 = sweepWin0.Add(time.Minute)
)

// checkSweepCursor fails unless the file's sweep cursor of table is want.
func checkSweepCursor(t *testing.T, s *FileStore, table string, want time.Time) {
	t.Helper()
	got, err := s.SweepCursor(context.Background(), table)
	if err != nil || !got.Equal(want) {
		t.Fatalf("SweepCursor(%s) = %v, %v; want %v", table, got, err, want)
	}
}

// The file keeps a cursor per table, to the millisecond, and never moves
// it back; sweep/state's File holds the tables (its tests run the
// sweeper's whole contract over the file).
func TestFileAdvanceSweepCursor(t *testing.T) {
	ctx := context.Background()
	s := openT(t, filepath.Join(t.TempDir(), "cp.json"))
	defer s.Close()
	for _, tc := range []struct {
		name      string
		window    time.Time
		wantLater time.Time
		wantErr   string
		stored    time.Time
	}{
		{name: "first", window: sweepWin1, stored: sweepWin1},
		{name: "same again", window: sweepWin1, stored: sweepWin1},
		{name: "backwards", window: sweepWin0, wantLater: sweepWin1, stored: sweepWin1},
		{name: "forward, sub-millisecond truncated", window: sweepWin1.Add(1500 * time.Microsecond), stored: sweepWin1.Add(time.Millisecond)},
		{name: "zero", window: time.Time{}, wantErr: "not a time from 1970 to 9999", stored: sweepWin1.Add(time.Millisecond)},
	} {
		later, err := s.AdvanceSweepCursor(ctx, "Sessions", tc.window)
		switch {
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.wantErr)
		case tc.wantErr == "" && (err != nil || !later.Equal(tc.wantLater)):
			t.Errorf("%s: AdvanceSweepCursor = %v, %v; want %v", tc.name, later, err, tc.wantLater)
		}
		checkSweepCursor(t, s, "Sessions", tc.stored)
	}
	checkSweepCursor(t, s, "Other", time.Time{})
	if _, err := s.AdvanceSweepCursor(ctx, "a b", sweepWin1); err == nil || !strings.Contains(err.Error(), "table") {
		t.Errorf("bad table name: %v", err)
	}
	s.Close()
	if s.Closed().Err() == nil {
		t.Error("Closed not cancelled by Close")
	}
	if _, err := s.AdvanceSweepCursor(ctx, "Sessions", sweepWin1.Add(time.Hour)); err == nil {
		t.Error("AdvanceSweepCursor on a closed store succeeded")
	}
}

// Files written before sweep cursors existed load, and gain the section
// (and version 3) with the first cursor; files without one stay version 2.
func TestFileSweepOldVersions(t *testing.T) {
	ctx := context.Background()
	for _, old := range []string{
		`{"version":1,"streams":{"arn":{"a":{"sequenceNumber":"5","finished":true}}}}`,
		`{"version":2,"streams":{"arn":{"a":{"sequenceNumber":"5","finished":true,"finishedAt":"2026-11-22T09:00:00Z"}}}}`,
	} {
		path := filepath.Join(t.TempDir(), "cp.json")
		if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
			t.Fatal(err)
		}
		s := openT(t, path)
		checkSweepCursor(t, s, "Sessions", time.Time{})
		if err := s.Save(ctx, "arn", "b", Checkpoint{SequenceNumber: "7"}); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(path); !strings.Contains(string(b), `"version": 2`) {
			t.Errorf("file without a sweep cursor written as:\n%s", b)
		}
		if _, err := s.AdvanceSweepCursor(ctx, "Sessions", sweepWin1); err != nil {
			t.Fatal(err)
		}
		s.Close()
		s2 := openT(t, path)
		checkSweepCursor(t, s2, "Sessions", sweepWin1)
		if cps, _ := s2.Load(ctx, "arn"); !cps["a"].Finished || cps["b"].SequenceNumber != "7" {
			t.Errorf("checkpoints after the cursor was added: %v", cps)
		}
		s2.Close()
	}
}

func TestFileSweepBadFiles(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{"version":2,"streams":{},"sweep":{"Sessions":{"window":"2026-11-22T09:00:00Z"}}}`, "needs version 3"},
		{`{"version":3,"streams":{},"sweep":{"Sessions":{"window":"yesterday"}}}`, `sweep["Sessions"].window`},
		{`{"version":3,"streams":{},"sweep":{"Sessions":{"window":"0001-01-01T00:00:00Z"}}}`, `sweep["Sessions"].window`},
		{`{"version":3,"streams":{},"sweep":{"a b":{"window":"2026-11-22T09:00:00Z"}}}`, "field sweep: table"},
		{`{"version":3,"streams":{},"sweep":{"Sessions":{"window":"2026-11-22T09:00:00Z","x":1}}}`, "unknown field"},
		{`{"version":4,"streams":{}}`, "unsupported value 4"},
	} {
		path := filepath.Join(t.TempDir(), "cp.json")
		if err := os.WriteFile(path, []byte(tc.body), 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := OpenFile(path)
		if err == nil {
			s.Close()
			t.Errorf("%s: opened, want an error naming %s", tc.body, tc.want)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v, want it to name %s and the file", tc.body, err, tc.want)
		}
	}
}
