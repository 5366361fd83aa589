package engine

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ttl-archiver/archiver/engine/internal/attr"
	"github.com/ttl-archiver/archiver/engine/internal/stream"
	"github.com/ttl-archiver/archiver/engine/internal/wal"
)

// tableMeta is everything about a table except its items, as the log and
// the snapshot store it (JSON). Streams are named by ARN and resolved
// once the registry is loaded.
type tableMeta struct {
	Name       string            `json:"name"`
	Region     string            `json:"region,omitempty"` // absent before Regions: the ARN's
	ARN        string            `json:"arn"`
	ID         string            `json:"id"`
	Created    int64             `json:"created"`
	Key        keyMeta           `json:"key"`
	AttrDefs   map[string]string `json:"attrDefs"`
	Billing    string            `json:"billing"`
	RCU        int64             `json:"rcu,omitempty"`
	WCU        int64             `json:"wcu,omitempty"`
	GSIs       []indexMeta       `json:"gsis,omitempty"`
	LSIs       []indexMeta       `json:"lsis,omitempty"`
	TTLAttr    string            `json:"ttlAttr,omitempty"`
	Stream     string            `json:"stream,omitempty"`
	Latest     string            `json:"latest,omitempty"`
	Deletion   bool              `json:"deletion,omitempty"`
	Tags       []tag             `json:"tags,omitempty"`
	TableClass string            `json:"tableClass,omitempty"`
	// Replicas lists the Regions of a global table's replicas, this one's
	// included; Strong is its MultiRegionConsistency STRONG. Creating marks
	// a replica whose copy is not complete: start-up drops it.
	Replicas []string `json:"replicas,omitempty"`
	Strong   bool     `json:"strong,omitempty"`
	Creating bool     `json:"creating,omitempty"`
}

type keyMeta struct {
	Hash      string `json:"hash"`
	HashType  string `json:"hashType"`
	Range     string `json:"range,omitempty"`
	RangeType string `json:"rangeType,omitempty"`
}

type indexMeta struct {
	Name     string   `json:"name"`
	Key      keyMeta  `json:"key"`
	ProjType string   `json:"projType"`
	NonKey   []string `json:"nonKey,omitempty"`
	RCU      int64    `json:"rcu,omitempty"`
	WCU      int64    `json:"wcu,omitempty"`
	ARN      string   `json:"arn"`
	Created  int64    `json:"created"`
}

func (k keyDef) meta() keyMeta {
	m := keyMeta{Hash: k.Hash, HashType: k.HashType.String(), Range: k.Range}
	if k.Range != "" {
		m.RangeType = k.RangeType.String()
	}
	return m
}

func (m keyMeta) keyDef() (keyDef, error) {
	k := keyDef{Hash: m.Hash, Range: m.Range}
	var ok bool
	if k.HashType, ok = attr.ParseType(m.HashType); !ok || m.Hash == "" {
		return k, fmt.Errorf("bad hash key %q of type %q", m.Hash, m.HashType)
	}
	if m.Range != "" {
		if k.RangeType, ok = attr.ParseType(m.RangeType); !ok {
			return k, fmt.Errorf("bad range key %q of type %q", m.Range, m.RangeType)
		}
	}
	return k, nil
}

// metaJSON encodes the table's metadata. t.mu is held (or t is not yet
// visible).
func (t *table) metaJSON() []byte {
	m := tableMeta{Name: t.name, Region: t.region, ARN: t.arn, ID: t.id, Created: t.created.UnixNano(), Key: t.key.meta(),
		AttrDefs: map[string]string{}, Billing: t.billing, RCU: t.rcu, WCU: t.wcu, TTLAttr: t.ttlAttr,
		Deletion: t.deletion, Tags: t.tags, TableClass: t.tableClass}
	for n, ty := range t.attrDefs {
		m.AttrDefs[n] = ty.String()
	}
	for _, list := range []struct {
		in  []*index
		out *[]indexMeta
	}{{t.gsis, &m.GSIs}, {t.lsis, &m.LSIs}} {
		for _, ix := range list.in {
			*list.out = append(*list.out, indexMeta{Name: ix.name, Key: ix.key.meta(), ProjType: ix.projType, NonKey: ix.nonKey,
				RCU: ix.rcu, WCU: ix.wcu, ARN: ix.arn, Created: ix.created.UnixNano()})
		}
	}
	if t.stream != nil {
		m.Stream = t.stream.ARN()
	}
	if t.latest != nil {
		m.Latest = t.latest.ARN()
	}
	if t.repl != nil && t.repl.g != nil {
		m.Replicas, m.Strong = t.repl.g.snapshot()
	}
	js, _ := json.Marshal(m) // plain strings and numbers always marshal
	return js
}

// loader rebuilds the engine's state from a snapshot and the log.
type loader struct {
	e       *Engine
	pending map[uint64]*replOp // replication ops logged and not yet acknowledged
	last    itemChange         // the last item change replayed, for a recRepl in its group
	p       *persister         // the tables' persister
	byID    map[string]*table
	meta    map[*table]*tableMeta // the latest metadata of each table
	ev      stream.Event
}

