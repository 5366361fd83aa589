package engine

import (
	"context"
	"encoding/json"

	"github.com/ttl-archiver/archiver/engine/internal/apimodel"
	"github.com/ttl-archiver/archiver/engine/internal/attr"
	"github.com/ttl-archiver/archiver/engine/internal/awserr"
	"github.com/ttl-archiver/archiver/engine/internal/expr"
)

// maxItemSize is DynamoDB's 400 KB item limit.
const maxItemSize = 400 * 1024

// ---- PutItem / GetItem / DeleteItem / UpdateItem ----

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
}

// projects reports whether the request names attributes to return or
// expression parameters: only then are they parsed and checked.
func (req *getItemRequest) projects() bool {
	return req.ProjectionExpression != nil || req.AttributesToGet != nil ||
		req.ExpressionAttributeNames != nil || req.ExpressionAttributeValues != nil
}

// projection parses and checks the request's projection and expression
// parameters; nil when it has none.
func (req *getItemRequest) projection() (*projection, error) {
	if !req.projects() {
		return nil, nil
	}
	p, err := req.params(expression{"ProjectionExpression", req.ProjectionExpression})
	if err != nil {
		return nil, err
	}
	proj, err := parseProjection(req.ProjectionExpression, req.AttributesToGet, p)
	if err != nil {
		return nil, err
	}
	return proj, p.CheckUnused()
}

// itemAnswer is a GetItem answer of the item alone, {"Item":...}, which
// writeResponse writes from the entry's stored JSON without copying it
// into an answer of its own (entries are immutable). A single pointer, it
// goes into an interface without an allocation.
type itemAnswer struct{ ent *entry }

// opGetItem reads one item. The request, its key and the key's encoding
// live on the stack (fastGetItem, getItemKey): a read allocates little
// more than its answer.
func (e *Engine) opGetItem(ctx context.Context, body []byte) (any, error) {
	var req getItemRequest
	var keyAttrs [2]attr.Attr
	fastKey, ok := fastGetItem(body, &req, keyAttrs[:0])
	if !ok {
		if err := apimodel.Check(false, "GetItem", body); err != nil { // see checkModel
			return nil, err
		}
		var err error
		if req, err = decodeAs[getItemRequest](body); err != nil {
			return nil, err
		}
	}
	if err := checkTableRef(req.TableName, "tableName"); err != nil {
		return nil, err
	}
	if err := checkRCC(req.ReturnConsumedCapacity); err != nil {
		return nil, err
	}
	if req.Key == nil && fastKey == nil {
		return nil, nullErr("key")
	}
	proj, err := req.projection()
	if err != nil {
		return nil, err
	}
	t, err := e.itemTable(ctx, req.TableName)
	if err != nil {
		return nil, err
	}
	var keyBuf [64]byte
	t.mu.RLock()
	key, err := getItemKey(t, attr.Item(req.Key), fastKey, keyBuf[:0])
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
	if ent != nil && proj == nil && cc == nil {
		return itemAnswer{ent}, nil
	}
	// Entries are immutable: their JSON can be sent as is.
	out := make([]byte, 0, 64+size+len(t.name))
	out = append(out, '{')
	if ent != nil {
		out = append(out, `"Item":`...)
		if proj == nil {
			out = append(out, ent.raw()...)
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

// updateItemRequest is an UpdateItem request.
type updateItemRequest struct {
	writeCommon
	Key              jitem   `json:"Key"`
	UpdateExpression *string `json:"UpdateExpression"`
}

func (e *Engine) opUpdateItem(ctx context.Context, body []byte) (any, error) {
	var req updateItemRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	upd, cond, err := req.check()
	if err != nil {
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
	resp.Attributes = req.returned(upd, res)
	if resp.ItemCollectionMetrics, err = t.collectionMetrics(req.ReturnItemCollectionMetrics, attr.Item(req.Key)); err != nil {
		return nil, err
	}
	return resp, nil
}

// check checks an UpdateItem request on its own and returns its update
// (nil when it has none) and condition, expression or legacy.
func (req *updateItemRequest) check() (*expr.Update, *expr.Condition, error) {
	if err := req.validate("ALL_OLD", "UPDATED_OLD", "ALL_NEW", "UPDATED_NEW"); err != nil {
		return nil, nil, err
	}
	if req.Key == nil {
		return nil, nil, nullErr("key")
	}
	p, err := req.params(expression{"UpdateExpression", req.UpdateExpression}, expression{"ConditionExpression", req.ConditionExpression})
	if err != nil {
		return nil, nil, err
	}
	if err := checkMix(map[string]bool{"Expected": present(req.Expected), "AttributeUpdates": present(req.AttributeUpdates)},
		map[string]bool{"ConditionExpression": req.ConditionExpression != nil, "UpdateExpression": req.UpdateExpression != nil}); err != nil {
		return nil, nil, err
	}
	var upd *expr.Update
	if present(req.AttributeUpdates) {
		if req.UpdateExpression != nil {
			return nil, nil, mixed("AttributeUpdates", "UpdateExpression")
		}
		if upd, err = expr.LegacyAttributeUpdates(req.AttributeUpdates); err != nil {
			return nil, nil, err
		}
	} else if req.UpdateExpression != nil {
		if *req.UpdateExpression == "" {
			return nil, nil, awserr.Validation("Invalid UpdateExpression: The expression can not be empty;")
		}
		if upd, err = expr.ParseUpdate(*req.UpdateExpression, p); err != nil {
			return nil, nil, err
		}
	}
	cond, err := req.condition(p)
	if err != nil {
		return nil, nil, err
	}
	if err := p.CheckUnused(); err != nil {
		return nil, nil, err
	}
	return upd, cond, nil
}

// returned is what an UpdateItem returns by its ReturnValues: the whole
// old or new item, or (UPDATED_*) only the paths the update wrote or
// removed: SET a.b = :v returns {"a":{"M":{"b":...}}}, not all of a.
func (req *updateItemRequest) returned(upd *expr.Update, res updateResult) attr.Item {
	switch req.ReturnValues {
	case "ALL_OLD":
		return res.old
	case "ALL_NEW":
		return res.new
	case "UPDATED_OLD", "UPDATED_NEW":
		src := res.old
		if req.ReturnValues == "UPDATED_NEW" {
			src = res.new
		}
		if upd != nil && src != nil {
			if out := upd.UpdatedPaths().Apply(src); len(out) > 0 {
				return out
			}
		}
	}
	return nil
}
