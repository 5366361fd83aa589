package engine

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/ttl-archiver/archiver/engine/internal/stream"
)

// The payloads of the write-ahead log's entries and the snapshot's, each a
// kind byte followed by its fields: strings and byte strings as a uvarint
// length then the bytes, numbers as uvarints. The kinds are stored on disk:
// never renumber them.
const (
	recTableMeta    byte = 1  // JSON tableMeta: a table created or changed (schema, indexes, TTL, tags, streams)
	recTableDeleted byte = 2  // table ID
	recItemPut      byte = 3  // table ID, storage key, item size, stored JSON
	recItemDeleted  byte = 4  // table ID, storage key
	recStream       byte = 5  // a stream.Event
	recGroup        byte = 6  // entries made durable together (a change and its record, a transaction): each a 4-byte little-endian length, then the entry
	recSnapHeader   byte = 16 // snapshot format version, first WAL segment it does not cover
	recSnapEnd      byte = 17 // the snapshot is complete
)

// snapVersion is the snapshot format version.
const snapVersion = 1

func putStr(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

func putBytes(b, p []byte) []byte {
	return append(binary.AppendUvarint(b, uint64(len(p))), p...)
}

func putBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// dec reads a payload; the first failure sticks in err and later reads
// return zero values.
type dec struct {
	b   []byte
	err error
}

var errShort = errors.New("entry is shorter than its fields")

func (d *dec) u64() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errShort
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) u32() uint32 { return uint32(d.u64()) }

func (d *dec) i64() int64 { return int64(d.u64()) }

// raw returns the next byte string, aliasing the payload.
func (d *dec) raw() []byte {
	n := d.u64()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.err = errShort
		return nil
	}
	p := d.b[:n:n]
	d.b = d.b[n:]
	return p
}

func (d *dec) str() string { return string(d.raw()) }

func (d *dec) bool() bool {
	if d.err != nil {
		return false
	}
	if len(d.b) == 0 {
		d.err = errShort
		return false
	}
	v := d.b[0] != 0
	d.b = d.b[1:]
	return v
}

// appendItemPut encodes a stored item of the table with this ID.
func appendItemPut(b []byte, tableID string, e *entry) []byte {
	b = append(b, recItemPut)
	b = putStr(b, tableID)
	b = putBytes(b, e.key())
	b = binary.AppendUvarint(b, uint64(e.size))
	return putBytes(b, e.raw())
}

// appendItemChange encodes key of the table with this ID now holding ne
// (nil: deleted).
func appendItemChange(b []byte, tableID string, key []byte, ne *entry) []byte {
	if ne != nil {
		return appendItemPut(b, tableID, ne)
	}
	return appendItemDeleted(b, tableID, key)
}

// appendChange encodes an item change and ev, the stream record that
// describes it (nil: none), as one entry: a recGroup of the two, so that
// a crash keeps both or neither.
func appendChange(b []byte, tableID string, key []byte, ne *entry, ev *stream.Event, rw *replWrite) []byte {
	if ev == nil && rw == nil {
		return appendItemChange(b, tableID, key, ne)
	}
	b = append(b, recGroup)
	b = appendMember(b, func(b []byte) []byte { return appendItemChange(b, tableID, key, ne) })
	if ev != nil {
		b = appendMember(b, func(b []byte) []byte { return appendStreamEvent(b, ev) })
	}
	if rw != nil {
		b = appendMember(b, func(b []byte) []byte { return appendRepl(b, rw) })
	}
	return b
}

// appendTx encodes a transaction's writes, each followed by its stream
// record (evs[i] for writes[i], nil: none), as one recGroup: a crash keeps
// the whole transaction or none of it.
func appendTx(b []byte, writes []txWrite, evs []*stream.Event) []byte {
	b = append(b, recGroup)
	for _, w := range writes {
		b = appendMember(b, func(b []byte) []byte { return appendItemChange(b, w.t.id, w.key, w.ne) })
		if w.rec >= 0 && evs[w.rec] != nil {
			b = appendMember(b, func(b []byte) []byte { return appendStreamEvent(b, evs[w.rec]) })
		}
		if w.rw != nil {
			b = appendMember(b, func(b []byte) []byte { return appendRepl(b, w.rw) })
		}
	}
	return b
}

// appendMember appends one member of a recGroup: its 4-byte little-endian
// length, then the entry enc appends.
func appendMember(b []byte, enc func([]byte) []byte) []byte {
	start := len(b)
	b = enc(append(b, 0, 0, 0, 0))
	binary.LittleEndian.PutUint32(b[start:], uint32(len(b)-start-4))
	return b
}

func appendItemDeleted(b []byte, tableID string, key []byte) []byte {
	b = append(b, recItemDeleted)
	b = putStr(b, tableID)
	return putBytes(b, key)
}

