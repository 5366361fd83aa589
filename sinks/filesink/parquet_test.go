package filesink

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/ttl-archiver/archiver/archive"
	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/manifest"
	"github.com/ttl-archiver/archiver/sinks/internal/recorder"
	"github.com/ttl-archiver/archiver/sinks/internal/testkit"
	"github.com/ttl-archiver/archiver/sinks/sinkapi"
	"github.com/ttl-archiver/archiver/sinkurl"
)

// openParquet opens file://DIR?format=parquet on a fresh directory.
func openParquet(t *testing.T) (*Sink, string) {
	t.Helper()
	dir := t.TempDir()
	s, _, err := open(testkit.Ctx(t), "file://"+dir+"?format=parquet", sinkapi.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(testkit.Ctx(t)) })
	return s.(*Sink), dir
}

// dataFiles lists the regular files below dir (the lock's folder aside),
// relative to it.
func dataFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			if d != nil && d.Name() == "_archiver" {
				return filepath.SkipDir
			}
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// eventIDs reads a Parquet file knowing nothing of its schema but the
// name of one column, and returns that column's values.
func eventIDs(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	pf, err := parquet.OpenFile(f, fi.Size())
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	col, ok := pf.Schema().Lookup("event_id")
	if !ok {
		t.Fatalf("%s: no event_id column", path)
	}
	var ids []string
	r := parquet.NewReader(pf)
	defer r.Close()
	rows := make([]parquet.Row, 16)
	for {
		n, err := r.ReadRows(rows)
		for _, row := range rows[:n] {
			for _, v := range row {
				if v.Column() == col.ColumnIndex {
					ids = append(ids, v.String())
				}
			}
		}
		if err == io.EOF {
			return ids
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
}

// TestFileSinkParquet: with format=parquet a batch becomes one Parquet
// file per partition in the S3 layout, durable at the ack, with the file
// mode, read back by a schema-agnostic reader and by package archive; the
// same batch again lands on the same names; an event with a bad table
// name is refused alone.
func TestFileSinkParquet(t *testing.T) {
	ctx := testkit.Ctx(t)
	s, dir := openParquet(t)
	evs := testkit.Events("sessions", "shardId-0001", 100, 4)
	evs[3].ApproximateCreationTime = testkit.Start.Add(time.Hour)
	evs[1].Table = "bad/name"
	for round := 0; round < 2; round++ {
		a := testkit.NewAcks()
		if err := s.Write(ctx, sinkapi.Batch{ShardID: "shardId-0001", Events: evs}, a.Ack("b")); err != nil {
			t.Fatal(err)
		}
		testkit.AssertRejected(t, a.WaitAck(t, "b"), []int{1}, "")
	}
	want := []string{
		"table=sessions/kind=expired/dt=2026-03-04/hr=05/us-east-1.shardId-0001-000000000000000000100-000000000000000000102.parquet",
		"table=sessions/kind=expired/dt=2026-03-04/hr=06/us-east-1.shardId-0001-000000000000000000103-000000000000000000103.parquet",
	}
	got := dataFiles(t, dir)
	if !slices.Equal(got, want) {
		t.Fatalf("files:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	fi, err := os.Stat(filepath.Join(dir, want[0]))
	if err != nil || fi.Mode().Perm() != sinkurl.DefaultFileMode {
		t.Fatalf("%s: %v, mode %v", want[0], err, fi.Mode())
	}
	if ids := eventIDs(t, filepath.Join(dir, want[0])); !slices.Equal(ids, []string{evs[0].EventID, evs[2].EventID}) {
		t.Fatalf("%s holds %v", want[0], ids)
	}
	ar, err := archive.Open(ctx, "file://"+dir+"?format=parquet", archive.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var read []string
	st, err := ar.Events(ctx, archive.Selection{}, func(l archive.Line) error {
		read = append(read, l.Event.EventID)
		return nil
	})
	if err != nil || st.Undecodable != 0 || !slices.Equal(read, []string{evs[0].EventID, evs[2].EventID, evs[3].EventID}) {
		t.Fatalf("archive read %v (%+v, %v)", read, st, err)
	}
}

// TestFileSinkParquetFollowsNoLink: a symbolic link where a partition's
// folder belongs fails the batch with a permanent error naming it.
func TestFileSinkParquetFollowsNoLink(t *testing.T) {
	ctx := testkit.Ctx(t)
	s, dir := openParquet(t)
	if err := os.Symlink(t.TempDir(), filepath.Join(dir, "table=sessions")); err != nil {
		t.Fatal(err)
	}
	a := testkit.NewAcks()
	if err := s.Write(ctx, sinkapi.Batch{Events: testkit.Events("sessions", "s", 1, 2)}, a.Ack("b")); err != nil {
		t.Fatal(err)
	}
	err := a.WaitAck(t, "b")
	if !errors.Is(err, errSymlink) || !sinkapi.IsPermanent(err) || !strings.Contains(err.Error(), "table=sessions") {
		t.Fatalf("ack %v, want a permanent symlink error naming table=sessions", err)
	}
}

// TestFileSinkParquetManifests: a Parquet file sink records coverage
// manifests: each range lists the files its shard's batches made since
// the last one, whole (size and SHA-256 of every byte) with their first
// and last sequence numbers; a re-delivered batch rewrites the same bytes;
// manifest.Check proves the shard from its start, and archive's coverage
// finds every event covered. manifests=false still turns them off.
func TestFileSinkParquetManifests(t *testing.T) {
	ctx := testkit.Ctx(t)
	dir := t.TempDir()
	a := dirArchive(dir)
	s, err := NewWith(sinkurl.FileConfig{Dir: dir, Format: sinkurl.FormatParquet}, sinkapi.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	evs := testkit.Events("sessions", "shardId-a", 1, 6)
	for i := 4; i < len(evs); i++ {
		evs[i].ApproximateCreationTime = testkit.Start.Add(time.Hour)
	}
	for _, b := range [][]event.Event{evs[0:2], evs[2:6], evs[2:6]} { // the last one re-delivered
		if err := appendBatch(t, s, b); err != nil {
			t.Fatal(err)
		}
	}
	r := testkit.RangeOf(evs[0], "", "", evs[5].SequenceNumber)
	r.Ended = true
	if err := s.Record(ctx, r); err != nil {
		t.Fatal(err)
	}
	files := dataFiles(t, dir)
	files = slices.DeleteFunc(files, func(k string) bool { return strings.HasPrefix(k, manifest.Dir) })
	if len(files) != 3 {
		t.Fatalf("files %q, want 3 (two batches, the second over two hours)", files)
	}
	listed := testkit.CheckListed(t, a, testkit.LastManifest(t, a, r).M, files...)
	for _, o := range listed {
		if fi, err := os.Stat(filepath.Join(dir, o.Key)); err != nil || fi.Size() != o.Bytes {
			t.Errorf("%s listed with %d bytes, not whole: %v", o.Key, o.Bytes, err)
		}
		if o.First == "" || o.Last == "" || o.First > o.Last {
			t.Errorf("%s listed with events (%s, %s)", o.Key, o.First, o.Last)
		}
	}
	testkit.CheckProof(t, a, 1)
	if rep := checkComplete(t, dir, int64(len(evs))); rep.ObjectsVerified != 3 {
		t.Fatalf("%d objects verified, want 3", rep.ObjectsVerified)
	}
	off, err := NewWith(sinkurl.FileConfig{Dir: t.TempDir(), Format: sinkurl.FormatParquet, Manifests: sinkurl.ManifestConfig{Off: true}}, sinkapi.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer off.Close(ctx)
	if err := off.Record(ctx, r); !errors.Is(err, recorder.ErrNotRecording) {
		t.Fatalf("Record with manifests=false: %v, want ErrNotRecording", err)
	}
}
