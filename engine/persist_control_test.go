package engine_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/engine"
)

// TestPersistControlState: what the control API set (the manual clock,
// pending throttles, DescribeStream omissions, expired iterators) survives a restart on the same
// data directory, over HTTP as a harness in any language sees it: after a
// Close (the throttles used since the last change counted) and after a
// crash (the state as the last control POST left it). The restarted
// engine's ManualClock starts at t0 again, as --manual-clock starts at
// the wall clock; the kept time wins.
func TestPersistControlState(t *testing.T) {
	for _, c := range []struct {
		name       string
		crash      bool
		getRecords float64 // GetRecords throttles left after the restart
	}{
		{"close", false, 1},  // 2 set, 1 used before Close
		{"kill -9", true, 2}, // as the last POST left it
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			e := newDurableEnv(t, dir, engine.NewManualClock(t0))
			d := e.createTable("str1", "N", func(in *dynamodb.CreateTableInput) {
				in.StreamSpecification = &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeKeysOnly}
			})
			e.put("str1", item{"pk": S("a"), "sk": N("1")})
			shard := e.shards(d.LatestStreamArn)[0].ShardId
			e.mustCtl("POST", "/_engine/clock", `{"advance": "2h"}`)
			it, err := e.st.GetShardIterator(e.ctx, &dynamodbstreams.GetShardIteratorInput{
				StreamArn: d.LatestStreamArn, ShardId: shard, ShardIteratorType: stypes.ShardIteratorTypeTrimHorizon,
			})
			if err != nil {
				t.Fatal(err)
			}
			e.mustCtl("POST", "/_engine/iterators/expire", "")
			e.mustCtl("POST", "/_engine/throttle", `{"operation": "GetRecords", "count": 2}`)
			e.mustCtl("POST", "/_engine/throttle", `{"operation": "BatchWriteItem", "count": 3}`)
			e.mustCtl("POST", "/_engine/tables/str1/shards/"+aws.ToString(shard)+"/omit", `{"times": 2}`)
			fresh, err := e.st.GetShardIterator(e.ctx, &dynamodbstreams.GetShardIteratorInput{
				StreamArn: d.LatestStreamArn, ShardId: shard, ShardIteratorType: stypes.ShardIteratorTypeTrimHorizon,
			})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.st.GetRecords(e.ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: fresh.ShardIterator}); errCode(err) != "LimitExceededException" {
				t.Fatalf("throttled GetRecords: %v, want LimitExceededException", err)
			}
			from := dir
			if c.crash {
				from = crashCopy(t, dir)
			} else if err := e.srv.Close(); err != nil {
				t.Fatal(err)
			}

			e2 := newDurableEnv(t, from, engine.NewManualClock(t0))
			want := t0.Add(2 * time.Hour).Format(time.RFC3339Nano)
			if out := e2.mustCtl("GET", "/_engine/clock", ""); out["now"] != want {
				t.Errorf("clock after the restart: %v, want %s", out["now"], want)
			}
			st := e2.mustCtl("GET", "/_engine/state", "")
			th, _ := st["throttle"].(map[string]any)
			if th["GetRecords"] != c.getRecords || th["BatchWriteItem"] != 3.0 || th["BatchGetItem"] != 0.0 || st["clock"] != want || st["iteratorEpoch"] != 1.0 {
				t.Errorf("state after the restart: %v, want GetRecords %v, BatchWriteItem 3, clock %s, iteratorEpoch 1", st, c.getRecords, want)
			}
			wantOmit := []any{map[string]any{"stream": aws.ToString(d.LatestStreamArn), "shard": aws.ToString(shard), "times": 2.0}}
			if !reflect.DeepEqual(st["omit"], wantOmit) {
				t.Errorf("omissions after the restart: %v, want %v", st["omit"], wantOmit)
			}
			if e2.listed(d.LatestStreamArn, aws.ToString(shard)) {
				t.Error("DescribeStream lists the shard it was told to leave out before the restart")
			}
			for i := 0; i < int(c.getRecords); i++ {
				if _, err := e2.st.GetRecords(e2.ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: fresh.ShardIterator}); errCode(err) != "LimitExceededException" {
					t.Fatalf("GetRecords %d after the restart: %v, want LimitExceededException", i, err)
				}
			}
			if out, err := e2.st.GetRecords(e2.ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: fresh.ShardIterator}); err != nil || len(out.Records) != 1 {
				t.Fatalf("GetRecords once the throttles are used: %v, want the one record", err)
			}
			if _, err := e2.st.GetRecords(e2.ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it.ShardIterator}); errCode(err) != "ExpiredIteratorException" {
				t.Errorf("GetRecords on an iterator expired before the restart: %v, want ExpiredIteratorException", err)
			}
		})
	}
}

// TestPersistControlStateHostile: a control.json the engine did not write
// (not JSON, an unknown field, a negative count) fails the start naming
// the file and what is wrong, never a panic or a silent default.
func TestPersistControlStateHostile(t *testing.T) {
	for _, c := range []struct{ name, body, want string }{
		{"not JSON", "throttle=3", "control.json is not the control state"},
		{"unknown field", `{"throttle":{"GetRecords":1},"faults":[]}`, `unknown field "faults"`},
		{"negative count", `{"throttle":{"BatchGetItem":-4}}`, "throttle.BatchGetItem is -4"},
		{"wrong type", `{"clock":"yesterday"}`, "control.json is not the control state"},
		{"omission without a shard", `{"omit":[{"stream":"arn:x","times":1}]}`, "omit[0]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "control.json"), []byte(c.body), 0o644); err != nil {
				t.Fatal(err)
			}
			e, err := engine.New(engine.Options{DataDir: dir, TTLInterval: -1})
			if err == nil {
				e.Close()
				t.Fatalf("started on control.json %q, want a refusal", c.body)
			}
			if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), filepath.Join(dir, "control.json")) {
				t.Errorf("refusal %q, want it to name %s and say %q", err, filepath.Join(dir, "control.json"), c.want)
			}
		})
	}
}

// TestPersistControlClockOnRealTime: an engine restarted on real time
// cannot take the manual clock kept in its data directory; it starts (the
// throttles still restored) and GET /_engine/state shows no clock, so a
// harness sees the kept time is not in force.
func TestPersistControlClockOnRealTime(t *testing.T) {
	dir := t.TempDir()
	e := newDurableEnv(t, dir, engine.NewManualClock(t0))
	e.mustCtl("POST", "/_engine/clock", `{"advance": "1h"}`)
	e.mustCtl("POST", "/_engine/throttle", `{"operation": "BatchGetItem", "count": 2}`)
	if err := e.srv.Close(); err != nil {
		t.Fatal(err)
	}
	e2 := newEnv(t, engine.Options{DataDir: dir, Clock: wallClock{}})
	st := e2.mustCtl("GET", "/_engine/state", "")
	if _, ok := st["clock"]; ok {
		t.Errorf("state on real time: %v, want no clock", st)
	}
	if th, _ := st["throttle"].(map[string]any); th["BatchGetItem"] != 2.0 {
		t.Errorf("state on real time: %v, want BatchGetItem 2", st)
	}
}
