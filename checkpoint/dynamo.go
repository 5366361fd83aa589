package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/internal/awserr"
	"github.com/ttl-archiver/archiver/internal/backoff"
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
type DynamoStore struct {
	client  DynamoAPI
	table   string
	worker  string
	leaseD  time.Duration
	renewD  time.Duration
	margin  time.Duration
	pruneD  time.Duration
	now     func() time.Time
	log     *zap.Logger
	metrics *leaseMetrics

	base       context.Context
	baseCancel context.CancelFunc
	wg         sync.WaitGroup
	renewSem   chan struct{}

	mu       sync.Mutex
	leases   map[leaseKey]*lease
	history  map[leaseKey]int64 // last counter held per shard, until released: never re-adopted
	seen     map[leaseKey]seenVersion
	streams  map[string]bool // streams this worker takes part in (heartbeats)
	closed   bool
	closeErr error

	lastErr error // latest renewal's outcome, for Ready's message
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
	s := &DynamoStore{
		client: ownRetries{o.Client}, table: o.Table, worker: o.WorkerID,
		leaseD: o.LeaseDuration, renewD: o.RenewEvery, margin: o.SafetyMargin, pruneD: o.PruneFinishedAfter,
		now: o.Now, log: o.Logger.With(zap.String("worker", o.WorkerID), zap.String("lease_table", o.Table)),
		metrics:  m,
		renewSem: make(chan struct{}, 16),
		leases:   map[leaseKey]*lease{},
		history:  map[leaseKey]int64{},
		seen:     map[leaseKey]seenVersion{},
		streams:  map[string]bool{},
	}
	if err := s.ensureTable(ctx, o.Create); err != nil {
		return nil, err
	}
	s.base, s.baseCancel = context.WithCancel(context.Background())
	s.wg.Add(1)
	go s.renewLoop()
	return s, nil
}

// WorkerID returns the ID this store writes into the leases it owns.
func (s *DynamoStore) WorkerID() string { return s.worker }

func (s *DynamoStore) ensureTable(ctx context.Context, create bool) error {
	out, err := s.client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(s.table)})
	var nf *types.ResourceNotFoundException
	switch {
	case err == nil:
		if err := checkSchema(out.Table); err != nil {
			return fmt.Errorf("checkpoint: table %q: %w", s.table, err)
		}
		if out.Table.TableStatus == types.TableStatusActive {
			return nil
		}
	case errors.As(err, &nf):
		if !create {
			return fmt.Errorf("checkpoint: lease table %q does not exist (use create=true to create it): %w", s.table, err)
		}
		_, err := s.client.CreateTable(ctx, &dynamodb.CreateTableInput{
			TableName:   aws.String(s.table),
			BillingMode: types.BillingModePayPerRequest,
			AttributeDefinitions: []types.AttributeDefinition{
				{AttributeName: aws.String(attrStream), AttributeType: types.ScalarAttributeTypeS},
				{AttributeName: aws.String(attrShard), AttributeType: types.ScalarAttributeTypeS},
			},
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(attrStream), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(attrShard), KeyType: types.KeyTypeRange},
			},
		})
		var inUse *types.ResourceInUseException
		if err != nil && !errors.As(err, &inUse) { // another worker created it first
			return fmt.Errorf("checkpoint: create lease table %q: %w", s.table, err)
		}
		s.log.Info("created lease table")
	default:
		return fmt.Errorf("checkpoint: describe lease table %q: %w", s.table, err)
	}
	// Wait for ACTIVE.
	wait := backoff.Policy{Min: 50 * time.Millisecond, Max: 2 * time.Second}
	for n := 0; ; n++ {
		out, err := s.client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(s.table)})
		if err == nil && out.Table != nil && out.Table.TableStatus == types.TableStatusActive {
			if err := checkSchema(out.Table); err != nil {
				return fmt.Errorf("checkpoint: table %q: %w", s.table, err)
			}
			return nil
		}
		if err != nil && !errors.As(err, &nf) && !awserr.IsRetryable(err) {
			return fmt.Errorf("checkpoint: describe lease table %q: %w", s.table, err)
		}
		if !backoff.Sleep(ctx, wait.Step(n)) {
			return fmt.Errorf("checkpoint: waiting for lease table %q to become ACTIVE: %w", s.table, ctx.Err())
		}
	}
}

