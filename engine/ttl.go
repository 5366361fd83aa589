package engine

import (
	"bytes"
	"context"
	"slices"
	"sort"
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

// SweepTTL runs one full TTL pass over every table with TTL enabled and
// returns how many items it deleted. An item is deleted when its TTL
// attribute is a Number of epoch seconds strictly below now (plus the
// item's share of Options.TTLLag) and not more than five years in the
// past. Each deletion is a system delete: it leaves the table and its
// indexes and enters the stream as a REMOVE from dynamodb.amazonaws.com.
func (e *Engine) SweepTTL(ctx context.Context) (int, error) {
	e.mu.RLock()
	tables := make([]*table, 0, len(e.tables))
	for _, t := range e.tables {
		tables = append(tables, t)
	}
	e.mu.RUnlock()
	sort.Slice(tables, func(i, j int) bool { return tables[i].name < tables[j].name })
	total := 0
	for _, t := range tables {
		n, err := t.sweep(ctx, e.clock)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// sweep deletes the expired items of one table, chunk by chunk. It looks
// for the next expired item under the read lock, so a pass over a table
// with nothing to delete never blocks readers, and deletes a chunk from
// there under the write lock, checking expiry again under that lock.
func (t *table) sweep(ctx context.Context, clock Clock) (int, error) {
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
			exp := n.val.exp
			return exp != noExpiry && exp >= oldest && exp+lagFor(n.key, t.lagNanos) < nowN
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
		cursor = n.key // stored keys are immutable
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
			if err := t.removeExpiredLocked(victims); err != nil {
				t.mu.Unlock()
				return deleted, err
			}
			deleted += len(victims)
		}
		t.mu.Unlock()
		if n == nil {
			return deleted, nil
		}
		cursor = n.key
	}
}

// removeExpiredLocked deletes expired entries (in table key order) as
// system deletes: from the table, every index and into the stream. The
// entries were checked under this same lock hold, so a write that moved a
// TTL into the future has already replaced its entry. t.mu is held.
func (t *table) removeExpiredLocked(victims []*entry) error {
	items := make([]attr.Item, len(victims))
	keys := make([][]byte, len(victims))
	for i, ent := range victims {
		it, err := decodeStored(ent)
		if err != nil {
			return err
		}
		items[i], keys[i] = it, ent.key
		t.size -= int64(ent.size)
	}
	t.items.DeleteSorted(keys)
	for _, list := range [][]*index{t.lsis, t.gsis} {
		for _, ix := range list {
			ikeys := keys[:0:0]
			for i, ent := range victims {
				if k := ix.entryKey(t, ent, items[i]); k != nil {
					ikeys = append(ikeys, k)
					ix.size -= ix.projectedSize(t, ent, items[i])
				}
			}
			slices.SortFunc(ikeys, bytes.Compare)
			ix.list.DeleteSorted(ikeys)
		}
	}
	if t.stream != nil {
		for _, it := range items {
			t.stream.Append(stream.Change{EventName: "REMOVE", Keys: t.key.project(it), Old: it, Service: true})
		}
	}
	return nil
}
