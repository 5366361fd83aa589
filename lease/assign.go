package lease

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/internal/awserr"
	"github.com/ttl-archiver/archiver/internal/leasetable"
	"github.com/ttl-archiver/archiver/shard"
)

// The DynamoDB store decides which shards this worker reads.
var _ shard.Assigner = (*Store)(nil)

// Assign implements shard.Assigner. Every call it takes free or expired
// leases of ready shards up to this worker's fair share
// (ceil(ready shards / live workers)), takes up leases handed over to it,
// and when it still holds fewer than its share asks the most loaded worker
// for one lease (at most one request outstanding). It returns every lease it
// holds among ready, each with a context cancelled when the lease is lost,
// handed off, or could not be renewed and nears its expiry.
func (s *Store) Assign(ctx context.Context, streamARN string, ready []shard.Shard) ([]shard.Assignment, error) {
	rs := make([]readyShard, len(ready))
	for i, sh := range ready {
		rs[i] = readyShard{id: sh.ID, parents: sh.Parents}
	}
	// Bounded, so a throttled table cannot hold up the walker's schedule;
	// the next round tries again.
	ctx, cancel := context.WithTimeout(ctx, s.table.LeaseD/2)
	defer cancel()
	got, err := s.leases.assign(ctx, streamARN, rs)
	if err != nil {
		return nil, err
	}
	out := make([]shard.Assignment, len(got))
	for i, a := range got {
		out[i] = shard.Assignment{ShardID: a.shard, Ctx: a.ctx}
	}
	return out, nil
}

// assigned is one shard this worker may read until ctx is cancelled.
type assigned struct {
	shard string
	ctx   context.Context
}

// assign is the Assigner logic: read the stream's lease items and
// heartbeats, plan the round ([planLeases]), then take free or expired
// leases up to this worker's fair share, adopt leases handed over to it,
// ask the most loaded worker for at most one lease per round, and return
// every held lease of a ready shard.
func (ls *leases) assign(ctx context.Context, stream string, ready []readyShard) ([]assigned, error) {
	ls.mu.Lock()
	if ls.closed {
		ls.mu.Unlock()
		return nil, fmt.Errorf("checkpoint: assign %s: %w", stream, errStoreClosed)
	}
	first := !ls.streams[stream]
	ls.streams[stream] = true
	ls.mu.Unlock()
	if first {
		ls.heartbeat(stream)
	}
	rows, err := ls.QueryRows(ctx, stream)
	if err != nil {
		return nil, err
	}
	beats, err := ls.QueryRows(ctx, leasetable.WorkersPrefix+stream)
	if err != nil {
		return nil, err
	}
	now := ls.Now()
	ls.prune(ctx, stream, rows, beats, now)
	plan := planLeases(ls.leaseView(stream, ready, rows, beats, now))

	mine := plan.mine
	for _, r := range plan.adopt {
		if ls.adopt(ctx, stream, r) {
			mine++
		}
	}
	for _, f := range plan.free {
		if !plan.takeFree(f, mine) {
			if !f.row.Exists {
				ls.register(ctx, stream, f.shard, now) // so its wait shows
			}
			continue
		}
		if ls.take(ctx, stream, f.shard, f.row) {
			mine++
		}
	}
	if victim, r, ok := plan.handoff(mine); ok {
		ls.requestHandoff(ctx, stream, victim, r, plan.counts[victim], mine)
	}

	ls.mu.Lock()
	defer ls.mu.Unlock()
	var out []assigned
	for _, rs := range ready {
		if l := ls.held[leasetable.Key{Stream: stream, Shard: rs.id}]; l != nil && !l.stopping {
			out = append(out, assigned{shard: rs.id, ctx: l.ctx})
		}
	}
	return out, nil
}

// leaseView snapshots what planning reads of this worker's own leases of
// the stream, beside the rows and heartbeats read from the table.
func (ls *leases) leaseView(stream string, ready []readyShard, rows, beats map[string]leasetable.Row, now time.Time) leaseView {
	v := leaseView{me: ls.Worker, now: now, leaseD: ls.LeaseD, ready: ready, rows: rows, beats: beats,
		held: map[string]bool{}, history: map[string]int64{}}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for k, l := range ls.held {
		if k.Stream == stream {
			v.held[k.Shard] = !l.stopping
		}
	}
	for k, c := range ls.history {
		if k.Stream == stream {
			v.history[k.Shard] = c
		}
	}
	return v
}

