package consumer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/checkpoint"
	"github.com/ttl-archiver/archiver/internal/backoff"
)

// shardDelivery tracks one shard's records from Process until every sink
// acknowledged them, and the shard's checkpoint.
//
// Every batch handed to Process becomes an entry, queued in stream order.
// An entry is done when each sink that got some of its events acknowledged
// them (an entry no sink wants is done at once). The checkpoint may advance
// to an entry's last sequence number only when that entry and every entry
// before it are done: the queue is popped from its head only, into the
// tally of what the next save covers. With recording sinks a save first
// has them record that range (coverage.go).
type shardDelivery struct {
	c                *Consumer
	key              string
	table, arn, id   string
	ctx              context.Context // lanes' writes; cancelled at teardown
	cancel           context.CancelFunc
	lanes            []*lane // one per route, index-aligned with Consumer.routes
	budget           int
	lagLabelsCreated bool
	// When watch last logged the shard stuck or near the trim (only the
	// consumer's reportLag goroutine touches these).
	lastStuckLog, lastTrimLog time.Time
	// needFirst: records were not read (Skipped); the next batch's first
	// sequence number is kept for the range (only the reader's goroutine
	// touches it).
	needFirst bool

	mu      sync.Mutex
	entries []*entry // not yet done, in stream order (head may be done only transiently)
	// tally sums the entries done and not yet taken by a save; saving,
	// those a save in flight covers (back into tally if it fails).
	tally, saving tally
	acked         string // highest sequence number up to which everything is done
	last          string // last sequence number handed to Process
	bytes         int    // bytes of entries not yet done
	err           error  // terminal: lease lost
	progress      chan struct{}
	// The shard's checkpoint saver (see runSaver), started on the first
	// advance; never started again once the state is torn down.
	saverStarted, saverStopped bool
	saveWake                   chan struct{} // capacity 1: an advance not yet saved
	saverDone                  chan struct{}

	saveMu   sync.Mutex
	saved    string // last saved sequence number
	finished bool   // Finished was saved
	closed   bool   // torn down: never save again
	// What the shard's ranges name (ShardStarted; with recording sinks):
	// its parent, and its StartingSequenceNumber and EndingSequenceNumber
	// (a range of a shard that ended with nothing read ends there).
	parent, startSeq, endSeq string
}

func newShardDelivery(c *Consumer, key, table, arn, id, stored string) *shardDelivery {
	ctx, cancel := context.WithCancel(c.base)
	s := &shardDelivery{c: c, key: key, table: table, arn: arn, id: id, ctx: ctx, cancel: cancel,
		budget: c.cfg.MaxInFlightBytes, acked: stored, last: stored, saved: stored, progress: make(chan struct{}),
		saveWake: make(chan struct{}, 1), saverDone: make(chan struct{})}
	routes := c.routes
	if c.dlq != nil {
		routes = append(routes[:len(routes):len(routes)], c.dlq) // the dead-letter lane is last
	}
	s.lanes = make([]*lane, len(routes))
	for i, r := range routes {
		s.lanes[i] = &lane{s: s, r: r, idx: i, dead: r == c.dlq, wake: make(chan struct{}, 1), done: make(chan struct{})}
	}
	return s
}

// signal wakes everyone waiting for progress. Called with s.mu held.
func (s *shardDelivery) signal() {
	close(s.progress)
	s.progress = make(chan struct{})
}

// fail makes the shard's state terminal (lease lost).
func (s *shardDelivery) fail(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
		s.signal()
	}
	s.mu.Unlock()
}

