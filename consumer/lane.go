package consumer

import (
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/internal/backoff"
)

// lane carries one shard's events to one route's sink, in stream order.
//
// A lane writes its queued batches in order and keeps every batch until the
// sink acknowledged it. When the sink acknowledges a batch with an error
// (or refuses it), the lane goes back to that batch and writes it and every
// later batch again, in order, after an exponential backoff with jitter:
// the destination may see duplicates but the last copy of each event is in
// stream order. It retries until its shard is torn down.
type lane struct {
	s   *shardDelivery
	r   *route
	idx int // the lane's index in s.lanes
	// dead: this is the shard's dead-letter lane. Its failures are retried
	// without end; the other lanes hand it what they give up on.
	dead bool

	mu       sync.Mutex
	items    []*item // not yet acknowledged (head), in stream order
	next     int     // index in items of the next batch to write
	writes   uint64  // batches handed to the sink so far
	failures int     // consecutive failures, for the backoff
	retryAt  time.Time
	started  bool
	wake     chan struct{}
	done     chan struct{}
}

// enqueue queues a batch for the sink, starting the lane's writer on first
// use. It never blocks.
func (l *lane) enqueue(it *item) {
	l.mu.Lock()
	l.items = append(l.items, it)
	if !l.started {
		l.started = true
		go l.run()
	}
	l.mu.Unlock()
	l.poke()
}

func (l *lane) poke() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// idle reports the write count and whether the lane waits for
// acknowledgements only: it holds unacknowledged batches and handed every
// one of them to the sink.
func (l *lane) idle() (uint64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.writes, len(l.items) > 0 && l.next >= len(l.items)
}

func (l *lane) run() {
	defer close(l.done)
	ctx := l.s.ctx
	for {
		l.mu.Lock()
		if l.next >= len(l.items) {
			l.mu.Unlock()
			select {
			case <-l.wake:
				continue
			case <-ctx.Done():
				return
			}
		}
		if wait := time.Until(l.retryAt); wait > 0 {
			l.mu.Unlock()
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return
			}
			continue
		}
		it := l.items[l.next]
		l.next++
		if it.deadLettered {
			// Its events are with the dead-letter lane: never written here
			// again, not even to keep order (they are not delivered here).
			l.mu.Unlock()
			continue
		}
		l.writes++
		it.attempt++
		attempt := it.attempt
		l.mu.Unlock()

		start := time.Now()
		err := l.r.sink.Write(ctx, it.batch, func(err error) { l.ack(it, attempt, start, err) })
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			l.ack(it, attempt, start, &refusedError{err})
		}
	}
}

// ack handles the sink's acknowledgement of one attempt at writing it.
func (l *lane) ack(it *item, attempt int, start time.Time, err error) {
	m := l.s.c.m
	if err == nil {
		m.sinkWrites.WithLabelValues(l.r.name).Inc()
		m.sinkLatency.WithLabelValues(l.r.name).Observe(time.Since(start).Seconds())
		l.mu.Lock()
		first := !it.durable
		it.durable = true
		if attempt >= it.minAttempt {
			it.acked = true
		}
		l.popAcked()
		l.mu.Unlock()
		if first {
			m.countSinkEvents(l.r.name, it.batch.Events)
			it.finish(l.s)
		}
		return
	}
	m.sinkFailures.WithLabelValues(l.r.name).Inc()
	if l.dead {
		m.deadLetterFailures.WithLabelValues(l.s.table).Inc()
	}
	if l.s.ctx.Err() != nil {
		return // torn down: nothing to retry
	}
	l.mu.Lock()
	if attempt != it.attempt || attempt < it.minAttempt {
		l.mu.Unlock()
		return // a newer attempt decides, or a rewrite is already due
	}
	idx := -1
	for i, x := range l.items {
		if x == it {
			idx = i
			break
		}
	}
	now := time.Now()
	if it.firstFailure.IsZero() {
		it.firstFailure = now
	}
	it.lastErr = err
	if idx >= 0 && idx < l.next {
		if dl := l.deadLetter(it, err, now); dl != nil {
			l.mu.Unlock()
			l.s.lanes[len(l.s.lanes)-1].enqueue(dl)
			return
		}
	}
	var wait time.Duration
	if idx >= 0 && idx < l.next {
		// Write it and every later batch again, in order: the last copy of
		// each must come after the last copy of the batches before it, so
		// earlier successes of the later batches no longer count for order
		// (they still count for the checkpoint: they are durable). Batches
		// with the dead-letter lane are not written here again.
		for _, x := range l.items[idx:l.next] {
			if x.deadLettered {
				continue
			}
			x.acked = false
			x.minAttempt = x.attempt + 1
		}
		l.next = idx
		l.failures++
		wait = backoff.Policy{Min: l.s.c.cfg.RetryMinBackoff, Max: l.s.c.cfg.RetryMaxBackoff}.Delay(l.failures - 1)
		l.retryAt = time.Now().Add(wait)
	}
	failures := l.failures
	l.mu.Unlock()
	l.s.c.log.Warn("sink failed a batch; retrying it and every later batch of the shard",
		zap.String("sink", l.r.name), zap.String("shard", l.s.id),
		zap.String("first_sequence", it.batch.Events[0].SequenceNumber),
		zap.Int("consecutive_failures", failures), zap.Duration("retry_in", wait), zap.Error(err))
	l.poke()
}

// popAcked drops the acknowledged items at the head. Called with l.mu held.
func (l *lane) popAcked() {
	n := 0
	for n < len(l.items) && l.items[n].acked {
		n++
	}
	if n > 0 {
		l.items = append(l.items[:0:0], l.items[n:]...)
		l.next = max(l.next-n, 0)
		l.failures = 0
	}
}
