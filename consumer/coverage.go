package consumer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/manifest"
	"github.com/ttl-archiver/archiver/shard"
	"github.com/ttl-archiver/archiver/sinks"
)

// Recorder is a sink that records, in its own archive, the ranges of each
// shard the consumer read (package manifest).
type Recorder interface {
	// Record makes a manifest of r durable in the sink's archive, listing
	// the sink's objects that hold r's events, and returns once it is
	// durable (or failed: the checkpoint then waits and Record is called
	// again, with the same From).
	Record(ctx context.Context, r manifest.Range) error
	// RecordDue reports whether the sink wants the shard's range recorded
	// now (its object count or time since its last manifest of the shard
	// reached its cadence). Cheap, non-blocking.
	RecordDue(streamARN, shardID string) bool
}

// recorder is one recording sink among the consumer's sinks (a sink on
// several routes, the dead-letter route included, is one recorder).
type recorder struct {
	r    Recorder
	sink sinks.Sink
	name string
	// takes counts, by kind (kindOrder), the sink's routes that take
	// events of that kind: a range's events the sink was given are its
	// events of each kind times this.
	takes [4]int64
	// owns marks the sink's lanes (index-aligned with a shard's lanes).
	owns []bool
	// dead: the sink is the dead-letter sink: it was also given what the
	// other lanes dead-lettered.
	dead bool
}

// newRecorders finds the recording sinks among the routes and the
// dead-letter route (nil: none).
func newRecorders(routes []*route, dlq *route) []*recorder {
	all := routes
	if dlq != nil {
		all = append(all[:len(all):len(all)], dlq)
	}
	var out []*recorder
	for j, r := range all {
		rec, ok := r.sink.(Recorder)
		if !ok {
			continue
		}
		var rc *recorder
		for _, o := range out {
			if sameSink(o.sink, r.sink) {
				rc = o
			}
		}
		if rc == nil {
			rc = &recorder{r: rec, sink: r.sink, name: r.name, owns: make([]bool, len(all))}
			out = append(out, rc)
		}
		rc.owns[j] = true
		if r == dlq {
			rc.dead = true
			continue
		}
		for k, kind := range kindOrder {
			if r.kinds[kind] {
				rc.takes[k]++
			}
		}
	}
	return out
}

// sameSink reports whether a and b are one sink.
func sameSink(a, b sinks.Sink) bool {
	ta := reflect.TypeOf(a)
	return ta.Comparable() && ta == reflect.TypeOf(b) && a == b
}

// reasonOrder lists the dead-letter reasons by reasonIndex.
var reasonOrder = [3]string{event.ReasonPermanent, event.ReasonRetryFor, event.ReasonUndecodable}

func reasonIndex(reason string) int {
	switch reason {
	case event.ReasonPermanent:
		return 0
	case event.ReasonRetryFor:
		return 1
	}
	return 2
}

// tally sums the acknowledged entries of a stretch of a shard, in stream
// order: what the range up to them records, and what the lag gauges count
// until a checkpoint covers them. Adding an entry is O(1): the per-record
// work was done once, in process.
type tally struct {
	records     int64
	first, last time.Time // creation times of the first and last record
	kinds       [4]int64  // events by kind (kindOrder), before routing
	dead        [3]int64  // events dead-lettered, by reason (reasonOrder)
	// moved counts, by lane, the events of the lane's sink that went to
	// the dead-letter sink, by kind (nil: none did).
	moved [][4]int64
	// skip, when set, says that records before the stretch's first were
	// not read (shard.Skip); skipFirst and skipAt are the first record
	// read after them ("": none yet).
	skip      shard.Skip
	skipFirst string
	skipAt    time.Time
}

// add sums e, the stretch's next entry, into t.
func (t *tally) add(e *entry) {
	t.records += int64(e.records)
	if t.first.IsZero() {
		t.first = e.first
	}
	if !e.lastAt.IsZero() {
		t.last = e.lastAt
	}
	for k, n := range e.kinds {
		t.kinds[k] += int64(n)
	}
	for i, n := range e.dead {
		t.dead[i] += int64(n)
	}
	if e.moved != nil {
		if t.moved == nil {
			t.moved = make([][4]int64, len(e.moved))
		}
		for j, mv := range e.moved {
			for k, n := range mv {
				t.moved[j][k] += int64(n)
			}
		}
	}
	if t.skip != 0 && t.skipFirst == "" && e.firstSeq != "" {
		t.skipFirst, t.skipAt = e.firstSeq, e.first
	}
}

