package stream

import (
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"sort"
	"time"
)

// Persistence support. A Registry with a Journal reports every change to
// its durable state (streams, shards, records, trims) as an Event, under
// the lock of the stream it changes, so a journal sees each stream's
// events in the order they happened. Export describes a whole stream as
// events; Apply replays events, from a snapshot or a log, into a registry.
// Apply is idempotent against a snapshot taken while events kept coming:
// an event the snapshot already reflects changes nothing.

// EventKind says what an Event records.
type EventKind uint8

// Event kinds. The values are stored on disk: never renumber them.
const (
	EvStreamCreated EventKind = iota + 1 // Header (ord, ARN, label, table, view type, created, salt)
	EvKeySchema                          // Header.HashKey, Header.RangeKey
	EvShardOpened                        // Shard
	EvShardClosed                        // Shard.Ord, Shard.End, Shard.ClosedAt
	EvRecord                             // Shard.Ord, Record
	EvTrimmed                            // At: records created before it were trimmed
	EvShardsDropped                      // Dropped: shard ordinals that left the stream
	EvDisabled                           // the stream is DISABLED
	EvStreamDropped                      // the stream left the registry
	EvStreamState                        // snapshot: Header with status and counters
	EvShardState                         // snapshot: Shard with its counters (records follow as EvRecord)
)

// Event is one change to a stream, or a piece of a stream's snapshot.
// Stream is the stream's ordinal, unique in the registry.
type Event struct {
	Kind    EventKind
	Stream  uint32
	Header  Header
	Shard   ShardState
	Record  Record
	At      int64    // EvTrimmed: the cutoff, unix nanoseconds
	Dropped []uint32 // EvShardsDropped
}

// Header is a stream's identity and, in EvStreamState, its status and
// counters.
type Header struct {
	ARN, Label, Table, ViewType string
	Created                     int64 // unix nanoseconds
	Salt                        uint64
	HashKey, RangeKey           string
	Status                      string
	LastSeq                     uint64
	NextShardOrd                uint32
	// Known maps the IDs of shards that left the stream to their
	// ordinals (EvStreamState).
	Known map[string]uint32
}

// ShardState is a shard's identity and, in EvShardClosed and
// EvShardState, its end.
type ShardState struct {
	Ord      uint32
	ID       string
	Parent   string
	Lo, Hi   uint64
	Created  int64 // unix nanoseconds
	Start    uint64
	End      uint64 // 0 while open
	ClosedAt int64  // unix nanoseconds
	Count    int    // records ever appended (EvShardState)
	Trimmed  uint64 // highest trimmed sequence number (EvShardState)
}

// Record is one stream record as the journal sees it: its Keys JSON and
// its images' (empty when absent). None of them may be modified.
type Record struct {
	Seq      uint64
	At       int64 // creation time, unix nanoseconds
	Event    string
	Service  bool
	Size     uint32
	Keys     []byte
	New, Old []byte
}

// Journal receives a registry's events. Record is called under the
// stream's lock: it must be quick and must not call back into the
// registry; ev is only valid during the call.
type Journal interface {
	Record(ev *Event)
}

// SetJournal makes the registry report its events to j (nil: none). Set it
// before the registry is used, or while nothing else uses it.
func (r *Registry) SetJournal(j Journal) { r.journal = j }

// jot reports an event when the registry has a journal. s.mu is held.
func (s *Stream) jot(ev Event) {
	if j := s.reg.journal; j != nil {
		ev.Stream = s.ord
		j.Record(&ev)
	}
}

func (sh *shard) state() ShardState {
	return ShardState{Ord: sh.ord, ID: sh.id, Parent: sh.parent, Lo: sh.lo, Hi: sh.hi, Created: sh.created.UnixNano(),
		Start: sh.start, End: sh.end, ClosedAt: closedNanos(sh.closedAt), Count: sh.count, Trimmed: sh.trimmed}
}

func closedNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// journalRecord reports a record just added, whose Keys JSON is keys.
func (s *Stream) journalRecord(sh *shard, rec *record, event string, keys []byte) {
	if s.reg.journal == nil {
		return
	}
	s.jot(Event{Kind: EvRecord, Shard: ShardState{Ord: sh.ord}, Record: exportRecord(rec, event, keys)})
}

// exportRecord is rec as the journal sees it; keys is its Keys JSON
// (rec.appendKeys).
func exportRecord(rec *record, event string, keys []byte) Record {
	return Record{Seq: rec.seq, At: rec.at, Event: event, Service: rec.svc, Size: rec.size,
		Keys: keys, New: unfrozen(rec.newImg()), Old: unfrozen(rec.oldImg())}
}

func (s *Stream) header() Header {
	h := Header{ARN: s.arn, Label: s.label, Table: s.table, ViewType: s.viewType, Created: s.created.UnixNano(), Salt: s.salt}
	if len(s.keySchema) > 0 {
		h.HashKey = s.keySchema[0].AttributeName
	}
	if len(s.keySchema) > 1 {
		h.RangeKey = s.keySchema[1].AttributeName
	}
	return h
}

// Export calls fn with events that rebuild every stream of the registry
// as it is now: per stream an EvStreamState, then per live shard an
// EvShardState followed by its untrimmed records. Each stream is copied
// under its lock (record headers are copied, their JSON is shared) and
// described outside it, so appends go on meanwhile.
func (r *Registry) Export(fn func(*Event) error) error {
	r.mu.RLock()
	list := append([]*Stream(nil), r.list...)
	r.mu.RUnlock()
	for _, s := range list {
		s.mu.RLock()
		h := s.header()
		h.Status, h.LastSeq, h.NextShardOrd = s.status, s.lastSeq, s.nextShardOrd
		h.Known = map[string]uint32{}
		for id, ord := range s.ordByID {
			if s.byOrd[ord] == nil {
				h.Known[id] = ord
			}
		}
		shards := make([]ShardState, len(s.shards))
		recs := make([][]record, len(s.shards))
		for i, sh := range s.shards {
			shards[i] = sh.state()
			recs[i] = sh.recs.slice(0, sh.recs.Len())
		}
		events := append([]string(nil), s.events...)
		s.mu.RUnlock()
		if err := fn(&Event{Kind: EvStreamState, Stream: s.ord, Header: h}); err != nil {
			return err
		}
		for i := range shards {
			if err := fn(&Event{Kind: EvShardState, Stream: s.ord, Shard: shards[i]}); err != nil {
				return err
			}
			ev := Event{Kind: EvRecord, Stream: s.ord, Shard: ShardState{Ord: shards[i].Ord}}
			for j := range recs[i] {
				rec := &recs[i][j]
				ev.Record = exportRecord(rec, unquote(events[rec.ev]), rec.appendKeys(nil))
				if err := fn(&ev); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// unquote undoes jsonString for the event names the registry interns.
func unquote(q string) string {
	var s string
	if err := json.Unmarshal([]byte(q), &s); err != nil {
		return q
	}
	return s
}

// Apply replays one event into the registry, which must have no journal
// meanwhile (Apply reports nothing). Events the registry already reflects
// (a snapshot taken while they were logged) change nothing. An event for
// an unknown stream or shard is an error, as is one out of order.
func (r *Registry) Apply(ev *Event) error {
	switch ev.Kind {
	case EvStreamCreated, EvStreamState:
		r.applyStream(ev)
		return nil
	case EvStreamDropped:
		r.mu.Lock()
		defer r.mu.Unlock()
		if s := r.byOrd[ev.Stream]; s != nil {
			r.dropLocked(s)
		}
		return nil
	}
	r.mu.RLock()
	s := r.byOrd[ev.Stream]
	r.mu.RUnlock()
	if s == nil {
		if ev.Kind == EvShardsDropped || ev.Kind == EvTrimmed || ev.Kind == EvDisabled {
			return nil // the stream was dropped after this event
		}
		return fmt.Errorf("stream event %d for unknown stream #%d", ev.Kind, ev.Stream)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.applyLocked(ev)
}

// applyStream creates the stream an EvStreamCreated or EvStreamState
// describes, or for EvStreamState over an existing stream refreshes its
// status and counters.
func (r *Registry) applyStream(ev *Event) {
	h := &ev.Header
	r.mu.Lock()
	s := r.byOrd[ev.Stream]
	if s == nil {
		created := time.Unix(0, h.Created).UTC()
		region := ARNRegion(h.ARN)
		if region == "" {
			region = r.opts.Region
		}
		s = &Stream{
			reg: r, ord: ev.Stream, arn: h.ARN, region: region, label: h.Label, table: h.Table, viewType: h.ViewType,
			created: created, salt: h.Salt, rnd: mrand.New(mrand.NewPCG(r.rnd.Uint64(), r.rnd.Uint64())),
			status: StatusEnabled, byOrd: map[uint32]*shard{}, ordByID: map[string]uint32{},
			events:       []string{`"INSERT"`, `"MODIFY"`, `"REMOVE"`},
			prefix:       recordPrefix(region),
			viewJSON:     jsonString(h.ViewType),
			lastMaintain: created,
		}
		r.byARN[s.arn] = s
		r.byOrd[s.ord] = s
		r.everOrd[s.arn] = s.ord
		r.salts[s.salt] = true
		r.nextOrd = max(r.nextOrd, s.ord)
		if lt, err := time.Parse("2006-01-02T15:04:05.000", h.Label); err == nil && lt.After(r.lastLabel[region+"/"+h.Table]) {
			r.lastLabel[region+"/"+h.Table] = lt
		}
		i := sort.Search(len(r.list), func(i int) bool { return r.list[i].ord > s.ord })
		r.list = append(r.list, nil)
		copy(r.list[i+1:], r.list[i:])
		r.list[i] = s
	}
	r.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if h.HashKey != "" {
		s.setKeySchemaLocked(h.HashKey, h.RangeKey)
	}
	if ev.Kind == EvStreamState && h.LastSeq >= s.lastSeq {
		s.status, s.lastSeq = h.Status, h.LastSeq
		s.nextShardOrd = max(s.nextShardOrd, h.NextShardOrd)
		for id, ord := range h.Known {
			s.ordByID[id] = ord
		}
	}
}

// applyLocked replays a shard or record event into s. s.mu is held.
func (s *Stream) applyLocked(ev *Event) error {
	switch ev.Kind {
	case EvKeySchema:
		s.setKeySchemaLocked(ev.Header.HashKey, ev.Header.RangeKey)
	case EvShardOpened, EvShardState:
		s.applyShard(ev)
	case EvShardClosed:
		sh := s.byOrd[ev.Shard.Ord]
		if sh == nil || sh.closed() || ev.Shard.End <= s.lastSeq {
			return nil // a snapshot already has it closed (or gone)
		}
		s.lastSeq = ev.Shard.End
		sh.end, sh.closedAt = ev.Shard.End, time.Unix(0, ev.Shard.ClosedAt)
		s.removeOpenLocked(sh)
	case EvRecord:
		sh := s.byOrd[ev.Shard.Ord]
		if sh == nil {
			if s.everShard(ev.Shard.Ord) {
				return nil // the shard left the stream later
			}
			return fmt.Errorf("stream %s: record %d for unknown shard #%d", s.arn, ev.Record.Seq, ev.Shard.Ord)
		}
		rec := ev.Record
		if last := sh.recs.last(); last != nil && last.seq >= rec.Seq || rec.Seq <= sh.trimmed {
			return nil // already there (or trimmed since)
		}
		r := record{seq: rec.Seq, at: rec.At, size: rec.Size, svc: rec.Service, ev: s.eventIndexLocked(rec.Event)}
		r.setCopies(rec.Keys, rec.New, rec.Old)
		sh.recs.push(r)
		if rec.Seq > s.lastSeq {
			s.lastSeq = rec.Seq
			sh.count++
		}
	case EvTrimmed:
		s.trimLocked(ev.At)
	case EvShardsDropped:
		s.dropShardsLocked(ev.Dropped)
	case EvDisabled:
		s.status = StatusDisabled
		s.open = nil
	default:
		return fmt.Errorf("stream %s: unknown event kind %d", s.arn, ev.Kind)
	}
	return nil
}

// applyShard adds the shard of an EvShardOpened or EvShardState, or
// refreshes its counters (EvShardState over a shard already there).
func (s *Stream) applyShard(ev *Event) {
	st := &ev.Shard
	sh := s.byOrd[st.Ord]
	if sh == nil {
		if _, gone := s.ordByID[st.ID]; gone {
			return // opened, then dropped, before the snapshot
		}
		sh = &shard{ord: st.Ord, id: st.ID, parent: st.Parent, lo: st.Lo, hi: st.Hi, created: time.Unix(0, st.Created), start: st.Start}
		s.shards = append(s.shards, sh)
		sort.Slice(s.shards, func(i, j int) bool { return s.shards[i].ord < s.shards[j].ord })
		s.byOrd[sh.ord] = sh
		s.ordByID[sh.id] = sh.ord
		s.nextShardOrd = max(s.nextShardOrd, sh.ord)
		s.lastSeq = max(s.lastSeq, sh.start-1)
		if st.End == 0 {
			i := sort.Search(len(s.open), func(i int) bool { return s.open[i].lo > sh.lo })
			s.open = append(s.open, nil)
			copy(s.open[i+1:], s.open[i:])
			s.open[i] = sh
		}
	}
	if ev.Kind == EvShardState {
		if st.End != 0 && !sh.closed() {
			sh.end, sh.closedAt = st.End, time.Unix(0, st.ClosedAt)
			s.removeOpenLocked(sh)
		}
		sh.count = max(sh.count, st.Count)
		sh.trimmed = max(sh.trimmed, st.Trimmed)
	}
}

// everShard reports whether a shard ordinal was ever used in s.
func (s *Stream) everShard(ord uint32) bool {
	for _, o := range s.ordByID {
		if o == ord {
			return true
		}
	}
	return false
}

// dropLocked removes a stream from the registry. r.mu is held.
func (r *Registry) dropLocked(s *Stream) {
	delete(r.byARN, s.arn)
	delete(r.byOrd, s.ord)
	for i, o := range r.list {
		if o == s {
			r.list = append(r.list[:i:i], r.list[i+1:]...)
			break
		}
	}
}

func (s *Stream) removeOpenLocked(sh *shard) {
	for i, o := range s.open {
		if o == sh {
			s.open = append(s.open[:i], s.open[i+1:]...)
			return
		}
	}
}

// dropShardsLocked removes the listed shards from the stream (their IDs
// stay known).
func (s *Stream) dropShardsLocked(ords []uint32) {
	drop := map[uint32]bool{}
	for _, o := range ords {
		drop[o] = true
	}
	kept := s.shards[:0]
	for _, sh := range s.shards {
		if drop[sh.ord] {
			delete(s.byOrd, sh.ord)
			continue
		}
		kept = append(kept, sh)
	}
	for i := len(kept); i < len(s.shards); i++ {
		s.shards[i] = nil
	}
	s.shards = kept
}

// IteratorKey returns a copy of the key that authenticates the registry's
// shard iterators.
func (r *Registry) IteratorKey() []byte { return append([]byte(nil), r.key...) }

// SetIteratorKey replaces the key that authenticates shard iterators, so
// that iterators an earlier run of a persisted registry issued stay valid
// (they name streams and shards by ordinals, which Apply keeps). Call it
// before the registry hands out iterators.
func (r *Registry) SetIteratorKey(k []byte) { r.key = append([]byte(nil), k...) }
