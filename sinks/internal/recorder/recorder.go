// Package recorder records coverage manifests for the sinks that keep an
// archive (S3 and file): it tracks, per shard, the objects a sink made
// durable since the shard's last manifest, decides when a shard's range is
// due, finds the manifest a range follows and writes the next one through
// the sink's [Store]. The manifest format is package manifest's.
package recorder

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/promreg"
	"github.com/ttl-archiver/archiver/manifest"
	"github.com/ttl-archiver/archiver/sinks/sinkapi"
	"github.com/ttl-archiver/archiver/sinkurl"
)

// ErrNotRecording is returned by Record of a sink opened with
// manifests=false.
var ErrNotRecording = errors.New("the sink records no manifests (manifests=false)")

// ErrConflict is returned (marked permanent) when a key and its
// alternative (a manifest's conflict key, an S3 object's distinct key)
// both hold other bytes than the sink would write. The S3 and file sinks
// share it.
var ErrConflict = errors.New("object exists with other events")

// Store is where a sink keeps its manifests: its archive, keys relative
// to the archive's root. Its sink fills it with its own methods.
type Store struct {
	// List returns the keys beginning with prefix, in order; a folder
	// that does not exist holds none.
	List func(ctx context.Context, prefix string) ([]string, error)
	// Read returns the bytes at key, at most MaxBytes+1.
	Read func(ctx context.Context, key string) ([]byte, error)
	// Put makes data (m encoded) durable at the first of [Keys], never
	// over other bytes: when other bytes are there, at the second; when
	// that too holds other bytes, it fails (permanently). It returns the
	// key written (or found holding data) and the stored bytes' digest.
	Put func(ctx context.Context, m manifest.Manifest, data []byte) (key, digest string, err error)
}

// Keys are where a manifest of m (data, encoded) is put: its key
// first, its conflict key when the key holds other bytes. A shard's
// last, empty range (To, To] ends where the range before it does, whose
// manifest holds its key: it goes to its conflict key first, one PUT
// instead of a refused one, a read and a second, and its key is the
// fallback.
func Keys(m manifest.Manifest, data []byte) (key, alt string) {
	key, alt = manifest.Key(m), manifest.ConflictKey(m, manifest.Digest(data))
	if m.From != "" && m.From == m.To {
		return alt, key
	}
	return key, alt
}

// MaxBytes bounds a manifest read back (as manifest.Decode does).
const MaxBytes = 16 << 20

// SameProof reports whether the manifest stored (as read back) proves
// what data does: the two are equal but for when and by whom they were
// written. A range recorded again after a crash between its manifest and
// its checkpoint is such a proof, and keeps the manifest already there
// (the next manifest chains to the stored bytes' digest), so recording
// stays idempotent.
func SameProof(stored, data []byte) bool {
	a, err := manifest.Decode(bytes.NewReader(stored))
	if err != nil {
		return false
	}
	b, err := manifest.Decode(bytes.NewReader(data))
	if err != nil {
		return false
	}
	a.Written, b.Written, a.Writer, b.Writer = time.Time{}, time.Time{}, "", ""
	return bytes.Equal(manifest.Encode(a), manifest.Encode(b))
}

// Recorder keeps, per shard, the objects its sink made durable since the
// shard's last manifest, decides when a shard's range is due, and writes
// the manifests. Its lock is a leaf: held for bookkeeping only, never
// across I/O.
type Recorder struct {
	sink    string
	c       sinkurl.ManifestConfig
	store   Store
	log     *zap.Logger
	now     func() time.Time
	written prometheus.Counter
	failed  prometheus.Counter

	mu     sync.Mutex
	shards map[ShardRef]*shardRecord
	swept  time.Time
}

// ShardRef names a shard: its stream's ARN and its ID.
type ShardRef struct{ Stream, Shard string }

// shardRecord is what a recorder knows of one shard: the objects holding
// its events since its last manifest (by key), when that manifest was
// written (or when the sink first heard of the shard), and that
// manifest's digest and To, the next range's predecessor.
type shardRecord struct {
	objects map[string]manifest.Object
	since   time.Time
	prev    string
	prevTo  string
	hasPrev bool
}

