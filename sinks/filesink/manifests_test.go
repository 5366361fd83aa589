package filesink

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/manifest"
	"github.com/ttl-archiver/archiver/sinks/internal/recorder"
	"github.com/ttl-archiver/archiver/sinks/internal/testkit"
	"github.com/ttl-archiver/archiver/sinks/sinkapi"
	"github.com/ttl-archiver/archiver/sinkurl"
)

// dirArchive is a file sink's archive: DIR.
type dirArchive string

func (a dirArchive) Keys(t testing.TB, prefix string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(filepath.Join(string(a), prefix), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(string(a), p)
		out = append(out, filepath.ToSlash(rel))
		return err
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

func (a dirArchive) Bytes(t testing.TB, key string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(string(a), filepath.FromSlash(key)))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// newRecordingFile opens a file sink on dir with a controlled clock.
func newRecordingFile(t testing.TB, dir string, clock *testkit.Clock, log *zap.Logger) *Sink {
	t.Helper()
	s, err := NewWith(sinkurl.FileConfig{Dir: dir}, sinkapi.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	s.rec.SetClock(clock.Now)
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

// appendBatch writes evs as one batch and waits for its acknowledgement.
func appendBatch(t testing.TB, s sinkapi.Sink, evs []event.Event) error {
	t.Helper()
	a := testkit.NewAcks()
	if err := s.Write(testkit.Ctx(t), sinkapi.Batch{StreamARN: evs[0].StreamARN, ShardID: evs[0].ShardID, Events: evs}, a.Ack("b")); err != nil {
		t.Fatal(err)
	}
	return a.WaitAck(t, "b")
}

// TestFileRecordPrefixDigests: a file sink's manifest lists each hour
// file a shard appended to since its last manifest, with the file's size
// then and the SHA-256 of that prefix, which still match the file's first
// bytes after other shards and later ranges appended to it, across a
// restart of the sink (which hashes the file it resumes once); the next
// range names the last manifest, from memory or found in DIR, and a
// child's first range its parent's last; a file in _manifests/ that does
// not decode is passed over with a warning; manifest.Check over all of it
// finds nothing.
func TestFileRecordPrefixDigests(t *testing.T) {
	ctx := testkit.Ctx(t)
	dir := t.TempDir()
	a := dirArchive(dir)
	clock := testkit.NewClock()
	const h05, h06 = "sessions/2026-03-04/05.jsonl", "sessions/2026-03-04/06.jsonl"
	sh := testkit.Events("sessions", "shardId-a", 1, 14)
	for i := 8; i < len(sh); i++ {
		sh[i].ApproximateCreationTime = testkit.Start.Add(time.Hour) // 9.. in the next hour
	}
	neighbour := testkit.Events("sessions", "shardId-b", 1, 9)
	child := testkit.Events("sessions", "shardId-c", 100, 2)
	child[0].ApproximateCreationTime, child[1].ApproximateCreationTime = testkit.Start.Add(time.Hour), testkit.Start.Add(time.Hour)

	first := newRecordingFile(t, dir, clock, zap.NewNop())
	for _, b := range [][]event.Event{sh[0:3], neighbour[0:3], sh[3:5]} {
		if err := appendBatch(t, first, b); err != nil {
			t.Fatal(err)
		}
	}
	r1 := testkit.RangeOf(sh[0], "", "", testkit.Seq(5))
	if err := first.Record(ctx, r1); err != nil {
		t.Fatal(err)
	}
	testkit.CheckListed(t, a, testkit.LastManifest(t, a, r1).M, h05)
	for _, b := range [][]event.Event{neighbour[3:6], sh[5:10]} { // 6..8 to 05, 9..10 to 06
		if err := appendBatch(t, first, b); err != nil {
			t.Fatal(err)
		}
	}
	r2 := testkit.RangeOf(sh[0], "", testkit.Seq(5), testkit.Seq(10))
	if err := first.Record(ctx, r2); err != nil {
		t.Fatal(err)
	}
	testkit.CheckListed(t, a, testkit.LastManifest(t, a, r2).M, h05, h06)
	if err := first.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// A restart: the next sink resumes 06.jsonl, and finds r2's manifest
	// in DIR.
	log, logs := testkit.Observed()
	second := newRecordingFile(t, dir, clock, log)
	for _, b := range [][]event.Event{sh[10:12], neighbour[6:9], sh[12:14], child} {
		if err := appendBatch(t, second, b); err != nil {
			t.Fatal(err)
		}
	}
	r3 := testkit.RangeOf(sh[0], "", testkit.Seq(10), testkit.Seq(14))
	r3.Ended = true
	if err := second.Record(ctx, r3); err != nil {
		t.Fatal(err)
	}
	m3 := testkit.LastManifest(t, a, r3)
	testkit.CheckListed(t, a, m3.M, h06)
	if m2 := testkit.LastManifest(t, a, r2); m3.M.Prev != m2.Digest {
		t.Fatalf("after a restart the range names %q, want %q", m3.M.Prev, m2.Digest)
	}
	junk := manifest.ShardDir("sessions", "us-east-1", sh[0].StreamARN, "shardId-a") + strings.Repeat("9", 64) + ".json"
	if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(junk)), []byte("[]"), 0o640); err != nil {
		t.Fatal(err)
	}
	rc := testkit.RangeOf(child[0], "shardId-a", "", testkit.Seq(101))
	if err := second.Record(ctx, rc); err != nil {
		t.Fatal(err)
	}
	if mc := testkit.LastManifest(t, a, rc); mc.M.Prev != m3.Digest {
		t.Fatalf("the child names %q, want its parent's last manifest %q", mc.M.Prev, m3.Digest)
	}
	if n := logs.FilterMessageSnippet("does not decode").FilterField(zap.String("key", junk)).Len(); n != 1 {
		t.Fatalf("%d warnings name the file that does not decode, want 1: %v", n, logs.All())
	}
	if err := os.Remove(filepath.Join(dir, filepath.FromSlash(junk))); err != nil {
		t.Fatal(err)
	}
	// Every manifest's prefixes still match the grown files.
	for _, st := range testkit.StoredManifests(t, a) {
		var keys []string
		for _, o := range st.M.Objects {
			keys = append(keys, o.Key)
		}
		testkit.CheckListed(t, a, st.M, keys...)
	}
	testkit.CheckProof(t, a, 2)
}

// TestFileRecordAfterFailures: the size a manifest lists is a durable
// prefix: a failed append (cut back) is not counted, nor is a torn line
// the next sink cut off.
func TestFileRecordAfterFailures(t *testing.T) {
	ctx := testkit.Ctx(t)
	dir := t.TempDir()
	a := dirArchive(dir)
	const hour = "t/2026-03-04/05.jsonl"
	evs := testkit.Events("t", "s", 1, 9)
	torn := event.MarshalLine(&evs[0])
	mkdir(t, filepath.Join(dir, "t", "2026-03-04"))
	if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(hour)), torn[:len(torn)/2], 0o640); err != nil {
		t.Fatal(err)
	}
	s := newRecordingFile(t, dir, testkit.NewClock(), zap.NewNop())
	var fail atomic.Bool
	s.fsync = func(f *os.File) error {
		if fail.Load() {
			return errors.New("injected: I/O error")
		}
		return f.Sync()
	}
	if err := appendBatch(t, s, evs[0:3]); err != nil {
		t.Fatal(err)
	}
	fail.Store(true)
	if err := appendBatch(t, s, evs[3:6]); err == nil {
		t.Fatal("the failed fsync was acknowledged")
	}
	rg := testkit.RangeOf(evs[0], "", "", testkit.Seq(3))
	if err := s.Record(ctx, rg); err != nil {
		t.Fatal(err)
	}
	fail.Store(false)
	if err := appendBatch(t, s, evs[3:9]); err != nil {
		t.Fatal(err)
	}
	o := testkit.CheckListed(t, a, testkit.LastManifest(t, a, rg).M, hour)[0]
	if want := int64(len(testkit.RenderLines(evs[0:3], nil))); o.Bytes != want {
		t.Fatalf("listed with %d bytes, want the 3 lines without the torn one: %d", o.Bytes, want)
	}
	rg2 := testkit.RangeOf(evs[0], "", testkit.Seq(3), testkit.Seq(9))
	if err := s.Record(ctx, rg2); err != nil {
		t.Fatal(err)
	}
	if o := testkit.CheckListed(t, a, testkit.LastManifest(t, a, rg2).M, hour)[0]; o.Bytes != int64(len(a.Bytes(t, hour))) || o.First != testkit.Seq(4) {
		t.Fatalf("listed as %+v, want the whole file, from %s", o, testkit.Seq(4))
	}
}

