package engine

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/engine/internal/attr"
)

// Replication of global tables (version 2019.11.21) between the Regions of
// one engine. Every item write to a replica (any path: the item calls,
// batches, transactions, PartiQL, the TTL sweeper) is stamped and, in the
// same log entry, queued for every other replica; a replicator goroutine
// applies the queued writes, per (source, destination) pair in order, no
// earlier than the replication delay after the source write. Conflicts are
// settled per item by last writer wins on the stamp, a total order, so the
// replicas converge whatever the order in which writes arrive. A
// replicated write is never replicated again, makes a stream record in the
// destination only when it changes the item there, and carries no
// userIdentity.

// stamp orders the writes of one item across Regions: a hybrid logical
// clock, ts = max(engine clock, the item's previous ts + 1) in unix
// nanoseconds, with the Region that made the write breaking ties. A later
// write of an item in one Region always has a greater stamp than the one
// it overwrites, and two Regions never make equal stamps.
type stamp struct {
	ts     int64
	origin string // "" for an item written before its table became global
}

// after reports whether s wins over o: the later stamp, or at the same ts
// the greater origin.
func (s stamp) after(o stamp) bool {
	return s.ts > o.ts || s.ts == o.ts && s.origin > o.origin
}

// itemStamp is a replica's stamp of one key: of its item, or of the
// delete that removed it (gone, a tombstone, kept until replication has
// been idle since: gen is the replicator's epoch when it was made).
type itemStamp struct {
	st   stamp
	gone bool
	gen  uint64
}

// replOp is one queued write: the item's new JSON (nil: deleted) to apply
// to the table named table in dst, stamped st, made in src at at (engine
// clock).
type replOp struct {
	id       uint64
	src, dst string
	table    string
	key      []byte
	raw      []byte
	size     int32
	st       stamp
	at       int64
}

type replPair struct{ src, dst string }

// replicator queues replicated writes and applies them. mu is a leaf
// lock: the write path takes it under a table's lock, and the applier
// never holds it while it takes a table's.
type replicator struct {
	e    *Engine
	kick chan struct{} // wakes the applier (buffered 1)

	mu      sync.Mutex
	queues  map[replPair][]*replOp
	paused  map[string]bool // destination Regions whose queue waits
	delay   time.Duration
	nextID  uint64
	busy    int     // ops being applied now
	flight  *replOp // the op being applied (a snapshot keeps it queued)
	epoch   uint64  // bumped each time every queue is empty and nothing is in flight
	pending int     // ops queued, every pair
}

func newReplicator(e *Engine) *replicator {
	return &replicator{e: e, kick: make(chan struct{}, 1), queues: map[replPair][]*replOp{}, paused: map[string]bool{}, epoch: 1}
}

func (r *replicator) wake() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// newIDs reserves n operation IDs.
func (r *replicator) newIDs(n int) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	first := r.nextID + 1
	r.nextID += uint64(n)
	return first
}

// enqueue queues ops (each pair's in the order given) and returns the
// current epoch, the generation of a tombstone the same write makes.
func (r *replicator) enqueue(ops []*replOp) uint64 {
	r.mu.Lock()
	for _, op := range ops {
		p := replPair{op.src, op.dst}
		r.queues[p] = append(r.queues[p], op)
		r.nextID = max(r.nextID, op.id)
	}
	r.pending += len(ops)
	gen := r.epoch
	r.mu.Unlock()
	if len(ops) > 0 {
		r.wake()
	}
	return gen
}

// next pops the first op due by now of a destination that is not paused,
// pairs in name order, or returns nil and when the earliest op not yet due
// will be (zero: none).
func (r *replicator) next(now int64) (*replOp, int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	pairs := make([]replPair, 0, len(r.queues))
	for p, q := range r.queues {
		if len(q) > 0 && !r.paused[p.dst] {
			pairs = append(pairs, p)
		}
	}
	sort.Slice(pairs, func(i, j int) bool {
		return pairs[i].src < pairs[j].src || pairs[i].src == pairs[j].src && pairs[i].dst < pairs[j].dst
	})
	var soonest int64
	for _, p := range pairs {
		q := r.queues[p]
		due := q[0].at + int64(r.delay)
		if due > now {
			if soonest == 0 || due < soonest {
				soonest = due
			}
			continue
		}
		op := q[0]
		q[0] = nil
		r.queues[p] = q[1:]
		if len(r.queues[p]) == 0 {
			delete(r.queues, p)
		}
		r.busy++
		r.pending--
		r.flight = op
		return op, 0
	}
	return nil, soonest
}

// idleLocked reports whether nothing can be applied now: nothing in
// flight, and every queue that is not paused is empty or its head not due.
func (r *replicator) idleLocked(now int64) bool {
	if r.busy > 0 {
		return false
	}
	for p, q := range r.queues {
		if len(q) > 0 && !r.paused[p.dst] && q[0].at+int64(r.delay) <= now {
			return false
		}
	}
	return true
}

// run applies queued writes until the engine stops.
func (r *replicator) run(stop <-chan struct{}) {
	for {
		op, due := r.next(r.e.clock.Now().UnixNano())
		if op != nil {
			failed := r.e.applyOp(op)
			r.mu.Lock()
			r.busy--
			r.flight = nil
			empty := r.pending == 0 && r.busy == 0
			if empty {
				r.epoch++
			}
			epoch := r.epoch
			r.mu.Unlock()
			if empty {
				r.e.dropTombstones(epoch)
			}
			if failed { // a full disk: try again in a while
				select {
				case <-stop:
					return
				case <-time.After(50 * time.Millisecond):
				}
			}
			continue
		}
		var wait <-chan time.Time
		if due != 0 {
			// The engine clock may be a ManualClock, which moves without
			// telling: look again soon, at most when the op is due.
			d := min(time.Duration(due-r.e.clock.Now().UnixNano()), 20*time.Millisecond)
			wait = time.After(max(d, time.Millisecond))
		}
		select {
		case <-stop:
			return
		case <-r.kick:
		case <-wait:
		}
	}
}

