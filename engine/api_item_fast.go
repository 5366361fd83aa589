package engine

import (
	"github.com/ttl-archiver/archiver/engine/internal/apimodel"
	"github.com/ttl-archiver/archiver/engine/internal/attr"
)

// The hot requests in the shape SDKs send them, decoded without
// encoding/json's reflection (about a fifth of their handler's CPU). Each
// fast decoder takes only its members, each at most once, as
// attr.RequestReader reads them; on anything else it leaves req zero and
// reports false, and the caller decodes with decode(), which then also
// words any error. The two agree on every body the fast path accepts.

// fastPutItem decodes a PutItem request of TableName, Item, ReturnValues
// and ReturnConsumedCapacity.
func fastPutItem(body []byte, req *putItemRequest) bool {
	r := attr.NewRequestReader(body)
	var seen fastSeen
	for name, ok := r.Next(); ok; name, ok = r.Next() {
		switch string(name) {
		case "TableName":
			seen.once(&r, 0)
			req.TableName = r.String()
		case "Item":
			seen.once(&r, 1)
			req.Item = jitem(r.Item())
		case "ReturnValues":
			seen.once(&r, 2)
			req.ReturnValues = r.String()
		case "ReturnConsumedCapacity":
			seen.once(&r, 3)
			req.ReturnConsumedCapacity = r.String()
		default:
			r.Fail()
		}
	}
	if !r.OK() {
		*req = putItemRequest{}
		return false
	}
	return true
}

// fastGetItem decodes a GetItem request of TableName, Key, ConsistentRead
// and ReturnConsumedCapacity. It leaves req.Key nil and returns the key's
// attributes, appended to keyBuf: see getItemKey. It takes only bodies
// within the API model (those apimodel.Check passes: a TableName and a Key,
// each valid), so that opGetItem checks only the others.
func fastGetItem(body []byte, req *getItemRequest, keyBuf []attr.Attr) (key []attr.Attr, ok bool) {
	r := attr.NewRequestReader(body)
	var seen fastSeen
	for name, ok := r.Next(); ok; name, ok = r.Next() {
		switch string(name) {
		case "TableName":
			seen.once(&r, 0)
			if req.TableName = r.String(); !apimodel.ValidTableRef(req.TableName) {
				r.Fail()
			}
		case "Key":
			seen.once(&r, 1)
			key = r.Attrs(keyBuf)
		case "ConsistentRead":
			seen.once(&r, 2)
			req.ConsistentRead = r.Bool()
		case "ReturnConsumedCapacity":
			seen.once(&r, 3)
			if req.ReturnConsumedCapacity = r.String(); req.ReturnConsumedCapacity == "" || checkRCC(req.ReturnConsumedCapacity) != nil {
				r.Fail()
			}
		default:
			r.Fail()
		}
	}
	if !r.OK() || req.TableName == "" || key == nil {
		*req = getItemRequest{}
		return nil, false
	}
	return key, true
}

// fastSeen records which members a fast decoder has read: a member given
// twice goes to the slow path, where encoding/json's last-one-wins applies.
type fastSeen uint8

func (s *fastSeen) once(r *attr.RequestReader, bit uint) {
	if *s&(1<<bit) != 0 {
		r.Fail()
	}
	*s |= 1 << bit
}

// getItemKey returns the storage key of a GetItem's Key under t's schema
// (t.mu held), appended to dst: the key as fastGetItem read it (kv), or
// else as decoded (key). Attributes that are exactly t's key attributes
// with valid values are encoded without building an Item; anything else
// goes through keyOf, which words the error.
func getItemKey(t *table, key attr.Item, kv []attr.Attr, dst []byte) ([]byte, error) {
	if kv == nil {
		return t.keyOf(key)
	}
	hash, rng := -1, -1
	for i := range kv {
		switch {
		case kv[i].Name == t.key.Hash && hash < 0:
			hash = i
		case kv[i].Name == t.key.Range && t.key.Range != "" && rng < 0:
			rng = i
		}
	}
	n := 1
	if t.key.Range != "" {
		n = 2
	}
	if len(kv) == n && hash >= 0 && validKeyValue(kv[hash].Value, t.key.HashType) &&
		(n == 1 || rng >= 0 && validKeyValue(kv[rng].Value, t.key.RangeType)) {
		dst = appendComponent(dst, kv[hash].Value)
		if n == 2 {
			dst = appendComponent(dst, kv[rng].Value)
		}
		return dst, nil
	}
	it := make(attr.Item, len(kv))
	for _, a := range kv {
		it[a.Name] = a.Value
	}
	return t.keyOf(it)
}

// validKeyValue reports whether v passes checkKeyAttr as a key attribute
// of type typ.
func validKeyValue(v attr.Value, typ attr.Type) bool {
	return v.T == typ && !(v.T == attr.S && v.S == "") && !(v.T == attr.B && len(v.B) == 0)
}
