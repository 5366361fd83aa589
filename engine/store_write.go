package engine

import (
	"github.com/ttl-archiver/archiver/engine/internal/attr"
	"github.com/ttl-archiver/archiver/engine/internal/awserr"
	"github.com/ttl-archiver/archiver/engine/internal/expr"
	"github.com/ttl-archiver/archiver/engine/internal/stream"
)

// Storage of items: the one write path every API call, batch, transaction,
// PartiQL statement, replication op and TTL delete goes through
// (writeLocked), and the per-table put, delete and update under the table
// lock that the item handlers call once they have validated a request.

// needOld reports whether a write must decode the item it replaces.
func (t *table) needOld() bool {
	return len(t.gsis) > 0 || len(t.lsis) > 0 || t.stream != nil
}

// writeLocked replaces old (nil when absent) by a new item (nil to delete)
// in the table, its indexes and its stream. oldItem must be the decoded old
// item when old != nil and t.needOld(). t.mu is held for writing.
//
// With a data directory, the change and its stream record are logged as
// one entry before anything changes in memory; when the log refuses it (a
// full disk), writeLocked returns the refusal and nothing has changed: no
// item, no record, no sequence number taken. While a transaction applies
// (t.tx set), the write is only collected: the transaction logs all its
// writes as one entry, then applies them (txWrites.commit).
//
// A delete of an item that is not there changes nothing and writes
// nothing, except on a replica of a global table: there it is a write
// like any other, stamped and replicated (its tombstone orders it under
// last writer wins against another Region's put of the key), with no
// stream record, as nothing changed.
func (t *table) writeLocked(key []byte, old *entry, oldItem attr.Item, ne *entry, newItem attr.Item, service bool) error {
	if ne == nil && old == nil && t.repl == nil {
		return nil
	}
	if t.tx != nil {
		t.tx.add(t, key, old, oldItem, ne, newItem, service)
		return nil
	}
	var rw *replWrite // a replica's write: stamped, and replicated unless it is a replicated one
	if t.repl != nil {
		rw = t.repl.prepare(t, key, ne)
	}
	logged := t.p == nil
	if t.stream != nil && changes(old, oldItem, ne, newItem) {
		c := t.recordInto(t.keyBuf[:0], old, oldItem, ne, newItem, service)
		t.keyBuf = c.Keys // the stream copies the keys it keeps
		if t.p != nil {
			c.Commit = func(ev *stream.Event) error {
				logged = true
				return t.p.logChange(t, key, ne, ev, rw)
			}
		}
		if err := t.stream.AppendEncoded(c); err != nil {
			return err
		}
	}
	if !logged {
		if err := t.p.logChange(t, key, ne, nil, rw); err != nil {
			return err
		}
	}
	t.applyLocked(key, old, oldItem, ne, newItem)
	if rw != nil {
		t.repl.commit(rw)
	}
	return nil
}

// applyLocked is the in-memory part of writeLocked: old (nil when absent)
// is replaced by ne (nil to delete) in the table and its indexes. t.mu is
// held for writing.
func (t *table) applyLocked(key []byte, old *entry, oldItem attr.Item, ne *entry, newItem attr.Item) {
	if old != nil {
		t.size -= int64(old.size)
		for _, ix := range t.lsis {
			ix.remove(t, old, oldItem)
		}
		for _, ix := range t.gsis {
			ix.remove(t, old, oldItem)
		}
	}
	if ne != nil {
		t.items.Put(ne.key(), ne, t.expiry(newItem))
		t.size += int64(ne.size)
		for _, ix := range t.lsis {
			ix.add(t, ne, newItem)
		}
		for _, ix := range t.gsis {
			ix.add(t, ne, newItem)
		}
	} else {
		t.items.Delete(key)
	}
}

// recordOf is the stream record of a write (old or ne may be nil, not
// both). The stored JSON is what the stream would encode: it is handed
// over as is. t.mu is held.
func (t *table) recordOf(old *entry, oldItem attr.Item, ne *entry, newItem attr.Item, service bool) stream.EncodedChange {
	return t.recordInto(make([]byte, 0, 64), old, oldItem, ne, newItem, service)
}

// recordInto is recordOf with the Keys JSON written to dst.
func (t *table) recordInto(dst []byte, old *entry, oldItem attr.Item, ne *entry, newItem attr.Item, service bool) stream.EncodedChange {
	c := stream.EncodedChange{Service: service} // the images are stored items' blobs: immutable
	var keyItem attr.Item
	var keySrc []byte
	switch {
	case old == nil:
		c.EventName, keyItem, keySrc = "INSERT", newItem, ne.raw()
	case ne != nil:
		c.EventName, keyItem, keySrc = "MODIFY", newItem, ne.raw()
	default:
		c.EventName, keyItem, keySrc = "REMOVE", oldItem, old.raw()
	}
	view := t.stream.ViewType()
	c.Keys = keysJSON(dst, keySrc, t.ktoks)
	c.Size = attr.SizeOf(t.key.Hash, keyItem[t.key.Hash])
	if t.key.Range != "" {
		c.Size += attr.SizeOf(t.key.Range, keyItem[t.key.Range])
	}
	if old != nil && (view == stream.OldImage || view == stream.NewAndOldImages) {
		c.OldBlob = old.blob()
		c.Size += int(old.size)
	}
	if ne != nil && (view == stream.NewImage || view == stream.NewAndOldImages) {
		c.NewBlob = ne.blob()
		c.Size += int(ne.size)
	}
	return c
}