// New returns the recorder of the sink named sink, which keeps its
// manifests in store, with its counters registered with reg (none when
// reg is nil) and now its clock.
func New(sink string, c sinkurl.ManifestConfig, store Store, log *zap.Logger, reg prometheus.Registerer, now func() time.Time) *Recorder {
	written := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "archiver_manifests_written_total", Help: "Coverage manifests a sink made durable in its archive.",
	}, []string{"sink"})
	failed := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "archiver_manifest_failures_total", Help: "Coverage manifests a sink failed to record (the range is recorded again).",
	}, []string{"sink"})
	if reg != nil {
		written = promreg.Register(reg, written)
		failed = promreg.Register(reg, failed)
	}
	return &Recorder{sink: sink, c: c.WithDefaults(), store: store, log: log, now: now,
		written: written.WithLabelValues(sink), failed: failed.WithLabelValues(sink), shards: map[ShardRef]*shardRecord{}}
}

// shardLocked returns ref's record, creating it. r.mu is held.
func (r *Recorder) shardLocked(ref ShardRef) *shardRecord {
	sr := r.shards[ref]
	if sr == nil {
		sr = &shardRecord{objects: map[string]manifest.Object{}, since: r.now()}
		r.shards[ref] = sr
	}
	return sr
}

// Track books an object made durable holding events of ref, before their
// batches are acknowledged. An object already tracked under the same key
// (a file that grew; an upload found already there) is updated: its size
// and digest are the new ones, its First the earlier and its Last the
// later.
func (r *Recorder) Track(ref ShardRef, o manifest.Object) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sr := r.shardLocked(ref)
	if old, ok := sr.objects[o.Key]; ok {
		if old.First != "" && (o.First == "" || event.CompareSequence(old.First, o.First) < 0) {
			o.First = old.First
		}
		if old.Last != "" && (o.Last == "" || event.CompareSequence(old.Last, o.Last) > 0) {
			o.Last = old.Last
		}
	}
	sr.objects[o.Key] = o
}

// Due reports whether the shard's range should be recorded now: it has
// Objects objects tracked, or Interval passed since its last manifest
// (since the sink first heard of it, before one).
func (r *Recorder) Due(stream, shard string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	sr := r.shardLocked(ShardRef{Stream: stream, Shard: shard})
	return len(sr.objects) >= r.c.Objects || r.now().Sub(sr.since) >= r.c.Interval
}

// Record makes a manifest of rg durable: the objects tracked with events
// in (From, To], the digest of the manifest before it, stored at its key.
// Once it is durable, the objects whose last event is at or before To are
// no longer tracked.
func (r *Recorder) Record(ctx context.Context, rg manifest.Range) error {
	err := r.recordRange(ctx, rg)
	if err != nil {
		r.failed.Inc()
		r.log.Warn("coverage manifest not recorded; the range is recorded again", zap.String("sink", r.sink),
			zap.String("shard", rg.ShardID), zap.String("from", rg.From), zap.String("to", rg.To), zap.Error(err))
	}
	return err
}

func (r *Recorder) recordRange(ctx context.Context, rg manifest.Range) error {
	ref := ShardRef{Stream: rg.StreamARN, Shard: rg.ShardID}
	objects, prev, known := r.begin(ref, rg)
	if !known {
		var err error
		if prev, err = r.findPrev(ctx, rg); err != nil {
			return err
		}
	}
	m := manifest.New(rg, objects, prev, r.c.Writer, r.now())
	if err := m.Validate(); err != nil {
		return sinkapi.Permanent(fmt.Errorf("%s: range of shard %s: %w", r.sink, rg.ShardID, err))
	}
	data := manifest.Encode(m)
	key, digest, err := r.store.Put(ctx, m, data)
	if err != nil {
		return fmt.Errorf("%s: recording shard %s after %q to %s: %w", r.sink, rg.ShardID, rg.From, rg.To, err)
	}
	r.finish(ref, rg, digest)
	r.written.Inc()
	r.log.Debug("coverage manifest recorded", zap.String("sink", r.sink), zap.String("key", key),
		zap.String("shard", rg.ShardID), zap.String("from", rg.From), zap.String("to", rg.To), zap.Int("objects", len(objects)))
	return nil
}

// begin returns the tracked objects with events in rg's range, and the
// digest of the shard's last manifest when this recorder wrote it and it
// ends at rg.From (known).
func (r *Recorder) begin(ref ShardRef, rg manifest.Range) (objects []manifest.Object, prev string, known bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sr := r.shardLocked(ref)
	for _, o := range sr.objects {
		if inRange(o, rg.From, rg.To) {
			objects = append(objects, o)
		}
	}
	if sr.hasPrev && sr.prevTo == rg.From && rg.From != "" {
		return objects, sr.prev, true
	}
	return objects, "", false
}

// inRange reports whether o holds an event in (from, to] (an object whose
// sequence numbers are unknown counts).
func inRange(o manifest.Object, from, to string) bool {
	if o.Last != "" && from != "" && event.CompareSequence(o.Last, from) <= 0 {
		return false
	}
	return o.First == "" || event.CompareSequence(o.First, to) <= 0
}

