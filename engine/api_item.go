package engine

import (
	"context"
	"encoding/json"
	"errors"
	"hash/fnv"
	"sort"
	"strconv"
	"strings"

	"github.com/ttl-archiver/archiver/engine/internal/attr"
	"github.com/ttl-archiver/archiver/engine/internal/awserr"
	"github.com/ttl-archiver/archiver/engine/internal/expr"
	"github.com/ttl-archiver/archiver/engine/internal/stream"
)

// maxItemSize is DynamoDB's 400 KB item limit.
const maxItemSize = 400 * 1024

// jitem decodes an attribute map with attr's strict codec.
type jitem attr.Item

func (j *jitem) UnmarshalJSON(b []byte) error {
	it, err := attr.UnmarshalItemJSON(b)
	if err != nil {
		return err
	}
	*j = jitem(it)
	return nil
}

// jvalues decodes ExpressionAttributeValues; a bad value's error names its
// key as DynamoDB does: "ExpressionAttributeValues contains invalid value:
// <problem> for key :v".
type jvalues attr.Item

func (j *jvalues) UnmarshalJSON(b []byte) error {
	it, err := attr.UnmarshalItemJSON(b)
	if err == nil {
		*j = jvalues(it)
		return nil
	}
	// Slow path, errors only: find the offending key.
	var ae *awserr.Error
	var raw map[string]json.RawMessage
	if !errors.As(err, &ae) || json.Unmarshal(b, &raw) != nil {
		return err
	}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		var v attr.Value
		var ve *awserr.Error
		if e := v.UnmarshalJSON(raw[k]); errors.As(e, &ve) {
			return awserr.Validation("ExpressionAttributeValues contains invalid value: %s for key %s", ve.Message, k)
		}
	}
	return err
}

// exprFields are the expression parameters shared by most operations.
type exprFields struct {
	ExpressionAttributeNames  map[string]string `json:"ExpressionAttributeNames"`
	ExpressionAttributeValues jvalues           `json:"ExpressionAttributeValues"`
}

// expression is one expression parameter of a request: its name
// ("ConditionExpression") and its value, nil when absent.
type expression struct {
	name string
	s    *string
}

// params validates the expression parameters of a request whose
// expressions are exprs, in the order DynamoDB names them, and returns
// them for parsing.
func (f *exprFields) params(exprs ...expression) (*expr.Params, error) {
	if f.ExpressionAttributeNames != nil && len(f.ExpressionAttributeNames) == 0 {
		return nil, awserr.Validation("ExpressionAttributeNames must not be empty")
	}
	if f.ExpressionAttributeValues != nil && len(f.ExpressionAttributeValues) == 0 {
		return nil, awserr.Validation("ExpressionAttributeValues must not be empty")
	}
	if err := f.withoutExpressions(exprs); err != nil {
		return nil, err
	}
	for k := range f.ExpressionAttributeNames {
		if !strings.HasPrefix(k, "#") {
			return nil, awserr.Validation("ExpressionAttributeNames contains invalid key: Syntax error; key: \"%s\"", k)
		}
	}
	for k := range f.ExpressionAttributeValues {
		if !strings.HasPrefix(k, ":") {
			return nil, awserr.Validation("ExpressionAttributeValues contains invalid key: Syntax error; key: \"%s\"", k)
		}
	}
	return expr.NewParams(f.ExpressionAttributeNames, attr.Item(f.ExpressionAttributeValues)), nil
}

