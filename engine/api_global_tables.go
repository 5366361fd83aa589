package engine

import (
	"context"
	"slices"

	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/engine/internal/attr"
	"github.com/ttl-archiver/archiver/engine/internal/awserr"
	"github.com/ttl-archiver/archiver/engine/internal/stream"
)

// UpdateTable's ReplicaUpdates (global tables version 2019.11.21). Where
// DynamoDB's exact message is not known to this project, the engine's own
// is in DynamoDB's style; docs/ENGINE.md lists which.

type replicaAction struct {
	RegionName string `json:"RegionName"`
}

type replicaUpdate struct {
	Create *replicaAction `json:"Create"`
	Update *replicaAction `json:"Update"`
	Delete *replicaAction `json:"Delete"`
}

// msgLocalRegion is DynamoDB's refusal of a replica action on the Region
// the request is in.
const msgLocalRegion = "Cannot add, delete, or update the local region through ReplicaUpdates. Use CreateTable, DeleteTable, or UpdateTable as required."

// msgCapacity is DynamoDB's refusal of a replica of a table whose write
// capacity is provisioned without auto scaling (the engine has none).
const msgCapacity = "Table write capacity should either be Pay-Per-Request or AutoScaled"

// msgNoStreamOff is DynamoDB's refusal to disable a replica's stream.
const msgNoStreamOff = "One or more parameter values were invalid: Disabling Stream is not allowed for a Global Table replica."

// checkReplicaUpdates validates ReplicaUpdates and MultiRegionConsistency
// and returns the one action, its kind ("Create", "Delete") and Region.
func (t *table) checkReplicaUpdates(req *updateTableRequest) (kind, region string, err error) {
	if req.MultiRegionConsistency != "" && req.MultiRegionConsistency != "EVENTUAL" && req.MultiRegionConsistency != "STRONG" {
		return "", "", awserr.Validation("1 validation error detected: Value '%s' at 'multiRegionConsistency' failed to satisfy constraint: Member must satisfy enum value set: [EVENTUAL, STRONG]", req.MultiRegionConsistency)
	}
	if len(req.ReplicaUpdates) == 0 {
		return "", "", awserr.Validation("One or more parameter values were invalid: MultiRegionConsistency can only be specified with a ReplicaUpdates Create action")
	}
	if len(req.ReplicaUpdates) > 1 { // the engine's wording
		return "", "", awserr.Validation("One or more parameter values were invalid: Only one replica action (Create, Update or Delete) is allowed per UpdateTable request")
	}
	u := req.ReplicaUpdates[0]
	var a *replicaAction
	for _, c := range []struct {
		k string
		a *replicaAction
	}{{"Create", u.Create}, {"Update", u.Update}, {"Delete", u.Delete}} {
		if c.a != nil {
			if a != nil {
				return "", "", awserr.Validation("One or more parameter values were invalid: One of ReplicationGroupUpdate.Create, ReplicationGroupUpdate.Update or ReplicationGroupUpdate.Delete must be specified")
			}
			kind, a = c.k, c.a
		}
	}
	switch {
	case a == nil:
		return "", "", awserr.Validation("One or more parameter values were invalid: One of ReplicationGroupUpdate.Create, ReplicationGroupUpdate.Update or ReplicationGroupUpdate.Delete must be specified")
	case a.RegionName == "":
		return "", "", nullErr("replicaUpdates.1.member." + lowerFirst(kind) + ".regionName")
	case !validRegion(a.RegionName):
		return "", "", awserr.Validation("One or more parameter values were invalid: %q is not a Region name (1 to 63 lower-case letters, digits and hyphens, e.g. us-west-2)", a.RegionName)
	case a.RegionName == t.region:
		return "", "", awserr.Validation(msgLocalRegion)
	case kind == "Update":
		return "", "", awserr.Validation("One or more parameter values were invalid: ReplicaUpdates Update is not supported by this engine: replicas have no settings of their own here")
	case kind != "Create" && req.MultiRegionConsistency != "":
		return "", "", awserr.Validation("One or more parameter values were invalid: MultiRegionConsistency can only be specified with a ReplicaUpdates Create action")
	}
	return kind, a.RegionName, nil
}

func lowerFirst(s string) string { return string(s[0]|0x20) + s[1:] }

// updateReplicas serves an UpdateTable with ReplicaUpdates: one replica
// created or deleted. The engine completes either within the call; the
// answer shows the states AWS answers with (the table UPDATING, the
// replica CREATING or DELETING), a DescribeTable after it the result.
func (e *Engine) updateReplicas(t *table, req *updateTableRequest) (any, error) {
	kind, region, err := t.checkReplicaUpdates(req)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if kind == "Create" {
		err = e.createReplicaLocked(t, region, req.MultiRegionConsistency == "STRONG")
	} else {
		err = e.deleteReplicaLocked(t, region)
	}
	if err != nil {
		return nil, err
	}
	t.mu.RLock()
	d := t.describeLocked()
	t.mu.RUnlock()
	d.TableStatus = "UPDATING"
	status := map[string]string{"Create": "CREATING", "Delete": "DELETING"}[kind]
	d.Replicas = slices.DeleteFunc(d.Replicas, func(r replicaDescription) bool { return r.RegionName == region })
	d.Replicas = append(d.Replicas, replicaDescription{RegionName: region, ReplicaStatus: status})
	return map[string]any{"TableDescription": d}, nil
}

