package state

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/checkpoint"
	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/awserr"
	"github.com/ttl-archiver/archiver/internal/backoff"
	"github.com/ttl-archiver/archiver/internal/leasetable"
	"github.com/ttl-archiver/archiver/lease"
)

// Dynamo keeps the sweeper's lock and cursor per swept table in the lease
// table: the lock is a lease kept by the lease store like a shard's (taken,
// renewed, watched, released there: [lease.Store.TryLock]), the cursor a
// write of the table's item fenced by that lease. Its item carries the
// same lease fields as a shard's (lease_owner, lease_counter,
// lease_expiry_ms, updated_ms), and the cursor as epoch milliseconds
// (sweep_cursor_ms).
type Dynamo struct {
	leases *lease.Store
	table  *leasetable.Table
}

// NewDynamo returns the sweeper's store in the table of leases.
func NewDynamo(leases *lease.Store) *Dynamo {
	return &Dynamo{leases: leases, table: leases.Table()}
}

// LoadSweepCursor implements [Store]: the table's cursor (a consistent
// read), zero when there is none.
func (d *Dynamo) LoadSweepCursor(ctx context.Context, table string) (time.Time, error) {
	if err := event.ValidTableName(table); err != nil {
		return time.Time{}, fmt.Errorf("checkpoint: sweep cursor of table: %w", err)
	}
	r, err := d.table.GetRow(ctx, leasetable.SweepKey(table))
	if err != nil || r.SweepMS == 0 {
		return time.Time{}, err
	}
	return time.UnixMilli(r.SweepMS).UTC(), nil
}

// SaveSweepCursor implements [Store]. The write is conditional on this
// worker still holding the table's lease (owner and counter, as a shard's
// checkpoint) and on the stored cursor not being later, so a sweeper that
// lost its lease can never move the cursor and the cursor never moves
// back.
func (d *Dynamo) SaveSweepCursor(ctx context.Context, table string, window time.Time) error {
	if err := checkpoint.CheckSweepCursor(table, window); err != nil {
		return err
	}
	k := leasetable.SweepKey(table)
	l, counter := d.leases.Fence(k)
	if l == nil {
		return fmt.Errorf("checkpoint: save sweep cursor of %s: worker %s holds no lease: %w", table, d.table.Worker, ErrLeaseLost)
	}
	ms := window.UnixMilli()
	_, err := d.table.FencedUpdate(ctx, k, counter, "SET "+leasetable.AttrSweepCursor+" = :w, "+leasetable.AttrUpdated+" = :now",
		"attribute_not_exists("+leasetable.AttrSweepCursor+") OR "+leasetable.AttrSweepCursor+" <= :w",
		map[string]types.AttributeValue{":w": leasetable.Num(ms), ":now": leasetable.Num(d.table.Now().UnixMilli())})
	at := checkpoint.SweepWindow(window).Format(time.RFC3339Nano)
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ccf):
		if r, derr := leasetable.DecodeRow(ccf.Item); derr == nil && r.Owner == d.table.Worker && r.Counter == counter {
			return fmt.Errorf("checkpoint: save sweep cursor of %s at %s, stored %s: %w", table, at,
				time.UnixMilli(r.SweepMS).UTC().Format(time.RFC3339Nano), ErrCursorBackwards)
		}
		l.Lost("sweep cursor write found the lease owned by another worker")
		return fmt.Errorf("checkpoint: save sweep cursor of %s at %s: %w", table, at, ErrLeaseLost)
	case awserr.IsConditionFailed(err):
		l.Lost("sweep cursor write found the lease owned by another worker")
		return fmt.Errorf("checkpoint: save sweep cursor of %s at %s: %w", table, at, ErrLeaseLost)
	}
	return fmt.Errorf("checkpoint: save sweep cursor of %s at %s: %w", table, at, err)
}

// AcquireSweep implements [Store] with a lease in the lease table. It
// takes the table's lease when it is free or expired (a conditional write,
// as for a shard), or takes up one this worker ID held before a restart,
// and otherwise polls (every RenewEvery, at most a second) until it can.
// The lease is then renewed on the lease store's renewal timer; held is
// also cancelled, with cause lease.ErrRenewFailed, SafetyMargin before the
// lease expires when renewals keep failing, and with ErrLeaseLost when a
// write finds it taken. release gives the lease up (conditional on still
// owning it); it does nothing once the lease was lost.
//
// Errors: ctx ended, the lease store is closed, the table name is invalid,
// or the lease table answers with an error that retrying cannot fix
// (access denied, no such table); throttling and unanswered requests are
// retried until ctx ends, and show in the lease store's Ready meanwhile.
func (d *Dynamo) AcquireSweep(ctx context.Context, table string) (context.Context, func(context.Context) error, error) {
	if err := event.ValidTableName(table); err != nil {
		return nil, nil, fmt.Errorf("checkpoint: acquire sweep of table: %w", err)
	}
	k := leasetable.SweepKey(table)
	poll := min(d.leases.RenewEvery(), time.Second)
	for n := 0; ; n++ {
		// Each attempt is bounded, so an unreachable table shows in Ready
		// while this worker waits, as the shard assigner's rounds are.
		actx, cancel := context.WithTimeout(ctx, d.table.LeaseD/2)
		l, r, err := d.leases.TryLock(actx, k)
		cancel()
		switch {
		case l != nil:
			return d.hold(ctx, l)
		case ctx.Err() != nil:
			return nil, nil, fmt.Errorf("checkpoint: acquire sweep of %s: %w", table, context.Cause(ctx))
		case err != nil && !awserr.IsRetryable(err) && !errors.Is(err, context.DeadlineExceeded):
			return nil, nil, fmt.Errorf("checkpoint: acquire sweep of %s: %w", table, err)
		case err != nil:
			d.table.Log.Warn("reading the sweeper's lease failed; trying again", zap.String("table", table), zap.Error(err))
		case n == 0:
			d.table.Log.Info("table is swept by another worker; waiting for its lease", zap.String("table", table),
				zap.String("owner", r.Owner), zap.Time("expires", time.UnixMilli(r.ExpiryMS)))
		}
		if !backoff.Sleep(ctx, poll) {
			return nil, nil, fmt.Errorf("checkpoint: acquire sweep of %s: %w", table, context.Cause(ctx))
		}
	}
}

// hold turns the lock l into AcquireSweep's results.
func (d *Dynamo) hold(ctx context.Context, l *lease.Lock) (context.Context, func(context.Context) error, error) {
	held, stop := holdContext(ctx, l.Context())
	release := func(rctx context.Context) error {
		stop(errSweepReleased)
		return l.Release(rctx)
	}
	return held, release, nil
}
