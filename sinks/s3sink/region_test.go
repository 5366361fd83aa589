package s3sink

import (
	"strings"
	"testing"

	"github.com/ttl-archiver/archiver/sinks/internal/testkit"
	"github.com/ttl-archiver/archiver/sinks/sinkapi"
)

// TestS3TwoRegionsShareABucket: a global table's replicas in two Regions
// whose streams have equal shard IDs and sequence numbers archive into
// one bucket and prefix, by an archiver per Region (two sinks) or by one
// reading both (one sink): every object is of one Region and named by it,
// no key is taken twice (no conflict, no distinct .HASH12. key), and
// every line is where its Region's key says.
func TestS3TwoRegionsShareABucket(t *testing.T) {
	v := testkit.StartVersity(t)
	ctx := testkit.Ctx(t)
	regions := []string{"us-east-1", "eu-west-1"}
	for _, deployment := range []string{"per-region", "one-archiver"} {
		t.Run(deployment, func(t *testing.T) {
			sinks := []*Sink{openS3(t, v.Endpoint, "flush-interval=1h"), openS3(t, v.Endpoint, "flush-interval=1h")}
			if deployment == "one-archiver" {
				sinks[1] = sinks[0]
			}
			a := testkit.NewAcks()
			for i, region := range regions {
				sinks[i].c.Prefix = "ttl/" + deployment
				evs := testkit.InRegion(region, testkit.Events("sessions", "shardId-0001", 100, 3))
				if err := sinks[i].Write(ctx, sinkapi.Batch{ShardID: "shardId-0001", Events: evs}, a.Ack(region)); err != nil {
					t.Fatal(err)
				}
			}
			for _, s := range sinks {
				if err := s.Flush(ctx); err != nil {
					t.Fatal(err)
				}
			}
			for _, region := range regions {
				if n, err := a.Get(region); n != 1 || err != nil {
					t.Fatalf("%s: %d acks, err %v", region, n, err)
				}
			}
			p := "ttl/" + deployment + "/table=sessions/kind=expired/dt=2026-03-04/hr=05/"
			want := []string{
				p + "eu-west-1.shardId-0001-000000000000000000100-000000000000000000102.jsonl.gz",
				p + "us-east-1.shardId-0001-000000000000000000100-000000000000000000102.jsonl.gz",
			}
			if got := v.Objects(t, "ttl/"+deployment+"/"); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("keys:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			for i, key := range want {
				region := regions[1-i]
				evs, _ := v.Read(t, key)
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