// load reads DIR/snapshot (when there is one) and replays the log after
// it. It returns the newest log segment's number and the bytes of log
// replayed.
func (p *persister) load() (last uint64, replayed int64, err error) {
	l := &loader{e: p.e, p: p, byID: map[string]*table{}, meta: map[*table]*tableMeta{}, pending: map[uint64]*replOp{}}
	from, err := l.readSnapshot(filepath.Join(p.dir, snapshotFile))
	if err != nil {
		return 0, 0, err
	}
	last, err = wal.Replay(p.dir, from, func(payload []byte) error {
		replayed += int64(len(payload)) + wal.HeaderSize
		return l.apply(payload)
	})
	if err != nil {
		return 0, 0, fmt.Errorf("engine: data directory %s: %w", p.dir, err)
	}
	if err := l.finish(); err != nil {
		return 0, 0, fmt.Errorf("engine: data directory %s: %w", p.dir, err)
	}
	return last, replayed, nil
}

// readSnapshot loads the snapshot at path and returns the first log
// segment it does not cover (1 when there is no snapshot).
func (l *loader) readSnapshot(path string) (uint64, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return 1, nil
	}
	if err != nil {
		return 0, fmt.Errorf("engine: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("engine: %w", err)
	}
	var from uint64
	var n int
	ended := false
	off, err := wal.ReadFrames(bufio.NewReaderSize(f, 1<<20), st.Size(), func(p []byte) error {
		n++
		switch {
		case ended:
			return errors.New("data after the end entry")
		case n == 1:
			d := dec{b: p}
			if len(p) == 0 || p[0] != recSnapHeader {
				return errors.New("not a snapshot: no header")
			}
			d.b = d.b[1:]
			if v := d.u64(); v != snapVersion {
				return fmt.Errorf("snapshot format %d, this engine reads %d", v, snapVersion)
			}
			from = d.u64()
			return d.err
		case len(p) == 1 && p[0] == recSnapEnd:
			ended = true
			return nil
		}
		return l.apply(p)
	})
	if err == nil && !ended {
		err = errors.New("the snapshot has no end entry (cut short)")
	}
	if err != nil {
		return 0, fmt.Errorf("engine: snapshot %s: entry at offset %d: %w", path, off, err)
	}
	return from, nil
}

// apply replays one entry.
func (l *loader) apply(p []byte) error {
	if len(p) == 0 {
		return errors.New("empty entry")
	}
	d := dec{b: p[1:]}
	switch p[0] {
	case recTableMeta:
		return l.tableMeta(p[1:])
	case recTableDeleted:
		id := d.str()
		if t := l.byID[id]; t != nil {
			if l.e.tables[t.tkey()] == t {
				delete(l.e.tables, t.tkey())
			}
			delete(l.byID, id)
			delete(l.meta, t)
		}
		return d.err
	case recItemPut:
		// The ID is looked up as the payload's bytes, not copied to a
		// string per item (a million-item load made 61 MB of garbage).
		id, key, size, raw := d.raw(), d.raw(), d.u64(), d.raw()
		if d.err != nil {
			return d.err
		}
		if t := l.byID[string(id)]; t != nil {
			e := newStoredEntry(key, raw, int32(size))
			t.items.Put(e.key(), e, noExpiry) // rebuild sets expiries
			l.last = itemChange{key: e.key(), raw: e.raw(), size: int32(size)}
		}
		return nil
	case recItemDeleted:
		id, key := d.raw(), d.raw()
		if t := l.byID[string(id)]; t != nil && d.err == nil {
			t.items.Delete(key)
		}
		l.last = itemChange{}
		return d.err
	case recStream:
		l.ev = stream.Event{}
		if err := decodeStreamEvent(&d, &l.ev); err != nil {
			return err
		}
		return l.e.streams.Apply(&l.ev)
	case recGroup:
		return l.group(p[1:])
	case recRepl:
		return l.replay(&d)
	case recReplOp:
		return l.replayOp(&d)
	}
	return fmt.Errorf("unknown entry kind %d", p[0])
}

// group replays the entries of a recGroup, which hold no groups.
func (l *loader) group(b []byte) error {
	for len(b) > 0 {
		if len(b) < 4 {
			return errShort
		}
		n := binary.LittleEndian.Uint32(b)
		if uint64(n) > uint64(len(b)-4) || n == 0 {
			return fmt.Errorf("group member of %d bytes in %d", n, len(b)-4)
		}
		sub := b[4 : 4+n]
		if sub[0] == recGroup {
			return errors.New("a group inside a group")
		}
		if err := l.apply(sub); err != nil {
			return err
		}
		b = b[4+n:]
	}
	return nil
}

