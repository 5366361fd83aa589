package archive_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/archive"
	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/s3test"
)

// inRegion returns evs as a global table's replica in region has them:
// that Region's stream ARN, Region and event IDs, the same shard IDs and
// sequence numbers (two Regions' streams can share them), and, unless
// sameItems, items of its own.
func inRegion(region string, evs []event.Event, sameItems bool) []event.Event {
	out := make([]event.Event, len(evs))
	for i, e := range evs {
		e.StreamARN = strings.Replace(e.StreamARN, ":us-east-1:", ":"+region+":", 1)
		e.Region = event.RegionOf(e.StreamARN)
		e.EventID = region + "-" + e.EventID
		if !sameItems && e.OldImage != nil {
			e.OldImage = maps(e.OldImage)
			e.OldImage["region"] = &types.AttributeValueMemberS{Value: region}
		}
		out[i] = e
	}
	return out
}

func maps(m event.Item) event.Item {
	out := make(event.Item, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}

// verify reads the archive at url as `archiver verify` does (images
// skipped) and returns its report.
func verify(t *testing.T, url string) *archive.Report {
	t.Helper()
	v := archive.NewVerifier()
	a := open(t, url, v.Hook(archive.Options{SkipImages: true}))
	st, err := a.Events(testCtx(t), archive.Selection{}, func(l archive.Line) error {
		v.Event(&l.Event)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return v.Finish(url, st)
}

// TestTwoRegionsOneArchive: two Regions' archivers write one prefix,
// their shards' IDs and sequence numbers equal, beside an object written
// before keys and lines named their Region; every event is read once,
// the old object first, then each Region's in its stream order, and
// verify finds nothing amiss.
func TestTwoRegionsOneArchive(t *testing.T) {
	srv := s3test.Start(t)
	url := s3URL(srv, "g", "")
	old := events("Sessions", "s0", event.Expired, 0, 10, 0) // no Region: the old key and line
	east := inRegion("us-east-1", events("Sessions", "s1", event.Expired, 10, 20, 0), false)
	west := inRegion("eu-west-1", events("Sessions", "s1", event.Expired, 10, 20, 0), false)
	write(t, url, old, east, west)
	a := open(t, url, archive.Options{})
	objs, err := a.Objects(testCtx(t), archive.Selection{})
	if err != nil {
		t.Fatal(err)
	}
	var regions []string
	for _, o := range objs {
		regions = append(regions, o.Region+"/"+o.Shard)
	}
	slices.Sort(regions)
	if want := []string{"/s0", "eu-west-1/s1", "us-east-1/s1"}; !slices.Equal(regions, want) {
		t.Fatalf("objects' Regions and shards %v, want %v", regions, want)
	}
	got, st := readAll(t, a, archive.Selection{})
	want := append(append(eventIDs(old), eventIDs(west)...), eventIDs(east)...)
	if !slices.Equal(ids(got), want) || st.Duplicates != 0 {
		t.Fatalf("read %v (stats %+v)\nwant %v", ids(got), st, want)
	}
	for _, l := range got[:10] {
		if l.Event.Region != "us-east-1" { // the old line's streamArn's
			t.Fatalf("old line: Region %q", l.Event.Region)
		}
	}
	rep := verify(t, url)
	if rep.Events != 50 || rep.Duplicates != 0 || len(rep.Mismatches) != 0 || len(rep.StrayKeys) != 0 || rep.Undecodable != 0 {
		t.Fatalf("verify: %+v", rep)
	}
}

// TestOneExpiryTwoRegionsCountsOnce: a global table's expiries archived
// by two Regions (each its own stream records: event IDs, deletion times,
// shards' positions, principals) are one event each to the reader and to
// verify, which also finds both Regions' stream records archived; an
// expiry without its old image (KEYS_ONLY) cannot be told to be the same
// and counts once per Region.
func TestOneExpiryTwoRegionsCountsOnce(t *testing.T) {
	srv := s3test.Start(t)
	for _, url := range []string{s3URL(srv, "once", ""), "file://" + t.TempDir()} {
		t.Run(strings.SplitN(url, ":", 2)[0], func(t *testing.T) { oneExpiryTwoRegions(t, url) })
	}
}

// TestOneRegionKeepsEventIDs: in a partition of one Region's keys no
// other Region's copy can lie, and lines keep their event IDs' identity:
// an identical item that expired twice in an hour (two records, one
// message ID) counts twice there.
func TestOneRegionKeepsEventIDs(t *testing.T) {
	srv := s3test.Start(t)
	url := s3URL(srv, "one", "")
	evs := inRegion("us-east-1", events("Sessions", "s1", event.Expired, 10, 2, 1), true)
	evs[1].OldImage = evs[0].OldImage // the same item, TTL and all, expiring again
	if event.MessageID(&evs[0]) != event.MessageID(&evs[1]) {
		t.Fatal("test set-up: the two expiries' message IDs differ")
	}
	write(t, url, evs)
	if rep := verify(t, url); rep.Events != 2 || rep.Duplicates != 0 {
		t.Fatalf("verify: %d events, %d duplicates; want 2, 0", rep.Events, rep.Duplicates)
	}
}

func oneExpiryTwoRegions(t *testing.T, url string) {
	east := inRegion("us-east-1", events("Sessions", "s1", event.Expired, 10, 20, 0), true)
	west := inRegion("eu-west-1", events("Sessions", "s1", event.Expired, 10, 20, 0), true)
	for i := range west {
		west[i].DeletedBy = event.DeletedByOther // the replicated delete, under past-ttl
		west[i].ApproximateCreationTime = west[i].ApproximateCreationTime.Add(500 * time.Millisecond)
	}
	keysOnly := func(evs []event.Event) []event.Event {
		out := slices.Clone(evs[:3])
		for i := range out {
			out[i].OldImage, out[i].SequenceNumber, out[i].EventID = nil, "2"+out[i].SequenceNumber[1:], "keys-only-"+out[i].EventID
		}
		return out
	}
	write(t, url, east, west, keysOnly(east), keysOnly(west))
	found := map[string]archive.StreamRemove{}
	for _, e := range append(append(slices.Clone(east), west...), append(keysOnly(east), keysOnly(west)...)...) {
		found[e.EventID] = archive.StreamRemove{EventID: e.EventID, Created: e.ApproximateCreationTime, Shard: e.ShardID}
	}
	check := archive.NewMissingCheck("Sessions", found, t0.Add(24*time.Hour))
	v := archive.NewVerifier()
	a := open(t, url, check.Hook(v.Hook(archive.Options{SkipImages: true})))
	st, err := a.Events(testCtx(t), archive.Selection{}, func(l archive.Line) error {
		v.Event(&l.Event)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rep := v.Finish(url, st)
	if rep.Lines != 46 || rep.Events != 26 || rep.Duplicates != 20 || len(rep.Mismatches) != 0 {
		t.Fatalf("verify: %d lines, %d events, %d duplicates, mismatches %v; want 46, 26 (20 expiries and 6 keys-only ones), 20", rep.Lines, rep.Events, rep.Duplicates, rep.Mismatches)
	}
	if len(rep.Partitions) != 1 || rep.Partitions[0].Events != 26 {
		t.Fatalf("partitions %+v", rep.Partitions)
	}
	if res := check.Result(); res.Records != 46 || res.Archived != 46 || len(res.Missing) != 0 {
		t.Fatalf("stream check: %+v", res)
	}
	// With images too, the reader passes on each expiry once.
	got, st := readAll(t, open(t, url, archive.Options{}), archive.Selection{})
	if len(got) != 26 || st.Duplicates != 20 {
		t.Fatalf("read %d events (stats %+v), want 26", len(got), st)
	}
}
