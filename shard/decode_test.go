package shard

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/schemas"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/internal/sdkhttp"
)

var getRecordsSchema = smithy.NewOperationSchema(schemas.GetRecords, schemas.GetRecordsInput, schemas.GetRecordsOutput)

// sdkProtocol is the protocol a default client decodes with.
func sdkProtocol() smithyhttp.ClientProtocol {
	return dynamodbstreams.New(dynamodbstreams.Options{Region: "us-east-1"}).Options().Protocol
}

// decodeWith runs p's DeserializeResponse on a 200 response with body.
// A panic (the SDK's decoder has one) is returned as an error.
func decodeWith(p smithyhttp.ClientProtocol, body []byte) (_ *dynamodbstreams.GetRecordsOutput, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	out := &dynamodbstreams.GetRecordsOutput{}
	resp := &smithyhttp.Response{Response: &http.Response{StatusCode: 200, Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body))}}
	err = p.DeserializeResponse(context.Background(), getRecordsSchema, dynamodbstreams.TypeRegistry, resp, out)
	return out, err
}

// checkSameAsSDK fails t unless the fast decoder either declines body or
// builds exactly what the SDK builds from it; and the wrapped protocol
// always ends with the SDK's result.
func checkSameAsSDK(t testing.TB, body []byte) (fast bool) {
	t.Helper()
	want, wantErr := decodeWith(sdkProtocol(), body)
	var got dynamodbstreams.GetRecordsOutput
	if decodeGetRecords(body, &got) {
		if wantErr != nil {
			t.Fatalf("fast decoder accepted %q, the SDK refused it: %v", body, wantErr)
		}
		if !reflect.DeepEqual(&got, want) {
			t.Fatalf("fast decoder differs from the SDK for %q\nfast: %#v\nsdk:  %#v", body, got, *want)
		}
		fast = true
	}
	viaWrapper, err := decodeWith(fastProtocol{ClientProtocol: sdkProtocol()}, body)
	if err != nil && strings.HasPrefix(err.Error(), "panic:") {
		t.Fatalf("wrapped protocol panicked on %q: %v", body, err)
	}
	if (err == nil) != (wantErr == nil) {
		t.Fatalf("wrapped protocol error %v, SDK error %v for %q", err, wantErr, body)
	}
	if err == nil && !reflect.DeepEqual(viaWrapper, want) {
		t.Fatalf("wrapped protocol differs from the SDK for %q", body)
	}
	return fast
}

// everyShape is a GetRecords body with every member and attribute type,
// escapes, non-ASCII text and fractional timestamps.
const everyShape = `{"NextShardIterator":"iter-1","Records":[
 {"awsRegion":"us-east-1","dynamodb":{"ApproximateCreationDateTime":1.7638E9,"Keys":{"pk":{"S":"k1"}},
  "NewImage":{"pk":{"S":"k1"},"n":{"N":"-12.50"},"b":{"B":"AAECAw=="},"t":{"BOOL":true},"f":{"BOOL":false},"z":{"NULL":true},
   "ss":{"SS":["a","b\"q\\u00e9\n"]},"ns":{"NS":["1","2e3"]},"bs":{"BS":["AQ==","Ag=="]},"es":{"SS":[]},
   "l":{"L":[{"S":"x"},{"N":"1"},{"L":[]},{"M":{}}]},"m":{"M":{"in":{"M":{"deep":{"S":"ünï\u2028"}}}}}},
  "SequenceNumber":"000000000000000000001","SizeBytes":231,"StreamViewType":"NEW_AND_OLD_IMAGES"},
  "eventID":"e1","eventName":"INSERT","eventSource":"aws:dynamodb","eventVersion":"1.1"},
 {"awsRegion":"us-east-1","dynamodb":{"ApproximateCreationDateTime":1763800000.123456,"Keys":{"pk":{"S":"k2"}},
  "OldImage":{"pk":{"S":"k2"},"exp":{"N":"1763790000"}},"SequenceNumber":"2","SizeBytes":40,"StreamViewType":"OLD_IMAGE"},
  "eventID":"e2","eventName":"REMOVE","eventSource":"aws:dynamodb","eventVersion":"1.1",
  "userIdentity":{"PrincipalId":"dynamodb.amazonaws.com","Type":"Service"}}
 ]}`

