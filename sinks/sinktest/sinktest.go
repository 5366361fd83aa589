// Package sinktest is the tests' recording sink: a sinks.Sink that keeps
// every batch it was given, in write order (the order batches reach a
// destination), with what it made durable, and can be told to refuse or
// fail batches (a partial rejection included), to make writes wait at a
// gate, to hold their acknowledgements (until Release, or until the next
// Flush) or to send them late and out of order. It is also a recording
// sink of the consumer (consumer.Recorder): it keeps every range of a
// shard the consumer has it record, and can be told when a range is due
// and to fail recording. A test keeps its own fake sink only for a fault
// the recorder cannot express (a real sink wrapped, say).
package sinktest

import (
	"context"
	"errors"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/manifest"
	"github.com/ttl-archiver/archiver/sinks"
)

// ErrClosed is what Write returns after Close.
var ErrClosed = errors.New("sinktest: write after close")

// Recorder is a recording sink; its methods are safe for concurrent use.
// Its zero value is not usable: use New.
type Recorder struct {
	name    string
	arrived chan struct{} // closed at the first Write

	mu       sync.Mutex
	refuse   func(b sinks.Batch) error
	fail     func(b sinks.Batch) error
	onWrite  func(b sinks.Batch)
	gate     <-chan struct{}
	hold     bool
	onFlush  bool          // Flush sends the held acknowledgements
	maxDelay time.Duration // > 0: acknowledge late, out of order
	held     []func()
	late     int // late acknowledgements not sent yet
	log      []*write
	writes   int
	failures int
	flushes  int
	closed   bool

	// Ranges: the consumer's Record calls.
	due          func(streamARN, shardID string) bool
	failRecord   func(r manifest.Range) error
	ranges       []manifest.Range
	records      int
	recordFailed int
}

// write is one batch the recorder took; durable is set when it is
// acknowledged with nil (kept: all its events), or with a
// *sinks.RejectedError (kept: the events the error does not name).
type write struct {
	batch   sinks.Batch
	kept    []event.Event
	durable bool
}

// New returns a recorder named name that acknowledges every batch at once
// and whose ranges are always due.
func New(name string) *Recorder {
	return &Recorder{name: name, arrived: make(chan struct{})}
}

// Name is the name given to New.
func (r *Recorder) Name() string { return r.name }

// RefuseWith makes f decide, for every later write, the error Write itself
// returns (nil: taken). A refused batch is not recorded.
func (r *Recorder) RefuseWith(f func(b sinks.Batch) error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refuse = f
}

// FailWith makes f decide, for every later write, the error its batch is
// acknowledged with (nil: durable). A *sinks.RejectedError rejects only
// the events it names: the others are durable. A nil f fails nothing.
func (r *Recorder) FailWith(f func(b sinks.Batch) error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fail = f
}

// OnWrite calls f with every later batch as it is taken, under the
// recorder's lock (f must not call the recorder).
func (r *Recorder) OnWrite(f func(b sinks.Batch)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.onWrite = f
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

// HoldUntilFlush keeps the acknowledgements of later writes until the next
// Flush (or Release), which sends them; later writes are held again.
func (r *Recorder) HoldUntilFlush() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hold, r.onFlush = true, true
}

// Release sends every held acknowledgement, in write order, and holds no
// more.
func (r *Recorder) Release() {
	r.mu.Lock()
	held := r.held
	r.held, r.hold, r.onFlush = nil, false, false
	r.mu.Unlock()
	for _, done := range held {
		done()
	}
}

// Held returns how many acknowledgements are held.
func (r *Recorder) Held() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.held)
}

// AckLate makes the recorder acknowledge every later write from another
// goroutine after a random pause under max, so acknowledgements arrive
// out of order; Flush and Close wait for them.
func (r *Recorder) AckLate(max time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.maxDelay = max
}

