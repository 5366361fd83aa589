package lease

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/internal/awserr"
	"github.com/ttl-archiver/archiver/internal/leasetable"
)

// Release implements shard.Assigner: after the shard's reader stopped and
// its final checkpoint was saved, it lets the lease go, conditional on this
// worker still owning it: to the worker that asked for it (hand-off), or
// free for anyone; finished records the shard as finished (it stays
// recorded for PruneFinishedAfter). A lease this worker no longer holds is
// not an error: there is nothing to let go (a finished shard's Finished mark
// was already written by its last Save).
func (s *Store) Release(ctx context.Context, streamARN, shardID string, finished bool) error {
	return s.leases.release(ctx, streamARN, shardID, finished)
}

// release lets the lease go after the shard's reader stopped and its final
// checkpoint was saved: to the worker that asked for it (hand-off), or free
// for anyone. finished also records the shard as finished.
func (ls *leases) release(ctx context.Context, stream, shard string, finished bool) error {
	k := leasetable.Key{Stream: stream, Shard: shard}
	ls.mu.Lock()
	l := ls.held[k]
	if l == nil {
		ls.mu.Unlock()
		return nil // lost or never held: nothing to let go
	}
	ls.stop(l, errReleased)
	l.releasing = true
	counter, to := l.counter, l.handoffTo
	ls.mu.Unlock()
	err := ls.writeRelease(ctx, k, counter, to, finished)
	return ls.released(k, l, finished, err)
}

// writeRelease writes the release of the lease held at counter: a hand-off
// to the worker to when it is set and live, else (or when the hand-off's
// condition fails) a free lease; finished also marks the shard finished.
// The update is conditional on this worker owning the lease at counter.
func (ls *leases) writeRelease(ctx context.Context, k leasetable.Key, counter int64, to string, finished bool) error {
	stream, shard := k.Stream, k.Shard
	now := ls.Now()
	vals := map[string]types.AttributeValue{
		":me":  &types.AttributeValueMemberS{Value: ls.Worker},
		":c":   leasetable.Num(counter),
		":c1":  leasetable.Num(counter + 1),
		":now": leasetable.Num(now.UnixMilli()),
	}
	cond := leasetable.AttrOwner + " = :me AND " + leasetable.AttrCounter + " = :c"
	var upd string
	if finished {
		to = ""
		vals[":t"] = &types.AttributeValueMemberBOOL{Value: true}
		upd = "SET " + leasetable.AttrFinished + " = :t, "
	} else {
		upd = "SET "
	}
	update := func(upd, cond string, vals map[string]types.AttributeValue) error {
		return ls.Retry(ctx, func(ctx context.Context) error {
			_, err := ls.Client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
				TableName:                 aws.String(ls.Name),
				Key:                       leasetable.ItemKey(stream, shard),
				UpdateExpression:          aws.String(upd),
				ConditionExpression:       aws.String(cond),
				ExpressionAttributeValues: vals,
			})
			return err
		})
	}
	var err error
	if to != "" && !ls.workerLive(ctx, stream, to) {
		ls.Log.Info("hand-off requester is gone; freeing the lease instead", zap.String("stream", stream), zap.String("shard", shard), zap.String("to", to))
		to = ""
	}
	if to != "" {
		tv := map[string]types.AttributeValue{":to": &types.AttributeValueMemberS{Value: to},
			":exp": leasetable.Num(now.Add(ls.LeaseD).UnixMilli())}
		for n, v := range vals {
			tv[n] = v
		}
		err = update(upd+leasetable.AttrOwner+" = :to, "+leasetable.AttrCounter+" = :c1, "+leasetable.AttrExpiry+" = :exp, "+leasetable.AttrUpdated+" = :now REMOVE "+leasetable.AttrHandoff,
			cond+" AND "+leasetable.AttrHandoff+" = :to", tv)
		if err == nil {
			ls.Log.Info("lease handed off", zap.String("stream", stream), zap.String("shard", shard), zap.String("to", to))
		}
	}
	if to == "" || awserr.IsConditionFailed(err) {
		vals[":zero"] = leasetable.Num(0)
		err = update(upd+leasetable.AttrCounter+" = :c1, "+leasetable.AttrExpiry+" = :zero, "+leasetable.AttrUpdated+" = :now REMOVE "+leasetable.AttrOwner+", "+leasetable.AttrHandoff, cond, vals)
		if err == nil {
			ls.Log.Info("lease released", zap.String("stream", stream), zap.String("shard", shard), zap.Bool("finished", finished))
		}
	}
	return err
}

// released books the outcome of writeRelease: the lease is dropped when
// the write succeeded or the lease was already lost (not an error), and
// kept (for a later Release to try again) when the write failed.
func (ls *leases) released(k leasetable.Key, l *lease, finished bool, err error) error {
	stream, shard := k.Stream, k.Shard
	ls.mu.Lock()
	defer ls.mu.Unlock()
	switch {
	case err == nil:
		ls.drop(l, errReleased)
		// The item no longer names this worker at l's counter: nothing to
		// guard against re-adopting.
		delete(ls.history, k)
		return nil
	case awserr.IsConditionFailed(err):
		if ls.held[k] == l {
			ls.metrics.losses.Inc()
		}
		ls.drop(l, ErrLeaseLost)
		ls.Log.Warn("lease already lost at release", zap.String("stream", stream), zap.String("shard", shard), zap.Bool("finished", finished))
		return nil
	default:
		// Still held (or expiring): a later Release may try again.
		l.releasing = false
		return fmt.Errorf("checkpoint: release %s %s: %w", stream, shard, err)
	}
}

// workerLive reports whether the worker's heartbeat for the stream is
// current (on errors: true, the lease then expires if it is not).
func (ls *leases) workerLive(ctx context.Context, stream, worker string) bool {
	r, err := ls.GetRow(ctx, leasetable.Key{Stream: leasetable.WorkersPrefix + stream, Shard: worker})
	return err != nil || (r.Exists && !r.Expired(ls.Now()))
}

// ReleaseAll lets go of every lease this worker holds (cancelling their
// assignments) and removes its heartbeats, so other workers take over at
// once. Call it on shutdown after the consumer returned (final checkpoints
// written), before Close.
func (s *Store) ReleaseAll(ctx context.Context) error { return s.leases.releaseAll(ctx) }

// releaseAll is ReleaseAll.
func (ls *leases) releaseAll(ctx context.Context) error {
	ls.mu.Lock()
	keys := make([]leasetable.Key, 0, len(ls.held))
	for k := range ls.held {
		keys = append(keys, k)
	}
	streams := make([]string, 0, len(ls.streams))
	for st := range ls.streams {
		streams = append(streams, st)
	}
	ls.streams = map[string]bool{}
	ls.mu.Unlock()
	var errs []error
	for _, k := range keys {
		if err := ls.release(ctx, k.Stream, k.Shard, false); err != nil {
			errs = append(errs, err)
		}
	}
	for _, st := range streams {
		_, err := ls.Client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
			TableName: aws.String(ls.Name),
			Key:       leasetable.ItemKey(leasetable.WorkersPrefix+st, ls.Worker),
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("checkpoint: remove heartbeat of %s: %w", ls.Worker, err))
		}
	}
	return errors.Join(errs...)
}
