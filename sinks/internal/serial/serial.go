// Package serial runs a sink's writes on one goroutine ([Queue]): the file
// sink, stdout:// and the NATS sink on core NATS share it.
package serial

import (
	"context"
	"sync"

	"github.com/ttl-archiver/archiver/sinks/sinkapi"
)

// Queue runs a sink's writes on one goroutine: Write queues a batch (and
// blocks while the queue is full: backpressure), the goroutine takes every
// queued batch at once, makes them durable in one go (one fsync for many
// batches) and acknowledges them, in order. Acknowledgements therefore never
// run on the caller's goroutine, so a caller may hold its own locks across
// Write.
type Queue struct {
	mu     sync.RWMutex
	closed bool
	reqs   chan Req
	done   chan struct{}
	// write makes the batches durable and returns one error per batch
	// (nil: durable).
	write func(reqs []Req) []error
	// finish runs once after the last write, on the worker goroutine.
	finish func() error
	finErr error
	// Prepare, when set, runs in Write on the caller's goroutine before the
	// batch is queued; its result travels with the batch (Req.Prep).
	// Work done there (rendering lines) runs in parallel across callers
	// instead of on the single worker goroutine.
	Prepare func(sinkapi.Batch) any
}

// Req is one queued batch as the write function gets it.
type Req struct {
	Batch sinkapi.Batch
	Ack   sinkapi.Ack
	Prep  any           // what Prepare returned for Batch
	flush chan struct{} // non-nil: a flush marker, closed once everything before it is acknowledged
}

// New starts a queue of queue batches; write makes batches durable (one
// error per batch, nil: durable), finish runs once after the last write.
func New(queue int, write func([]Req) []error, finish func() error) *Queue {
	s := &Queue{reqs: make(chan Req, queue), done: make(chan struct{}), write: write, finish: finish}
	go s.run()
	return s
}

func (s *Queue) run() {
	defer close(s.done)
	var pending []Req
	for {
		r, ok := <-s.reqs
		if !ok {
			break
		}
		pending = append(pending[:0], r)
	drain:
		for len(pending) < 4096 {
			select {
			case r, ok := <-s.reqs:
				if !ok {
					break drain
				}
				pending = append(pending, r)
			default:
				break drain
			}
		}
		var batches []Req
		for _, r := range pending {
			if r.flush == nil {
				batches = append(batches, r)
			}
		}
		if len(batches) > 0 {
			errs := s.write(batches)
			for i, r := range batches {
				r.Ack(errs[i])
			}
		}
		for _, r := range pending {
			if r.flush != nil {
				close(r.flush)
			}
		}
		clear(pending)
	}
	if s.finish != nil {
		s.finErr = s.finish()
	}
}

// Write queues b (blocking while the queue is full) for the worker to
// write and acknowledge with ack.
func (s *Queue) Write(ctx context.Context, b sinkapi.Batch, ack sinkapi.Ack) error {
	if ack == nil {
		ack = func(error) {}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	var prep any
	if s.Prepare != nil {
		prep = s.Prepare(b)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return sinkapi.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case s.reqs <- Req{Batch: b, Ack: ack, Prep: prep}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Flush returns once every batch queued before it is acknowledged.
func (s *Queue) Flush(ctx context.Context) error {
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return sinkapi.ErrClosed
	}
	ch := make(chan struct{})
	select {
	case s.reqs <- Req{flush: ch}:
	case <-ctx.Done():
		s.mu.RUnlock()
		return ctx.Err()
	}
	s.mu.RUnlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops taking batches, lets the worker write and acknowledge what is
// queued, then runs finish. A second Close returns nil.
func (s *Queue) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.reqs)
	s.mu.Unlock()
	select {
	case <-s.done:
		return s.finErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// WhileOpen runs fn while the queue is open, keeping Close from running
// until fn returns; after Close it returns [sinkapi.ErrClosed].
func (s *Queue) WhileOpen(fn func() error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return sinkapi.ErrClosed
	}
	return fn()
}
