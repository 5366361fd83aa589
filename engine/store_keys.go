package engine

import (
	"github.com/ttl-archiver/archiver/engine/internal/attr"
)

// Storage keys. A table's items are ordered by (hash key, range key) and an
// index's entries by (index hash, index range, table hash, table range).
// Each component is attr.OrderedKey escaped so that the concatenation sorts
// component by component: 0x00 becomes 0x00 0xFF and every component ends
// with 0x00 0x01, which sorts below any continuation of the component.

func appendComponent(dst []byte, v attr.Value) []byte {
	dst = appendEscaped(dst, attr.OrderedKey(v))
	return append(dst, 0x00, 0x01)
}

func appendEscaped(dst, b []byte) []byte {
	for _, c := range b {
		if c == 0 {
			dst = append(dst, 0x00, 0xFF)
		} else {
			dst = append(dst, c)
		}
	}
	return dst
}

// prefixEnd returns the smallest key greater than every key starting with
// p, or nil when there is none.
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xFF {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// keyDef names a hash key and an optional range key with their types.
type keyDef struct {
	Hash, Range         string
	HashType, RangeType attr.Type
}

// tableKey returns the storage key of an item under the table's key schema.
// The item must hold valid key attributes.
func (k keyDef) encode(dst []byte, it attr.Item) []byte {
	dst = appendComponent(dst, it[k.Hash])
	if k.Range != "" {
		dst = appendComponent(dst, it[k.Range])
	}
	return dst
}

// project returns only the key attributes of it.
func (k keyDef) project(it attr.Item) attr.Item {
	out := attr.Item{k.Hash: it[k.Hash]}
	if k.Range != "" {
		out[k.Range] = it[k.Range]
	}
	return out
}

// has reports whether name is one of the key attributes.
func (k keyDef) has(name string) bool { return name == k.Hash || (k.Range != "" && name == k.Range) }
