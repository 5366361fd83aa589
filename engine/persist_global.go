package engine

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sort"
)

// Persistence of replication. A replica's write is logged in one entry
// (a recGroup) with its stream record and a recRepl member: the key's new
// stamp and, for a local write, the ops it queues for the other replicas
// (their content is the item change of the same group), or, for a
// replicated write, the op it applies (ack). A crash thus keeps the write
// with its pending replication, or neither; and the destination's effect
// with its acknowledgement, or neither, so a replicated write is applied
// exactly once across a restart. Start-up queues again every op logged
// and not acknowledged, in ID order (a pair's order). The snapshot holds
// each replica's stamps (recRepl, set only) and the ops still queued
// (recReplOp, whole).

const (
	recRepl   byte = 7 // tableID, key, flags (1 set, 2 gone), ts, origin, ack, then ops: count, each id, dst, at
	recReplOp byte = 8 // a queued op, whole: id, src, dst, table, key, flags (1 deleted), raw, size, ts, origin, at
)

func appendRepl(b []byte, rw *replWrite) []byte {
	b = append(b, recRepl)
	b = putStr(b, rw.tableID)
	b = putBytes(b, rw.key)
	var flags uint64
	if rw.set {
		flags |= 1
	}
	if rw.gone {
		flags |= 2
	}
	b = binary.AppendUvarint(b, flags)
	b = binary.AppendUvarint(b, uint64(rw.st.ts))
	b = putStr(b, rw.st.origin)
	b = binary.AppendUvarint(b, rw.ack)
	b = binary.AppendUvarint(b, uint64(len(rw.ops)))
	for _, op := range rw.ops {
		b = binary.AppendUvarint(b, op.id)
		b = putStr(b, op.dst)
		b = binary.AppendUvarint(b, uint64(op.at))
	}
	return b
}

func appendReplOp(b []byte, op *replOp) []byte {
	b = append(b, recReplOp)
	b = binary.AppendUvarint(b, op.id)
	for _, s := range []string{op.src, op.dst, op.table} {
		b = putStr(b, s)
	}
	b = putBytes(b, op.key)
	var flags uint64
	if op.raw == nil {
		flags = 1
	}
	b = binary.AppendUvarint(b, flags)
	b = putBytes(b, op.raw)
	b = binary.AppendUvarint(b, uint64(op.size))
	b = binary.AppendUvarint(b, uint64(op.st.ts))
	b = putStr(b, op.st.origin)
	return binary.AppendUvarint(b, uint64(op.at))
}

// logRepl logs a replication entry alone: an acknowledgement, or a
// tombstone a replicated delete leaves where there was no item.
func (p *persister) logRepl(rw *replWrite) error {
	return p.tryLog(func(b []byte) []byte { return appendRepl(b, rw) })
}

// itemChange is the last item change the loader replayed: a recRepl in
// the same group takes its ops' content from it.
type itemChange struct {
	key  []byte
	raw  []byte // nil: deleted
	size int32
}

// replay applies a recRepl: the stamp to its table, the ack to the queue,
// and queues its ops with the content of the group's item change.
func (l *loader) replay(d *dec) error {
	id, key := d.str(), d.raw()
	flags, ts, origin, ack, n := d.u64(), d.i64(), d.str(), d.u64(), d.u64()
	if d.err != nil {
		return d.err
	}
	if ack != 0 {
		delete(l.pending, ack)
	}
	t := l.byID[id]
	if t != nil && flags&1 != 0 {
		if t.repl == nil {
			t.repl = newReplState(l.e, nil)
		}
		k := string(key)
		t.repl.stamps[k] = itemStamp{st: stamp{ts: ts, origin: origin}, gone: flags&2 != 0}
	}
	for i := uint64(0); i < n && d.err == nil; i++ {
		oid, dst, at := d.u64(), d.str(), d.i64()
		if t == nil || d.err != nil {
			continue
		}
		op := &replOp{id: oid, src: t.region, dst: dst, table: t.name, key: []byte(string(key)), st: stamp{ts, origin}, at: at}
		if c := l.last; c.raw != nil && string(c.key) == string(key) {
			op.raw, op.size = c.raw, c.size
		}
		l.pending[oid] = op
	}
	return d.err
}

// replayOp queues a whole op from the snapshot.
func (l *loader) replayOp(d *dec) error {
	op := &replOp{id: d.u64(), src: d.str(), dst: d.str(), table: d.str(), key: []byte(string(d.raw()))}
	flags := d.u64()
	raw := d.raw()
	op.size, op.st.ts, op.st.origin, op.at = int32(d.u64()), d.i64(), d.str(), d.i64()
	if d.err != nil {
		return d.err
	}
	if flags&1 == 0 {
		op.raw = append([]byte{}, raw...)
	}
	if !validRegion(op.src) || !validRegion(op.dst) {
		return fmt.Errorf("replication op %d: Regions %q -> %q", op.id, op.src, op.dst)
	}
	l.pending[op.id] = op
	return nil
}

// restoreQueue queues the ops the log left unacknowledged, in ID order.
func (l *loader) restoreQueue() {
	ops := make([]*replOp, 0, len(l.pending))
	for _, op := range l.pending {
		ops = append(ops, op)
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].id < ops[j].id })
	l.e.repl.enqueue(ops)
}

// writeRepl writes a replica's stamps to the snapshot. t.mu is not held.
func (t *table) writeRepl(w *frameWriter) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.repl == nil {
		return
	}
	for k, s := range t.repl.stamps {
		w.put(appendRepl(w.scratch[:0], &replWrite{tableID: t.id, key: []byte(k), st: s.st, gone: s.gone, set: true}))
	}
}

// writeQueue writes the ops still queued to the snapshot.
func (r *replicator) writeQueue(w *frameWriter) {
	r.mu.Lock()
	var ops []*replOp
	for _, q := range r.queues {
		ops = append(ops, q...)
	}
	if r.flight != nil {
		ops = append(ops, r.flight)
	}
	r.mu.Unlock()
	for _, op := range ops {
		w.put(appendReplOp(w.scratch[:0], op))
	}
}

// tableCreating logs nt, a replica being created, marked creating, and
// its items. t.mu of the table it copies is held.
func (p *persister) tableCreating(nt *table) {
	var m tableMeta
	_ = json.Unmarshal(nt.metaJSON(), &m) // it marshalled it
	m.Creating = true
	js, _ := json.Marshal(m)
	p.log.Append(func(b []byte) []byte { return append(append(b, recTableMeta), js...) })
	for n := nt.items.First(); n != nil; n = n.Next() {
		ent := n.val
		p.log.Append(func(b []byte) []byte { return appendItemPut(b, nt.id, ent) })
	}
	for k, s := range nt.repl.stamps {
		rw := &replWrite{tableID: nt.id, key: []byte(k), st: s.st, gone: s.gone, set: true}
		p.log.Append(func(b []byte) []byte { return appendRepl(b, rw) })
	}
}

// logMetas logs tables' metadata as one entry.
func (p *persister) logMetas(metas [][]byte) {
	p.log.Append(func(b []byte) []byte {
		b = append(b, recGroup)
		for _, js := range metas {
			b = appendMember(b, func(b []byte) []byte { return append(append(b, recTableMeta), js...) })
		}
		return b
	})
}
