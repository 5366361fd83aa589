package archive_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ttl-archiver/archiver/archive"
	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/parquetline"
)

// TestParquetObjects reads an archive of Parquet objects (as the sinks'
// format=parquet names them) beside NDJSON ones: every event once, in
// order, each line as its NDJSON twin decodes; a damaged Parquet object
// is one undecodable line naming it, never a failed read.
func TestParquetObjects(t *testing.T) {
	dir := t.TempDir()
	evs := events("Sessions", "shardId-0001-aa", event.Expired, 0, 300, 0)
	put := func(name string, body []byte) {
		p := filepath.Join(dir, "table=Sessions", "kind=expired", "dt=2026-03-04", "hr=05", name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	first, err := parquetline.Encode(evs[:200])
	if err != nil {
		t.Fatal(err)
	}
	put("us-east-1.shardId-0001-aa-100000000000000000000-100000000000000000199.parquet", first)
	var ndjson []byte
	for i := range evs[150:] { // overlaps the Parquet object by 50 events
		ndjson = event.AppendLine(ndjson, &evs[150+i])
	}
	put("us-east-1.shardId-0001-aa-100000000000000000150-100000000000000000299.jsonl", ndjson)

	// A file sink's write cut short by a crash: never acknowledged, no
	// part of the archive.
	put(".us-east-1.shardId-0001-aa-100000000000000000000-100000000000000000199.parquet.tmp", first[:100])
	a := open(t, "file://"+dir, archive.Options{})
	got, st := readAll(t, a, archive.Selection{})
	if !slices.Equal(ids(got), eventIDs(evs)) {
		t.Fatalf("ids = %v\nwant %v", ids(got), eventIDs(evs))
	}
	if st.Objects != 2 || st.Events != 300 || st.Duplicates != 50 || st.Undecodable != 0 {
		t.Errorf("stats = %+v", st)
	}
	for i, l := range got {
		twin, err := event.DecodeLine(event.AppendLine(nil, &evs[i]))
		if err != nil {
			t.Fatal(err)
		}
		want := event.MarshalLine(&twin)
		if have := event.MarshalLine(&l.Event); string(have) != string(want) {
			t.Fatalf("event %d reads back as\n%s\nwant\n%s", i, have, want)
		}
	}

	put("us-east-1.shardId-0001-aa-100000000000000000300-100000000000000000301.parquet", first[:len(first)-9])
	got, st = readAll(t, open(t, "file://"+dir, archive.Options{}), archive.Selection{})
	if len(got) != 300 || st.Undecodable != 1 {
		t.Errorf("with a torn Parquet object: %d events, stats %+v", len(got), st)
	}
}
