package sinks

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
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

// The tests of coverage manifests shared by the S3 and the file sink.

// testArchive reads what a sink wrote: its manifests and its objects'
// bytes, keys relative to the archive's root.
type testArchive interface {
	keys(t testing.TB, prefix string) []string
	bytes(t testing.TB, key string) []byte
}

// seq is testEvents' sequence number n.
func seq(n int) string { return fmt.Sprintf("%021d", n) }

// rangeOf is the range (from, to] of e's shard, with parent.
func rangeOf(e event.Event, parent, from, to string) manifest.Range {
	return manifest.Range{StreamARN: e.StreamARN, Region: e.Region, Table: e.Table, ShardID: e.ShardID, ParentShardID: parent,
		From: from, To: to, Records: 1, Events: map[event.Kind]int64{event.Expired: 1}}
}

// storedManifests decodes every manifest of the archive.
func storedManifests(t testing.TB, a testArchive) []manifest.Stored {
	t.Helper()
	var out []manifest.Stored
	for _, k := range a.keys(t, manifest.Dir) {
		if !manifest.IsKey(k) {
			continue
		}
		data := a.bytes(t, k)
		m, err := manifest.Decode(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		out = append(out, manifest.Stored{Key: k, Digest: manifest.Digest(data), M: m})
	}
	return out
}

// lastManifest is the manifest of rg's range the archive holds (the one
// with the latest written time when there are several); manifests that
// do not decode are passed over.
func lastManifest(t testing.TB, a testArchive, rg manifest.Range) manifest.Stored {
	t.Helper()
	var found *manifest.Stored
	for _, s := range storedManifestsSkipping(t, a) {
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

// storedManifestsSkipping is storedManifests without those that do not
// decode.
func storedManifestsSkipping(t testing.TB, a testArchive) []manifest.Stored {
	var out []manifest.Stored
	for _, k := range a.keys(t, manifest.Dir) {
		data := a.bytes(t, k)
		if m, err := manifest.Decode(bytes.NewReader(data)); err == nil {
			out = append(out, manifest.Stored{Key: k, Digest: manifest.Digest(data), M: m})
		}
	}
	return out
}

// checkListed checks that m lists exactly the objects want (keys), each
// with the size and SHA-256 of its bytes as stored (of the first Bytes
// bytes: a file grows), and returns them.
func checkListed(t testing.TB, a testArchive, m manifest.Manifest, want ...string) []manifest.Object {
	t.Helper()
	var got []string
	for _, o := range m.Objects {
		got = append(got, o.Key)
		data := a.bytes(t, o.Key)
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

// checkProof runs manifest.Check over every manifest of the archive and
// wants no finding and the shards given, each from its start.
func checkProof(t testing.TB, a testArchive, shards int) manifest.Result {
	t.Helper()
	res := manifest.Check(storedManifests(t, a))
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

// testClock is a controlled clock for a recorder.
type testClock struct{ ns atomic.Int64 }

func newTestClock() *testClock {
	c := &testClock{}
	c.ns.Store(testStart.UnixNano())
	return c
}

func (c *testClock) now() time.Time      { return time.Unix(0, c.ns.Load()).UTC() }
func (c *testClock) add(d time.Duration) { c.ns.Add(int64(d)) }
func observed() (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.DebugLevel)
	return zap.New(core), logs
}

// manifestCounts returns archiver_manifests_written_total and
// archiver_manifest_failures_total.
func manifestCounts(t testing.TB, reg *prometheus.Registry) (written, failed float64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch mf.GetName() {
			case "archiver_manifests_written_total":
				written += m.GetCounter().GetValue()
			case "archiver_manifest_failures_total":
				failed += m.GetCounter().GetValue()
			}
		}
	}
	return written, failed
}

// TestRecorderCadence: a shard is due once Objects objects are tracked,
// or Interval passed since its last manifest (or since the recorder
// first heard of it), and not again right after a manifest.
func TestRecorderCadence(t *testing.T) {
	clock := newTestClock()
	r := newRecorder("test://", ManifestConfig{Objects: 3, Interval: time.Hour}, nil, zap.NewNop(), nil, clock.now)
	ref := shardRef{"arn:aws:dynamodb:us-east-1:0:table/t/stream/x", "shard-1"}
	if r.due(ref.stream, ref.shard) {
		t.Fatal("due before anything was written")
	}
	for i := 1; i <= 3; i++ {
		if r.due(ref.stream, ref.shard) {
			t.Fatalf("due with %d objects tracked", i-1)
		}
		r.track(ref, manifest.Object{Key: fmt.Sprintf("o%d", i), First: seq(i), Last: seq(i)})
	}
	if !r.due(ref.stream, ref.shard) {
		t.Fatal("not due with 3 objects tracked")
	}
	r.finish(ref, rangeOf(testEvents("t", "shard-1", 1, 1)[0], "", "", seq(3)), strings.Repeat("0", 64))
	if r.due(ref.stream, ref.shard) {
		t.Fatal("due right after its manifest")
	}
	clock.add(time.Hour - time.Second)
	if r.due(ref.stream, ref.shard) {
		t.Fatal("due before the interval passed")
	}
	clock.add(time.Second)
	if !r.due(ref.stream, ref.shard) {
		t.Fatal("not due once the interval passed")
	}
	other := shardRef{ref.stream, "shard-2"}
	r.due(other.stream, other.shard) // first heard of
	clock.add(time.Hour)
	if !r.due(other.stream, other.shard) {
		t.Fatal("a shard without objects is not due an interval after the recorder first heard of it")
	}
}

// TestRecorderTracksByKey: an object tracked again under its key (a file
// that grew) keeps its first sequence number, takes the new size and
// digest, and the later last one; objects of a range are those with an
// event in it.
func TestRecorderTracksByKey(t *testing.T) {
	r := newRecorder("test://", ManifestConfig{}, nil, zap.NewNop(), nil, time.Now)
	ref := shardRef{"s", "x"}
	r.track(ref, manifest.Object{Key: "a", Bytes: 10, First: seq(5), Last: seq(9)})
	r.track(ref, manifest.Object{Key: "a", Bytes: 20, First: seq(12), Last: seq(14)})
	r.track(ref, manifest.Object{Key: "b", Bytes: 5, First: seq(15), Last: seq(20)})
	got := r.shards[ref].objects["a"]
	if got.Bytes != 20 || got.First != seq(5) || got.Last != seq(14) {
		t.Fatalf("a tracked as %+v", got)
	}
	for _, tc := range []struct {
		from, to string
		want     string
	}{
		{"", seq(4), ""}, {"", seq(5), "a"}, {seq(14), seq(15), "b"}, {seq(13), seq(15), "a,b"}, {seq(20), seq(30), ""},
	} {
		objs, _, _ := r.begin(ref, manifest.Range{From: tc.from, To: tc.to})
		var keys []string
		for _, o := range objs {
			keys = append(keys, o.Key)
		}
		sort.Strings(keys)
		if strings.Join(keys, ",") != tc.want {
			t.Errorf("(%q, %q]: %v, want %s", tc.from, tc.to, keys, tc.want)
		}
	}
}
