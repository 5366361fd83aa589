package engine

import (
	"hash/fnv"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/ttl-archiver/archiver/engine/internal/attr"
	"github.com/ttl-archiver/archiver/engine/internal/blob"
	"github.com/ttl-archiver/archiver/engine/internal/stream"
)

// entry is one stored item, immutable once stored: the header of a blob
// (package blob, whose layout it has) holding the item's table storage key
// and its DynamoDB JSON, one allocation of no pointers, which the
// collector marks without scanning, and which the item's stream records
// keep as their image (entry.blob). key and raw hand its bytes out as
// slices that must not be written to. newStoredEntry makes entries; an
// entry is never copied (its bytes would not follow). The item's TTL
// expiry is kept by its node in the table's skiplist (slNode.exp).
type entry struct {
	size int32  // DynamoDB item size in bytes (blob.Header.Size)
	klen uint32 // length of the key (blob.Header.KLen)
	dlen uint32 // length of the key and the JSON (blob.Header.DLen)
}

// newStoredEntry returns a new entry holding copies of key and of raw, the
// item's JSON.
func newStoredEntry(key, raw []byte, size int32) *entry {
	return (*entry)(unsafe.Pointer(blob.New(key, raw, size)))
}

// blob is the entry as the blob it is.
func (e *entry) blob() *blob.Header { return (*blob.Header)(unsafe.Pointer(e)) }

// key is the entry's table storage key (capacity = length: appending to it
// copies).
func (e *entry) key() []byte { return e.blob().Key() }

// raw is the item's DynamoDB JSON (capacity = length), never nil: a nil
// JSON means a delete to some callers.
func (e *entry) raw() []byte { return e.blob().JSON() }

const noExpiry = math.MinInt64

// index is a GSI or an LSI.
type index struct {
	name     string
	global   bool
	key      keyDef
	projType string   // ALL, KEYS_ONLY, INCLUDE
	nonKey   []string // INCLUDE's NonKeyAttributes
	rcu, wcu int64
	list     *skiplist
	size     int64
	arn      string
	created  time.Time
}

// table is one table: its schema, its items and its indexes. mu guards
// everything below it; writes and their stream Append happen under the
// write lock, so a key's stream records are in commit order.
type table struct {
	name    string
	region  string // the Region it is in (Options.Region or a request's credential scope)
	arn     string
	id      string
	created time.Time

	mu         sync.RWMutex
	key        keyDef
	attrDefs   map[string]attr.Type
	billing    string
	rcu, wcu   int64
	gsis       []*index
	lsis       []*index
	items      *skiplist
	size       int64
	ttlAttr    string // "" when TTL is disabled
	stream     *stream.Stream
	latest     *stream.Stream // latest stream, enabled or not
	deletion   bool
	tags       tagList
	tableClass string
	lagNanos   int64

	scratch sync.Pool  // *[]byte buffers for encoding items
	ktoks   []attrTok  // key attributes' JSON tokens, in encoder order (set at creation)
	keyBuf  []byte     // scratch for a write's stream Keys JSON (writeLocked)
	p       *persister // logs the table's changes; nil without Options.DataDir
	// tx is set, under mu, while a transaction applies its actions:
	// writeLocked collects their writes there, to be logged as one entry
	// and only then applied (txWrites.commit).
	tx *txWrites
	// repl is the replication state of a global table's replica, nil for
	// any other table (global_replica.go); mu guards it.
	repl *replState
}

// tkey is the table's key in Engine.tables.
func (t *table) tkey() tkey { return tkey{t.region, t.name} }

// indexByName returns the named index or nil.
func (t *table) indexByName(name string) *index {
	for _, ix := range t.gsis {
		if ix.name == name {
			return ix
		}
	}
	for _, ix := range t.lsis {
		if ix.name == name {
			return ix
		}
	}
	return nil
}

// setStream makes s the table's stream, enabled, keyed by its key schema.
func (t *table) setStream(s *stream.Stream) {
	s.SetKeySchema(t.key.Hash, t.key.Range)
	t.stream = s
	t.latest = s
}

// decodeStored decodes an entry's stored item.
func decodeStored(e *entry) (attr.Item, error) {
	return attr.UnmarshalItemJSON(e.raw())
}

// expiry is the TTL expiry of an item of the table: noExpiry when TTL is
// off (see expiryOf).
func (t *table) expiry(it attr.Item) int64 {
	if t.ttlAttr == "" {
		return noExpiry
	}
	return expiryOf(it, t.ttlAttr)
}

// expiryOf reads the TTL attribute as unix nanoseconds, or noExpiry when it
// is missing, not a Number, or out of any plausible range.
func expiryOf(it attr.Item, name string) int64 {
	v, ok := it[name]
	if !ok || v.T != attr.N {
		return noExpiry
	}
	return expiryNanos(v.S)
}

// expiryNanos converts a canonical decimal string of epoch seconds to unix
// nanoseconds.
func expiryNanos(s string) int64 {
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	intPart, frac, _ := strings.Cut(s, ".")
	if len(intPart) > 10 { // beyond year 2286 (or before 1653): never expires
		return noExpiry
	}
	sec, err := strconv.ParseInt(intPart, 10, 64)
	if err != nil {
		return noExpiry
	}
	var ns int64
	for i := 0; i < 9; i++ {
		ns *= 10
		if i < len(frac) {
			ns += int64(frac[i] - '0')
		}
	}
	total := sec*1e9 + ns
	if neg {
		total = -total
	}
	return total
}

// lag returns the per-item TTL delay in 0..lagNanos.
func lagFor(key []byte, lagNanos int64) int64 {
	if lagNanos <= 0 {
		return 0
	}
	h := fnv.New64a()
	h.Write(key)
	return int64(h.Sum64() % uint64(lagNanos+1))
}

// newEntry encodes an item for storage.
func (t *table) newEntry(key []byte, it attr.Item, size int) *entry {
	// Key and JSON share one exactly sized allocation: a million stored
	// items should cost the GC as few objects and bytes as possible.
	sp, _ := t.scratch.Get().(*[]byte)
	if sp == nil {
		b := make([]byte, 0, 1024)
		sp = &b
	}
	js := attr.AppendItemJSON((*sp)[:0], it)
	e := newStoredEntry(key, js, int32(size))
	if cap(js) <= 64<<10 {
		*sp = js
		t.scratch.Put(sp)
	}
	return e
}