func TestDecodeGetRecordsMatchesSDK(t *testing.T) {
	cases := []struct {
		name string
		body string
		fast bool // the fast decoder takes it (else the SDK decodes it)
	}{
		{"every shape", everyShape, true},
		{"no records, no iterator", `{"Records":[]}`, true},
		{"whitespace everywhere", " {\n\t\"Records\" : [ ] , \"NextShardIterator\" : \"i\" }\r\n", true},
		{"integer timestamp", `{"Records":[{"dynamodb":{"ApproximateCreationDateTime":1763800000}}]}`, true},
		{"empty object", `{}`, true},
		{"unknown member", `{"Records":[],"Extra":1}`, false},
		{"null iterator", `{"NextShardIterator":null,"Records":[]}`, false},
		{"null attribute", `{"Records":[{"dynamodb":{"Keys":{"pk":null}}}]}`, false},
		{"two members in a value", `{"Records":[{"dynamodb":{"Keys":{"pk":{"S":"a","N":"1"}}}}]}`, false},
		{"unknown attribute type", `{"Records":[{"dynamodb":{"Keys":{"pk":{"X":"a"}}}}]}`, false},
		{"timestamp as string", `{"Records":[{"dynamodb":{"ApproximateCreationDateTime":"Infinity"}}]}`, false},
		{"NaN timestamp (the SDK's decoder panics)", `{"Records":[{"dynamodb":{"ApproximateCreationDateTime":"NaN"}}]}`, false},
		{"fractional size", `{"Records":[{"dynamodb":{"SizeBytes":1.5}}]}`, false},
		{"bad base64", `{"Records":[{"dynamodb":{"Keys":{"b":{"B":"!!"}}}}]}`, false},
		{"trailing garbage", `{"Records":[]} x`, false},
		{"truncated", `{"Records":[{"dynamodb":{"Keys":{"pk":{"S":"a"`, false},
		{"control byte in string", "{\"NextShardIterator\":\"a\x01\"}", false},
		{"leading zero", `{"Records":[{"dynamodb":{"SizeBytes":01}}]}`, false},
		{"bad literal", `{"Records":[{"dynamodb":{"Keys":{"t":{"BOOL":truth}}}}]}`, false},
		{"empty body", ``, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := checkSameAsSDK(t, []byte(tc.body)); got != tc.fast {
				t.Fatalf("fast decoder took it: %v, want %v", got, tc.fast)
			}
		})
	}
}

// recordingTransport keeps the bodies of GetRecords responses.
type recordingTransport struct {
	bodies [][]byte
}

