package checkpoint

import (
	"context"

	"github.com/ttl-archiver/archiver/shard"
)

// The DynamoDB store decides which shards this worker reads.
var _ shard.Assigner = (*DynamoStore)(nil)

// Assign implements shard.Assigner. Every call it takes free or expired
// leases of ready shards up to this worker's fair share
// (ceil(ready shards / live workers)), takes up leases handed over to it,
// and when it still holds fewer than its share asks the most loaded worker
// for one lease (at most one request outstanding). It returns every lease it
// holds among ready, each with a context cancelled when the lease is lost,
// handed off, or could not be renewed and nears its expiry.
func (s *DynamoStore) Assign(ctx context.Context, streamARN string, ready []shard.Shard) ([]shard.Assignment, error) {
	rs := make([]readyShard, len(ready))
	for i, sh := range ready {
		rs[i] = readyShard{id: sh.ID, parents: sh.Parents}
	}
	// Bounded, so a throttled table cannot hold up the walker's schedule;
	// the next round tries again.
	ctx, cancel := context.WithTimeout(ctx, s.leaseD/2)
	defer cancel()
	got, err := s.assign(ctx, streamARN, rs)
	if err != nil {
		return nil, err
	}
	out := make([]shard.Assignment, len(got))
	for i, a := range got {
		out[i] = shard.Assignment{ShardID: a.shard, Ctx: a.ctx}
	}
	return out, nil
}

// Release implements shard.Assigner: after the shard's reader stopped and
// its final checkpoint was saved, it lets the lease go, conditional on this
// worker still owning it: to the worker that asked for it (hand-off), or
// free for anyone; finished records the shard as finished (it stays
// recorded for PruneFinishedAfter). A lease this worker no longer holds is
// not an error: there is nothing to let go (a finished shard's Finished mark
// was already written by its last Save).
func (s *DynamoStore) Release(ctx context.Context, streamARN, shardID string, finished bool) error {
	return s.release(ctx, streamARN, shardID, finished)
}
