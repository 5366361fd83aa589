package event

import (
	"reflect"
	"testing"

	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

func TestToDynamoDB(t *testing.T) {
	tests := []struct {
		name string
		in   types.AttributeValue
		want ddb.AttributeValue
	}{
		{"S", &types.AttributeValueMemberS{Value: "x"}, &ddb.AttributeValueMemberS{Value: "x"}},
		{"N keeps its digits", &types.AttributeValueMemberN{Value: "12345678901234567890123456789012345678"}, &ddb.AttributeValueMemberN{Value: "12345678901234567890123456789012345678"}},
		{"B", &types.AttributeValueMemberB{Value: []byte{0, 255}}, &ddb.AttributeValueMemberB{Value: []byte{0, 255}}},
		{"SS", &types.AttributeValueMemberSS{Value: []string{"a", "b"}}, &ddb.AttributeValueMemberSS{Value: []string{"a", "b"}}},
		{"NS", &types.AttributeValueMemberNS{Value: []string{"1", "-2.5"}}, &ddb.AttributeValueMemberNS{Value: []string{"1", "-2.5"}}},
		{"BS", &types.AttributeValueMemberBS{Value: [][]byte{{1}}}, &ddb.AttributeValueMemberBS{Value: [][]byte{{1}}}},
		{"BOOL", &types.AttributeValueMemberBOOL{Value: true}, &ddb.AttributeValueMemberBOOL{Value: true}},
		{"NULL", &types.AttributeValueMemberNULL{Value: true}, &ddb.AttributeValueMemberNULL{Value: true}},
		{"L and M nested", &types.AttributeValueMemberL{Value: []types.AttributeValue{
			&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"k": &types.AttributeValueMemberN{Value: "1"}}},
		}}, &ddb.AttributeValueMemberL{Value: []ddb.AttributeValue{
			&ddb.AttributeValueMemberM{Value: map[string]ddb.AttributeValue{"k": &ddb.AttributeValueMemberN{Value: "1"}}},
		}}},
		{"nil", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ToDynamoDB(Item{"a": tt.in})
			if !reflect.DeepEqual(got, map[string]ddb.AttributeValue{"a": tt.want}) {
				t.Fatalf("%#v, want %#v", got["a"], tt.want)
			}
		})
	}
	if ToDynamoDB(nil) != nil {
		t.Fatal("a nil item converts to a non-nil map")
	}
}
