package testkit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/manifest"
)

// Archive reads what a sink wrote: its manifests and its objects'
// bytes, keys relative to the archive's root.
type Archive interface {
	Keys(t testing.TB, prefix string) []string
	Bytes(t testing.TB, key string) []byte
}

// RangeOf is the range (from, to] of e's shard, with parent.
func RangeOf(e event.Event, parent, from, to string) manifest.Range {
	return manifest.Range{StreamARN: e.StreamARN, Region: e.Region, Table: e.Table, ShardID: e.ShardID, ParentShardID: parent,
		From: from, To: to, Records: 1, Events: map[event.Kind]int64{event.Expired: 1}}
}

// StoredManifests decodes every manifest of the archive.
func StoredManifests(t testing.TB, a Archive) []manifest.Stored {
	t.Helper()
	var out []manifest.Stored
	for _, k := range a.Keys(t, manifest.Dir) {
		if !manifest.IsKey(k) {
			continue
		}
		data := a.Bytes(t, k)
		m, err := manifest.Decode(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		out = append(out, manifest.Stored{Key: k, Digest: manifest.Digest(data), M: m})
	}
	return out
}

// LastManifest is the manifest of rg's range the archive holds (the one
// with the latest written time when there are several); manifests that
// do not decode are passed over.
func LastManifest(t testing.TB, a Archive, rg manifest.Range) manifest.Stored {
	t.Helper()
	var found *manifest.Stored
	for _, s := range StoredManifestsSkipping(t, a) {
		if s.M.Stream == rg.StreamARN && s.M.Shard == rg.ShardID && s.M.From == rg.From && s.M.To == rg.To &&
			(found == nil || s.M.Written.After(found.M.Written)) {
			found = &s
		}
	}
	if found == nil {
		t.Fatalf("no manifest of shard %s (%s, %s]", rg.ShardID, rg.From, rg.To)
	}
	return *found
}

// StoredManifestsSkipping is StoredManifests without those that do not
// decode.
func StoredManifestsSkipping(t testing.TB, a Archive) []manifest.Stored {
	var out []manifest.Stored
	for _, k := range a.Keys(t, manifest.Dir) {
		data := a.Bytes(t, k)
		if m, err := manifest.Decode(bytes.NewReader(data)); err == nil {
			out = append(out, manifest.Stored{Key: k, Digest: manifest.Digest(data), M: m})
		}
	}
	return out
}

// CheckListed checks that m lists exactly the objects want (keys), each
// with the size and SHA-256 of its bytes as stored (of the first Bytes
// bytes: a file grows), and returns them.
func CheckListed(t testing.TB, a Archive, m manifest.Manifest, want ...string) []manifest.Object {
	t.Helper()
	var got []string
	for _, o := range m.Objects {
		got = append(got, o.Key)
		data := a.Bytes(t, o.Key)
		if int64(len(data)) < o.Bytes {
			t.Fatalf("%s: listed with %d bytes, holds %d", o.Key, o.Bytes, len(data))
		}
		sum := sha256.Sum256(data[:o.Bytes])
		if hex.EncodeToString(sum[:]) != o.SHA256 {
			t.Fatalf("%s: the SHA-256 listed is not that of its first %d bytes", o.Key, o.Bytes)
		}
	}
	sort.Strings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("manifest (%s, %s] lists\n  %s\nwant\n  %s", m.From, m.To, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	return m.Objects
}

// CheckProof runs manifest.Check over every manifest of the archive and
// wants no finding and the shards given, each from its start.
func CheckProof(t testing.TB, a Archive, shards int) manifest.Result {
	t.Helper()
	res := manifest.Check(StoredManifests(t, a))
	if len(res.Findings) != 0 || len(res.Shards) != shards {
		t.Fatalf("Check: %d shards, findings %+v; want %d shards, none", len(res.Shards), res.Findings, shards)
	}
	for _, sh := range res.Shards {
		if sh.Start != "" || sh.Gaps != 0 || sh.Begun {
			t.Fatalf("Check: shard %+v does not prove its start", sh)
		}
	}
	return res
}

// Clock is a controlled clock for a recorder.
type Clock struct{ ns atomic.Int64 }

// NewClock returns a clock standing at [Start].
func NewClock() *Clock {
	c := &Clock{}
	c.ns.Store(Start.UnixNano())
	return c
}

// Now is the clock's time.
func (c *Clock) Now() time.Time { return time.Unix(0, c.ns.Load()).UTC() }

// Add moves the clock on by d.
func (c *Clock) Add(d time.Duration) { c.ns.Add(int64(d)) }

// Observed is a logger at debug level and what it logged.
func Observed() (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.DebugLevel)
	return zap.New(core), logs
}

// ManifestCounts returns archiver_manifests_written_total and
// archiver_manifest_failures_total.
func ManifestCounts(t testing.TB, reg *prometheus.Registry) (written, failed float64) {
	t.Helper()
	return Counter(t, reg, "archiver_manifests_written_total"), Counter(t, reg, "archiver_manifest_failures_total")
}

// Counter returns the sum of the counter family name's series in reg.
func Counter(t testing.TB, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// Recorder is what the consumer asks of a sink that records manifests.
type Recorder interface {
	Record(ctx context.Context, r manifest.Range) error
	RecordDue(streamARN, shardID string) bool
}

// CheckEmptyEndRange: a shard's last, empty range (To, To] ends where
// the range before it does, whose manifest holds its key: it goes
// straight to its conflict key (conflicts, when not nil, counts none);
// recorded again after a crash (other bytes) it goes beside it; Check
// sees the shard ended, and its child's first range names it. rec
// records into a, write makes an object of events durable, and clock is
// rec's.
func CheckEmptyEndRange(t *testing.T, rec Recorder, a Archive, write func([]event.Event), conflicts func() map[string]float64, clock *Clock) {
	t.Helper()
	ctx := Ctx(t)
	evs := Events("sessions", "shardId-end", 1, 5)
	child := Events("sessions", "shardId-next", 100, 2)
	write(evs)
	last := RangeOf(evs[0], "", "", Seq(5))
	end := RangeOf(evs[0], "", Seq(5), Seq(5))
	end.Ended, end.Records, end.Events = true, 0, nil
	for _, rg := range []manifest.Range{last, end} {
		if err := rec.Record(ctx, rg); err != nil {
			t.Fatal(err)
		}
	}
	m := LastManifest(t, a, end)
	if m.Key != manifest.ConflictKey(m.M, m.Digest) || m.M.Prev != LastManifest(t, a, last).Digest {
		t.Fatalf("the empty end range is at %s naming %q; want its conflict key, naming the range before it", m.Key, m.M.Prev)
	}
	if conflicts != nil {
		if got := conflicts(); len(got) != 0 {
			t.Fatalf("conflicts %v, want none", got)
		}
	}
	clock.Add(time.Minute) // recorded again, other bytes
	if err := rec.Record(ctx, end); err != nil {
		t.Fatal(err)
	}
	if again := LastManifest(t, a, end); again.Key == m.Key || again.Key != manifest.ConflictKey(again.M, again.Digest) {
		t.Fatalf("recorded again at %s, want beside %s at its own conflict key", again.Key, m.Key)
	}
	write(child)
	rc := RangeOf(child[0], evs[0].ShardID, "", Seq(101))
	if err := rec.Record(ctx, rc); err != nil {
		t.Fatal(err)
	}
	if mc := LastManifest(t, a, rc); mc.M.Prev == "" {
		t.Fatal("the child's first range names no parent manifest")
	}
	res := CheckProof(t, a, 2)
	if sh := res.Shards[0]; sh.Shard != evs[0].ShardID || !sh.Ended || sh.To != Seq(5) {
		t.Fatalf("Check: %+v, want shard %s proven to its end", sh, evs[0].ShardID)
	}
}
