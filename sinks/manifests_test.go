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

// TestEmptyEndRangeAtItsConflictKey: a shard's last, empty range (To,
// To] ends where the range before it does, whose manifest holds its key:
// it goes straight to its conflict key (S3: no 412, no conflict
// counted); recorded again after a crash (other bytes) it goes beside
// it; Check sees the shard ended, and its child's first range names it.
func TestEmptyEndRangeAtItsConflictKey(t *testing.T) {
	v := startVersity(t)
	for _, kind := range []string{"s3", "file"} {
		t.Run(kind, func(t *testing.T) {
			ctx := testCtx(t)
			clock := newTestClock()
			evs := testEvents("sessions", "shardId-end", 1, 5)
			child := testEvents("sessions", "shardId-next", 100, 2)
			var (
				rec       manifestRecorder
				a         testArchive
				write     func([]event.Event)
				conflicts = func() map[string]float64 { return nil }
			)
			if kind == "s3" {
				s, reg := newRecordingS3(t, v, "emptyend", "gzip", clock, zap.NewNop())
				rec, a, conflicts = s, s3Archive{v, "emptyend"}, func() map[string]float64 { return conflictCounts(t, reg) }
				write = func(evs []event.Event) { writeObject(t, s, evs) }
			} else {
				dir := t.TempDir()
				s := newRecordingFile(t, dir, clock, zap.NewNop())
				rec, a = s, dirArchive(dir)
				write = func(evs []event.Event) {
					if err := appendBatch(t, s, evs); err != nil {
						t.Fatal(err)
					}
				}
			}
			write(evs)
			last := rangeOf(evs[0], "", "", seq(5))
			end := rangeOf(evs[0], "", seq(5), seq(5))
			end.Ended, end.Records, end.Events = true, 0, nil
			for _, rg := range []manifest.Range{last, end} {
				if err := rec.Record(ctx, rg); err != nil {
					t.Fatal(err)
				}
			}
			m := lastManifest(t, a, end)
			if m.Key != manifest.ConflictKey(m.M, m.Digest) || m.M.Prev != lastManifest(t, a, last).Digest {
				t.Fatalf("the empty end range is at %s naming %q; want its conflict key, naming the range before it", m.Key, m.M.Prev)
			}
			if got := conflicts(); len(got) != 0 {
				t.Fatalf("conflicts %v, want none", got)
			}
			clock.add(time.Minute) // recorded again, other bytes
			if err := rec.Record(ctx, end); err != nil {
				t.Fatal(err)
			}
			if again := lastManifest(t, a, end); again.Key == m.Key || again.Key != manifest.ConflictKey(again.M, again.Digest) {
				t.Fatalf("recorded again at %s, want beside %s at its own conflict key", again.Key, m.Key)
			}
			write(child)
			rc := rangeOf(child[0], evs[0].ShardID, "", seq(101))
			if err := rec.Record(ctx, rc); err != nil {
				t.Fatal(err)
			}
			if mc := lastManifest(t, a, rc); mc.M.Prev == "" {
				t.Fatal("the child's first range names no parent manifest")
			}
			res := checkProof(t, a, 2)
			if sh := res.Shards[0]; sh.Shard != evs[0].ShardID || !sh.Ended || sh.To != seq(5) {
				t.Fatalf("Check: %+v, want shard %s proven to its end", sh, evs[0].ShardID)
			}
		})
	}
}
