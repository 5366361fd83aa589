package consumer

import (
	"time"

	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/shard"
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
func (s *shardDelivery) health() (oldest time.Time, f *failing) {
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
	failing, counted := c.failingReaders(now, stuck)
	for _, s := range c.snapshot() {
		stuck[s.table] += 0
		near[s.table] += 0
		oldest, f := s.health()
		if rf, ok := failing[s.key]; ok {
			// Its reader is between two failures: the record it cannot
			// get past is the shard's oldest.
			delete(failing, s.key)
			if oldest.IsZero() || (!rf.Oldest.IsZero() && rf.Oldest.Before(oldest)) {
				oldest = rf.Oldest
			}
		}
		var age time.Duration
		if !oldest.IsZero() && now.After(oldest) {
			age = now.Sub(oldest)
		}
		c.m.oldestUnacked.WithLabelValues(s.table, s.id).Set(age.Seconds())
		left := c.cfg.StreamRetention - age
		if f != nil && now.Sub(f.firstFailure) >= c.cfg.StuckAfter && !counted[s.key] {
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
	c.failedGauges(failing, now)
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

// stuckReaderFailures is how many readers in a row must fail at one
// position, over at least StuckAfter, before their shard counts as stuck.
const stuckReaderFailures = 3

// failedReaders is what watch keeps about shards whose readers keep
// failing. The zero value is ready; watch's goroutine alone uses it.
type failedReaders struct {
	logged map[string]time.Time     // state key → last stuck log
	gauged map[string]shard.Failing // state key → shard whose age gauge watch set
}

// failingReaders counts, into stuck, the shards whose readers keep failing
// at one position (shard.Walker.Failing: a record the SDK cannot parse
// without a dead-letter sink, a response that cannot be read at all), and
// logs them at ERROR every StuckLogInterval. Such a shard's records wait
// as behind a failing sink; without this only
// archiver_shard_reader_failures_total would rise. It returns the failing
// shards by state key, and whether each was counted.
func (c *Consumer) failingReaders(now time.Time, stuck map[string]int) (map[string]shard.Failing, map[string]bool) {
	fr := &c.failed
	if fr.logged == nil {
		fr.logged, fr.gauged = map[string]time.Time{}, map[string]shard.Failing{}
	}
	failing, counted := map[string]shard.Failing{}, map[string]bool{}
	for _, f := range c.walker.Failing() {
		k := stateKey(f.StreamARN, f.ShardID)
		failing[k] = f
		if f.Failures < stuckReaderFailures || now.Sub(f.Since) < c.cfg.StuckAfter {
			continue
		}
		stuck[f.Table]++
		counted[k] = true
		if now.Sub(fr.logged[k]) < c.cfg.StuckLogInterval {
			continue
		}
		fr.logged[k] = now
		fields := []zap.Field{zap.String("table", f.Table), zap.String("shard", f.ShardID),
			zap.String("position", f.Position), zap.Int("failures", f.Failures),
			zap.Duration("failing_for", now.Sub(f.Since)), zap.Bool("dead_letter", c.dlq != nil), zap.Error(f.Err)}
		if !f.Oldest.IsZero() {
			fields = append(fields, zap.Duration("oldest_unacked_age", now.Sub(f.Oldest)),
				zap.Duration("time_left_before_trim", c.cfg.StreamRetention-now.Sub(f.Oldest)))
		}
		c.log.Error("shard stuck: its reader keeps failing at the same position; the checkpoint waits", fields...)
	}
	for k := range fr.logged {
		if !counted[k] {
			delete(fr.logged, k)
		}
	}
	return failing, counted
}

// failedGauges sets the oldest-unacked age of failing shards that have no
// state now (between two of their readers), and removes the gauges it set
// for shards that no longer fail and have no state.
func (c *Consumer) failedGauges(failing map[string]shard.Failing, now time.Time) {
	fr := &c.failed
	for k, f := range failing {
		if f.Oldest.IsZero() {
			continue
		}
		fr.gauged[k] = f
		c.m.oldestUnacked.WithLabelValues(f.Table, f.ShardID).Set(max(now.Sub(f.Oldest), 0).Seconds())
	}
	for k, f := range fr.gauged {
		if _, ok := failing[k]; !ok {
			delete(fr.gauged, k)
			if c.lookup(f.StreamARN, f.ShardID) == nil {
				c.m.oldestUnacked.DeleteLabelValues(f.Table, f.ShardID)
			}
		}
	}
}
