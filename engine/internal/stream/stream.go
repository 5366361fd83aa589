// Package stream is the engine's DynamoDB Streams implementation: a
// registry of every stream of an engine, the shards of each stream with
// their lineage (rollover and split), the records in AWS's wire shape,
// shard iterators, retention trimming, the four Streams API operations
// (ListStreams, DescribeStream, GetShardIterator, GetRecords) and the
// fault injection tests use (throttling, forced rollover and split,
// trimming, iterator expiry).
//
// Time comes only from Options.Now. Age-based rollover and retention are
// applied lazily (on Append and on every read of a stream) and by Tick,
// which the engine calls from its background loop.
package stream

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ttl-archiver/archiver/engine/internal/attr"
	"github.com/ttl-archiver/archiver/engine/internal/blob"
)

// Stream view types, as DynamoDB names them.
const (
	KeysOnly        = "KEYS_ONLY"
	NewImage        = "NEW_IMAGE"
	OldImage        = "OLD_IMAGE"
	NewAndOldImages = "NEW_AND_OLD_IMAGES"
)

// Stream statuses.
const (
	StatusEnabled  = "ENABLED"
	StatusDisabled = "DISABLED"
)

// IteratorLifetime is how long a shard iterator stays valid after it was
// handed out, by the engine clock.
const IteratorLifetime = 15 * time.Minute

// DefaultRetention is the retention used when Options.Retention is zero.
const DefaultRetention = 24 * time.Hour

// Options configures a Registry.
type Options struct {
	Region, AccountID string           // used in ARNs and records; default us-east-1 / 000000000000
	Shards            int              // open shards per stream (values below 1 mean 1)
	Rollover          time.Duration    // close each open shard and open a child after this age (0 = never)
	RolloverRecords   int              // ...or after this many records in the shard (0 = never)
	Retention         time.Duration    // records older than this are trimmed (0 = DefaultRetention)
	Now               func() time.Time // the engine's clock (nil = time.Now)
}

// Change is one committed write to an item, as Append records it.
type Change struct {
	EventName string    // "INSERT", "MODIFY", "REMOVE"
	Keys      attr.Item // the item's primary key attributes
	Old, New  attr.Item // full images (nil when absent); the stream keeps what its view type asks for
	Service   bool      // a TTL delete: the record carries userIdentity {dynamodb.amazonaws.com, Service}
}

// Registry holds every stream of one engine, by ARN. All methods are safe
// for concurrent use.
type Registry struct {
	opts Options
	key  []byte // MAC key of shard iterators

	mu        sync.RWMutex
	byARN     map[string]*Stream
	byOrd     map[uint32]*Stream
	list      []*Stream            // live streams in creation order
	everOrd   map[string]uint32    // every ARN ever created -> ordinal (for paging)
	lastLabel map[string]time.Time // table -> time of its latest stream label
	nextOrd   uint32
	rnd       *mrand.Rand
	salts     map[uint64]bool

	throttle atomic.Int64  // GetRecords calls still to fail
	epoch    atomic.Uint32 // iterators issued in an older epoch are expired

	journal Journal // nil: no persistence (see SetJournal)
}

