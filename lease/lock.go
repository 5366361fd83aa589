package lease

import (
	"context"
	"time"

	"github.com/ttl-archiver/archiver/internal/leasetable"
)

// Lock is a lease held as a lock on one item rather than on a shard the
// walker reads: the sweeper's lease of a table (sweep/state). It is taken,
// renewed, watched and released as a shard's lease is; there is no
// balancing.
type Lock struct {
	ls *leases
	l  *lease
}

// TryLock takes k's lease if it is free, expired, or this worker ID's from
// before a restart. It returns the lease when held, else the row it saw
// (owned by this worker when another caller of this process holds it).
// A failed read is also reported in Ready.
func (s *Store) TryLock(ctx context.Context, k leasetable.Key) (*Lock, leasetable.Row, error) {
	ls := s.leases
	closed, mine, last := ls.holding(k)
	if closed {
		return nil, leasetable.Row{}, errStoreClosed
	}
	if mine != nil {
		return nil, leasetable.Row{Owner: ls.Worker}, nil // another caller in this process holds it
	}
	r, err := ls.GetRow(ctx, k)
	ls.noteProbe(err)
	if err != nil {
		return nil, leasetable.Row{}, err
	}
	now := ls.Now()
	switch {
	case r.Owner == ls.Worker && r.Live(now) && last != r.Counter:
		ls.adopt(ctx, k.Stream, r)
	case !r.Live(now):
		ls.take(ctx, k.Stream, readyShard{id: k.Shard}, r)
	default:
		return nil, r, nil
	}
	if _, l, _ := ls.holding(k); l != nil {
		return &Lock{ls: ls, l: l}, r, nil
	}
	return nil, r, nil
}

// RenewEvery is the renewal period (Options.RenewEvery).
func (s *Store) RenewEvery() time.Duration { return s.leases.renewD }

// Context is cancelled when the lock is lost (cause ErrLeaseLost), could
// not be renewed and nears its expiry (ErrRenewFailed), released, or the
// store closes.
func (lk *Lock) Context() context.Context { return lk.l.ctx }

// Release gives the lock up, conditional on this worker still owning it;
// it does nothing once the lock was lost or released.
func (lk *Lock) Release(ctx context.Context) error {
	if !lk.ls.current(lk.l) {
		return nil // lost, or released already
	}
	return lk.ls.release(ctx, lk.l.key.Stream, lk.l.key.Shard, false)
}
