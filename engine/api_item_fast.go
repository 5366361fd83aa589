package engine

import "github.com/ttl-archiver/archiver/engine/internal/attr"

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
// and ReturnConsumedCapacity. It leaves Key nil and the key's attributes in
// req.fastKey: see storageKey.
func fastGetItem(body []byte, req *getItemRequest) bool {
	r := attr.NewRequestReader(body)
	var seen fastSeen
	for name, ok := r.Next(); ok; name, ok = r.Next() {
		switch string(name) {
		case "TableName":
			seen.once(&r, 0)
			req.TableName = r.String()
		case "Key":
			seen.once(&r, 1)
			req.fastKey = r.Attrs(req.fastKeyBuf[:0])
		case "ConsistentRead":
			seen.once(&r, 2)
			req.ConsistentRead = r.Bool()
		case "ReturnConsumedCapacity":
			seen.once(&r, 3)
			req.ReturnConsumedCapacity = r.String()
		default:
			r.Fail()
		}
	}
	if !r.OK() {
		*req = getItemRequest{}
		return false
	}
	return true
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

// storageKey returns the storage key of the request's Key under t's schema
// (t.mu held). A key that fastGetItem read is encoded without building an
// Item when it is exactly t's key attributes with valid values; anything
// else goes through keyOf, which words the error.
func (req *getItemRequest) storageKey(t *table) ([]byte, error) {
	kv := req.fastKey
	if kv == nil {
		return t.keyOf(attr.Item(req.Key))
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
		key := appendComponent(make([]byte, 0, 32), kv[hash].Value)
		if n == 2 {
			key = appendComponent(key, kv[rng].Value)
		}
		return key, nil
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