// checkReplicable refuses a replica of t where DynamoDB does: a table
// whose writes are provisioned (no auto scaling here), whose stream has
// another view than NEW_AND_OLD_IMAGES, or, with STRONG, one with TTL.
// t.mu is held.
func (t *table) checkReplicable(strong bool) error {
	if t.billing != "PAY_PER_REQUEST" {
		return awserr.Validation(msgCapacity)
	}
	if t.stream != nil && t.stream.ViewType() != stream.NewAndOldImages { // the engine's wording
		return awserr.Validation("One or more parameter values were invalid: Table %s has a stream of view type %s; the stream of a global table must be NEW_AND_OLD_IMAGES: disable the stream, or enable it with NEW_AND_OLD_IMAGES, first", t.name, t.stream.ViewType())
	}
	if t.repl != nil {
		if _, s := t.repl.g.snapshot(); s != strong {
			return awserr.Validation("One or more parameter values were invalid: a global table's replicas all have one MultiRegionConsistency; it cannot be changed once set")
		}
	}
	if strong && t.ttlAttr != "" {
		return awserr.Validation("One or more parameter values were invalid: Time to Live is not supported on global tables with multi-Region strong consistency: disable TTL on %s first", t.name)
	}
	return nil
}

// createReplicaLocked creates t's replica in region: a table of the same
// name, key schema, indexes, TTL, stream (NEW_AND_OLD_IMAGES) and billing
// holding a copy of t's items, which its stream does not show (the copy is
// where the replica starts, as a restored table's items are). A table
// without a stream gets one, as DynamoDB enables it. t's writes are
// blocked while it copies. e.mu is held for writing.
func (e *Engine) createReplicaLocked(t *table, region string, strong bool) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.checkReplicable(strong); err != nil {
		return err
	}
	if t.repl != nil && slices.Contains(t.repl.g.others(""), region) { // the engine's wording
		return awserr.Validation("One or more parameter values were invalid: Table %s already has a replica in Region %s", t.name, region)
	}
	if e.tables[tkey{region, t.name}] != nil { // the engine's wording
		return awserr.InUse("Table %s already exists in Region %s: a new replica's Region must have no table of that name", t.name, region)
	}
	if t.stream == nil {
		t.setStream(e.streams.Create(t.region, t.name, stream.NewAndOldImages))
	}
	if t.repl == nil {
		t.repl = newReplState(e, &group{name: t.name, regions: []string{t.region}, strong: strong})
	}
	nt, err := e.replicaOf(t, region)
	if err != nil {
		return err
	}
	t.repl.g.add(region)
	e.tables[nt.tkey()] = nt
	e.relogGroupLocked(t.repl.g, t, nt)
	return nil
}

// replicaOf builds t's replica in region, its items copied, not yet
// visible. With a data directory it logs the new table marked creating,
// then its items: a crash before relogGroupLocked leaves a replica that
// start-up drops. t.mu is held.
func (e *Engine) replicaOf(t *table, region string) (*table, error) {
	now := e.clock.Now()
	nt := &table{name: t.name, region: region, arn: e.tableARN(region, t.name), created: now,
		key: t.key, attrDefs: map[string]attr.Type{}, billing: t.billing, ttlAttr: t.ttlAttr,
		tableClass: t.tableClass, lagNanos: t.lagNanos, p: e.p, ktoks: t.keyToks()}
	seed := e.seedSeq.Add(1)
	nt.id = newTableID(now, seed)
	nt.items = newItemList(uint64(now.UnixNano()) + seed)
	for n, ty := range t.attrDefs {
		nt.attrDefs[n] = ty
	}
	for _, list := range []struct {
		in  []*index
		out *[]*index
	}{{t.lsis, &nt.lsis}, {t.gsis, &nt.gsis}} {
		for _, ix := range list.in {
			c := *ix
			c.arn, c.created, c.size = nt.arn+"/index/"+ix.name, now, 0
			c.list = newSkiplist(uint64(now.UnixNano()) ^ uint64(len(ix.name)))
			*list.out = append(*list.out, &c)
		}
	}
	nt.repl = newReplState(e, t.repl.g)
	if err := copyItemsLocked(nt, t); err != nil {
		return nil, err
	}
	nt.setStream(e.streams.Create(region, t.name, stream.NewAndOldImages))
	if e.p != nil {
		e.p.tableCreating(nt)
	}
	return nt, nil
}