// withoutExpressions refuses names given to a request using none of its
// expressions, and values given to one using none that takes values (a
// ProjectionExpression takes none): "ExpressionAttributeValues can only be
// specified when using expressions: UpdateExpression and
// ConditionExpression are null", naming the ones it could have used.
func (f *exprFields) withoutExpressions(exprs []expression) error {
	if f.ExpressionAttributeNames == nil && f.ExpressionAttributeValues == nil {
		return nil
	}
	var used, usedValues bool
	var null []string
	for _, x := range exprs {
		used = used || x.s != nil
		if x.name != "ProjectionExpression" {
			usedValues = usedValues || x.s != nil
			null = append(null, x.name)
		}
	}
	if !used && f.ExpressionAttributeNames != nil {
		return awserr.Validation("ExpressionAttributeNames can only be specified when using expressions")
	}
	if usedValues || f.ExpressionAttributeValues == nil {
		return nil
	}
	if len(null) == 0 {
		return awserr.Validation("ExpressionAttributeValues can only be specified when using expressions")
	}
	verb := " is null"
	if len(null) > 1 {
		verb = " are null"
	}
	return awserr.Validation("ExpressionAttributeValues can only be specified when using expressions: %s%s", strings.Join(null, " and "), verb)
}

// legacy holds the pre-expression parameters (Expected, AttributeUpdates,
// KeyConditions, QueryFilter, ScanFilter with ConditionalOperator), which
// expr translates into the structures the expressions build.
type legacy struct {
	Expected            json.RawMessage `json:"Expected"`
	ConditionalOperator *string         `json:"ConditionalOperator"`
	AttributeUpdates    json.RawMessage `json:"AttributeUpdates"`
	KeyConditions       json.RawMessage `json:"KeyConditions"`
	QueryFilter         json.RawMessage `json:"QueryFilter"`
	ScanFilter          json.RawMessage `json:"ScanFilter"`
}

func present(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }

// checkMix rejects a request that uses legacy and expression parameters
// together; each map says which parameters of either kind are present.
func checkMix(legacyParams, exprParams map[string]bool) error {
	var l, x []string
	for n, ok := range legacyParams {
		if ok {
			l = append(l, n)
		}
	}
	for n, ok := range exprParams {
		if ok {
			x = append(x, n)
		}
	}
	if len(l) == 0 || len(x) == 0 {
		return nil
	}
	sort.Strings(l)
	sort.Strings(x)
	return mixed(strings.Join(l, ", "), strings.Join(x, ", "))
}

// mixed is DynamoDB's error for a request that uses a legacy parameter and
// its expression counterpart together.
func mixed(legacyName, exprName string) error {
	return awserr.Validation("Can not use both expression and non-expression parameters in the same request: Non-expression parameters: {%s} Expression parameters: {%s}", legacyName, exprName)
}

// condOp is the ConditionalOperator ("" when absent); apimodel.Check has
// already held it to AND or OR.
func (l *legacy) condOp() string {
	if l.ConditionalOperator == nil {
		return ""
	}
	return *l.ConditionalOperator
}

// condition returns the write's condition from ConditionExpression or the
// legacy Expected parameter.
// conditionOnly parses the ConditionExpression of a write that takes no
// other expression (PutItem, DeleteItem) and checks that every expression
// attribute name and value was used.
func (w *writeCommon) conditionOnly() (*expr.Condition, error) {
	p, err := w.params(expression{"ConditionExpression", w.ConditionExpression})
	if err != nil {
		return nil, err
	}
	cond, err := w.condition(p)
	if err != nil {
		return nil, err
	}
	return cond, p.CheckUnused()
}

func (w *writeCommon) condition(p *expr.Params) (*expr.Condition, error) {
	if present(w.Expected) {
		if w.ConditionExpression != nil {
			return nil, mixed("Expected", "ConditionExpression")
		}
		return expr.LegacyExpected(w.Expected, w.condOp())
	}
	if w.ConditionalOperator != nil {
		return nil, awserr.Validation("ConditionalOperator can only be used when Expected or QueryFilter or ScanFilter are present")
	}
	return parseCond(w.ConditionExpression, p, "ConditionExpression")
}

