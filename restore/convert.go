package restore

import (
	ddb "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ttl-archiver/archiver/event"
)

// ToDynamoDB converts an archived image (the Streams SDK's attribute
// values) to the DynamoDB SDK's, value for value: [event.ToDynamoDB].
func ToDynamoDB(item event.Item) map[string]ddb.AttributeValue { return event.ToDynamoDB(item) }
