package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/internal/awserr"
	"github.com/ttl-archiver/archiver/internal/leasetable"
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

// ErrLeaseLost is matched (errors.Is) when a lease was found owned by
// another worker: the cause of its assignment context's cancellation, and
// the error of a write it fenced (the same error as
// checkpoint.ErrLeaseLost).
var ErrLeaseLost = leasetable.ErrLeaseLost

// leases keeps the leases this worker holds, of shards and of swept
// tables: it takes them (assignment rounds, the sweeper's acquire), renews
// them on their own timer, stops a lease's reader by its watchdog before
// the lease can expire, hands them off, releases them, and writes this
// worker's heartbeats, all through the shared leasetable.Table. The
// checkpoints (checkpoint.DynamoStore.Save, through Store.Fence) and the
// sweeper's locks (sweep/state, through Store.TryLock) reach its state
// only through its methods: fence, holding, current, lost and noteHandoff.
type leases struct {
	*leasetable.Table
	metrics *leaseMetrics
	renewD  time.Duration // the renewal period
	margin  time.Duration // a lease's reader stops this long before its expiry
	pruneD  time.Duration // finished shards' items are kept this long (<0: forever)

	base       context.Context // parent of every lease's ctx; cancelled by close
	baseCancel context.CancelFunc
	wg         sync.WaitGroup // renewLoop and every renewal and heartbeat in flight
	renewSem   chan struct{}  // bounds the renewals in flight

	// mu guards held, history, streams, closed, lastErr and every field of
	// each *lease in held. It is held for bookkeeping only: never across a
	// call to the table, and the table's own lock (seenMu) is never taken
	// under it.
	mu      sync.Mutex
	held    map[leasetable.Key]*lease
	history map[leasetable.Key]int64 // last counter held per shard, until released: never re-adopted
	streams map[string]bool          // streams this worker takes part in (heartbeats)
	closed  bool
	lastErr error // latest renewal's outcome, for Ready's message
}

// newLeases starts keeping leases on t: the renewal timer runs until close.
func newLeases(t *leasetable.Table, m *leaseMetrics, renewD, margin, pruneD time.Duration) *leases {
	ls := &leases{
		Table: t, metrics: m, renewD: renewD, margin: margin, pruneD: pruneD,
		renewSem: make(chan struct{}, 16),
		held:     map[leasetable.Key]*lease{},
		history:  map[leasetable.Key]int64{},
		streams:  map[string]bool{},
	}
	ls.base, ls.baseCancel = context.WithCancel(context.Background())
	ls.wg.Add(1)
	go ls.renewLoop()
	return ls
}

// fence returns the lease held on k and its counter, the fencing token of
// a write to k's item; nil when this worker holds none.
func (ls *leases) fence(k leasetable.Key) (*lease, int64) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	l := ls.held[k]
	if l == nil {
		return nil, 0
	}
	return l, l.counter
}

// holding reports whether the leases were closed, the lease held on k (nil
// when none) and the last counter this worker held on k.
func (ls *leases) holding(k leasetable.Key) (closed bool, l *lease, last int64) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.closed, ls.held[k], ls.history[k]
}

// current reports whether l is still held (not lost, released or dropped).
func (ls *leases) current(l *lease) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.held[l.key] == l
}

// close stops renewing and cancels every lease's context, without
// releasing (the leases expire); it waits for renewals in flight.
func (ls *leases) close() {
	ls.mu.Lock()
	if ls.closed {
		ls.mu.Unlock()
		return
	}
	ls.closed = true
	for _, l := range ls.held {
		l.stopTimers()
		l.cancel(errStoreClosed)
	}
	ls.mu.Unlock()
	ls.baseCancel()
	ls.wg.Wait()
}

