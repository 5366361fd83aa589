package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/ttl-archiver/archiver/archive"
	"github.com/ttl-archiver/archiver/demo"
	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/engine/enginetest"
	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/eventually"
	"github.com/ttl-archiver/archiver/internal/s3test"
	"github.com/ttl-archiver/archiver/sinks"
)

// verifyT0 is the first test event's deletion time.
var verifyT0 = time.Date(2026, 3, 4, 23, 0, 0, 0, time.UTC)

// verifyEvents returns n expired events of table and shard with sequence
// numbers first, first+1, ..., one a minute from verifyT0 + first minutes.
func verifyEvents(table, shard string, first, n int) []event.Event {
	evs := make([]event.Event, n)
	for i := range evs {
		seq := first + i
		key := event.Item{"pk": &ddbtypes.AttributeValueMemberS{Value: fmt.Sprintf("item-%d", seq)}}
		evs[i] = event.Event{
			Kind: event.Expired, Table: table, ShardID: shard, EventName: "REMOVE", DeletedBy: event.DeletedByTTL,
			SequenceNumber:          fmt.Sprintf("1%020d", seq),
			EventID:                 fmt.Sprintf("%s-%d", table, seq),
			ApproximateCreationTime: verifyT0.Add(time.Duration(seq) * time.Minute),
			Keys:                    key, OldImage: key,
		}
	}
	return evs
}

// archiveWith writes batches through the real sink of url (one object or
// append per batch) and closes it.
func archiveWith(t *testing.T, url string, batches ...[]event.Event) {
	t.Helper()
	ctx := context.Background()
	sk, _, err := sinks.Open(ctx, url, sinks.Options{AWSConfig: s3test.AWSConfig})
	if err != nil {
		t.Fatal(err)
	}
	acks := make(chan error, len(batches))
	for _, b := range batches {
		if err := sk.Write(ctx, sinks.Batch{ShardID: b[0].ShardID, Events: b}, func(err error) { acks <- err }); err != nil {
			t.Fatal(err)
		}
		if err := sk.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := sk.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for range batches {
		if err := <-acks; err != nil {
			t.Fatal(err)
		}
	}
}

// runVerifyCmd runs `archiver verify args...` and returns its exit code,
// stdout and stderr.
func runVerifyCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code := dispatch(ctx, append([]string{"verify"}, args...), env{stdout: &stdout, stderr: &stderr, getenv: func(string) string { return "" }})
	return code, stdout.String(), stderr.String()
}

func decodeReport(t *testing.T, out string) verifyReport {
	t.Helper()
	var r verifyReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("report is not JSON: %v\n%s", err, out)
	}
	return r
}

// TestVerifyListsTornTails: a torn tail a file sink cut off (a writer
// killed mid-append) is listed where it was kept, with its size, and is
// no failure: its records were delivered again and every line decodes.
func TestVerifyListsTornTails(t *testing.T) {
	dir := t.TempDir()
	evs := verifyEvents("Sessions", "s1", 0, 20)
	archiveWith(t, "file://"+dir, evs[:10])
	hour := filepath.Join(dir, "Sessions", "2026-03-04", "23.jsonl")
	whole, err := os.ReadFile(hour)
	if err != nil {
		t.Fatal(err)
	}
	torn := event.AppendLine(nil, &evs[10])
	torn = torn[:len(torn)/2]
	if err := os.WriteFile(hour, append(whole, torn...), 0o640); err != nil {
		t.Fatal(err)
	}
	archiveWith(t, "file://"+dir, evs[10:])
	code, out, stderr := runVerifyCmd(t, "--from", "file://"+dir, "--json")
	r := decodeReport(t, out)
	want := archive.TornTail{Key: fmt.Sprintf("_archiver/torn/Sessions/2026-03-04/23.jsonl.%d", len(whole)), Bytes: int64(len(torn))}
	if code != 0 || r.Undecodable != 0 || r.Events != 20 || r.TornTailsTotal != 1 || len(r.TornTails) != 1 || r.TornTails[0] != want {
		t.Fatalf("exit %d, %d undecodable, %d events, torn tails %d %+v; want 0, 0, 20, 1 %+v\n%s", code, r.Undecodable, r.Events, r.TornTailsTotal, r.TornTails, want, stderr)
	}
	_, out, _ = runVerifyCmd(t, "--from", "file://"+dir)
	if !strings.Contains(out, "torn tails kept aside: 1") || !strings.Contains(out, want.Key) {
		t.Errorf("the tables do not list the torn tail:\n%s", out)
	}
}