// Write records b and acknowledges it, as told: at once, after the gate,
// held, late, or failed.
func (r *Recorder) Write(ctx context.Context, b sinks.Batch, ack sinks.Ack) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := r.wait(ctx); err != nil {
		return err
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return ErrClosed
	}
	if r.refuse != nil {
		if err := r.refuse(b); err != nil {
			r.mu.Unlock()
			return err
		}
	}
	done := r.take(b, ack)
	switch {
	case r.hold:
		r.held = append(r.held, done)
	case r.maxDelay > 0:
		r.late++
		go func(d time.Duration) {
			time.Sleep(d)
			done()
			r.mu.Lock()
			r.late--
			r.mu.Unlock()
		}(rand.N(r.maxDelay))
	default:
		defer done()
	}
	r.mu.Unlock()
	return nil
}

// wait notes the write's arrival and waits at the gate, if any.
func (r *Recorder) wait(ctx context.Context) error {
	r.mu.Lock()
	select {
	case <-r.arrived:
	default:
		close(r.arrived)
	}
	gate := r.gate
	r.mu.Unlock()
	if gate == nil {
		return nil
	}
	select {
	case <-gate:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// take logs b (r.mu held) and returns what acknowledges it.
func (r *Recorder) take(b sinks.Batch, ack sinks.Ack) (done func()) {
	r.writes++
	var err error
	if r.fail != nil {
		err = r.fail(b)
	}
	if r.onWrite != nil {
		r.onWrite(b)
	}
	w := &write{batch: b}
	r.log = append(r.log, w)
	return func() {
		r.mu.Lock()
		var rej *sinks.RejectedError
		switch {
		case err == nil:
			w.durable, w.kept = true, b.Events
		case errors.As(err, &rej):
			r.failures++
			w.durable = true
			for i, e := range b.Events {
				if !slices.Contains(rej.Indexes, i) {
					w.kept = append(w.kept, e)
				}
			}
		default:
			r.failures++
		}
		r.mu.Unlock()
		ack(err)
	}
}

// Flush sends the held acknowledgements when HoldUntilFlush said so, and
// waits for the late ones (AckLate). Other held ones wait for Release.
func (r *Recorder) Flush(ctx context.Context) error {
	r.mu.Lock()
	r.flushes++
	var run []func()
	if r.onFlush {
		run, r.held = r.held, nil
	}
	r.mu.Unlock()
	for _, done := range run {
		done()
	}
	for {
		r.mu.Lock()
		late := r.late
		r.mu.Unlock()
		if late == 0 {
			return nil
		}
		select {
		case <-time.After(time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Flushes returns how many times Flush was called (Close included).
func (r *Recorder) Flushes() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.flushes
}

// Close flushes, then makes later writes fail with ErrClosed.
func (r *Recorder) Close(ctx context.Context) error {
	if err := r.Flush(ctx); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	return nil
}

// Closed reports whether Close was called.
func (r *Recorder) Closed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// Batches returns what the recorder made durable, batch by batch in
// write order: the batches acknowledged with nil, and those acknowledged
// with a *sinks.RejectedError without the events it named.
func (r *Recorder) Batches() []sinks.Batch {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []sinks.Batch
	for _, w := range r.log {
		if w.durable {
			b := w.batch
			b.Events = w.kept
			out = append(out, b)
		}
	}
	return out
}

// Events returns the events of Batches, in order.
func (r *Recorder) Events() []event.Event {
	var out []event.Event
	for _, b := range r.Batches() {
		out = append(out, b.Events...)
	}
	return out
}

// Written returns how many events the recorder took, durable or not.
func (r *Recorder) Written() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, w := range r.log {
		n += len(w.batch.Events)
	}
	return n
}

// Writes returns how many batches the recorder took, and how many of them
// it acknowledged with an error.
func (r *Recorder) Writes() (writes, failures int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.writes, r.failures
}

// Plain is the recorder as a sink that records no ranges: a sinks.Sink
// but no consumer.Recorder, as a sink without manifests (NATS) is.
func (r *Recorder) Plain() sinks.Sink { return struct{ sinks.Sink }{r} }

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