// prune deletes (a few per round) heartbeats of workers gone for ten lease
// durations and finished shards' items older than PruneFinishedAfter. Each
// delete is conditional on the item being unchanged since it was read.
func (ls *leases) prune(ctx context.Context, stream string, rows, beats map[string]leasetable.Row, now time.Time) {
	const perRound = 10
	n := 0
	del := func(partition, sk, cond string, vals map[string]types.AttributeValue) {
		n++
		_, err := ls.Client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
			TableName: aws.String(ls.Name), Key: leasetable.ItemKey(partition, sk),
			ConditionExpression: aws.String(cond), ExpressionAttributeValues: vals,
		})
		if err != nil && !awserr.IsConditionFailed(err) {
			ls.Log.Debug("pruning lease table item failed", zap.String("partition", partition), zap.String("item", sk), zap.Error(err))
		}
	}
	for w, b := range beats {
		if n >= perRound {
			return
		}
		if w != ls.Worker && b.Expired(now.Add(-10*ls.LeaseD)) {
			del(leasetable.WorkersPrefix+stream, w, leasetable.AttrExpiry+" = :e", map[string]types.AttributeValue{":e": leasetable.Num(b.ExpiryMS)})
			delete(beats, w)
		}
	}
	if ls.pruneD < 0 {
		return
	}
	for id, r := range rows {
		if n >= perRound {
			return
		}
		if r.Finished && r.Owner == "" && r.UpdatedMS > 0 && r.UpdatedMS < now.Add(-ls.pruneD).UnixMilli() {
			del(stream, id, leasetable.AttrFinished+" = :t AND "+leasetable.AttrUpdated+" = :u AND attribute_not_exists("+leasetable.AttrOwner+")",
				map[string]types.AttributeValue{":t": &types.AttributeValueMemberBOOL{Value: true}, ":u": leasetable.Num(r.UpdatedMS)})
			delete(rows, id)
		}
	}
}

// take acquires a free or expired lease (or creates the shard's item).
func (ls *leases) take(ctx context.Context, stream string, rs readyShard, r leasetable.Row) bool {
	now := ls.Now()
	exp := now.Add(ls.LeaseD)
	var err error
	counter := r.Counter + 1
	if !r.Exists {
		item := leasetable.ItemKey(stream, rs.id)
		item[leasetable.AttrOwner] = &types.AttributeValueMemberS{Value: ls.Worker}
		item[leasetable.AttrCounter] = leasetable.Num(counter)
		item[leasetable.AttrExpiry] = leasetable.Num(exp.UnixMilli())
		item[leasetable.AttrUpdated] = leasetable.Num(now.UnixMilli())
		if len(rs.parents) > 0 {
			item[leasetable.AttrParents] = &types.AttributeValueMemberSS{Value: rs.parents}
		}
		err = ls.Retry(ctx, func(ctx context.Context) error {
			_, err := ls.Client.PutItem(ctx, &dynamodb.PutItemInput{
				TableName:           aws.String(ls.Name),
				Item:                item,
				ConditionExpression: aws.String("attribute_not_exists(" + leasetable.AttrStream + ")"),
			})
			return err
		})
	} else {
		cond := leasetable.AttrCounter + " = :c AND attribute_not_exists(" + leasetable.AttrFinished + ") AND "
		vals := map[string]types.AttributeValue{
			":me":  &types.AttributeValueMemberS{Value: ls.Worker},
			":c":   leasetable.Num(r.Counter),
			":c1":  leasetable.Num(counter),
			":exp": leasetable.Num(exp.UnixMilli()),
			":now": leasetable.Num(now.UnixMilli()),
		}
		if r.Owner == "" {
			cond += "attribute_not_exists(" + leasetable.AttrOwner + ")"
		} else {
			// Expired: the owner has not renewed since we read the item.
			cond += leasetable.AttrOwner + " = :old AND " + leasetable.AttrExpiry + " = :e"
			vals[":old"] = &types.AttributeValueMemberS{Value: r.Owner}
			vals[":e"] = leasetable.Num(r.ExpiryMS)
		}
		upd := "SET " + leasetable.AttrOwner + " = :me, " + leasetable.AttrCounter + " = :c1, " + leasetable.AttrExpiry + " = :exp, " + leasetable.AttrUpdated + " = :now"
		if len(r.Parents) == 0 && len(rs.parents) > 0 {
			upd += ", " + leasetable.AttrParents + " = :parents"
			vals[":parents"] = &types.AttributeValueMemberSS{Value: rs.parents}
		}
		upd += " REMOVE " + leasetable.AttrHandoff
		err = ls.Retry(ctx, func(ctx context.Context) error {
			_, err := ls.Client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
				TableName:                 aws.String(ls.Name),
				Key:                       leasetable.ItemKey(stream, rs.id),
				UpdateExpression:          aws.String(upd),
				ConditionExpression:       aws.String(cond),
				ExpressionAttributeValues: vals,
			})
			return err
		})
	}
	if err != nil {
		if !awserr.IsConditionFailed(err) {
			ls.Log.Warn("taking lease failed", zap.String("stream", stream), zap.String("shard", rs.id), zap.Error(err))
		}
		return false
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.closed {
		return false
	}
	ls.hold(leasetable.Key{Stream: stream, Shard: rs.id}, counter, now.Add(ls.LeaseD))
	ls.metrics.takes.Inc()
	ls.Log.Info("lease taken", zap.String("stream", stream), zap.String("shard", rs.id),
		zap.String("from", r.Owner), zap.Int64("counter", counter))
	return true
}