// TestVerifyFileArchive: a file archive with duplicates, two days, an
// undecodable line and a file in the wrong hour: the numbers, the bad
// line's place, the mismatch, and exit code 1.
func TestVerifyFileArchive(t *testing.T) {
	dir := t.TempDir()
	evs := verifyEvents("Sessions", "s1", 0, 90) // 23:00 to 00:29 the next day
	archiveWith(t, "file://"+dir, evs[:70], evs[60:], verifyEvents("Carts", "s2", 0, 3))
	hour := filepath.Join(dir, "Sessions", "2026-03-04", "23.jsonl")
	f, err := os.OpenFile(hour, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("{\"Item\": truncated\n")
	f.Close()
	// An hour file holding another hour's events.
	var body []byte
	for _, e := range verifyEvents("Carts", "s2", 100, 3) { // 00:40 on the 5th
		body = event.AppendLine(body, &e)
	}
	os.MkdirAll(filepath.Join(dir, "Carts", "2026-03-05"), 0o755)
	os.WriteFile(filepath.Join(dir, "Carts", "2026-03-05", "02.jsonl"), body, 0o644)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("hello"), 0o644)

	code, out, stderr := runVerifyCmd(t, "--from", "file://"+dir, "--json")
	if code != 1 || !strings.Contains(stderr, "do not decode") {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
	r := decodeReport(t, out)
	if r.Objects != 4 || r.Lines != 70+30+3+3+1 || r.Events != 96 || r.Duplicates != 10 || r.Undecodable != 1 {
		t.Errorf("report %+v", r)
	}
	if len(r.BadLines) != 1 || r.BadLines[0].Object != "Sessions/2026-03-04/23.jsonl" || r.BadLines[0].Line != 61 {
		t.Errorf("bad lines %+v", r.BadLines)
	}
	if len(r.Mismatches) != 1 || r.Mismatches[0].Object != "Carts/2026-03-05/02.jsonl" || !strings.Contains(r.Mismatches[0].Problem, "the key says hour 2026-03-05T02") {
		t.Errorf("mismatches %+v", r.Mismatches)
	}
	if len(r.StrayKeys) != 1 || r.StrayKeys[0].Object != "notes.txt" {
		t.Errorf("stray keys %+v", r.StrayKeys)
	}
	want := []archive.Partition{
		{Table: "Carts", Kind: event.Expired, Day: "2026-03-04", Events: 3, First: verifyT0, Last: verifyT0.Add(2 * time.Minute)},
		{Table: "Carts", Kind: event.Expired, Day: "2026-03-05", Events: 3, First: verifyT0.Add(100 * time.Minute), Last: verifyT0.Add(102 * time.Minute)},
		{Table: "Sessions", Kind: event.Expired, Day: "2026-03-04", Events: 60, First: verifyT0, Last: verifyT0.Add(59 * time.Minute)},
		{Table: "Sessions", Kind: event.Expired, Day: "2026-03-05", Events: 30, First: verifyT0.Add(time.Hour), Last: verifyT0.Add(89 * time.Minute)},
	}
	if !slices.Equal(r.Partitions, want) {
		t.Errorf("partitions\n%+v\nwant\n%+v", r.Partitions, want)
	}

	// The tables.
	_, out, _ = runVerifyCmd(t, "--from", "file://"+dir)
	for _, want := range []string{"distinct events", "events by table, kind and day (UTC)", "lines that do not decode",
		"Sessions/2026-03-04/23.jsonl    61  archive line: ", "objects whose key does not match their contents", "notes.txt"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	// A selection: one table, one day.
	code, out, _ = runVerifyCmd(t, "--from", "file://"+dir, "--table", "Sessions", "--skip-stream", "--since", "2026-03-05", "--json")
	r = decodeReport(t, out)
	if code != 0 || r.Events != 30 || len(r.Partitions) != 1 || r.Partitions[0].Day != "2026-03-05" {
		t.Errorf("exit %d, report %+v", code, r)
	}
}

// TestVerifyS3KeyRange: an S3 object whose SHARD-FIRSTSEQ-LASTSEQ does not
// match its lines is listed; a clean archive exits 0.
func TestVerifyS3KeyRange(t *testing.T) {
	srv := s3test.Start(t)
	url := "s3://" + s3test.Bucket + "/v?endpoint=" + srv.Endpoint + "&path-style=true&compression=zstd"
	archiveWith(t, url, verifyEvents("Sessions", "shardId-1", 0, 10))
	t.Setenv("AWS_ACCESS_KEY_ID", s3test.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3test.SecretKey)
	code, out, stderr := runVerifyCmd(t, "--from", url, "--json")
	if r := decodeReport(t, out); code != 0 || r.Events != 10 || r.Objects != 1 || len(r.Mismatches) != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
	ctx := context.Background()
	list, err := srv.Client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(s3test.Bucket), Prefix: aws.String("v/")})
	if err != nil || len(list.Contents) != 1 {
		t.Fatalf("list: %v %+v", err, list)
	}
	key := aws.ToString(list.Contents[0].Key)
	wrong := strings.Replace(key, "-100000000000000000009.", "-100000000000000000011.", 1)
	if _, err := srv.Client.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(s3test.Bucket), Key: aws.String(wrong), CopySource: aws.String(s3test.Bucket + "/" + key)}); err != nil {
		t.Fatal(err)
	}
	code, out, _ = runVerifyCmd(t, "--from", url, "--json")
	r := decodeReport(t, out)
	if code != 0 || len(r.Mismatches) != 1 || r.Mismatches[0].Object != wrong ||
		r.Mismatches[0].Problem != "holds sequence numbers 100000000000000000000-100000000000000000009, the key says 100000000000000000000-100000000000000000011" {
		t.Errorf("exit %d, mismatches %+v", code, r.Mismatches)
	}
	if r.Events != 10 || r.Duplicates != 10 {
		t.Errorf("report %+v", r)
	}
}

