package conformance_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	"github.com/ttl-archiver/archiver/conformance"
	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/engine/enginetest"
)

// bound is generous: every wait ends as soon as its condition holds, so
// it only bounds a run that would otherwise fail.
const bound = time.Minute

// envOf is an Env of the bed's endpoint, its replicas in eu-west-1.
func envOf(b *enginetest.Bed) *conformance.Env {
	return &conformance.Env{Endpoint: b.Endpoint, DynamoDB: b.DynamoDB, Streams: b.Streams, Region: enginetest.Region,
		OtherRegion: "eu-west-1", Bound: bound,
		In: func(region string) (*dynamodb.Client, *dynamodbstreams.Client) {
			r := b.In(region)
			return r.DynamoDB, r.Streams
		}}
}

// runAll runs the whole suite and fails t for every check that did not
// pass, unless skips allows it to skip.
func runAll(t *testing.T, e *conformance.Env, skips ...string) conformance.Report {
	t.Helper()
	rep := conformance.Run(t.Context(), e, conformance.Checks(), func(r conformance.Result) { t.Log(r.Line()) })
	for _, r := range rep.Results {
		switch {
		case r.Status == conformance.Pass:
		case r.Status == conformance.Skip && contains(skips, r.Name):
		default:
			t.Errorf("%s", r.Line())
		}
	}
	if len(rep.Results) != len(conformance.Checks()) {
		t.Errorf("%d results, want one per check (%d)", len(rep.Results), len(conformance.Checks()))
	}
	return rep
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestEngineWithControl: the engine on a manual clock, its sweeper off,
// measured through its control API: every check passes, none skips, and
// the grade is A.
func TestEngineWithControl(t *testing.T) {
	b := enginetest.Start(t, engine.Options{TTLInterval: -1, Clock: engine.NewManualClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))})
	e := envOf(b)
	e.Control = conformance.NewControl(b.Endpoint)
	rep := runAll(t, e)
	if rep.Grade != "A" || rep.Skipped != 0 {
		t.Errorf("grade %s with %d skipped, want A with none\n%s", rep.Grade, rep.Skipped, rep.Summary())
	}
	assertNoTablesLeft(t, b)
}

// TestEngineRealTime: the engine as a user runs it, a short TTL interval
// and shard rollover after 20 records, measured without its control API:
// every check passes but the one that needs 15 minutes of real time.
func TestEngineRealTime(t *testing.T) {
	b := enginetest.Start(t, engine.Options{TTLInterval: 100 * time.Millisecond, ShardRolloverRecords: 20})
	rep := runAll(t, envOf(b), "stream-iterator-expiry")
	if rep.Grade != "A" {
		t.Errorf("grade %s, want A\n%s", rep.Grade, rep.Summary())
	}
	assertNoTablesLeft(t, b)
}

// assertNoTablesLeft: every check deleted its tables, replicas included.
func assertNoTablesLeft(t *testing.T, b *enginetest.Bed) {
	t.Helper()
	for _, region := range []string{enginetest.Region, "eu-west-1"} {
		out, err := b.In(region).DynamoDB.ListTables(context.Background(), &dynamodb.ListTablesInput{})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.TableNames) > 0 {
			t.Errorf("tables left in %s: %v", region, out.TableNames)
		}
	}
}
