package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/internal/awserr"
)

// Causes of an assignment context's cancellation (context.Cause).
var (
	// ErrHandOff: another worker asked for the shard (balancing); the
	// reader should checkpoint and Release it.
	ErrHandOff = errors.New("checkpoint: lease handed off to another worker")
	// ErrRenewFailed: the lease could not be renewed and is close to
	// expiry; reading stops before another worker may take it.
	ErrRenewFailed = errors.New("checkpoint: lease renewal failing, stopped before expiry")
	errReleased    = errors.New("checkpoint: lease released")
	errCrashed     = errors.New("checkpoint: lease store crashed (test)")
)

// lease is one shard lease this worker holds. Every field is guarded by
// DynamoStore.mu.
type lease struct {
	key        leaseKey
	counter    int64
	ctx        context.Context
	cancel     context.CancelCauseFunc
	validUntil time.Time // renewal start + LeaseDuration, on this worker's clock
	watchdog   *time.Timer
	stopping   bool // ctx cancelled; the lease waits for Release
	stoppedAt  time.Time
	handoffTo  string
	renewing   bool
	releasing  bool // Release is writing: a concurrent write's failed condition is no loss
}

func (l *lease) stopTimers() {
	if l.watchdog != nil {
		l.watchdog.Stop()
	}
}

// hold records a freshly taken lease. Caller holds s.mu.
func (s *DynamoStore) hold(k leaseKey, counter int64, validUntil time.Time) *lease {
	ctx, cancel := context.WithCancelCause(s.base)
	l := &lease{key: k, counter: counter, ctx: ctx, cancel: cancel, validUntil: validUntil}
	l.watchdog = time.AfterFunc(s.untilStop(l), func() { s.watch(l) })
	s.leases[k] = l
	s.history[k] = counter
	s.metrics.held.Inc()
	return l
}

// untilStop is how long l may still be read: until the safety margin before
// its expiry. Caller holds s.mu.
func (s *DynamoStore) untilStop(l *lease) time.Duration {
	return max(l.validUntil.Add(-s.margin).Sub(s.now()), 0)
}

// watch runs on l's watchdog timer, independent of every network call: if
// the lease was not renewed in time, reading stops before the lease can
// expire and be taken by another worker.
func (s *DynamoStore) watch(l *lease) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.leases[l.key] != l {
		return
	}
	if d := s.untilStop(l); d > 0 { // renewed meanwhile
		l.watchdog.Reset(d)
		return
	}
	if !l.stopping {
		s.log.Warn("lease not renewed in time; stopping the shard's reader before it expires",
			zap.String("stream", l.key.stream), zap.String("shard", l.key.shard), zap.Time("valid_until", l.validUntil))
	}
	s.stop(l, ErrRenewFailed)
}

// stop cancels l's assignment; the lease stays held until Release. Caller
// holds s.mu.
func (s *DynamoStore) stop(l *lease, cause error) {
	if l.stopping {
		return
	}
	l.stopping = true
	l.stoppedAt = s.now()
	l.cancel(cause)
}

// drop forgets l (lost, released or abandoned). Caller holds s.mu.
func (s *DynamoStore) drop(l *lease, cause error) {
	if s.leases[l.key] != l {
		return
	}
	delete(s.leases, l.key)
	l.stopTimers()
	l.cancel(cause)
	s.metrics.held.Dec()
}

// lost handles a conditional write that found l owned by someone else.
func (s *DynamoStore) lost(l *lease, why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.leases[l.key] != l || l.releasing {
		return
	}
	s.log.Warn("lease lost", zap.String("stream", l.key.stream), zap.String("shard", l.key.shard), zap.String("why", why))
	s.metrics.losses.Inc()
	s.drop(l, ErrLeaseLost)
}