// NewRegistry returns an empty registry.
func NewRegistry(o Options) *Registry {
	if o.Shards < 1 {
		o.Shards = 1
	}
	if o.Retention <= 0 {
		o.Retention = DefaultRetention
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Region == "" {
		o.Region = "us-east-1"
	}
	if o.AccountID == "" {
		o.AccountID = "000000000000"
	}
	var seed [32]byte
	_, _ = rand.Read(seed[:]) // never fails on supported platforms
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return &Registry{
		opts:      o,
		key:       key,
		byARN:     map[string]*Stream{},
		byOrd:     map[uint32]*Stream{},
		everOrd:   map[string]uint32{},
		lastLabel: map[string]time.Time{},
		rnd:       mrand.New(mrand.NewChaCha8(seed)),
		salts:     map[uint64]bool{},
	}
}

// Stream is one stream of a table. Its shards are created and closed by
// the registry; records enter through Append.
type Stream struct {
	reg      *Registry
	ord      uint32
	arn      string
	region   string // the Region in the ARN and in every record's awsRegion
	label    string
	table    string
	viewType string
	created  time.Time
	salt     uint64 // first half of every eventID of this stream
	rnd      *mrand.Rand
	prefix   string // start of every record's JSON, up to ApproximateCreationDateTime's value
	viewJSON string // viewType as a JSON string

	mu           sync.RWMutex
	status       string
	keySchema    []keyElem
	lastSeq      uint64            // last sequence number handed out (records, shard ends)
	shards       []*shard          // live shards in creation order
	byOrd        map[uint32]*shard // live shards by ordinal
	ordByID      map[string]uint32 // every shard ID ever created -> ordinal
	open         []*shard          // open shards sorted by hash range
	nextShardOrd uint32
	lastMaintain time.Time
	events       []string // event names as JSON strings by record.ev: INSERT, MODIFY, REMOVE, then any other seen
	// omit counts, per shard ID, the DescribeStream responses that would
	// list the shard and must still leave it out (OmitFromDescribe).
	omit map[string]int
}

type keyElem struct {
	AttributeName string
	KeyType       string
}

// shard is one shard. Records are ordered by sequence number, which is
// also their append order.
type shard struct {
	ord      uint32
	id       string
	parent   string
	lo, hi   uint64 // inclusive range of key hashes this shard (and its children) own
	created  time.Time
	start    uint64 // StartingSequenceNumber
	end      uint64 // EndingSequenceNumber; 0 while open
	closedAt time.Time
	count    int     // records ever appended
	recs     recList // untrimmed records
	trimmed  uint64  // highest sequence number trimmed away (0: none)
}

func (sh *shard) closed() bool { return sh.end != 0 }

// afterLast is the position just past the shard's last record: past its end
// when closed, else past the stream's last sequence number.
func (sh *shard) afterLast(lastSeq uint64) uint64 {
	if sh.closed() {
		return sh.end + 1
	}
	return lastSeq + 1
}

// Create makes a new ENABLED stream for a table of region ("": the
// registry's Options.Region) with the registry's number of open shards.
// Its label is the creation time in ISO 8601 with milliseconds, unique per
// table and region even within one millisecond.
func (r *Registry) Create(region, table string, viewType string) *Stream {
	if region == "" {
		region = r.opts.Region
	}
	now := r.opts.Now().UTC()
	r.mu.Lock()
	lt := now.Truncate(time.Millisecond)
	if last, ok := r.lastLabel[region+"/"+table]; ok && !lt.After(last) {
		lt = last.Add(time.Millisecond)
	}
	r.lastLabel[region+"/"+table] = lt
	label := lt.Format("2006-01-02T15:04:05.000")
	r.nextOrd++
	var salt uint64
	for salt == 0 || r.salts[salt] {
		salt = r.rnd.Uint64()
	}
	r.salts[salt] = true
	s := &Stream{
		reg:      r,
		ord:      r.nextOrd,
		arn:      fmt.Sprintf("arn:aws:dynamodb:%s:%s:table/%s/stream/%s", region, r.opts.AccountID, table, label),
		region:   region,
		label:    label,
		table:    table,
		viewType: viewType,
		created:  now,
		salt:     salt,
		rnd:      mrand.New(mrand.NewPCG(r.rnd.Uint64(), r.rnd.Uint64())),
		status:   StatusEnabled,
		byOrd:    map[uint32]*shard{},
		ordByID:  map[string]uint32{},
		events:   []string{`"INSERT"`, `"MODIFY"`, `"REMOVE"`},
		prefix:   recordPrefix(region),
		viewJSON: jsonString(viewType),
	}
	r.byARN[s.arn] = s
	r.byOrd[s.ord] = s
	r.everOrd[s.arn] = s.ord
	r.list = append(r.list, s)
	r.mu.Unlock()

	s.mu.Lock()
	s.jot(Event{Kind: EvStreamCreated, Header: s.header()})
	n := uint64(r.opts.Shards)
	step := ^uint64(0) / n
	for i := uint64(0); i < n; i++ {
		lo := i * step
		hi := lo + step - 1
		if i == n-1 {
			hi = ^uint64(0)
		}
		s.openShardLocked("", lo, hi, now)
	}
	s.lastMaintain = now
	s.mu.Unlock()
	return s
}

// ARN is the stream's ARN.
func (s *Stream) ARN() string { return s.arn }

// Region is the Region of the stream's table.
func (s *Stream) Region() string { return s.region }

// recordPrefix is the start of every record's JSON in region, up to
// ApproximateCreationDateTime's value.
func recordPrefix(region string) string {
	return `{"awsRegion":` + jsonString(region) + `,"dynamodb":{"ApproximateCreationDateTime":`
}

// ARNRegion returns the Region field of an ARN ("arn:aws:dynamodb:REGION:..."),
// or "" when arn has no such field.
func ARNRegion(arn string) string {
	parts := strings.SplitN(arn, ":", 5)
	if len(parts) < 5 || parts[0] != "arn" {
		return ""
	}
	return parts[3]
}

// Label is the stream's label (the last part of the ARN).
func (s *Stream) Label() string { return s.label }

// ViewType is the stream's StreamViewType.
func (s *Stream) ViewType() string { return s.viewType }

// TableName is the table the stream belongs to.
func (s *Stream) TableName() string { return s.table }

// Status is the stream's StreamStatus: ENABLED or DISABLED.
func (s *Stream) Status() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.status
}

