package archive

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/event"
)

// BenchmarkDecodeLineIdentity is one line of a verify or restore read:
// decoded (images skipped, as verify reads, or built, as restore) and
// given its identity, on an expired session item's line as the S3 sink
// writes it (an event ID of 32 hex digits, as DynamoDB Streams gives), in
// a partition of one Region (identity by event ID) and in one where
// Regions meet (the expiry's ID, a SHA-256 of the line's head).
func BenchmarkDecodeLineIdentity(b *testing.B) {
	keys := event.Item{"UserName": &types.AttributeValueMemberS{Value: "user-4242"}, "SessionId": &types.AttributeValueMemberS{Value: "s-0123456789"}}
	e := event.Event{
		Kind: event.Expired, Table: "SessionData", EventName: "REMOVE", DeletedBy: event.DeletedByTTL,
		StreamARN: "arn:aws:dynamodb:us-east-1:000000000000:table/SessionData/stream/2026-03-04T00:00:00.000", Region: "us-east-1",
		ShardID: "shardId-00000001772586000000-0000abcd", SequenceNumber: "100000000000000012345", EventID: "4b5c1e2a9f0d4e7c8a1b2c3d4e5f6a7b",
		ApproximateCreationTime: time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC), Keys: keys, SizeBytes: 180,
		OldImage: event.Item{
			"UserName": keys["UserName"], "SessionId": keys["SessionId"],
			"ExpirationTime": &types.AttributeValueMemberN{Value: "1772586000"},
			"SessionInfo": &types.AttributeValueMemberM{Value: event.Item{
				"device": &types.AttributeValueMemberS{Value: "laptop"},
				"pages":  &types.AttributeValueMemberN{Value: "42"},
				"cart":   &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{Value: "sku-4242"}}},
			}},
		},
		TTLAttribute: "ExpirationTime", TTLValue: "1772586000", TTLTime: time.Unix(1772586000, 0).UTC(), TTLLag: 4 * time.Hour,
	}
	line := event.MarshalLine(&e)
	for _, o := range []decodeOpts{{skipImages: true}, {}, {skipImages: true, crossRegion: true}, {crossRegion: true}} {
		name := "images"
		if o.skipImages {
			name = "images skipped"
		}
		if o.crossRegion {
			name += ", Regions meet" // the expiry's ID hashed
		}
		b.Run(name, func(b *testing.B) {
			names := &event.LineDecoder{}
			b.SetBytes(int64(len(line)))
			b.ReportAllocs()
			for b.Loop() {
				var d decoded
				decodeLine(&d, "k", 1, line, names, o)
				if d.err != nil || d.id.none() {
					b.Fatal(d.err)
				}
			}
		})
	}
}
