package checkpoint

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/internal/awserr"
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
	rows, err := ls.queryRows(ctx, stream)
	if err != nil {
		return nil, err
	}
	beats, err := ls.queryRows(ctx, workersPrefix+stream)
	if err != nil {
		return nil, err
	}
	now := ls.now()
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
			if !f.row.exists {
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
		if l := ls.held[leaseKey{stream, rs.id}]; l != nil && !l.stopping {
			out = append(out, assigned{shard: rs.id, ctx: l.ctx})
		}
	}
	return out, nil
}

// leaseView snapshots what planning reads of this worker's own leases of
// the stream, beside the rows and heartbeats read from the table.
func (ls *leases) leaseView(stream string, ready []readyShard, rows, beats map[string]row, now time.Time) leaseView {
	v := leaseView{me: ls.worker, now: now, leaseD: ls.leaseD, ready: ready, rows: rows, beats: beats,
		held: map[string]bool{}, history: map[string]int64{}}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for k, l := range ls.held {
		if k.stream == stream {
			v.held[k.shard] = !l.stopping
		}
	}
	for k, c := range ls.history {
		if k.stream == stream {
			v.history[k.shard] = c
		}
	}
	return v
}

// prune deletes (a few per round) heartbeats of workers gone for ten lease
// durations and finished shards' items older than PruneFinishedAfter. Each
// delete is conditional on the item being unchanged since it was read.
func (ls *leases) prune(ctx context.Context, stream string, rows, beats map[string]row, now time.Time) {
	const perRound = 10
	n := 0
	del := func(partition, sk, cond string, vals map[string]types.AttributeValue) {
		n++
		_, err := ls.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
			TableName: aws.String(ls.table), Key: itemKey(partition, sk),
			ConditionExpression: aws.String(cond), ExpressionAttributeValues: vals,
		})
		if err != nil && !awserr.IsConditionFailed(err) {
			ls.log.Debug("pruning lease table item failed", zap.String("partition", partition), zap.String("item", sk), zap.Error(err))
		}
	}
	for w, b := range beats {
		if n >= perRound {
			return
		}
		if w != ls.worker && b.expired(now.Add(-10*ls.leaseD)) {
			del(workersPrefix+stream, w, attrExpiry+" = :e", map[string]types.AttributeValue{":e": num(b.expiryMS)})
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
		if r.finished && r.owner == "" && r.updatedMS > 0 && r.updatedMS < now.Add(-ls.pruneD).UnixMilli() {
			del(stream, id, attrFinished+" = :t AND "+attrUpdated+" = :u AND attribute_not_exists("+attrOwner+")",
				map[string]types.AttributeValue{":t": &types.AttributeValueMemberBOOL{Value: true}, ":u": num(r.updatedMS)})
			delete(rows, id)
		}
	}
}

// take acquires a free or expired lease (or creates the shard's item).
func (ls *leases) take(ctx context.Context, stream string, rs readyShard, r row) bool {
	now := ls.now()
	exp := now.Add(ls.leaseD)
	var err error
	counter := r.counter + 1
	if !r.exists {
		item := itemKey(stream, rs.id)
		item[attrOwner] = &types.AttributeValueMemberS{Value: ls.worker}
		item[attrCounter] = num(counter)
		item[attrExpiry] = num(exp.UnixMilli())
		item[attrUpdated] = num(now.UnixMilli())
		if len(rs.parents) > 0 {
			item[attrParents] = &types.AttributeValueMemberSS{Value: rs.parents}
		}
		err = ls.retry(ctx, func(ctx context.Context) error {
			_, err := ls.client.PutItem(ctx, &dynamodb.PutItemInput{
				TableName:           aws.String(ls.table),
				Item:                item,
				ConditionExpression: aws.String("attribute_not_exists(" + attrStream + ")"),
			})
			return err
		})
	} else {
		cond := attrCounter + " = :c AND attribute_not_exists(" + attrFinished + ") AND "
		vals := map[string]types.AttributeValue{
			":me":  &types.AttributeValueMemberS{Value: ls.worker},
			":c":   num(r.counter),
			":c1":  num(counter),
			":exp": num(exp.UnixMilli()),
			":now": num(now.UnixMilli()),
		}
		if r.owner == "" {
			cond += "attribute_not_exists(" + attrOwner + ")"
		} else {
			// Expired: the owner has not renewed since we read the item.
			cond += attrOwner + " = :old AND " + attrExpiry + " = :e"
			vals[":old"] = &types.AttributeValueMemberS{Value: r.owner}
			vals[":e"] = num(r.expiryMS)
		}
		upd := "SET " + attrOwner + " = :me, " + attrCounter + " = :c1, " + attrExpiry + " = :exp, " + attrUpdated + " = :now"
		if len(r.parents) == 0 && len(rs.parents) > 0 {
			upd += ", " + attrParents + " = :parents"
			vals[":parents"] = &types.AttributeValueMemberSS{Value: rs.parents}
		}
		upd += " REMOVE " + attrHandoff
		err = ls.retry(ctx, func(ctx context.Context) error {
			_, err := ls.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
				TableName:                 aws.String(ls.table),
				Key:                       itemKey(stream, rs.id),
				UpdateExpression:          aws.String(upd),
				ConditionExpression:       aws.String(cond),
				ExpressionAttributeValues: vals,
			})
			return err
		})
	}
	if err != nil {
		if !awserr.IsConditionFailed(err) {
			ls.log.Warn("taking lease failed", zap.String("stream", stream), zap.String("shard", rs.id), zap.Error(err))
		}
		return false
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.closed {
		return false
	}
	ls.hold(leaseKey{stream, rs.id}, counter, now.Add(ls.leaseD))
	ls.metrics.takes.Inc()
	ls.log.Info("lease taken", zap.String("stream", stream), zap.String("shard", rs.id),
		zap.String("from", r.owner), zap.Int64("counter", counter))
	return true
}

