package recorder

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/manifest"
	"github.com/ttl-archiver/archiver/sinks/internal/testkit"
	"github.com/ttl-archiver/archiver/sinkurl"
)

// TestRecorderCadence: a shard is due once Objects objects are tracked,
// or Interval passed since its last manifest (or since the recorder
// first heard of it), and not again right after a manifest.
func TestRecorderCadence(t *testing.T) {
	clock := testkit.NewClock()
	r := New("test://", sinkurl.ManifestConfig{Objects: 3, Interval: time.Hour}, Store{}, zap.NewNop(), nil, clock.Now)
	ref := ShardRef{Stream: "arn:aws:dynamodb:us-east-1:0:table/t/stream/x", Shard: "shard-1"}
	if r.Due(ref.Stream, ref.Shard) {
		t.Fatal("due before anything was written")
	}
	for i := 1; i <= 3; i++ {
		if r.Due(ref.Stream, ref.Shard) {
			t.Fatalf("due with %d objects tracked", i-1)
		}
		r.Track(ref, manifest.Object{Key: fmt.Sprintf("o%d", i), First: testkit.Seq(i), Last: testkit.Seq(i)})
	}
	if !r.Due(ref.Stream, ref.Shard) {
		t.Fatal("not due with 3 objects tracked")
	}
	r.finish(ref, manifest.Range{StreamARN: ref.Stream, ShardID: ref.Shard, To: testkit.Seq(3)}, strings.Repeat("0", 64))
	if r.Due(ref.Stream, ref.Shard) {
		t.Fatal("due right after its manifest")
	}
	clock.Add(time.Hour - time.Second)
	if r.Due(ref.Stream, ref.Shard) {
		t.Fatal("due before the interval passed")
	}
	clock.Add(time.Second)
	if !r.Due(ref.Stream, ref.Shard) {
		t.Fatal("not due once the interval passed")
	}
	other := ShardRef{Stream: ref.Stream, Shard: "shard-2"}
	r.Due(other.Stream, other.Shard) // first heard of
	clock.Add(time.Hour)
	if !r.Due(other.Stream, other.Shard) {
		t.Fatal("a shard without objects is not due an interval after the recorder first heard of it")
	}
}

// TestRecorderTracksByKey: an object tracked again under its key (a file
// that grew) keeps its first sequence number, takes the new size and
// digest, and the later last one; objects of a range are those with an
// event in it.
func TestRecorderTracksByKey(t *testing.T) {
	r := New("test://", sinkurl.ManifestConfig{}, Store{}, zap.NewNop(), nil, time.Now)
	ref := ShardRef{Stream: "s", Shard: "x"}
	r.Track(ref, manifest.Object{Key: "a", Bytes: 10, First: testkit.Seq(5), Last: testkit.Seq(9)})
	r.Track(ref, manifest.Object{Key: "a", Bytes: 20, First: testkit.Seq(12), Last: testkit.Seq(14)})
	r.Track(ref, manifest.Object{Key: "b", Bytes: 5, First: testkit.Seq(15), Last: testkit.Seq(20)})
	got := r.shards[ref].objects["a"]
	if got.Bytes != 20 || got.First != testkit.Seq(5) || got.Last != testkit.Seq(14) {
		t.Fatalf("a tracked as %+v", got)
	}
	for _, tc := range []struct {
		from, to string
		want     string
	}{
		{"", testkit.Seq(4), ""}, {"", testkit.Seq(5), "a"}, {testkit.Seq(14), testkit.Seq(15), "b"}, {testkit.Seq(13), testkit.Seq(15), "a,b"}, {testkit.Seq(20), testkit.Seq(30), ""},
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
