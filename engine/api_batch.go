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

// batchGetRequest is a BatchGetItem request.
type batchGetRequest struct {
	RequestItems           map[string]*batchGetTable `json:"RequestItems"`
	ReturnConsumedCapacity string                    `json:"ReturnConsumedCapacity"`
}

// batchGetPlan is one table's part of a validated BatchGetItem.
type batchGetPlan struct {
	t    *table
	proj *projection
	keys [][]byte
}

func (e *Engine) opBatchGetItem(ctx context.Context, body []byte) (any, error) {
	var req batchGetRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	names, total, err := req.check()
	if err != nil {
		return nil, err
	}
	plans, err := e.planBatchGet(ctx, &req, names)
	if err != nil {
		return nil, err
	}
	// A throttled call reads the first total/2 keys (in table-name order)
	// and hands the rest back in UnprocessedKeys.
	process := total
	if takeFault(&e.throttleBatchGets) {
		process = total / 2
		if process == 0 {
			return nil, throughputExceeded()
		}
	}
	return req.read(names, plans, process)
}

// check checks what a BatchGetItem says on its own and returns its table
// names, sorted, and how many keys it asks for.
func (req *batchGetRequest) check() (names []string, total int, err error) {
	if err := checkRCC(req.ReturnConsumedCapacity); err != nil {
		return nil, 0, err
	}
	if req.RequestItems == nil {
		return nil, 0, nullErr("requestItems")
	}
	names = make([]string, 0, len(req.RequestItems))
	for name, tr := range req.RequestItems {
		if err := checkTableRef(name, "requestItems.member.key"); err != nil {
			return nil, 0, err
		}
		if tr == nil || tr.Keys == nil {
			return nil, 0, nullErr("requestItems." + name + ".member.keys")
		}
		if len(tr.Keys) == 0 {
			return nil, 0, awserr.Validation("1 validation error detected: Value '[]' at 'requestItems.%s.member.keys' failed to satisfy constraint: Member must have length greater than or equal to 1", name)
		}
		total += len(tr.Keys)
		names = append(names, name)
	}
	// apimodel.Check holds each table's Keys to 100; DynamoDB words more than
	// 100 over all tables (each within that) as below.
	if total > maxBatchGet {
		return nil, 0, awserr.Validation("Too many items requested for the BatchGetItem call")
	}
	sort.Strings(names)
	return names, total, nil
}

// planBatchGet checks each table's part of a BatchGetItem against its
// table, in name order: projection, keys, duplicates. One table named by
// name and by ARN is one table: an item asked for under both is a
// duplicate like any other.
func (e *Engine) planBatchGet(ctx context.Context, req *batchGetRequest, names []string) (map[string]*batchGetPlan, error) {
	plans := map[string]*batchGetPlan{}
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
		pl := &batchGetPlan{t: t, proj: proj}
		if pl.keys, err = t.batchKeys(tr.Keys, seenFor(seenBy, t)); err != nil {
			return nil, err
		}
		plans[name] = pl
	}
	return plans, nil
}

// batchKeys returns the storage keys of a batch's keys on t, refusing a
// key already in seen (and adding each to it).
func (t *table) batchKeys(keys []jitem, seen map[string]bool) ([][]byte, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([][]byte, 0, len(keys))
	for _, k := range keys {
		sk, err := t.keyOf(attr.Item(k))
		if err != nil {
			return nil, err
		}
		if seen[string(sk)] {
			return nil, awserr.Validation("Provided list of item keys contains duplicates")
		}
		seen[string(sk)] = true
		out = append(out, sk)
	}
	return out, nil
}

// batchGetter reads the keys of a planned BatchGetItem, up to process keys
// and the response's byte limit; the rest it hands back unprocessed.
type batchGetter struct {
	req         *batchGetRequest
	process     int
	done        int
	bytesOut    int
	responses   map[string][]json.RawMessage
	unprocessed map[string]*batchGetTable
}

// read reads a planned BatchGetItem's keys, tables in name order, and
// returns its response.
func (req *batchGetRequest) read(names []string, plans map[string]*batchGetPlan, process int) (any, error) {
	g := &batchGetter{req: req, process: process,
		responses: map[string][]json.RawMessage{}, unprocessed: map[string]*batchGetTable{}}
	var caps []*capacity
	for _, name := range names {
		units, err := g.readTable(name, plans[name])
		if err != nil {
			return nil, err
		}
		if c := consumed(req.ReturnConsumedCapacity, name, units, false, nil); c != nil {
			caps = append(caps, c)
		}
	}
	resp := map[string]any{"Responses": g.responses, "UnprocessedKeys": g.unprocessed}
	if caps != nil {
		resp["ConsumedCapacity"] = caps
	}
	return resp, nil
}