// TestFileManifestConflicts: a manifest's key holding the same bytes is
// success; other bytes put it beside, at its conflict key; other bytes
// there too are a permanent error; nothing is overwritten and no
// temporary file is left.
func TestFileManifestConflicts(t *testing.T) {
	ctx := testkit.Ctx(t)
	dir := t.TempDir()
	a := dirArchive(dir)
	s := newRecordingFile(t, dir, testkit.NewClock(), zap.NewNop())
	m := manifest.New(testkit.RangeOf(testkit.Events("t", "s", 1, 1)[0], "", "", testkit.Seq(7)), nil, "", "", testkit.Start)
	data := manifest.Encode(m)
	for i := 0; i < 2; i++ {
		if key, digest, err := s.putManifest(ctx, m, data); err != nil || key != manifest.Key(m) || digest != manifest.Digest(data) {
			t.Fatalf("put %d: %s %s, %v; want %s", i, key, digest, err, manifest.Key(m))
		}
	}
	// Recorded again later (after a crash): the same proof but for when
	// and by whom; the stored manifest stands, and its digest is chained.
	again := m
	again.Written, again.Writer = testkit.Start.Add(time.Minute), "w2"
	if key, digest, err := s.putManifest(ctx, again, manifest.Encode(again)); err != nil || key != manifest.Key(m) || digest != manifest.Digest(data) {
		t.Fatalf("the same proof again: %s %s, %v; want %s and the stored digest", key, digest, err, manifest.Key(m))
	}
	other := m
	other.Records = m.Records + 1
	otherData := manifest.Encode(other)
	alt := manifest.ConflictKey(other, manifest.Digest(otherData))
	if key, _, err := s.putManifest(ctx, other, otherData); err != nil || key != alt {
		t.Fatalf("other bytes: %s, %v; want %s", key, err, alt)
	}
	third := m
	third.Records = m.Records + 2
	thirdData := manifest.Encode(third)
	thirdAlt := manifest.ConflictKey(third, manifest.Digest(thirdData))
	if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(thirdAlt)), []byte("x"), 0o640); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.putManifest(ctx, third, thirdData); !sinkapi.IsPermanent(err) || !errors.Is(err, recorder.ErrConflict) {
		t.Fatalf("both keys taken: %v, want a permanent conflict", err)
	}
	if !bytes.Equal(a.Bytes(t, manifest.Key(m)), data) || !bytes.Equal(a.Bytes(t, alt), otherData) {
		t.Fatal("a manifest was overwritten")
	}
	if keys := a.Keys(t, manifest.Dir); len(keys) != 3 {
		t.Fatalf("files %v, want the two manifests and the other bytes", keys)
	}
	if fi, err := os.Stat(filepath.Join(dir, filepath.FromSlash(manifest.Key(m)))); err != nil || fi.Mode().Perm() != sinkurl.DefaultFileMode {
		t.Fatalf("manifest mode %v, %v; want %v", fi.Mode(), err, sinkurl.DefaultFileMode)
	}
}