// SetKeySchema records the table's key attribute names, which
// DescribeStream returns as KeySchema. rangeKey is "" for a table without a
// sort key. (An addition to the contract: Create does not know the keys.)
func (s *Stream) SetKeySchema(hashKey, rangeKey string) {
	s.mu.Lock()
	s.setKeySchemaLocked(hashKey, rangeKey)
	s.jot(Event{Kind: EvKeySchema, Header: Header{HashKey: hashKey, RangeKey: rangeKey}})
	s.mu.Unlock()
}

func (s *Stream) setKeySchemaLocked(hashKey, rangeKey string) {
	ks := []keyElem{{hashKey, "HASH"}}
	if rangeKey != "" {
		ks = append(ks, keyElem{rangeKey, "RANGE"})
	}
	s.keySchema = ks
}

// Lookup returns the live stream with this ARN, or nil.
func (r *Registry) Lookup(arn string) *Stream {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.byARN[arn]
}

// openShardLocked opens a shard owning key hashes lo..hi. s.mu is held.
func (s *Stream) openShardLocked(parent string, lo, hi uint64, now time.Time) *shard {
	s.nextShardOrd++
	var id string
	for {
		suffix := s.rnd.Uint32()
		id = fmt.Sprintf("shardId-%020d-%08x", now.UnixMilli(), suffix)
		if _, dup := s.ordByID[id]; !dup {
			break
		}
	}
	sh := &shard{
		ord:     s.nextShardOrd,
		id:      id,
		parent:  parent,
		lo:      lo,
		hi:      hi,
		created: now,
		start:   s.lastSeq + 1,
	}
	s.shards = append(s.shards, sh)
	s.byOrd[sh.ord] = sh
	s.ordByID[id] = sh.ord
	i := sort.Search(len(s.open), func(i int) bool { return s.open[i].lo > lo })
	s.open = append(s.open, nil)
	copy(s.open[i+1:], s.open[i:])
	s.open[i] = sh
	s.jot(Event{Kind: EvShardOpened, Shard: sh.state()})
	return sh
}

