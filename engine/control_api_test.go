package engine_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
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

// ctl sends one control request over HTTP and returns the status and the
// decoded JSON object.
func (e *env) ctl(method, path, body string) (int, map[string]any) {
	e.t.Helper()
	req, err := http.NewRequestWithContext(e.ctx, method, e.srv.Endpoint()+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		e.t.Errorf("%s %s: Content-Type %q, want application/json", method, path, ct)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		e.t.Fatalf("%s %s: %d %q is not a JSON object: %v", method, path, resp.StatusCode, b, err)
	}
	return resp.StatusCode, out
}

// mustCtl sends a control request that must succeed.
func (e *env) mustCtl(method, path, body string) map[string]any {
	e.t.Helper()
	code, out := e.ctl(method, path, body)
	if code != 200 {
		e.t.Fatalf("%s %s %s: %d %v", method, path, body, code, out)
	}
	return out
}

func TestControlSweep(t *testing.T) {
	e := newEnv(t, engine.Options{})
	e.createTable("ttl1", "", nil)
	e.enableTTL("ttl1", "exp")
	past := t0.Add(-time.Minute).Unix()
	for _, pk := range []string{"a", "b"} {
		e.put("ttl1", item{"pk": S(pk), "exp": N(strconv.FormatInt(past, 10))})
	}
	e.put("ttl1", item{"pk": S("c"), "exp": N(strconv.FormatInt(t0.Add(time.Hour).Unix(), 10))})
	if out := e.mustCtl("POST", "/_engine/ttl/sweep", ""); out["deleted"] != 2.0 {
		t.Fatalf("sweep: %v, want deleted 2", out)
	}
	if out := e.mustCtl("POST", "/_engine/ttl/sweep", "{}"); out["deleted"] != 0.0 {
		t.Fatalf("second sweep: %v, want deleted 0", out)
	}
	// Moving the clock over the control API expires the third.
	e.mustCtl("POST", "/_engine/clock", `{"advance": "2h"}`)
	if out := e.mustCtl("POST", "/_engine/ttl/sweep", ""); out["deleted"] != 1.0 {
		t.Fatalf("sweep after advance: %v, want deleted 1", out)
	}
}

func TestControlClock(t *testing.T) {
	e := newEnv(t, engine.Options{})
	if out := e.mustCtl("GET", "/_engine/clock", ""); out["now"] != t0.Format(time.RFC3339Nano) {
		t.Fatalf("GET clock: %v, want %s", out, t0.Format(time.RFC3339Nano))
	}
	want := t0.Add(90 * time.Second)
	if out := e.mustCtl("POST", "/_engine/clock", `{"advance": "90s"}`); out["now"] != want.Format(time.RFC3339Nano) {
		t.Fatalf("advance: %v, want %s", out, want)
	}
	if got := e.clock.Now(); !got.Equal(want) {
		t.Fatalf("engine clock %s after advance, want %s", got, want)
	}
	set := time.Date(2027, 1, 2, 3, 4, 5, 600, time.UTC)
	if out := e.mustCtl("POST", "/_engine/clock", `{"set": "2027-01-02T03:04:05.0000006Z"}`); out["now"] != set.Format(time.RFC3339Nano) {
		t.Fatalf("set: %v, want %s", out, set)
	}
	if got := e.clock.Now(); !got.Equal(set) {
		t.Fatalf("engine clock %s after set, want %s", got, set)
	}
}

// wallClock is a clock that is not a ManualClock.
type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

func TestControlClockNotManual(t *testing.T) {
	e := newEnv(t, engine.Options{Clock: wallClock{}})
	out := e.mustCtl("GET", "/_engine/clock", "")
	now, err := time.Parse(time.RFC3339Nano, out["now"].(string))
	if err != nil || time.Since(now).Abs() > time.Minute {
		t.Fatalf("GET clock on real time: %v (%v)", out, err)
	}
	code, out := e.ctl("POST", "/_engine/clock", `{"advance": "90s"}`)
	if code != 409 || !strings.Contains(out["error"].(string), "--manual-clock") {
		t.Fatalf("advancing a real clock: %d %v, want 409 naming --manual-clock", code, out)
	}
}

