package ddbjson

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/schemas"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// sdkImage is what the SDK's own decoder makes of image as a record's
// NewImage in a GetRecords response (a panic of the decoder is an error).
func sdkImage(image []byte) (_ Item, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	body := append(append([]byte(`{"Records":[{"dynamodb":{"NewImage":`), image...), `}}]}`...)
	proto := dynamodbstreams.New(dynamodbstreams.Options{Region: "us-east-1"}).Options().Protocol
	schema := smithy.NewOperationSchema(schemas.GetRecords, schemas.GetRecordsInput, schemas.GetRecordsOutput)
	resp := &smithyhttp.Response{Response: &http.Response{StatusCode: 200, Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body))}}
	out := &dynamodbstreams.GetRecordsOutput{}
	if err := proto.DeserializeResponse(context.Background(), schema, dynamodbstreams.TypeRegistry, resp, out); err != nil {
		return nil, err
	}
	if len(out.Records) != 1 || out.Records[0].Dynamodb == nil {
		return nil, fmt.Errorf("the SDK read %d records", len(out.Records))
	}
	return out.Records[0].Dynamodb.NewImage, nil
}

// checkWireSameAsSDK fails t unless the wire reader either declines image
// or builds exactly what the SDK builds from it.
func checkWireSameAsSDK(t *testing.T, image []byte) (read bool) {
	t.Helper()
	w := NewWire(bytes.Clone(image))
	got, ok := w.Item()
	if !ok || !w.AtEnd() {
		return false
	}
	want, err := sdkImage(image)
	if err != nil {
		t.Fatalf("wire reader accepted %q, the SDK refused it: %v", image, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("wire reader differs from the SDK for %q\nwire: %s\nsdk:  %s", image, AppendItem(nil, got), AppendItem(nil, want))
	}
	return true
}

// wireSeeds are images as a stream sends them: every type, escapes,
// whitespace, non-ASCII text, a duplicate member, NULL false.
var wireSeeds = []string{
	`{"pk":{"S":"k1"},"n":{"N":"-12.50"},"b":{"B":"AAECAw=="},"t":{"BOOL":true},"f":{"BOOL":false},"z":{"NULL":true}}`,
	`{"ss":{"SS":["a","b\"q\\u00e9\n"]},"ns":{"NS":["1","2e3"]},"bs":{"BS":["AQ==","Ag=="]},"es":{"SS":[]}}`,
	`{ "l" : {"L":[{"S":"x"},{"N":"1"},{"L":[]},{"M":{}}]},"m":{"M":{"in":{"M":{"deep":{"S":"ünï\u2028"}}}}} }`,
	`{"a":{"L":[{"NULL":false},{"BS":[]}]},"a":{"S":"again"}}`,
}

func TestWireMatchesSDK(t *testing.T) {
	for _, s := range wireSeeds {
		if !checkWireSameAsSDK(t, []byte(s)) {
			t.Errorf("wire reader declined %s", s)
		}
	}
	for _, s := range []string{`{"a":{"S":"x","N":"1"}}`, `{"a":{"X":"1"}}`, `{"a":{"S":null}}`, `{"a":{"B":"!"}}`, `{"a":{}}`, `{"a":{"S":"x"}`} {
		if checkWireSameAsSDK(t, []byte(s)) {
			t.Errorf("wire reader read %s; it declines what it does not recognise", s)
		}
	}
}

// FuzzWireItem: on any input the wire reader either declines or builds
// exactly what the SDK's decoder builds.
func FuzzWireItem(f *testing.F) {
	for _, s := range wireSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, image []byte) {
		checkWireSameAsSDK(t, image)
	})
}
