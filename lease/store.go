package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/internal/leasetable"
)

// DynamoAPI is the part of the DynamoDB API the lease store uses; a
// *dynamodb.Client satisfies it.
type DynamoAPI = leasetable.DynamoAPI

// Defaults of Options, chosen for ECS (a stop timeout of 30 s).
const (
	DefaultLeaseDuration = 20 * time.Second
	DefaultRenewEvery    = 5 * time.Second
	// DefaultPruneFinishedAfter is how long finished shards stay recorded.
	DefaultPruneFinishedAfter = leasetable.DefaultPruneFinishedAfter
)

// Options configures [Open].
type Options struct {
	// Client talks to DynamoDB (required).
	Client DynamoAPI
	// Table is the checkpoint and lease table (required).
	Table string
	// Namespace, when set, keeps this store's items apart from those of
	// other namespaces in the same table (see leasetable.Config.Namespace;
	// "" is the items as they always were). Every worker of one
	// deployment must use the same namespace.
	Namespace string
	// Create creates the table (PAY_PER_REQUEST) when it does not exist and
	// waits until it is ACTIVE. Without it a missing table is an error.
	Create bool
	// WorkerID names this worker in lease items (required; see
	// [DefaultWorkerID]). Two live processes must never share one.
	WorkerID string
	// LeaseDuration is how long a lease stays valid without renewal
	// (default 20 s). Another worker may take a lease once it expired.
	LeaseDuration time.Duration
	// RenewEvery is the renewal period (default 5 s); it must be well below
	// LeaseDuration (at most a third of it).
	RenewEvery time.Duration
	// SafetyMargin is how long before a lease's expiry this worker stops
	// reading the shard when renewals keep failing (default LeaseDuration/4).
	SafetyMargin time.Duration
	// PruneFinishedAfter is how long a finished shard's item is kept after
	// its last write (default 72 h, well past the stream's 24 h retention,
	// after which the shard is gone from the stream); negative: forever.
	// Heartbeats of workers gone for ten lease durations are deleted too.
	PruneFinishedAfter time.Duration
	// Now is the clock (default time.Now); lease expiries are compared
	// across workers, so their clocks must agree to well within SafetyMargin.
	Now func() time.Time
	// Logger receives lease events (default: no logging).
	Logger *zap.Logger
	// Registerer receives the store's metrics (default: none).
	Registerer prometheus.Registerer
}

// CheckNamespace checks an Options.Namespace: "" or 1 to 32 letters,
// digits, '_' or '-', starting with a letter or digit.
func CheckNamespace(ns string) error { return leasetable.CheckNamespace(ns) }

// Store keeps this worker's leases in the lease table (see the package
// doc): it implements [shard.Assigner] (Assign, Release), lets every lease
// go on shutdown (ReleaseAll), reports on its renewals (Ready), and fences
// the writes of the table's other users: checkpoint.DynamoStore saves a
// shard's checkpoint under its lease ([Store.Fence]), sweep/state takes the
// sweeper's lock as a lease ([Store.TryLock]).
//
// Inside, it is two roles over the table, each a type: the table's I/O
// (internal/leasetable: rows, the fenced conditional write, retries) and
// the leases this worker holds (leases: taking, renewal, watchdogs,
// assignment, hand-off, release, heartbeats). Store holds them and passes
// every call on to the role that answers it.
type Store struct {
	table  *leasetable.Table
	leases *leases
}

// Open opens (and with Create, creates) the lease table and starts the
// renewal timer. Close stops it; ReleaseAll lets every lease go first.
func Open(ctx context.Context, o Options) (*Store, error) {
	if o.Client == nil {
		return nil, errors.New("checkpoint: Options.Client is nil")
	}
	if o.Table == "" {
		return nil, errors.New("checkpoint: Options.Table is empty")
	}
	if o.WorkerID == "" {
		return nil, errors.New("checkpoint: Options.WorkerID is empty")
	}
	if o.LeaseDuration == 0 {
		o.LeaseDuration = DefaultLeaseDuration
	}
	if o.RenewEvery == 0 {
		o.RenewEvery = DefaultRenewEvery
		if o.RenewEvery*3 > o.LeaseDuration {
			o.RenewEvery = o.LeaseDuration / 4
		}
	}
	if o.LeaseDuration < 0 || o.RenewEvery < 0 {
		return nil, fmt.Errorf("checkpoint: Options.LeaseDuration (%v) and RenewEvery (%v) must be positive", o.LeaseDuration, o.RenewEvery)
	}
	if o.RenewEvery*3 > o.LeaseDuration {
		return nil, fmt.Errorf("checkpoint: Options.RenewEvery (%v) must be at most a third of LeaseDuration (%v)", o.RenewEvery, o.LeaseDuration)
	}
	if o.SafetyMargin == 0 {
		o.SafetyMargin = o.LeaseDuration / 4
	}
	if o.SafetyMargin < 0 || o.SafetyMargin >= o.LeaseDuration-o.RenewEvery {
		return nil, fmt.Errorf("checkpoint: Options.SafetyMargin (%v) must be positive and below LeaseDuration-RenewEvery (%v)", o.SafetyMargin, o.LeaseDuration-o.RenewEvery)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.PruneFinishedAfter == 0 {
		o.PruneFinishedAfter = DefaultPruneFinishedAfter
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	m, err := newLeaseMetrics(o.Registerer)
	if err != nil {
		return nil, err
	}
	t, err := leasetable.Open(ctx, leasetable.Config{
		Client: o.Client, Name: o.Table, Namespace: o.Namespace, Create: o.Create, Worker: o.WorkerID, LeaseDuration: o.LeaseDuration,
		Now: o.Now, Logger: o.Logger.With(zap.String("worker", o.WorkerID), zap.String("lease_table", o.Table)),
		Retries: m.throttles,
	})
	if err != nil {
		return nil, err
	}
	return &Store{table: t, leases: newLeases(t, m, o.RenewEvery, o.SafetyMargin, o.PruneFinishedAfter)}, nil
}

// WorkerID returns the ID this store writes into the leases it owns.
func (s *Store) WorkerID() string { return s.table.Worker }

// Table is the lease table, for the writes the leases fence
// ([leasetable.Fence]).
func (s *Store) Table() *leasetable.Table { return s.table }

// Fence implements [leasetable.Fence]: the lease this worker holds on k's
// item and its counter, the fencing token of a write to the item; nil
// when it holds none.
func (s *Store) Fence(k leasetable.Key) (leasetable.Held, int64) {
	l, counter := s.leases.fence(k)
	if l == nil {
		return nil, 0
	}
	return held{s.leases, l}, counter
}

// held is a lease this worker holds, as a fenced write reports on it.
type held struct {
	ls *leases
	l  *lease
}

func (h held) Lost(why string)       { h.ls.lost(h.l, why) }
func (h held) NoteHandoff(to string) { h.ls.noteHandoff(h.l, to) }

// Close stops renewing leases and cancels every assignment's context. It
// does not release leases (they expire); call ReleaseAll first for a
// graceful hand-off.
func (s *Store) Close() error {
	s.leases.close()
	return nil
}

var errStoreClosed = errors.New("checkpoint: lease store closed")
