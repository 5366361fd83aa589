package archive_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ttl-archiver/archiver/archive"
	"github.com/ttl-archiver/archiver/event"
)

func TestParseKey(t *testing.T) {
	for _, tc := range []struct {
		rel, want, err string
	}{
		// Keys written before keys named the Region.
		{rel: "table=T/kind=expired/dt=2026-03-04/hr=05/shardId-0001-ab-100-200.jsonl.gz", want: "T expired 2026-03-04T05  shardId-0001-ab 100 200 "},
		{rel: "table=T/kind=deleted/dt=2026-03-04/hr=23/s-1-1.0123456789ab.jsonl.zst", want: "T deleted 2026-03-04T23  s 1 1 0123456789ab"},
		{rel: "table=T/kind=undecodable/dt=2026-03-04/hr=00/s-1-2.jsonl", want: "T undecodable 2026-03-04T00  s 1 2 "},
		{rel: "Sessions/2026-03-04/07.jsonl", want: "Sessions  2026-03-04T07     "},
		{rel: "table=T/kind=expired/dt=2026-03-04/hr=05/us-east-1.shardId-0001-ab-100-200.jsonl.gz", want: "T expired 2026-03-04T05 us-east-1 shardId-0001-ab 100 200 "},
		{rel: "table=T/kind=expired/dt=2026-03-04/hr=05/eu-west-1.s-1-1.0123456789ab.jsonl.gz", want: "T expired 2026-03-04T05 eu-west-1 s 1 1 0123456789ab"},
		{rel: "table=T/kind=expired/dt=2026-03-04/hr=01/US-EAST-1.s-1-2.jsonl", err: "a Region"},
		{rel: "table=T/kind=expired/dt=2026-03-04/hr=01/a.b.s-1-2.jsonl", err: "a Region"},
		{rel: "table=T/kind=expired/dt=2026-03-04/hr=01/us-east-1.0123456789ab.jsonl", err: "decimal"},
		{rel: "table=T/kind=expired/dt=2026-03-04/hr=24/s-1-2.jsonl", err: "hr=24"},
		{rel: "table=T/kind=gone/dt=2026-03-04/hr=01/s-1-2.jsonl", err: "kind=gone"},
		{rel: "table=T/kind=expired/dt=2026-3-4/hr=01/s-1-2.jsonl", err: "dt=2026-3-4"},
		{rel: "table=T/kind=expired/dt=2026-03-04/hr=01/s-2-1.jsonl", err: "above LASTSEQ"},
		{rel: "table=T/kind=expired/dt=2026-03-04/hr=01/s-x-1.jsonl", err: "decimal"},
		{rel: "table=T/kind=expired/dt=2026-03-04/hr=01/s-1-2.XYZ.jsonl", err: "want [REGION.]SHARD"},
		{rel: "table=T/kind=expired/dt=2026-03-04/hr=01/s-1-2.XYZ.0123456789ab.jsonl", err: "want [REGION.]SHARD"},
		{rel: "table=T/kind=expired/dt=2026-03-04/hr=01/s-1-2.json", err: "want [REGION.]SHARD"},
		{rel: "table=T/kind=expired/hr=01/s-1-2.jsonl", err: "path segments"},
		{rel: "T/2026-03-04/7.jsonl", err: "hr=7"},
		{rel: "README", err: "path segments"},
	} {
		o, err := archive.ParseKey(tc.rel)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseKey(%q) = %v, want an error with %q", tc.rel, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseKey(%q): %v", tc.rel, err)
			continue
		}
		got := fmt.Sprintf("%s %s %s %s %s %s %s %s", o.Table, o.Kind, o.Hour.Format("2006-01-02T15"), o.Region, o.Shard, o.FirstSeq, o.LastSeq, o.Suffix)
		if got != tc.want {
			t.Errorf("ParseKey(%q) = %q, want %q", tc.rel, got, tc.want)
		}
	}
}

func TestObjectMismatch(t *testing.T) {
	o, err := archive.ParseKey("table=T/kind=expired/dt=2026-03-04/hr=05/eu-west-1.s1-100-200.jsonl.gz")
	if err != nil {
		t.Fatal(err)
	}
	ok := event.Event{Table: "T", Kind: event.Expired, Region: "eu-west-1", ShardID: "s1", SequenceNumber: "150", ApproximateCreationTime: time.Date(2026, 3, 4, 5, 59, 59, 0, time.UTC)}
	for _, tc := range []struct {
		name string
		edit func(*event.Event)
		want string
	}{
		{"fits", func(*event.Event) {}, ""},
		{"table", func(e *event.Event) { e.Table = "U" }, `table "U", the key says "T"`},
		{"kind", func(e *event.Event) { e.Kind = event.Deleted }, "kind deleted, the key says expired"},
		{"hour", func(e *event.Event) { e.ApproximateCreationTime = e.ApproximateCreationTime.Add(time.Second) }, "deleted at 2026-03-04T06:00:00Z, the key says hour 2026-03-04T05"},
		{"Region", func(e *event.Event) { e.Region = "us-east-1" }, `Region "us-east-1", the key says eu-west-1`},
		{"no Region", func(e *event.Event) { e.Region = "" }, `Region "", the key says eu-west-1`},
		{"shard", func(e *event.Event) { e.ShardID = "s2" }, "shard s2, the key says s1"},
		{"below", func(e *event.Event) { e.SequenceNumber = "99" }, "sequence number 99 outside the key's 100-200"},
		{"above", func(e *event.Event) { e.SequenceNumber = "1000" }, "sequence number 1000 outside the key's 100-200"},
	} {
		e := ok
		tc.edit(&e)
		if got := o.Mismatch(&e); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// FuzzParseKey: ParseKey never panics, and a key it accepts is rebuilt
// from what it returned.
func FuzzParseKey(f *testing.F) {
	f.Add("table=T/kind=expired/dt=2026-03-04/hr=05/shardId-0001-ab-100-200.jsonl.gz")
	f.Add("table=T/kind=deleted/dt=2026-03-04/hr=23/s-1-1.0123456789ab.jsonl.zst")
	f.Add("Sessions/2026-03-04/07.jsonl")
	f.Add("table=/kind=/dt=/hr=/--.jsonl")
	f.Add("table=T/kind=expired/dt=2026-03-04/hr=05/us-east-1.shardId-0001-ab-100-200.0123456789ab.jsonl.gz")
	f.Fuzz(func(t *testing.T, rel string) {
		o, err := archive.ParseKey(rel)
		if err != nil {
			return
		}
		if o.Hour.Minute() != 0 || o.Hour.Second() != 0 || o.Hour.Nanosecond() != 0 {
			t.Fatalf("%q: hour %v is not whole", rel, o.Hour)
		}
		if !strings.HasPrefix(rel, "table=") {
			return
		}
		name := o.Shard + "-" + o.FirstSeq + "-" + o.LastSeq
		if o.Region != "" {
			name = o.Region + "." + name
		}
		if o.Suffix != "" {
			name += "." + o.Suffix
		}
		ext := rel[strings.LastIndex(rel, ".jsonl"):]
		again := fmt.Sprintf("table=%s/kind=%s/dt=%s/hr=%s/%s%s", o.Table, o.Kind, o.Hour.Format("2006-01-02"), o.Hour.Format("15"), name, ext)
		if again != rel {
			t.Fatalf("ParseKey(%q) rebuilt as %q", rel, again)
		}
	})
}
