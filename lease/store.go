package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/internal/awserr"
)

// DynamoAPI is the part of the DynamoDB API the lease store uses; a
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

// Defaults of DynamoOptions, chosen for ECS (a stop timeout of 30 s).
const (
	DefaultLeaseDuration = 20 * time.Second
	DefaultRenewEvery    = 5 * time.Second
	// DefaultPruneFinishedAfter is how long finished shards stay recorded.
	DefaultPruneFinishedAfter = 72 * time.Hour
)

// DynamoOptions configures [OpenDynamo].
type DynamoOptions struct {
	// Client talks to DynamoDB (required).
	Client DynamoAPI
	// Table is the checkpoint and lease table (required).
	Table string
	// Create creates the table (PAY_PER_REQUEST) when it does not exist and
	// waits until it is ACTIVE. Without it a missing table is an error.
	Create bool
	// WorkerID names this worker in lease items (required; see
	// [DefaultWorkerID]). Two live processes must never share one.
	WorkerID string
	// LeaseDuration is how long a lease stays valid without renewal
	// (default 20 s). Another worker may take a lease once it expired.
	LeaseDuration time.Duration
	// RenewEvery is the renewal period (default 5 s); it must be well below
	// LeaseDuration (at most a third of it).
	RenewEvery time.Duration
	// SafetyMargin is how long before a lease's expiry this worker stops
	// reading the shard when renewals keep failing (default LeaseDuration/4).
	SafetyMargin time.Duration
	// PruneFinishedAfter is how long a finished shard's item is kept after
	// its last write (default 72 h, well past the stream's 24 h retention,
	// after which the shard is gone from the stream); negative: forever.
	// Heartbeats of workers gone for ten lease durations are deleted too.
	PruneFinishedAfter time.Duration
	// Now is the clock (default time.Now); lease expiries are compared
	// across workers, so their clocks must agree to well within SafetyMargin.
	Now func() time.Time
	// Logger receives lease events (default: no logging).
	Logger *zap.Logger
	// Registerer receives the store's metrics (default: none).
	Registerer prometheus.Registerer
}

// DynamoStore keeps checkpoints and shard leases in one DynamoDB table, so
// that several workers can share a stream. It implements [Store]; with the
// Assign and Release methods it also decides which shards this worker reads
// (the shard package's Assigner).
//
// Table schema: partition key "stream_arn" (S), sort key "shard_id" (S). One
// item per shard (stream_arn = the stream ARN):
//
//	lease_owner     S    worker holding the lease; absent when free
//	lease_counter   N    fencing token, incremented whenever ownership changes
//	lease_expiry_ms N    epoch milliseconds until which the owner may read
//	checkpoint_seq  S    last acknowledged sequence number
//	shard_finished  BOOL the shard was read to its end and acknowledged
//	parent_shards   SS   parent shard IDs
//	handoff_to      S    a worker that asked the owner to hand the lease over
//	updated_ms      N    time of the last write
//
// and one heartbeat item per live worker and stream (stream_arn =
// "workers#" + stream ARN, shard_id = worker ID, lease_expiry_ms), so a
// worker that holds nothing yet still counts when shares are computed, and
// one item per table that `archiver sweep` sweeps (stream_arn = "sweep#" +
// TABLE, shard_id = "cursor"): the sweeper's lease in the same lease
// fields, and its cursor in sweep_cursor_ms (see [DynamoStore.AcquireSweep]).
// Loading a stream's checkpoints is a Query on its partition. Every
// attribute name holds an underscore, so none is a reserved word in
// expressions.
//
// Finished shards stay recorded for PruneFinishedAfter (72 h, past the
// stream's 24 h retention). No worker compares another worker's clock
// with its own: a lease held by another worker counts as expired once
// this worker has seen it unchanged (not renewed) for a lease duration,
// timed on this worker's clock, as KCL does.
//
// Every lease and checkpoint write is conditional on owner and
// lease_counter, so a worker that lost a lease can never overwrite the new
// owner's checkpoint: its Save fails with an error matching [ErrLeaseLost].
//
// Inside, the store is three roles over one table, each a type: the
// table's I/O (leaseTable: rows, the fenced conditional write, retries,
// metrics), the leases this worker holds (leases: taking, renewal,
// watchdogs, assignment, hand-off, release, heartbeats) and the sweeper's
// locks (sweepLocks: a lease per swept table, and its cursor).
// DynamoStore holds them, keeps the checkpoints (Load, Save) and passes
// every other call on to the role that answers it.
type DynamoStore struct {
	*leaseTable // the table's I/O, shared by every role
	leases      *leases
	sweep       sweepLocks
}

const (
	attrStream    = "stream_arn"
	attrShard     = "shard_id"
	attrOwner     = "lease_owner"
	attrCounter   = "lease_counter"
	attrExpiry    = "lease_expiry_ms"
	attrCheckpt   = "checkpoint_seq"
	attrFinished  = "shard_finished"
	attrParents   = "parent_shards"
	attrHandoff   = "handoff_to"
	attrUpdated   = "updated_ms"
	workersPrefix = "workers#"
)