func (r *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil || !strings.HasSuffix(req.Header.Get("X-Amz-Target"), ".GetRecords") {
		return resp, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	r.bodies = append(r.bodies, b)
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return resp, nil
}

// TestDecodeEngineResponses: responses the engine really sends (every
// attribute type, inserts, modifies, user deletes and TTL deletes) decode
// on the fast path, to exactly what the SDK makes of them.
func TestDecodeEngineResponses(t *testing.T) {
	e := newEnv(t, engine.Options{})
	ctx := context.Background()
	arn := e.createTable(t, "shapes")
	_, err := e.ddb.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: aws.String("shapes"),
		TimeToLiveSpecification: &dtypes.TimeToLiveSpecification{AttributeName: aws.String("exp"), Enabled: aws.Bool(true)}})
	if err != nil {
		t.Fatal(err)
	}
	item := map[string]dtypes.AttributeValue{
		"pk":  &dtypes.AttributeValueMemberS{Value: "k \"quoted\" ünï \n"},
		"exp": &dtypes.AttributeValueMemberN{Value: strconv.FormatInt(time.Now().Add(-time.Hour).Unix(), 10)},
		"n":   &dtypes.AttributeValueMemberN{Value: "-1.25E+3"},
		"b":   &dtypes.AttributeValueMemberB{Value: []byte{0, 1, 2, 0xff}},
		"t":   &dtypes.AttributeValueMemberBOOL{Value: true},
		"z":   &dtypes.AttributeValueMemberNULL{Value: true},
		"ss":  &dtypes.AttributeValueMemberSS{Value: []string{"a", "b"}},
		"ns":  &dtypes.AttributeValueMemberNS{Value: []string{"1", "2"}},
		"bs":  &dtypes.AttributeValueMemberBS{Value: [][]byte{{1}, {2}}},
		"l":   &dtypes.AttributeValueMemberL{Value: []dtypes.AttributeValue{&dtypes.AttributeValueMemberS{Value: "x"}, &dtypes.AttributeValueMemberL{}}},
		"m":   &dtypes.AttributeValueMemberM{Value: map[string]dtypes.AttributeValue{"in": &dtypes.AttributeValueMemberS{Value: "y"}}},
	}
	for i, pk := range []string{"k1", "k2", "k \"quoted\" ünï \n"} {
		item["pk"] = &dtypes.AttributeValueMemberS{Value: pk}
		item["n"] = &dtypes.AttributeValueMemberN{Value: "-1.25E+3"} // the MODIFY below must change it
		if _, err := e.ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("shapes"), Item: item}); err != nil {
			t.Fatal(err)
		}
		item["n"] = &dtypes.AttributeValueMemberN{Value: "7"}
		if _, err := e.ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("shapes"), Item: item}); err != nil { // MODIFY
			t.Fatal(err)
		}
		if i == 0 {
			if _, err := e.ddb.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String("shapes"),
				Key: map[string]dtypes.AttributeValue{"pk": &dtypes.AttributeValueMemberS{Value: pk}}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := e.eng.SweepTTL(ctx); err != nil { // the other two expire: service deletes
		t.Fatal(err)
	}

	rec := &recordingTransport{}
	st := dynamodbstreams.New(e.streams.Options(), func(o *dynamodbstreams.Options) { o.HTTPClient = &http.Client{Transport: rec} })
	desc, err := st.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn)})
	if err != nil {
		t.Fatal(err)
	}
	records := 0
	for _, sh := range desc.StreamDescription.Shards {
		it, err := st.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(arn), ShardId: sh.ShardId,
			ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
		if err != nil {
			t.Fatal(err)
		}
		out, err := st.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it.ShardIterator}, FastGetRecords)
		if err != nil {
			t.Fatal(err)
		}
		records += len(out.Records)
	}
	if records != 9 {
		t.Fatalf("read %d records, want 9 (3 inserts, 3 modifies, 1 user delete, 2 expiries)", records)
	}
	for _, b := range rec.bodies {
		if !checkSameAsSDK(t, b) {
			t.Fatalf("the fast decoder declined an engine response:\n%s", b)
		}
	}
}

// TestFastGetRecordsKeepsErrors: error responses still decode to the SDK's
// typed errors (the walker's error handling matches on them).
func TestFastGetRecordsKeepsErrors(t *testing.T) {
	e := newEnv(t, engine.Options{})
	_, err := e.streams.GetRecords(context.Background(), &dynamodbstreams.GetRecordsInput{ShardIterator: aws.String("not-an-iterator")}, FastGetRecords)
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode() == "" {
		t.Fatalf("GetRecords with a bad iterator = %v, want an API error", err)
	}
	o := e.streams.Options()
	FastGetRecords(&o)
	FastGetRecords(&o)
	if inner, ok := o.Protocol.(fastProtocol); !ok || reflect.TypeOf(inner.ClientProtocol) == reflect.TypeOf(fastProtocol{}) {
		t.Fatalf("FastGetRecords twice wrapped the protocol twice: %T", o.Protocol)
	}
}

