package engine_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The control endpoints of global tables over HTTP: /_engine/replication,
// /_engine/replication/wait, /_engine/ttl/independent and the fields
// GET /_engine/state adds for them.

// gctl sends a control request to g's engine as curl would (a POST with
// Content-Type: application/json) and returns the status and the decoded
// JSON object.
func (g *global) gctl(t *testing.T, method, path, body string) (int, map[string]any) {
	t.Helper()
	var hdr map[string]string
	if method == "POST" {
		hdr = map[string]string{"Content-Type": "application/json"}
	}
	code, raw := ctlRaw(t, g.b.Server, method, path, "", body, hdr)
	var out map[string]any
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		t.Fatalf("%s %s: %d %q is not a JSON object: %v", method, path, code, raw, err)
	}
	return code, out
}

// state reads GET /_engine/state as JSON text, its keys in order.
func (g *global) state(t *testing.T) string {
	t.Helper()
	code, out := g.gctl(t, "GET", "/_engine/state", "")
	if code != 200 {
		t.Fatalf("GET /_engine/state: %d %v", code, out)
	}
	for _, k := range []string{"clock", "throttle", "iteratorEpoch"} {
		delete(out, k)
	}
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Bad input is a 4xx naming the field, never a 500, and changes nothing.
func TestControlReplicationInput(t *testing.T) {
	g := newGlobal(t, "", "eu-west-1")
	before := g.state(t)
	for _, c := range []struct {
		method, path, body string
		code               int
		want               string
	}{
		{"POST", "/_engine/replication", `{"delay": "-1s"}`, 400, `"delay": "-1s" is not a duration of 0 or more`},
		{"POST", "/_engine/replication", `{"delay": "soon"}`, 400, `"delay": "soon"`},
		{"POST", "/_engine/replication", `{"delay": 5}`, 400, `"delay": want a string`},
		{"POST", "/_engine/replication", `{"pause": "EU"}`, 400, `"pause": "EU" is not a Region name`},
		{"POST", "/_engine/replication", `{"pause": "eu-west-9"}`, 400, `"pause": "eu-west-9" is not a Region of this engine, whose Regions are eu-west-1, us-east-1`},
		{"POST", "/_engine/replication", `{"delay": "1s", "resume": "ap-south-9"}`, 400, `"resume": "ap-south-9" is not a Region of this engine`},
		{"POST", "/_engine/replication", `{"pause": "eu-west-1", "resume": "eu-west-1"}`, 400, `"pause" and "resume" both name "eu-west-1"`},
		{"POST", "/_engine/replication", `{"pause": ["eu-west-1"]}`, 400, `"pause": want a string`},
		{"POST", "/_engine/replication", `{"delay": "1s", "pasue": "eu-west-1"}`, 400, `unknown field "pasue"`},
		{"POST", "/_engine/replication", `{"delay": "1s"} {}`, 400, "more than one JSON value"},
		{"POST", "/_engine/replication", `[]`, 400, "not a JSON object"},
		{"POST", "/_engine/replication", `{"delay": "1s"`, 400, "not a JSON object"},
		{"GET", "/_engine/replication", "", 405, "use POST"},
		{"POST", "/_engine/replication/nope", "", 404, "no control endpoint"},
		{"POST", "/_engine/replication/wait", `{"timeout": "0s"}`, 400, `"timeout": "0s" is not a positive duration`},
		{"POST", "/_engine/replication/wait", `{"timeout": "-5s"}`, 400, `"timeout": "-5s"`},
		{"POST", "/_engine/replication/wait", `{"timeout": 30}`, 400, `"timeout": want a string`},
		{"POST", "/_engine/replication/wait", `{"timeuot": "1s"}`, 400, `unknown field "timeuot"`},
		{"GET", "/_engine/replication/wait", "", 405, "use POST"},
		{"POST", "/_engine/ttl/independent", `{}`, 400, `"enabled" is required`},
		{"POST", "/_engine/ttl/independent", `{"enabled": "yes"}`, 400, `"enabled": want a bool`},
		{"POST", "/_engine/ttl/independent", `{"enabled": true, "region": "eu-west-1"}`, 400, `unknown field "region"`},
		{"PUT", "/_engine/ttl/independent", `{"enabled": true}`, 405, "use POST"},
		{"POST", "/_engine/state", "", 405, "use GET"},
	} {
		code, out := g.gctl(t, c.method, c.path, c.body)
		if msg, _ := out["error"].(string); code != c.code || !strings.Contains(msg, c.want) {
			t.Errorf("%s %s %s: %d %q, want %d containing %q", c.method, c.path, c.body, code, msg, c.code, c.want)
		}
	}
	if after := g.state(t); after != before {
		t.Errorf("refused requests changed the state:\n%s\nwas\n%s", after, before)
	}
}

// The switches in any combination, and what GET /_engine/state shows of
// them: the delay, the Regions paused, TTL independence and the writes
// queued per destination.
func TestControlReplicationSwitches(t *testing.T) {
	g := newGlobal(t, "", "eu-west-1")
	if got, want := g.state(t), `{"queued":{},"regions":["eu-west-1","us-east-1"]}`; got != want {
		t.Errorf("state at start: %s, want %s", got, want)
	}
	post := func(path, body, want string) {
		t.Helper()
		code, out := g.gctl(t, "POST", path, body)
		b, _ := json.Marshal(out)
		if code != 200 || string(b) != want {
			t.Fatalf("POST %s %s: %d %s, want 200 %s", path, body, code, b, want)
		}
	}
	post("/_engine/replication", `{"delay": "2s", "pause": "eu-west-1"}`, `{"delay":"2s","paused":["eu-west-1"],"queued":{}}`)
	post("/_engine/ttl/independent", `{"enabled": true}`, `{}`)
	g.put(t, "us-east-1", item{"pk": S("q")})
	if got, want := g.state(t), `{"paused":["eu-west-1"],"queued":{"eu-west-1":1},"regions":["eu-west-1","us-east-1"],"replicationDelay":"2s","ttlIndependent":true}`; got != want {
		t.Errorf("state: %s\nwant %s", got, want)
	}
	// Resumed with the delay still to run on the engine clock: the write
	// waits, and replication is idle (nothing can be applied now).
	post("/_engine/replication", `{"resume": "eu-west-1"}`, `{"delay":"2s","paused":[],"queued":{"eu-west-1":1}}`)
	post("/_engine/replication/wait", `{"timeout": "5s"}`, `{"delay":"2s","paused":[],"queued":{"eu-west-1":1}}`)
	if g.get(t, "eu-west-1", "q") != nil {
		t.Fatal("eu-west-1 got the write before the delay ran out")
	}
	g.clock.Advance(2 * time.Second)
	post("/_engine/replication/wait", ``, `{"delay":"2s","paused":[],"queued":{}}`)
	if g.get(t, "eu-west-1", "q") == nil {
		t.Fatal("eu-west-1 lacks the write once the delay ran out")
	}
	post("/_engine/replication", `{"delay": "0s", "pause": "us-east-1"}`, `{"delay":"0s","paused":["us-east-1"],"queued":{}}`)
	post("/_engine/ttl/independent", `{"enabled": false}`, `{}`)
	if got, want := g.state(t), `{"paused":["us-east-1"],"queued":{},"regions":["eu-west-1","us-east-1"]}`; got != want {
		t.Errorf("state: %s\nwant %s", got, want)
	}
}

// Wait answers 409 while a write can be applied but is not (its
// destination table's lock held), and 200 once it is.
func TestControlReplicationWait(t *testing.T) {
	g := newGlobal(t, "", "eu-west-1")
	d, err := g.regions["eu-west-1"].DynamoDB.DescribeTable(t.Context(), &dynamodb.DescribeTableInput{TableName: aws.String("Sessions")})
	if err != nil {
		t.Fatal(err)
	}
	unlock := g.b.Engine.LockTableForTest(aws.ToString(d.Table.TableArn))
	if _, err := g.regions["us-east-1"].DynamoDB.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String("Sessions"),
		Item: map[string]types.AttributeValue{"pk": S("w")}}); err != nil {
		unlock()
		t.Fatal(err)
	}
	code, out := g.gctl(t, "POST", "/_engine/replication/wait", `{"timeout": "50ms"}`)
	unlock()
	if msg, _ := out["error"].(string); code != 409 || !strings.Contains(msg, "replication is not idle after 50ms") {
		t.Errorf("wait while a write is held: %d %v, want 409 not idle", code, out)
	}
	if code, out := g.gctl(t, "POST", "/_engine/replication/wait", `{}`); code != 200 {
		t.Errorf("wait once released: %d %v, want 200", code, out)
	}
	if g.get(t, "eu-west-1", "w") == nil {
		t.Error("eu-west-1 lacks the write after the wait")
	}
}