// register records a ready shard nobody leased yet, unowned, so the time it
// has been waiting shows in its item (updated_ms).
func (ls *leases) register(ctx context.Context, stream string, rs readyShard, now time.Time) {
	item := leasetable.ItemKey(stream, rs.id)
	item[leasetable.AttrCounter] = leasetable.Num(0)
	item[leasetable.AttrUpdated] = leasetable.Num(now.UnixMilli())
	if len(rs.parents) > 0 {
		item[leasetable.AttrParents] = &types.AttributeValueMemberSS{Value: rs.parents}
	}
	_, err := ls.Client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:           aws.String(ls.Name),
		Item:                item,
		ConditionExpression: aws.String("attribute_not_exists(" + leasetable.AttrStream + ")"),
	})
	if err != nil && !awserr.IsConditionFailed(err) {
		ls.Log.Debug("registering shard failed", zap.String("stream", stream), zap.String("shard", rs.id), zap.Error(err))
	}
}

// adopt takes up a lease another worker handed over to this one (or one
// this worker ID held before a restart).
func (ls *leases) adopt(ctx context.Context, stream string, r leasetable.Row) bool {
	now := ls.Now()
	counter := r.Counter + 1
	err := ls.Retry(ctx, func(ctx context.Context) error {
		_, err := ls.Client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:           aws.String(ls.Name),
			Key:                 leasetable.ItemKey(stream, r.Shard),
			UpdateExpression:    aws.String("SET " + leasetable.AttrCounter + " = :c1, " + leasetable.AttrExpiry + " = :exp, " + leasetable.AttrUpdated + " = :now REMOVE " + leasetable.AttrHandoff),
			ConditionExpression: aws.String(leasetable.AttrOwner + " = :me AND " + leasetable.AttrCounter + " = :c"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":me":  &types.AttributeValueMemberS{Value: ls.Worker},
				":c":   leasetable.Num(r.Counter),
				":c1":  leasetable.Num(counter),
				":exp": leasetable.Num(now.Add(ls.LeaseD).UnixMilli()),
				":now": leasetable.Num(now.UnixMilli()),
			},
		})
		return err
	})
	if err != nil {
		if !awserr.IsConditionFailed(err) {
			ls.Log.Warn("adopting handed-over lease failed", zap.String("stream", stream), zap.String("shard", r.Shard), zap.Error(err))
		}
		return false
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.closed {
		return false
	}
	ls.hold(leasetable.Key{Stream: stream, Shard: r.Shard}, counter, now.Add(ls.LeaseD))
	ls.metrics.steals.Inc()
	ls.Log.Info("lease received by hand-off", zap.String("stream", stream), zap.String("shard", r.Shard), zap.Int64("counter", counter))
	return true
}

// requestHandoff asks victim, which holds theirs leases, to hand r's
// lease over to this worker, which holds mine.
func (ls *leases) requestHandoff(ctx context.Context, stream, victim string, r leasetable.Row, theirs, mine int) {
	err := ls.Retry(ctx, func(ctx context.Context) error {
		_, err := ls.Client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:           aws.String(ls.Name),
			Key:                 leasetable.ItemKey(stream, r.Shard),
			UpdateExpression:    aws.String("SET " + leasetable.AttrHandoff + " = :me"),
			ConditionExpression: aws.String(leasetable.AttrOwner + " = :o AND " + leasetable.AttrCounter + " = :c AND attribute_not_exists(" + leasetable.AttrHandoff + ")"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":me": &types.AttributeValueMemberS{Value: ls.Worker},
				":o":  &types.AttributeValueMemberS{Value: victim},
				":c":  leasetable.Num(r.Counter),
			},
		})
		return err
	})
	if err != nil {
		if !awserr.IsConditionFailed(err) {
			ls.Log.Warn("hand-off request failed", zap.String("stream", stream), zap.String("shard", r.Shard), zap.Error(err))
		}
		return
	}
	ls.Log.Info("hand-off requested", zap.String("stream", stream), zap.String("shard", r.Shard),
		zap.String("from", victim), zap.Int("theirs", theirs), zap.Int("mine", mine))
}
