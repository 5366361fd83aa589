// Package leasetable is the DynamoDB table that checkpoints, shard leases
// and the sweeper's cursors share (the "lease table" of --checkpoint
// dynamodb://TABLE): the one place that names its attributes and reads and
// writes its items. The layout is described in package lease's doc.
//
// It is a leaf shared by three packages, none of which imports another:
// checkpoint (a shard's checkpoint in its item), lease (the leases: taking,
// renewal, hand-off, release, heartbeats, the planner) and sweep/state (the
// sweeper's lock and cursor). It holds no lease: whether this worker may
// write an item is for the leases to know, and a write fenced by a lease
// asks them through [Fence].
package leasetable

import (
	"context"
	"errors"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// DynamoAPI is the part of the DynamoDB API the lease table uses; a
// *dynamodb.Client satisfies it.
type DynamoAPI interface {
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
}

// The table's attributes. Partition key AttrStream, sort key AttrShard;
// every name holds an underscore, so none is a reserved word in
// expressions.
const (
	AttrStream      = "stream_arn"
	AttrShard       = "shard_id"
	AttrOwner       = "lease_owner"
	AttrCounter     = "lease_counter"
	AttrExpiry      = "lease_expiry_ms"
	AttrCheckpoint  = "checkpoint_seq"
	AttrFinished    = "shard_finished"
	AttrParents     = "parent_shards"
	AttrHandoff     = "handoff_to"
	AttrUpdated     = "updated_ms"
	AttrSweepCursor = "sweep_cursor_ms" // sweeper items only
)

// The partitions beside the streams' own (stream_arn = the stream ARN):
// one heartbeat item per live worker and stream (WorkersPrefix + stream
// ARN, shard_id = worker ID), and one item per swept table (SweepPrefix +
// TABLE, shard_id = SweepShard).
const (
	WorkersPrefix = "workers#"
	SweepPrefix   = "sweep#"
	SweepShard    = "cursor"
)

// DefaultPruneFinishedAfter is how long a finished shard stays recorded
// (72 h, well past the stream's 24 h retention), in the table and in the
// checkpoint file alike.
const DefaultPruneFinishedAfter = 72 * time.Hour

// ErrLeaseLost is matched (errors.Is) by the errors of a write fenced by a
// lease this worker no longer holds; checkpoint and lease export it under
// their own names.
var ErrLeaseLost = errors.New("checkpoint: lease lost")

// Fence is the leases this worker holds, as a write fenced by one of them
// sees them: the lease package's Store implements it.
type Fence interface {
	// Table is the table the leases are kept in.
	Table() *Table
	// Fence returns the lease held on k's item and its counter, the
	// fencing token of a write to the item; h is nil when this worker
	// holds none.
	Fence(k Key) (h Held, counter int64)
}

// Held is one lease this worker holds, as a fenced write reports back on
// it.
type Held interface {
	// Lost tells the leases that a write found the item owned by another
	// worker: the lease is dropped and its reader stopped.
	Lost(why string)
	// NoteHandoff acts on a hand-off request (to, the requesting worker;
	// "" when none) seen in the item a write returned.
	NoteHandoff(to string)
}