// lease is one lease this worker holds (a shard's or a sweeper's). Every
// field is guarded by leases.mu; key, ctx and cancel never change.
type lease struct {
	key        leasetable.Key
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

// hold records a freshly taken lease. Caller holds ls.mu.
func (ls *leases) hold(k leasetable.Key, counter int64, validUntil time.Time) *lease {
	ctx, cancel := context.WithCancelCause(ls.base)
	l := &lease{key: k, counter: counter, ctx: ctx, cancel: cancel, validUntil: validUntil}
	l.watchdog = time.AfterFunc(ls.untilStop(l), func() { ls.watch(l) })
	ls.held[k] = l
	ls.history[k] = counter
	ls.metrics.held.Inc()
	return l
}

// untilStop is how long l may still be read: until the safety margin before
// its expiry. Caller holds ls.mu.
func (ls *leases) untilStop(l *lease) time.Duration {
	return max(l.validUntil.Add(-ls.margin).Sub(ls.Now()), 0)
}

// watch runs on l's watchdog timer, independent of every network call: if
// the lease was not renewed in time, reading stops before the lease can
// expire and be taken by another worker.
func (ls *leases) watch(l *lease) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.held[l.key] != l {
		return
	}
	if d := ls.untilStop(l); d > 0 { // renewed meanwhile
		l.watchdog.Reset(d)
		return
	}
	if !l.stopping {
		ls.Log.Warn("lease not renewed in time; stopping the shard's reader before it expires",
			zap.String("stream", l.key.Stream), zap.String("shard", l.key.Shard), zap.Time("valid_until", l.validUntil))
	}
	ls.stop(l, ErrRenewFailed)
}

// stop cancels l's assignment; the lease stays held until Release. Caller
// holds ls.mu.
func (ls *leases) stop(l *lease, cause error) {
	if l.stopping {
		return
	}
	l.stopping = true
	l.stoppedAt = ls.Now()
	l.cancel(cause)
}

// drop forgets l (lost, released or abandoned). Caller holds ls.mu.
func (ls *leases) drop(l *lease, cause error) {
	if ls.held[l.key] != l {
		return
	}
	delete(ls.held, l.key)
	l.stopTimers()
	l.cancel(cause)
	ls.metrics.held.Dec()
}

// lost handles a conditional write that found l owned by someone else.
func (ls *leases) lost(l *lease, why string) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.held[l.key] != l || l.releasing {
		return
	}
	ls.Log.Warn("lease lost", zap.String("stream", l.key.Stream), zap.String("shard", l.key.Shard), zap.String("why", why))
	ls.metrics.losses.Inc()
	ls.drop(l, ErrLeaseLost)
}