// closeShardLocked closes an open shard: it gets an EndingSequenceNumber
// above every record it holds and leaves the open set. s.mu is held.
func (s *Stream) closeShardLocked(sh *shard, now time.Time) {
	s.lastSeq++
	sh.end = s.lastSeq
	sh.closedAt = now
	s.jot(Event{Kind: EvShardClosed, Shard: ShardState{Ord: sh.ord, End: sh.end, ClosedAt: now.UnixNano()}})
	for i, o := range s.open {
		if o == sh {
			s.open = append(s.open[:i], s.open[i+1:]...)
			break
		}
	}
}

// rolloverLocked closes an open shard and opens one child owning the same
// key hashes.
func (s *Stream) rolloverLocked(sh *shard, now time.Time) {
	s.closeShardLocked(sh, now)
	s.openShardLocked(sh.id, sh.lo, sh.hi, now)
}

// shardForLocked returns the open shard owning key hash h (nil when the
// stream has no open shard).
func (s *Stream) shardForLocked(h uint64) *shard {
	i := sort.Search(len(s.open), func(i int) bool { return s.open[i].hi >= h })
	if i == len(s.open) {
		return nil
	}
	return s.open[i]
}

// Append records one change. The engine calls it while holding the lock
// that orders writes to that item, so a key's records enter the stream in
// commit order. The shard is chosen by a hash of the key among the open
// shards, each of which owns a fixed range of hashes that its children
// inherit, so one item's records always land in one shard lineage, in
// order. Appends to a disabled stream are ignored. Safe for concurrent use.
func (s *Stream) Append(c Change) {
	withOld := c.Old != nil && (s.viewType == OldImage || s.viewType == NewAndOldImages)
	withNew := c.New != nil && (s.viewType == NewImage || s.viewType == NewAndOldImages)
	size := attr.ItemSize(c.Keys)
	if withOld {
		size += attr.ItemSize(c.Old)
	}
	if withNew {
		size += attr.ItemSize(c.New)
	}

	// Encode the key and images outside the lock.
	b := make([]byte, 0, 2*size+16)
	b = attr.AppendItemJSON(b, c.Keys)
	kEnd := len(b)
	if withNew {
		b = attr.AppendItemJSON(b, c.New)
	}
	nEnd := len(b)
	if withOld {
		b = attr.AppendItemJSON(b, c.Old)
	}
	rec := record{size: uint32(size), svc: c.Service}
	rec.setCopies(b[:kEnd], b[kEnd:nEnd], b[nEnd:])
	s.append(c.EventName, rec, b[:kEnd], nil)
}

// EncodedChange is a Change whose key and images are already DynamoDB JSON
// objects, exactly as attr.AppendItemJSON writes them (keys sorted; the
// shard is chosen by a hash of Keys, so it must be that canonical form for
// Append and AppendEncoded to agree). Nil Old/New mean absent.
type EncodedChange struct {
	EventName      string
	Keys, Old, New []byte
	// OldBlob and NewBlob, when set, are the images in place of Old and
	// New: the JSON of blobs that no one modifies (the stored items), which
	// the stream keeps by pointer instead of copying it.
	OldBlob, NewBlob *blob.Header
	// Size is SizeBytes: attr.ItemSize of Keys plus that of each image the
	// stream's view type keeps (see Stream.ViewType).
	Size    int
	Service bool
	// Commit, when set, makes the record durable in place of the
	// registry's Journal, together with whatever the caller must make
	// durable with it (the item change the record describes): it is
	// called under the stream's lock with the record's event, once the
	// record has its sequence number and before anyone can see it. When
	// it fails, the record is dropped, its sequence number is given back
	// and AppendEncoded returns the error. It is not called when the
	// stream takes no record (disabled, or no open shard for the key).
	Commit func(*Event) error
}

