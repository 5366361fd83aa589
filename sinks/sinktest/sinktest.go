// Package sinktest is the tests' recording sink: a sinks.Sink that keeps
// every batch it acknowledged, in acknowledgement order, and can be told
// to fail batches, to make writes wait at a gate, or to hold their
// acknowledgements. It is also a recording sink of the consumer
// (consumer.Recorder): it keeps every range of a shard the consumer has
// it record, and can be told when a range is due and to fail recording. A
// test that needs a fault it cannot express (a partial rejection,
// acknowledgements out of order) keeps its own fake.
package sinktest

import (
	"context"
	"errors"
	"maps"
	"sync"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/manifest"
	"github.com/ttl-archiver/archiver/sinks"
)

// ErrClosed is what Write returns after Close.
var ErrClosed = errors.New("sinktest: write after close")

// Recorder is a recording sink; its methods are safe for concurrent use.
// Its zero value is not usable: use New.
type Recorder struct {
	name string

	mu       sync.Mutex
	fail     func(b sinks.Batch) error
	gate     <-chan struct{}
	arrived  chan struct{} // closed at the first Write
	hold     bool
	held     []func()
	acked    []sinks.Batch
	writes   int
	failures int
	closed   bool

	// Ranges: the consumer's Record calls.
	due          func(streamARN, shardID string) bool
	failRecord   func(r manifest.Range) error
	ranges       []manifest.Range
	records      int
	recordFailed int
}

// New returns a recorder named name that acknowledges every batch at once
// and whose ranges are always due.
func New(name string) *Recorder {
	return &Recorder{name: name, arrived: make(chan struct{})}
}

// Name is the name given to New.
func (r *Recorder) Name() string { return r.name }

// FailWith makes f decide, for every later write, the error its batch is
// acknowledged with (nil: recorded). A nil f fails nothing.
func (r *Recorder) FailWith(f func(b sinks.Batch) error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fail = f
}

// Gate makes every later Write wait until gate is closed (or its context
// ends: Write then returns the context's error and takes nothing).
func (r *Recorder) Gate(gate <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gate = gate
}

// Arrived is closed when the first Write is called (before its gate).
func (r *Recorder) Arrived() <-chan struct{} { return r.arrived }

// Hold keeps the acknowledgements of later writes until Release.
func (r *Recorder) Hold() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hold = true
}

// Release sends every held acknowledgement, in write order, and holds no
// more.
func (r *Recorder) Release() {
	r.mu.Lock()
	held := r.held
	r.held, r.hold = nil, false
	r.mu.Unlock()
	for _, done := range held {
		done()
	}
}

// Write records b and acknowledges it, as told: at once, after the gate,
// held, or failed.
func (r *Recorder) Write(ctx context.Context, b sinks.Batch, ack sinks.Ack) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r.mu.Lock()
	select {
	case <-r.arrived:
	default:
		close(r.arrived)
	}
	gate := r.gate
	r.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return ErrClosed
	}
	r.writes++
	var err error
	if r.fail != nil {
		err = r.fail(b)
	}
	done := func() {
		r.mu.Lock()
		if err == nil {
			r.acked = append(r.acked, b)
		} else {
			r.failures++
		}
		r.mu.Unlock()
		ack(err)
	}
	if r.hold {
		r.held = append(r.held, done)
		r.mu.Unlock()
		return nil
	}
	r.mu.Unlock()
	done()
	return nil
}

// Flush returns at once: every batch not held is acknowledged already, and
// held ones wait for Release.
func (r *Recorder) Flush(ctx context.Context) error { return nil }

// Close makes later writes fail with ErrClosed.
func (r *Recorder) Close(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	return nil
}

// Batches returns the batches acknowledged with nil, in the order they
// were acknowledged.
func (r *Recorder) Batches() []sinks.Batch {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]sinks.Batch(nil), r.acked...)
}

// Events returns the events of Batches, in order.
func (r *Recorder) Events() []event.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []event.Event
	for _, b := range r.acked {
		out = append(out, b.Events...)
	}
	return out
}

// Writes returns how many batches the recorder took, and how many of them
// it acknowledged with an error.
func (r *Recorder) Writes() (writes, failures int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.writes, r.failures
}

// Record keeps r, a range of a shard the consumer read, as a recording
// sink makes its manifest durable, or fails as FailRecordsWith says.
func (r *Recorder) Record(ctx context.Context, rg manifest.Range) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	r.records++
	if r.failRecord != nil {
		if err := r.failRecord(rg); err != nil {
			r.recordFailed++
			return err
		}
	}
	rg.Events, rg.DeadLettered = maps.Clone(rg.Events), maps.Clone(rg.DeadLettered)
	if rg.Trimmed != nil {
		t := *rg.Trimmed
		rg.Trimmed = &t
	}
	r.ranges = append(r.ranges, rg)
	return nil
}

// RecordDue reports what DueWith says of the shard; true when it was
// never called (or given nil): every range is due at once.
func (r *Recorder) RecordDue(streamARN, shardID string) bool {
	r.mu.Lock()
	due := r.due
	r.mu.Unlock()
	return due == nil || due(streamARN, shardID)
}

// DueWith makes f decide, from now on, whether a shard's range is due (nil:
// always).
func (r *Recorder) DueWith(f func(streamARN, shardID string) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.due = f
}

// FailRecordsWith makes f decide, for every later Record, the error it
// returns (nil: recorded). A nil f fails nothing.
func (r *Recorder) FailRecordsWith(f func(r manifest.Range) error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failRecord = f
}

// Ranges returns the ranges recorded (those Record returned nil for), in
// the order they were recorded.
func (r *Recorder) Ranges() []manifest.Range {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]manifest.Range(nil), r.ranges...)
}

// RecordCalls returns how many times Record was called, and how many of
// them failed.
func (r *Recorder) RecordCalls() (calls, failures int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.records, r.recordFailed
}

var _ sinks.Sink = (*Recorder)(nil)