// noteHandoff acts on a hand-off request seen in l's item.
func (ls *leases) noteHandoff(l *lease, to string) {
	if to == "" || to == ls.Worker {
		return
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.held[l.key] != l || l.stopping {
		return
	}
	l.handoffTo = to
	ls.Log.Info("hand-off requested; stopping the shard's reader",
		zap.String("stream", l.key.Stream), zap.String("shard", l.key.Shard), zap.String("to", to))
	ls.stop(l, ErrHandOff)
}

// ---- renewal ----

// renewLoop renews every held lease each RenewEvery. It never waits on a
// renewal: each one runs in its own goroutine (bounded by renewSem), so a
// slow or throttled table cannot delay the timer, and the watchdogs stop
// readers whose leases were not renewed in time.
func (ls *leases) renewLoop() {
	defer ls.wg.Done()
	t := time.NewTicker(ls.renewD)
	defer t.Stop()
	hbBusy := make(chan struct{}, 1)
	for {
		select {
		case <-ls.base.Done():
			return
		case <-t.C:
		}
		ls.mu.Lock()
		now := ls.Now()
		var due []*lease
		for _, l := range ls.held {
			if l.stopping && now.Sub(l.stoppedAt) > ls.LeaseD {
				// Never released: let it expire rather than hold it forever.
				ls.Log.Warn("stopped lease never released; letting it expire",
					zap.String("stream", l.key.Stream), zap.String("shard", l.key.Shard))
				ls.drop(l, ErrRenewFailed)
				continue
			}
			if !l.renewing {
				l.renewing = true
				due = append(due, l)
			}
		}
		streams := make([]string, 0, len(ls.streams))
		for st := range ls.streams {
			streams = append(streams, st)
		}
		ls.mu.Unlock()
		for _, l := range due {
			ls.wg.Add(1)
			go ls.renew(l)
		}
		select {
		case hbBusy <- struct{}{}:
			ls.wg.Add(1)
			go func() {
				defer ls.wg.Done()
				defer func() { <-hbBusy }()
				for _, st := range streams {
					ls.heartbeat(st)
				}
			}()
		default: // the previous heartbeat is still in flight
		}
	}
}

// renew extends one lease, retrying throttling until the lease's stop time.
func (ls *leases) renew(l *lease) {
	defer ls.wg.Done()
	defer func() {
		ls.mu.Lock()
		l.renewing = false
		ls.mu.Unlock()
	}()
	select {
	case ls.renewSem <- struct{}{}:
		defer func() { <-ls.renewSem }()
	case <-ls.base.Done():
		return
	}
	ls.mu.Lock()
	if ls.held[l.key] != l {
		ls.mu.Unlock()
		return
	}
	counter := l.counter
	budget := ls.untilStop(l)
	ls.mu.Unlock()
	if budget < ls.renewD {
		budget = ls.renewD // past the stop time: keep trying, so the final checkpoint can still be written
	}
	ctx, cancel := context.WithTimeout(ls.base, budget)
	defer cancel()
	start := ls.Now()
	out, err := ls.FencedUpdate(ctx, l.key, counter, "SET "+leasetable.AttrExpiry+" = :exp", "",
		map[string]types.AttributeValue{":exp": leasetable.Num(start.Add(ls.LeaseD).UnixMilli())})
	switch {
	case awserr.IsConditionFailed(err):
		ls.lost(l, "renewal found the lease owned by another worker")
		return
	case err != nil:
		ls.noteTableWrite(err)
		ls.metrics.renewFailures.Inc()
		ls.Log.Warn("lease renewal failed", zap.String("stream", l.key.Stream), zap.String("shard", l.key.Shard), zap.Error(err))
		return
	}
	ls.metrics.renewals.Inc()
	ls.noteTableWrite(nil)
	ls.mu.Lock()
	if ls.held[l.key] == l && l.counter == counter {
		l.validUntil = start.Add(ls.LeaseD)
		l.watchdog.Reset(ls.untilStop(l))
	}
	ls.mu.Unlock()
	if r, err := leasetable.DecodeRow(out.Attributes); err == nil {
		ls.noteHandoff(l, r.Handoff)
	}
}

// heartbeat records this worker as live for the stream, so workers that
// hold no lease yet count when shares are computed.
func (ls *leases) heartbeat(stream string) {
	ctx, cancel := context.WithTimeout(ls.base, ls.renewD)
	defer cancel()
	_, err := ls.Client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(ls.Name),
		Item: map[string]types.AttributeValue{
			leasetable.AttrStream: &types.AttributeValueMemberS{Value: leasetable.WorkersPrefix + stream},
			leasetable.AttrShard:  &types.AttributeValueMemberS{Value: ls.Worker},
			leasetable.AttrExpiry: leasetable.Num(ls.Now().Add(ls.LeaseD).UnixMilli()),
		},
	})
	if err != nil && ctx.Err() == nil {
		ls.Log.Debug("heartbeat failed", zap.String("stream", stream), zap.Error(err))
	}
	ls.noteProbe(err)
}

// noteProbe records the outcome of a request that is not a renewal
// (heartbeat, a sweeper waiting for its lease) for Ready's message: a
// failure always, a success only while no lease is held (with leases held,
// only their renewals say whether they renew).
func (ls *leases) noteProbe(err error) {
	ls.mu.Lock()
	idle := len(ls.held) == 0
	ls.mu.Unlock()
	if err != nil || idle {
		ls.noteTableWrite(err)
	}
}

// noteTableWrite records the outcome of a renewal, for Ready's message.
func (ls *leases) noteTableWrite(err error) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.base.Err() == nil {
		ls.lastErr = err
	}
}

// Ready reports whether this worker's leases are being renewed: it fails
// while the latest write to the lease table gave up (after the store's own
// retries), and when a held lease has gone unrenewed into its safety margin,
// so /readyz turns unready before leases are lost.
func (s *Store) Ready() error { return s.leases.ready() }

// ready is Ready.
func (ls *leases) ready() error {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.closed {
		return errStoreClosed
	}
	if ls.lastErr != nil {
		return fmt.Errorf("checkpoint: lease renewals failing: %w", ls.lastErr)
	}
	now := ls.Now()
	for _, l := range ls.held {
		if !l.stopping && now.After(l.validUntil.Add(-ls.margin)) {
			return fmt.Errorf("checkpoint: %s not renewed (valid until %s)",
				l.key, l.validUntil.UTC().Format(time.RFC3339))
		}
	}
	return nil
}
