package archive_test

import (
	"slices"
	"strings"
	"testing"

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
