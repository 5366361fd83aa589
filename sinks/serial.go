package sinks

import (
	"context"
	"sync"
)

// serial runs a sink's writes on one goroutine: Write queues a batch (and
// blocks while the queue is full: backpressure), the goroutine takes every
// queued batch at once, makes them durable in one go (one fsync for many
// batches) and acknowledges them, in order. Acknowledgements therefore never
// run on the caller's goroutine, so a caller may hold its own locks across
// Write.
type serial struct {
	mu     sync.RWMutex
	closed bool
	reqs   chan serialReq
	done   chan struct{}
	// write makes the batches durable and returns one error per batch
	// (nil: durable).
	write func(reqs []serialReq) []error
	// finish runs once after the last write, on the worker goroutine.
	finish func() error
	finErr error
	// prepare, when set, runs in Write on the caller's goroutine before the
	// batch is queued; its result travels with the batch (serialReq.prep).
	// Work done there (rendering lines) runs in parallel across callers
	// instead of on the single worker goroutine.
	prepare func(Batch) any
}

type serialReq struct {
	b     Batch
	ack   Ack
	prep  any           // what prepare returned for b
	flush chan struct{} // non-nil: a flush marker, closed once everything before it is acknowledged
}

func newSerial(queue int, write func([]serialReq) []error, finish func() error) *serial {
	s := &serial{reqs: make(chan serialReq, queue), done: make(chan struct{}), write: write, finish: finish}
	go s.run()
	return s
}

func (s *serial) run() {
	defer close(s.done)
	var pending []serialReq
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
		var batches []serialReq
		for _, r := range pending {
			if r.flush == nil {
				batches = append(batches, r)
			}
		}
		if len(batches) > 0 {
			errs := s.write(batches)
			for i, r := range batches {
				r.ack(errs[i])
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

func (s *serial) Write(ctx context.Context, b Batch, ack Ack) error {
	if ack == nil {
		ack = func(error) {}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	var prep any
	if s.prepare != nil {
		prep = s.prepare(b)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case s.reqs <- serialReq{b: b, ack: ack, prep: prep}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *serial) Flush(ctx context.Context) error {
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return ErrClosed
	}
	ch := make(chan struct{})
	select {
	case s.reqs <- serialReq{flush: ch}:
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
func (s *serial) Close(ctx context.Context) error {
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
