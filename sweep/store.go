package sweep

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/ttl-archiver/archiver/sweep/state"
)

// CheckpointStore adapts the --checkpoint store's sweep state, a
// state.Store (plain times), to this package's CursorStore and Locker:
// sweep/state sits below sweep and never imports it.
//
// It also remembers a cursor whose save was cut short because the
// sweeper's context ended (SIGTERM, a lost hold): Flush saves it at the
// hand-over, still fenced by the lease.
type CheckpointStore struct {
	st state.Store

	mu      sync.Mutex
	unsaved map[string]time.Time // table → cursor not saved
}

var (
	_ CursorStore = (*CheckpointStore)(nil)
	_ Locker      = (*CheckpointStore)(nil)
)

// NewCheckpointStore returns the adapter of st.
func NewCheckpointStore(st state.Store) *CheckpointStore {
	return &CheckpointStore{st: st, unsaved: map[string]time.Time{}}
}

// LoadCursor implements CursorStore.
func (s *CheckpointStore) LoadCursor(ctx context.Context, table string) (Cursor, error) {
	w, err := s.st.LoadSweepCursor(ctx, table)
	return Cursor{Window: w}, err
}

// SaveCursor implements CursorStore.
func (s *CheckpointStore) SaveCursor(ctx context.Context, table string, c Cursor) error {
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

// Flush saves the cursor a cancelled SaveCursor left unsaved, if any.
func (s *CheckpointStore) Flush(ctx context.Context, table string) error {
	s.mu.Lock()
	w, ok := s.unsaved[table]
	delete(s.unsaved, table)
	s.mu.Unlock()
	if !ok {
		return nil
	}
	err := s.st.SaveSweepCursor(ctx, table, w)
	if errors.Is(err, state.ErrCursorBackwards) {
		return nil // a later cursor is stored already
	}
	return err
}

// Acquire implements Locker. A cursor left unsaved by an earlier hold is
// dropped: the new hold starts from the stored cursor.
func (s *CheckpointStore) Acquire(ctx context.Context, table string) (context.Context, func(context.Context) error, error) {
	held, release, err := s.st.AcquireSweep(ctx, table)
	if err == nil {
		s.mu.Lock()
		delete(s.unsaved, table)
		s.mu.Unlock()
	}
	return held, release, err
}