// AppendEncoded is Append for a change whose JSON the caller already holds
// (for instance the stored image of an item the TTL sweeper deletes): it
// saves decoding and re-encoding. The stream keeps only the images its view
// type asks for; the byte slices are copied (blobs are not). Keys, and
// every image kept, must be a JSON object: otherwise nothing is appended
// and the error says which part is wrong (a bug in the caller, never a
// client mistake).
func (s *Stream) AppendEncoded(c EncodedChange) error {
	rec, err := s.encodedRecord(c)
	if err != nil {
		return err
	}
	return s.append(c.EventName, rec, c.Keys, c.Commit)
}

// encodedRecord checks c's JSON and returns the record it makes (data,
// kEnd, nEnd, size, svc set).
func (s *Stream) encodedRecord(c EncodedChange) (record, error) {
	newJS := imageJSON(c.NewBlob, c.New, s.viewType == NewImage || s.viewType == NewAndOldImages)
	oldJS := imageJSON(c.OldBlob, c.Old, s.viewType == OldImage || s.viewType == NewAndOldImages)
	for _, p := range []struct {
		name string
		b    []byte
		use  bool
	}{{"Keys", c.Keys, true}, {"Old", oldJS, oldJS != nil}, {"New", newJS, newJS != nil}} {
		if p.use && (len(p.b) < 2 || p.b[0] != '{' || !json.Valid(p.b)) {
			return record{}, fmt.Errorf("stream %s: AppendEncoded: %s is not a JSON object", s.arn, p.name)
		}
	}
	rec := record{size: uint32(max(c.Size, 0)), svc: c.Service}
	rec.setImages(c.Keys, keptBlob(c.NewBlob, newJS), keptBlob(c.OldBlob, oldJS))
	return rec, nil
}

// imageJSON returns the JSON of an image given as a blob b or as js: nil
// when absent or not kept (keep false).
func imageJSON(b *blob.Header, js []byte, keep bool) []byte {
	switch {
	case !keep:
		return nil
	case b != nil:
		return b.JSON() // never nil
	}
	return js
}

// keptBlob returns the blob a record keeps of an image whose JSON is js
// (nil: absent): b itself when the image is a blob, else a copy of js.
func keptBlob(b *blob.Header, js []byte) *blob.Header {
	switch {
	case js == nil:
		return nil
	case b != nil:
		return b
	}
	return blob.New(nil, js, 0)
}

// append adds a record (JSON, size, svc set) with Keys JSON keys to the
// shard that owns its key. With commit, the record is added only once
// commit has made it durable (see EncodedChange.Commit).
func (s *Stream) append(eventName string, rec record, keys []byte, commit func(*Event) error) error {
	h := keyHash(keys)
	now := s.reg.opts.Now()

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.status != StatusEnabled {
		return nil
	}
	if now.Sub(s.lastMaintain) >= time.Second {
		s.maintainLocked(now)
	}
	sh := s.shardForLocked(h)
	if sh == nil {
		return nil
	}
	if ro := s.reg.opts.Rollover; ro > 0 && now.Sub(sh.created) >= ro {
		s.rolloverLocked(sh, now)
		sh = s.shardForLocked(h)
	}
	s.lastSeq++
	rec.seq = s.lastSeq
	rec.ev = s.eventIndexLocked(eventName)
	rec.at = now.UnixNano()
	if last := sh.recs.last(); last != nil && last.at > rec.at {
		rec.at = last.at // keep creation times ordered within the shard
	}
	if commit != nil {
		if err := commit(&Event{Kind: EvRecord, Stream: s.ord, Shard: ShardState{Ord: sh.ord}, Record: exportRecord(&rec, eventName, keys)}); err != nil {
			s.lastSeq-- // nobody saw it: s.mu is held
			return err
		}
	}
	added := sh.recs.push(rec)
	sh.count++
	if commit == nil {
		s.journalRecord(sh, added, eventName, keys)
	}
	if rr := s.reg.opts.RolloverRecords; rr > 0 && sh.count >= rr {
		s.rolloverLocked(sh, now)
	}
	return nil
}

