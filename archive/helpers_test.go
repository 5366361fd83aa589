package archive_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/ttl-archiver/archiver/archive"
	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/s3test"
	"github.com/ttl-archiver/archiver/sinks"
)

// t0 is the first event's creation time in the tests' archives.
var t0 = time.Date(2026, 3, 4, 5, 0, 0, 0, time.UTC)

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// events returns n events of one table and shard with sequence numbers
// first, first+1, ...: item "item-(seq % items)" (items 0: one item per
// event), kind k, one event a second from t0 + first seconds.
func events(table, shard string, k event.Kind, first, n, items int) []event.Event {
	evs := make([]event.Event, n)
	for i := range evs {
		seq := first + i
		item := seq
		if items > 0 {
			item = seq % items
		}
		keys := event.Item{"pk": &types.AttributeValueMemberS{Value: fmt.Sprintf("item-%d", item)}}
		img := event.Item{
			"pk":  keys["pk"],
			"n":   &types.AttributeValueMemberN{Value: "12345678901234567890123456789012345678"},
			"seq": &types.AttributeValueMemberN{Value: fmt.Sprint(seq)},
		}
		e := event.Event{
			Kind: k, Table: table, ShardID: shard,
			StreamARN:               "arn:aws:dynamodb:us-east-1:000000000000:table/" + table + "/stream/2026-03-04T00:00:00.000",
			SequenceNumber:          fmt.Sprintf("1%020d", seq),
			EventID:                 fmt.Sprintf("%s-%s-%d", table, shard, seq),
			ApproximateCreationTime: t0.Add(time.Duration(seq) * time.Second),
			Keys:                    keys,
			SizeBytes:               100,
		}
		switch k {
		case event.Expired, event.Deleted:
			e.EventName, e.OldImage, e.DeletedBy = "REMOVE", img, event.DeletedByTTL
			if k == event.Deleted {
				e.DeletedBy = event.DeletedByOther
			}
		case event.Inserted:
			e.EventName, e.NewImage = "INSERT", img
		default:
			e.EventName, e.NewImage = "MODIFY", img
		}
		evs[i] = e
	}
	return evs
}

// write writes evs, one batch per call, through the real sink of url and
// closes it (flushing every object).
func write(t testing.TB, url string, batches ...[]event.Event) {
	t.Helper()
	ctx := testCtx(t)
	sk, _, err := sinks.Open(ctx, url, sinks.Options{AWSConfig: s3test.AWSConfig})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for _, evs := range batches {
		wg.Add(1)
		err := sk.Write(ctx, sinks.Batch{ShardID: evs[0].ShardID, StreamARN: evs[0].StreamARN, Events: evs}, func(err error) {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
			wg.Done()
		})
		if err != nil {
			t.Fatal(err)
		}
		// One object per batch: the S3 sink cuts its buffers on Flush.
		if err := sk.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := sk.Close(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("sink %s: %v", url, err)
		}
	}
}

// readAll reads every event of sel.
func readAll(t testing.TB, a *archive.Archive, sel archive.Selection) ([]archive.Line, archive.Stats) {
	t.Helper()
	var got []archive.Line
	st, err := a.Events(testCtx(t), sel, func(l archive.Line) error {
		got = append(got, l)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got, st
}

func open(t testing.TB, url string, o archive.Options) *archive.Archive {
	t.Helper()
	o.AWSConfig = s3test.AWSConfig
	a, err := archive.Open(testCtx(t), url, o)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// s3URL is the URL of an S3 archive under prefix on srv.
func s3URL(srv *s3test.Server, prefix, params string) string {
	u := "s3://" + s3test.Bucket + "/" + prefix + "?endpoint=" + srv.Endpoint + "&path-style=true&region=us-east-1"
	if params != "" {
		u += "&" + params
	}
	return u
}

// put stores body at key as is.
func put(t testing.TB, srv *s3test.Server, key string, body []byte) {
	t.Helper()
	_, err := srv.Client.PutObject(testCtx(t), &s3.PutObjectInput{Bucket: aws.String(s3test.Bucket), Key: aws.String(key), Body: bytes.NewReader(body)})
	if err != nil {
		t.Fatal(err)
	}
}

// ids returns the event IDs of lines, in order.
func ids(lines []archive.Line) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = l.Event.EventID
	}
	return out
}

// coverageOf is verify's coverage report of the archive in dir for sel:
// the manifests loaded, the selected objects read.
func coverageOf(t testing.TB, dir string, sel archive.Selection) *archive.CoverageReport {
	t.Helper()
	return coverageWith(t, dir, archive.NewCoverage(sel), sel)
}

// coverageWith is coverageOf with cov, made for sel.
func coverageWith(t testing.TB, dir string, cov *archive.Coverage, sel archive.Selection) *archive.CoverageReport {
	t.Helper()
	a := open(t, "file://"+dir, cov.Hook(archive.Options{}))
	if err := cov.Load(testCtx(t), a); err != nil {
		t.Fatal(err)
	}
	readAll(t, a, sel)
	return cov.Finish()
}