func decodeStored(e *entry) (attr.Item, error) {
	return attr.UnmarshalItemJSON(e.raw)
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

// ---- index maintenance (t.mu held for writing) ----

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
	return append(k, e.key...)
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
		ix.list.Put(k, e)
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
		c := t.recordOf(old, oldItem, ne, newItem, service)
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
		t.items.Put(ne.key, ne)
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
	c := stream.EncodedChange{Service: service}
	var keyItem attr.Item
	var keySrc []byte
	switch {
	case old == nil:
		c.EventName, keyItem, keySrc = "INSERT", newItem, ne.raw
	case ne != nil:
		c.EventName, keyItem, keySrc = "MODIFY", newItem, ne.raw
	default:
		c.EventName, keyItem, keySrc = "REMOVE", oldItem, old.raw
	}
	view := t.stream.ViewType()
	c.Keys = keysJSON(make([]byte, 0, 64), keySrc, t.ktoks)
	c.Size = attr.SizeOf(t.key.Hash, keyItem[t.key.Hash])
	if t.key.Range != "" {
		c.Size += attr.SizeOf(t.key.Range, keyItem[t.key.Range])
	}
	if old != nil && (view == stream.OldImage || view == stream.NewAndOldImages) {
		c.Old = old.raw
		c.Size += int(old.size)
	}
	if ne != nil && (view == stream.NewImage || view == stream.NewAndOldImages) {
		c.New = ne.raw
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
	return string(old.raw) == string(ne.raw) || oldItem != nil && attr.EqualItems(oldItem, newItem)
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
	buf := make([]byte, len(key)+len(js))
	copy(buf, key)
	copy(buf[len(key):], js)
	if cap(js) <= 64<<10 {
		*sp = js
		t.scratch.Put(sp)
	}
	e := &entry{key: buf[:len(key):len(key)], raw: buf[len(key):], size: int32(size), exp: noExpiry}
	if t.ttlAttr != "" {
		e.exp = expiryOf(it, t.ttlAttr)
	}
	return e
}

// ---- capacity ----

type capacity struct {
	TableName              string              `json:"TableName"`
	CapacityUnits          float64             `json:"CapacityUnits"`
	ReadCapacityUnits      float64             `json:"ReadCapacityUnits,omitempty"`
	WriteCapacityUnits     float64             `json:"WriteCapacityUnits,omitempty"`
	Table                  *capUnits           `json:"Table,omitempty"`
	GlobalSecondaryIndexes map[string]capUnits `json:"GlobalSecondaryIndexes,omitempty"`
	LocalSecondaryIndexes  map[string]capUnits `json:"LocalSecondaryIndexes,omitempty"`
}

type capUnits struct {
	CapacityUnits      float64 `json:"CapacityUnits"`
	ReadCapacityUnits  float64 `json:"ReadCapacityUnits,omitempty"`
	WriteCapacityUnits float64 `json:"WriteCapacityUnits,omitempty"`
}

func checkRCC(s string) error {
	switch s {
	case "", "NONE", "TOTAL", "INDEXES":
		return nil
	}
	return awserr.Validation("1 validation error detected: Value '%s' at 'returnConsumedCapacity' failed to satisfy constraint: Member must satisfy enum value set: [INDEXES, TOTAL, NONE]", s)
}

func writeUnits(size int) float64 {
	u := (size + 1023) / 1024
	if u < 1 {
		u = 1
	}
	return float64(u)
}

func readUnits(size int, consistent bool) float64 {
	u := float64((size + 4095) / 4096)
	if u < 1 {
		u = 1
	}
	if !consistent {
		u /= 2
	}
	return u
}

// consumed builds a ConsumedCapacity for mode (TOTAL/INDEXES) or nil.
func consumed(mode, tableName string, units float64, write bool, gsiUnits map[string]float64) *capacity {
	if mode != "TOTAL" && mode != "INDEXES" {
		return nil
	}
	c := &capacity{TableName: tableName, CapacityUnits: units}
	total := units
	for _, u := range gsiUnits {
		total += u
	}
	c.CapacityUnits = total
	if write {
		c.WriteCapacityUnits = total
	} else {
		c.ReadCapacityUnits = total
	}
	if mode == "INDEXES" {
		tu := capUnits{CapacityUnits: units}
		if write {
			tu.WriteCapacityUnits = units
		} else {
			tu.ReadCapacityUnits = units
		}
		c.Table = &tu
		if len(gsiUnits) > 0 {
			c.GlobalSecondaryIndexes = map[string]capUnits{}
			for n, u := range gsiUnits {
				cu := capUnits{CapacityUnits: u}
				if write {
					cu.WriteCapacityUnits = u
				} else {
					cu.ReadCapacityUnits = u
				}
				c.GlobalSecondaryIndexes[n] = cu
			}
		}
	}
	return c
}

// gsiWriteUnits charges one write per GSI whose key attributes are present
// in the old or new item.
func (t *table) gsiWriteUnits(oldItem, newItem attr.Item, size int) map[string]float64 {
	if len(t.gsis) == 0 {
		return nil
	}
	out := map[string]float64{}
	for _, ix := range t.gsis {
		n := 0.0
		for _, it := range []attr.Item{oldItem, newItem} {
			if it == nil {
				continue
			}
			if _, ok := it[ix.key.Hash]; ok {
				n += writeUnits(size)
			}
		}
		if n > 0 {
			out[ix.name] = n
		}
	}
	return out
}

// ---- PutItem / GetItem / DeleteItem / UpdateItem ----

type writeCommon struct {
	TableName                           string  `json:"TableName"`
	ConditionExpression                 *string `json:"ConditionExpression"`
	ReturnValues                        string  `json:"ReturnValues"`
	ReturnConsumedCapacity              string  `json:"ReturnConsumedCapacity"`
	ReturnItemCollectionMetrics         string  `json:"ReturnItemCollectionMetrics"`
	ReturnValuesOnConditionCheckFailure string  `json:"ReturnValuesOnConditionCheckFailure"`
	exprFields
	legacy
}

func (w *writeCommon) validate(allowed ...string) error {
	if err := checkTableRef(w.TableName, "tableName"); err != nil {
		return err
	}
	if err := checkRCC(w.ReturnConsumedCapacity); err != nil {
		return err
	}
	if err := checkRICM(w.ReturnItemCollectionMetrics); err != nil {
		return err
	}
	switch w.ReturnValuesOnConditionCheckFailure {
	case "", "NONE", "ALL_OLD":
	default:
		return awserr.Validation("1 validation error detected: Value '%s' at 'returnValuesOnConditionCheckFailure' failed to satisfy constraint: Member must satisfy enum value set: [ALL_OLD, NONE]", w.ReturnValuesOnConditionCheckFailure)
	}
	switch w.ReturnValues {
	case "", "NONE":
		return nil
	case "ALL_OLD", "UPDATED_OLD", "ALL_NEW", "UPDATED_NEW":
		for _, a := range allowed {
			if a == w.ReturnValues {
				return nil
			}
		}
		return awserr.Validation("Return values set to invalid value")
	default:
		return awserr.Validation("1 validation error detected: Value '%s' at 'returnValues' failed to satisfy constraint: Member must satisfy enum value set: [ALL_NEW, UPDATED_OLD, ALL_OLD, NONE, UPDATED_NEW]", w.ReturnValues)
	}
}

// condition parses ConditionExpression (nil when absent).
func parseCond(s *string, p *expr.Params, what string) (*expr.Condition, error) {
	if s == nil {
		return nil, nil
	}
	if *s == "" {
		return nil, awserr.Validation("Invalid %s: The expression can not be empty;", what)
	}
	return expr.ParseCondition(*s, p)
}

func checkCond(c *expr.Condition, old attr.Item, rvccf string) error {
	if c == nil {
		return nil
	}
	subject := old
	if subject == nil {
		subject = attr.Item{}
	}
	ok, err := c.Eval(subject)
	if err != nil {
		return err
	}
	if !ok {
		cf := &condFailed{}
		if rvccf == "ALL_OLD" && old != nil {
			cf.item = old
		}
		return cf
	}
	return nil
}

type putItemRequest struct {
	writeCommon
	Item jitem `json:"Item"`
}

type writeResponse struct {
	Attributes            attr.Item
	ConsumedCapacity      *capacity
	ItemCollectionMetrics *itemCollMetrics // ReturnItemCollectionMetrics SIZE on a table with LSIs
}

// MarshalJSON renders the response with attr's encoder.
func (r writeResponse) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	if len(r.Attributes) > 0 {
		b = append(b, `"Attributes":`...)
		b = attr.AppendItemJSON(b, r.Attributes)
	}
	if r.ConsumedCapacity != nil {
		c, err := json.Marshal(r.ConsumedCapacity)
		if err != nil {
			return nil, err
		}
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = append(b, `"ConsumedCapacity":`...)
		b = append(b, c...)
	}
	if r.ItemCollectionMetrics != nil {
		m, err := json.Marshal(r.ItemCollectionMetrics)
		if err != nil {
			return nil, err
		}
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = append(b, `"ItemCollectionMetrics":`...)
		b = append(b, m...)
	}
	return append(b, '}'), nil
}

