package conformance

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// emptyPages is how many empty GetRecords pages in a row end a read of
// an open shard: AWS may answer empty pages before the records ("it might
// take multiple calls to get to a portion of the shard that contains
// stream records").
const emptyPages = 3

// maxPages bounds one read of one shard.
const maxPages = 1000

// shards lists the stream's shards, every page of them, with filter when
// it is not nil.
func shards(ctx context.Context, st *dynamodbstreams.Client, arn string, filter *stypes.ShardFilter) ([]stypes.Shard, error) {
	var out []stypes.Shard
	var start *string
	for range maxPages {
		page, err := st.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: &arn, ExclusiveStartShardId: start, ShardFilter: filter})
		if err != nil {
			return nil, fmt.Errorf("DescribeStream: %w", err)
		}
		if page.StreamDescription == nil {
			return nil, errors.New("DescribeStream: the answer has no StreamDescription")
		}
		out = append(out, page.StreamDescription.Shards...)
		start = page.StreamDescription.LastEvaluatedShardId
		if start == nil {
			return out, nil
		}
	}
	return nil, fmt.Errorf("DescribeStream: still paging after %d pages", maxPages)
}

// iterator is a shard iterator of type typ (at or after seq for the
// sequence types).
func iterator(ctx context.Context, st *dynamodbstreams.Client, arn, shard string, typ stypes.ShardIteratorType, seq string) (string, error) {
	in := &dynamodbstreams.GetShardIteratorInput{StreamArn: &arn, ShardId: &shard, ShardIteratorType: typ}
	if seq != "" {
		in.SequenceNumber = &seq
	}
	out, err := st.GetShardIterator(ctx, in)
	if err != nil {
		return "", fmt.Errorf("GetShardIterator %s of %s: %w", typ, shard, err)
	}
	if aws.ToString(out.ShardIterator) == "" {
		return "", fmt.Errorf("GetShardIterator %s of %s: no iterator in the answer", typ, shard)
	}
	return *out.ShardIterator, nil
}

// readFrom reads records from it until it has caught up: the shard is
// closed and read to its end, or emptyPages pages in a row were empty
// after the last record.
func readFrom(ctx context.Context, st *dynamodbstreams.Client, it string) ([]stypes.Record, error) {
	var recs []stypes.Record
	empty := 0
	for range maxPages {
		out, err := st.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: &it})
		if err != nil {
			return recs, fmt.Errorf("GetRecords: %w", err)
		}
		recs = append(recs, out.Records...)
		if empty++; len(out.Records) > 0 {
			empty = 0
		}
		if out.NextShardIterator == nil || empty >= emptyPages {
			return recs, nil
		}
		it = *out.NextShardIterator
	}
	return recs, nil
}

// readShard reads one shard from an iterator of type typ until caught up.
func readShard(ctx context.Context, st *dynamodbstreams.Client, arn, shard string, typ stypes.ShardIteratorType, seq string) ([]stypes.Record, error) {
	it, err := iterator(ctx, st, arn, shard, typ, seq)
	if err != nil {
		return nil, err
	}
	return readFrom(ctx, st, it)
}

// allRecords reads every shard of the stream from its trim horizon.
func allRecords(ctx context.Context, st *dynamodbstreams.Client, arn string) ([]stypes.Record, error) {
	list, err := shards(ctx, st, arn, nil)
	if err != nil {
		return nil, err
	}
	var recs []stypes.Record
	for _, s := range list {
		r, err := readShard(ctx, st, arn, aws.ToString(s.ShardId), stypes.ShardIteratorTypeTrimHorizon, "")
		if err != nil {
			return nil, err
		}
		recs = append(recs, r...)
	}
	return recs, nil
}

// awaitRecords reads the whole stream until cond holds of its records or
// the bound passes; then the error says what was awaited and what the
// stream held.
func (e *Env) awaitRecords(ctx context.Context, st *dynamodbstreams.Client, arn, what string, cond func([]stypes.Record) bool) ([]stypes.Record, error) {
	var recs []stypes.Record
	_, err := e.waitFor(ctx, e.Bound, false, func(ctx context.Context) error {
		var err error
		if recs, err = allRecords(ctx, st, arn); err != nil {
			return err
		}
		if cond(recs) {
			return nil
		}
		return errNotYet
	})
	if errors.Is(err, errNotYet) {
		return recs, fmt.Errorf("%s: not in the stream within the bound (%v); it held %s", what, e.Bound, summary(recs))
	}
	return recs, err
}

// recordID is a record's event name and item id for a detail: "REMOVE x".
func recordID(r stypes.Record) string {
	id := "?"
	if r.Dynamodb != nil {
		if s, ok := r.Dynamodb.Keys["pk"].(*stypes.AttributeValueMemberS); ok {
			id = s.Value
		}
	}
	return string(r.EventName) + " " + id
}

// summary lists records as "INSERT a, REMOVE a" (the first 20).
func summary(recs []stypes.Record) string {
	if len(recs) == 0 {
		return "no records"
	}
	var parts []string
	for i, r := range recs {
		if i == 20 {
			parts = append(parts, fmt.Sprintf("and %d more", len(recs)-i))
			break
		}
		parts = append(parts, recordID(r))
	}
	return strings.Join(parts, ", ")
}

// find is the first record that is event for the item id, or nil.
func find(recs []stypes.Record, event stypes.OperationType, id string) *stypes.Record {
	for i := range recs {
		if recs[i].EventName == event && recordID(recs[i]) == string(event)+" "+id {
			return &recs[i]
		}
	}
	return nil
}

// has is a condition for awaitRecords: a record that is event for each id.
func has(event stypes.OperationType, ids ...string) func([]stypes.Record) bool {
	return func(recs []stypes.Record) bool {
		for _, id := range ids {
			if find(recs, event, id) == nil {
				return false
			}
		}
		return true
	}
}