// register records a ready shard nobody leased yet, unowned, so the time it
// has been waiting shows in its item (updated_ms).
func (ls *leases) register(ctx context.Context, stream string, rs readyShard, now time.Time) {
	item := itemKey(stream, rs.id)
	item[attrCounter] = num(0)
	item[attrUpdated] = num(now.UnixMilli())
	if len(rs.parents) > 0 {
		item[attrParents] = &types.AttributeValueMemberSS{Value: rs.parents}
	}
	_, err := ls.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:           aws.String(ls.table),
		Item:                item,
		ConditionExpression: aws.String("attribute_not_exists(" + attrStream + ")"),
	})
	if err != nil && !awserr.IsConditionFailed(err) {
		ls.log.Debug("registering shard failed", zap.String("stream", stream), zap.String("shard", rs.id), zap.Error(err))
	}
}

// adopt takes up a lease another worker handed over to this one (or one
// this worker ID held before a restart).
func (ls *leases) adopt(ctx context.Context, stream string, r row) bool {
	now := ls.now()
	counter := r.counter + 1
	err := ls.retry(ctx, func(ctx context.Context) error {
		_, err := ls.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:           aws.String(ls.table),
			Key:                 itemKey(stream, r.shard),
			UpdateExpression:    aws.String("SET " + attrCounter + " = :c1, " + attrExpiry + " = :exp, " + attrUpdated + " = :now REMOVE " + attrHandoff),
			ConditionExpression: aws.String(attrOwner + " = :me AND " + attrCounter + " = :c"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":me":  &types.AttributeValueMemberS{Value: ls.worker},
				":c":   num(r.counter),
				":c1":  num(counter),
				":exp": num(now.Add(ls.leaseD).UnixMilli()),
				":now": num(now.UnixMilli()),
			},
		})
		return err
	})
	if err != nil {
		if !awserr.IsConditionFailed(err) {
			ls.log.Warn("adopting handed-over lease failed", zap.String("stream", stream), zap.String("shard", r.shard), zap.Error(err))
		}
		return false
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.closed {
		return false
	}
	ls.hold(leaseKey{stream, r.shard}, counter, now.Add(ls.leaseD))
	ls.metrics.steals.Inc()
	ls.log.Info("lease received by hand-off", zap.String("stream", stream), zap.String("shard", r.shard), zap.Int64("counter", counter))
	return true
}

// requestHandoff asks victim, which holds theirs leases, to hand r's
// lease over to this worker, which holds mine.
func (ls *leases) requestHandoff(ctx context.Context, stream, victim string, r row, theirs, mine int) {
	err := ls.retry(ctx, func(ctx context.Context) error {
		_, err := ls.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:           aws.String(ls.table),
			Key:                 itemKey(stream, r.shard),
			UpdateExpression:    aws.String("SET " + attrHandoff + " = :me"),
			ConditionExpression: aws.String(attrOwner + " = :o AND " + attrCounter + " = :c AND attribute_not_exists(" + attrHandoff + ")"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":me": &types.AttributeValueMemberS{Value: ls.worker},
				":o":  &types.AttributeValueMemberS{Value: victim},
				":c":  num(r.counter),
			},
		})
		return err
	})
	if err != nil {
		if !awserr.IsConditionFailed(err) {
			ls.log.Warn("hand-off request failed", zap.String("stream", stream), zap.String("shard", r.shard), zap.Error(err))
		}
		return
	}
	ls.log.Info("hand-off requested", zap.String("stream", stream), zap.String("shard", r.shard),
		zap.String("from", victim), zap.Int("theirs", theirs), zap.Int("mine", mine))
}