// noteHandoff acts on a hand-off request seen in l's item.
func (s *DynamoStore) noteHandoff(l *lease, to string) {
	if to == "" || to == s.worker {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.leases[l.key] != l || l.stopping {
		return
	}
	l.handoffTo = to
	s.log.Info("hand-off requested; stopping the shard's reader",
		zap.String("stream", l.key.stream), zap.String("shard", l.key.shard), zap.String("to", to))
	s.stop(l, ErrHandOff)
}

// ---- renewal ----

// renewLoop renews every held lease each RenewEvery. It never waits on a
// renewal: each one runs in its own goroutine (bounded by renewSem), so a
// slow or throttled table cannot delay the timer, and the watchdogs stop
// readers whose leases were not renewed in time.
func (s *DynamoStore) renewLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.renewD)
	defer t.Stop()
	hbBusy := make(chan struct{}, 1)
	for {
		select {
		case <-s.base.Done():
			return
		case <-t.C:
		}
		s.mu.Lock()
		if s.halted {
			s.mu.Unlock()
			continue
		}
		now := s.now()
		var due []*lease
		for _, l := range s.leases {
			if l.stopping && now.Sub(l.stoppedAt) > s.leaseD {
				// Never released: let it expire rather than hold it forever.
				s.log.Warn("stopped lease never released; letting it expire",
					zap.String("stream", l.key.stream), zap.String("shard", l.key.shard))
				s.drop(l, ErrRenewFailed)
				continue
			}
			if !l.renewing {
				l.renewing = true
				due = append(due, l)
			}
		}
		streams := make([]string, 0, len(s.streams))
		for st := range s.streams {
			streams = append(streams, st)
		}
		s.mu.Unlock()
		for _, l := range due {
			s.wg.Add(1)
			go s.renew(l)
		}
		select {
		case hbBusy <- struct{}{}:
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer func() { <-hbBusy }()
				for _, st := range streams {
					s.heartbeat(st)
				}
			}()
		default: // the previous heartbeat is still in flight
		}
	}
}

// renew extends one lease, retrying throttling until the lease's stop time.
func (s *DynamoStore) renew(l *lease) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		l.renewing = false
		s.mu.Unlock()
	}()
	select {
	case s.renewSem <- struct{}{}:
		defer func() { <-s.renewSem }()
	case <-s.base.Done():
		return
	}
	s.mu.Lock()
	if s.leases[l.key] != l || s.halted {
		s.mu.Unlock()
		return
	}
	counter := l.counter
	budget := s.untilStop(l)
	s.mu.Unlock()
	if budget < s.renewD {
		budget = s.renewD // past the stop time: keep trying, so the final checkpoint can still be written
	}
	ctx, cancel := context.WithTimeout(s.base, budget)
	defer cancel()
	start := s.now()
	out, err := s.fencedUpdate(ctx, l.key, counter, "SET "+attrExpiry+" = :exp", "",
		map[string]types.AttributeValue{":exp": num(start.Add(s.leaseD).UnixMilli())})
	switch {
	case awserr.IsConditionFailed(err):
		s.lost(l, "renewal found the lease owned by another worker")
		return
	case err != nil:
		s.noteTableWrite(err)
		s.metrics.renewFailures.Inc()
		s.log.Warn("lease renewal failed", zap.String("stream", l.key.stream), zap.String("shard", l.key.shard), zap.Error(err))
		return
	}
	s.metrics.renewals.Inc()
	s.noteTableWrite(nil)
	s.mu.Lock()
	if s.leases[l.key] == l && l.counter == counter {
		l.validUntil = start.Add(s.leaseD)
		l.watchdog.Reset(s.untilStop(l))
	}
	s.mu.Unlock()
	if r, err := decodeRow(out.Attributes); err == nil {
		s.noteHandoff(l, r.handoff)
	}
}

// heartbeat records this worker as live for the stream, so workers that
// hold no lease yet count when shares are computed.
func (s *DynamoStore) heartbeat(stream string) {
	ctx, cancel := context.WithTimeout(s.base, s.renewD)
	defer cancel()
	_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.table),
		Item: map[string]types.AttributeValue{
			attrStream: &types.AttributeValueMemberS{Value: workersPrefix + stream},
			attrShard:  &types.AttributeValueMemberS{Value: s.worker},
			attrExpiry: num(s.now().Add(s.leaseD).UnixMilli()),
		},
	})
	if err != nil && ctx.Err() == nil {
		s.log.Debug("heartbeat failed", zap.String("stream", stream), zap.Error(err))
	}
	s.noteProbe(err)
}

// noteProbe records the outcome of a request that is not a renewal
// (heartbeat, a sweeper waiting for its lease) for Ready's message: a
// failure always, a success only while no lease is held (with leases held,
// only their renewals say whether they renew).
func (s *DynamoStore) noteProbe(err error) {
	s.mu.Lock()
	idle := len(s.leases) == 0
	s.mu.Unlock()
	if err != nil || idle {
		s.noteTableWrite(err)
	}
}

// noteTableWrite records the outcome of a renewal, for Ready's message.
func (s *DynamoStore) noteTableWrite(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.base.Err() == nil {
		s.lastErr = err
	}
}

