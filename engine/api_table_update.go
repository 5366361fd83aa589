package engine

import (
	"context"
	"maps"
	"time"

	"github.com/ttl-archiver/archiver/engine/internal/attr"
	"github.com/ttl-archiver/archiver/engine/internal/awserr"
)

// UpdateTable: a request is planned against the table (planUpdateLocked,
// every check, nothing changed), then applied (applyUpdateLocked); GSI
// creation backfills the new index. ReplicaUpdates are api_global_tables.go's.

type gsiUpdate struct {
	Create *indexSpec `json:"Create"`
	Update *struct {
		IndexName             string      `json:"IndexName"`
		ProvisionedThroughput *throughput `json:"ProvisionedThroughput"`
	} `json:"Update"`
	Delete *struct {
		IndexName string `json:"IndexName"`
	} `json:"Delete"`
}

type updateTableRequest struct {
	TableName                   string                `json:"TableName"`
	AttributeDefinitions        []attributeDefinition `json:"AttributeDefinitions"`
	BillingMode                 string                `json:"BillingMode"`
	ProvisionedThroughput       *throughput           `json:"ProvisionedThroughput"`
	GlobalSecondaryIndexUpdates []gsiUpdate           `json:"GlobalSecondaryIndexUpdates"`
	StreamSpecification         *streamSpec           `json:"StreamSpecification"`
	DeletionProtectionEnabled   *bool                 `json:"DeletionProtectionEnabled"`
	TableClass                  string                `json:"TableClass"`
	ReplicaUpdates              []replicaUpdate       `json:"ReplicaUpdates"`
	MultiRegionConsistency      string                `json:"MultiRegionConsistency"`
}

// settings reports whether the request changes anything but replicas.
func (req *updateTableRequest) settings() bool {
	return req.BillingMode != "" || req.ProvisionedThroughput != nil || req.GlobalSecondaryIndexUpdates != nil ||
		req.StreamSpecification != nil || req.DeletionProtectionEnabled != nil || req.TableClass != ""
}

func (e *Engine) opUpdateTable(ctx context.Context, body []byte) (any, error) {
	var req updateTableRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	// apimodel.Check has checked TableName, BillingMode's values and the
	// StreamSpecification's members.
	t, err := e.lookup(ctx, req.TableName)
	if err != nil {
		return nil, err
	}
	if req.ReplicaUpdates != nil || req.MultiRegionConsistency != "" {
		if req.settings() {
			// The engine's rule; DynamoDB's own wording is not known.
			return nil, awserr.Validation("One or more parameter values were invalid: ReplicaUpdates cannot be combined with other table updates in one UpdateTable request")
		}
		return e.updateReplicas(t, &req)
	}
	if !req.settings() {
		return nil, awserr.Validation("At least one of ProvisionedThroughput, BillingMode, UpdateStreamEnabled, GlobalSecondaryIndexUpdates or SSESpecification or ReplicaUpdates is required")
	}
	if len(req.GlobalSecondaryIndexUpdates) > 1 {
		return nil, awserr.Validation("One or more parameter values were invalid: Only one global secondary index update per index is allowed simultaneously.")
	}
	if err := t.checkGlobalUpdate(&req); err != nil {
		return nil, err
	}
	resp, err := e.updateTableOn(t, &req)
	if err == nil {
		e.updateOtherReplicas(t, &req)
	}
	return resp, err
}

// updateTableOn applies an UpdateTable of settings to t: validated whole
// first (planUpdateLocked changes nothing), then applied.
func (e *Engine) updateTableOn(t *table, req *updateTableRequest) (any, error) {
	now := e.clock.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	plan, err := t.planUpdateLocked(req, now)
	if err != nil {
		return nil, err
	}
	if t.p != nil {
		defer t.p.tableChanged(t) // under the lock, whatever the update changed
	}
	if err := e.applyUpdateLocked(t, req, plan); err != nil {
		return nil, err
	}
	return map[string]any{"TableDescription": t.describeLocked()}, nil
}