// add queues e once the shard's budget and the consumer's shared budget
// have room for it (a batch larger than a budget is admitted alone). It
// blocks until then, until ctx ends, or until the shard failed; every
// StarvedFlush of waiting it asks the sinks to flush.
func (s *shardDelivery) add(ctx context.Context, e *entry) error {
	var starve *time.Timer
	defer func() {
		if starve != nil {
			starve.Stop()
		}
	}()
	for {
		s.mu.Lock()
		if s.err != nil {
			err := s.err
			s.mu.Unlock()
			return err
		}
		var shared <-chan struct{}
		fits := s.bytes == 0 || s.bytes+e.bytes <= s.budget
		if fits {
			shared = s.c.inflight.TryAcquire(int64(e.bytes))
		}
		if fits && shared == nil {
			if e.last == "" {
				e.last = s.last // no record with a valid sequence number
			}
			s.entries = append(s.entries, e)
			s.bytes += e.bytes
			s.last = e.last
			s.c.m.inflightBytes.WithLabelValues(s.table).Add(float64(e.bytes))
			if e.pending == 0 {
				s.advance()
			}
			s.mu.Unlock()
			return nil
		}
		ch := s.progress
		s.mu.Unlock()
		var starved <-chan time.Time
		if d := s.c.cfg.StarvedFlush; d > 0 {
			if starve == nil {
				starve = time.NewTimer(d)
			}
			starved = starve.C
		}
		select {
		case <-ch:
		case <-shared:
		case <-starved:
			s.c.starved()
			starve.Reset(s.c.cfg.StarvedFlush)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// entryDone records one sink's acknowledgement of e.
func (s *shardDelivery) entryDone(e *entry) {
	s.mu.Lock()
	e.pending--
	if e.pending == 0 {
		s.advance()
	}
	s.mu.Unlock()
}

// advance pops done entries off the head. Called with s.mu held.
func (s *shardDelivery) advance() {
	n := 0
	freed := 0
	for n < len(s.entries) && s.entries[n].pending == 0 {
		e := s.entries[n]
		s.acked = e.last
		freed += e.bytes
		s.tally.add(e)
		n++
	}
	if n == 0 {
		return
	}
	s.entries = append(s.entries[:0:0], s.entries[n:]...)
	s.bytes -= freed
	s.c.inflight.Release(int64(freed))
	s.c.m.inflightBytes.WithLabelValues(s.table).Sub(float64(freed))
	s.signal()
	s.wakeSaver()
}

// wakeSaver tells the shard's saver that the acknowledged prefix advanced,
// starting the saver on first use. It never blocks. Called with s.mu held.
func (s *shardDelivery) wakeSaver() {
	if s.saverStopped {
		return
	}
	if !s.saverStarted {
		s.saverStarted = true
		go s.runSaver()
	}
	select {
	case s.saveWake <- struct{}{}:
	default:
	}
}

// runSaver saves the shard's checkpoint on a leading edge with trailing
// coalescing: an advance with no save in the last CheckpointInterval is
// saved at once (a process killed soon after starting re-delivers little),
// and the advances during the interval that follows are saved together at
// its end. A failed save (or record) is retried at the interval's end; a
// lost lease stops the saver (save already failed the shard). Being the
// shard's only periodic saver, and save holding saveMu, saves never
// overlap and each writes a sequence number at least the previous one's.
// With recording sinks an advance is saved only once one of them wants
// the range recorded (recordDue): while something is unsaved the saver
// asks again at the end of every interval, so that an idle shard's range
// is recorded when a sink's cadence comes round.
func (s *shardDelivery) runSaver() {
	defer close(s.saverDone)
	ctx := s.ctx
	interval := s.c.cfg.CheckpointInterval
	due := false // a save is due without waiting for an advance
	for {
		if !due {
			select {
			case <-s.saveWake:
			case <-ctx.Done():
				return
			}
		}
		due = false
		if !s.recordDue() {
			if !backoff.Sleep(ctx, interval) {
				return
			}
			due = s.unsaved()
			continue
		}
		select {
		case s.c.saveSlots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		wrote, err := s.saveIfAdvanced(ctx)
		<-s.c.saveSlots
		switch {
		case err != nil && ctx.Err() != nil:
			return
		case errors.Is(err, checkpoint.ErrLeaseLost):
			return
		case err != nil:
			s.c.log.Warn("checkpoint not saved (its range not recorded, or the save failed); retrying at the end of the interval",
				zap.String("stream", s.arn), zap.String("shard", s.id), zap.Error(err))
			due = true
		case !wrote:
			continue // nothing written: the next advance may save at once
		}
		if !backoff.Sleep(ctx, interval) {
			return
		}
		// Advances during the interval (a pending wake) are saved now, as
		// one; otherwise the next advance is a leading edge again.
		select {
		case <-s.saveWake:
			due = true
		default:
		}
	}
}

// drain waits until every entry is done and every lane is empty, flushing the sinks that hold the
// shard's events once everything queued was handed to them.
func (s *shardDelivery) drain(ctx context.Context) error {
	flushedAt := make([]uint64, len(s.lanes))
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		s.mu.Lock()
		if s.err != nil {
			err := s.err
			s.mu.Unlock()
			return err
		}
		entries := len(s.entries)
		ch := s.progress
		s.mu.Unlock()
		if entries == 0 && s.lanesEmpty() {
			return nil
		}
		var flush []int
		for i, l := range s.lanes {
			if w, idle := l.idle(); idle && w != flushedAt[i] {
				flush = append(flush, i)
				flushedAt[i] = w
			}
		}
		if len(flush) > 0 {
			var wg sync.WaitGroup
			for _, i := range flush {
				wg.Add(1)
				go func(r *route) {
					defer wg.Done()
					if err := r.sink.Flush(ctx); err != nil && ctx.Err() == nil {
						s.c.log.Warn("sink flush failed", zap.String("sink", r.name), zap.Error(err))
					}
				}(s.lanes[i].r)
			}
			wg.Wait()
			continue
		}
		select {
		case <-ch:
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// lanesEmpty reports whether every lane finished its work, rewrites for
// order included.
func (s *shardDelivery) lanesEmpty() bool {
	for _, l := range s.lanes {
		l.mu.Lock()
		n := len(l.items)
		l.mu.Unlock()
		if n > 0 {
			return false
		}
	}
	return true
}

// save writes the shard's checkpoint if it advanced since the last save;
// with finished, it records the shard Finished at its last sequence number
// (every entry must be done).
func (s *shardDelivery) save(ctx context.Context, finished bool) error {
	_, err := s.saveCheckpoint(ctx, finished)
	return err
}

// saveIfAdvanced is save(ctx, false) that also reports whether it wrote to
// the store.
func (s *shardDelivery) saveIfAdvanced(ctx context.Context) (bool, error) {
	return s.saveCheckpoint(ctx, false)
}

func (s *shardDelivery) saveCheckpoint(ctx context.Context, finished bool) (bool, error) {
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	if s.closed || s.finished {
		return false, nil
	}
	seq, t, err := s.take(finished)
	if t == nil {
		return false, err
	}
	if len(s.c.recorders) > 0 {
		if err := s.recordRange(ctx, t, seq, finished); err != nil {
			s.giveBack()
			return false, err
		}
	}
	cp := checkpoint.Checkpoint{SequenceNumber: seq, Finished: finished}
	if err := s.c.store.Save(ctx, s.arn, s.id, cp); err != nil {
		s.giveBack()
		s.c.m.checkpointErrors.WithLabelValues(s.table).Inc()
		if errors.Is(err, checkpoint.ErrLeaseLost) {
			s.c.log.Warn("checkpoint refused: lease lost; stopping the shard",
				zap.String("stream", s.arn), zap.String("shard", s.id), zap.String("sequence", seq))
			s.fail(fmt.Errorf("consumer: shard %s: %w", s.id, err))
		}
		return false, fmt.Errorf("consumer: save checkpoint of shard %s: %w", s.id, err)
	}
	s.c.m.checkpointSaves.WithLabelValues(s.table).Inc()
	s.saved = seq
	s.finished = finished
	s.mu.Lock()
	s.saving = tally{}
	s.mu.Unlock()
	return true, nil
}

// take reads what a save writes: the acknowledged prefix, and the tally
// of the entries it covers, moved aside into saving. It returns a nil
// tally when there is nothing to save (with an error when finished finds
// batches unacknowledged, or, with recording sinks, the shard failed: a
// lost lease records nothing). Called with saveMu held.
func (s *shardDelivery) take(finished bool) (string, *tally, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seq, pending := s.acked, len(s.entries)
	switch {
	case finished && pending > 0:
		return "", nil, fmt.Errorf("consumer: shard %s: cannot finish with %d batches unacknowledged", s.id, pending)
	case !finished && seq == s.saved:
		return "", nil, nil
	case s.err != nil && len(s.c.recorders) > 0:
		return "", nil, s.err
	}
	s.saving, s.tally = s.tally, tally{}
	t := s.saving
	return seq, &t, nil
}

// giveBack returns what a failed save took to the tally, ahead of what
// was done since. Called with saveMu held.
func (s *shardDelivery) giveBack() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.saving.merge(&s.tally)
	s.tally, s.saving = s.saving, tally{}
}

// lag reports the records not covered by the saved checkpoint and the age
// of the oldest of them.
func (s *shardDelivery) lag(now time.Time) (records int, age time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	records = int(s.saving.records + s.tally.records)
	oldest := s.saving.first
	if oldest.IsZero() {
		oldest = s.tally.first
	}
	for _, e := range s.entries {
		records += e.records
		if oldest.IsZero() && !e.first.IsZero() {
			oldest = e.first
		}
	}
	if !oldest.IsZero() && now.After(oldest) {
		age = now.Sub(oldest)
	}
	return records, age
}

// close stops the shard's lanes; the state is never saved again.
func (s *shardDelivery) close() {
	s.saveMu.Lock()
	s.closed = true
	s.saveMu.Unlock()
	s.cancel()
	s.mu.Lock()
	s.saverStopped = true
	saver := s.saverStarted
	s.mu.Unlock()
	if saver {
		<-s.saverDone
	}
	for _, l := range s.lanes {
		l.mu.Lock()
		started := l.started
		l.mu.Unlock()
		if started {
			<-l.done
		}
	}
	s.mu.Lock()
	s.c.m.inflightBytes.WithLabelValues(s.table).Sub(float64(s.bytes))
	s.c.inflight.Release(int64(s.bytes))
	s.bytes = 0
	s.mu.Unlock()
	s.c.m.lagRecords.DeleteLabelValues(s.table, s.id)
	s.c.m.lagSeconds.DeleteLabelValues(s.table, s.id)
	s.c.m.oldestUnacked.DeleteLabelValues(s.table, s.id)
}