// deleteReplicaLocked deletes t's replica in region: that Region's table
// goes (its stream disabled, as DeleteTable does); writes still queued for
// it are dropped. The last replica left is a table of its own again. e.mu
// is held for writing.
func (e *Engine) deleteReplicaLocked(t *table, region string) error {
	t.mu.RLock()
	g := (*group)(nil)
	if t.repl != nil {
		g = t.repl.g
	}
	t.mu.RUnlock()
	rt := e.tables[tkey{region, t.name}]
	if g == nil || rt == nil || !slices.Contains(g.others(""), region) { // the engine's wording
		return awserr.Validation("One or more parameter values were invalid: Table %s has no replica in Region %s", t.name, region)
	}
	rt.mu.Lock()
	e.dropTableLocked(rt)
	rt.mu.Unlock()
	return nil
}

// leaveGroupLocked takes t, being deleted, out of its global table: the
// other replicas stop replicating to it, and a last replica left is a
// table of its own again. e.mu and t.mu are held for writing.
func (e *Engine) leaveGroupLocked(t *table) {
	g := t.repl.g
	g.remove(t.region)
	t.repl = nil
	rest := g.others("")
	var tables []*table
	for _, r := range rest {
		if rt := e.tables[tkey{r, t.name}]; rt != nil {
			tables = append(tables, rt)
		}
	}
	if len(tables) == 1 {
		tables[0].mu.Lock()
		tables[0].repl = nil
		g.remove(tables[0].region)
		if tables[0].p != nil {
			tables[0].p.tableChanged(tables[0])
		}
		tables[0].mu.Unlock()
		return
	}
	e.relogGroupLocked(g, nil, nil)
}

// relogGroupLocked logs the metadata of every replica of g, whose replica
// list changed, in one entry (with nt, a new replica, no longer marked
// creating). held is a replica whose lock the caller holds. e.mu is held
// for writing.
func (e *Engine) relogGroupLocked(g *group, held, nt *table) {
	if e.p == nil {
		return
	}
	var metas [][]byte
	for _, r := range g.others("") {
		rt := e.tables[tkey{r, g.name}]
		if rt == nil {
			continue
		}
		if rt != held && rt != nt {
			rt.mu.RLock()
		}
		metas = append(metas, rt.metaJSON())
		if rt != held && rt != nt {
			rt.mu.RUnlock()
		}
	}
	e.p.logMetas(metas)
}

// checkGlobalUpdate refuses what a replica's UpdateTable may not change:
// its stream (DynamoDB's message) and its billing to provisioned.
func (t *table) checkGlobalUpdate(req *updateTableRequest) error {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.repl == nil {
		return nil
	}
	if s := req.StreamSpecification; s != nil && s.StreamEnabled != nil && !*s.StreamEnabled {
		return awserr.Validation(msgNoStreamOff)
	}
	if req.BillingMode == "PROVISIONED" || req.ProvisionedThroughput != nil {
		return awserr.Validation(msgCapacity)
	}
	return nil
}

// updateOtherReplicas applies a replica's index changes, deletion
// protection aside, to every other replica: a GSI created on one replica
// is created and backfilled on all, one deleted on all. Each replica is
// changed under its own lock, one after the other.
func (e *Engine) updateOtherReplicas(t *table, req *updateTableRequest) {
	t.mu.RLock()
	rs := t.repl
	t.mu.RUnlock()
	if rs == nil || req.GlobalSecondaryIndexUpdates == nil {
		return
	}
	sub := &updateTableRequest{TableName: t.name, AttributeDefinitions: req.AttributeDefinitions, GlobalSecondaryIndexUpdates: req.GlobalSecondaryIndexUpdates}
	for _, r := range rs.g.others(t.region) {
		e.mu.RLock()
		rt := e.tables[tkey{r, t.name}]
		e.mu.RUnlock()
		if rt == nil {
			continue
		}
		if _, err := e.updateTableOn(rt, sub); err != nil {
			e.log.Warn("engine: an index change did not apply to a replica", zap.String("table", t.name), zap.String("region", r), zap.Error(err))
		}
	}
}

// ttlOtherReplicas applies a replica's TTL change to every other replica,
// each under its own lock in turn: UpdateTimeToLive on one replica applies
// to all (a replica already so set is left as it is).
func (e *Engine) ttlOtherReplicas(ctx context.Context, t *table, enabled bool, name string) {
	t.mu.RLock()
	rs := t.repl
	t.mu.RUnlock()
	if rs == nil {
		return
	}
	for _, r := range rs.g.others(t.region) {
		e.mu.RLock()
		rt := e.tables[tkey{r, t.name}]
		e.mu.RUnlock()
		if rt == nil {
			continue
		}
		if err := e.setTTL(ctx, rt, enabled, name, false); err != nil {
			e.log.Debug("engine: a TTL change left a replica as it was", zap.String("table", t.name), zap.String("region", r), zap.Error(err))
		}
	}
}