// appendStreamEvent encodes a stream event.
func appendStreamEvent(b []byte, ev *stream.Event) []byte {
	b = append(b, recStream, byte(ev.Kind))
	b = binary.AppendUvarint(b, uint64(ev.Stream))
	switch ev.Kind {
	case stream.EvRecord:
		r := &ev.Record
		b = binary.AppendUvarint(b, uint64(ev.Shard.Ord))
		b = binary.AppendUvarint(b, r.Seq)
		b = binary.AppendUvarint(b, uint64(r.At))
		b = putStr(b, r.Event)
		b = putBool(b, r.Service)
		b = binary.AppendUvarint(b, uint64(r.Size))
		// Keys, NewImage and OldImage, one after the other, as one field.
		b = binary.AppendUvarint(b, uint64(len(r.Keys)))
		b = binary.AppendUvarint(b, uint64(len(r.Keys)+len(r.New)))
		b = binary.AppendUvarint(b, uint64(len(r.Keys)+len(r.New)+len(r.Old)))
		b = append(append(append(b, r.Keys...), r.New...), r.Old...)
	case stream.EvStreamCreated, stream.EvStreamState, stream.EvKeySchema:
		h := &ev.Header
		for _, s := range []string{h.ARN, h.Label, h.Table, h.ViewType, h.HashKey, h.RangeKey, h.Status} {
			b = putStr(b, s)
		}
		b = binary.AppendUvarint(b, uint64(h.Created))
		b = binary.AppendUvarint(b, h.Salt)
		b = binary.AppendUvarint(b, h.LastSeq)
		b = binary.AppendUvarint(b, uint64(h.NextShardOrd))
		b = binary.AppendUvarint(b, uint64(len(h.Known)))
		for id, ord := range h.Known {
			b = putStr(b, id)
			b = binary.AppendUvarint(b, uint64(ord))
		}
	case stream.EvShardOpened, stream.EvShardClosed, stream.EvShardState:
		s := &ev.Shard
		b = binary.AppendUvarint(b, uint64(s.Ord))
		b = putStr(b, s.ID)
		b = putStr(b, s.Parent)
		for _, v := range []uint64{s.Lo, s.Hi, uint64(s.Created), s.Start, s.End, uint64(s.ClosedAt), uint64(s.Count), s.Trimmed} {
			b = binary.AppendUvarint(b, v)
		}
	case stream.EvTrimmed:
		b = binary.AppendUvarint(b, uint64(ev.At))
	case stream.EvShardsDropped:
		b = binary.AppendUvarint(b, uint64(len(ev.Dropped)))
		for _, o := range ev.Dropped {
			b = binary.AppendUvarint(b, uint64(o))
		}
	}
	return b
}

// decodeStreamEvent decodes what appendStreamEvent wrote after the kind
// byte recStream. Byte strings alias the payload.
func decodeStreamEvent(d *dec, ev *stream.Event) error {
	if len(d.b) == 0 {
		return errShort
	}
	ev.Kind = stream.EventKind(d.b[0])
	d.b = d.b[1:]
	ev.Stream = d.u32()
	switch ev.Kind {
	case stream.EvRecord:
		r := &ev.Record
		ev.Shard.Ord = d.u32()
		r.Seq, r.At, r.Event, r.Service = d.u64(), d.i64(), d.str(), d.bool()
		var kEnd, nEnd uint32
		var data []byte
		r.Size, kEnd, nEnd, data = d.u32(), d.u32(), d.u32(), d.raw()
		if d.err == nil && (kEnd > nEnd || int(nEnd) > len(data)) {
			return fmt.Errorf("stream record %d: image bounds %d/%d outside its %d bytes", r.Seq, kEnd, nEnd, len(data))
		}
		if d.err == nil {
			r.Keys, r.New, r.Old = data[:kEnd], data[kEnd:nEnd], data[nEnd:]
		}
	case stream.EvStreamCreated, stream.EvStreamState, stream.EvKeySchema:
		h := &ev.Header
		for _, s := range []*string{&h.ARN, &h.Label, &h.Table, &h.ViewType, &h.HashKey, &h.RangeKey, &h.Status} {
			*s = d.str()
		}
		h.Created, h.Salt, h.LastSeq, h.NextShardOrd = d.i64(), d.u64(), d.u64(), d.u32()
		n := d.u64()
		for i := uint64(0); i < n && d.err == nil; i++ {
			if h.Known == nil {
				h.Known = map[string]uint32{}
			}
			id := d.str()
			h.Known[id] = d.u32()
		}
	case stream.EvShardOpened, stream.EvShardClosed, stream.EvShardState:
		s := &ev.Shard
		s.Ord, s.ID, s.Parent = d.u32(), d.str(), d.str()
		s.Lo, s.Hi, s.Created, s.Start = d.u64(), d.u64(), d.i64(), d.u64()
		s.End, s.ClosedAt, s.Count, s.Trimmed = d.u64(), d.i64(), int(d.u64()), d.u64()
	case stream.EvTrimmed:
		ev.At = d.i64()
	case stream.EvShardsDropped:
		n := d.u64()
		for i := uint64(0); i < n && d.err == nil; i++ {
			ev.Dropped = append(ev.Dropped, d.u32())
		}
	case stream.EvDisabled, stream.EvStreamDropped:
	default:
		return fmt.Errorf("unknown stream event kind %d", ev.Kind)
	}
	return d.err
}
