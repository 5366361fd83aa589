package checkpoint

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ttl-archiver/archiver/internal/awserr"
	"github.com/ttl-archiver/archiver/internal/leasetable"
)

// DynamoStore keeps checkpoints in the lease table, so that several
// workers can share a stream: a shard's checkpoint lives in the item of
// its lease (checkpoint_seq, shard_finished; the layout is in package
// lease's doc), and every Save is fenced by that lease. The leases, which
// also decide which shards this worker reads, are the lease package's
// Store; NewDynamo takes them as the [leasetable.Fence] it writes through.
//
// Every checkpoint write is conditional on owner and lease_counter, so a
// worker that lost a lease can never overwrite the new owner's checkpoint:
// its Save fails with an error matching [ErrLeaseLost].
type DynamoStore struct {
	table *leasetable.Table
	fence leasetable.Fence
}

var _ Store = (*DynamoStore)(nil)

// NewDynamo returns the checkpoint store in the table of leases (a
// *lease.Store), each Save fenced by the shard's lease.
func NewDynamo(leases leasetable.Fence) *DynamoStore {
	return &DynamoStore{table: leases.Table(), fence: leases}
}

// Load returns the checkpoints of every shard of the stream that has one
// (a consistent Query on the stream's partition).
func (s *DynamoStore) Load(ctx context.Context, streamARN string) (map[string]Checkpoint, error) {
	rows, err := s.table.QueryRows(ctx, streamARN)
	if err != nil {
		return nil, err
	}
	out := make(map[string]Checkpoint, len(rows))
	for id, r := range rows {
		if r.Checkpoint != "" || r.Finished {
			out[id] = Checkpoint{SequenceNumber: r.Checkpoint, Finished: r.Finished}
		}
	}
	return out, nil
}

// Save writes the shard's checkpoint, conditional on this worker still
// owning the shard's lease (owner and lease counter). It fails with an error
// matching ErrLeaseLost when it does not; throttling is retried until ctx
// ends.
func (s *DynamoStore) Save(ctx context.Context, streamARN, shardID string, cp Checkpoint) error {
	k := leasetable.Key{Stream: streamARN, Shard: shardID}
	l, counter := s.fence.Fence(k)
	if l == nil {
		return fmt.Errorf("checkpoint: save %s %s: worker %s holds no lease: %w", streamARN, shardID, s.table.Worker, ErrLeaseLost)
	}
	upd := "SET " + leasetable.AttrUpdated + " = :now"
	vals := map[string]types.AttributeValue{":now": leasetable.Num(s.table.Now().UnixMilli())}
	if cp.SequenceNumber != "" {
		upd += ", " + leasetable.AttrCheckpoint + " = :seq"
		vals[":seq"] = &types.AttributeValueMemberS{Value: cp.SequenceNumber}
	}
	if cp.Finished {
		upd += ", " + leasetable.AttrFinished + " = :t"
		vals[":t"] = &types.AttributeValueMemberBOOL{Value: true}
	}
	out, err := s.table.FencedUpdate(ctx, k, counter, upd, "", vals)
	if awserr.IsConditionFailed(err) {
		l.Lost("checkpoint write found the lease owned by another worker")
		return fmt.Errorf("checkpoint: save %s %s at %q: %w", streamARN, shardID, cp.SequenceNumber, ErrLeaseLost)
	}
	if err != nil {
		return fmt.Errorf("checkpoint: save %s %s at %q: %w", streamARN, shardID, cp.SequenceNumber, err)
	}
	// The answer also shows a pending hand-off request: act on it now
	// rather than at the next renewal.
	if r, err := leasetable.DecodeRow(out.Attributes); err == nil {
		l.NoteHandoff(r.Handoff)
	}
	return nil
}

// Close does nothing: the leases the store writes through are their
// opener's to release and close (lease.Store's ReleaseAll and Close).
func (s *DynamoStore) Close() error { return nil }