// tableUpdate is what a validated UpdateTable of settings changes.
type tableUpdate struct {
	billing      string
	rcu, wcu     int64
	enabled      bool   // with a StreamSpecification: enable (or disable) the stream
	view         string // the view of a stream enabled
	defs         map[string]attr.Type
	create       *index // a GSI to create (defs: the attribute definitions with its keys)
	drop         string // a GSI to delete
	tput         *index // a GSI whose provisioned throughput changes to ixRCU, ixWCU
	ixRCU, ixWCU int64
}

// planUpdateLocked validates an UpdateTable of settings against t and
// returns what it changes, changing nothing. t.mu is held.
func (t *table) planUpdateLocked(req *updateTableRequest, now time.Time) (*tableUpdate, error) {
	enabled, view, err := checkStreamSpec(req.StreamSpecification, false)
	if err != nil {
		return nil, err
	}
	u := &tableUpdate{billing: t.billing, rcu: t.rcu, wcu: t.wcu, enabled: enabled, view: view}
	if req.BillingMode != "" {
		u.billing = req.BillingMode
	}
	if u.billing == "PROVISIONED" {
		if req.ProvisionedThroughput != nil || t.billing != "PROVISIONED" {
			r, w, err := checkThroughput(req.ProvisionedThroughput, "")
			if err != nil {
				return nil, err
			}
			if t.billing == "PROVISIONED" && r == t.rcu && w == t.wcu {
				return nil, sameThroughput(t.rcu, t.wcu)
			}
			u.rcu, u.wcu = r, w
		}
	} else {
		if req.ProvisionedThroughput != nil {
			return nil, awserr.Validation("One or more parameter values were invalid: Neither ReadCapacityUnits nor WriteCapacityUnits can be specified when BillingMode is PAY_PER_REQUEST")
		}
		u.rcu, u.wcu = 0, 0
	}
	if req.StreamSpecification != nil {
		if enabled && t.stream != nil {
			return nil, awserr.Validation("Table already has an enabled stream: TableName: %s", t.name)
		}
		if !enabled && t.stream == nil {
			return nil, awserr.Validation("Table has no stream to disable: TableName: %s", t.name)
		}
	}
	for _, g := range req.GlobalSecondaryIndexUpdates {
		if err := t.planIndexUpdate(u, g, req.AttributeDefinitions, now); err != nil {
			return nil, err
		}
	}
	return u, nil
}

// planIndexUpdate validates one GlobalSecondaryIndexUpdate into u. t.mu
// is held.
func (t *table) planIndexUpdate(u *tableUpdate, g gsiUpdate, attrDefs []attributeDefinition, now time.Time) error {
	n := 0
	for _, given := range []bool{g.Create != nil, g.Update != nil, g.Delete != nil} {
		if given {
			n++
		}
	}
	if n != 1 {
		return awserr.Validation("One or more parameter values were invalid: One of GlobalSecondaryIndexUpdate.Create, GlobalSecondaryIndexUpdate.Update or GlobalSecondaryIndexUpdate.Delete must be specified")
	}
	switch {
	case g.Create != nil:
		return t.planIndexCreate(u, g.Create, attrDefs, now)
	case g.Delete != nil:
		ix := t.indexByName(g.Delete.IndexName)
		if ix == nil || !ix.global {
			return awserr.NotFound("Requested resource not found: Index: %s not found", g.Delete.IndexName)
		}
		u.drop = ix.name
	default:
		ix := t.indexByName(g.Update.IndexName)
		if ix == nil || !ix.global {
			return awserr.NotFound("Requested resource not found: Index: %s not found", g.Update.IndexName)
		}
		if u.billing == "PROVISIONED" {
			r, w, err := checkThroughput(g.Update.ProvisionedThroughput, " for index: "+ix.name)
			if err != nil {
				return err
			}
			u.tput, u.ixRCU, u.ixWCU = ix, r, w
		}
	}
	return nil
}

