// Package checkpoint stores how far each shard of a stream has been
// processed, so that a restarted archiver resumes where the last one stopped
// and never skips a record.
//
// A checkpoint promises one thing: every record of the shard up to and
// including SequenceNumber was acknowledged by every sink. Resuming reads
// AFTER_SEQUENCE_NUMBER, so a crash re-delivers at most the records after the
// checkpoint and never loses one.
//
// Two stores keep them: [FileStore], a JSON file for one worker (which also
// keeps the file's section of sweep cursors for sweep/state), and
// [DynamoStore], for many workers, in the lease table: a shard's
// checkpoint lives in the item of its lease and every Save is fenced by
// that lease. The leases themselves (which worker reads which shard) are
// package lease's; this package holds no lease code and never imports it.
package checkpoint

import (
	"context"
	"errors"

	"github.com/ttl-archiver/archiver/internal/leasetable"
	"github.com/ttl-archiver/archiver/shard"
)

// Checkpoint is the processing state of one shard: the walker's
// [shard.Position] itself, so a loaded checkpoint is the position the
// walker resumes from. SequenceNumber is the last record of the shard that
// every sink acknowledged (empty when none was yet); Finished is set once
// the shard was closed, read to its end and every one of its records
// acknowledged, and a finished shard's children may be read.
type Checkpoint = shard.Position

// Store persists checkpoints. Implementations are safe for concurrent use.
type Store interface {
	// Load returns the checkpoint of every shard of the stream that has one,
	// in a new map the caller may keep.
	Load(ctx context.Context, streamARN string) (map[string]Checkpoint, error)
	// Save records cp as the shard's checkpoint. A store that fences writers
	// (leases) returns an error matching ErrLeaseLost when this worker no
	// longer owns the shard; the checkpoint is then not written.
	Save(ctx context.Context, streamARN, shardID string, cp Checkpoint) error
	// Close releases the store (and its lock, for the file store).
	Close() error
}

// ErrLeaseLost is matched (errors.Is) by Save errors of a worker that no
// longer owns the shard's lease (the same error as lease.ErrLeaseLost).
var ErrLeaseLost = leasetable.ErrLeaseLost

// DefaultPruneFinishedAfter is how long a finished shard's checkpoint is
// kept (72 h, past the stream's 24 h retention), by the file store and in
// the lease table alike.
const DefaultPruneFinishedAfter = leasetable.DefaultPruneFinishedAfter

// ErrLocked is matched (errors.Is) when a single-worker store is already in
// use by another process.
var ErrLocked = errors.New("checkpoint: store is locked by another process")