func TestControlStreamFaults(t *testing.T) {
	e, arn := streamEnv(t, engine.Options{}, types.StreamViewTypeNewAndOldImages)
	e.put("str1", item{"pk": S("a"), "sk": N("1")})

	// rollover: the one shard closes and gets a child.
	e.mustCtl("POST", "/_engine/tables/str1/rollover", "")
	shards := e.shards(arn)
	if len(shards) != 2 || shards[0].SequenceNumberRange.EndingSequenceNumber == nil {
		t.Fatalf("after rollover: %+v, want a closed parent and its child", shards)
	}
	open := aws.ToString(shards[1].ShardId)

	// split: the open child closes and gets two children.
	e.mustCtl("POST", "/_engine/tables/str1/shards/"+open+"/split", "")
	if n := len(e.shards(arn)); n != 4 {
		t.Fatalf("after split: %d shards, want 4", n)
	}
	if code, out := e.ctl("POST", "/_engine/tables/str1/shards/"+open+"/split", ""); code != 409 || !strings.Contains(out["error"].(string), "closed") {
		t.Fatalf("splitting a closed shard: %d %v, want 409", code, out)
	}

	// omit: the next full description leaves the shard out.
	e.mustCtl("POST", "/_engine/tables/str1/shards/"+open+"/omit", `{"times": 1}`)
	if e.listed(arn, open) {
		t.Fatal("omitted shard listed")
	}
	if !e.listed(arn, open) {
		t.Fatal("shard still omitted after one description")
	}

	// throttle GetRecords, then expire iterators.
	first := aws.ToString(shards[0].ShardId)
	it, err := e.st.GetShardIterator(e.ctx, &dynamodbstreams.GetShardIteratorInput{
		StreamArn: arn, ShardId: aws.String(first), ShardIteratorType: stypes.ShardIteratorTypeTrimHorizon,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.mustCtl("POST", "/_engine/throttle", `{"operation": "GetRecords", "count": 1}`)
	if _, err := e.st.GetRecords(e.ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it.ShardIterator}); errCode(err) != "LimitExceededException" {
		t.Fatalf("throttled GetRecords: %v, want LimitExceededException", err)
	}
	if out, err := e.st.GetRecords(e.ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it.ShardIterator}); err != nil || len(out.Records) != 1 {
		t.Fatalf("GetRecords after the throttle: %v, want the one record", err)
	}
	e.mustCtl("POST", "/_engine/iterators/expire", "")
	if _, err := e.st.GetRecords(e.ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it.ShardIterator}); errCode(err) != "ExpiredIteratorException" {
		t.Fatalf("GetRecords on an expired iterator: %v, want ExpiredIteratorException", err)
	}

	// trim: records created before the time are gone.
	e.clock.Advance(time.Minute)
	e.mustCtl("POST", "/_engine/tables/str1/trim", `{"before": "`+e.clock.Now().Format(time.RFC3339Nano)+`"}`)
	it, err = e.st.GetShardIterator(e.ctx, &dynamodbstreams.GetShardIteratorInput{
		StreamArn: arn, ShardId: aws.String(first), ShardIteratorType: stypes.ShardIteratorTypeTrimHorizon,
	})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := e.st.GetRecords(e.ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it.ShardIterator}); err != nil || len(out.Records) != 0 {
		t.Fatalf("GetRecords from TRIM_HORIZON after the trim: %v, %d records, want none", err, len(out.Records))
	}
}

