// Package state keeps what `archiver sweep` must find again after a
// restart and share with no second sweeper: the durable cursor of each
// swept table (the start of the oldest expiration window that may still
// hold an item that is or will become due) and the lock that lets one
// sweeper at a time sweep a table. It keeps them where the --checkpoint
// store is:
//
//   - [Dynamo], in the lease table of `archiver run` (dynamodb://): one
//     item per swept table (stream_arn = "sweep#" + TABLE, shard_id =
//     "cursor"), whose lease, kept by package lease like a shard's, is
//     the lock, and whose sweep_cursor_ms, written fenced by that lease,
//     is the cursor;
//   - [File], in the checkpoint file (file://): its sweep section, kept by
//     checkpoint.FileStore (format version 3, written only once a cursor
//     exists); the file's flock already makes one process the only
//     sweeper, so File's lock only orders the callers inside it.
//
// The sweep package defines the contract (sweep.CursorStore and
// sweep.Locker) and sits above this package, which never imports it;
// sweep.CheckpointStore adapts a [Store] to those interfaces.
package state

import (
	"context"
	"errors"
	"time"

	"github.com/ttl-archiver/archiver/internal/leasetable"
)

// Store keeps the sweeper's cursor per swept table and makes sure one
// sweeper at a time sweeps a table.
type Store interface {
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
	_ Store = (*File)(nil)
	_ Store = (*Dynamo)(nil)
)

// ErrCursorBackwards is matched (errors.Is) by SaveSweepCursor errors when
// the window is older than the stored cursor: a cursor never moves back.
var ErrCursorBackwards = errors.New("checkpoint: sweep cursor would move backwards")

// ErrLeaseLost is matched (errors.Is) by SaveSweepCursor errors when this
// process does not hold the table (the same error as lease.ErrLeaseLost).
var ErrLeaseLost = leasetable.ErrLeaseLost

// errSweepReleased is the cause of a held context after release.
var errSweepReleased = errors.New("checkpoint: sweep hold released")

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
