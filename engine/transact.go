package engine

import (
	"context"
	"encoding/json"
	"errors"
	"sort"

	"github.com/ttl-archiver/archiver/engine/internal/attr"
	"github.com/ttl-archiver/archiver/engine/internal/awserr"
	"github.com/ttl-archiver/archiver/engine/internal/expr"
)

const maxTransactItems = 100

type txOp struct {
	TableName                           string  `json:"TableName"`
	Key                                 jitem   `json:"Key"`
	Item                                jitem   `json:"Item"`
	ConditionExpression                 *string `json:"ConditionExpression"`
	UpdateExpression                    *string `json:"UpdateExpression"`
	ProjectionExpression                *string `json:"ProjectionExpression"`
	ReturnValuesOnConditionCheckFailure string  `json:"ReturnValuesOnConditionCheckFailure"`
	exprFields
}

// txAction is one validated TransactWriteItems action.
type txAction struct {
	kind  string // ConditionCheck, Put, Delete, Update
	op    *txOp
	t     *table
	cond  *expr.Condition
	upd   *expr.Update
	item  attr.Item // Put
	key   attr.Item // the others
	skey  []byte
	size  int
	rvccf string
}

func (e *Engine) opTransactWriteItems(ctx context.Context, body []byte) (any, error) {
	var req struct {
		TransactItems []struct {
			ConditionCheck *txOp `json:"ConditionCheck"`
			Put            *txOp `json:"Put"`
			Delete         *txOp `json:"Delete"`
			Update         *txOp `json:"Update"`
		} `json:"TransactItems"`
		ReturnConsumedCapacity      string `json:"ReturnConsumedCapacity"`
		ReturnItemCollectionMetrics string `json:"ReturnItemCollectionMetrics"`
		ClientRequestToken          string `json:"ClientRequestToken"`
	}
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if err := checkRCC(req.ReturnConsumedCapacity); err != nil {
		return nil, err
	}
	if req.TransactItems == nil {
		return nil, nullErr("transactItems")
	}
	if len(req.TransactItems) == 0 || len(req.TransactItems) > maxTransactItems {
		return nil, awserr.Validation("1 validation error detected: Value at 'transactItems' failed to satisfy constraint: Member must have length less than or equal to 100 and greater than or equal to 1")
	}
	actions := make([]*txAction, 0, len(req.TransactItems))
	tables := map[string]*table{}
	for _, ti := range req.TransactItems {
		a := &txAction{}
		n := 0
		for kind, o := range map[string]*txOp{"ConditionCheck": ti.ConditionCheck, "Put": ti.Put, "Delete": ti.Delete, "Update": ti.Update} {
			if o != nil {
				a.kind, a.op = kind, o
				n++
			}
		}
		if n != 1 {
			return nil, awserr.Validation("TransactItems can only contain one of Check, Put, Update or Delete")
		}
		o := a.op
		if err := checkTableName(o.TableName, "transactItems.member."+a.kind+".tableName"); err != nil {
			return nil, err
		}
		switch o.ReturnValuesOnConditionCheckFailure {
		case "", "NONE", "ALL_OLD":
			a.rvccf = o.ReturnValuesOnConditionCheckFailure
		default:
			return nil, awserr.Validation("1 validation error detected: Value '%s' at 'returnValuesOnConditionCheckFailure' failed to satisfy constraint: Member must satisfy enum value set: [ALL_OLD, NONE]", o.ReturnValuesOnConditionCheckFailure)
		}
		if a.kind == "Update" && (o.UpdateExpression == nil || *o.UpdateExpression == "") {
			return nil, nullErr("transactItems.member.update.updateExpression")
		}
		if a.kind == "ConditionCheck" && o.ConditionExpression == nil {
			return nil, nullErr("transactItems.member.conditionCheck.conditionExpression")
		}
		p, err := o.params(o.ConditionExpression, o.UpdateExpression)
		if err != nil {
			return nil, err
		}
		if a.kind == "Update" {
			if a.upd, err = expr.ParseUpdate(*o.UpdateExpression, p); err != nil {
				return nil, err
			}
		}
		if a.cond, err = parseCond(o.ConditionExpression, p, "ConditionExpression"); err != nil {
			return nil, err
		}
		if err := p.CheckUnused(); err != nil {
			return nil, err
		}
		t := tables[o.TableName]
		if t == nil {
			if t, err = e.lookup(o.TableName); err != nil {
				return nil, err
			}
			tables[o.TableName] = t
		}
		a.t = t
		if a.kind == "Put" {
			if o.Item == nil {
				return nil, nullErr("transactItems.member.put.item")
			}
			a.item = attr.Item(o.Item)
			a.size = attr.ItemSize(a.item)
			if a.size > maxItemSize {
				return nil, awserr.Validation("Item size has exceeded the maximum allowed size")
			}
		} else if o.Key == nil {
			return nil, nullErr("transactItems.member.key")
		} else {
			a.key = attr.Item(o.Key)
		}
		actions = append(actions, a)
	}
	// Lock every table involved, in name order.
	names := make([]string, 0, len(tables))
	for n := range tables {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		tables[n].mu.Lock()
	}
	defer func() {
		for _, n := range names {
			tables[n].mu.Unlock()
		}
	}()
	seen := map[string]bool{}
	for _, a := range actions {
		var err error
		if a.kind == "Put" {
			if err = a.t.checkItem(a.item); err != nil {
				return nil, err
			}
			a.skey = a.t.key.encode(nil, a.item)
		} else if a.skey, err = a.t.keyOf(a.key); err != nil {
			return nil, err
		}
		id := a.t.name + "\x00" + string(a.skey)
		if seen[id] {
			return nil, awserr.Validation("Transaction request cannot include multiple operations on one item")
		}
		seen[id] = true
	}
	// Check every condition (and dry-run updates) before changing anything.
	reasons := make([]cancelReason, len(actions))
	failed := false
	for i, a := range actions {
		reasons[i].Code = "None"
		var old attr.Item
		if ent := a.t.items.Get(a.skey); ent != nil {
			var err error
			if old, err = decodeStored(ent); err != nil {
				return nil, err
			}
		}
		if err := checkCond(a.cond, old, a.rvccf); err != nil {
			var cf *condFailed
			if !errors.As(err, &cf) {
				return nil, err
			}
			reasons[i] = cancelReason{Code: "ConditionalCheckFailed", Message: "The conditional request failed", Item: cf.item}
			failed = true
			continue
		}
		if a.kind == "Update" {
			base := old
			if base == nil {
				base = attr.CloneItem(a.key)
			}
			ni, touched, err := a.upd.Apply(base)
			if err == nil {
				for _, n := range touched {
					if a.t.key.has(n) {
						err = awserr.Validation("One or more parameter values were invalid: Cannot update attribute %s. This attribute is part of the key", n)
					}
				}
			}
			if err == nil {
				if attr.ItemSize(ni) > maxItemSize {
					err = awserr.Validation("Item size to update has exceeded the maximum allowed size")
				} else {
					err = a.t.checkIndexKeys(ni)
				}
			}
			if err != nil {
				var ae *awserr.Error
				if errors.As(err, &ae) && ae.Code == awserr.CodeValidation {
					reasons[i] = cancelReason{Code: "ValidationError", Message: ae.Message}
					failed = true
					continue
				}
				return nil, err
			}
		}
	}
	if failed {
		return nil, &txCanceled{reasons: reasons}
	}
	var caps = map[string]float64{}
	for _, a := range actions {
		var err error
		size := a.size
		switch a.kind {
		case "Put":
			_, size, err = a.t.putLocked(a.item, a.size, nil, "", false)
		case "Delete":
			_, size, err = a.t.deleteLocked(a.key, nil, "", false)
		case "Update":
			var r updateResult
			r, err = a.t.updateLocked(a.key, a.upd, nil, "")
			size = r.size
		}
		if err != nil {
			return nil, err
		}
		caps[a.t.name] += 2 * writeUnits(size)
	}
	resp := map[string]any{}
	if req.ReturnConsumedCapacity == "TOTAL" || req.ReturnConsumedCapacity == "INDEXES" {
		var cc []*capacity
		for _, n := range names {
			cc = append(cc, consumed(req.ReturnConsumedCapacity, n, caps[n], true, nil))
		}
		resp["ConsumedCapacity"] = cc
	}
	return resp, nil
}