// eventIndexLocked interns an event name. The engine only sends INSERT,
// MODIFY and REMOVE; anything else is kept verbatim (up to 256 names).
func (s *Stream) eventIndexLocked(name string) uint8 {
	q := jsonString(name)
	for i, n := range s.events {
		if n == q {
			return uint8(i)
		}
	}
	if len(s.events) == 256 {
		return 1
	}
	s.events = append(s.events, q)
	return uint8(len(s.events) - 1)
}

// appendRecord renders a record's wire JSON; events is a snapshot of
// s.events taken under s.mu after the record was appended.
func (s *Stream) appendRecord(b []byte, r *record, events []string) []byte {
	b = append(b, s.prefix...)
	b = strconv.AppendInt(b, r.at/int64(time.Second), 10)
	b = append(b, `,"Keys":`...)
	b = r.appendKeys(b)
	if img := r.newImg(); img != "" {
		b = append(b, `,"NewImage":`...)
		b = append(b, img...)
	}
	if img := r.oldImg(); img != "" {
		b = append(b, `,"OldImage":`...)
		b = append(b, img...)
	}
	b = append(b, `,"SequenceNumber":"`...)
	b = appendSeq(b, r.seq)
	b = append(b, `","SizeBytes":`...)
	b = strconv.AppendUint(b, uint64(r.size), 10)
	b = append(b, `,"StreamViewType":`...)
	b = append(b, s.viewJSON...)
	b = append(b, `},"eventID":"`...)
	b = appendHex(b, s.salt)
	b = appendHex(b, r.seq)
	b = append(b, `","eventName":`...)
	b = append(b, events[r.ev]...)
	b = append(b, `,"eventSource":"aws:dynamodb","eventVersion":"1.1"`...)
	if r.svc {
		b = append(b, `,"userIdentity":{"PrincipalId":"dynamodb.amazonaws.com","Type":"Service"}`...)
	}
	return append(b, '}')
}

// jsonString returns s as a JSON string literal.
func jsonString(s string) string {
	q, _ := json.Marshal(s) // a string always marshals
	return string(q)
}

// recordOverhead bounds the bytes appendRecord adds around a record's data
// (for the 1 MB response cap).
const recordOverhead = 400

// mix64 spreads FNV's output over all 64 bits (splitmix64 finalizer), so
// range ownership is balanced across shards.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

func appendHex(b []byte, v uint64) []byte {
	const digits = "0123456789abcdef"
	for i := 60; i >= 0; i -= 4 {
		b = append(b, digits[(v>>uint(i))&0xf])
	}
	return b
}

// maintainLocked applies age-based rollover and retention to the stream.
// s.mu is held.
func (s *Stream) maintainLocked(now time.Time) {
	s.lastMaintain = now
	if ro := s.reg.opts.Rollover; ro > 0 && s.status == StatusEnabled {
		for _, sh := range append([]*shard(nil), s.open...) {
			if now.Sub(sh.created) >= ro {
				s.rolloverLocked(sh, now)
			}
		}
	}
	cutoff := now.Add(-s.reg.opts.Retention)
	s.trimLocked(cutoff.UnixNano())
	// Closed shards older than retention disappear, as in AWS.
	kept := s.shards[:0]
	var dropped []uint32
	for _, sh := range s.shards {
		if sh.closed() && sh.recs.Len() == 0 && !sh.closedAt.After(cutoff) {
			delete(s.byOrd, sh.ord)
			dropped = append(dropped, sh.ord)
			continue
		}
		kept = append(kept, sh)
	}
	if len(dropped) > 0 {
		s.jot(Event{Kind: EvShardsDropped, Dropped: dropped})
	}
	for i := len(kept); i < len(s.shards); i++ {
		s.shards[i] = nil
	}
	s.shards = kept
}

// trimLocked drops every record created before the cutoff (unix nanos).
func (s *Stream) trimLocked(cutoff int64) {
	jotted := false
	for _, sh := range s.shards {
		n := sh.recs.search(func(r *record) bool { return r.at >= cutoff })
		if n == 0 {
			continue
		}
		if !jotted {
			s.jot(Event{Kind: EvTrimmed, At: cutoff})
			jotted = true
		}
		sh.trimmed = sh.recs.at(n - 1).seq
		sh.recs.dropFront(n)
	}
}

