package main

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/ttl-archiver/archiver/checkpoint"
	"github.com/ttl-archiver/archiver/sweep"
)

// sweepStore adapts a checkpoint.SweepStore to the sweep package's
// CursorStore and Locker: checkpoint sits below sweep and does not import
// it, so the adapter lives here, where both are wired.
//
// It also remembers a cursor whose save was cut short because the
// sweeper's context ended (SIGTERM, a lost hold): flush saves it at the
// hand-over, still fenced by the lease.
type sweepStore struct {
	st checkpoint.SweepStore

	mu      sync.Mutex
	unsaved map[string]time.Time // table → cursor not saved
}

var (
	_ sweep.CursorStore = (*sweepStore)(nil)
	_ sweep.Locker      = (*sweepStore)(nil)
)

func newSweepStore(st checkpoint.SweepStore) *sweepStore {
	return &sweepStore{st: st, unsaved: map[string]time.Time{}}
}

// LoadCursor implements sweep.CursorStore.
func (s *sweepStore) LoadCursor(ctx context.Context, table string) (sweep.Cursor, error) {
	w, err := s.st.LoadSweepCursor(ctx, table)
	return sweep.Cursor{Window: w}, err
}

// SaveCursor implements sweep.CursorStore.
func (s *sweepStore) SaveCursor(ctx context.Context, table string, c sweep.Cursor) error {
	err := s.st.SaveSweepCursor(ctx, table, c.Window)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case err == nil:
		delete(s.unsaved, table)
	case ctx.Err() != nil:
		s.unsaved[table] = c.Window
	}
	return err
}

// flush saves the cursor a cancelled SaveCursor left unsaved, if any.
func (s *sweepStore) flush(ctx context.Context, table string) error {
	s.mu.Lock()
	w, ok := s.unsaved[table]
	delete(s.unsaved, table)
	s.mu.Unlock()
	if !ok {
		return nil
	}
	err := s.st.SaveSweepCursor(ctx, table, w)
	if errors.Is(err, checkpoint.ErrCursorBackwards) {
		return nil // a later cursor is stored already
	}
	return err
}

// Acquire implements sweep.Locker. A cursor left unsaved by an earlier
// hold is dropped: the new hold starts from the stored cursor.
func (s *sweepStore) Acquire(ctx context.Context, table string) (context.Context, func(context.Context) error, error) {
	held, release, err := s.st.AcquireSweep(ctx, table)
	if err == nil {
		s.mu.Lock()
		delete(s.unsaved, table)
		s.mu.Unlock()
	}
	return held, release, err
}