func TestControlThrottleBatches(t *testing.T) {
	e := newEnv(t, engine.Options{})
	e.createTable("bat1", "", nil)
	put := func(pk string) types.WriteRequest {
		return types.WriteRequest{PutRequest: &types.PutRequest{Item: item{"pk": S(pk)}}}
	}
	write := func() int {
		out, err := e.db.BatchWriteItem(e.ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{"bat1": {put("a"), put("b")}}})
		if err != nil {
			t.Fatal(err)
		}
		return len(out.UnprocessedItems["bat1"])
	}
	get := func() int {
		out, err := e.db.BatchGetItem(e.ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{"bat1": {Keys: []map[string]types.AttributeValue{{"pk": S("a")}, {"pk": S("b")}}}}})
		if err != nil {
			t.Fatal(err)
		}
		return len(out.UnprocessedKeys["bat1"].Keys)
	}
	e.mustCtl("POST", "/_engine/throttle", `{"operation": "BatchWriteItem", "count": 1}`)
	if n := write(); n != 1 {
		t.Fatalf("throttled BatchWriteItem: %d unprocessed, want 1", n)
	}
	if n := write(); n != 0 {
		t.Fatalf("BatchWriteItem after the throttle: %d unprocessed, want 0", n)
	}
	e.mustCtl("POST", "/_engine/throttle", `{"operation": "BatchGetItem", "count": 1}`)
	if n := get(); n != 1 {
		t.Fatalf("throttled BatchGetItem: %d unprocessed, want 1", n)
	}
	// count 0 cancels throttling still pending.
	e.mustCtl("POST", "/_engine/throttle", `{"operation": "BatchGetItem", "count": 5}`)
	e.mustCtl("POST", "/_engine/throttle", `{"operation": "BatchGetItem", "count": 0}`)
	if n := get(); n != 0 {
		t.Fatalf("BatchGetItem after cancelling: %d unprocessed, want 0", n)
	}
}

func TestControlErrors(t *testing.T) {
	e, _ := streamEnv(t, engine.Options{}, types.StreamViewTypeKeysOnly)
	e.createTable("nostream", "", nil)
	for _, c := range []struct {
		method, path, body string
		code               int
		msg                string
	}{
		{"POST", "/_engine/nope", "", 404, "no control endpoint"},
		{"POST", "/_engine/", "", 404, "no control endpoint"},
		{"POST", "/_engine/tables/str1", "", 404, "no control endpoint"},
		{"GET", "/_engine/ttl/sweep", "", 405, "use POST"},
		{"DELETE", "/_engine/clock", "", 405, "use GET or POST"},
		{"PUT", "/_engine/tables/str1/rollover", "", 405, "use POST"},
		{"POST", "/_engine/ttl/sweep", "[1]", 400, "not a JSON object"},
		{"POST", "/_engine/ttl/sweep", `{"x": 1}`, 400, `unknown field "x"`},
		{"POST", "/_engine/ttl/sweep", `{} {}`, 400, "more than one JSON value"},
		{"POST", "/_engine/clock", `{}`, 400, `"set"`},
		{"POST", "/_engine/clock", `{"set": "yesterday"}`, 400, `"set": "yesterday"`},
		{"POST", "/_engine/clock", `{"set": 5}`, 400, `"set": want a string`},
		{"POST", "/_engine/clock", `{"advance": "soon"}`, 400, `"advance": "soon"`},
		{"POST", "/_engine/clock", `{"advance": "-1s"}`, 400, "must not be negative"},
		{"POST", "/_engine/clock", `{"advance": "1s", "set": "2026-01-01T00:00:00Z"}`, 400, "not both"},
		{"POST", "/_engine/throttle", `{"count": 1}`, 400, `"operation" is required`},
		{"POST", "/_engine/throttle", `{"operation": "GetRecords"}`, 400, `"count" is required`},
		{"POST", "/_engine/throttle", `{"operation": "GetRecords", "count": -1}`, 400, `"count" must not be negative`},
		{"POST", "/_engine/throttle", `{"operation": "PutItem", "count": 1}`, 400, `"PutItem" cannot be throttled`},
		{"POST", "/_engine/throttle", `{"operation": "GetRecords", "count": "3"}`, 400, `"count": want a int`},
		{"POST", "/_engine/tables/missing/rollover", "", 404, "missing"},
		{"POST", "/_engine/tables/nostream/rollover", "", 404, "no stream"},
		{"POST", "/_engine/tables/str1/shards/shardId-nope/split", "", 404, "shardId-nope"},
		{"POST", "/_engine/tables/str1/shards/shardId-nope/omit", `{"times": 1}`, 404, "shardId-nope"},
		{"POST", "/_engine/tables/str1/shards/shardId-nope/omit", `{}`, 400, `"times" is required`},
		{"POST", "/_engine/tables/str1/shards/shardId-nope/omit", `{"times": -2}`, 400, `"times" must not be negative`},
		{"POST", "/_engine/tables/str1/trim", `{}`, 400, `"before" is required`},
		{"POST", "/_engine/tables/str1/trim", `{"before": "now"}`, 400, `"before": "now"`},
		{"POST", "/_engine/tables/missing/trim", `{"before": "2026-01-01T00:00:00Z"}`, 404, "missing"},
	} {
		code, out := e.ctl(c.method, c.path, c.body)
		msg, _ := out["error"].(string)
		if code != c.code || !strings.Contains(msg, c.msg) {
			t.Errorf("%s %s %s: %d %q, want %d containing %q", c.method, c.path, c.body, code, msg, c.code, c.msg)
		}
	}
}

