package consumer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/ttl-archiver/archiver/checkpoint"
	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/sinks"
)

// fakeSink is a fault-injecting sink: it records every event it made
// durable (in order), can fail batches, delay acknowledgements (acks then
// arrive out of order) or hold them until released.
type fakeSink struct {
	name string
	// fail decides, per write, whether the batch fails (nil: never).
	fail func(b sinks.Batch) error
	// maxDelay > 0 acknowledges asynchronously after a random delay.
	maxDelay time.Duration

	mu       sync.Mutex
	log      []*writeRec // every write, in write order
	writes   int
	failures int
	hold     bool
	held     []func()
	closed   bool
	flushes  int
	pending  int // asynchronous acks not yet sent
	onWrite  func(b sinks.Batch)
	// ackOnFlush makes Flush acknowledge every held batch (hold stays
	// set, so later writes are held again until the next flush).
	ackOnFlush bool
	refuseOn   func(b sinks.Batch) error // Write itself returns this
}

func newFakeSink(name string) *fakeSink { return &fakeSink{name: name} }

func (f *fakeSink) Name() string { return f.name }

func (f *fakeSink) Write(ctx context.Context, b sinks.Batch, ack sinks.Ack) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if f.refuseOn != nil {
		if err := f.refuseOn(b); err != nil {
			return err
		}
	}
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return errors.New("fake sink: write after close")
	}
	f.writes++
	var err error
	if f.fail != nil {
		err = f.fail(b)
	}
	if f.onWrite != nil {
		f.onWrite(b)
	}
	rec := &writeRec{events: b.Events}
	f.log = append(f.log, rec)
	done := func() {
		f.mu.Lock()
		var rej *sinks.RejectedError
		switch {
		case err == nil:
			rec.ok = true
		case errors.As(err, &rej):
			// The events not named are durable.
			f.failures++
			rec.ok, rec.events = true, nil
			for i, e := range b.Events {
				if !slices.Contains(rej.Indexes, i) {
					rec.events = append(rec.events, e)
				}
			}
		default:
			f.failures++
		}
		f.mu.Unlock()
		ack(err)
	}
	if f.hold {
		f.held = append(f.held, done)
		f.mu.Unlock()
		return nil
	}
	f.mu.Unlock()
	if f.maxDelay > 0 {
		f.mu.Lock()
		f.pending++
		f.mu.Unlock()
		d := rand.N(f.maxDelay)
		go func() {
			time.Sleep(d)
			done()
			f.mu.Lock()
			f.pending--
			f.mu.Unlock()
		}()
		return nil
	}
	done()
	return nil
}

// release acknowledges every held batch and stops holding.
func (f *fakeSink) release() {
	f.mu.Lock()
	held := f.held
	f.held = nil
	f.hold = false
	f.mu.Unlock()
	for _, d := range held {
		d()
	}
}

func (f *fakeSink) Flush(ctx context.Context) error {
	f.mu.Lock()
	f.flushes++
	var run []func()
	if f.ackOnFlush {
		run, f.held = f.held, nil
	}
	f.mu.Unlock()
	for _, d := range run {
		d()
	}
	for {
		f.mu.Lock()
		n := f.pending
		f.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-time.After(time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (f *fakeSink) Close(ctx context.Context) error {
	if err := f.Flush(ctx); err != nil {
		return err
	}
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	return nil
}

type writeRec struct {
	events []event.Event
	ok     bool
}

// events returns the events of every acknowledged write, in write order
// (the order they reached the destination).
func (f *fakeSink) events() []event.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []event.Event
	for _, r := range f.log {
		if r.ok {
			out = append(out, r.events...)
		}
	}
	return out
}

// durableSet is the set of (shard, sequence) the sink made durable.
func (f *fakeSink) durableSet() map[string]bool {
	m := map[string]bool{}
	for _, e := range f.events() {
		m[e.ShardID+"/"+e.SequenceNumber] = true
	}
	return m
}

// memStore is an in-memory checkpoint.Store that can fail saves and checks
// every save against a caller's invariant.
type memStore struct {
	mu     sync.Mutex
	cps    map[string]map[string]checkpoint.Checkpoint
	saves  []string
	failFn func(arn, shard string, cp checkpoint.Checkpoint) error
	check  func(arn, shard string, cp checkpoint.Checkpoint) error
	errs   []error
}

func newMemStore() *memStore {
	return &memStore{cps: map[string]map[string]checkpoint.Checkpoint{}}
}

func (m *memStore) Load(ctx context.Context, arn string) (map[string]checkpoint.Checkpoint, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]checkpoint.Checkpoint{}
	for k, v := range m.cps[arn] {
		out[k] = v
	}
	return out, nil
}

func (m *memStore) Save(ctx context.Context, arn, shard string, cp checkpoint.Checkpoint) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failFn != nil {
		if err := m.failFn(arn, shard, cp); err != nil {
			return err
		}
	}
	if m.check != nil {
		if err := m.check(arn, shard, cp); err != nil {
			m.errs = append(m.errs, err)
		}
	}
	prev := m.cps[arn][shard]
	if prev.Finished {
		m.errs = append(m.errs, fmt.Errorf("save %+v over finished shard %s", cp, shard))
	}
	if event.CompareSequence(cp.SequenceNumber, prev.SequenceNumber) < 0 {
		m.errs = append(m.errs, fmt.Errorf("shard %s checkpoint went back from %s to %s", shard, prev.SequenceNumber, cp.SequenceNumber))
	}
	if m.cps[arn] == nil {
		m.cps[arn] = map[string]checkpoint.Checkpoint{}
	}
	m.cps[arn][shard] = cp
	m.saves = append(m.saves, fmt.Sprintf("%s=%s/%v", shard, cp.SequenceNumber, cp.Finished))
	return nil
}

func (m *memStore) Close() error { return nil }

func (m *memStore) get(arn, shard string) checkpoint.Checkpoint {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cps[arn][shard]
}

func (m *memStore) problems() []error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]error(nil), m.errs...)
}