// merge sums u, the stretch right after t's, into t.
func (t *tally) merge(u *tally) {
	t.records += u.records
	if t.first.IsZero() {
		t.first = u.first
	}
	if !u.last.IsZero() {
		t.last = u.last
	}
	for k := range t.kinds {
		t.kinds[k] += u.kinds[k]
	}
	for i := range t.dead {
		t.dead[i] += u.dead[i]
	}
	if u.moved != nil {
		if t.moved == nil {
			t.moved = make([][4]int64, len(u.moved))
		}
		for j := range u.moved {
			for k := range u.moved[j] {
				t.moved[j][k] += u.moved[j][k]
			}
		}
	}
	if t.skip == 0 {
		t.skip, t.skipFirst, t.skipAt = u.skip, u.skipFirst, u.skipAt
	}
}

// events is what the recorder's sink was given of t's events, by kind:
// those of its routes' kinds, less those its lanes dead-lettered, plus,
// for the dead-letter sink, every event dead-lettered (undecodable records
// are no kind: they count in DeadLettered only).
func (rc *recorder) events(t *tally) map[event.Kind]int64 {
	var n [4]int64
	for k := range n {
		n[k] = t.kinds[k] * rc.takes[k]
	}
	for j, mv := range t.moved {
		for k := range n {
			if rc.owns[j] {
				n[k] -= mv[k]
			}
			if rc.dead {
				n[k] += mv[k]
			}
		}
	}
	out := make(map[event.Kind]int64, 4)
	for k, v := range n {
		if v != 0 {
			out[kindOrder[k]] = v
		}
	}
	return out
}

// rangeOf is the range (from, to] that t sums, as rc records it.
func (s *shardDelivery) rangeOf(rc *recorder, t *tally, from, to string, ended bool) manifest.Range {
	r := manifest.Range{StreamARN: s.arn, Region: event.RegionOf(s.arn), Table: s.table, ShardID: s.id,
		ParentShardID: s.parent, From: from, To: to, Records: t.records, Events: rc.events(t), Ended: ended}
	if t.records > 0 {
		r.FirstTime, r.LastTime = t.first, t.last
	}
	for i, n := range t.dead {
		if n > 0 {
			if r.DeadLettered == nil {
				r.DeadLettered = map[string]int64{}
			}
			r.DeadLettered[reasonOrder[i]] = n
		}
	}
	if t.skip != 0 {
		r.Trimmed = &manifest.Trimmed{First: t.skipFirst, Time: t.skipAt, Skipped: t.skip == shard.SkipLatest}
		if r.Trimmed.First == "" { // nothing read after them: the shard ended
			r.Trimmed.First = to
		}
	}
	return r
}

// recordRange has every recording sink record the range from the last
// saved position up to seq, t's entries (ended: the shard's last), and
// returns once all of them made it durable, or with their errors. Called
// with saveMu held, never s.mu: Record waits.
func (s *shardDelivery) recordRange(ctx context.Context, t *tally, seq string, ended bool) error {
	from := s.saved
	to := s.rangeEnd(t, from, seq)
	if to == "" {
		s.c.log.Warn("shard's range not recorded: no sequence number to end it at",
			zap.String("stream", s.arn), zap.String("shard", s.id))
		return nil
	}
	recs := s.c.recorders
	errs := make([]error, len(recs))
	var wg sync.WaitGroup
	for i, rc := range recs {
		rg := s.rangeOf(rc, t, from, to, ended)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = rc.r.Record(ctx, rg)
		}()
	}
	wg.Wait()
	for i, rc := range recs {
		if errs[i] != nil {
			s.c.m.rangeRecordFailures.WithLabelValues(s.table, rc.name).Inc()
			errs[i] = fmt.Errorf("consumer: shard %s: record the range (%s, %s] in %s: %w", s.id, from, to, rc.name, errs[i])
			if sinks.IsPermanent(errs[i]) {
				s.unrecordable(rc, from, to, errs[i])
				errs[i] = nil
			}
		} else {
			s.c.m.rangesRecorded.WithLabelValues(s.table, rc.name).Inc()
		}
	}
	return errors.Join(errs...)
}

// unrecordable says, at ERROR, that a sink cannot record a range and will
// never be able to (its bucket is gone, access is denied): the checkpoint
// goes on without that sink's manifest, as delivery goes on when its
// writes fail for good and their events are dead-lettered. Nothing is
// hidden: that sink's archive shows a gap over the range, which verify
// reports, and the events are wherever the sink's failed writes put them
// (the dead-letter sink). Waiting instead would hold every shard's
// checkpoint, and so the dead-letter sink's, for as long as the fault
// lasts.
func (s *shardDelivery) unrecordable(rc *recorder, from, to string, err error) {
	s.c.log.Error("coverage manifest cannot be recorded: the checkpoint goes on, and this sink's archive shows a gap over the range (archiver verify reports it)",
		zap.String("stream", s.arn), zap.String("shard", s.id), zap.String("sink", rc.name),
		zap.String("from", from), zap.String("to", to), zap.Error(err))
}