// Ready reports whether this worker's leases are being renewed: it fails
// while the latest write to the lease table gave up (after the store's own
// retries), and when a held lease has gone unrenewed into its safety margin,
// so /readyz turns unready before leases are lost.
func (s *DynamoStore) Ready() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errStoreClosed
	}
	if s.lastErr != nil {
		return fmt.Errorf("checkpoint: lease renewals failing: %w", s.lastErr)
	}
	now := s.now()
	for _, l := range s.leases {
		if !l.stopping && now.After(l.validUntil.Add(-s.margin)) {
			return fmt.Errorf("checkpoint: %s not renewed (valid until %s)",
				l.key, l.validUntil.UTC().Format(time.RFC3339))
		}
	}
	return nil
}

// ---- assignment ----

// readyShard is a shard the walker may start: not finished, parents done.
type readyShard struct {
	id      string
	parents []string
}

// assigned is one shard this worker may read until ctx is cancelled.
type assigned struct {
	shard string
	ctx   context.Context
}

// assign is the Assigner logic: take free or expired leases of ready shards
// up to this worker's fair share, adopt leases handed over to it, ask the
// most loaded worker for at most one lease per round, and return every held
// lease of a ready shard.
func (s *DynamoStore) assign(ctx context.Context, stream string, ready []readyShard) ([]assigned, error) {
	s.mu.Lock()
	if s.closed || s.halted {
		s.mu.Unlock()
		return nil, fmt.Errorf("checkpoint: assign %s: %w", stream, errStoreClosed)
	}
	first := !s.streams[stream]
	s.streams[stream] = true
	s.mu.Unlock()
	if first {
		s.heartbeat(stream)
	}
	rows, err := s.queryRows(ctx, stream)
	if err != nil {
		return nil, err
	}
	beats, err := s.queryRows(ctx, workersPrefix+stream)
	if err != nil {
		return nil, err
	}
	now := s.now()
	s.prune(ctx, stream, rows, beats, now)
	live := map[string]bool{s.worker: true}
	for w, b := range beats {
		if !b.expired(now) {
			live[w] = true
		}
	}
	readySet := make(map[string]bool, len(ready))
	for _, r := range ready {
		readySet[r.id] = true
	}
	counts := map[string]int{}
	pending := false // this worker already asked someone for a lease
	for id, r := range rows {
		if !readySet[id] || r.finished || !r.live(now) {
			continue
		}
		live[r.owner] = true
		if r.owner != s.worker {
			counts[r.owner]++
			if r.handoff == s.worker {
				pending = true
			}
		}
	}
	target := (len(ready) + len(live) - 1) / len(live)

	s.mu.Lock()
	mine := 0
	for k, l := range s.leases {
		if k.stream == stream && readySet[k.shard] && !l.stopping {
			mine++
		}
	}
	var adopt, free []readyShard
	for _, rs := range ready {
		k := leaseKey{stream, rs.id}
		if s.leases[k] != nil {
			continue
		}
		r := rows[rs.id]
		if r.finished || s.parentBusy(rows, rs, r, now) {
			continue
		}
		switch {
		case r.owner == s.worker && r.live(now) && s.history[k] != r.counter:
			adopt = append(adopt, rs)
		case !r.live(now):
			free = append(free, rs)
		}
	}
	s.mu.Unlock()

	for _, rs := range adopt {
		if s.adopt(ctx, stream, rows[rs.id]) {
			mine++
		}
	}
	for _, rs := range free {
		// Beyond the fair share only leases nobody took for a whole lease
		// duration (a worker that counts as live but cannot read them, e.g.
		// at its concurrency limit): no shard stays unread.
		r := rows[rs.id]
		if mine >= target && !(r.exists && now.Sub(r.seenAt) > s.leaseD) {
			if !r.exists {
				s.register(ctx, stream, rs, now) // so its wait shows
			}
			continue
		}
		if s.take(ctx, stream, rs, r) {
			mine++
		}
	}
	if mine < target && !pending {
		s.requestHandoff(ctx, stream, rows, readySet, counts, mine)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	var out []assigned
	for _, rs := range ready {
		if l := s.leases[leaseKey{stream, rs.id}]; l != nil && !l.stopping {
			out = append(out, assigned{shard: rs.id, ctx: l.ctx})
		}
	}
	return out, nil
}

// prune deletes (a few per round) heartbeats of workers gone for ten lease
// durations and finished shards' items older than PruneFinishedAfter. Each
// delete is conditional on the item being unchanged since it was read.
func (s *DynamoStore) prune(ctx context.Context, stream string, rows, beats map[string]row, now time.Time) {
	const perRound = 10
	n := 0
	del := func(partition, sk, cond string, vals map[string]types.AttributeValue) {
		n++
		_, err := s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
			TableName: aws.String(s.table), Key: itemKey(partition, sk),
			ConditionExpression: aws.String(cond), ExpressionAttributeValues: vals,
		})
		if err != nil && !awserr.IsConditionFailed(err) {
			s.log.Debug("pruning lease table item failed", zap.String("partition", partition), zap.String("item", sk), zap.Error(err))
		}
	}
	for w, b := range beats {
		if n >= perRound {
			return
		}
		if w != s.worker && b.expired(now.Add(-10*s.leaseD)) {
			del(workersPrefix+stream, w, attrExpiry+" = :e", map[string]types.AttributeValue{":e": num(b.expiryMS)})
			delete(beats, w)
		}
	}
	if s.pruneD < 0 {
		return
	}
	for id, r := range rows {
		if n >= perRound {
			return
		}
		if r.finished && r.owner == "" && r.updatedMS > 0 && r.updatedMS < now.Add(-s.pruneD).UnixMilli() {
			del(stream, id, attrFinished+" = :t AND "+attrUpdated+" = :u AND attribute_not_exists("+attrOwner+")",
				map[string]types.AttributeValue{":t": &types.AttributeValueMemberBOOL{Value: true}, ":u": num(r.updatedMS)})
			delete(rows, id)
		}
	}
}