// unchanged reports whether a write replaces an item by an identical one:
// the same attribute names, types and values, numbers compared by value
// ("1" = "1.0") and sets as sets. DynamoDB writes no stream record for
// such a write, whatever the path (PutItem, UpdateItem, BatchWriteItem,
// TransactWriteItems). oldItem must be the decoded old item.
func unchanged(old *entry, oldItem attr.Item, ne *entry, newItem attr.Item) bool {
	if old == nil || ne == nil {
		return false
	}
	return string(old.raw()) == string(ne.raw()) || oldItem != nil && attr.EqualItems(oldItem, newItem)
}

// changes reports whether a write changes the item, and so makes a stream
// record: it neither deletes what is not there nor leaves the item
// unchanged.
func changes(old *entry, oldItem attr.Item, ne *entry, newItem attr.Item) bool {
	return (old != nil || ne != nil) && !unchanged(old, oldItem, ne, newItem)
}

// keyOnly reports whether it holds nothing but the table's key attributes.
func (t *table) keyOnly(it attr.Item) bool {
	n := 1
	if t.key.Range != "" {
		n = 2
	}
	return len(it) == n
}

// put stores item, replacing any item with its key, when cond (if any)
// holds on the old item. It returns the old item when wantOld or the table
// needed it anyway, and the size charged.
func (t *table) put(item attr.Item, cond *expr.Condition, rvccf string, wantOld bool) (attr.Item, int, error) {
	size := attr.ItemSize(item)
	if size > maxItemSize {
		return nil, 0, awserr.Validation("Item size has exceeded the maximum allowed size")
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.putLocked(item, size, cond, rvccf, wantOld)
}

func (t *table) putLocked(item attr.Item, size int, cond *expr.Condition, rvccf string, wantOld bool) (attr.Item, int, error) {
	if err := t.checkItem(item); err != nil {
		return nil, 0, err
	}
	key := t.key.encode(make([]byte, 0, 32), item)
	old := t.items.GetForWrite(key)
	var oldItem attr.Item
	if old != nil && (wantOld || cond != nil || t.needOld()) {
		var err error
		if oldItem, err = decodeStored(old); err != nil {
			return nil, 0, err
		}
	}
	if err := checkCond(cond, oldItem, rvccf); err != nil {
		return nil, 0, err
	}
	ne := t.newEntry(key, item, size)
	if err := t.writeLocked(key, old, oldItem, ne, item, false); err != nil {
		return nil, 0, err
	}
	if old != nil && int(old.size) > size {
		size = int(old.size)
	}
	return oldItem, size, nil
}

// delete removes the item with key when cond holds.
func (t *table) delete(keyItem attr.Item, cond *expr.Condition, rvccf string, wantOld bool) (attr.Item, int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.deleteLocked(keyItem, cond, rvccf, wantOld)
}

func (t *table) deleteLocked(keyItem attr.Item, cond *expr.Condition, rvccf string, wantOld bool) (attr.Item, int, error) {
	key, err := t.keyOf(keyItem)
	if err != nil {
		return nil, 0, err
	}
	old := t.items.GetForWrite(key)
	var oldItem attr.Item
	if old != nil && (wantOld || cond != nil || t.needOld()) {
		if oldItem, err = decodeStored(old); err != nil {
			return nil, 0, err
		}
	}
	if err := checkCond(cond, oldItem, rvccf); err != nil {
		return nil, 0, err
	}
	if err := t.writeLocked(key, old, oldItem, nil, nil, false); err != nil {
		return nil, 0, err
	}
	if old == nil {
		return nil, 0, nil
	}
	return oldItem, int(old.size), nil
}

type updateResult struct {
	old, new attr.Item
	touched  []string
	size     int
}

// update applies upd to the item with key (creating it from its key when
// absent, unless upd leaves nothing but the key) when cond holds.
func (t *table) update(keyItem attr.Item, upd *expr.Update, cond *expr.Condition, rvccf string) (updateResult, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.updateLocked(keyItem, upd, cond, rvccf)
}

func (t *table) updateLocked(keyItem attr.Item, upd *expr.Update, cond *expr.Condition, rvccf string) (updateResult, error) {
	var res updateResult
	key, err := t.keyOf(keyItem)
	if err != nil {
		return res, err
	}
	old := t.items.GetForWrite(key)
	var oldItem attr.Item
	if old != nil {
		if oldItem, err = decodeStored(old); err != nil {
			return res, err
		}
	}
	if err := checkCond(cond, oldItem, rvccf); err != nil {
		return res, err
	}
	base := oldItem
	if base == nil {
		base = attr.CloneItem(keyItem)
	}
	newItem := base
	if upd != nil {
		var touched []string
		newItem, touched, err = upd.Apply(base)
		if err != nil {
			return res, err
		}
		for _, n := range touched {
			if t.key.has(n) {
				return res, awserr.Validation("One or more parameter values were invalid: Cannot update attribute %s. This attribute is part of the key", n)
			}
		}
		res.touched = touched
		if old == nil && t.keyOnly(newItem) {
			// An update that only removes (REMOVE, DELETE) creates
			// nothing on a missing key: no item, no stream record, and
			// no attributes to return.
			res.size = attr.ItemSize(newItem)
			return res, nil
		}
	}
	size := attr.ItemSize(newItem)
	if size > maxItemSize {
		return res, awserr.Validation("Item size to update has exceeded the maximum allowed size")
	}
	if err := t.checkIndexKeys(newItem); err != nil {
		return res, err
	}
	ne := t.newEntry(key, newItem, size)
	if err := t.writeLocked(key, old, oldItem, ne, newItem, false); err != nil {
		return res, err
	}
	res.old, res.new = oldItem, newItem
	res.size = size
	if old != nil && int(old.size) > size {
		res.size = int(old.size)
	}
	return res, nil
}
