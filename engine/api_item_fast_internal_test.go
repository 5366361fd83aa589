package engine

import (
	"strings"
	"testing"

	"github.com/ttl-archiver/archiver/engine/internal/apimodel"
	"github.com/ttl-archiver/archiver/engine/internal/attr"
)

// FuzzFastGetItemWithinModel: every GetItem body fastGetItem takes is one
// the API model passes (apimodel.Check), since opGetItem checks only the
// bodies the fast read refuses. The seeds run in every go test.
func FuzzFastGetItemWithinModel(f *testing.F) {
	key := `"Key":{"pk":{"S":"a"}}`
	for _, body := range []string{
		`{"TableName":"tab",` + key + `}`,
		`{"TableName":"tab",` + key + `,"ConsistentRead":true,"ReturnConsumedCapacity":"TOTAL"}`,
		`{"TableName":"tab",` + key + `,"ReturnConsumedCapacity":""}`,
		`{"TableName":"tab",` + key + `,"ReturnConsumedCapacity":"ALL"}`,
		`{"TableName":"tab",` + key + `,"ReturnConsumedCapacity":"none"}`,
		`{"TableName":"ta",` + key + `}`,
		`{"TableName":"",` + key + `}`,
		`{"TableName":"a;b",` + key + `}`,
		`{"TableName":"` + strings.Repeat("t", 255) + `",` + key + `}`,
		`{"TableName":"` + strings.Repeat("t", 256) + `",` + key + `}`,
		`{"TableName":"arn:aws:dynamodb:us-east-1:000000000000:table/tab",` + key + `}`,
		`{"TableName":"arn:` + strings.Repeat("x", 1020) + `",` + key + `}`,
		`{"TableName":"arn:` + strings.Repeat("x", 1021) + `",` + key + `}`,
		`{"TableName":"tab"}`,
		`{` + key + `}`,
		`{"TableName":"tab","Key":{}}`,
		`{"TableName":"tab","Key":null}`,
		`{"TableName":null,` + key + `}`,
		`{"TableName":"tab",` + key + `,"ConsistentRead":null}`,
		`{"tablename":"tab",` + key + `}`,
	} {
		f.Add(body)
	}
	f.Fuzz(func(t *testing.T, body string) {
		var req getItemRequest
		var buf [2]attr.Attr
		if _, ok := fastGetItem([]byte(body), &req, buf[:0]); !ok {
			return
		}
		if err := apimodel.Check(false, "GetItem", []byte(body)); err != nil {
			t.Fatalf("fastGetItem took %s, which the API model refuses: %v", body, err)
		}
	})
}
