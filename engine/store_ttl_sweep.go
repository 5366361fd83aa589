package engine

import (
	"bytes"
	"context"
	"slices"
	"time"

	"github.com/ttl-archiver/archiver/engine/internal/attr"
	"github.com/ttl-archiver/archiver/engine/internal/stream"
)

// sweepChunk is how many items a sweep looks at per hold of a table's
// write lock; between chunks the lock is released so that reads and writes
// go on during a sweep of millions of items.
const sweepChunk = 2048

// fiveYears is how far in the past a TTL value may be and still expire.
const fiveYears = 5 * 365 * 24 * time.Hour

// SweepTTL runs one full TTL pass over every table with TTL enabled, in
// every Region, and returns how many items it deleted. An expired item of
// a global table is deleted by one Region only, its TTL owner: the Region
// of the item's last write while that Region is a replica, else the first
// replica by name (SetTTLIndependent lifts that rule); the others get the
// owner's delete by replication. An item is deleted when its TTL
// attribute is a Number of epoch seconds strictly below now (plus the
// item's share of Options.TTLLag) and not more than five years in the
// past. Each deletion is a system delete: it leaves the table and its
// indexes and enters the stream as a REMOVE from dynamodb.amazonaws.com.
func (e *Engine) SweepTTL(ctx context.Context) (int, error) {
	tables := e.sortedTables()
	total := 0
	for _, t := range tables {
		n, err := t.sweep(ctx, e.clock, e.ttlIndependent.Load())
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// SetTTLIndependent makes every Region's TTL process delete every expired
// item of a global table, as if each were its owner: the race AWS does not
// rule out, where one expiry makes a service REMOVE in more than one
// Region's stream. Off by default.
func (e *Engine) SetTTLIndependent(on bool) { e.ttlIndependent.Store(on) }

// sweep deletes the expired items of one table, chunk by chunk. It looks
// for the next expired item under the read lock, so a pass over a table
// with nothing to delete never blocks readers, and deletes a chunk from
// there under the write lock, checking expiry again under that lock.
func (t *table) sweep(ctx context.Context, clock Clock, independent bool) (int, error) {
	deleted := 0
	var cursor []byte
	var victims []*entry
	for {
		if err := ctx.Err(); err != nil {
			return deleted, err
		}
		now := clock.Now()
		nowN := now.UnixNano()
		oldest := now.Add(-fiveYears).UnixNano()
		expired := func(n *slNode) bool {
			exp := n.exp
			return exp != noExpiry && exp >= oldest && exp+lagFor(n.Key(), t.lagNanos) < nowN &&
				(t.repl == nil || independent || t.ttlOwned(n.Key()))
		}

		// Find the next expired item (read lock).
		t.mu.RLock()
		if t.ttlAttr == "" {
			t.mu.RUnlock()
			return deleted, nil
		}
		n := t.items.First()
		if cursor != nil {
			n = t.items.SeekGE(cursor)
		}
		for i := 0; n != nil && i < 4*sweepChunk && !expired(n); i++ {
			n = n.Next()
		}
		if n == nil {
			t.mu.RUnlock()
			return deleted, nil
		}
		cursor = n.Key() // stored keys are immutable
		hit := expired(n)
		t.mu.RUnlock()
		if !hit {
			continue
		}

		// Delete a chunk from there (write lock).
		t.mu.Lock()
		if t.ttlAttr == "" {
			t.mu.Unlock()
			return deleted, nil
		}
		n = t.items.SeekGE(cursor)
		victims = victims[:0]
		for i := 0; n != nil && i < sweepChunk; i, n = i+1, n.Next() {
			if expired(n) {
				victims = append(victims, n.val)
			}
		}
		if len(victims) > 0 {
			remove := t.removeExpiredLocked
			if t.repl != nil {
				remove = t.globalRemoveLocked
			}
			n, err := remove(victims)
			deleted += n
			if err != nil {
				t.mu.Unlock()
				return deleted, err
			}
		}
		t.mu.Unlock()
		if n == nil {
			return deleted, nil
		}
		cursor = n.Key()
	}
}

// removeExpiredLocked deletes expired entries (in table key order) as
// system deletes: from the table, every index and into the stream. The
// entries were checked under this same lock hold, so a write that moved a
// TTL into the future has already replaced its entry. t.mu is held. It
// returns how many it deleted: with a data directory, each delete is
// logged with its REMOVE record as one entry before it takes effect, and
// when the log refuses one (a full disk), the ones before it are deleted,
// it and the rest are left in place, and the refusal is returned.
//
// Items are not decoded whole: only the attributes the indexes need are
// read out of the stored JSON, and the stream gets the stored JSON itself
// as the old image (Stream.AppendEncoded), which keeps the garbage of a
// million-item sweep, and so the GC's work, small.
func (t *table) removeExpiredLocked(victims []*entry) (int, error) {
	needed := t.sweepAttrs()
	part := make(attr.Item, len(needed)) // reused: the part of each item indexes need
	fill := func(ent *entry) error {
		clear(part)
		var err error
		members(ent.raw(), func(name, val []byte) bool {
			for _, n := range needed {
				if string(name) == n.tok {
					var v attr.Value
					if err = v.UnmarshalJSON(val); err != nil {
						return false
					}
					part[n.name] = v
				}
			}
			return true
		})
		return err
	}
	indexes := append(append([]*index(nil), t.lsis...), t.gsis...)
	ikeys := make([][][]byte, len(indexes))
	var withOld bool
	if t.stream != nil {
		view := t.stream.ViewType()
		withOld = view == stream.OldImage || view == stream.NewAndOldImages
	}
	var kb []byte
	var failed error
	done := 0
	for _, ent := range victims {
		if failed = fill(ent); failed != nil {
			break
		}
		if failed = t.logExpired(ent, part, &kb, withOld); failed != nil {
			break
		}
		done++
		for j, ix := range indexes {
			if k := ix.entryKey(t, ent, part); k != nil {
				ikeys[j] = append(ikeys[j], k)
				ix.size -= ix.projectedSize(t, ent, part)
			}
		}
	}
	keys := make([][]byte, done)
	for i, ent := range victims[:done] {
		keys[i] = ent.key()
		t.size -= int64(ent.size)
	}
	t.items.DeleteSorted(keys)
	for j, ix := range indexes {
		slices.SortFunc(ikeys[j], bytes.Compare)
		ix.list.DeleteSorted(ikeys[j])
	}
	return done, failed
}

// logExpired makes the TTL delete of ent durable with its REMOVE record
// (one log entry), or only the delete when the table has no stream; it
// changes nothing in the table. part holds the key attributes. t.mu is
// held.
func (t *table) logExpired(ent *entry, part attr.Item, kb *[]byte, withOld bool) error {
	if t.stream == nil {
		if t.p == nil {
			return nil
		}
		return t.p.logChange(t, ent.key(), nil, nil, nil)
	}
	*kb = keysJSON((*kb)[:0], ent.raw(), t.ktoks)
	c := stream.EncodedChange{EventName: "REMOVE", Keys: *kb, Service: true, Size: attr.SizeOf(t.key.Hash, part[t.key.Hash])}
	if t.key.Range != "" {
		c.Size += attr.SizeOf(t.key.Range, part[t.key.Range])
	}
	if withOld {
		c.OldBlob = ent.blob()
		c.Size += int(ent.size)
	}
	logged := t.p == nil
	if t.p != nil {
		c.Commit = func(ev *stream.Event) error {
			logged = true
			return t.p.logChange(t, ent.key(), nil, ev, nil)
		}
	}
	if err := t.stream.AppendEncoded(c); err != nil {
		return err
	}
	if !logged { // the stream took no record (disabled)
		return t.p.logChange(t, ent.key(), nil, nil, nil)
	}
	return nil
}

// attrTok is an attribute name and its JSON string token as attr's
// encoder writes it (quotes and escapes included).
type attrTok struct{ name, tok string }

func jsonToken(name string) string {
	const tail = `:{"NULL":true}}`
	b := attr.AppendItemJSON(nil, attr.Item{name: attr.Null()})
	return string(b[1 : len(b)-len(tail)])
}

// sweepAttrs lists the attributes a system delete must read from an item:
// the table's keys and every index's keys and INCLUDE attributes.
func (t *table) sweepAttrs() []attrTok {
	var out []attrTok
	add := func(n string) {
		if n == "" {
			return
		}
		for _, a := range out {
			if a.name == n {
				return
			}
		}
		out = append(out, attrTok{n, jsonToken(n)})
	}
	add(t.key.Hash)
	add(t.key.Range)
	for _, list := range [][]*index{t.lsis, t.gsis} {
		for _, ix := range list {
			add(ix.key.Hash)
			add(ix.key.Range)
			for _, n := range ix.nonKey {
				add(n)
			}
		}
	}
	return out
}

// keyToks returns the table's key attributes in the order
// attr.AppendItemJSON writes them (names sorted).
func (t *table) keyToks() []attrTok {
	out := []attrTok{{t.key.Hash, jsonToken(t.key.Hash)}}
	if t.key.Range != "" {
		r := attrTok{t.key.Range, jsonToken(t.key.Range)}
		if t.key.Range < t.key.Hash {
			out = []attrTok{r, out[0]}
		} else {
			out = append(out, r)
		}
	}
	return out
}

// keysJSON appends the item's key attributes, copied from its stored JSON
// raw, exactly as attr.AppendItemJSON would write them.
func keysJSON(dst, raw []byte, keys []attrTok) []byte {
	dst = append(dst, '{')
	for i, k := range keys {
		members(raw, func(name, val []byte) bool {
			if string(name) != k.tok {
				return true
			}
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, name...)
			dst = append(dst, ':')
			dst = append(dst, val...)
			return false
		})
	}
	return append(dst, '}')
}

// members calls fn with the name token (quoted) and raw value of each
// top-level member of a compact JSON object as the engine stores items,
// until fn returns false.
func members(b []byte, fn func(name, val []byte) bool) {
	i := 1
	for i < len(b) && b[i] == '"' {
		j := attr.SkipString(b, i)
		name := b[i:j]
		if j >= len(b) || b[j] != ':' {
			return
		}
		k := attr.SkipValue(b, j+1)
		if !fn(name, b[j+1:k]) {
			return
		}
		i = k
		if i < len(b) && b[i] == ',' {
			i++
		}
	}
}
