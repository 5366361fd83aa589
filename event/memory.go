package event

import "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

// EstimateMemory returns how much heap a stream record takes once
// shard.FastGetRecords decoded it: its SizeBytes (the attribute names and
// values, which stay in the response's bytes that the record's strings
// point into), recordOverhead for the record's structs, maps and the JSON
// around it, and attrOverhead for every attribute value (a map slot, an
// interface, a value struct and its JSON punctuation). A record the stream
// gives no size for counts 1 KiB more. shard's
// TestEstimateMemoryMatchesHeld holds it within 25% of the heap really
// held, for small and 100 KB items and for items of many small attributes.
// Memory budgets (the shard readers' ShardBufferBytes, the consumer's
// in-flight budgets) count it.
func EstimateMemory(rec types.Record) int {
	d := rec.Dynamodb
	if d == nil {
		return recordOverhead + 1024
	}
	n := recordOverhead + attrOverhead*(countValues(d.Keys)+countValues(d.NewImage)+countValues(d.OldImage))
	if d.SizeBytes != nil && *d.SizeBytes > 0 {
		return n + int(*d.SizeBytes)
	}
	return n + 1024
}

// The parts of EstimateMemory, measured with shard.FastGetRecords on the
// pipeline bench's items (shard's TestEstimateMemoryMatchesHeld).
const (
	recordOverhead = 1260
	attrOverhead   = 84
)

// countValues counts the attribute values of an item, nested ones
// included; a set counts one value per four elements, at least one.
func countValues(item map[string]types.AttributeValue) int {
	n := len(item)
	for _, v := range item {
		switch v := v.(type) {
		case *types.AttributeValueMemberM:
			n += countValues(v.Value)
		case *types.AttributeValueMemberL:
			n += countList(v.Value)
		case *types.AttributeValueMemberSS:
			n += len(v.Value) / 4
		case *types.AttributeValueMemberNS:
			n += len(v.Value) / 4
		case *types.AttributeValueMemberBS:
			n += len(v.Value) / 4
		}
	}
	return n
}

func countList(l []types.AttributeValue) int {
	n := len(l)
	for _, v := range l {
		switch v := v.(type) {
		case *types.AttributeValueMemberM:
			n += countValues(v.Value)
		case *types.AttributeValueMemberL:
			n += countList(v.Value)
		}
	}
	return n
}