// TestVerifyStreamCrossCheck: items expire in the engine; the archive gets
// some of them; verify --table lists the others: pending while they are
// newer than --grace (exit 0), missing once older (exit 1).
func TestVerifyStreamCrossCheck(t *testing.T) {
	bed := enginetest.Start(t, engine.Options{TTLInterval: 50 * time.Millisecond})
	srv := bed.Server
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, st := bed.DynamoDB, bed.Streams
	arn, err := demo.CreateSessionTable(ctx, db, "SessionData")
	if err != nil {
		t.Fatal(err)
	}
	putExpired(t, ctx, db, "SessionData", 10)
	var evs []event.Event
	eventually.True(t, 30*time.Second, "10 expiries in the stream", func() bool {
		evs = expiredInStream(t, ctx, st, arn)
		return len(evs) == 10
	})
	dir := t.TempDir()
	archiveWith(t, "file://"+dir, evs[:4], evs[6:])
	want := []string{evs[4].EventID, evs[5].EventID}
	slices.Sort(want)
	keysByID := map[string]string{}
	for _, e := range evs[4:6] {
		keysByID[e.EventID] = string(event.MarshalItem(e.Keys))
	}
	ids := func(rs []archive.StreamRemove) []string {
		var l []string
		for _, m := range rs {
			l = append(l, m.EventID)
		}
		slices.Sort(l)
		return l
	}
	for _, tc := range []struct {
		grace            string
		wantCode         int
		missing, pending []string
	}{
		{"5m", 0, nil, want}, // the default: deleted seconds ago
		{"0s", 1, want, nil},
	} {
		t.Run("grace "+tc.grace, func(t *testing.T) {
			code, out, stderr := runVerifyCmd(t, "--from", "file://"+dir, "--table", "SessionData", "--endpoint", srv.Endpoint(), "--json", "--grace", tc.grace)
			if code != tc.wantCode {
				t.Fatalf("exit %d, want %d\n%s\n%s", code, tc.wantCode, out, stderr)
			}
			r := decodeReport(t, out)
			if r.Stream == nil || r.Stream.Records != 10 || r.Stream.Archived != 8 {
				t.Fatalf("stream check %+v", r.Stream)
			}
			if got := ids(r.Stream.Missing); !slices.Equal(got, tc.missing) {
				t.Errorf("missing %v, want %v", got, tc.missing)
			}
			if got := ids(r.Stream.Pending); !slices.Equal(got, tc.pending) {
				t.Errorf("pending %v, want %v", got, tc.pending)
			}
			for _, m := range append(r.Stream.Missing, r.Stream.Pending...) {
				var got bytes.Buffer
				if err := json.Compact(&got, m.Keys); err != nil || got.String() != keysByID[m.EventID] {
					t.Errorf("record %s: keys %s (%v), want %s", m.EventID, m.Keys, err, keysByID[m.EventID])
				}
			}
		})
	}
	code, out, stderr := runVerifyCmd(t, "--from", "file://"+dir, "--table", "SessionData", "--endpoint", srv.Endpoint(), "--grace", "0s")
	if code != 1 || !strings.Contains(out, "missing from the archive") || !strings.Contains(out, evs[4].EventID) ||
		!strings.Contains(out, keyText(event.ToDynamoDB(evs[4].Keys))) || !strings.Contains(stderr, "lacks stream records") {
		t.Errorf("exit %d, want 1 and the missing records' keys and IDs\n%s\n%s", code, out, stderr)
	}
}