// WaitReplication waits until replication has nothing it can apply now:
// nothing in flight, and every queue of a destination that is not paused
// empty or holding only writes not yet due (ReplicationDelay after their
// source write, by the engine clock). With a ManualClock a test moves the
// clock past the delay and then waits. It returns ctx's error if ctx ends
// first.
func (e *Engine) WaitReplication(ctx context.Context) error {
	r := e.repl
	for {
		r.wake()
		r.mu.Lock()
		idle := r.idleLocked(e.clock.Now().UnixNano())
		r.mu.Unlock()
		if idle {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("engine: waiting for replication: %w", ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}

// SetReplicationDelay makes every replicated write apply no earlier than d
// after its source write, by the engine clock (a ManualClock must be moved
// past it); 0 applies them as soon as the replicator gets to them.
func (e *Engine) SetReplicationDelay(d time.Duration) {
	e.repl.mu.Lock()
	e.repl.delay = max(d, 0)
	e.repl.mu.Unlock()
	e.repl.wake()
}

// PauseReplication holds the writes replicated to region in their queues
// (in order) until ResumeReplication: the Region is cut off from the
// others' writes, while its own still replicate out.
func (e *Engine) PauseReplication(region string) {
	e.repl.mu.Lock()
	e.repl.paused[region] = true
	e.repl.mu.Unlock()
}

// ResumeReplication applies the writes held for region, in order, and
// those that follow.
func (e *Engine) ResumeReplication(region string) {
	e.repl.mu.Lock()
	delete(e.repl.paused, region)
	e.repl.mu.Unlock()
	e.repl.wake()
}

// ReplicationState is what replication is doing: the delay, the Regions
// paused, and per destination Region the writes queued for it.
type ReplicationState struct {
	Delay  time.Duration
	Paused []string
	Queued map[string]int
}

// Replication returns the replication state.
func (e *Engine) Replication() ReplicationState {
	r := e.repl
	r.mu.Lock()
	defer r.mu.Unlock()
	s := ReplicationState{Delay: r.delay, Paused: []string{}, Queued: map[string]int{}}
	for p := range r.paused {
		s.Paused = append(s.Paused, p)
	}
	sort.Strings(s.Paused)
	for p, q := range r.queues {
		s.Queued[p.dst] += len(q)
	}
	return s
}

// applyOp applies one replicated write in its destination, under the
// destination table's lock only, with last writer wins: a write whose
// stamp is not after the item's there is dropped. Either way the op is
// acknowledged in the log, with its effect when it has one, so a restart
// neither loses nor repeats it.
func (e *Engine) applyOp(op *replOp) (failed bool) {
	e.mu.RLock()
	t := e.tables[tkey{op.dst, op.table}]
	e.mu.RUnlock()
	if t == nil {
		e.ackOp(nil, op) // the replica is gone: nothing to apply
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.repl == nil {
		e.ackOp(t, op)
		return false
	}
	if err := t.applyOpLocked(op); err != nil {
		e.log.Warn("engine: a replicated write could not be applied; it is retried", zap.String("table", op.table),
			zap.String("from", op.src), zap.String("to", op.dst), zap.Error(err))
		e.repl.requeue(op)
		return true
	}
	return false
}

// requeue puts an op that failed (a full disk) back at the head of its
// queue, to be tried again.
func (r *replicator) requeue(op *replOp) {
	r.mu.Lock()
	p := replPair{op.src, op.dst}
	r.queues[p] = append([]*replOp{op}, r.queues[p]...)
	r.pending++
	r.mu.Unlock()
}

// ackOp logs that op is done without an effect (its table is gone, or no
// longer global).
func (e *Engine) ackOp(t *table, op *replOp) {
	if e.p != nil {
		id := ""
		if t != nil {
			id = t.id
		}
		e.p.logRepl(&replWrite{tableID: id, ack: op.id})
	}
}

// applyOpLocked applies op to t, a replica, under last writer wins. t.mu
// is held for writing.
func (t *table) applyOpLocked(op *replOp) error {
	cur, has := t.repl.stamps[string(op.key)]
	rw := &replWrite{tableID: t.id, key: op.key, st: op.st, gone: op.raw == nil, ack: op.id, set: true}
	if has && !op.st.after(cur.st) {
		rw.set = false // an older write: dropped, only acknowledged
		if t.p != nil {
			return t.p.logRepl(rw)
		}
		return nil
	}
	old := t.items.Get(op.key)
	var oldItem, newItem attr.Item
	var err error
	if old != nil && t.needOld() {
		if oldItem, err = decodeStored(old); err != nil {
			return err
		}
	}
	var ne *entry
	if op.raw != nil {
		if newItem, err = attr.UnmarshalItemJSON(op.raw); err != nil {
			return err
		}
		ne = t.newEntry(op.key, newItem, int(op.size))
	}
	if old == nil && ne == nil { // a delete of what is not here: only its tombstone
		if t.p != nil {
			if err := t.p.logRepl(rw); err != nil {
				return err
			}
		}
		t.repl.commit(rw)
		return nil
	}
	t.repl.applying = rw
	defer func() { t.repl.applying = nil }()
	return t.writeLocked(op.key, old, oldItem, ne, newItem, false)
}
