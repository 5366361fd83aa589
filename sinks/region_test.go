package sinks

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/ttl-archiver/archiver/event"
)

// inRegion returns evs as read from the table's replica in region: the
// stream ARN and Region of that Region, event IDs of its own (a stream's
// event IDs are its own), and the same shard IDs, sequence numbers and
// items, which two Regions' streams can share.
func inRegion(region string, evs []event.Event) []event.Event {
	out := make([]event.Event, len(evs))
	for i, e := range evs {
		e.StreamARN = strings.Replace(e.StreamARN, ":us-east-1:", ":"+region+":", 1)
		e.Region = event.RegionOf(e.StreamARN)
		e.EventID = region + "-" + e.EventID
		out[i] = e
	}
	return out
}

// TestS3TwoRegionsShareABucket: a global table's replicas in two Regions
// whose streams have equal shard IDs and sequence numbers archive into
// one bucket and prefix, by an archiver per Region (two sinks) or by one
// reading both (one sink): every object is of one Region and named by it,
// no key is taken twice (no conflict, no distinct .HASH12. key), and
// every line is where its Region's key says.
func TestS3TwoRegionsShareABucket(t *testing.T) {
	v := startVersity(t)
	ctx := testCtx(t)
	regions := []string{"us-east-1", "eu-west-1"}
	for _, deployment := range []string{"per-region", "one-archiver"} {
		t.Run(deployment, func(t *testing.T) {
			sinks := []*S3Sink{openS3(t, v.endpoint, "flush-interval=1h"), openS3(t, v.endpoint, "flush-interval=1h")}
			if deployment == "one-archiver" {
				sinks[1] = sinks[0]
			}
			a := newAcks()
			for i, region := range regions {
				sinks[i].c.Prefix = "ttl/" + deployment
				evs := inRegion(region, testEvents("sessions", "shardId-0001", 100, 3))
				if err := sinks[i].Write(ctx, Batch{ShardID: "shardId-0001", Events: evs}, a.ack(region)); err != nil {
					t.Fatal(err)
				}
			}
			for _, s := range sinks {
				if err := s.Flush(ctx); err != nil {
					t.Fatal(err)
				}
			}
			for _, region := range regions {
				if n, err := a.get(region); n != 1 || err != nil {
					t.Fatalf("%s: %d acks, err %v", region, n, err)
				}
			}
			p := "ttl/" + deployment + "/table=sessions/kind=expired/dt=2026-03-04/hr=05/"
			want := []string{
				p + "eu-west-1.shardId-0001-000000000000000000100-000000000000000000102.jsonl.gz",
				p + "us-east-1.shardId-0001-000000000000000000100-000000000000000000102.jsonl.gz",
			}
			if got := v.objects(t, "ttl/"+deployment+"/"); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("keys:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			for i, key := range want {
				region := regions[1-i]
				evs, _ := v.read(t, key)
				if len(evs) != 3 {
					t.Fatalf("%s: %d lines, want 3", key, len(evs))
				}
				for _, e := range evs {
					if e.Region != region || !strings.HasPrefix(e.EventID, region+"-") {
						t.Fatalf("%s holds a line of %s (%s)", key, e.Region, e.EventID)
					}
				}
			}
		})
	}
}

// TestFileSinkTwoRegions: one archiver reading two Regions' streams into
// one file sink appends both Regions' lines to the table's hour file (its
// names hold no shard, so no two shards' names can meet), each line
// naming its Region.
func TestFileSinkTwoRegions(t *testing.T) {
	ctx := testCtx(t)
	s, dir := newTestFileSink(t)
	a := newAcks()
	var all []event.Event
	for _, region := range []string{"us-east-1", "eu-west-1"} {
		evs := inRegion(region, testEvents("sessions", "shardId-0001", 100, 3))
		all = append(all, evs...)
		if err := s.Write(ctx, Batch{ShardID: "shardId-0001", Events: evs}, a.ack(region)); err != nil {
			t.Fatal(err)
		}
		if err := a.waitAck(t, region); err != nil {
			t.Fatal(err)
		}
	}
	got := readLines(t, filepath.Join(dir, "sessions", "2026-03-04", "05.jsonl"))
	if len(got) != len(all) {
		t.Fatalf("%d lines, want %d", len(got), len(all))
	}
	for i := range got {
		if !sameEvent(got[i], all[i]) {
			t.Fatalf("line %d: %+v, want %+v", i, got[i], all[i])
		}
	}
}
