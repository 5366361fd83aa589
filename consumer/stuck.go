package consumer

import (
	"time"

	"go.uber.org/zap"
)

// failing describes a shard's oldest batch that a sink keeps failing.
type failing struct {
	sink         string
	firstEventID string
	firstSeq     string
	firstFailure time.Time
	attempts     int
	err          error
}

// health reports the creation time of the shard's oldest unacknowledged
// record (zero when everything is acknowledged) and, if a sink keeps
// failing one of its batches, the oldest such failure.
func (s *shardState) health() (oldest time.Time, f *failing) {
	s.mu.Lock()
	for _, e := range s.entries {
		if !e.first.IsZero() {
			oldest = e.first
			break
		}
	}
	s.mu.Unlock()
	for _, l := range s.lanes {
		l.mu.Lock()
		for _, it := range l.items {
			if it.durable || it.firstFailure.IsZero() || len(it.batch.Events) == 0 {
				continue
			}
			if f == nil || it.firstFailure.Before(f.firstFailure) {
				e := &it.batch.Events[0]
				f = &failing{sink: l.r.name, firstEventID: e.EventID, firstSeq: e.SequenceNumber,
					firstFailure: it.firstFailure, attempts: it.attempt, err: it.lastErr}
			}
			break // later items of the lane fail after this one
		}
		l.mu.Unlock()
	}
	return oldest, f
}

// watch updates the unacknowledged-age gauges and speaks about stuck
// shards and records close to the stream's trim: a shard whose oldest
// batch a sink has kept failing for StuckAfter is logged at ERROR every
// StuckLogInterval (without a dead-letter sink it is retried without end,
// and the stream trims its records after StreamRetention), and a record
// within TrimWarning of that trim gets a log and a metric of its own.
func (c *Consumer) watch(now time.Time) {
	stuck := map[string]int{}
	near := map[string]int{}
	for _, s := range c.snapshot() {
		stuck[s.table] += 0
		near[s.table] += 0
		oldest, f := s.health()
		var age time.Duration
		if !oldest.IsZero() && now.After(oldest) {
			age = now.Sub(oldest)
		}
		c.m.oldestUnacked.WithLabelValues(s.table, s.id).Set(age.Seconds())
		left := c.cfg.StreamRetention - age
		if f != nil && now.Sub(f.firstFailure) >= c.cfg.StuckAfter {
			stuck[s.table]++
			if now.Sub(s.lastStuckLog) >= c.cfg.StuckLogInterval {
				s.lastStuckLog = now
				c.log.Error("shard stuck: a sink keeps failing its oldest batch; the checkpoint waits",
					zap.String("table", s.table), zap.String("shard", s.id), zap.String("sink", f.sink),
					zap.String("first_event_id", f.firstEventID), zap.String("first_sequence", f.firstSeq),
					zap.Duration("failing_for", now.Sub(f.firstFailure)), zap.Int("attempts", f.attempts),
					zap.Duration("oldest_unacked_age", age), zap.Duration("time_left_before_trim", left),
					zap.Bool("dead_letter", c.dlq != nil), zap.Error(f.err))
			}
		}
		if !oldest.IsZero() && left <= c.cfg.TrimWarning {
			near[s.table]++
			if now.Sub(s.lastTrimLog) >= c.cfg.StuckLogInterval {
				s.lastTrimLog = now
				fields := []zap.Field{zap.String("table", s.table), zap.String("shard", s.id),
					zap.Duration("oldest_unacked_age", age), zap.Duration("time_left_before_trim", left)}
				if f != nil {
					fields = append(fields, zap.String("sink", f.sink), zap.String("first_event_id", f.firstEventID), zap.Error(f.err))
				}
				c.log.Error("records near the stream's trim: unacknowledged records will be lost when the stream trims them", fields...)
			}
		}
	}
	c.tablesMu.Lock()
	defer c.tablesMu.Unlock()
	for t := range c.watched {
		if _, ok := stuck[t]; !ok {
			stuck[t], near[t] = 0, 0 // no active shard left: clear the gauges
		}
	}
	for t, n := range stuck {
		c.watched[t] = true
		c.m.shardsStuck.WithLabelValues(t).Set(float64(n))
		c.m.nearTrim.WithLabelValues(t).Set(float64(near[t]))
	}
}
