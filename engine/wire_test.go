package engine_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ttl-archiver/archiver/engine"
)

func post(h http.Handler, target, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
	r.Header.Set("X-Amz-Target", target)
	r.Header.Set("Content-Type", "application/x-amz-json-1.0")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestWireErrors(t *testing.T) {
	eng, err := engine.New(engine.Options{TTLInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	cases := []struct {
		target, body string
		status       int
		code         string
	}{
		{"DynamoDB_20120810.Frobnicate", "{}", 400, "UnknownOperationException"},
		{"Nope.ListTables", "{}", 400, "UnknownOperationException"},
		{"DynamoDB_20120810.ListTables", "{", 400, "SerializationException"},
		{"DynamoDB_20120810.PutItem", `{"TableName": 5}`, 400, "SerializationException"},
		{"DynamoDB_20120810.PutItem", `{"TableName":"abc","Item":{"a":{"S":"x","N":"1"}}}`, 400, "ValidationException"},
		{"DynamoDB_20120810.PutItem", `{"TableName":"abc","Item":{"a":{"S":"x"}}}`, 400, "ResourceNotFoundException"},
		{"DynamoDB_20120810.DescribeTable", ``, 400, "ValidationException"},
		{"DynamoDBStreams_20120810.GetRecords", `{}`, 400, "ValidationException"},
		{"DynamoDBStreams_20120810.Frobnicate", `{}`, 400, "UnknownOperationException"},
		{"DynamoDB_20120810.ListTables", `{}`, 200, ""},
	}
	for _, c := range cases {
		w := post(eng, c.target, c.body)
		body := w.Body.Bytes()
		if w.Code != c.status {
			t.Errorf("%s %s: status %d body %s", c.target, c.body, w.Code, body)
			continue
		}
		if got := w.Header().Get("X-Amz-Crc32"); got != strconv.FormatUint(uint64(crc32.ChecksumIEEE(body)), 10) {
			t.Errorf("crc32 header %q", got)
		}
		if w.Header().Get("x-amzn-RequestId") == "" || w.Header().Get("Content-Type") != "application/x-amz-json-1.0" {
			t.Errorf("headers %v", w.Header())
		}
		if c.code == "" {
			continue
		}
		var doc struct{ Type, Message string }
		var raw map[string]string
		if err := json.Unmarshal(body, &raw); err != nil {
			t.Errorf("error body %s: %v", body, err)
			continue
		}
		doc.Type, doc.Message = raw["__type"], raw["message"]
		if doc.Type != "com.amazonaws.dynamodb.v20120810#"+c.code || doc.Message == "" {
			t.Errorf("%s %s: got %s", c.target, c.body, body)
		}
	}
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	w := httptest.NewRecorder()
	eng.ServeHTTP(w, r)
	if w.Code != 200 || !strings.HasPrefix(w.Body.String(), "healthy") {
		t.Fatalf("health: %d %s", w.Code, w.Body)
	}
	big := post(eng, "DynamoDB_20120810.PutItem", `{"TableName":"abc","Item":{"a":{"S":"`+strings.Repeat("x", 21<<20)+`"}}}`)
	if big.Code != 413 || !strings.Contains(big.Body.String(), "ValidationException") {
		t.Fatalf("oversized body: %d %.200s", big.Code, big.Body)
	}
}

func TestHooksAndPanics(t *testing.T) {
	var keys []string
	e := newEnv(t, engine.Options{Hooks: engine.Hooks{OnRequest: func(op string, r *http.Request) error {
		auth := r.Header.Get("Authorization")
		if i := strings.Index(auth, "Credential="); i >= 0 {
			keys = append(keys, strings.SplitN(auth[i+len("Credential="):], "/", 2)[0])
		}
		switch op {
		case "DescribeLimits":
			panic("boom")
		case "ListTables":
			return engine.Throttle()
		case "DescribeEndpoints":
			return errors.New("injected")
		}
		return nil
	}}})
	_, err := e.db.ListTables(e.ctx, &dynamodb.ListTablesInput{})
	if errCode(err) != "ProvisionedThroughputExceededException" {
		t.Fatalf("hook error: %v", err)
	}
	if len(keys) == 0 || keys[0] != "AKIDTEST" {
		t.Fatalf("access keys seen by the hook: %v", keys)
	}
	_, err = e.db.DescribeLimits(e.ctx, &dynamodb.DescribeLimitsInput{})
	if errCode(err) != "InternalServerError" || strings.Contains(errMsg(err), "boom") || strings.Contains(errMsg(err), "goroutine") {
		t.Fatalf("panic: %v", err)
	}
	if _, err := e.db.DescribeTable(e.ctx, &dynamodb.DescribeTableInput{TableName: aws.String("still-alive")}); errCode(err) != "ResourceNotFoundException" {
		t.Fatalf("after panic: %v", err)
	}
}

func TestParseRollover(t *testing.T) {
	for _, c := range []struct {
		in   string
		d    string
		n    int
		fail bool
	}{
		{"4h", "4h0m0s", 0, false}, {"500", "0s", 500, false}, {"", "0s", 0, false}, {"0", "0s", 0, false},
		{"-1", "", 0, true}, {"-5m", "", 0, true}, {"soon", "", 0, true},
	} {
		d, n, err := engine.ParseRollover(c.in)
		if (err != nil) != c.fail || (!c.fail && (d.String() != c.d || n != c.n)) {
			t.Errorf("ParseRollover(%q) = %v, %d, %v", c.in, d, n, err)
		}
	}
}

var fuzzOps = []string{
	"CreateTable", "DescribeTable", "ListTables", "DeleteTable", "UpdateTable", "DescribeTimeToLive", "UpdateTimeToLive",
	"PutItem", "GetItem", "UpdateItem", "DeleteItem", "Query", "Scan", "BatchGetItem", "BatchWriteItem",
	"TransactWriteItems", "TransactGetItems",
	"Streams.ListStreams", "Streams.DescribeStream", "Streams.GetShardIterator", "Streams.GetRecords",
}

// FuzzRequest posts arbitrary bodies to every operation: the engine never
// answers 500 and every error body names its __type.
func FuzzRequest(f *testing.F) {
	eng, err := engine.New(engine.Options{TTLInterval: -1})
	if err != nil {
		f.Fatal(err)
	}
	defer eng.Close()
	setup := []string{
		`{"TableName":"fzt","BillingMode":"PAY_PER_REQUEST","KeySchema":[{"AttributeName":"pk","KeyType":"HASH"},{"AttributeName":"sk","KeyType":"RANGE"}],"AttributeDefinitions":[{"AttributeName":"pk","AttributeType":"S"},{"AttributeName":"sk","AttributeType":"N"},{"AttributeName":"g","AttributeType":"S"}],"GlobalSecondaryIndexes":[{"IndexName":"gsi","KeySchema":[{"AttributeName":"g","KeyType":"HASH"}],"Projection":{"ProjectionType":"KEYS_ONLY"}}],"StreamSpecification":{"StreamEnabled":true,"StreamViewType":"NEW_AND_OLD_IMAGES"}}`,
	}
	ensureTable := func(t testing.TB) {
		if w := post(eng, "DynamoDB_20120810.DescribeTable", `{"TableName":"fzt"}`); w.Code == 200 {
			return
		}
		for _, b := range setup {
			if w := post(eng, "DynamoDB_20120810.CreateTable", b); w.Code != 200 {
				t.Fatalf("setup: %d %s", w.Code, w.Body)
			}
		}
	}
	ensureTable(f)
	f.Add(uint8(7), `{"TableName":"fzt","Item":{"pk":{"S":"a"},"sk":{"N":"1"},"g":{"S":"x"},"ttl":{"N":"1e3"}}}`)
	f.Add(uint8(9), `{"TableName":"fzt","Key":{"pk":{"S":"a"},"sk":{"N":"1"}},"UpdateExpression":"SET #a = list_append(:l, :l) ADD n :one","ExpressionAttributeNames":{"#a":"a"},"ExpressionAttributeValues":{":l":{"L":[]},":one":{"N":"1"}},"ReturnValues":"UPDATED_NEW"}`)
	f.Add(uint8(11), `{"TableName":"fzt","IndexName":"gsi","KeyConditionExpression":"g = :g","ExpressionAttributeValues":{":g":{"S":"x"}},"Limit":1}`)
	f.Add(uint8(12), `{"TableName":"fzt","Segment":0,"TotalSegments":3,"FilterExpression":"size(a) > :z","ExpressionAttributeValues":{":z":{"N":"0"}}}`)
	f.Add(uint8(14), `{"RequestItems":{"fzt":[{"PutRequest":{"Item":{"pk":{"S":"b"},"sk":{"N":"2"}}}},{"DeleteRequest":{"Key":{"pk":{"S":"a"},"sk":{"N":"1"}}}}]}}`)
	f.Add(uint8(13), `{"RequestItems":{"fzt":{"Keys":[{"pk":{"S":"b"},"sk":{"N":"2"}}],"ProjectionExpression":"a.b[2]"}}}`)
	f.Add(uint8(4), `{"TableName":"fzt","GlobalSecondaryIndexUpdates":[{"Delete":{"IndexName":"gsi"}}]}`)
	f.Add(uint8(6), `{"TableName":"fzt","TimeToLiveSpecification":{"Enabled":true,"AttributeName":"ttl"}}`)
	f.Add(uint8(15), `{"TransactItems":[{"Put":{"TableName":"fzt","Item":{"pk":{"S":"c"},"sk":{"N":"3"}}}}]}`)
	f.Add(uint8(0), `{"TableName":"x\u0000y"}`)
	f.Add(uint8(10), `{"TableName":"fzt","Key":{"pk":{"S":""},"sk":{"N":"-0"}}}`)
	f.Add(uint8(17), `{"TableName":"fzt","Limit":5}`)
	f.Add(uint8(20), `{"ShardIterator":"bm9wZQ==","Limit":1000}`)
	f.Fuzz(func(t *testing.T, op uint8, body string) {
		target := "DynamoDB_20120810." + fuzzOps[int(op)%len(fuzzOps)]
		if name, ok := strings.CutPrefix(fuzzOps[int(op)%len(fuzzOps)], "Streams."); ok {
			target = "DynamoDBStreams_20120810." + name
		}
		ensureTable(t)
		w := post(eng, target, body)
		if w.Code >= 500 {
			t.Fatalf("%s %s: status %d %s", target, body, w.Code, w.Body)
		}
		if w.Code != 200 {
			b, _ := io.ReadAll(w.Body)
			if !bytes.Contains(b, []byte(`"__type":"com.amazonaws.dynamodb.v20120810#`)) {
				t.Fatalf("%s: error without __type: %s", target, b)
			}
		}
		if _, err := eng.SweepTTL(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
}