// OpenDynamo opens (and with Create, creates) the lease table and starts the
// renewal timer. Close stops it; ReleaseAll lets every lease go first.
func OpenDynamo(ctx context.Context, o DynamoOptions) (*DynamoStore, error) {
	if o.Client == nil {
		return nil, errors.New("checkpoint: DynamoOptions.Client is nil")
	}
	if o.Table == "" {
		return nil, errors.New("checkpoint: DynamoOptions.Table is empty")
	}
	if o.WorkerID == "" {
		return nil, errors.New("checkpoint: DynamoOptions.WorkerID is empty")
	}
	if o.LeaseDuration == 0 {
		o.LeaseDuration = DefaultLeaseDuration
	}
	if o.RenewEvery == 0 {
		o.RenewEvery = DefaultRenewEvery
		if o.RenewEvery*3 > o.LeaseDuration {
			o.RenewEvery = o.LeaseDuration / 4
		}
	}
	if o.LeaseDuration < 0 || o.RenewEvery < 0 {
		return nil, fmt.Errorf("checkpoint: DynamoOptions.LeaseDuration (%v) and RenewEvery (%v) must be positive", o.LeaseDuration, o.RenewEvery)
	}
	if o.RenewEvery*3 > o.LeaseDuration {
		return nil, fmt.Errorf("checkpoint: DynamoOptions.RenewEvery (%v) must be at most a third of LeaseDuration (%v)", o.RenewEvery, o.LeaseDuration)
	}
	if o.SafetyMargin == 0 {
		o.SafetyMargin = o.LeaseDuration / 4
	}
	if o.SafetyMargin < 0 || o.SafetyMargin >= o.LeaseDuration-o.RenewEvery {
		return nil, fmt.Errorf("checkpoint: DynamoOptions.SafetyMargin (%v) must be positive and below LeaseDuration-RenewEvery (%v)", o.SafetyMargin, o.LeaseDuration-o.RenewEvery)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.PruneFinishedAfter == 0 {
		o.PruneFinishedAfter = DefaultPruneFinishedAfter
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	m, err := newLeaseMetrics(o.Registerer)
	if err != nil {
		return nil, err
	}
	t := &leaseTable{
		client: ownRetries{o.Client}, table: o.Table, worker: o.WorkerID, leaseD: o.LeaseDuration,
		now: o.Now, log: o.Logger.With(zap.String("worker", o.WorkerID), zap.String("lease_table", o.Table)),
		metrics: m, seen: map[leaseKey]seenVersion{},
	}
	if err := t.ensureTable(ctx, o.Create); err != nil {
		return nil, err
	}
	ls := newLeases(t, o.RenewEvery, o.SafetyMargin, o.PruneFinishedAfter)
	return &DynamoStore{leaseTable: t, leases: ls, sweep: sweepLocks{leaseTable: t, leases: ls}}, nil
}

// WorkerID returns the ID this store writes into the leases it owns.
func (s *DynamoStore) WorkerID() string { return s.worker }

// Load returns the checkpoints of every shard of the stream that has one
// (a consistent Query on the stream's partition).
func (s *DynamoStore) Load(ctx context.Context, streamARN string) (map[string]Checkpoint, error) {
	rows, err := s.queryRows(ctx, streamARN)
	if err != nil {
		return nil, err
	}
	out := make(map[string]Checkpoint, len(rows))
	for id, r := range rows {
		if r.checkpoint != "" || r.finished {
			out[id] = Checkpoint{SequenceNumber: r.checkpoint, Finished: r.finished}
		}
	}
	return out, nil
}

// Save writes the shard's checkpoint, conditional on this worker still
// owning the shard's lease (owner and lease counter). It fails with an error
// matching ErrLeaseLost when it does not; throttling is retried until ctx
// ends.
func (s *DynamoStore) Save(ctx context.Context, streamARN, shardID string, cp Checkpoint) error {
	k := leaseKey{streamARN, shardID}
	l, counter := s.leases.fence(k)
	if l == nil {
		return fmt.Errorf("checkpoint: save %s %s: worker %s holds no lease: %w", streamARN, shardID, s.worker, ErrLeaseLost)
	}
	upd := "SET " + attrUpdated + " = :now"
	vals := map[string]types.AttributeValue{":now": num(s.now().UnixMilli())}
	if cp.SequenceNumber != "" {
		upd += ", " + attrCheckpt + " = :seq"
		vals[":seq"] = &types.AttributeValueMemberS{Value: cp.SequenceNumber}
	}
	if cp.Finished {
		upd += ", " + attrFinished + " = :t"
		vals[":t"] = &types.AttributeValueMemberBOOL{Value: true}
	}
	out, err := s.fencedUpdate(ctx, k, counter, upd, "", vals)
	if awserr.IsConditionFailed(err) {
		s.leases.lost(l, "checkpoint write found the lease owned by another worker")
		return fmt.Errorf("checkpoint: save %s %s at %q: %w", streamARN, shardID, cp.SequenceNumber, ErrLeaseLost)
	}
	if err != nil {
		return fmt.Errorf("checkpoint: save %s %s at %q: %w", streamARN, shardID, cp.SequenceNumber, err)
	}
	// The answer also shows a pending hand-off request: act on it now
	// rather than at the next renewal.
	if r, err := decodeRow(out.Attributes); err == nil {
		s.leases.noteHandoff(l, r.handoff)
	}
	return nil
}

// Close stops renewing leases and cancels every assignment's context. It
// does not release leases (they expire); call ReleaseAll first for a
// graceful hand-off.
func (s *DynamoStore) Close() error {
	s.leases.close()
	return nil
}

var errStoreClosed = errors.New("checkpoint: lease store closed")
