package testkit

import (
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/event"
)

// BenchEvents are 250 expiries of a session item like the sinks
// bench's (cmd/bench): a string key, a TTL, a list, a string set and 32
// bytes of binary, read from a stream in us-east-1 (50 a second).
func BenchEvents() []event.Event {
	t0 := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	evs := make([]event.Event, 250)
	for i := range evs {
		keys := event.Item{"pk": &types.AttributeValueMemberS{Value: fmt.Sprintf("session#%09d", i)}}
		evs[i] = event.Event{
			Kind: event.Expired, Table: "sessions", EventName: "REMOVE", DeletedBy: event.DeletedByTTL, Region: "us-east-1",
			StreamARN:               "arn:aws:dynamodb:us-east-1:000000000000:table/sessions/stream/2026-11-22T09:00:00.000",
			ShardID:                 "shardId-00000001763800000000-0000abcd",
			SequenceNumber:          fmt.Sprintf("%021d", 1000+i),
			EventID:                 fmt.Sprintf("%032x", i),
			ApproximateCreationTime: t0.Add(time.Duration(i/50) * time.Second), // a stream's are whole seconds
			Keys:                    keys,
			OldImage: event.Item{
				"pk":        keys["pk"],
				"user":      &types.AttributeValueMemberS{Value: fmt.Sprintf("user-%d", i%5000)},
				"expiresAt": &types.AttributeValueMemberN{Value: fmt.Sprint(1767322800 + i)},
				"cart":      &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{Value: "sku-1"}, &types.AttributeValueMemberN{Value: "2"}}},
				"flags":     &types.AttributeValueMemberSS{Value: []string{"beta", "mobile"}},
				"token":     &types.AttributeValueMemberB{Value: make([]byte, 32)},
			},
			SizeBytes: 300, TTLAttribute: "expiresAt", TTLValue: fmt.Sprint(1767322800 + i),
		}
	}
	return evs
}