// parentBusy reports whether a parent of the shard is recorded unfinished
// and is being read by someone: then the child must wait. A parent row that
// is unfinished and unleased belongs to a shard the walker no longer sees in
// the stream (trimmed), which does not block its children.
func (s *DynamoStore) parentBusy(rows map[string]row, rs readyShard, r row, now time.Time) bool {
	for _, list := range [][]string{rs.parents, r.parents} {
		for _, p := range list {
			if pr, ok := rows[p]; ok && !pr.finished && pr.live(now) {
				return true
			}
		}
	}
	return false
}

// take acquires a free or expired lease (or creates the shard's item).
func (s *DynamoStore) take(ctx context.Context, stream string, rs readyShard, r row) bool {
	now := s.now()
	exp := now.Add(s.leaseD)
	var err error
	counter := r.counter + 1
	if !r.exists {
		item := itemKey(stream, rs.id)
		item[attrOwner] = &types.AttributeValueMemberS{Value: s.worker}
		item[attrCounter] = num(counter)
		item[attrExpiry] = num(exp.UnixMilli())
		item[attrUpdated] = num(now.UnixMilli())
		if len(rs.parents) > 0 {
			item[attrParents] = &types.AttributeValueMemberSS{Value: rs.parents}
		}
		err = s.retry(ctx, func(ctx context.Context) error {
			_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{
				TableName:           aws.String(s.table),
				Item:                item,
				ConditionExpression: aws.String("attribute_not_exists(" + attrStream + ")"),
			})
			return err
		})
	} else {
		cond := attrCounter + " = :c AND attribute_not_exists(" + attrFinished + ") AND "
		vals := map[string]types.AttributeValue{
			":me":  &types.AttributeValueMemberS{Value: s.worker},
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
		err = s.retry(ctx, func(ctx context.Context) error {
			_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
				TableName:                 aws.String(s.table),
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
			s.log.Warn("taking lease failed", zap.String("stream", stream), zap.String("shard", rs.id), zap.Error(err))
		}
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.hold(leaseKey{stream, rs.id}, counter, now.Add(s.leaseD))
	s.metrics.takes.Inc()
	s.log.Info("lease taken", zap.String("stream", stream), zap.String("shard", rs.id),
		zap.String("from", r.owner), zap.Int64("counter", counter))
	return true
}

// register records a ready shard nobody leased yet, unowned, so the time it
// has been waiting shows in its item (updated_ms).
func (s *DynamoStore) register(ctx context.Context, stream string, rs readyShard, now time.Time) {
	item := itemKey(stream, rs.id)
	item[attrCounter] = num(0)
	item[attrUpdated] = num(now.UnixMilli())
	if len(rs.parents) > 0 {
		item[attrParents] = &types.AttributeValueMemberSS{Value: rs.parents}
	}
	_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:           aws.String(s.table),
		Item:                item,
		ConditionExpression: aws.String("attribute_not_exists(" + attrStream + ")"),
	})
	if err != nil && !awserr.IsConditionFailed(err) {
		s.log.Debug("registering shard failed", zap.String("stream", stream), zap.String("shard", rs.id), zap.Error(err))
	}
}

