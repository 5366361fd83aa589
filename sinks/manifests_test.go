package sinks

import (
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/manifest"
	"github.com/ttl-archiver/archiver/sinks/internal/testkit"
)

// The tests of coverage manifests shared by the S3 and the file sink.

// TestEmptyEndRangeAtItsConflictKey: a shard's last, empty range (To,
// To] ends where the range before it does, whose manifest holds its key:
// it goes straight to its conflict key (S3: no 412, no conflict
// counted); recorded again after a crash (other bytes) it goes beside
// it; Check sees the shard ended, and its child's first range names it.
func TestEmptyEndRangeAtItsConflictKey(t *testing.T) {
	v := testkit.StartVersity(t)
	for _, kind := range []string{"s3", "file"} {
		t.Run(kind, func(t *testing.T) {
			ctx := testkit.Ctx(t)
			clock := testkit.NewClock()
			evs := testkit.Events("sessions", "shardId-end", 1, 5)
			child := testkit.Events("sessions", "shardId-next", 100, 2)
			var (
				rec       manifestRecorder
				a         testkit.Archive
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
			last := testkit.RangeOf(evs[0], "", "", testkit.Seq(5))
			end := testkit.RangeOf(evs[0], "", testkit.Seq(5), testkit.Seq(5))
			end.Ended, end.Records, end.Events = true, 0, nil
			for _, rg := range []manifest.Range{last, end} {
				if err := rec.Record(ctx, rg); err != nil {
					t.Fatal(err)
				}
			}
			m := testkit.LastManifest(t, a, end)
			if m.Key != manifest.ConflictKey(m.M, m.Digest) || m.M.Prev != testkit.LastManifest(t, a, last).Digest {
				t.Fatalf("the empty end range is at %s naming %q; want its conflict key, naming the range before it", m.Key, m.M.Prev)
			}
			if got := conflicts(); len(got) != 0 {
				t.Fatalf("conflicts %v, want none", got)
			}
			clock.Add(time.Minute) // recorded again, other bytes
			if err := rec.Record(ctx, end); err != nil {
				t.Fatal(err)
			}
			if again := testkit.LastManifest(t, a, end); again.Key == m.Key || again.Key != manifest.ConflictKey(again.M, again.Digest) {
				t.Fatalf("recorded again at %s, want beside %s at its own conflict key", again.Key, m.Key)
			}
			write(child)
			rc := testkit.RangeOf(child[0], evs[0].ShardID, "", testkit.Seq(101))
			if err := rec.Record(ctx, rc); err != nil {
				t.Fatal(err)
			}
			if mc := testkit.LastManifest(t, a, rc); mc.M.Prev == "" {
				t.Fatal("the child's first range names no parent manifest")
			}
			res := testkit.CheckProof(t, a, 2)
			if sh := res.Shards[0]; sh.Shard != evs[0].ShardID || !sh.Ended || sh.To != testkit.Seq(5) {
				t.Fatalf("Check: %+v, want shard %s proven to its end", sh, evs[0].ShardID)
			}
		})
	}
}
