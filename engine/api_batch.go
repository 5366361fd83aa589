package engine

import (
	"context"
	"encoding/json"
	"sort"

	"github.com/ttl-archiver/archiver/engine/internal/attr"
	"github.com/ttl-archiver/archiver/engine/internal/awserr"
)

const (
	maxBatchGet      = 100
	maxBatchWrite    = 25
	maxBatchGetBytes = 16 << 20
)

type batchGetTable struct {
	Keys                 []jitem  `json:"Keys"`
	ProjectionExpression *string  `json:"ProjectionExpression"`
	AttributesToGet      []string `json:"AttributesToGet"`
	ConsistentRead       bool     `json:"ConsistentRead"`
	exprFields
}

func (e *Engine) opBatchGetItem(ctx context.Context, body []byte) (any, error) {
	var req struct {
		RequestItems           map[string]*batchGetTable `json:"RequestItems"`
		ReturnConsumedCapacity string                    `json:"ReturnConsumedCapacity"`
	}
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if err := checkRCC(req.ReturnConsumedCapacity); err != nil {
		return nil, err
	}
	if req.RequestItems == nil {
		return nil, nullErr("requestItems")
	}
	names := make([]string, 0, len(req.RequestItems))
	total := 0
	type plan struct {
		t    *table
		proj *projection
		keys [][]byte
	}
	plans := map[string]*plan{}
	for name, tr := range req.RequestItems {
		if err := checkTableRef(name, "requestItems.member.key"); err != nil {
			return nil, err
		}
		if tr == nil || tr.Keys == nil {
			return nil, nullErr("requestItems." + name + ".member.keys")
		}
		if len(tr.Keys) == 0 {
			return nil, awserr.Validation("1 validation error detected: Value '[]' at 'requestItems.%s.member.keys' failed to satisfy constraint: Member must have length greater than or equal to 1", name)
		}
		total += len(tr.Keys)
		names = append(names, name)
	}
	// apimodel.Check holds each table's Keys to 100; DynamoDB words more than
	// 100 over all tables (each within that) as below.
	if total > maxBatchGet {
		return nil, awserr.Validation("Too many items requested for the BatchGetItem call")
	}
	sort.Strings(names)
	// One table named by name and by ARN is one table: an item asked for
	// under both is a duplicate like any other.
	seenBy := map[string]map[string]bool{}
	for _, name := range names {
		tr := req.RequestItems[name]
		p, err := tr.params(expression{"ProjectionExpression", tr.ProjectionExpression})
		if err != nil {
			return nil, err
		}
		proj, err := parseProjection(tr.ProjectionExpression, tr.AttributesToGet, p)
		if err != nil {
			return nil, err
		}
		if err := p.CheckUnused(); err != nil {
			return nil, err
		}
		t, err := e.itemTable(ctx, name)
		if err != nil {
			return nil, err
		}
		pl := &plan{t: t, proj: proj}
		seen := seenFor(seenBy, t)
		t.mu.RLock()
		for _, k := range tr.Keys {
			sk, err := t.keyOf(attr.Item(k))
			if err != nil {
				t.mu.RUnlock()
				return nil, err
			}
			if seen[string(sk)] {
				t.mu.RUnlock()
				return nil, awserr.Validation("Provided list of item keys contains duplicates")
			}
			seen[string(sk)] = true
			pl.keys = append(pl.keys, sk)
		}
		t.mu.RUnlock()
		plans[name] = pl
	}
	responses := map[string][]json.RawMessage{}
	unprocessed := map[string]*batchGetTable{}
	var caps []*capacity
	bytesOut := 0
	// A throttled call reads the first total/2 keys (in table-name order)
	// and hands the rest back in UnprocessedKeys.
	process := total
	if takeFault(&e.throttleBatchGets) {
		process = total / 2
		if process == 0 {
			return nil, throughputExceeded()
		}
	}
	done := 0
	for _, name := range names {
		pl, tr := plans[name], req.RequestItems[name]
		responses[name] = []json.RawMessage{}
		units := 0.0
		pl.t.mu.RLock()
		for i, sk := range pl.keys {
			if bytesOut >= maxBatchGetBytes || done >= process {
				u := unprocessed[name]
				if u == nil {
					u = &batchGetTable{ProjectionExpression: tr.ProjectionExpression, AttributesToGet: tr.AttributesToGet,
						ConsistentRead: tr.ConsistentRead, exprFields: tr.exprFields}
					unprocessed[name] = u
				}
				u.Keys = append(u.Keys, tr.Keys[i])
				continue
			}
			done++
			ent := pl.t.items.Get(sk)
			if ent == nil {
				units += readUnits(0, tr.ConsistentRead)
				continue
			}
			units += readUnits(int(ent.size), tr.ConsistentRead)
			bytesOut += int(ent.size)
			if pl.proj == nil {
				responses[name] = append(responses[name], ent.raw)
				continue
			}
			it, err := decodeStored(ent)
			if err != nil {
				pl.t.mu.RUnlock()
				return nil, err
			}
			responses[name] = append(responses[name], attr.AppendItemJSON(nil, pl.proj.apply(it)))
		}
		pl.t.mu.RUnlock()
		if c := consumed(req.ReturnConsumedCapacity, name, units, false, nil); c != nil {
			caps = append(caps, c)
		}
	}
	resp := map[string]any{"Responses": responses, "UnprocessedKeys": unprocessed}
	if caps != nil {
		resp["ConsumedCapacity"] = caps
	}
	return resp, nil
}