// adopt takes up a lease another worker handed over to this one (or one
// this worker ID held before a restart).
func (s *DynamoStore) adopt(ctx context.Context, stream string, r row) bool {
	now := s.now()
	counter := r.counter + 1
	err := s.retry(ctx, func(ctx context.Context) error {
		_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:           aws.String(s.table),
			Key:                 itemKey(stream, r.shard),
			UpdateExpression:    aws.String("SET " + attrCounter + " = :c1, " + attrExpiry + " = :exp, " + attrUpdated + " = :now REMOVE " + attrHandoff),
			ConditionExpression: aws.String(attrOwner + " = :me AND " + attrCounter + " = :c"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":me":  &types.AttributeValueMemberS{Value: s.worker},
				":c":   num(r.counter),
				":c1":  num(counter),
				":exp": num(now.Add(s.leaseD).UnixMilli()),
				":now": num(now.UnixMilli()),
			},
		})
		return err
	})
	if err != nil {
		if !awserr.IsConditionFailed(err) {
			s.log.Warn("adopting handed-over lease failed", zap.String("stream", stream), zap.String("shard", r.shard), zap.Error(err))
		}
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.hold(leaseKey{stream, r.shard}, counter, now.Add(s.leaseD))
	s.metrics.steals.Inc()
	s.log.Info("lease received by hand-off", zap.String("stream", stream), zap.String("shard", r.shard), zap.Int64("counter", counter))
	return true
}

// requestHandoff asks the most loaded worker for one of its leases, if it
// holds at least two more than this worker.
func (s *DynamoStore) requestHandoff(ctx context.Context, stream string, rows map[string]row, readySet map[string]bool, counts map[string]int, mine int) {
	var victim string
	for w, n := range counts {
		if n > mine+1 && (victim == "" || n > counts[victim] || (n == counts[victim] && w < victim)) {
			victim = w
		}
	}
	if victim == "" {
		return
	}
	now := s.now()
	var ids []string
	for id, r := range rows {
		if readySet[id] && r.owner == victim && r.live(now) && r.handoff == "" && !r.finished {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return
	}
	sort.Strings(ids)
	r := rows[ids[len(ids)-1]] // the newest shard: its lineage is least likely to end soon
	err := s.retry(ctx, func(ctx context.Context) error {
		_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:           aws.String(s.table),
			Key:                 itemKey(stream, r.shard),
			UpdateExpression:    aws.String("SET " + attrHandoff + " = :me"),
			ConditionExpression: aws.String(attrOwner + " = :o AND " + attrCounter + " = :c AND attribute_not_exists(" + attrHandoff + ")"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":me": &types.AttributeValueMemberS{Value: s.worker},
				":o":  &types.AttributeValueMemberS{Value: victim},
				":c":  num(r.counter),
			},
		})
		return err
	})
	if err != nil {
		if !awserr.IsConditionFailed(err) {
			s.log.Warn("hand-off request failed", zap.String("stream", stream), zap.String("shard", r.shard), zap.Error(err))
		}
		return
	}
	s.log.Info("hand-off requested", zap.String("stream", stream), zap.String("shard", r.shard),
		zap.String("from", victim), zap.Int("theirs", counts[victim]), zap.Int("mine", mine))
}

// ---- release ----

// release lets the lease go after the shard's reader stopped and its final
// checkpoint was saved: to the worker that asked for it (hand-off), or free
// for anyone. finished also records the shard as finished.
func (s *DynamoStore) release(ctx context.Context, stream, shard string, finished bool) error {
	k := leaseKey{stream, shard}
	s.mu.Lock()
	if s.halted {
		s.mu.Unlock()
		return fmt.Errorf("checkpoint: release %s %s: %w", stream, shard, errCrashed)
	}
	l := s.leases[k]
	if l == nil {
		s.mu.Unlock()
		return nil // lost or never held: nothing to let go
	}
	s.stop(l, errReleased)
	l.releasing = true
	counter, to := l.counter, l.handoffTo
	s.mu.Unlock()

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

// crash simulates a killed process (tests): renewals and heartbeats stop,
// nothing more is written, and the readers' contexts are cancelled.
func (s *DynamoStore) crash() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.halted = true
	for _, l := range s.leases {
		l.stopTimers()
		l.cancel(errCrashed)
	}
}