// rangeEnd is where the range of t from from ends: seq, where the
// checkpoint goes. A shard that ended with no record read that has a
// sequence number ends at its own end (its EndingSequenceNumber, or its
// StartingSequenceNumber when it was open when its reader started). So
// does a shard whose last records were trimmed unread (nothing read after
// them): its range says so up to its end. When that end is unknown, it
// cannot, and the range (From == To) says nothing of them: the walker's
// gap count and WARN do. Called with saveMu held.
func (s *shardDelivery) rangeEnd(t *tally, from, seq string) string {
	to := seq
	if to == "" {
		to = cmp.Or(s.endSeq, s.startSeq)
	}
	if t.skip != 0 && t.skipFirst == "" && from != "" && to == from {
		if s.endSeq != "" && event.CompareSequence(s.endSeq, from) > 0 {
			return s.endSeq
		}
		s.c.log.Warn("the shard's last records were trimmed before they were read, and its end is unknown: its last range cannot say so",
			zap.String("stream", s.arn), zap.String("shard", s.id), zap.String("after", from))
		t.skip = 0
	}
	return to
}

// recordDue reports whether the shard's checkpoint may be saved now: with
// no recording sink always; with some, when one of them wants the shard's
// range recorded.
func (s *shardDelivery) recordDue() bool {
	if len(s.c.recorders) == 0 {
		return true
	}
	for _, rc := range s.c.recorders {
		if rc.r.RecordDue(s.arn, s.id) {
			return true
		}
	}
	return false
}

// unsaved reports whether records were acknowledged that no save has
// taken yet.
func (s *shardDelivery) unsaved() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tally.records > 0
}

// shardStarted learns, for the ranges it records, the shard's parent and
// sequence number range (only with a recording sink: see recording).
func (c *Consumer) shardStarted(table, arn string, sh shard.Shard) {
	if len(c.recorders) == 0 {
		return
	}
	s := c.state(table, arn, sh.ID)
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	if len(sh.Parents) > 0 {
		s.parent = sh.Parents[0]
	}
	s.startSeq, s.endSeq = sh.StartingSequence, sh.EndingSequence
}

// skipped notes, for the range it records, that records of the shard were
// not read (only with a recording sink). Records trimmed after some that
// were read end the range first: the consumer waits for every batch so
// far to be acknowledged, records their range and saves it, so that no
// range says it read what it did not.
func (c *Consumer) skipped(ctx context.Context, arn, id string, why shard.Skip) error {
	if len(c.recorders) == 0 {
		return nil
	}
	s := c.state("", arn, id)
	if why == shard.SkipTrimmed && s.readSinceSave() {
		if err := s.drain(ctx); err != nil {
			return fmt.Errorf("consumer: shard %s: records trimmed before they were read: %w", id, err)
		}
		if err := s.save(ctx, false); err != nil {
			return fmt.Errorf("consumer: shard %s: records trimmed before they were read: %w", id, err)
		}
	}
	s.mu.Lock()
	if s.tally.skip == 0 {
		s.tally.skip = why
	}
	s.mu.Unlock()
	s.needFirst = true
	c.log.Debug("records of the shard were not read; its range says so",
		zap.String("stream", arn), zap.String("shard", id), zap.Stringer("why", why))
	return nil
}

// readSinceSave reports whether records were handed to the shard since
// its last save.
func (s *shardDelivery) readSinceSave() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entries) > 0 || s.tally.records > 0 || s.saving.records > 0
}

// movedToDead books, in e, n of its events that the sink of lane idx
// failed for reason and the dead-letter sink took, kinds of them by kind.
func (s *shardDelivery) movedToDead(e *entry, idx int, reason string, n int, kinds [4]int32) {
	if len(s.c.recorders) == 0 || e == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e.dead[reasonIndex(reason)] += int32(n)
	if e.moved == nil {
		e.moved = make([][4]int32, len(s.lanes))
	}
	for k, c := range kinds {
		e.moved[idx][k] += c
	}
}

// lastCreation is the creation time of the last record in recs that has
// one (zero when none has).
func lastCreation(recs []types.Record) time.Time {
	for i := len(recs) - 1; i >= 0; i-- {
		if d := recs[i].Dynamodb; d != nil && d.ApproximateCreationDateTime != nil {
			return *d.ApproximateCreationDateTime
		}
	}
	return time.Time{}
}
