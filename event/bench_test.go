package event

import (
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// benchEvent is an expired item shaped like the ones `make bench` archives:
// a string key, a TTL number, a string and 128 bytes of binary.
func benchEvent() *Event {
	del := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	keys := Item{"pk": &types.AttributeValueMemberS{Value: "item-12345"}}
	return &Event{
		Kind: Expired, Table: "bench", EventName: "REMOVE",
		StreamARN:               "arn:aws:dynamodb:us-east-1:000000000000:table/bench/stream/2026-11-22T09:00:00.000",
		ShardID:                 "shardId-00000001763800000000-0000abcd",
		SequenceNumber:          "000000000000000000123456",
		EventID:                 "4b5c1e2a9f0d4e7c8a1b2c3d4e5f6a7b",
		ApproximateCreationTime: del,
		Keys:                    keys,
		OldImage: Item{
			"pk":      keys["pk"],
			"expires": &types.AttributeValueMemberN{Value: strconv.FormatInt(del.Add(-time.Hour).Unix(), 10)},
			"owner":   &types.AttributeValueMemberS{Value: "user-42"},
			"payload": &types.AttributeValueMemberB{Value: make([]byte, 128)},
		},
		SizeBytes:    230,
		TTLAttribute: "expires",
		TTLValue:     strconv.FormatInt(del.Add(-time.Hour).Unix(), 10),
		TTLTime:      del.Add(-time.Hour),
		TTLLag:       time.Hour,
	}
}

func BenchmarkAppendLine(b *testing.B) {
	e := benchEvent()
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendLine(buf[:0], e)
	}
	b.SetBytes(int64(len(buf)))
}

// BenchmarkAppendLineSession renders the session item of the sinks bench:
// a list, a string set, a number and short binary beside the strings.
func BenchmarkAppendLineSession(b *testing.B) {
	e := benchEvent()
	e.OldImage = Item{
		"pk":        e.Keys["pk"],
		"user":      &types.AttributeValueMemberS{Value: "user-4242"},
		"expiresAt": &types.AttributeValueMemberN{Value: "1767322800"},
		"cart":      &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{Value: "sku-1"}, &types.AttributeValueMemberN{Value: "2"}}},
		"flags":     &types.AttributeValueMemberSS{Value: []string{"beta", "mobile"}},
		"token":     &types.AttributeValueMemberB{Value: make([]byte, 32)},
	}
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendLine(buf[:0], e)
	}
	b.SetBytes(int64(len(buf)))
}

// BenchmarkAppendLineID is BenchmarkAppendLine's line with the
// expiry's message ID hashed from it (what the NATS sink renders per
// message); BenchmarkMessageID renders what the hash needs on its own
// (format=item, replay, subscribe) with one IDHasher.
func BenchmarkAppendLineID(b *testing.B) {
	e := benchEvent()
	x := NewIDHasher()
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf, _ = x.AppendLine(buf[:0], e)
	}
	b.SetBytes(int64(len(buf)))
}

func BenchmarkMessageID(b *testing.B) {
	e := benchEvent()
	x := NewIDHasher()
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = x.AppendMessageID(buf[:0], e)
	}
}
