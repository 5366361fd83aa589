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

// sweepLocks is the sweeper's lock and cursor per swept table: the lock is
// a lease kept by leases like a shard's (taken, renewed, watched, released
// there), the cursor a fenced write of the lease table. It reads the
// leases' state only through their methods (fence, holding, current).
type sweepLocks struct {
	*leaseTable
	leases *leases
}

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
	return s.sweep.loadCursor(ctx, table)
}

// loadCursor is LoadSweepCursor.
func (sl sweepLocks) loadCursor(ctx context.Context, table string) (time.Time, error) {
	if err := validTableName(table); err != nil {
		return time.Time{}, fmt.Errorf("checkpoint: sweep cursor of table: %w", err)
	}
	r, err := sl.getRow(ctx, sweepKey(table))
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
	return s.sweep.saveCursor(ctx, table, window)
}

// saveCursor is SaveSweepCursor.
func (sl sweepLocks) saveCursor(ctx context.Context, table string, window time.Time) error {
	if err := checkSweepArgs(table, window); err != nil {
		return err
	}
	k := sweepKey(table)
	l, counter := sl.leases.fence(k)
	if l == nil {
		return fmt.Errorf("checkpoint: save sweep cursor of %s: worker %s holds no lease: %w", table, sl.worker, ErrLeaseLost)
	}
	ms := window.UnixMilli()
	_, err := sl.fencedUpdate(ctx, k, counter, "SET "+attrSweepCursor+" = :w, "+attrUpdated+" = :now",
		"attribute_not_exists("+attrSweepCursor+") OR "+attrSweepCursor+" <= :w",
		map[string]types.AttributeValue{":w": num(ms), ":now": num(sl.now().UnixMilli())})
	at := sweepWindow(window).Format(time.RFC3339Nano)
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ccf):
		if r, derr := decodeRow(ccf.Item); derr == nil && r.owner == sl.worker && r.counter == counter {
			return fmt.Errorf("checkpoint: save sweep cursor of %s at %s, stored %s: %w", table, at,
				time.UnixMilli(r.sweepMS).UTC().Format(time.RFC3339Nano), ErrCursorBackwards)
		}
		sl.leases.lost(l, "sweep cursor write found the lease owned by another worker")
		return fmt.Errorf("checkpoint: save sweep cursor of %s at %s: %w", table, at, ErrLeaseLost)
	case awserr.IsConditionFailed(err):
		sl.leases.lost(l, "sweep cursor write found the lease owned by another worker")
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
	return s.sweep.acquire(ctx, table)
}

// acquire is AcquireSweep.
func (sl sweepLocks) acquire(ctx context.Context, table string) (context.Context, func(context.Context) error, error) {
	if err := validTableName(table); err != nil {
		return nil, nil, fmt.Errorf("checkpoint: acquire sweep of table: %w", err)
	}
	k := sweepKey(table)
	poll := min(sl.leases.renewD, time.Second)
	for n := 0; ; n++ {
		// Each attempt is bounded, so an unreachable table shows in Ready
		// while this worker waits, as the shard assigner's rounds are.
		actx, cancel := context.WithTimeout(ctx, sl.leaseD/2)
		l, r, err := sl.tryAcquire(actx, k)
		cancel()
		switch {
		case l != nil:
			return sl.hold(ctx, l)
		case ctx.Err() != nil:
			return nil, nil, fmt.Errorf("checkpoint: acquire sweep of %s: %w", table, context.Cause(ctx))
		case err != nil && !awserr.IsRetryable(err) && !errors.Is(err, context.DeadlineExceeded):
			return nil, nil, fmt.Errorf("checkpoint: acquire sweep of %s: %w", table, err)
		case err != nil:
			sl.log.Warn("reading the sweeper's lease failed; trying again", zap.String("table", table), zap.Error(err))
		case n == 0:
			sl.log.Info("table is swept by another worker; waiting for its lease", zap.String("table", table),
				zap.String("owner", r.owner), zap.Time("expires", time.UnixMilli(r.expiryMS)))
		}
		if !backoff.Sleep(ctx, poll) {
			return nil, nil, fmt.Errorf("checkpoint: acquire sweep of %s: %w", table, context.Cause(ctx))
		}
	}
}

// tryAcquire takes k's lease if it is free, expired, or this worker ID's
// from before a restart. It returns the lease when held, else the row seen.
func (sl sweepLocks) tryAcquire(ctx context.Context, k leaseKey) (*lease, row, error) {
	closed, mine, last := sl.leases.holding(k)
	if closed {
		return nil, row{}, errStoreClosed
	}
	if mine != nil {
		return nil, row{owner: sl.worker}, nil // another caller in this process holds it
	}
	r, err := sl.getRow(ctx, k)
	sl.leases.noteProbe(err)
	if err != nil {
		return nil, row{}, err
	}
	now := sl.now()
	switch {
	case r.owner == sl.worker && r.live(now) && last != r.counter:
		sl.leases.adopt(ctx, k.stream, r)
	case !r.live(now):
		sl.leases.take(ctx, k.stream, readyShard{id: k.shard}, r)
	default:
		return nil, r, nil
	}
	_, l, _ := sl.leases.holding(k)
	return l, r, nil
}

// hold turns the lease l into AcquireSweep's results.
func (sl sweepLocks) hold(ctx context.Context, l *lease) (context.Context, func(context.Context) error, error) {
	held, stop := holdContext(ctx, l.ctx)
	release := func(rctx context.Context) error {
		stop(errSweepReleased)
		if !sl.leases.current(l) {
			return nil // lost, or released already
		}
		return sl.leases.release(rctx, l.key.stream, l.key.shard, false)
	}
	return held, release, nil
}