// finish forgets the objects rg's manifest closed (last event at or
// before To) and remembers the manifest as the shard's last. A shard
// recorded to its end with nothing left is forgotten, as are, once a
// minute, shards idle with nothing tracked.
func (r *Recorder) finish(ref ShardRef, rg manifest.Range, digest string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	sr := r.shardLocked(ref)
	for k, o := range sr.objects {
		if o.Last == "" || event.CompareSequence(o.Last, rg.To) <= 0 {
			delete(sr.objects, k)
		}
	}
	sr.prev, sr.prevTo, sr.hasPrev, sr.since = digest, rg.To, true, now
	if rg.Ended && len(sr.objects) == 0 {
		delete(r.shards, ref)
	}
	if now.Sub(r.swept) < time.Minute {
		return
	}
	r.swept = now
	idle := max(3*r.c.Interval, time.Hour)
	for k, s := range r.shards {
		if len(s.objects) == 0 && now.Sub(s.since) >= idle {
			delete(r.shards, k)
		}
	}
}

// findPrev finds in the archive the manifest rg follows: the shard's
// manifest ending at rg.From, or for a range at the shard's start its
// parent's last (ended) one. It returns "" when there is none (a shard
// without a parent, an archive recorded only from here on).
func (r *Recorder) findPrev(ctx context.Context, rg manifest.Range) (string, error) {
	if rg.From == "" {
		if rg.ParentShardID == "" {
			return "", nil
		}
		return r.parentsLast(ctx, rg)
	}
	prefix := manifest.EndingAt(rg.Table, rg.Region, rg.StreamARN, rg.ShardID, rg.From)
	keys, err := r.store.List(ctx, prefix)
	if err != nil {
		return "", fmt.Errorf("listing the manifests ending at %s: %w", rg.From, err)
	}
	// The manifest at its own key first, then those at conflict keys.
	want := manifest.Key(manifest.Manifest{Table: rg.Table, Region: rg.Region, Stream: rg.StreamARN, Shard: rg.ShardID, To: rg.From})
	for i, k := range keys {
		if k == want {
			keys[0], keys[i] = keys[i], keys[0]
		}
	}
	for _, k := range keys {
		m, digest, err := r.load(ctx, k)
		if err != nil {
			return "", err
		}
		if digest != "" && m.Stream == rg.StreamARN && m.Shard == rg.ShardID && m.To == rg.From {
			return digest, nil
		}
	}
	return "", nil
}

// parentsLast is the digest of the last manifest of rg's parent when it
// says the parent was read to its end, else "".
func (r *Recorder) parentsLast(ctx context.Context, rg manifest.Range) (string, error) {
	keys, err := r.store.List(ctx, manifest.ShardDir(rg.Table, rg.Region, rg.StreamARN, rg.ParentShardID))
	if err != nil {
		return "", fmt.Errorf("listing the manifests of parent shard %s: %w", rg.ParentShardID, err)
	}
	top := ""
	for i := len(keys) - 1; i >= 0; i-- {
		m, digest, err := r.load(ctx, keys[i])
		if err != nil {
			return "", err
		}
		if digest == "" || m.Stream != rg.StreamARN || m.Shard != rg.ParentShardID {
			continue
		}
		if top != "" && m.To != top {
			break // past the manifests of the parent's last range
		}
		top = m.To
		if m.Ended {
			return digest, nil
		}
	}
	return "", nil
}

// load reads and decodes the manifest at key and returns it with its
// digest; one that does not decode is logged and skipped (digest "": the
// verifier reports it), never an error. Only a failed read is.
func (r *Recorder) load(ctx context.Context, key string) (manifest.Manifest, string, error) {
	data, err := r.store.Read(ctx, key)
	if err != nil {
		return manifest.Manifest{}, "", fmt.Errorf("reading manifest %s: %w", key, err)
	}
	m, err := manifest.Decode(bytes.NewReader(data))
	if err != nil {
		r.log.Warn("a manifest in the archive does not decode; not taken as the previous one (verify reports it)",
			zap.String("sink", r.sink), zap.String("key", key), zap.Error(err))
		return manifest.Manifest{}, "", nil
	}
	return m, manifest.Digest(data), nil
}

// SetClock makes now the recorder's clock (tests move it by hand).
func (r *Recorder) SetClock(now func() time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.now = now
}

// Shards is how many shards the recorder keeps a record of.
func (r *Recorder) Shards() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.shards)
}
