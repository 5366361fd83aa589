package s3sink

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ttl-archiver/archiver/archive"
	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/objstore"
	"github.com/ttl-archiver/archiver/parquetline"
	"github.com/ttl-archiver/archiver/sinks/internal/testkit"
	"github.com/ttl-archiver/archiver/sinks/sinkapi"
	"github.com/ttl-archiver/archiver/sinkurl"
)

// TestS3Parquet writes with format=parquet: each object is one Parquet
// file under a .parquet key, uploaded as application/vnd.apache.parquet
// without Content-Encoding, whose rows are the events, and package
// archive reads the archive back.
func TestS3Parquet(t *testing.T) {
	v := testkit.StartVersity(t)
	ctx := testkit.Ctx(t)
	s := openS3(t, v.Endpoint, "format=parquet&flush-interval=1h")
	s.c.Prefix = "pq"
	evs := testkit.Events("sessions", "shardId-0001", 100, 5)
	evs[1].Kind = event.Deleted
	a := testkit.NewAcks()
	if err := s.Write(ctx, sinkapi.Batch{ShardID: "shardId-0001", Events: evs}, a.Ack("b")); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.WaitAck(t, "b"); err != nil {
		t.Fatal(err)
	}
	keys := v.Objects(t, "pq/")
	want := []string{
		"pq/table=sessions/kind=deleted/dt=2026-03-04/hr=05/us-east-1.shardId-0001-000000000000000000101-000000000000000000101.parquet",
		"pq/table=sessions/kind=expired/dt=2026-03-04/hr=05/us-east-1.shardId-0001-000000000000000000100-000000000000000000104.parquet",
	}
	if strings.Join(keys, "\n") != strings.Join(want, "\n") {
		t.Fatalf("keys:\n%s\nwant:\n%s", strings.Join(keys, "\n"), strings.Join(want, "\n"))
	}
	got, out := v.Read(t, want[1])
	if len(got) != 4 || !testkit.SameEvent(got[0], evs[0]) || !testkit.SameEvent(got[3], evs[4]) {
		t.Fatalf("%s holds %d events, want evs 0, 2, 3 and 4", want[1], len(got))
	}
	if ct := aws.ToString(out.ContentType); ct != "application/vnd.apache.parquet" {
		t.Errorf("Content-Type %q", ct)
	}
	if ce := aws.ToString(out.ContentEncoding); ce != "" {
		t.Errorf("Content-Encoding %q, want none", ce)
	}
	ar, err := archive.Open(ctx, "s3://archive/pq?endpoint="+v.Endpoint+"&path-style=true&format=parquet", archive.Options{AWSConfig: testkit.AWSConfig})
	if err != nil {
		t.Fatal(err)
	}
	var read []string
	st, err := ar.Events(ctx, archive.Selection{}, func(l archive.Line) error {
		read = append(read, l.Event.EventID)
		return nil
	})
	if err != nil || st.Undecodable != 0 || len(read) != len(evs) {
		t.Fatalf("archive read %v (%+v, %v), want the %d events", read, st, err, len(evs))
	}
}

// TestS3ParquetRefusesCompression: compression= names the compression of
// NDJSON objects; with format=parquet it is refused, naming both.
func TestS3ParquetRefusesCompression(t *testing.T) {
	_, _, err := open(testkit.Ctx(t), "s3://archive/ttl?format=parquet&compression=gzip", sinkapi.Options{AWSConfig: testkit.AWSConfig})
	var ce *sinkurl.ConfigError
	if !errors.As(err, &ce) || ce.Param != "compression" || !strings.Contains(err.Error(), "format=parquet") {
		t.Fatalf("error %v, want a ConfigError of compression naming format=parquet", err)
	}
	_, err = NewWithClient(objstore.S3Config{Bucket: "archive", Format: sinkurl.FormatParquet, Compression: "zstd"}, nil, sinkapi.Options{})
	if err == nil || !strings.Contains(err.Error(), "format parquet") || !strings.Contains(err.Error(), "zstd") {
		t.Fatalf("NewWithClient: %v, want an error naming compression and format", err)
	}
}

// TestS3ParquetKeyConflicts: a Parquet object found at the key is read as
// its rows' lines: the same events in other bytes count as written, other
// events send the upload to the distinct key.
func TestS3ParquetKeyConflicts(t *testing.T) {
	v := testkit.StartVersity(t)
	evs := testkit.Events("t", "s", 1, 3)
	noTTLAttribute := func(e *event.Event) { e.TTLAttribute = "" }
	for i, tc := range []struct {
		name     string
		existing []event.Event
		outcome  string
	}{
		{"same events in other bytes", edited(evs, noTTLAttribute), ConflictSameEvents},
		{"other events", testkit.Events("t", "s", 50, 3), ConflictDistinctKey},
		{"fewer events", evs[:2], ConflictDistinctKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testkit.Ctx(t)
			reg := prometheus.NewRegistry()
			prefix := fmt.Sprintf("pqconflict%d", i)
			s, err := New(ctx, objstore.S3Config{Bucket: "archive", Prefix: prefix, Endpoint: v.Endpoint, PathStyle: true, Format: sinkurl.FormatParquet, FlushInterval: time.Hour, RetryBase: time.Millisecond},
				sinkapi.Options{AWSConfig: testkit.AWSConfig, Registerer: reg})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close(ctx)
			key := s.Key("t", event.Expired, "us-east-1", "s", testkit.Start, evs[0].SequenceNumber, evs[2].SequenceNumber)
			body, err := parquetline.Encode(tc.existing)
			if err != nil {
				t.Fatal(err)
			}
			stored := map[string][]byte{key: body}
			if _, err := v.Client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("archive"), Key: aws.String(key), Body: bytes.NewReader(body)}); err != nil {
				t.Fatal(err)
			}
			a := testkit.NewAcks()
			if err := s.Write(ctx, sinkapi.Batch{Events: evs}, a.Ack("b")); err != nil {
				t.Fatal(err)
			}
			if err := s.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			if err := a.WaitAck(t, "b"); err != nil {
				t.Fatalf("ack error %v, want success", err)
			}
			if got := conflictCounts(t, reg); len(got) != 1 || got[tc.outcome] != 1 {
				t.Fatalf("conflicts counted %v, want one %s", got, tc.outcome)
			}
			checkConflictObjects(t, v, prefix, key, s.ext, stored, tc.outcome, evs)
			checkConflictRecorded(t, v, s, prefix, key, evs)
			if tc.outcome == ConflictDistinctKey {
				checkParquetObjects(t, v, prefix)
			}
		})
	}
}

// edited returns a copy of evs with edit applied to each.
func edited(evs []event.Event, edit func(*event.Event)) []event.Event {
	out := append([]event.Event(nil), evs...)
	for i := range out {
		edit(&out[i])
	}
	return out
}

// checkParquetObjects checks that every data object under prefix is a
// Parquet file.
func checkParquetObjects(t *testing.T, v *testkit.Versity, prefix string) {
	t.Helper()
	for _, k := range v.Objects(t, prefix+"/table=") {
		out, err := v.Client.GetObject(testkit.Ctx(t), &s3.GetObjectInput{Bucket: aws.String("archive"), Key: aws.String(k)})
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(out.Body)
		out.Body.Close()
		if err != nil || !parquetline.IsParquet(body) {
			t.Fatalf("%s: not a Parquet file (%v)", k, err)
		}
	}
}