func checkSchema(t *types.TableDescription) error {
	if t == nil {
		return errors.New("DescribeTable returned no table description")
	}
	var hash, rng string
	for _, k := range t.KeySchema {
		switch k.KeyType {
		case types.KeyTypeHash:
			hash = aws.ToString(k.AttributeName)
		case types.KeyTypeRange:
			rng = aws.ToString(k.AttributeName)
		}
	}
	if hash != attrStream || rng != attrShard {
		return fmt.Errorf("key schema is (%q, %q), want partition key %q and sort key %q: not a lease table", hash, rng, attrStream, attrShard)
	}
	return nil
}

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
	s.mu.Lock()
	l := s.leases[k]
	var counter int64
	if l != nil {
		counter = l.counter
	}
	s.mu.Unlock()
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
		s.lost(l, "checkpoint write found the lease owned by another worker")
		return fmt.Errorf("checkpoint: save %s %s at %q: %w", streamARN, shardID, cp.SequenceNumber, ErrLeaseLost)
	}
	if err != nil {
		return fmt.Errorf("checkpoint: save %s %s at %q: %w", streamARN, shardID, cp.SequenceNumber, err)
	}
	// The answer also shows a pending hand-off request: act on it now
	// rather than at the next renewal.
	if r, err := decodeRow(out.Attributes); err == nil {
		s.noteHandoff(l, r.handoff)
	}
	return nil
}

// fencedUpdate applies the update expression upd to k's item, conditional
// on this worker still owning it at counter (and on extra, unless empty);
// it sets :me and :c in vals. Throttling is retried until ctx ends. The
// answer holds the item as updated; when the condition failed, the error's
// ConditionalCheckFailedException holds it as it was.
func (s *DynamoStore) fencedUpdate(ctx context.Context, k leaseKey, counter int64, upd, extra string, vals map[string]types.AttributeValue) (*dynamodb.UpdateItemOutput, error) {
	vals[":me"] = &types.AttributeValueMemberS{Value: s.worker}
	vals[":c"] = num(counter)
	cond := attrOwner + " = :me AND " + attrCounter + " = :c"
	if extra != "" {
		cond += " AND (" + extra + ")"
	}
	var out *dynamodb.UpdateItemOutput
	err := s.retry(ctx, func(ctx context.Context) error {
		var err error
		out, err = s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                           aws.String(s.table),
			Key:                                 itemKey(k.stream, k.shard),
			UpdateExpression:                    aws.String(upd),
			ConditionExpression:                 aws.String(cond),
			ExpressionAttributeValues:           vals,
			ReturnValues:                        types.ReturnValueAllNew,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
		return err
	})
	return out, err
}

// getRow reads k's item (consistent read; throttling retried until ctx
// ends); a missing item is a row that does not exist.
func (s *DynamoStore) getRow(ctx context.Context, k leaseKey) (row, error) {
	var out *dynamodb.GetItemOutput
	err := s.retry(ctx, func(ctx context.Context) error {
		var err error
		out, err = s.client.GetItem(ctx, &dynamodb.GetItemInput{
			TableName: aws.String(s.table), Key: itemKey(k.stream, k.shard), ConsistentRead: aws.Bool(true),
		})
		return err
	})
	if err != nil {
		return row{}, fmt.Errorf("checkpoint: read %s %s in table %s: %w", k.stream, k.shard, s.table, err)
	}
	r, err := decodeRow(out.Item)
	if err != nil {
		return row{}, fmt.Errorf("checkpoint: table %s, %s %s: bad item: %w", s.table, k.stream, k.shard, err)
	}
	s.mu.Lock()
	s.observe(k, &r, s.now())
	s.mu.Unlock()
	return r, nil
}

// Close stops renewing leases and cancels every assignment's context. It
// does not release leases (they expire); call ReleaseAll first for a
// graceful hand-off.
func (s *DynamoStore) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for _, l := range s.leases {
		l.stopTimers()
		l.cancel(errStoreClosed)
	}
	s.mu.Unlock()
	s.baseCancel()
	s.wg.Wait()
	return nil
}

var errStoreClosed = errors.New("checkpoint: lease store closed")
