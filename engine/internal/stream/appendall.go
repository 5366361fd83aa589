package stream

import (
	"sort"
	"time"
)

// Pending is one change of an AppendAll: the stream that takes its record
// and the change (its Commit is ignored: AppendAll's commit stands for
// it).
type Pending struct {
	Stream *Stream
	Change EncodedChange
}

// AppendAll appends the records of several changes, to one stream or
// several, as one unit: a transaction's. It locks every stream involved
// (in ordinal order), gives each change its sequence number, and calls
// commit once with evs[i] the record event of changes[i] (nil when its
// stream takes no record: disabled, or no open shard for the key), before
// anyone can see any of them; commit makes them durable together with
// whatever the caller must make durable with them (the item changes).
// Only then are the records added. When commit fails, nothing is added,
// every sequence number is given back and AppendAll returns the error.
// commit is called even when no change makes a record; with a nil commit
// the records go to the registry's Journal one by one. Keys, and every
// image a stream keeps, must be JSON objects (see AppendEncoded):
// otherwise nothing is appended, commit is not called and the error says
// which.
//
// Rollover by age is applied before any number is taken, rollover by
// record count once every record is added, so that no shard closes
// between a transaction's records.
func AppendAll(changes []Pending, commit func(evs []*Event) error) error {
	recs := make([]record, len(changes))
	for i, p := range changes {
		var err error
		if recs[i], err = p.Stream.encodedRecord(p.Change); err != nil {
			return err
		}
	}
	if len(changes) == 0 {
		if commit == nil {
			return nil
		}
		return commit(nil)
	}
	streams := lockAll(changes)
	defer func() {
		for _, s := range streams {
			s.mu.Unlock()
		}
	}()
	now := streams[0].reg.opts.Now()
	lastSeq := make([]uint64, len(streams))
	for i, s := range streams {
		lastSeq[i] = s.lastSeq
	}
	shards, evs := number(changes, recs, streams, now)
	if commit != nil {
		if err := commit(evs); err != nil {
			for i, s := range streams {
				s.lastSeq = lastSeq[i] // nobody saw them: every lock is held
			}
			return err
		}
	}
	for i, sh := range shards {
		if sh == nil {
			continue
		}
		s := changes[i].Stream
		added := sh.recs.push(recs[i])
		sh.count++
		if commit == nil {
			s.journalRecord(sh, added, changes[i].Change.EventName, changes[i].Change.Keys)
		}
	}
	for i, sh := range shards {
		s := changes[i].Stream
		if rr := s.reg.opts.RolloverRecords; sh != nil && rr > 0 && sh.count >= rr && !sh.closed() {
			s.rolloverLocked(sh, now)
		}
	}
	return nil
}

// number applies maintenance and rollover by age to the locked streams,
// then gives each record its shard (nil: its stream takes none), sequence
// number, event and creation time, and returns the shards and the
// records' events.
func number(changes []Pending, recs []record, streams []*Stream, now time.Time) ([]*shard, []*Event) {
	for _, s := range streams {
		if s.status == StatusEnabled && now.Sub(s.lastMaintain) >= time.Second {
			s.maintainLocked(now)
		}
	}
	hashes := make([]uint64, len(changes))
	for i, p := range changes {
		s := p.Stream
		hashes[i] = keyHash(p.Change.Keys)
		if sh := s.shardForLocked(hashes[i]); sh != nil && s.status == StatusEnabled {
			if ro := s.reg.opts.Rollover; ro > 0 && now.Sub(sh.created) >= ro {
				s.rolloverLocked(sh, now)
			}
		}
	}
	shards := make([]*shard, len(changes))
	evs := make([]*Event, len(changes))
	for i, p := range changes {
		s := p.Stream
		sh := s.shardForLocked(hashes[i])
		if sh == nil || s.status != StatusEnabled {
			continue
		}
		s.lastSeq++
		rec := &recs[i]
		rec.seq = s.lastSeq
		rec.ev = s.eventIndexLocked(p.Change.EventName)
		rec.at = now.UnixNano()
		if last := sh.recs.last(); last != nil && last.at > rec.at {
			rec.at = last.at // keep creation times ordered within the shard
		}
		shards[i] = sh
		evs[i] = &Event{Kind: EvRecord, Stream: s.ord, Shard: ShardState{Ord: sh.ord}, Record: exportRecord(rec, p.Change.EventName, p.Change.Keys)}
	}
	return shards, evs
}

// lockAll locks the distinct streams of changes in ordinal order (the
// order of every caller that holds several) and returns them.
func lockAll(changes []Pending) []*Stream {
	var streams []*Stream
	seen := map[*Stream]bool{}
	for _, p := range changes {
		if !seen[p.Stream] {
			seen[p.Stream] = true
			streams = append(streams, p.Stream)
		}
	}
	sort.Slice(streams, func(i, j int) bool { return streams[i].ord < streams[j].ord })
	for _, s := range streams {
		s.mu.Lock()
	}
	return streams
}
