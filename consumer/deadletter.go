package consumer

import (
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/sinks"
)

// refusedError is a sink's Write refusing a batch: the sink took none of
// it, so a RejectedError inside says nothing about which events are
// durable.
type refusedError struct{ err error }

func (e *refusedError) Error() string { return "write refused: " + e.err.Error() }
func (e *refusedError) Unwrap() error { return e.err }

// deadLetter decides whether the failed attempt at it sends events to the
// dead-letter lane: the events a RejectedError names, or all of them when
// the failure is permanent or has lasted RetryFor. It returns the
// dead-letter lane's item, or nil to retry as usual. On a decision it
// marks it dead-lettered: the lane never writes it again and waits for the
// dead-letter lane's acknowledgement instead. Called with l.mu held.
func (l *lane) deadLetter(it *item, err error, now time.Time) *item {
	c := l.s.c
	if l.dead || c.dlq == nil {
		return nil
	}
	var (
		rej     *sinks.RejectedError
		refused *refusedError
		reason  = event.ReasonPermanent
		events  = it.batch.Events
	)
	switch {
	case errors.As(err, &rej) && !errors.As(err, &refused) && validIndexes(rej.Indexes, len(events)):
		events = make([]event.Event, len(rej.Indexes))
		for j, i := range rej.Indexes {
			events[j] = it.batch.Events[i]
		}
	case sinks.IsPermanent(err):
		events = append([]event.Event(nil), events...)
	case c.cfg.RetryFor > 0 && now.Sub(it.firstFailure) >= c.cfg.RetryFor:
		reason = event.ReasonRetryFor
		events = append([]event.Event(nil), events...)
	default:
		return nil
	}
	dl := &event.DeadLetter{Sink: l.r.name, Reason: reason, Error: err.Error(), Attempts: it.attempt, FirstFailure: it.firstFailure}
	var kinds [4]int32
	for i := range events {
		events[i].DeadLetter = dl
		if events[i].Kind.Valid() {
			kinds[kindIndex(events[i].Kind)]++
		}
	}
	it.deadLettered = true
	c.log.Error("sink failed events for good; sending them to the dead-letter sink",
		zap.String("sink", l.r.name), zap.String("shard", l.s.id), zap.String("reason", reason),
		zap.Int("events", len(events)), zap.Int("batch_events", len(it.batch.Events)),
		zap.String("first_event_id", events[0].EventID), zap.Int("attempts", it.attempt),
		zap.Duration("failing_for", now.Sub(it.firstFailure)), zap.String("dead_letter", c.dlq.name), zap.Error(err))
	n := len(events)
	return &item{
		batch:     sinks.Batch{StreamARN: it.batch.StreamARN, ShardID: it.batch.ShardID, Events: events},
		onDurable: func() { l.deadLettered(it, reason, n, kinds) },
	}
}

// deadLettered: the dead-letter sink acknowledged it's events (n of them,
// kinds of them by kind), which now count as delivered to this lane's
// sink. The ranges of its entry count them as the dead-letter sink's, not
// this sink's, unless they had been acknowledged here already (a batch
// written again for order).
func (l *lane) deadLettered(it *item, reason string, n int, kinds [4]int32) {
	l.s.c.m.deadLettered.WithLabelValues(l.s.table, l.r.name, reason).Add(float64(n))
	l.mu.Lock()
	first := !it.durable
	it.durable, it.acked = true, true
	l.popAcked()
	l.mu.Unlock()
	if first {
		l.s.movedToDead(it.e, l.idx, reason, n, kinds)
		it.finish(l.s)
	}
}

// validIndexes reports whether idx are ascending, distinct positions in a
// batch of n events, and at least one.
func validIndexes(idx []int, n int) bool {
	if len(idx) == 0 {
		return false
	}
	for j, i := range idx {
		if i < 0 || i >= n || (j > 0 && i <= idx[j-1]) {
			return false
		}
	}
	return true
}
