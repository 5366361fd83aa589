package restore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	st "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ttl-archiver/archiver/archive"
	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/natstest"
	"github.com/ttl-archiver/archiver/restore"
	"github.com/ttl-archiver/archiver/restore/restoretest"
	"github.com/ttl-archiver/archiver/sinks"
)

// replayInto replays the archive's Sessions events into the sink URL with
// cfg (its Sink and Kinds set here) and closes the sink.
func (f *fixture) replayInto(t *testing.T, url string, cfg restore.ReplayConfig) restore.ReplayResult {
	t.Helper()
	sk, kinds, err := sinks.Open(f.Ctx, url, sinks.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := archive.Open(f.Ctx, "file://"+f.dir, archive.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Sink, cfg.Kinds = sk, kinds
	res, err := restore.Replay(f.Ctx, cfg, restore.ArchiveSource(a, archive.Selection{Tables: []string{"Sessions"}}, nil))
	if cerr := sk.Close(f.Ctx); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("replay: %v (%+v)", err, res)
	}
	return res
}

// TestReplayOlderThanTheDuplicateWindow replays an archive into a stream
// that already holds its events, published longer ago than the stream's
// duplicate window, so that JetStream itself would store them again: the
// replay reads the IDs the stream holds and sends nothing. With the read
// bounded below what the stream holds, the summary counts exactly the
// events it could not check, and the stream gained exactly that many
// copies.
func TestReplayOlderThanTheDuplicateWindow(t *testing.T) {
	f := newFixture(t, 15, st.StreamViewTypeNewAndOldImages)
	addr := natstest.Start(t).Addr()
	nc, err := nats.Connect("nats://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	// A window JetStream forgets quickly; probe.x is outside the sink's
	// subjects.
	stream, err := js.CreateStream(f.Ctx, jetstream.StreamConfig{Name: "OLD", Subjects: []string{"archive.>", "probe.x"}, Duplicates: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	sinkURL := "nats://" + addr + "?subject=archive.{table}.{kind}"
	later := restoretest.T0.Add(365 * 24 * time.Hour) // the events are a year old
	clock := func() time.Time { return later }
	first := f.replayInto(t, sinkURL, restore.ReplayConfig{BatchSize: 4, Now: clock})
	if first.Sent != 15 || first.Acked != 15 || first.InStream != 0 || first.Unchecked != 0 || !first.StreamComplete || first.Stream != "OLD" {
		t.Fatalf("first replay: %+v", first)
	}
	forgetDuplicates(t, f.Ctx, js)
	onSubjects := func() uint64 {
		t.Helper()
		info, err := stream.Info(f.Ctx, jetstream.WithSubjectFilter("archive.>"))
		if err != nil {
			t.Fatal(err)
		}
		var n uint64
		for _, c := range info.State.Subjects {
			n += c
		}
		return n
	}

	again := f.replayInto(t, sinkURL, restore.ReplayConfig{BatchSize: 4, Now: clock})
	if again.Sent != 0 || again.InStream != 15 || again.Unchecked != 0 || again.StreamIDs != 15 || !again.StreamComplete {
		t.Errorf("replay of what the stream holds: %+v", again)
	}
	if n := onSubjects(); n != 15 {
		t.Errorf("the stream holds %d messages on the sink's subjects, want 15", n)
	}

	bounded := f.replayInto(t, sinkURL, restore.ReplayConfig{BatchSize: 4, Now: clock, MaxStreamIDs: 5})
	if bounded.InStream != 5 || bounded.Sent != 10 || bounded.Unchecked != 10 || bounded.StreamIDs != 5 || bounded.StreamComplete {
		t.Errorf("replay reading 5 IDs: %+v", bounded)
	}
	if n := onSubjects(); n != 15+uint64(bounded.Unchecked) {
		t.Errorf("the stream holds %d messages on the sink's subjects, want 15 and the %d unchecked", n, bounded.Unchecked)
	}

	// Events inside the window are JetStream's to drop: not counted.
	recent := f.replayInto(t, sinkURL, restore.ReplayConfig{BatchSize: 4, MaxStreamIDs: 5,
		Now: func() time.Time { return restoretest.T0 }})
	if recent.Unchecked != 0 || recent.InStream != 5 {
		t.Errorf("replay of events inside the window: %+v", recent)
	}
}

// forgetDuplicates waits until JetStream no longer remembers the IDs
// published so far: a probe ID published again is stored again, and
// every ID older than the probe's is forgotten too.
func forgetDuplicates(t *testing.T, ctx context.Context, js jetstream.JetStream) {
	t.Helper()
	probe := func() bool {
		ack, err := js.PublishMsg(ctx, &nats.Msg{Subject: "probe.x", Header: nats.Header{jetstream.MsgIDHeader: {"probe"}}})
		if err != nil {
			t.Fatal(err)
		}
		return !ack.Duplicate
	}
	probe()
	for !probe() {
		select {
		case <-ctx.Done():
			t.Fatal("JetStream kept remembering a message ID")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestReplaySkipsAnotherRegionsCopies: a global table's expiries that
// another Region's archiver already published (its own stream records:
// other event IDs, shards, sequence numbers, times) are found in the
// stream by their message ID, computed from the archive's lines, and not
// sent again.
func TestReplaySkipsAnotherRegionsCopies(t *testing.T) {
	f := newFixture(t, 15, st.StreamViewTypeNewAndOldImages)
	addr := natstest.Start(t).Addr()
	sinkURL := "nats://" + addr + "?subject=archive.{table}.{kind}&create-stream=GLOBAL"
	a, err := archive.Open(f.Ctx, "file://"+f.dir, archive.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var west []event.Event
	if _, err := a.Events(f.Ctx, archive.Selection{Tables: []string{"Sessions"}, Kinds: []event.Kind{event.Expired}}, func(l archive.Line) error {
		e := l.Event
		e.StreamARN = strings.Replace(e.StreamARN, ":"+e.Region+":", ":eu-west-1:", 1)
		e.Region, e.EventID, e.ShardID, e.SequenceNumber = "eu-west-1", "west-"+e.EventID, "shardId-west", "9"+e.SequenceNumber
		e.ApproximateCreationTime, e.DeletedBy = e.ApproximateCreationTime.Add(time.Second), event.DeletedByOther
		west = append(west, e)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(west) != 15 {
		t.Fatalf("%d expiries in the archive, want 15", len(west))
	}
	sk, _, err := sinks.Open(f.Ctx, sinkURL, sinks.Options{})
	if err != nil {
		t.Fatal(err)
	}
	acked := make(chan error, 1)
	if err := sk.Write(f.Ctx, sinks.Batch{ShardID: "shardId-west", StreamARN: west[0].StreamARN, Events: west}, func(err error) { acked <- err }); err != nil {
		t.Fatal(err)
	}
	if err := <-acked; err != nil {
		t.Fatal(err)
	}
	if err := sk.Close(f.Ctx); err != nil {
		t.Fatal(err)
	}
	later := restoretest.T0.Add(365 * 24 * time.Hour)
	res := f.replayInto(t, sinkURL, restore.ReplayConfig{BatchSize: 4, Now: func() time.Time { return later }})
	if res.Sent != 0 || res.InStream != 15 || res.StreamIDs != 15 || !res.StreamComplete {
		t.Fatalf("replay of the us-east-1 archive into a stream holding eu-west-1's copies: %+v", res)
	}
}