// Tick applies age-based rollover and retention to every stream and drops
// disabled streams that have no shards left. The engine calls it from its
// background loop; reads and appends also apply it lazily.
func (r *Registry) Tick() {
	now := r.opts.Now()
	r.mu.RLock()
	list := append([]*Stream(nil), r.list...)
	r.mu.RUnlock()
	var gone []*Stream
	for _, s := range list {
		s.mu.Lock()
		s.maintainLocked(now)
		if s.status == StatusDisabled && len(s.shards) == 0 {
			gone = append(gone, s)
		}
		s.mu.Unlock()
	}
	if len(gone) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range gone {
		delete(r.byARN, s.arn)
		delete(r.byOrd, s.ord)
		if r.journal != nil {
			r.journal.Record(&Event{Kind: EvStreamDropped, Stream: s.ord})
		}
	}
	kept := r.list[:0]
	for _, s := range r.list {
		if r.byOrd[s.ord] == s {
			kept = append(kept, s)
		}
	}
	for i := len(kept); i < len(r.list); i++ {
		r.list[i] = nil
	}
	r.list = kept
}

// ErrNotFound is wrapped by the fault-injection methods when the stream or
// shard does not exist.
var ErrNotFound = errors.New("not found")

func (r *Registry) stream(arn string) (*Stream, error) {
	s := r.Lookup(arn)
	if s == nil {
		return nil, fmt.Errorf("stream %s: %w", arn, ErrNotFound)
	}
	return s, nil
}

// Disable closes every open shard of the stream and sets its status to
// DISABLED. It stays readable until its records age out, then disappears.
// Unknown ARNs are ignored.
func (r *Registry) Disable(arn string) {
	s := r.Lookup(arn)
	if s == nil {
		return
	}
	now := r.opts.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.status == StatusDisabled {
		return
	}
	for len(s.open) > 0 {
		s.closeShardLocked(s.open[0], now)
	}
	s.status = StatusDisabled
	s.jot(Event{Kind: EvDisabled})
}

// ThrottleGetRecords makes the next n GetRecords calls fail with
// LimitExceededException (n <= 0 stops throttling).
func (r *Registry) ThrottleGetRecords(n int) {
	if n < 0 {
		n = 0
	}
	r.throttle.Store(int64(n))
}

// GetRecordsThrottled returns how many GetRecords calls are still to fail.
func (r *Registry) GetRecordsThrottled() int { return int(r.throttle.Load()) }

// Rollover closes every open shard of the stream now and opens one child
// for each.
func (r *Registry) Rollover(arn string) error {
	s, err := r.stream(arn)
	if err != nil {
		return err
	}
	now := r.opts.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.status != StatusEnabled {
		return fmt.Errorf("rollover of %s: stream is %s", arn, s.status)
	}
	for _, sh := range append([]*shard(nil), s.open...) {
		s.rolloverLocked(sh, now)
	}
	return nil
}

// Split closes an open shard and opens two children, each owning half of
// its key hashes.
func (r *Registry) Split(arn, shardID string) error {
	s, err := r.stream(arn)
	if err != nil {
		return err
	}
	now := r.opts.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	ord, ok := s.ordByID[shardID]
	sh := s.byOrd[ord]
	if !ok || sh == nil {
		return fmt.Errorf("split of %s in %s: %w", shardID, arn, ErrNotFound)
	}
	if sh.closed() {
		return fmt.Errorf("split of %s in %s: shard is closed", shardID, arn)
	}
	if sh.lo == sh.hi {
		return fmt.Errorf("split of %s in %s: shard owns a single hash and cannot split", shardID, arn)
	}
	mid := sh.lo + (sh.hi-sh.lo)/2
	s.closeShardLocked(sh, now)
	s.openShardLocked(sh.id, sh.lo, mid, now)
	s.openShardLocked(sh.id, mid+1, sh.hi, now)
	return nil
}