// FuzzDecodeGetRecords: on any input the fast decoder either declines or
// builds exactly what the SDK builds.
func FuzzDecodeGetRecords(f *testing.F) {
	f.Add([]byte(everyShape))
	f.Add([]byte(`{"Records":[{"dynamodb":{"ApproximateCreationDateTime":1e9,"SizeBytes":-0}}]}`))
	f.Add([]byte(`{"Records":[{"dynamodb":{"Keys":{"a":{"L":[{"NULL":false},{"BS":[]}]}}}}]}`))
	f.Add([]byte("{\"NextShardIterator\":\"\xff\xfe\\u0041\"}"))
	f.Fuzz(func(t *testing.T, body []byte) {
		checkSameAsSDK(t, body)
	})
}

// benchBody is a GetRecords response of 1,000 TTL deletes shaped like the
// consumer bench's items.
func benchBody() []byte {
	var b strings.Builder
	b.WriteString(`{"NextShardIterator":"iter","Records":[`)
	for i := range 1000 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"awsRegion":"us-east-1","dynamodb":{"ApproximateCreationDateTime":1763800000.%03d,"Keys":{"pk":{"S":"item-%d"}},`+
			`"OldImage":{"pk":{"S":"item-%d"},"expires":{"N":"1763790000"},"owner":{"S":"user-%d"},"payload":{"B":"%s"}},`+
			`"SequenceNumber":"%021d","SizeBytes":230,"StreamViewType":"NEW_AND_OLD_IMAGES"},"eventID":"%032x","eventName":"REMOVE",`+
			`"eventSource":"aws:dynamodb","eventVersion":"1.1","userIdentity":{"PrincipalId":"dynamodb.amazonaws.com","Type":"Service"}}`,
			i%1000, i, i, i%997, strings.Repeat("QUJD", 43)[:172], i, i)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// BenchmarkDecodeGetRecords: the fast decoder beside the SDK's, per
// response of 1,000 records.
func BenchmarkDecodeGetRecords(b *testing.B) {
	body := benchBody()
	if !checkSameAsSDK(b, body) {
		b.Fatal("the fast decoder declined the bench body")
	}
	for _, p := range []struct {
		name  string
		proto smithyhttp.ClientProtocol
	}{{"sdk", sdkProtocol()}, {"fast", fastProtocol{ClientProtocol: sdkProtocol()}}} {
		b.Run(p.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := decodeWith(p.proto, body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestFastGetRecordsContainsSDKPanics: on a client, the wrapper turns the
// SDK decoder's panic on a malformed response into an error, for other
// operations than GetRecords too.
func TestFastGetRecordsContainsSDKPanics(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		if strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".DescribeStream") {
			fmt.Fprint(w, `{"StreamDescription":{"CreationRequestDateTime":"NaN"}}`)
			return
		}
		fmt.Fprint(w, `{"Records":[{"dynamodb":{"ApproximateCreationDateTime":"NaN"}}]}`)
	}))
	defer srv.Close()
	st := dynamodbstreams.New(dynamodbstreams.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: aws.AnonymousCredentials{}, RetryMaxAttempts: 1, HTTPClient: sdkhttp.Client(nil)}, FastGetRecords)
	ctx := context.Background()
	_, err := st.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String("arn:aws:dynamodb:us-east-1:1:table/t/stream/x")})
	var de *smithy.DeserializationError
	if !errors.As(err, &de) {
		t.Fatalf("DescribeStream on a NaN timestamp = %v, want a DeserializationError", err)
	}
	_, err = st.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: aws.String("it")})
	if !errors.As(err, &de) {
		t.Fatalf("GetRecords on a NaN timestamp = %v, want a DeserializationError", err)
	}
}
