package event_test

import (
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/event"
)

// A LineDecoder reads an archive object's lines one after another: in one
// pass when the line is as AppendLine wrote it, and through DecodeLine
// (which explains what is wrong) when it is not.
func ExampleLineDecoder() {
	keys := event.Item{"pk": &types.AttributeValueMemberS{Value: "session#42"}}
	e := event.Event{Kind: event.Expired, Table: "Sessions", EventID: "1", EventName: "REMOVE", SequenceNumber: "100",
		ShardID: "shardId-1", Keys: keys, OldImage: keys, DeletedBy: event.DeletedByTTL}
	lines := [][]byte{event.MarshalLine(&e), []byte(`{"Item": {}}`)}

	var dec event.LineDecoder
	for _, line := range lines {
		var got event.Event
		if _, ok := dec.DecodeFast(&got, line, false); !ok {
			var err error
			if got, err = event.DecodeLine(line); err != nil {
				fmt.Println("error:", err)
				continue
			}
		}
		fmt.Println(got.Kind, got.Table, got.Keys["pk"].(*types.AttributeValueMemberS).Value)
	}
	// Output:
	// expired Sessions session#42
	// error: archive line: Metadata: missing
}
