package ddbjson_test

import (
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/internal/ddbjson"
)

// An item renders to its canonical bytes, which the canonical reader
// reads back; a spelling the writer never writes is left to UnmarshalItem.
func ExampleCanonical() {
	item := ddbjson.Item{
		"pk":   &types.AttributeValueMemberS{Value: "user#1"},
		"exp":  &types.AttributeValueMemberN{Value: "1763790000"},
		"gone": &types.AttributeValueMemberNULL{Value: true},
	}
	b := ddbjson.AppendItem(nil, item)
	fmt.Printf("%s\n", b)

	c := ddbjson.Canonical{Scanner: ddbjson.NewScanner(b)}
	back, ok := c.Item()
	fmt.Println(ok, len(back))

	spaced := []byte(`{"pk": {"S": "user#1"}}`)
	c = ddbjson.Canonical{Scanner: ddbjson.NewScanner(spaced)}
	_, ok = c.Item()
	checked, err := ddbjson.UnmarshalItem(spaced)
	fmt.Println(ok, len(checked), err)
	// Output:
	// {"exp":{"N":"1763790000"},"gone":{"NULL":true},"pk":{"S":"user#1"}}
	// true 3
	// false 1 <nil>
}
