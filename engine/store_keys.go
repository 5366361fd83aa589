package engine

import (
	"bytes"

	"github.com/ttl-archiver/archiver/engine/internal/attr"
	"github.com/ttl-archiver/archiver/engine/internal/awserr"
)

// Storage keys. A table's items are ordered by (hash key, range key) and an
// index's entries by (index hash, index range, table hash, table range).
// Each component is attr.OrderedKey escaped so that the concatenation sorts
// component by component: 0x00 becomes 0x00 0xFF and every component ends
// with 0x00 0x01, which sorts below any continuation of the component.

func appendComponent(dst []byte, v attr.Value) []byte {
	n := len(dst)
	dst = attr.AppendOrderedKey(dst, v)
	if bytes.IndexByte(dst[n:], 0) >= 0 { // rare: escape in a copy
		dst = appendEscaped(dst[:n], attr.OrderedKey(v))
	}
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

// checkItemKeys validates the key attributes of an item being written
// (PutItem, BatchWriteItem's PutRequest) and the index key attributes it
// carries.
func (t *table) checkItem(it attr.Item) error {
	if err := checkKeyAttr(it, t.key.Hash, t.key.HashType, true); err != nil {
		return err
	}
	if t.key.Range != "" {
		if err := checkKeyAttr(it, t.key.Range, t.key.RangeType, true); err != nil {
			return err
		}
	}
	return t.checkIndexKeys(it)
}

func checkKeyAttr(it attr.Item, name string, typ attr.Type, put bool) error {
	v, ok := it[name]
	if !ok {
		if put {
			return awserr.Validation("One or more parameter values were invalid: Missing the key %s in the item", name)
		}
		return awserr.Validation("The provided key element does not match the schema")
	}
	if v.T != typ {
		if put {
			return awserr.Validation("One or more parameter values were invalid: Type mismatch for key %s expected: %s actual: %s", name, typ, v.T)
		}
		return awserr.Validation("The provided key element does not match the schema")
	}
	if (v.T == attr.S && v.S == "") || (v.T == attr.B && len(v.B) == 0) {
		return awserr.Validation("One or more parameter values are not valid. The AttributeValue for a key attribute cannot contain an empty %s value. Key: %s", map[attr.Type]string{attr.S: "string", attr.B: "binary"}[v.T], name)
	}
	if v.T == attr.S && len(v.S) > 2048 && name == "" {
		return awserr.Validation("One or more parameter values were invalid: Size of hashkey has exceeded the maximum size limit of2048 bytes")
	}
	return nil
}

// checkIndexKeys rejects items whose index key attributes have the wrong
// type or are empty.
func (t *table) checkIndexKeys(it attr.Item) error {
	check := func(ix *index, name string, typ attr.Type) error {
		v, ok := it[name]
		if !ok {
			return nil
		}
		if v.T != typ {
			return awserr.Validation("One or more parameter values were invalid: Type mismatch for Index Key %s Expected: %s Actual: %s IndexName: %s", name, typ, v.T, ix.name)
		}
		if (v.T == attr.S && v.S == "") || (v.T == attr.B && len(v.B) == 0) {
			return awserr.Validation("One or more parameter values are not valid. A value specified for a secondary index key is not supported. The AttributeValue for a key attribute cannot contain an empty %s value. IndexName: %s, IndexKey: %s", map[attr.Type]string{attr.S: "string", attr.B: "binary"}[v.T], ix.name, name)
		}
		return nil
	}
	for _, list := range [][]*index{t.lsis, t.gsis} {
		for _, ix := range list {
			if err := check(ix, ix.key.Hash, ix.key.HashType); err != nil {
				return err
			}
			if ix.key.Range != "" {
				if err := check(ix, ix.key.Range, ix.key.RangeType); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// keyOf validates a Key parameter (exactly the table's key attributes)
// and returns its storage key.
func (t *table) keyOf(key attr.Item) ([]byte, error) {
	if key == nil {
		return nil, nullErr("key")
	}
	n := 1
	if t.key.Range != "" {
		n = 2
	}
	if len(key) != n {
		return nil, awserr.Validation("The provided key element does not match the schema")
	}
	if err := checkKeyAttr(key, t.key.Hash, t.key.HashType, false); err != nil {
		return nil, err
	}
	if t.key.Range != "" {
		if err := checkKeyAttr(key, t.key.Range, t.key.RangeType, false); err != nil {
			return nil, err
		}
	}
	return t.key.encode(nil, key), nil
}
