package checkpoint

import (
	"context"
	"errors"
	"fmt"
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
	if s.leases[l.key] != l {
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