// A browser's request cannot reach the replication switches: no JSON
// Content-Type is 415, a cross-site or foreign-origin POST 403, and
// nothing changes.
func TestControlReplicationGuards(t *testing.T) {
	g := newGlobal(t, "", "eu-west-1")
	before := g.state(t)
	const js = "application/json"
	for _, path := range []string{"/_engine/replication", "/_engine/replication/wait", "/_engine/ttl/independent"} {
		body := map[string]string{"/_engine/replication": `{"pause": "eu-west-1", "delay": "1h"}`, "/_engine/ttl/independent": `{"enabled": true}`}[path]
		for _, c := range []struct {
			hdr  map[string]string
			code int
			want string
		}{
			{nil, 415, "Content-Type"},
			{map[string]string{"Content-Type": "text/plain"}, 415, "application/json"},
			{map[string]string{"Content-Type": js, "Sec-Fetch-Site": "cross-site"}, 403, "Sec-Fetch-Site"},
			{map[string]string{"Content-Type": js, "Origin": "http://evil.example"}, 403, "Origin"},
		} {
			code, raw := ctlRaw(t, g.b.Server, "POST", path, "", body, c.hdr)
			if code != c.code || !strings.Contains(raw, c.want) || !strings.HasPrefix(raw, `{"error":`) {
				t.Errorf("POST %s with %v: %d %s, want %d naming %s", path, c.hdr, code, raw, c.code, c.want)
			}
		}
	}
	if after := g.state(t); after != before {
		t.Errorf("refused requests changed the state:\n%s\nwas\n%s", after, before)
	}
}
