package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/internal/awserr"
	"github.com/ttl-archiver/archiver/internal/backoff"
)

// The sweeper's item in the lease table: one per swept table, stream_arn =
// "sweep#" + TABLE, shard_id = "cursor". It carries the same lease fields
// as a shard's item (lease_owner, lease_counter, lease_expiry_ms,
// updated_ms), so the same renewal, watchdog, fencing and release apply,
// and the cursor as epoch milliseconds.
const (
	sweepPrefix     = "sweep#"
	sweepShard      = "cursor"
	attrSweepCursor = "sweep_cursor_ms"
)

func sweepKey(table string) leaseKey { return leaseKey{sweepPrefix + table, sweepShard} }

// String names the lease in messages.
func (k leaseKey) String() string {
	if table, ok := strings.CutPrefix(k.stream, sweepPrefix); ok && k.shard == sweepShard {
		return "sweeper lease of table " + table
	}
	return "lease of shard " + k.shard
}

// LoadSweepCursor implements [SweepStore]: the table's cursor (a consistent
// read), zero when there is none.
func (s *DynamoStore) LoadSweepCursor(ctx context.Context, table string) (time.Time, error) {
	if err := validTableName(table); err != nil {
		return time.Time{}, fmt.Errorf("checkpoint: sweep cursor of table: %w", err)
	}
	r, err := s.getRow(ctx, sweepKey(table))
	if err != nil || r.sweepMS == 0 {
		return time.Time{}, err
	}
	return time.UnixMilli(r.sweepMS).UTC(), nil
}

// SaveSweepCursor implements [SweepStore]. The write is conditional on this
// worker still holding the table's lease (owner and counter, as a shard's
// Save) and on the stored cursor not being later, so a sweeper that lost
// its lease can never move the cursor and the cursor never moves back.
func (s *DynamoStore) SaveSweepCursor(ctx context.Context, table string, window time.Time) error {
	if err := checkSweepArgs(table, window); err != nil {
		return err
	}
	k := sweepKey(table)
	s.mu.Lock()
	l := s.leases[k]
	var counter int64
	if l != nil {
		counter = l.counter
	}
	s.mu.Unlock()
	if l == nil {
		return fmt.Errorf("checkpoint: save sweep cursor of %s: worker %s holds no lease: %w", table, s.worker, ErrLeaseLost)
	}
	ms := window.UnixMilli()
	_, err := s.fencedUpdate(ctx, k, counter, "SET "+attrSweepCursor+" = :w, "+attrUpdated+" = :now",
		"attribute_not_exists("+attrSweepCursor+") OR "+attrSweepCursor+" <= :w",
		map[string]types.AttributeValue{":w": num(ms), ":now": num(s.now().UnixMilli())})
	at := sweepWindow(window).Format(time.RFC3339Nano)
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ccf):
		if r, derr := decodeRow(ccf.Item); derr == nil && r.owner == s.worker && r.counter == counter {
			return fmt.Errorf("checkpoint: save sweep cursor of %s at %s, stored %s: %w", table, at,
				time.UnixMilli(r.sweepMS).UTC().Format(time.RFC3339Nano), ErrCursorBackwards)
		}
		s.lost(l, "sweep cursor write found the lease owned by another worker")
		return fmt.Errorf("checkpoint: save sweep cursor of %s at %s: %w", table, at, ErrLeaseLost)
	case awserr.IsConditionFailed(err):
		s.lost(l, "sweep cursor write found the lease owned by another worker")
		return fmt.Errorf("checkpoint: save sweep cursor of %s at %s: %w", table, at, ErrLeaseLost)
	}
	return fmt.Errorf("checkpoint: save sweep cursor of %s at %s: %w", table, at, err)
}

// AcquireSweep implements [SweepStore] with a lease in the lease table. It
// takes the table's lease when it is free or expired (a conditional write,
// as for a shard), or takes up one this worker ID held before a restart,
// and otherwise polls (every RenewEvery, at most a second) until it can.
// The lease is then renewed on the store's renewal timer; held is also
// cancelled, with cause ErrRenewFailed, SafetyMargin before the lease
// expires when renewals keep failing, and with ErrLeaseLost when a write
// finds it taken. release gives the lease up (conditional on still owning
// it); it does nothing once the lease was lost.
//
// Errors: ctx ended, the store is closed, the table name is invalid, or
// the lease table answers with an error that retrying cannot fix (access
// denied, no such table); throttling and unanswered requests are retried
// until ctx ends, and show in Ready meanwhile.
func (s *DynamoStore) AcquireSweep(ctx context.Context, table string) (context.Context, func(context.Context) error, error) {
	if err := validTableName(table); err != nil {
		return nil, nil, fmt.Errorf("checkpoint: acquire sweep of table: %w", err)
	}
	k := sweepKey(table)
	poll := min(s.renewD, time.Second)
	for n := 0; ; n++ {
		// Each attempt is bounded, so an unreachable table shows in Ready
		// while this worker waits, as the shard assigner's rounds are.
		actx, cancel := context.WithTimeout(ctx, s.leaseD/2)
		l, r, err := s.tryAcquire(actx, k)
		cancel()
		switch {
		case l != nil:
			return s.sweepHold(ctx, l)
		case ctx.Err() != nil:
			return nil, nil, fmt.Errorf("checkpoint: acquire sweep of %s: %w", table, context.Cause(ctx))
		case err != nil && !awserr.IsRetryable(err) && !errors.Is(err, context.DeadlineExceeded):
			return nil, nil, fmt.Errorf("checkpoint: acquire sweep of %s: %w", table, err)
		case err != nil:
			s.log.Warn("reading the sweeper's lease failed; trying again", zap.String("table", table), zap.Error(err))
		case n == 0:
			s.log.Info("table is swept by another worker; waiting for its lease", zap.String("table", table),
				zap.String("owner", r.owner), zap.Time("expires", time.UnixMilli(r.expiryMS)))
		}
		if !backoff.Sleep(ctx, poll) {
			return nil, nil, fmt.Errorf("checkpoint: acquire sweep of %s: %w", table, context.Cause(ctx))
		}
	}
}

// tryAcquire takes k's lease if it is free, expired, or this worker ID's
// from before a restart. It returns the lease when held, else the row seen.
func (s *DynamoStore) tryAcquire(ctx context.Context, k leaseKey) (*lease, row, error) {
	s.mu.Lock()
	closed, mine, last := s.closed, s.leases[k], s.history[k]
	s.mu.Unlock()
	if closed {
		return nil, row{}, errStoreClosed
	}
	if mine != nil {
		return nil, row{owner: s.worker}, nil // another caller in this process holds it
	}
	r, err := s.getRow(ctx, k)
	s.noteProbe(err)
	if err != nil {
		return nil, row{}, err
	}
	now := s.now()
	switch {
	case r.owner == s.worker && r.live(now) && last != r.counter:
		s.adopt(ctx, k.stream, r)
	case !r.live(now):
		s.take(ctx, k.stream, readyShard{id: k.shard}, r)
	default:
		return nil, r, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.leases[k], r, nil
}

// sweepHold turns the lease l into AcquireSweep's results.
func (s *DynamoStore) sweepHold(ctx context.Context, l *lease) (context.Context, func(context.Context) error, error) {
	held, stop := holdContext(ctx, l.ctx)
	release := func(rctx context.Context) error {
		stop(errSweepReleased)
		s.mu.Lock()
		current := s.leases[l.key] == l
		s.mu.Unlock()
		if !current {
			return nil // lost, or released already
		}
		return s.release(rctx, l.key.stream, l.key.shard, false)
	}
	return held, release, nil
}
