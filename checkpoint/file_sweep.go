package checkpoint

import (
	"context"
	"fmt"
	"time"

	"github.com/ttl-archiver/archiver/event"
)

// The checkpoint file's sweep section (format version 3): the cursor of
// each table `archiver sweep` sweeps. The file store keeps the section;
// the sweeper's lock and the rules of its cursor are sweep/state's, whose
// file store wraps this one.

// decodeSweeps checks and converts the sweep section.
func decodeSweeps(version int, in map[string]fileSweepCursor) (map[string]time.Time, error) {
	if len(in) > 0 && version < fileFormatVersionSweep {
		return nil, fmt.Errorf("field sweep: needs version %d, the file says %d", fileFormatVersionSweep, version)
	}
	out := make(map[string]time.Time, len(in))
	for table, c := range in {
		if err := event.ValidTableName(table); err != nil {
			return nil, fmt.Errorf("field sweep: table %w", err)
		}
		w, err := time.Parse(time.RFC3339Nano, c.Window)
		if err != nil {
			return nil, fmt.Errorf("field sweep[%q].window: %q is not an RFC 3339 time", table, c.Window)
		}
		if err := CheckSweepCursor(table, w); err != nil {
			return nil, fmt.Errorf("field sweep[%q].window: %w", table, err)
		}
		out[table] = SweepWindow(w)
	}
	return out, nil
}

// encodeSweeps renders the sweep section.
func encodeSweeps(in map[string]time.Time) map[string]fileSweepCursor {
	out := make(map[string]fileSweepCursor, len(in))
	for table, w := range in {
		out[table] = fileSweepCursor{Window: w.UTC().Format(time.RFC3339Nano)}
	}
	return out
}

// CheckSweepCursor validates a sweep cursor: the table's name, and a
// window from 1970 to 9999.
func CheckSweepCursor(table string, window time.Time) error {
	if err := event.ValidTableName(table); err != nil {
		return fmt.Errorf("checkpoint: sweep cursor of table: %w", err)
	}
	if window.IsZero() || window.Year() < 1970 || window.Year() > 9999 {
		return fmt.Errorf("checkpoint: sweep cursor of %s: window %v is not a time from 1970 to 9999", table, window)
	}
	return nil
}

// SweepWindow is window as a sweep cursor is stored: UTC, truncated to the
// millisecond.
func SweepWindow(window time.Time) time.Time {
	return time.UnixMilli(window.UnixMilli()).UTC()
}

// SweepCursor returns the table's sweep cursor from the file (zero when
// there is none).
func (s *FileStore) SweepCursor(ctx context.Context, table string) (time.Time, error) {
	if err := ctx.Err(); err != nil {
		return time.Time{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return time.Time{}, fmt.Errorf("checkpoint: file store %s is closed", s.path)
	}
	return s.sweeps[table], nil
}

// AdvanceSweepCursor records window (see [SweepWindow]) as the table's
// sweep cursor and returns once it is durable in the file (written like
// Save's checkpoints). A cursor never moves back: when the file keeps a
// later one, nothing is written and that one is returned as later.
func (s *FileStore) AdvanceSweepCursor(ctx context.Context, table string, window time.Time) (later time.Time, err error) {
	if err := CheckSweepCursor(table, window); err != nil {
		return time.Time{}, err
	}
	window = SweepWindow(window)
	s.mu.Lock()
	switch old, ok := s.sweeps[table]; {
	case s.closed:
		s.mu.Unlock()
		return time.Time{}, fmt.Errorf("checkpoint: file store %s is closed", s.path)
	case ok && window.Before(old):
		s.mu.Unlock()
		return old, nil
	case ok && window.Equal(old):
		s.mu.Unlock()
		return time.Time{}, nil
	}
	s.sweeps[table] = window
	s.gen++
	mine := s.gen
	s.mu.Unlock()
	return time.Time{}, s.persist(ctx, mine)
}

// Closed is cancelled, with cause "checkpoint: file store closed", when
// the store closes.
func (s *FileStore) Closed() context.Context { return s.closedCtx }