// TestFileManifestsOffAndDue: manifests=false opens a sink that hashes
// nothing and records nothing (package sinks' Open hides its Record and
// RecordDue: TestOpenManifestsOff); manifest-interval sets the cadence.
func TestFileManifestsOffAndDue(t *testing.T) {
	ctx := testkit.Ctx(t)
	evs := testkit.Events("t", "s", 1, 2)
	sk, _, err := open(ctx, "file://"+t.TempDir()+"?manifests=false", sinkapi.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sk.Close(ctx)
	off := sk.(*Sink)
	if err := off.Preflight(ctx); err != nil {
		t.Fatal(err)
	}
	if err := appendBatch(t, sk, evs); err != nil {
		t.Fatal(err)
	}
	if off.digests != nil || !errors.Is(off.Record(ctx, testkit.RangeOf(evs[0], "", "", testkit.Seq(2))), recorder.ErrNotRecording) {
		t.Fatal("a sink with manifests=false hashes or records")
	}

	on, _, err := open(ctx, "file://"+t.TempDir()+"?manifest-interval=1m&manifest-objects=2", sinkapi.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer on.Close(ctx)
	s := on.(*Sink)
	clock := testkit.NewClock()
	s.rec.SetClock(clock.Now)
	if s.RecordDue(evs[0].StreamARN, evs[0].ShardID) {
		t.Fatal("due at once")
	}
	if err := appendBatch(t, s, evs); err != nil {
		t.Fatal(err)
	}
	clock.Add(time.Minute)
	if !s.RecordDue(evs[0].StreamARN, evs[0].ShardID) {
		t.Fatal("not due manifest-interval after the sink first heard of the shard")
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Record(ctx, testkit.RangeOf(evs[0], "", "", testkit.Seq(2))); !errors.Is(err, sinkapi.ErrClosed) {
		t.Fatalf("Record after Close: %v, want sinkapi.ErrClosed", err)
	}
}

// TestEmptyEndRangeAtItsConflictKey: see testkit.CheckEmptyEndRange.
func TestEmptyEndRangeAtItsConflictKey(t *testing.T) {
	clock := testkit.NewClock()
	dir := t.TempDir()
	s := newRecordingFile(t, dir, clock, zap.NewNop())
	testkit.CheckEmptyEndRange(t, s, dirArchive(dir), func(evs []event.Event) {
		if err := appendBatch(t, s, evs); err != nil {
			t.Fatal(err)
		}
	}, nil, clock)
}
