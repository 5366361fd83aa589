package engine_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/ttl-archiver/archiver/engine"
)

// postRaw sends body as a DynamoDB op over HTTP and returns the status and
// the body of the answer.
func postRaw(t *testing.T, endpoint, op, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810."+op)
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestFastDecodeAgrees sends each PutItem and GetItem body twice: as is,
// which the engine's fast decoder reads, and with one more member that
// changes nothing but sends it through encoding/json. Both must get the
// same answer, successes and errors alike.
func TestFastDecodeAgrees(t *testing.T) {
	e := newEnv(t, engine.Options{})
	e.createTable("tab", "N", nil)
	e.createTable("hash", "", nil)
	e.put("tab", item{"pk": S("a"), "sk": N("1"), "v": S("x")})
	e.put("hash", item{"pk": S("a"), "v": S("x")})
	for _, tc := range []struct {
		op, body string
		status   int
	}{
		{"GetItem", `{"TableName":"tab","Key":{"pk":{"S":"a"},"sk":{"N":"1"}}}`, 200},
		{"GetItem", `{"Key":{"sk":{"N":"1.0"},"pk":{"S":"a"}},"TableName":"tab","ConsistentRead":true,"ReturnConsumedCapacity":"TOTAL"}`, 200},
		{"GetItem", `{"TableName":"tab","Key":{"pk":{"S":"a"},"sk":{"N":"2"}}}`, 200},
		{"GetItem", `{"TableName":"tab","Key":{"pk":{"S":"b"},"pk":{"S":"a"},"sk":{"N":"1"}}}`, 200}, // the last of duplicates wins
		{"GetItem", `{"TableName":"hash","Key":{"pk":{"S":"a"}}}`, 200},
		{"GetItem", `{"TableName":"tab","Key":{"pk":{"S":"a"}}}`, 400},
		{"GetItem", `{"TableName":"tab","Key":{"pk":{"S":"a"},"sk":{"N":"1"},"v":{"S":"x"}}}`, 400},
		{"GetItem", `{"TableName":"tab","Key":{"pk":{"N":"1"},"sk":{"N":"1"}}}`, 400},
		{"GetItem", `{"TableName":"tab","Key":{"pk":{"S":""},"sk":{"N":"1"}}}`, 400},
		{"GetItem", `{"TableName":"tab","Key":{"a":{"S":"a"},"b":{"N":"1"}}}`, 400},
		{"GetItem", `{"TableName":"hash","Key":{"pk":{"S":"a"},"sk":{"N":"1"}}}`, 400},
		{"GetItem", `{"TableName":"tab","Key":{}}`, 400},
		{"GetItem", `{"TableName":"tab"}`, 400},
		{"GetItem", `{"TableName":"tab","Key":{"pk":{"S":"a"},"sk":{"N":"x"}}}`, 400},
		{"GetItem", `{"TableName":"tab","Key":{"pk":{"S":"a"},"sk":{"N":"1"}},"ReturnConsumedCapacity":"BOGUS"}`, 400},
		{"GetItem", `{"TableName":"nope","Key":{"pk":{"S":"a"}}}`, 400},
		{"PutItem", `{"TableName":"tab","Item":{"pk":{"S":"a"},"sk":{"N":"1"},"v":{"S":"x"}},"ReturnValues":"ALL_OLD","ReturnConsumedCapacity":"INDEXES"}`, 200},
		{"PutItem", `{"TableName":"hash","Item":{"pk":{"S":"a"},"v":{"S":"x"}}}`, 200},
		{"PutItem", `{"TableName":"tab","Item":{"pk":{"S":"a"}}}`, 400},
		{"PutItem", `{"TableName":"tab","Item":{"pk":{"S":"a"},"sk":{"S":"1"}}}`, 400},
		{"PutItem", `{"TableName":"tab","Item":{"pk":{"S":""},"sk":{"N":"1"}}}`, 400},
		{"PutItem", `{"TableName":"tab","Item":{"pk":{"S":"a"},"sk":{"N":"1"}},"ReturnValues":"ALL_NEW"}`, 400},
		{"PutItem", `{"TableName":"tab","Item":{"pk":{"S":"a"},"sk":{"N":"1"}},"ReturnConsumedCapacity":"ALL"}`, 400},
		{"PutItem", `{"TableName":"tab"}`, 400},
		{"PutItem", `{"TableName":"a;b","Item":{"pk":{"S":"a"}}}`, 400},
		{"PutItem", `{"TableName":"nope","Item":{"pk":{"S":"a"}}}`, 400},
	} {
		// A member that changes nothing and that the fast decoder refuses.
		slowBody := strings.Replace(tc.body, "{", `{"ReturnItemCollectionMetrics":"NONE",`, 1)
		if tc.op == "GetItem" {
			slowBody = strings.Replace(tc.body, "{", `{"ProjectionExpression":null,`, 1)
		}
		fastStatus, fast := postRaw(t, e.srv.Endpoint(), tc.op, tc.body)
		slowStatus, slow := postRaw(t, e.srv.Endpoint(), tc.op, slowBody)
		if fastStatus != tc.status || slowStatus != fastStatus || fast != slow {
			t.Errorf("%s %s:\n fast path: %d %s\n slow path: %d %s\n want status %d", tc.op, tc.body, fastStatus, fast, slowStatus, slow, tc.status)
		}
		if tc.status == 200 && tc.op == "GetItem" && strings.Contains(tc.body, `"N":"1`) && !bytes.Contains([]byte(fast), []byte(`"Item"`)) {
			t.Errorf("%s %s: item not found: %s", tc.op, tc.body, fast)
		}
	}
}
