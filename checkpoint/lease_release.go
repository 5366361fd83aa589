package checkpoint

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/internal/awserr"
)

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

// release lets the lease go after the shard's reader stopped and its final
// checkpoint was saved: to the worker that asked for it (hand-off), or free
// for anyone. finished also records the shard as finished.
func (s *DynamoStore) release(ctx context.Context, stream, shard string, finished bool) error {
	k := leaseKey{stream, shard}
	s.mu.Lock()
	l := s.leases[k]
	if l == nil {
		s.mu.Unlock()
		return nil // lost or never held: nothing to let go
	}
	s.stop(l, errReleased)
	l.releasing = true
	counter, to := l.counter, l.handoffTo
	s.mu.Unlock()
	err := s.writeRelease(ctx, k, counter, to, finished)
	return s.released(k, l, finished, err)
}

// writeRelease writes the release of the lease held at counter: a hand-off
// to the worker to when it is set and live, else (or when the hand-off's
// condition fails) a free lease; finished also marks the shard finished.
// The update is conditional on this worker owning the lease at counter.
func (s *DynamoStore) writeRelease(ctx context.Context, k leaseKey, counter int64, to string, finished bool) error {
	stream, shard := k.stream, k.shard
	now := s.now()
	vals := map[string]types.AttributeValue{
		":me":  &types.AttributeValueMemberS{Value: s.worker},
		":c":   num(counter),
		":c1":  num(counter + 1),
		":now": num(now.UnixMilli()),
	}
	cond := attrOwner + " = :me AND " + attrCounter + " = :c"
	var upd string
	if finished {
		to = ""
		vals[":t"] = &types.AttributeValueMemberBOOL{Value: true}
		upd = "SET " + attrFinished + " = :t, "
	} else {
		upd = "SET "
	}
	update := func(upd, cond string, vals map[string]types.AttributeValue) error {
		return s.retry(ctx, func(ctx context.Context) error {
			_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
				TableName:                 aws.String(s.table),
				Key:                       itemKey(stream, shard),
				UpdateExpression:          aws.String(upd),
				ConditionExpression:       aws.String(cond),
				ExpressionAttributeValues: vals,
			})
			return err
		})
	}
	var err error
	if to != "" && !s.workerLive(ctx, stream, to) {
		s.log.Info("hand-off requester is gone; freeing the lease instead", zap.String("stream", stream), zap.String("shard", shard), zap.String("to", to))
		to = ""
	}
	if to != "" {
		tv := map[string]types.AttributeValue{":to": &types.AttributeValueMemberS{Value: to},
			":exp": num(now.Add(s.leaseD).UnixMilli())}
		for n, v := range vals {
			tv[n] = v
		}
		err = update(upd+attrOwner+" = :to, "+attrCounter+" = :c1, "+attrExpiry+" = :exp, "+attrUpdated+" = :now REMOVE "+attrHandoff,
			cond+" AND "+attrHandoff+" = :to", tv)
		if err == nil {
			s.log.Info("lease handed off", zap.String("stream", stream), zap.String("shard", shard), zap.String("to", to))
		}
	}
	if to == "" || awserr.IsConditionFailed(err) {
		vals[":zero"] = num(0)
		err = update(upd+attrCounter+" = :c1, "+attrExpiry+" = :zero, "+attrUpdated+" = :now REMOVE "+attrOwner+", "+attrHandoff, cond, vals)
		if err == nil {
			s.log.Info("lease released", zap.String("stream", stream), zap.String("shard", shard), zap.Bool("finished", finished))
		}
	}
	return err
}

// released books the outcome of writeRelease: the lease is dropped when
// the write succeeded or the lease was already lost (not an error), and
// kept (for a later Release to try again) when the write failed.
func (s *DynamoStore) released(k leaseKey, l *lease, finished bool, err error) error {
	stream, shard := k.stream, k.shard
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case err == nil:
		s.drop(l, errReleased)
		// The item no longer names this worker at l's counter: nothing to
		// guard against re-adopting.
		delete(s.history, k)
		return nil
	case awserr.IsConditionFailed(err):
		if s.leases[k] == l {
			s.metrics.losses.Inc()
		}
		s.drop(l, ErrLeaseLost)
		s.log.Warn("lease already lost at release", zap.String("stream", stream), zap.String("shard", shard), zap.Bool("finished", finished))
		return nil
	default:
		// Still held (or expiring): a later Release may try again.
		l.releasing = false
		return fmt.Errorf("checkpoint: release %s %s: %w", stream, shard, err)
	}
}

// workerLive reports whether the worker's heartbeat for the stream is
// current (on errors: true, the lease then expires if it is not).
func (s *DynamoStore) workerLive(ctx context.Context, stream, worker string) bool {
	r, err := s.getRow(ctx, leaseKey{workersPrefix + stream, worker})
	return err != nil || (r.exists && !r.expired(s.now()))
}

// ReleaseAll lets go of every lease this worker holds (cancelling their
// assignments) and removes its heartbeats, so other workers take over at
// once. Call it on shutdown after the consumer returned (final checkpoints
// written), before Close.
func (s *DynamoStore) ReleaseAll(ctx context.Context) error {
	s.mu.Lock()
	keys := make([]leaseKey, 0, len(s.leases))
	for k := range s.leases {
		keys = append(keys, k)
	}
	streams := make([]string, 0, len(s.streams))
	for st := range s.streams {
		streams = append(streams, st)
	}
	s.streams = map[string]bool{}
	s.mu.Unlock()
	var errs []error
	for _, k := range keys {
		if err := s.release(ctx, k.stream, k.shard, false); err != nil {
			errs = append(errs, err)
		}
	}
	for _, st := range streams {
		_, err := s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
			TableName: aws.String(s.table),
			Key:       itemKey(workersPrefix+st, s.worker),
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("checkpoint: remove heartbeat of %s: %w", s.worker, err))
		}
	}
	return errors.Join(errs...)
}