func (e *Engine) opPutItem(ctx context.Context, body []byte) (any, error) {
	var req putItemRequest
	if !fastPutItem(body, &req) {
		if err := decode(body, &req); err != nil {
			return nil, err
		}
	}
	if err := req.validate("ALL_OLD"); err != nil {
		return nil, err
	}
	if req.Item == nil {
		return nil, nullErr("item")
	}
	cond, err := req.conditionOnly()
	if err != nil {
		return nil, err
	}
	t, err := e.itemTable(ctx, req.TableName)
	if err != nil {
		return nil, err
	}
	item := attr.Item(req.Item)
	old, size, err := t.put(item, cond, req.ReturnValuesOnConditionCheckFailure, req.ReturnValues == "ALL_OLD")
	if err != nil {
		return nil, err
	}
	resp := writeResponse{ConsumedCapacity: consumed(req.ReturnConsumedCapacity, t.name, writeUnits(size), true, t.gsiWriteUnitsSafe(req.ReturnConsumedCapacity, old, item, size))}
	if req.ReturnValues == "ALL_OLD" && old != nil {
		resp.Attributes = old
	}
	if resp.ItemCollectionMetrics, err = t.collectionMetrics(req.ReturnItemCollectionMetrics, item); err != nil {
		return nil, err
	}
	return resp, nil
}

