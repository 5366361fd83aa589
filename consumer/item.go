package consumer

import (
	"time"

	"github.com/ttl-archiver/archiver/sinks"
)

// item is one of an entry's batches on one lane: the events of the batch
// the lane's sink wants, until the sink acknowledged them.
type item struct {
	batch sinks.Batch
	e     *entry
	// durable is set by the first successful acknowledgement: the entry is
	// then told once.
	durable bool
	// acked is set when an attempt at or after minAttempt succeeded: one
	// written after every earlier batch's last copy, so the item may leave
	// the lane.
	acked      bool
	attempt    int
	minAttempt int
	// Failures of this item at its sink: when the first was, the last
	// error, and whether its events went to the dead-letter lane (the item
	// then waits for that lane's acknowledgement and is never written to
	// its sink again).
	firstFailure time.Time
	lastErr      error
	deadLettered bool
	// onDurable, on a dead-letter lane's item made for another lane's
	// item, replaces the entry bookkeeping: it tells that lane.
	onDurable func()
}

// finish tells whoever waits for the item that it is durable (once).
func (it *item) finish(s *shardDelivery) {
	if it.onDurable != nil {
		it.onDurable()
		return
	}
	s.entryDone(it.e)
}
