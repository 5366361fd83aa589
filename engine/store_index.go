package engine

import (
	"github.com/ttl-archiver/archiver/engine/internal/attr"
)

// Secondary indexes in the store: an item's entry in an index, its
// projection and size, and keeping the index in step with the table.

func (ix *index) entryKey(t *table, e *entry, it attr.Item) []byte {
	h, ok := it[ix.key.Hash]
	if !ok || h.T != ix.key.HashType {
		return nil
	}
	k := appendComponent(make([]byte, 0, 64), h)
	if ix.key.Range != "" {
		r, ok := it[ix.key.Range]
		if !ok || r.T != ix.key.RangeType {
			return nil
		}
		k = appendComponent(k, r)
	}
	return append(k, e.key()...)
}

func (ix *index) projectedSize(t *table, e *entry, it attr.Item) int64 {
	if ix.projType == "ALL" {
		return int64(e.size)
	}
	n := 0
	for name, v := range it {
		if ix.projects(t, name) {
			n += attr.SizeOf(name, v)
		}
	}
	return int64(n)
}

// projects reports whether the index holds attribute name.
func (ix *index) projects(t *table, name string) bool {
	if ix.projType == "ALL" || t.key.has(name) || ix.key.has(name) {
		return true
	}
	for _, n := range ix.nonKey {
		if n == name {
			return true
		}
	}
	return false
}

// project reduces a table item to what the index holds.
func (ix *index) project(t *table, it attr.Item) attr.Item {
	if ix.projType == "ALL" {
		return it
	}
	out := attr.Item{}
	for name, v := range it {
		if ix.projects(t, name) {
			out[name] = v
		}
	}
	return out
}

func (ix *index) add(t *table, e *entry, it attr.Item) {
	if k := ix.entryKey(t, e, it); k != nil {
		ix.list.Put(k, e, noExpiry)
		ix.size += ix.projectedSize(t, e, it)
	}
}

func (ix *index) remove(t *table, e *entry, it attr.Item) {
	if k := ix.entryKey(t, e, it); k != nil {
		if ix.list.Delete(k) != nil {
			ix.size -= ix.projectedSize(t, e, it)
		}
	}
}
