package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// SweepStore keeps the durable cursor of `archiver sweep` (the start of the
// oldest expiration window that may still hold an item that is or will
// become due) per swept table, and makes sure one sweeper at a time sweeps
// a table. Both stores implement it: the file store through its file lock
// (one process per file), the DynamoDB store with a fenced lease in the
// lease table.
//
// The sweep package defines the contract (sweep.CursorStore and
// sweep.Locker) and sits above this package, which never imports it;
// sweep.CheckpointStore adapts a SweepStore to those interfaces.
type SweepStore interface {
	// LoadSweepCursor returns the table's cursor; the zero time when there
	// is none yet.
	LoadSweepCursor(ctx context.Context, table string) (time.Time, error)
	// SaveSweepCursor records window as the table's cursor. It fails with
	// an error matching ErrLeaseLost unless this process holds the table
	// (AcquireSweep), and with one matching ErrCursorBackwards when window
	// is older than the stored cursor, which then stays. The cursor is kept
	// to the millisecond (truncated).
	SaveSweepCursor(ctx context.Context, table string, window time.Time) error
	// AcquireSweep blocks until this process holds the table or ctx ends.
	// held is cancelled when ctx ends or the hold is lost (the sweeper
	// must then stop deleting at once; context.Cause says why); release
	// gives the hold up so another process takes over. A process must stop
	// its sweeper before it acquires the table again.
	AcquireSweep(ctx context.Context, table string) (held context.Context, release func(context.Context) error, err error)
}

var (
	_ SweepStore = (*FileStore)(nil)
	_ SweepStore = (*DynamoStore)(nil)
)

// ErrCursorBackwards is matched (errors.Is) by SaveSweepCursor errors when
// the window is older than the stored cursor: a cursor never moves back.
var ErrCursorBackwards = errors.New("checkpoint: sweep cursor would move backwards")

// errSweepReleased is the cause of a held context after release.
var errSweepReleased = errors.New("checkpoint: sweep hold released")

// checkSweepArgs validates SaveSweepCursor's arguments.
func checkSweepArgs(table string, window time.Time) error {
	if err := validTableName(table); err != nil {
		return fmt.Errorf("checkpoint: sweep cursor of table: %w", err)
	}
	if window.IsZero() || window.Year() < 1970 || window.Year() > 9999 {
		return fmt.Errorf("checkpoint: sweep cursor of %s: window %v is not a time from 1970 to 9999", table, window)
	}
	return nil
}

// sweepWindow is window as stored: UTC, truncated to the millisecond.
func sweepWindow(window time.Time) time.Time {
	return time.UnixMilli(window.UnixMilli()).UTC()
}

// holdContext returns a context derived from ctx that is also cancelled,
// with the same cause, when lost ends. stop detaches it from lost and
// cancels it with cause.
func holdContext(ctx, lost context.Context) (held context.Context, stop func(cause error)) {
	held, cancel := context.WithCancelCause(ctx)
	detach := context.AfterFunc(lost, func() { cancel(context.Cause(lost)) })
	return held, func(cause error) {
		detach()
		cancel(cause)
	}
}
