package s3sink

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/manifest"
	"github.com/ttl-archiver/archiver/objstore"
	"github.com/ttl-archiver/archiver/sinks/internal/recorder"
	"github.com/ttl-archiver/archiver/sinks/internal/testkit"
	"github.com/ttl-archiver/archiver/sinks/sinkapi"
	"github.com/ttl-archiver/archiver/sinkurl"
)

// s3Archive is an S3 sink's archive under prefix in versitygw.
type s3Archive struct {
	v      *testkit.Versity
	prefix string
}

func (a s3Archive) Keys(t testing.TB, prefix string) []string {
	var out []string
	for _, k := range a.v.Objects(t, a.prefix+"/"+prefix) {
		out = append(out, strings.TrimPrefix(k, a.prefix+"/"))
	}
	return out
}

func (a s3Archive) Bytes(t testing.TB, key string) []byte {
	t.Helper()
	out, err := a.v.Client.GetObject(testkit.Ctx(t), &s3.GetObjectInput{Bucket: aws.String("archive"), Key: aws.String(a.prefix + "/" + key)})
	if err != nil {
		t.Fatalf("GetObject %s: %v", key, err)
	}
	defer out.Body.Close()
	data, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func (a s3Archive) put(t testing.TB, key string, data []byte) {
	t.Helper()
	if _, err := a.v.Client.PutObject(testkit.Ctx(t), &s3.PutObjectInput{Bucket: aws.String("archive"), Key: aws.String(a.prefix + "/" + key), Body: bytes.NewReader(data)}); err != nil {
		t.Fatal(err)
	}
}

// newRecordingS3 opens an S3 sink on prefix with a controlled clock and
// its own registry and logger.
func newRecordingS3(t testing.TB, v *testkit.Versity, prefix, compression string, clock *testkit.Clock, log *zap.Logger) (*Sink, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	s, err := New(testkit.Ctx(t), objstore.S3Config{Bucket: "archive", Prefix: prefix, Endpoint: v.Endpoint, PathStyle: true, Compression: compression,
		FlushInterval: time.Hour, RetryBase: time.Millisecond, Manifests: sinkurl.ManifestConfig{Writer: "w1"}},
		sinkapi.Options{AWSConfig: testkit.AWSConfig, Registerer: reg, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	s.rec.SetClock(clock.Now)
	t.Cleanup(func() { s.Close(context.Background()) })
	return s, reg
}

// writeObject writes evs as one batch and flushes: one object per table,
// kind and hour. It returns the object's key (relative to the root) when
// there is one.
func writeObject(t testing.TB, s *Sink, evs []event.Event) string {
	t.Helper()
	ctx := testkit.Ctx(t)
	a := testkit.NewAcks()
	if err := s.Write(ctx, sinkapi.Batch{StreamARN: evs[0].StreamARN, ShardID: evs[0].ShardID, Events: evs}, a.Ack("b")); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.WaitAck(t, "b"); err != nil {
		t.Fatal(err)
	}
	e := evs[0]
	return s.relKey(s.Key(e.Table, e.Kind, e.Region, e.ShardID, e.ApproximateCreationTime, e.SequenceNumber, evs[len(evs)-1].SequenceNumber))
}

// TestS3RecordListsTheRangesObjects: a manifest lists exactly the objects
// with events in its range, each with the size and SHA-256 of its stored
// (compressed) bytes; an object holding events of two ranges is listed in
// both; every manifest names the one before it, and manifest.Check over
// them finds nothing. For each compression.
func TestS3RecordListsTheRangesObjects(t *testing.T) {
	v := testkit.StartVersity(t)
	for _, comp := range []string{"gzip", "zstd", "none"} {
		t.Run(comp, func(t *testing.T) {
			ctx := testkit.Ctx(t)
			a := s3Archive{v, "rec-" + comp}
			s, reg := newRecordingS3(t, v, a.prefix, comp, testkit.NewClock(), zap.NewNop())
			evs := testkit.Events("sessions", "shardId-0001", 1, 15)
			objA := writeObject(t, s, evs[0:5])   // 1..5
			objB := writeObject(t, s, evs[5:10])  // 6..10
			objC := writeObject(t, s, evs[10:15]) // 11..15
			ranges := []manifest.Range{testkit.RangeOf(evs[0], "", "", testkit.Seq(7)), testkit.RangeOf(evs[0], "", testkit.Seq(7), testkit.Seq(15)), testkit.RangeOf(evs[0], "", testkit.Seq(15), testkit.Seq(15))}
			ranges[2].Ended = true
			want := [][]string{{objA, objB}, {objB, objC}, nil}
			prev := ""
			for i, rg := range ranges {
				if err := s.Record(ctx, rg); err != nil {
					t.Fatalf("Record %d: %v", i, err)
				}
				m := testkit.LastManifest(t, a, rg)
				listed := testkit.CheckListed(t, a, m.M, want[i]...)
				for _, o := range listed {
					if data := a.Bytes(t, o.Key); int64(len(data)) != o.Bytes {
						t.Fatalf("%s: listed with %d bytes, holds %d", o.Key, o.Bytes, len(data))
					}
				}
				if m.M.Prev != prev || m.M.Writer != "w1" {
					t.Fatalf("manifest %d names %q (writer %q), want the one before it, %q", i, m.M.Prev, m.M.Writer, prev)
				}
				prev = m.Digest
			}
			if n := s.rec.Shards(); n != 0 {
				t.Errorf("%d shards still tracked after the last range was recorded", n)
			}
			res := testkit.CheckProof(t, a, 1)
			if !res.Shards[0].Ended || res.Shards[0].To != testkit.Seq(15) {
				t.Errorf("Check: %+v, want the shard proven to its end", res.Shards[0])
			}
			if w, f := testkit.ManifestCounts(t, reg); w != 3 || f != 0 {
				t.Errorf("counted %v written, %v failed; want 3, 0", w, f)
			}
		})
	}
}

// TestS3RecordFindsPrevInTheArchive: a new sink on the archive (a
// restart) finds the manifest its shard's next range follows, and a
// child's first range names its parent's last (ended) manifest; a
// manifest that does not decode is logged and passed over, never taken.
func TestS3RecordFindsPrevInTheArchive(t *testing.T) {
	v := testkit.StartVersity(t)
	ctx := testkit.Ctx(t)
	a := s3Archive{v, "restart"}
	clock := testkit.NewClock()
	parent := testkit.Events("sessions", "shardId-parent", 1, 10)
	child := testkit.Events("sessions", "shardId-child", 100, 5)

	first, _ := newRecordingS3(t, v, a.prefix, "gzip", clock, zap.NewNop())
	writeObject(t, first, parent[:5])
	if err := first.Record(ctx, testkit.RangeOf(parent[0], "", "", testkit.Seq(5))); err != nil {
		t.Fatal(err)
	}
	if err := first.Close(ctx); err != nil {
		t.Fatal(err)
	}
	m1 := testkit.LastManifest(t, a, testkit.RangeOf(parent[0], "", "", testkit.Seq(5)))
	// Hostile neighbours: the manifest moved aside (to a name like a
	// conflict key), something that is no manifest at its key, and a
	// manifest of the same To that names another shard.
	junk := m1.Key
	a.put(t, strings.TrimSuffix(m1.Key, ".json")+".aaaaaaaaaaaa.json", manifest.Encode(m1.M))
	a.put(t, junk, []byte("{not a manifest"))
	wrong := m1.M
	wrong.Shard = "shardId-other"
	a.put(t, strings.TrimSuffix(m1.Key, ".json")+".111111111111.json", manifest.Encode(wrong))

	log, logs := testkit.Observed()
	second, _ := newRecordingS3(t, v, a.prefix, "gzip", clock, log)
	writeObject(t, second, parent[5:])
	last := testkit.RangeOf(parent[0], "", testkit.Seq(5), testkit.Seq(10))
	last.Ended = true
	if err := second.Record(ctx, last); err != nil {
		t.Fatal(err)
	}
	if m := testkit.LastManifest(t, a, last); m.M.Prev != m1.Digest {
		t.Fatalf("after a restart the range names %q, want the archive's manifest ending at %s, %q", m.M.Prev, testkit.Seq(5), m1.Digest)
	}
	if n := logs.FilterMessageSnippet("does not decode").FilterField(zap.String("key", junk)).Len(); n != 1 {
		t.Fatalf("%d warnings name the manifest that does not decode, want 1: %v", n, logs.All())
	}
	writeObject(t, second, child)
	if err := second.Record(ctx, testkit.RangeOf(child[0], parent[0].ShardID, "", testkit.Seq(104))); err != nil {
		t.Fatal(err)
	}
	m := testkit.LastManifest(t, a, testkit.RangeOf(child[0], "", "", testkit.Seq(104)))
	if pm := testkit.LastManifest(t, a, last); m.M.Prev != pm.Digest || m.M.Parent != parent[0].ShardID {
		t.Fatalf("the child's first range names %q (parent %q), want its parent's last manifest %q", m.M.Prev, m.M.Parent, pm.Digest)
	}
	// Check, over the manifests the sinks wrote (the hostile ones aside).
	var ours []manifest.Stored
	for _, st := range testkit.StoredManifestsSkipping(t, a) {
		if st.M.Shard != "shardId-other" {
			ours = append(ours, st)
		}
	}
	if res := manifest.Check(ours); len(res.Findings) != 0 || len(res.Shards) != 2 {
		t.Fatalf("Check: %+v", res)
	}
}

// TestS3RecordManifestConflicts: a manifest whose key holds the same
// bytes counts as written; one whose key holds other bytes goes to its
// conflict key; when that too holds other bytes, Record fails
// permanently and nothing is overwritten.
func TestS3RecordManifestConflicts(t *testing.T) {
	v := testkit.StartVersity(t)
	ctx := testkit.Ctx(t)
	a := s3Archive{v, "mconflict"}
	clock := testkit.NewClock()
	evs := testkit.Events("sessions", "shardId-0001", 1, 5)
	rg := testkit.RangeOf(evs[0], "", "", testkit.Seq(5))

	first, _ := newRecordingS3(t, v, a.prefix, "gzip", clock, zap.NewNop())
	writeObject(t, first, evs)
	if err := first.Record(ctx, rg); err != nil {
		t.Fatal(err)
	}
	m1 := testkit.LastManifest(t, a, rg)

	// The same range recorded again by a new sink that wrote the same
	// object (a re-delivery after a crash), at the same time: the same
	// bytes.
	same, reg := newRecordingS3(t, v, a.prefix, "gzip", clock, zap.NewNop())
	writeObject(t, same, evs)
	if err := same.Record(ctx, rg); err != nil {
		t.Fatal(err)
	}
	if got := conflictCounts(t, reg); got[ConflictSameContent] != 2 {
		t.Fatalf("conflicts %v, want the object's and the manifest's same_content", got)
	}
	if n := len(testkit.StoredManifests(t, a)); n != 1 {
		t.Fatalf("%d manifests, want the one", n)
	}

	// Later, by another sink: other bytes (another written time), the
	// same proof; the manifest there stands, counted as same_events.
	clock.Add(time.Minute)
	later, reg := newRecordingS3(t, v, a.prefix, "gzip", clock, zap.NewNop())
	writeObject(t, later, evs)
	if err := later.Record(ctx, rg); err != nil {
		t.Fatal(err)
	}
	if got := conflictCounts(t, reg); got[ConflictSameEvents] != 1 || got[ConflictDistinctKey] != 0 {
		t.Fatalf("conflicts %v, want the manifest's same_events", got)
	}
	if n := len(testkit.StoredManifests(t, a)); n != 1 {
		t.Fatalf("%d manifests, want the one", n)
	}

	// Another proof of the range (other counts) goes to the conflict key.
	other, reg := newRecordingS3(t, v, a.prefix, "gzip", clock, zap.NewNop())
	writeObject(t, other, evs)
	rg2 := rg
	rg2.Records++
	if err := other.Record(ctx, rg2); err != nil {
		t.Fatal(err)
	}
	all := testkit.StoredManifests(t, a)
	if len(all) != 2 || all[0].Key == m1.Key || !strings.HasPrefix(all[0].Key, strings.TrimSuffix(m1.Key, "json")) {
		t.Fatalf("manifests %v, want the first and one beside it under a conflict key", all)
	}
	if d := all[0].Digest; all[0].Key != manifest.ConflictKey(all[0].M, d) {
		t.Fatalf("%s is not the conflict key of its digest %s", all[0].Key, d)
	}
	if got := conflictCounts(t, reg); got[ConflictDistinctKey] != 1 {
		t.Fatalf("conflicts %v, want one distinct_key", got)
	}
	testkit.CheckProof(t, a, 1)

	// Both keys taken by other bytes: a permanent failure, counted.
	clock.Add(time.Minute)
	third, reg := newRecordingS3(t, v, a.prefix, "gzip", clock, zap.NewNop())
	objs := testkit.CheckListed(t, a, m1.M, writeObject(t, third, evs))
	rg3 := rg
	rg3.Records += 2
	would := manifest.New(rg3, objs, "", "w1", clock.Now())
	a.put(t, manifest.ConflictKey(would, manifest.Digest(manifest.Encode(would))), []byte("someone else's\n"))
	err := third.Record(ctx, rg3)
	if !sinkapi.IsPermanent(err) || !errors.Is(err, recorder.ErrConflict) {
		t.Fatalf("Record: %v, want a permanent conflict", err)
	}
	if w, f := testkit.ManifestCounts(t, reg); w != 0 || f != 1 {
		t.Fatalf("counted %v written, %v failed; want 0, 1", w, f)
	}
	if !bytes.Equal(a.Bytes(t, m1.Key), manifest.Encode(m1.M)) {
		t.Fatal("the manifest at the key was overwritten")
	}
}

// TestS3RecordDue: manifest-objects and manifest-interval set the
// cadence.
func TestS3RecordDue(t *testing.T) {
	v := testkit.StartVersity(t)
	ctx := testkit.Ctx(t)
	s := openS3(t, v.Endpoint, "manifest-objects=2&manifest-interval=30m&flush-interval=1h")
	s.c.Prefix = "due"
	clock := testkit.NewClock()
	s.rec.SetClock(clock.Now)
	evs := testkit.Events("sessions", "shardId-0001", 1, 4)
	stream, shard := evs[0].StreamARN, evs[0].ShardID
	if s.RecordDue(stream, shard) {
		t.Fatal("due before any object")
	}
	writeObject(t, s, evs[:1])
	if s.RecordDue(stream, shard) {
		t.Fatal("due after one object")
	}
	writeObject(t, s, evs[1:2])
	if !s.RecordDue(stream, shard) {
		t.Fatal("not due after manifest-objects objects")
	}
	if err := s.Record(ctx, testkit.RangeOf(evs[0], "", "", testkit.Seq(2))); err != nil {
		t.Fatal(err)
	}
	if s.RecordDue(stream, shard) {
		t.Fatal("due right after its manifest")
	}
	writeObject(t, s, evs[2:3])
	clock.Add(30 * time.Minute)
	if !s.RecordDue(stream, shard) {
		t.Fatal("not due manifest-interval after the last manifest")
	}
}

// TestS3ManifestsOff: with manifests=false the sink tracks nothing and
// refuses Record (package sinks' Open also hides its Record and
// RecordDue: TestOpenManifestsOff).
func TestS3ManifestsOff(t *testing.T) {
	v := testkit.StartVersity(t)
	ctx := testkit.Ctx(t)
	sk, _, err := open(ctx, "s3://archive/off?endpoint="+v.Endpoint+"&path-style=true&manifests=false", sinkapi.Options{AWSConfig: testkit.AWSConfig})
	if err != nil {
		t.Fatal(err)
	}
	defer sk.Close(ctx)
	if err := testkit.Preflight(ctx, sk); err != nil {
		t.Fatal(err)
	}
	s := sk.(*Sink)
	evs := testkit.Events("sessions", "shardId-0001", 1, 2)
	writeObject(t, s, evs)
	if s.RecordDue(evs[0].StreamARN, evs[0].ShardID) || !errors.Is(s.Record(ctx, testkit.RangeOf(evs[0], "", "", testkit.Seq(2))), recorder.ErrNotRecording) {
		t.Fatal("a sink with manifests=false records")
	}
	if keys := (s3Archive{v, "off"}).Keys(t, manifest.Dir); len(keys) != 0 {
		t.Fatalf("manifests written: %v", keys)
	}
}

// TestEmptyEndRangeAtItsConflictKey: see testkit.CheckEmptyEndRange; in
// S3, no 412 and no conflict counted.
func TestEmptyEndRangeAtItsConflictKey(t *testing.T) {
	v := testkit.StartVersity(t)
	clock := testkit.NewClock()
	s, reg := newRecordingS3(t, v, "emptyend", "gzip", clock, zap.NewNop())
	testkit.CheckEmptyEndRange(t, s, s3Archive{v, "emptyend"}, func(evs []event.Event) { writeObject(t, s, evs) },
		func() map[string]float64 { return conflictCounts(t, reg) }, clock)
}