func (t *table) gsiWriteUnitsSafe(mode string, oldItem, newItem attr.Item, size int) map[string]float64 {
	if mode != "INDEXES" && mode != "TOTAL" {
		return nil
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.gsiWriteUnits(oldItem, newItem, size)
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

type keyRequest struct {
	TableName string `json:"TableName"`
	Key       jitem  `json:"Key"`
}

type getItemRequest struct {
	keyRequest
	ConsistentRead         bool     `json:"ConsistentRead"`
	ProjectionExpression   *string  `json:"ProjectionExpression"`
	AttributesToGet        []string `json:"AttributesToGet"`
	ReturnConsumedCapacity string   `json:"ReturnConsumedCapacity"`
	exprFields
	fastKey    []attr.Attr  // Key as fastGetItem read it (Key is then nil)
	fastKeyBuf [2]attr.Attr // fastKey's storage
}

func (e *Engine) opGetItem(ctx context.Context, body []byte) (any, error) {
	var req getItemRequest
	if !fastGetItem(body, &req) {
		if err := decode(body, &req); err != nil {
			return nil, err
		}
	}
	if err := checkTableRef(req.TableName, "tableName"); err != nil {
		return nil, err
	}
	if err := checkRCC(req.ReturnConsumedCapacity); err != nil {
		return nil, err
	}
	if req.Key == nil && req.fastKey == nil {
		return nil, nullErr("key")
	}
	p, err := req.params(expression{"ProjectionExpression", req.ProjectionExpression})
	if err != nil {
		return nil, err
	}
	proj, err := parseProjection(req.ProjectionExpression, req.AttributesToGet, p)
	if err != nil {
		return nil, err
	}
	if err := p.CheckUnused(); err != nil {
		return nil, err
	}
	t, err := e.itemTable(ctx, req.TableName)
	if err != nil {
		return nil, err
	}
	t.mu.RLock()
	key, err := req.storageKey(t)
	if err != nil {
		t.mu.RUnlock()
		return nil, err
	}
	ent := t.items.Get(key)
	t.mu.RUnlock()
	size := 0
	if ent != nil {
		size = int(ent.size)
	}
	cc := consumed(req.ReturnConsumedCapacity, t.name, readUnits(size, req.ConsistentRead), false, nil)
	// Entries are immutable: their JSON can be sent as is.
	out := make([]byte, 0, 64+size+len(t.name))
	out = append(out, '{')
	if ent != nil {
		out = append(out, `"Item":`...)
		if proj == nil {
			out = append(out, ent.raw...)
		} else {
			it, err := decodeStored(ent)
			if err != nil {
				return nil, err
			}
			out = attr.AppendItemJSON(out, proj.apply(it))
		}
	}
	if cc != nil {
		if ent != nil {
			out = append(out, ',')
		}
		b, _ := json.Marshal(cc)
		out = append(out, `"ConsumedCapacity":`...)
		out = append(out, b...)
	}
	out = append(out, '}')
	return rawResponse(out), nil
}

// projection is a ProjectionExpression or the legacy AttributesToGet.
type projection struct {
	p     *expr.Projection
	names []string
}

func parseProjection(s *string, attrsToGet []string, p *expr.Params) (*projection, error) {
	if s != nil && attrsToGet != nil {
		return nil, awserr.Validation("Can not use both expression and non-expression parameters in the same request: Non-expression parameters: {AttributesToGet} Expression parameters: {ProjectionExpression}")
	}
	if attrsToGet != nil {
		if len(attrsToGet) == 0 {
			return nil, awserr.Validation("1 validation error detected: Value '[]' at 'attributesToGet' failed to satisfy constraint: Member must have length greater than or equal to 1")
		}
		seen := map[string]bool{}
		for _, n := range attrsToGet {
			if seen[n] {
				return nil, awserr.Validation("One or more parameter values were invalid: Duplicate value in attribute name: %s", n)
			}
			seen[n] = true
		}
		return &projection{names: attrsToGet}, nil
	}
	if s == nil {
		return nil, nil
	}
	if *s == "" {
		return nil, awserr.Validation("Invalid ProjectionExpression: The expression can not be empty;")
	}
	pe, err := expr.ParseProjection(*s, p)
	if err != nil {
		return nil, err
	}
	return &projection{p: pe}, nil
}

func (pr *projection) apply(it attr.Item) attr.Item {
	if pr.p != nil {
		return pr.p.Apply(it)
	}
	out := attr.Item{}
	for _, n := range pr.names {
		if v, ok := it[n]; ok {
			out[n] = v
		}
	}
	return out
}

func (pr *projection) topLevel() []string {
	if pr.p != nil {
		return pr.p.TopLevel()
	}
	return pr.names
}

func (e *Engine) opDeleteItem(ctx context.Context, body []byte) (any, error) {
	var req struct {
		writeCommon
		Key jitem `json:"Key"`
	}
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if err := req.validate("ALL_OLD"); err != nil {
		return nil, err
	}
	if req.Key == nil {
		return nil, nullErr("key")
	}
	cond, err := req.conditionOnly()
	if err != nil {
		return nil, err
	}
	t, err := e.itemTable(ctx, req.TableName)
	if err != nil {
		return nil, err
	}
	old, size, err := t.delete(attr.Item(req.Key), cond, req.ReturnValuesOnConditionCheckFailure, req.ReturnValues == "ALL_OLD")
	if err != nil {
		return nil, err
	}
	resp := writeResponse{ConsumedCapacity: consumed(req.ReturnConsumedCapacity, t.name, writeUnits(size), true, t.gsiWriteUnitsSafe(req.ReturnConsumedCapacity, old, nil, size))}
	if req.ReturnValues == "ALL_OLD" && old != nil {
		resp.Attributes = old
	}
	if resp.ItemCollectionMetrics, err = t.collectionMetrics(req.ReturnItemCollectionMetrics, attr.Item(req.Key)); err != nil {
		return nil, err
	}
	return resp, nil
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

func (e *Engine) opUpdateItem(ctx context.Context, body []byte) (any, error) {
	var req struct {
		writeCommon
		Key              jitem   `json:"Key"`
		UpdateExpression *string `json:"UpdateExpression"`
	}
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if err := req.validate("ALL_OLD", "UPDATED_OLD", "ALL_NEW", "UPDATED_NEW"); err != nil {
		return nil, err
	}
	if req.Key == nil {
		return nil, nullErr("key")
	}
	p, err := req.params(expression{"UpdateExpression", req.UpdateExpression}, expression{"ConditionExpression", req.ConditionExpression})
	if err != nil {
		return nil, err
	}
	if err := checkMix(map[string]bool{"Expected": present(req.Expected), "AttributeUpdates": present(req.AttributeUpdates)},
		map[string]bool{"ConditionExpression": req.ConditionExpression != nil, "UpdateExpression": req.UpdateExpression != nil}); err != nil {
		return nil, err
	}
	var upd *expr.Update
	if present(req.AttributeUpdates) {
		if req.UpdateExpression != nil {
			return nil, mixed("AttributeUpdates", "UpdateExpression")
		}
		if upd, err = expr.LegacyAttributeUpdates(req.AttributeUpdates); err != nil {
			return nil, err
		}
	} else if req.UpdateExpression != nil {
		if *req.UpdateExpression == "" {
			return nil, awserr.Validation("Invalid UpdateExpression: The expression can not be empty;")
		}
		if upd, err = expr.ParseUpdate(*req.UpdateExpression, p); err != nil {
			return nil, err
		}
	}
	cond, err := req.condition(p)
	if err != nil {
		return nil, err
	}
	if err := p.CheckUnused(); err != nil {
		return nil, err
	}
	t, err := e.itemTable(ctx, req.TableName)
	if err != nil {
		return nil, err
	}
	res, err := t.update(attr.Item(req.Key), upd, cond, req.ReturnValuesOnConditionCheckFailure)
	if err != nil {
		return nil, err
	}
	resp := writeResponse{ConsumedCapacity: consumed(req.ReturnConsumedCapacity, t.name, writeUnits(res.size), true, t.gsiWriteUnitsSafe(req.ReturnConsumedCapacity, res.old, res.new, res.size))}
	switch req.ReturnValues {
	case "ALL_OLD":
		resp.Attributes = res.old
	case "ALL_NEW":
		resp.Attributes = res.new
	case "UPDATED_OLD", "UPDATED_NEW":
		src := res.old
		if req.ReturnValues == "UPDATED_NEW" {
			src = res.new
		}
		// Only the paths the update wrote or removed: SET a.b = :v
		// returns {"a":{"M":{"b":...}}}, not all of a.
		if upd != nil && src != nil {
			if out := upd.UpdatedPaths().Apply(src); len(out) > 0 {
				resp.Attributes = out
			}
		}
	}
	if resp.ItemCollectionMetrics, err = t.collectionMetrics(req.ReturnItemCollectionMetrics, attr.Item(req.Key)); err != nil {
		return nil, err
	}
	return resp, nil
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
