package engine

import (
	"slices"
	"sort"
	"sync"
)

// group is one global table: the Regions of its replicas, each a table of
// the same name in its Region.
type group struct {
	name string

	mu      sync.Mutex // a leaf lock
	regions []string   // sorted
	strong  bool       // MultiRegionConsistency STRONG
}

func (g *group) snapshot() (regions []string, strong bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.regions), g.strong
}

// others lists the replicas' Regions but region.
func (g *group) others(region string) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]string, 0, len(g.regions))
	for _, r := range g.regions {
		if r != region {
			out = append(out, r)
		}
	}
	return out
}

func (g *group) add(region string) {
	g.mu.Lock()
	if !slices.Contains(g.regions, region) {
		g.regions = append(g.regions, region)
		sort.Strings(g.regions)
	}
	g.mu.Unlock()
}

func (g *group) remove(region string) {
	g.mu.Lock()
	g.regions = slices.DeleteFunc(g.regions, func(r string) bool { return r == region })
	g.mu.Unlock()
}

// ttlOwner is the Region whose TTL process deletes an expired item whose
// last write came from origin: that Region while it is a replica, else
// the first replica by name. Every Region computes the same owner from the
// same stamp, so once the replicas agree on an item's last write exactly
// one of them deletes it; the others leave it for the replicated delete.
func (g *group) ttlOwner(origin string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if slices.Contains(g.regions, origin) {
		return origin
	}
	if len(g.regions) == 0 {
		return ""
	}
	return g.regions[0]
}

// replState is a replica's replication state; a table that is no replica
// has none (table.repl is nil), and pays one nil check per write.
type replState struct {
	e      *Engine
	g      *group
	stamps map[string]itemStamp // by storage key: live items and tombstones; t.mu guards it
	tombs  int                  // tombstones in stamps
	// applying is the replicated write applyOpLocked is making (t.mu
	// held): writeLocked logs and stamps it instead of a new local one.
	applying *replWrite
}

func newReplState(e *Engine, g *group) *replState {
	return &replState{e: e, g: g, stamps: map[string]itemStamp{}}
}

// replWrite is the replication side of one write, logged in the same
// entry as the write: the key's new stamp (set), the op it applies (ack,
// a replicated write) or the ops it queues (a local write).
type replWrite struct {
	tableID string
	key     []byte
	st      stamp
	gone    bool
	set     bool
	ack     uint64
	ops     []*replOp
}

// prepare stamps a local write of key (ne nil: a delete) and builds its
// ops for every other replica, or returns the replicated write being
// applied. Nothing is queued yet: commit does that once the write is
// logged. t.mu is held for writing.
func (rs *replState) prepare(t *table, key []byte, ne *entry) *replWrite {
	e := rs.e
	if rs.applying != nil {
		return rs.applying
	}
	now := e.clock.Now().UnixNano()
	k := string(key)
	st := stamp{ts: max(now, rs.stamps[k].st.ts+1), origin: t.region}
	rw := &replWrite{tableID: t.id, key: []byte(k), st: st, gone: ne == nil, set: true}
	others := rs.g.others(t.region)
	if len(others) == 0 {
		return rw
	}
	first := e.repl.newIDs(len(others))
	for i, dst := range others {
		op := &replOp{id: first + uint64(i), src: t.region, dst: dst, table: t.name, key: rw.key, st: st, at: now}
		if ne != nil {
			op.raw, op.size = ne.raw(), ne.size
		}
		rw.ops = append(rw.ops, op)
	}
	return rw
}

// commit records rw's stamp and queues its ops, once its write is logged
// and applied. t.mu is held for writing.
func (rs *replState) commit(rw *replWrite) {
	e := rs.e
	if !rw.set {
		return
	}
	gen := e.repl.enqueue(rw.ops)
	k := string(rw.key)
	if prev, ok := rs.stamps[k]; ok && prev.gone {
		rs.tombs--
	}
	rs.stamps[k] = itemStamp{st: rw.st, gone: rw.gone, gen: gen}
	if rw.gone {
		rs.tombs++
	}
}

// ttlOwned reports whether this replica's TTL process deletes the expired
// item at key (see group.ttlOwner). t.mu is held.
func (t *table) ttlOwned(key []byte) bool {
	return t.repl.g.ttlOwner(t.repl.stamps[string(key)].st.origin) == t.region
}

// dropTombstones forgets the tombstones made before epoch: replication
// has been idle since (every queue empty, nothing in flight), so every
// replica holds the delete or a later write of the key, every write made
// before it has been applied, and any later write has a greater stamp.
// While a Region is paused its queue is not empty and tombstones are
// kept: at most one per delete since the last idle moment, each of which
// the paused queue also holds.
func (e *Engine) dropTombstones(epoch uint64) {
	e.mu.RLock()
	var tables []*table
	for _, t := range e.tables {
		tables = append(tables, t)
	}
	e.mu.RUnlock()
	for _, t := range tables {
		t.mu.Lock()
		if rs := t.repl; rs != nil && rs.tombs > 0 {
			for k, s := range rs.stamps {
				if s.gone && s.gen < epoch {
					delete(rs.stamps, k)
					rs.tombs--
				}
			}
		}
		t.mu.Unlock()
	}
}

// globalRemoveLocked deletes expired items of a replica one by one through
// writeLocked, so each is stamped and replicated like any other write:
// a service delete here, a plain REMOVE in the other replicas. t.mu is
// held for writing.
func (t *table) globalRemoveLocked(victims []*entry) (int, error) {
	done := 0
	for _, ent := range victims {
		it, err := decodeStored(ent)
		if err != nil {
			return done, err
		}
		if err := t.writeLocked(ent.key(), ent, it, nil, nil, true); err != nil {
			return done, err
		}
		done++
	}
	return done, nil
}

// copyItemsLocked copies src's items and stamps into dst, a new replica
// not yet visible; their indexes, sizes and expiries are rebuilt. src.mu
// is held.
func copyItemsLocked(dst, src *table) error {
	for n := src.items.First(); n != nil; n = n.Next() {
		// An entry's header is its item's allocation: the replica's is a copy.
		e := newStoredEntry(n.val.key(), n.val.raw(), n.val.size)
		dst.items.Put(e.key(), e, noExpiry)
	}
	if src.repl != nil {
		for k, s := range src.repl.stamps {
			dst.repl.stamps[k] = s
			if s.gone {
				dst.repl.tombs++
			}
		}
	}
	return dst.rebuild()
}

// globalTableVersion is the version of global tables the engine serves.
const globalTableVersion = "2019.11.21"

// replicaDescription is a ReplicaDescription of DescribeTable.
type replicaDescription struct {
	RegionName    string `json:"RegionName"`
	ReplicaStatus string `json:"ReplicaStatus"`
}

// describeReplicas adds a replica's global table to its description: the
// other replicas (DescribeTable lists those, not the Region it is asked
// in, as the developer guide's example shows), the version and the
// consistency. t.mu is held.
func (t *table) describeReplicas(d *tableDescription) {
	regions, strong := t.repl.g.snapshot()
	d.GlobalTableVersion = globalTableVersion
	d.MultiRegionConsistency = "EVENTUAL"
	if strong {
		d.MultiRegionConsistency = "STRONG"
	}
	for _, r := range regions {
		if r != t.region {
			d.Replicas = append(d.Replicas, replicaDescription{RegionName: r, ReplicaStatus: "ACTIVE"})
		}
	}
}