// expiredInStream reads the whole stream and decodes its expiries.
func expiredInStream(t *testing.T, ctx context.Context, st *dynamodbstreams.Client, arn string) []event.Event {
	t.Helper()
	desc, err := st.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn)})
	if err != nil {
		t.Fatal(err)
	}
	var out []event.Event
	for _, sh := range desc.StreamDescription.Shards {
		it, err := st.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(arn), ShardId: sh.ShardId, ShardIteratorType: ddbtypes.ShardIteratorTypeTrimHorizon})
		if err != nil {
			t.Fatal(err)
		}
		for iter := it.ShardIterator; iter != nil; {
			recs, err := st.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs.Records {
				e, err := event.Decode("SessionData", arn, aws.ToString(sh.ShardId), r, "ExpirationTime")
				if err != nil {
					t.Fatal(err)
				}
				if e.Kind == event.Expired {
					out = append(out, e)
				}
			}
			if len(recs.Records) == 0 {
				break
			}
			iter = recs.NextShardIterator
		}
	}
	return out
}

func TestVerifyFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "--from: required"},
		{[]string{"--from", "nats://x:4222"}, "want s3://BUCKET/PREFIX or file://DIR"},
		{[]string{"--from", "s3://bucket/p?flush-bytes=x"}, "flush-bytes"},
		{[]string{"--from", "file:///tmp", "--since", "yesterday"}, `--since: "yesterday" is not a time`},
		{[]string{"--from", "file:///tmp", "--since", "2026-03-05", "--until", "2026-03-04"}, "must be after --since"},
		{[]string{"--from", "file:///tmp", "--kind", "modified"}, `--kind: "modified": want expired or deleted`},
		{[]string{"--from", "file:///tmp", "--parallel", "0"}, "--parallel: 0 must be from 1 to 256"},
		{[]string{"--from", "file:///tmp", "--table", "x"}, "table name"},
	} {
		code, _, stderr := runVerifyCmd(t, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("verify %v: exit %d, stderr %q, want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
}

// TestVerifyParquetArchive: verify reads an archive of the file sink's
// format=parquet as it reads NDJSON: every event once, the re-delivered
// copies counted as duplicates, the partitions by table and day, exit 0.
func TestVerifyParquetArchive(t *testing.T) {
	dir := t.TempDir()
	evs := verifyEvents("Sessions", "s1", 0, 90) // 23:00 to 00:29 the next day
	archiveWith(t, "file://"+dir+"?format=parquet", evs[:70], evs[60:], verifyEvents("Carts", "s2", 0, 3))
	code, out, stderr := runVerifyCmd(t, "--from", "file://"+dir, "--skip-stream", "--json")
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
	r := decodeReport(t, out)
	if r.Events != 93 || r.Duplicates != 10 || r.Undecodable != 0 || len(r.Mismatches) != 0 || len(r.StrayKeys) != 0 {
		t.Errorf("report %+v", r)
	}
	if len(r.Partitions) != 3 {
		t.Errorf("partitions %+v, want Carts on the 4th, Sessions on the 4th and 5th", r.Partitions)
	}
}
