package natssink

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/natsmsg"
	"github.com/ttl-archiver/archiver/sinks/internal/testkit"
	"github.com/ttl-archiver/archiver/sinks/sinkapi"
)

// replicated is evs as a replica Region's stream has them, read by an
// archiver there under expired-when past-ttl: the same items, keys and
// TTLs, and a record of its own (another shard, sequence number, event ID
// and deletion time, no TTL principal).
func replicated(region string, evs []event.Event) []event.Event {
	out := testkit.InRegion(region, evs)
	for i := range out {
		out[i].ShardID = "shardId-9999"
		out[i].SequenceNumber = "9" + out[i].SequenceNumber
		out[i].ApproximateCreationTime = out[i].ApproximateCreationTime.Add(1200 * time.Millisecond)
		out[i].DeletedBy = event.DeletedByOther
	}
	return out
}

// TestNATSOneExpiryFromTwoRegions: over a real nats-server, in every
// format, the expiries of a global table published by an archiver in
// each Region (and by one archiver reading both) carry one Nats-Msg-Id
// per expiry, so JetStream keeps one message of each; an expiry without
// its old image (KEYS_ONLY) keeps its Regions' own event IDs, and an item
// that expires again with another TTL is a new message.
func TestNATSOneExpiryFromTwoRegions(t *testing.T) {
	ctx := testkit.Ctx(t)
	ns := testkit.StartNATS(t, nil)
	_, js := ns.Client(t)
	east := testkit.InRegion("us-east-1", testkit.Events("sessions", "shardId-0001", 1, 5))
	west := replicated("eu-west-1", east)
	keysOnlyEast := testkit.InRegion("us-east-1", testkit.Events("sessions", "shardId-0001", 10, 1))
	keysOnlyEast[0].OldImage, keysOnlyEast[0].TTLValue = nil, ""
	keysOnlyWest := replicated("eu-west-1", keysOnlyEast)
	again := testkit.InRegion("us-east-1", testkit.Events("sessions", "shardId-0001", 20, 1)) // east[0]'s item, a later life
	again[0].Keys, again[0].OldImage = east[0].Keys, maps.Clone(east[0].OldImage)
	again[0].OldImage["expiresAt"] = &types.AttributeValueMemberN{Value: "1772600600"}
	for _, format := range natsmsg.Formats {
		for _, deployment := range []string{"per-region", "one-archiver"} {
			t.Run(format+"/"+deployment, func(t *testing.T) {
				name := strings.ToUpper(format + "_" + strings.ReplaceAll(deployment, "-", "_"))
				st := testkit.CreateStream(t, js, name, name+".>")
				url := "nats://" + ns.URL + "?subject=" + name + ".{table}.{kind}&format=" + format
				first, _, err := open(ctx, url, sinkapi.Options{})
				if err != nil {
					t.Fatal(err)
				}
				defer first.Close(ctx)
				second := first
				if deployment == "per-region" {
					if second, _, err = open(ctx, url, sinkapi.Options{}); err != nil {
						t.Fatal(err)
					}
					defer second.Close(ctx)
				}
				a := testkit.NewAcks()
				for id, w := range map[string]struct {
					s   sinkapi.Sink
					evs []event.Event
				}{
					"east": {first, append(append(slices.Clone(east), keysOnlyEast...), again...)},
					"west": {second, append(slices.Clone(west), keysOnlyWest...)},
				} {
					if err := w.s.Write(ctx, sinkapi.Batch{ShardID: w.evs[0].ShardID, StreamARN: w.evs[0].StreamARN, Events: w.evs}, a.Ack(id)); err != nil {
						t.Fatal(err)
					}
				}
				for _, id := range []string{"east", "west"} {
					if err := a.WaitAck(t, id); err != nil {
						t.Fatal(err)
					}
				}
				var want []string
				for _, e := range append(append(slices.Clone(east), keysOnlyEast[0], keysOnlyWest[0]), again...) {
					want = append(want, event.MessageID(&e))
				}
				var got []string
				for _, m := range testkit.StreamMsgs(t, st) {
					got = append(got, m.Headers().Get(natsmsg.HeaderMsgID))
				}
				slices.Sort(want)
				slices.Sort(got)
				if !slices.Equal(got, want) {
					t.Fatalf("the stream holds %d messages %v,\nwant %d %v", len(got), got, len(want), want)
				}
			})
		}
	}
}
