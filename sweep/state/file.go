package state

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ttl-archiver/archiver/checkpoint"
	"github.com/ttl-archiver/archiver/event"
)

// File keeps the sweeper's cursors in the checkpoint file
// (checkpoint.FileStore's sweep section). The file lock already makes the
// one process using the file the only sweeper of its tables, so the hold
// is immediate unless another caller in this process holds the table:
// then AcquireSweep waits for that release. Holds end with their ctx, on
// release and when the file store closes.
//
// File is safe for concurrent use. Open one File per file store: the holds
// are File's.
type File struct {
	fs *checkpoint.FileStore

	mu    sync.Mutex
	holds map[string]*fileHold // tables a sweeper of this process holds
}

// fileHold is a table a sweeper of this process holds.
type fileHold struct {
	done chan struct{}     // closed on release
	stop func(cause error) // cancels the held context
}

// NewFile returns the sweeper's store in the checkpoint file of fs.
func NewFile(fs *checkpoint.FileStore) *File {
	return &File{fs: fs, holds: map[string]*fileHold{}}
}

// LoadSweepCursor implements [Store]: the table's cursor from the file
// (zero when there is none).
func (f *File) LoadSweepCursor(ctx context.Context, table string) (time.Time, error) {
	return f.fs.SweepCursor(ctx, table)
}

// SaveSweepCursor implements [Store]: it records the table's cursor and
// returns once it is durable in the file (written like the checkpoints).
// This process must hold the table (AcquireSweep).
func (f *File) SaveSweepCursor(ctx context.Context, table string, window time.Time) error {
	if err := checkpoint.CheckSweepCursor(table, window); err != nil {
		return err
	}
	f.mu.Lock()
	held := f.holds[table] != nil
	f.mu.Unlock()
	switch {
	case f.fs.Closed().Err() != nil:
		return fmt.Errorf("checkpoint: file store %s is closed", f.fs.Path())
	case !held:
		return fmt.Errorf("checkpoint: save sweep cursor of %s: this process does not hold the table: %w", table, ErrLeaseLost)
	}
	later, err := f.fs.AdvanceSweepCursor(ctx, table, window)
	if err == nil && !later.IsZero() {
		return fmt.Errorf("checkpoint: save sweep cursor of %s at %s, stored %s: %w", table,
			checkpoint.SweepWindow(window).Format(time.RFC3339Nano), later.Format(time.RFC3339Nano), ErrCursorBackwards)
	}
	return err
}

// AcquireSweep implements [Store]. The hold is immediate unless another
// caller in this process holds the table: then it waits for that release.
// held ends with ctx, on release and when the file store closes.
func (f *File) AcquireSweep(ctx context.Context, table string) (context.Context, func(context.Context) error, error) {
	if err := event.ValidTableName(table); err != nil {
		return nil, nil, fmt.Errorf("checkpoint: acquire sweep of table: %w", err)
	}
	closed := f.fs.Closed()
	for {
		f.mu.Lock()
		if closed.Err() != nil {
			f.mu.Unlock()
			return nil, nil, fmt.Errorf("checkpoint: acquire sweep of %s: file store %s is closed", table, f.fs.Path())
		}
		other := f.holds[table]
		if other == nil {
			held, stop := holdContext(ctx, closed)
			h := &fileHold{done: make(chan struct{}), stop: stop}
			f.holds[table] = h
			f.mu.Unlock()
			return held, func(context.Context) error { f.releaseHold(table, h, errSweepReleased); return nil }, nil
		}
		f.mu.Unlock()
		select {
		case <-other.done:
		case <-closed.Done():
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("checkpoint: acquire sweep of %s: %w", table, context.Cause(ctx))
		}
	}
}

// releaseHold ends h, if it is still the table's hold.
func (f *File) releaseHold(table string, h *fileHold, cause error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.holds[table] != h {
		return
	}
	delete(f.holds, table)
	h.stop(cause)
	close(h.done)
}