// Trim drops every record of the stream created before `before`, as if
// retention had passed for them; readers positioned on them get
// TrimmedDataAccessException.
func (r *Registry) Trim(arn string, before time.Time) error {
	s, err := r.stream(arn)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.trimLocked(before.UnixNano())
	return nil
}

// ExpireIterators expires every shard iterator handed out so far.
func (r *Registry) ExpireIterators() { r.epoch.Add(1) }

// IteratorEpoch returns the expiry epoch: ExpireIterators advances it, and
// an iterator issued in another epoch is expired.
func (r *Registry) IteratorEpoch() uint32 { return r.epoch.Load() }

// SetIteratorEpoch restores an epoch IteratorEpoch returned (an engine
// restarting on its data directory), so that iterators expired before the
// restart stay expired.
func (r *Registry) SetIteratorEpoch(n uint32) { r.epoch.Store(n) }

// OmitFromDescribe makes the next n DescribeStream responses that would
// list the shard leave it out, as the service's eventually consistent
// descriptions sometimes do; n <= 0 cancels an omission still pending.
// Only descriptions are affected: GetShardIterator and GetRecords serve the
// shard as before. A response counts when the shard would have been on its
// page (a ShardFilter or page that would not list it leaves the count
// alone). The shard must be live.
func (r *Registry) OmitFromDescribe(arn, shardID string, n int) error {
	s, err := r.stream(arn)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ord, ok := s.ordByID[shardID]
	if !ok || s.byOrd[ord] == nil {
		return fmt.Errorf("omit %s of %s from descriptions: %w", shardID, arn, ErrNotFound)
	}
	if n <= 0 {
		delete(s.omit, shardID)
		return nil
	}
	if s.omit == nil {
		s.omit = map[string]int{}
	}
	s.omit[shardID] = n
	return nil
}

// Omission is a shard that DescribeStream responses still leave out (see
// OmitFromDescribe), and how many more times.
type Omission struct {
	Stream string `json:"stream"` // its ARN
	Shard  string `json:"shard"`
	Times  int    `json:"times"`
}

// Omissions returns the omissions still pending, by stream in creation
// order, then by shard ID.
func (r *Registry) Omissions() []Omission {
	r.mu.RLock()
	list := append([]*Stream(nil), r.list...)
	r.mu.RUnlock()
	var out []Omission
	for _, s := range list {
		s.mu.RLock()
		ids := make([]string, 0, len(s.omit))
		for id := range s.omit {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			out = append(out, Omission{Stream: s.arn, Shard: id, Times: s.omit[id]})
		}
		s.mu.RUnlock()
	}
	return out
}

// omittedLocked reports whether a description must leave the shard out this
// time, and counts the omission. s.mu is held (write).
func (s *Stream) omittedLocked(id string) bool {
	n := s.omit[id]
	switch {
	case n <= 0:
		return false
	case n == 1:
		delete(s.omit, id)
	default:
		s.omit[id] = n - 1
	}
	return true
}

// ShardInfo describes one live shard, for tests and the engine's tooling.
type ShardInfo struct {
	ID, ParentID   string
	Start, End     string // sequence numbers; End is "" while open
	Records        int    // untrimmed records
	Open           bool
	HashLo, HashHi uint64
}

// Shards lists the live shards of the stream in creation order.
func (s *Stream) Shards() []ShardInfo {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]ShardInfo, 0, len(s.shards))
	for _, sh := range s.shards {
		si := ShardInfo{ID: sh.id, ParentID: sh.parent, Start: formatSeq(sh.start), Records: sh.recs.Len(), Open: !sh.closed(), HashLo: sh.lo, HashHi: sh.hi}
		if sh.closed() {
			si.End = formatSeq(sh.end)
		}
		out = append(out, si)
	}
	return out
}