// planIndexCreate validates a GSI to create, with the attribute
// definitions the request adds, into u. t.mu is held.
func (t *table) planIndexCreate(u *tableUpdate, spec *indexSpec, attrDefs []attributeDefinition, now time.Time) error {
	if len(t.gsis) >= 20 {
		return awserr.New(awserr.CodeLimitExceeded, "One or more parameter values were invalid: GlobalSecondaryIndex count exceeds the per-table limit of 20")
	}
	if t.indexByName(spec.IndexName) != nil {
		return awserr.Validation("One or more parameter values were invalid: Attempting to create an index which already exists")
	}
	defs := maps.Clone(t.attrDefs)
	for _, d := range attrDefs {
		ty, ok := attr.ParseType(d.AttributeType)
		if !ok || (ty != attr.S && ty != attr.N && ty != attr.B) {
			return awserr.Validation("1 validation error detected: Value '%s' at 'attributeDefinitions.member.attributeType' failed to satisfy constraint: Member must satisfy enum value set: [B, N, S]", d.AttributeType)
		}
		if old, ok := defs[d.AttributeName]; ok && old != ty {
			return awserr.Validation("One or more parameter values were invalid: Cannot change the type of an existing attribute definition: %s", d.AttributeName)
		}
		defs[d.AttributeName] = ty
	}
	ix, err := buildIndex(*spec, true, &table{key: t.key, attrDefs: defs}, u.billing == "PROVISIONED", t.arn, now)
	if err != nil {
		return err
	}
	// Newly defined attributes must be used by the new index.
	for n := range defs {
		if _, old := t.attrDefs[n]; !old && n != ix.key.Hash && n != ix.key.Range {
			return awserr.Validation("One or more parameter values were invalid: Number of attributes in KeySchema does not exactly match number of attributes defined in AttributeDefinitions")
		}
	}
	u.create, u.defs = ix, defs
	return nil
}

// applyUpdateLocked applies a validated update to t. t.mu is held for
// writing.
func (e *Engine) applyUpdateLocked(t *table, req *updateTableRequest, u *tableUpdate) error {
	t.billing, t.rcu, t.wcu = u.billing, u.rcu, u.wcu
	if u.tput != nil {
		u.tput.rcu, u.tput.wcu = u.ixRCU, u.ixWCU
	}
	if u.billing == "PAY_PER_REQUEST" {
		for _, ix := range t.gsis {
			ix.rcu, ix.wcu = 0, 0
		}
	}
	if req.DeletionProtectionEnabled != nil {
		t.deletion = *req.DeletionProtectionEnabled
	}
	if req.TableClass != "" {
		t.tableClass = req.TableClass
	}
	if req.StreamSpecification != nil {
		if u.enabled {
			t.setStream(e.streams.Create(t.region, t.name, u.view))
		} else {
			e.streams.Disable(t.stream.ARN())
			t.stream = nil
		}
	}
	if u.create != nil {
		t.attrDefs = u.defs
		if err := t.backfillLocked(u.create); err != nil {
			return err
		}
		t.gsis = append(t.gsis, u.create)
	}
	if u.drop != "" {
		for i, ix := range t.gsis {
			if ix.name == u.drop {
				t.gsis = append(t.gsis[:i:i], t.gsis[i+1:]...)
				break
			}
		}
		t.pruneAttrDefsLocked()
	}
	return nil
}

// sameThroughput is DynamoDB's refusal of a PROVISIONED table's
// throughput set to what it already is.
func sameThroughput(rcu, wcu int64) error {
	return awserr.Validation("The provisioned throughput for the table will not change. The requested value equals the current value. "+
		"Current ReadCapacityUnits provisioned for the table: %d. Requested ReadCapacityUnits: %d. "+
		"Current WriteCapacityUnits provisioned for the table: %d. Requested WriteCapacityUnits: %d. "+
		"Refer to the Amazon DynamoDB Developer Guide for current limits and how to request higher limits.", rcu, rcu, wcu, wcu)
}

// pruneAttrDefsLocked drops attribute definitions no key uses any more.
func (t *table) pruneAttrDefsLocked() {
	used := map[string]bool{t.key.Hash: true, t.key.Range: true}
	for _, ix := range t.gsis {
		used[ix.key.Hash], used[ix.key.Range] = true, true
	}
	for _, ix := range t.lsis {
		used[ix.key.Hash], used[ix.key.Range] = true, true
	}
	for n := range t.attrDefs {
		if !used[n] {
			delete(t.attrDefs, n)
		}
	}
}

// backfillLocked fills a new index from the table's items.
func (t *table) backfillLocked(ix *index) error {
	for n := t.items.First(); n != nil; n = n.Next() {
		it, err := decodeStored(n.val)
		if err != nil {
			return err
		}
		ix.add(t, n.val, it)
	}
	return nil
}