// readTable reads one table's keys under its read lock and returns the
// read units they cost.
func (g *batchGetter) readTable(name string, pl *batchGetPlan) (float64, error) {
	tr := g.req.RequestItems[name]
	g.responses[name] = []json.RawMessage{}
	units := 0.0
	pl.t.mu.RLock()
	defer pl.t.mu.RUnlock()
	for i, sk := range pl.keys {
		if g.bytesOut >= maxBatchGetBytes || g.done >= g.process {
			u := g.unprocessed[name]
			if u == nil {
				u = &batchGetTable{ProjectionExpression: tr.ProjectionExpression, AttributesToGet: tr.AttributesToGet,
					ConsistentRead: tr.ConsistentRead, exprFields: tr.exprFields}
				g.unprocessed[name] = u
			}
			u.Keys = append(u.Keys, tr.Keys[i])
			continue
		}
		g.done++
		ent := pl.t.items.Get(sk)
		if ent == nil {
			units += readUnits(0, tr.ConsistentRead)
			continue
		}
		units += readUnits(int(ent.size), tr.ConsistentRead)
		g.bytesOut += int(ent.size)
		if pl.proj == nil {
			g.responses[name] = append(g.responses[name], ent.raw())
			continue
		}
		it, err := decodeStored(ent)
		if err != nil {
			return 0, err
		}
		g.responses[name] = append(g.responses[name], attr.AppendItemJSON(nil, pl.proj.apply(it)))
	}
	return units, nil
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

// batchWriteRequest is a BatchWriteItem request.
type batchWriteRequest struct {
	RequestItems                map[string][]writeRequest `json:"RequestItems"`
	ReturnConsumedCapacity      string                    `json:"ReturnConsumedCapacity"`
	ReturnItemCollectionMetrics string                    `json:"ReturnItemCollectionMetrics"`
}

// batchWrite is one validated request of a BatchWriteItem.
type batchWrite struct {
	key  []byte
	item attr.Item // nil for a delete
	del  attr.Item
	size int
}

func (e *Engine) opBatchWriteItem(ctx context.Context, body []byte) (any, error) {
	var req batchWriteRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	names, total, err := req.check()
	if err != nil {
		return nil, err
	}
	plans, tables, err := e.planBatchWrite(ctx, &req, names)
	if err != nil {
		return nil, err
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
	return req.write(names, plans, tables, process)
}

// check checks what a BatchWriteItem says on its own and returns its table
// names, sorted, and how many requests it holds.
func (req *batchWriteRequest) check() (names []string, total int, err error) {
	if err := checkRCC(req.ReturnConsumedCapacity); err != nil {
		return nil, 0, err
	}
	if err := checkRICM(req.ReturnItemCollectionMetrics); err != nil {
		return nil, 0, err
	}
	if req.RequestItems == nil {
		return nil, 0, nullErr("requestItems")
	}
	names = make([]string, 0, len(req.RequestItems))
	for name, reqs := range req.RequestItems {
		if err := checkTableRef(name, "requestItems.member.key"); err != nil {
			return nil, 0, err
		}
		if len(reqs) == 0 {
			return nil, 0, awserr.Validation("1 validation error detected: Value '[]' at 'requestItems.%s.member' failed to satisfy constraint: Member must have length greater than or equal to 1", name)
		}
		total += len(reqs)
		names = append(names, name)
	}
	if total > maxBatchWrite {
		return nil, 0, awserr.Validation("1 validation error detected: Value at 'requestItems' failed to satisfy constraint: Map value must satisfy constraint: [Member must have length less than or equal to 25, Member must have length greater than or equal to 1]")
	}
	sort.Strings(names)
	return names, total, nil
}

// planBatchWrite checks each table's requests of a BatchWriteItem against
// its table, in name order, and returns them with the tables. One table
// named by name and by ARN is one table: an item written under both is a
// duplicate like any other.
func (e *Engine) planBatchWrite(ctx context.Context, req *batchWriteRequest, names []string) (map[string][]batchWrite, map[string]*table, error) {
	plans := map[string][]batchWrite{}
	tables := map[string]*table{}
	seenBy := map[string]map[string]bool{}
	for _, name := range names {
		t, err := e.itemTable(ctx, name)
		if err != nil {
			return nil, nil, err
		}
		tables[name] = t
		if plans[name], err = t.batchWrites(name, req.RequestItems[name], seenFor(seenBy, t)); err != nil {
			return nil, nil, err
		}
	}
	return plans, tables, nil
}

// batchWrites checks the requests of a batch (named name) on t: each one
// put or delete, the item or key valid, no key already in seen (adding
// each to it).
func (t *table) batchWrites(name string, reqs []writeRequest, seen map[string]bool) ([]batchWrite, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var out []batchWrite
	for _, wr := range reqs {
		var o batchWrite
		switch {
		case wr.PutRequest != nil && wr.DeleteRequest != nil, wr.PutRequest == nil && wr.DeleteRequest == nil:
			return nil, awserr.Validation("One or more parameter values were invalid: each WriteRequest in requestItems.%s must contain exactly one of PutRequest or DeleteRequest", name)
		case wr.PutRequest != nil:
			if wr.PutRequest.Item == nil {
				return nil, nullErr("requestItems." + name + ".member.putRequest.item")
			}
			it := attr.Item(wr.PutRequest.Item)
			if err := t.checkItem(it); err != nil {
				return nil, err
			}
			o.size = attr.ItemSize(it)
			if o.size > maxItemSize {
				return nil, awserr.Validation("Item size has exceeded the maximum allowed size")
			}
			o.item = it
			o.key = t.key.encode(nil, it)
		default:
			if wr.DeleteRequest.Key == nil {
				return nil, nullErr("requestItems." + name + ".member.deleteRequest.key")
			}
			k, err := t.keyOf(attr.Item(wr.DeleteRequest.Key))
			if err != nil {
				return nil, err
			}
			o.key, o.del = k, attr.Item(wr.DeleteRequest.Key)
		}
		if seen[string(o.key)] {
			return nil, awserr.Validation("Provided list of item keys contains duplicates")
		}
		seen[string(o.key)] = true
		out = append(out, o)
	}
	return out, nil
}

// batchWriter applies the requests of a planned BatchWriteItem, up to
// process of them; the rest it hands back unprocessed.
type batchWriter struct {
	req         *batchWriteRequest
	process     int
	done        int
	unprocessed map[string][]writeRequest
}

// write applies a planned BatchWriteItem, tables in name order, and
// returns its response.
func (req *batchWriteRequest) write(names []string, plans map[string][]batchWrite, tables map[string]*table, process int) (any, error) {
	w := &batchWriter{req: req, process: process, unprocessed: map[string][]writeRequest{}}
	var caps []*capacity
	icm := map[string][]*itemCollMetrics{}
	for _, name := range names {
		t := tables[name]
		var colls collectionSet
		units, err := w.writeTable(name, t, plans[name], &colls)
		if err != nil {
			return nil, err
		}
		if len(w.unprocessed[name]) == len(plans[name]) {
			continue // nothing of this table was processed
		}
		if c := consumed(req.ReturnConsumedCapacity, name, units, true, nil); c != nil {
			caps = append(caps, c)
		}
		if err := batchCollectionMetrics(icm, req.ReturnItemCollectionMetrics, t, &colls); err != nil {
			return nil, err
		}
	}
	resp := map[string]any{"UnprocessedItems": w.unprocessed}
	if caps != nil {
		resp["ConsumedCapacity"] = caps
	}
	if len(icm) > 0 {
		resp["ItemCollectionMetrics"] = icm
	}
	return resp, nil
}

// writeTable applies one table's requests, adding the keys it wrote to
// colls, and returns the write units they cost.
func (w *batchWriter) writeTable(name string, t *table, ops []batchWrite, colls *collectionSet) (float64, error) {
	units := 0.0
	for i, o := range ops {
		if w.done >= w.process {
			w.unprocessed[name] = append(w.unprocessed[name], w.req.RequestItems[name][i])
			continue
		}
		w.done++
		var err error
		size := o.size
		written := o.item
		if o.item != nil {
			_, size, err = t.put(o.item, nil, "", false)
		} else {
			written = o.del
			_, size, err = t.delete(o.del, nil, "", false)
		}
		if isRefused(err) && w.done > 1 {
			// The data directory takes no more writes: this request
			// and the rest go back unprocessed, as DynamoDB hands
			// back what it could not write.
			w.done--
			w.process = w.done
			w.unprocessed[name] = append(w.unprocessed[name], w.req.RequestItems[name][i])
			continue
		}
		if err != nil {
			return 0, err
		}
		colls.add(t, written) // only what was written has its collection measured
		units += writeUnits(size)
	}
	return units, nil
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
