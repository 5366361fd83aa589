package filesink

import (
	"path/filepath"
	"testing"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/sinks/internal/testkit"
	"github.com/ttl-archiver/archiver/sinks/sinkapi"
)

// TestFileSinkTwoRegions: one archiver reading two Regions' streams into
// one file sink appends both Regions' lines to the table's hour file (its
// names hold no shard, so no two shards' names can meet), each line
// naming its Region.
func TestFileSinkTwoRegions(t *testing.T) {
	ctx := testkit.Ctx(t)
	s, dir := newTestFileSink(t)
	a := testkit.NewAcks()
	var all []event.Event
	for _, region := range []string{"us-east-1", "eu-west-1"} {
		evs := testkit.InRegion(region, testkit.Events("sessions", "shardId-0001", 100, 3))
		all = append(all, evs...)
		if err := s.Write(ctx, sinkapi.Batch{ShardID: "shardId-0001", Events: evs}, a.Ack(region)); err != nil {
			t.Fatal(err)
		}
		if err := a.WaitAck(t, region); err != nil {
			t.Fatal(err)
		}
	}
	got := readLines(t, filepath.Join(dir, "sessions", "2026-03-04", "05.jsonl"))
	if len(got) != len(all) {
		t.Fatalf("%d lines, want %d", len(got), len(all))
	}
	for i := range got {
		if !testkit.SameEvent(got[i], all[i]) {
			t.Fatalf("line %d: %+v, want %+v", i, got[i], all[i])
		}
	}
}