// TestControlLoopbackRule checks the client rule at the handler: the real
// network here only has loopback clients, so RemoteAddr is faked.
func TestControlLoopbackRule(t *testing.T) {
	open, err := engine.New(engine.Options{TTLInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	allowed, err := engine.New(engine.Options{TTLInterval: -1, ControlFrom: []netip.Prefix{
		netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("2001:db8::/32"),
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer allowed.Close()
	for _, c := range []struct {
		name   string
		eng    *engine.Engine
		remote string
		code   int
	}{
		{"ipv4 loopback", open, "127.0.0.1:4000", 200},
		{"other 127/8", open, "127.8.9.10:4000", 200},
		{"ipv6 loopback", open, "[::1]:4000", 200},
		{"ipv4-mapped loopback", open, "[::ffff:127.0.0.1]:4000", 200},
		{"remote refused", open, "203.0.113.5:4000", 403},
		{"remote ipv6 refused", open, "[2001:db8::5]:4000", 403},
		{"garbage refused", open, "not-an-address", 403},
		{"remote allowed", allowed, "203.0.113.5:4000", 200},
		{"remote ipv6 allowed", allowed, "[2001:db8::5]:4000", 200},
		{"remote outside the list", allowed, "198.51.100.1:4000", 403},
		{"loopback still allowed", allowed, "127.0.0.1:4000", 200},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := httptest.NewRequest("POST", "/_engine/ttl/sweep", nil)
			req.Header.Set("Content-Type", "application/json")
			req.RemoteAddr = c.remote
			rec := httptest.NewRecorder()
			c.eng.ServeHTTP(rec, req)
			var out map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
				t.Fatalf("%d %q is not JSON: %v", rec.Code, rec.Body, err)
			}
			if rec.Code != c.code {
				t.Fatalf("%s: %d %v, want %d", c.remote, rec.Code, out, c.code)
			}
			if c.code == 403 && !strings.Contains(out["error"].(string), "--control-from") {
				t.Fatalf("403 without naming --control-from: %v", out)
			}
		})
	}
}

func TestControlInjectRecord(t *testing.T) {
	e, arn := streamEnv(t, engine.Options{StreamShards: 2}, types.StreamViewTypeKeysOnly)
	shards := e.shards(arn)
	target := aws.ToString(shards[1].ShardId)
	out := e.mustCtl("POST", "/_engine/tables/str1/shards/"+target+"/records", `{
		"eventName": "REMOVE",
		"dynamodb": {"Keys": {"pk": {"S": "poison"}, "sk": {"N": "1"}},
		             "OldImage": {"pk": {"S": "poison"}, "sk": {"N": "1"}, "exp": {"N": "not-a-number"}},
		             "SizeBytes": 77},
		"userIdentity": {"Type": "Service", "PrincipalId": "dynamodb.amazonaws.com"}
	}`)
	seq, _ := out["sequenceNumber"].(string)
	if seq == "" {
		t.Fatalf("inject: %v, want a sequenceNumber", out)
	}
	e.mustCtl("POST", "/_engine/tables/str1/shards/"+target+"/records", `{"eventName": "MODIFY", "dynamodb": {"Keys": {"pk": {"S": "x"}, "sk": {"N": "2"}}, "NewImage": {"pk": {"S": "x"}}}}`)
	it, err := e.st.GetShardIterator(e.ctx, &dynamodbstreams.GetShardIteratorInput{
		StreamArn: arn, ShardId: aws.String(target), ShardIteratorType: stypes.ShardIteratorTypeTrimHorizon,
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.st.GetRecords(e.ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it.ShardIterator})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Records) != 2 {
		t.Fatalf("%d records in the shard, want the 2 injected", len(got.Records))
	}
	r := got.Records[0]
	if r.EventName != stypes.OperationTypeRemove || aws.ToString(r.Dynamodb.SequenceNumber) != seq ||
		aws.ToInt64(r.Dynamodb.SizeBytes) != 77 || r.UserIdentity == nil || aws.ToString(r.UserIdentity.Type) != "Service" {
		t.Fatalf("first record %+v %+v, want the injected REMOVE", r, r.Dynamodb)
	}
	if n, ok := r.Dynamodb.OldImage["exp"].(*stypes.AttributeValueMemberN); !ok || n.Value != "not-a-number" {
		t.Fatalf("OldImage %+v, want the poison exp kept", r.Dynamodb.OldImage)
	}
	if pk, ok := r.Dynamodb.Keys["pk"].(*stypes.AttributeValueMemberS); !ok || pk.Value != "poison" {
		t.Fatalf("Keys %+v", r.Dynamodb.Keys)
	}
	r = got.Records[1]
	if r.EventName != stypes.OperationTypeModify || r.UserIdentity != nil || r.Dynamodb.NewImage["pk"] == nil || r.Dynamodb.OldImage != nil {
		t.Fatalf("second record %+v %+v, want the injected MODIFY with a NewImage", r, r.Dynamodb)
	}

	// Errors.
	e.mustCtl("POST", "/_engine/tables/str1/rollover", "")
	rec := `{"eventName": "INSERT", "dynamodb": {"Keys": {"pk": {"S": "a"}}}}`
	for _, c := range []struct {
		path, body string
		code       int
		msg        string
	}{
		{"/_engine/tables/str1/shards/" + target + "/records", rec, 409, "closed"},
		{"/_engine/tables/str1/shards/shardId-nope/records", rec, 404, "shardId-nope"},
		{"/_engine/tables/missing/shards/" + target + "/records", rec, 404, "missing"},
		{"/_engine/tables/str1/shards/" + target + "/records", `{"dynamodb": {"Keys": {}}}`, 400, `"eventName" is required`},
		{"/_engine/tables/str1/shards/" + target + "/records", `{"eventName": "INSERT"}`, 400, `"dynamodb.Keys" is required`},
		{"/_engine/tables/str1/shards/" + target + "/records", `{"eventName": "INSERT", "dynamodb": {"Keys": [1]}}`, 400, `"dynamodb.Keys" must be a JSON object`},
		{"/_engine/tables/str1/shards/" + target + "/records", `{"eventName": "INSERT", "dynamodb": {"Keys": {}, "NewImage": "x"}}`, 400, `"dynamodb.NewImage" must be a JSON object`},
		{"/_engine/tables/str1/shards/" + target + "/records", `{"eventName": "INSERT", "dynamodb": {"Keys": {}, "SizeBytes": -1}}`, 400, `"dynamodb.SizeBytes" must not be negative`},
		{"/_engine/tables/str1/shards/" + target + "/records", `{"eventName": "INSERT", "dynamodb": {"Keys": {}}, "userIdentity": {"Type": "User"}}`, 400, `"userIdentity"`},
		{"/_engine/tables/str1/shards/" + target + "/records", `{"eventName": "INSERT", "dynamodb": {"Keys": {}, "Bogus": 1}}`, 400, `unknown field "Bogus"`},
	} {
		code, out := e.ctl("POST", c.path, c.body)
		msg, _ := out["error"].(string)
		if code != c.code || !strings.Contains(msg, c.msg) {
			t.Errorf("POST %s %s: %d %q, want %d containing %q", c.path, c.body, code, msg, c.code, c.msg)
		}
	}
}
