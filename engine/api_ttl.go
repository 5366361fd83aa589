package engine

import (
	"context"

	"github.com/ttl-archiver/archiver/engine/internal/awserr"
)

// Time to Live settings: DescribeTimeToLive and UpdateTimeToLive, and the
// expiry every item of a table is given when its TTL attribute changes.
// The sweeper that deletes expired items is store_ttl_sweep.go.

func (e *Engine) opDescribeTimeToLive(ctx context.Context, body []byte) (any, error) {
	t, err := e.namedTable(ctx, body)
	if err != nil {
		return nil, err
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	d := map[string]any{"TimeToLiveStatus": "DISABLED"}
	if t.ttlAttr != "" {
		d = map[string]any{"TimeToLiveStatus": "ENABLED", "AttributeName": t.ttlAttr}
	}
	return map[string]any{"TimeToLiveDescription": d}, nil
}

func (e *Engine) opUpdateTimeToLive(ctx context.Context, body []byte) (any, error) {
	var req struct {
		TableName               string `json:"TableName"`
		TimeToLiveSpecification *struct {
			Enabled       *bool  `json:"Enabled"`
			AttributeName string `json:"AttributeName"`
		} `json:"TimeToLiveSpecification"`
	}
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if err := checkTableRef(req.TableName, "tableName"); err != nil {
		return nil, err
	}
	spec := req.TimeToLiveSpecification
	if spec == nil {
		return nil, nullErr("timeToLiveSpecification")
	}
	if spec.Enabled == nil {
		return nil, nullErr("timeToLiveSpecification.enabled")
	}
	if spec.AttributeName == "" {
		return nil, nullErr("timeToLiveSpecification.attributeName")
	}
	if len(spec.AttributeName) > 255 {
		return nil, awserr.Validation("1 validation error detected: Value '%s' at 'timeToLiveSpecification.attributeName' failed to satisfy constraint: Member must have length less than or equal to 255", spec.AttributeName)
	}
	t, err := e.lookup(ctx, req.TableName)
	if err != nil {
		return nil, err
	}
	if err := e.setTTL(ctx, t, *spec.Enabled, spec.AttributeName, true); err != nil {
		return nil, err
	}
	e.ttlOtherReplicas(ctx, t, *spec.Enabled, spec.AttributeName)
	return map[string]any{"TimeToLiveSpecification": map[string]any{"Enabled": *spec.Enabled, "AttributeName": spec.AttributeName}}, nil
}

// setTTL enables TTL on attribute name of t, or disables it; strong
// refuses enabling it on a global table with multi-Region strong
// consistency.
func (e *Engine) setTTL(ctx context.Context, t *table, enabled bool, name string, strong bool) error {
	t.mu.Lock()
	if strong && enabled && t.repl != nil {
		if _, s := t.repl.g.snapshot(); s { // the engine's wording
			t.mu.Unlock()
			return awserr.Validation("One or more parameter values were invalid: Time to Live is not supported on global tables with multi-Region strong consistency (MultiRegionConsistency STRONG): table %s", t.name)
		}
	}
	if enabled {
		if t.ttlAttr != "" {
			t.mu.Unlock()
			return awserr.Validation("TimeToLive is already enabled")
		}
		t.ttlAttr = name
	} else {
		if t.ttlAttr == "" {
			t.mu.Unlock()
			return awserr.Validation("TimeToLive is already disabled")
		}
		if t.ttlAttr != name {
			cur := t.ttlAttr
			t.mu.Unlock()
			return awserr.Validation("TimeToLive is active on a different AttributeName: current AttributeName is %s", cur)
		}
		t.ttlAttr = ""
	}
	if t.p != nil {
		t.p.tableChanged(t)
	}
	t.mu.Unlock()
	// Recompute every item's expiry in chunks so that a big table keeps
	// serving requests meanwhile. Writes that happen during the pass already
	// use the new attribute. The pass finishes even if the client goes
	// away: the attribute is already changed, and items left with
	// expiries of the old one would expire wrongly, or never.
	return t.recomputeExpiry(context.WithoutCancel(ctx))
}

// recomputeExpiry refreshes the items' expiries (slNode.exp) for the
// current TTL attribute.
func (t *table) recomputeExpiry(ctx context.Context) error {
	var cursor []byte
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		t.mu.Lock()
		n := t.items.First()
		if cursor != nil {
			n = t.items.SeekGE(cursor)
		}
		for i := 0; n != nil && i < sweepChunk; i, n = i+1, n.Next() {
			if t.ttlAttr == "" {
				n.exp = noExpiry
				continue
			}
			it, err := decodeStored(n.val)
			if err != nil {
				t.mu.Unlock()
				return err
			}
			n.exp = expiryOf(it, t.ttlAttr)
		}
		if n == nil {
			t.mu.Unlock()
			return nil
		}
		cursor = n.Key()
		t.mu.Unlock()
	}
}
