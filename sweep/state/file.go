package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// errFileStoreClosed is the cause of a held context when the file store
// closes.
var errFileStoreClosed = errors.New("checkpoint: file store closed")

// fileHold is a table a sweeper of this process holds.
type fileHold struct {
	done chan struct{}     // closed on release
	stop func(cause error) // cancels the held context
}

// decodeSweeps checks and converts the sweep section.
func decodeSweeps(version int, in map[string]fileSweepCursor) (map[string]time.Time, error) {
	if len(in) > 0 && version < fileFormatVersionSweep {
		return nil, fmt.Errorf("field sweep: needs version %d, the file says %d", fileFormatVersionSweep, version)
	}
	out := make(map[string]time.Time, len(in))
	for table, c := range in {
		if err := validTableName(table); err != nil {
			return nil, fmt.Errorf("field sweep: table %w", err)
		}
		w, err := time.Parse(time.RFC3339Nano, c.Window)
		if err != nil {
			return nil, fmt.Errorf("field sweep[%q].window: %q is not an RFC 3339 time", table, c.Window)
		}
		if err := checkSweepArgs(table, w); err != nil {
			return nil, fmt.Errorf("field sweep[%q].window: %w", table, err)
		}
		out[table] = sweepWindow(w)
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

// LoadSweepCursor implements [SweepStore]: the table's cursor from the
// file (zero when there is none).
func (s *FileStore) LoadSweepCursor(ctx context.Context, table string) (time.Time, error) {
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

// SaveSweepCursor implements [SweepStore]: it records the table's cursor
// and returns once it is durable in the file (written like Save's
// checkpoints). This process must hold the table (AcquireSweep).
func (s *FileStore) SaveSweepCursor(ctx context.Context, table string, window time.Time) error {
	if err := checkSweepArgs(table, window); err != nil {
		return err
	}
	window = sweepWindow(window)
	s.mu.Lock()
	switch old, ok := s.sweeps[table]; {
	case s.closed:
		s.mu.Unlock()
		return fmt.Errorf("checkpoint: file store %s is closed", s.path)
	case s.holds[table] == nil:
		s.mu.Unlock()
		return fmt.Errorf("checkpoint: save sweep cursor of %s: this process does not hold the table: %w", table, ErrLeaseLost)
	case ok && window.Before(old):
		s.mu.Unlock()
		return fmt.Errorf("checkpoint: save sweep cursor of %s at %s, stored %s: %w", table,
			window.Format(time.RFC3339Nano), old.Format(time.RFC3339Nano), ErrCursorBackwards)
	case ok && window.Equal(old):
		s.mu.Unlock()
		return nil
	}
	s.sweeps[table] = window
	s.gen++
	mine := s.gen
	s.mu.Unlock()
	return s.persist(ctx, mine)
}

// AcquireSweep implements [SweepStore]. The file lock already makes this
// process the only one using the file, so the hold is immediate unless
// another caller in this process holds the table: then it waits for that
// release. held ends with ctx, on release and when the store closes.
func (s *FileStore) AcquireSweep(ctx context.Context, table string) (context.Context, func(context.Context) error, error) {
	if err := validTableName(table); err != nil {
		return nil, nil, fmt.Errorf("checkpoint: acquire sweep of table: %w", err)
	}
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, nil, fmt.Errorf("checkpoint: acquire sweep of %s: file store %s is closed", table, s.path)
		}
		other := s.holds[table]
		if other == nil {
			held, cancel := context.WithCancelCause(ctx)
			h := &fileHold{done: make(chan struct{}), stop: cancel}
			s.holds[table] = h
			s.mu.Unlock()
			return held, func(context.Context) error { s.releaseHold(table, h, errSweepReleased); return nil }, nil
		}
		s.mu.Unlock()
		select {
		case <-other.done:
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("checkpoint: acquire sweep of %s: %w", table, context.Cause(ctx))
		}
	}
}

// releaseHold ends h, if it is still the table's hold.
func (s *FileStore) releaseHold(table string, h *fileHold, cause error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holds[table] != h {
		return
	}
	delete(s.holds, table)
	h.stop(cause)
	close(h.done)
}

// dropHolds ends every hold (the store closes). s.mu is held.
func (s *FileStore) dropHolds(cause error) {
	for table, h := range s.holds {
		delete(s.holds, table)
		h.stop(cause)
		close(h.done)
	}
}