// tableMeta creates the table the metadata describes, or updates it.
func (l *loader) tableMeta(js []byte) error {
	m := &tableMeta{}
	if err := json.Unmarshal(js, m); err != nil {
		return fmt.Errorf("table metadata: %w", err)
	}
	t := l.byID[m.ID]
	if t == nil {
		created := time.Unix(0, m.Created).UTC()
		region := m.Region
		if region == "" { // kept before Regions: its ARN says where
			region = arnRegion(m.ARN)
		}
		if !validRegion(region) {
			return fmt.Errorf("table %s: Region %q is not a Region name", m.Name, region)
		}
		t = &table{name: m.Name, region: region, arn: m.ARN, id: m.ID, created: created, lagNanos: int64(l.e.o.TTLLag), p: l.p,
			items: newItemList(uint64(m.Created) ^ uint64(len(l.byID)))}
		l.byID[m.ID] = t
	}
	var err error
	if t.key, err = m.Key.keyDef(); err != nil {
		return fmt.Errorf("table %s: %w", m.Name, err)
	}
	t.attrDefs = map[string]attr.Type{}
	for n, s := range m.AttrDefs {
		ty, ok := attr.ParseType(s)
		if !ok {
			return fmt.Errorf("table %s: attribute %s has type %q", m.Name, n, s)
		}
		t.attrDefs[n] = ty
	}
	t.billing, t.rcu, t.wcu, t.ttlAttr = m.Billing, m.RCU, m.WCU, m.TTLAttr
	t.deletion, t.tags, t.tableClass = m.Deletion, m.Tags, m.TableClass
	l.e.tables[t.tkey()] = t
	l.meta[t] = m
	return nil
}

// indexesOf builds a table's index definitions, empty, from its metadata.
func indexesOf(list []indexMeta, global bool) ([]*index, error) {
	var out []*index
	for _, im := range list {
		k, err := im.Key.keyDef()
		if err != nil {
			return nil, fmt.Errorf("index %s: %w", im.Name, err)
		}
		created := time.Unix(0, im.Created).UTC()
		out = append(out, &index{name: im.Name, global: global, key: k, projType: im.ProjType, nonKey: im.NonKey,
			rcu: im.RCU, wcu: im.WCU, arn: im.ARN, created: created, list: newSkiplist(uint64(im.Created) ^ uint64(len(im.Name)))})
	}
	return out, nil
}

// finish resolves each table's streams and builds its indexes, size and
// item expiries from its items, reading only the attributes they need.
func (l *loader) finish() error {
	groups := map[string]*group{}
	for t, m := range l.meta {
		if m.Creating { // a replica whose copy a crash cut short
			delete(l.e.tables, t.tkey())
			delete(l.meta, t)
			continue
		}
		if len(m.Replicas) < 2 || !slices.Contains(m.Replicas, t.region) {
			t.repl = nil
			continue
		}
		k := t.name + "\x00" + strings.Join(m.Replicas, ",")
		g := groups[k]
		if g == nil {
			g = &group{name: t.name, regions: slices.Clone(m.Replicas), strong: m.Strong}
			groups[k] = g
		}
		if t.repl == nil {
			t.repl = newReplState(l.e, g)
		}
		t.repl.g = g
		for _, s := range t.repl.stamps {
			if s.gone {
				t.repl.tombs++
			}
		}
	}
	defer l.restoreQueue()
	for t, m := range l.meta {
		var err error
		if t.gsis, err = indexesOf(m.GSIs, true); err != nil {
			return fmt.Errorf("table %s: %w", t.name, err)
		}
		if t.lsis, err = indexesOf(m.LSIs, false); err != nil {
			return fmt.Errorf("table %s: %w", t.name, err)
		}
		if m.Stream != "" {
			t.stream = l.e.streams.Lookup(m.Stream)
		}
		if m.Latest != "" {
			t.latest = l.e.streams.Lookup(m.Latest)
		}
		t.ktoks = t.keyToks()
		if err := t.rebuild(); err != nil {
			return fmt.Errorf("table %s: %w", t.name, err)
		}
	}
	return nil
}

// rebuild computes the table's size, its items' expiries and its indexes
// from its items.
func (t *table) rebuild() error {
	needed := t.sweepAttrs()
	var ttlTok string
	if t.ttlAttr != "" {
		ttlTok = jsonToken(t.ttlAttr)
		needed = append(needed, attrTok{t.ttlAttr, ttlTok})
	}
	part := make(attr.Item, len(needed))
	indexes := append(append([]*index(nil), t.lsis...), t.gsis...)
	t.size = 0
	for n := t.items.First(); n != nil; n = n.Next() {
		ent := n.val
		t.size += int64(ent.size)
		clear(part)
		var err error
		members(ent.raw(), func(name, val []byte) bool {
			for _, a := range needed {
				if string(name) == a.tok {
					var v attr.Value
					if err = v.UnmarshalJSON(val); err != nil {
						return false
					}
					part[a.name] = v
				}
			}
			return true
		})
		if err != nil {
			return fmt.Errorf("item %s: %w", ent.raw(), err)
		}
		n.exp = t.expiry(part)
		for _, ix := range indexes {
			ix.add(t, ent, part)
		}
	}
	return nil
}