// MarshalJSON renders unprocessed keys in the request's shape.
func (b *batchGetTable) MarshalJSON() ([]byte, error) {
	m := map[string]any{"Keys": b.Keys}
	if b.ProjectionExpression != nil {
		m["ProjectionExpression"] = *b.ProjectionExpression
	}
	if b.AttributesToGet != nil {
		m["AttributesToGet"] = b.AttributesToGet
	}
	if b.ConsistentRead {
		m["ConsistentRead"] = true
	}
	if b.ExpressionAttributeNames != nil {
		m["ExpressionAttributeNames"] = b.ExpressionAttributeNames
	}
	return json.Marshal(m)
}

// MarshalJSON renders a decoded attribute map.
func (j jitem) MarshalJSON() ([]byte, error) { return attr.AppendItemJSON(nil, attr.Item(j)), nil }

type writeRequest struct {
	PutRequest *struct {
		Item jitem `json:"Item"`
	} `json:"PutRequest,omitempty"`
	DeleteRequest *struct {
		Key jitem `json:"Key"`
	} `json:"DeleteRequest,omitempty"`
}

func (e *Engine) opBatchWriteItem(ctx context.Context, body []byte) (any, error) {
	var req struct {
		RequestItems                map[string][]writeRequest `json:"RequestItems"`
		ReturnConsumedCapacity      string                    `json:"ReturnConsumedCapacity"`
		ReturnItemCollectionMetrics string                    `json:"ReturnItemCollectionMetrics"`
	}
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if err := checkRCC(req.ReturnConsumedCapacity); err != nil {
		return nil, err
	}
	if err := checkRICM(req.ReturnItemCollectionMetrics); err != nil {
		return nil, err
	}
	if req.RequestItems == nil {
		return nil, nullErr("requestItems")
	}
	names := make([]string, 0, len(req.RequestItems))
	total := 0
	for name, reqs := range req.RequestItems {
		if err := checkTableRef(name, "requestItems.member.key"); err != nil {
			return nil, err
		}
		if len(reqs) == 0 {
			return nil, awserr.Validation("1 validation error detected: Value '[]' at 'requestItems.%s.member' failed to satisfy constraint: Member must have length greater than or equal to 1", name)
		}
		total += len(reqs)
		names = append(names, name)
	}
	if total > maxBatchWrite {
		return nil, awserr.Validation("1 validation error detected: Value at 'requestItems' failed to satisfy constraint: Map value must satisfy constraint: [Member must have length less than or equal to 25, Member must have length greater than or equal to 1]")
	}
	sort.Strings(names)
	type op struct {
		key  []byte
		item attr.Item // nil for a delete
		del  attr.Item
		size int
	}
	plans := map[string][]op{}
	tables := map[string]*table{}
	// One table named by name and by ARN is one table: an item written
	// under both is a duplicate like any other.
	seenBy := map[string]map[string]bool{}
	for _, name := range names {
		t, err := e.itemTable(ctx, name)
		if err != nil {
			return nil, err
		}
		tables[name] = t
		seen := seenFor(seenBy, t)
		t.mu.RLock()
		for _, wr := range req.RequestItems[name] {
			var o op
			switch {
			case wr.PutRequest != nil && wr.DeleteRequest != nil, wr.PutRequest == nil && wr.DeleteRequest == nil:
				t.mu.RUnlock()
				return nil, awserr.Validation("One or more parameter values were invalid: each WriteRequest in requestItems.%s must contain exactly one of PutRequest or DeleteRequest", name)
			case wr.PutRequest != nil:
				if wr.PutRequest.Item == nil {
					t.mu.RUnlock()
					return nil, nullErr("requestItems." + name + ".member.putRequest.item")
				}
				it := attr.Item(wr.PutRequest.Item)
				if err := t.checkItem(it); err != nil {
					t.mu.RUnlock()
					return nil, err
				}
				o.size = attr.ItemSize(it)
				if o.size > maxItemSize {
					t.mu.RUnlock()
					return nil, awserr.Validation("Item size has exceeded the maximum allowed size")
				}
				o.item = it
				o.key = t.key.encode(nil, it)
			default:
				if wr.DeleteRequest.Key == nil {
					t.mu.RUnlock()
					return nil, nullErr("requestItems." + name + ".member.deleteRequest.key")
				}
				k, err := t.keyOf(attr.Item(wr.DeleteRequest.Key))
				if err != nil {
					t.mu.RUnlock()
					return nil, err
				}
				o.key, o.del = k, attr.Item(wr.DeleteRequest.Key)
			}
			if seen[string(o.key)] {
				t.mu.RUnlock()
				return nil, awserr.Validation("Provided list of item keys contains duplicates")
			}
			seen[string(o.key)] = true
			plans[name] = append(plans[name], o)
		}
		t.mu.RUnlock()
	}
	// A throttled call processes the first total/2 requests (in table-name
	// order) and hands the rest back in UnprocessedItems.
	process := total
	if takeFault(&e.throttleBatchWrites) {
		process = total / 2
		if process == 0 {
			return nil, throughputExceeded()
		}
	}
	unprocessed := map[string][]writeRequest{}
	var caps []*capacity
	icm := map[string][]*itemCollMetrics{}
	done := 0
	for _, name := range names {
		t := tables[name]
		units := 0.0
		var colls collectionSet
		for i, o := range plans[name] {
			if done >= process {
				unprocessed[name] = append(unprocessed[name], req.RequestItems[name][i])
				continue
			}
			done++
			var err error
			size := o.size
			written := o.item
			if o.item != nil {
				_, size, err = t.put(o.item, nil, "", false)
			} else {
				written = o.del
				_, size, err = t.delete(o.del, nil, "", false)
			}
			if isRefused(err) && done > 1 {
				// The data directory takes no more writes: this request
				// and the rest go back unprocessed, as DynamoDB hands
				// back what it could not write.
				done--
				process = done
				unprocessed[name] = append(unprocessed[name], req.RequestItems[name][i])
				continue
			}
			if err != nil {
				return nil, err
			}
			colls.add(t, written) // only what was written has its collection measured
			units += writeUnits(size)
		}
		if len(unprocessed[name]) == len(plans[name]) {
			continue // nothing of this table was processed
		}
		if c := consumed(req.ReturnConsumedCapacity, name, units, true, nil); c != nil {
			caps = append(caps, c)
		}
		if err := batchCollectionMetrics(icm, req.ReturnItemCollectionMetrics, t, &colls); err != nil {
			return nil, err
		}
	}
	resp := map[string]any{"UnprocessedItems": unprocessed}
	if caps != nil {
		resp["ConsumedCapacity"] = caps
	}
	if len(icm) > 0 {
		resp["ItemCollectionMetrics"] = icm
	}
	return resp, nil
}

// batchCollectionMetrics adds to out, under t's name, the metrics of the
// item collections of t that a BatchWriteItem wrote (colls), when mode is
// SIZE and t has local secondary indexes, as DynamoDB reports them.
func batchCollectionMetrics(out map[string][]*itemCollMetrics, mode string, t *table, colls *collectionSet) error {
	if mode != "SIZE" || len(t.lsis) == 0 || len(colls.keys) == 0 {
		return nil
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	m, err := colls.metricsLocked(t)
	if err != nil {
		return err
	}
	out[t.name] = m
	return nil
}

// throughputExceeded is what DynamoDB answers a batch call none of whose
// requests it could process for lack of throughput: an exception (which
// SDKs retry), not a response with everything unprocessed.
func throughputExceeded() error {
	return awserr.New(awserr.CodeThroughputExceeded, "The level of configured provisioned throughput for the table was exceeded. Consider increasing your provisioning level with the UpdateTable API.")
}

// seenFor returns the set of storage keys a batch has named so far on t,
// whichever way the request named t.
func seenFor(seenBy map[string]map[string]bool, t *table) map[string]bool {
	seen := seenBy[t.name]
	if seen == nil {
		seen = map[string]bool{}
		seenBy[t.name] = seen
	}
	return seen
}
