package event

import (
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// ToDynamoDB converts an item of the Streams SDK's attribute values (an
// archived or streamed image) to the DynamoDB SDK's, value for value:
// numbers stay decimal strings, binary stays bytes, sets stay sets. The
// result is what PutItem and attributevalue.UnmarshalMap take. A nil item
// converts to nil.
func ToDynamoDB(item Item) map[string]ddb.AttributeValue {
	if item == nil {
		return nil
	}
	out := make(map[string]ddb.AttributeValue, len(item))
	for k, v := range item {
		out[k] = ToDynamoDBValue(v)
	}
	return out
}

// ToDynamoDBValue converts one attribute value as [ToDynamoDB] does. An
// unknown member (a future SDK type) or nil converts to nil.
func ToDynamoDBValue(v types.AttributeValue) ddb.AttributeValue {
	switch x := v.(type) {
	case *types.AttributeValueMemberS:
		return &ddb.AttributeValueMemberS{Value: x.Value}
	case *types.AttributeValueMemberN:
		return &ddb.AttributeValueMemberN{Value: x.Value}
	case *types.AttributeValueMemberB:
		return &ddb.AttributeValueMemberB{Value: x.Value}
	case *types.AttributeValueMemberSS:
		return &ddb.AttributeValueMemberSS{Value: x.Value}
	case *types.AttributeValueMemberNS:
		return &ddb.AttributeValueMemberNS{Value: x.Value}
	case *types.AttributeValueMemberBS:
		return &ddb.AttributeValueMemberBS{Value: x.Value}
	case *types.AttributeValueMemberBOOL:
		return &ddb.AttributeValueMemberBOOL{Value: x.Value}
	case *types.AttributeValueMemberNULL:
		return &ddb.AttributeValueMemberNULL{Value: x.Value}
	case *types.AttributeValueMemberL:
		l := make([]ddb.AttributeValue, len(x.Value))
		for i, e := range x.Value {
			l[i] = ToDynamoDBValue(e)
		}
		return &ddb.AttributeValueMemberL{Value: l}
	case *types.AttributeValueMemberM:
		m := make(map[string]ddb.AttributeValue, len(x.Value))
		for k, e := range x.Value {
			m[k] = ToDynamoDBValue(e)
		}
		return &ddb.AttributeValueMemberM{Value: m}
	}
	return nil
}