func (e *Engine) opTransactGetItems(ctx context.Context, body []byte) (any, error) {
	var req struct {
		TransactItems []struct {
			Get *txOp `json:"Get"`
		} `json:"TransactItems"`
		ReturnConsumedCapacity string `json:"ReturnConsumedCapacity"`
	}
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if err := checkRCC(req.ReturnConsumedCapacity); err != nil {
		return nil, err
	}
	if len(req.TransactItems) == 0 || len(req.TransactItems) > maxTransactItems {
		return nil, awserr.Validation("1 validation error detected: Value at 'transactItems' failed to satisfy constraint: Member must have length less than or equal to 100 and greater than or equal to 1")
	}
	type get struct {
		t    *table
		key  attr.Item
		proj *projection
	}
	gets := make([]get, 0, len(req.TransactItems))
	tables := map[string]*table{}
	for _, ti := range req.TransactItems {
		o := ti.Get
		if o == nil {
			return nil, nullErr("transactItems.member.get")
		}
		if err := checkTableName(o.TableName, "transactItems.member.get.tableName"); err != nil {
			return nil, err
		}
		if o.Key == nil {
			return nil, nullErr("transactItems.member.get.key")
		}
		p, err := o.params(o.ProjectionExpression)
		if err != nil {
			return nil, err
		}
		proj, err := parseProjection(o.ProjectionExpression, nil, p)
		if err != nil {
			return nil, err
		}
		if err := p.CheckUnused(); err != nil {
			return nil, err
		}
		t := tables[o.TableName]
		if t == nil {
			if t, err = e.lookup(o.TableName); err != nil {
				return nil, err
			}
			tables[o.TableName] = t
		}
		gets = append(gets, get{t: t, key: attr.Item(o.Key), proj: proj})
	}
	names := make([]string, 0, len(tables))
	for n := range tables {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		tables[n].mu.RLock()
	}
	defer func() {
		for _, n := range names {
			tables[n].mu.RUnlock()
		}
	}()
	out := make([]map[string]json.RawMessage, len(gets))
	for i, g := range gets {
		sk, err := g.t.keyOf(g.key)
		if err != nil {
			return nil, err
		}
		out[i] = map[string]json.RawMessage{}
		ent := g.t.items.Get(sk)
		if ent == nil {
			continue
		}
		if g.proj == nil {
			out[i]["Item"] = ent.raw
			continue
		}
		it, err := decodeStored(ent)
		if err != nil {
			return nil, err
		}
		out[i]["Item"] = attr.AppendItemJSON(nil, g.proj.apply(it))
	}
	return map[string]any{"Responses": out}, nil
}
