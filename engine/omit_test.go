package engine_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/engine"
)

// omitEnv is a stream of two shards rolled over once: two closed parents,
// each with records, and their two open children. It returns the stream
// ARN and the shards, parents first.
func omitEnv(t *testing.T) (*env, *string, []stypes.Shard) {
	t.Helper()
	e, arn := streamEnv(t, engine.Options{StreamShards: 2}, types.StreamViewTypeNewAndOldImages)
	for i := 0; i < 20; i++ {
		e.put("str1", item{"pk": S(fmt.Sprint(i)), "sk": N("1")})
	}
	if err := e.eng.ForceRollover("str1"); err != nil {
		t.Fatal(err)
	}
	shards := e.shards(arn)
	if len(shards) != 4 || shards[0].SequenceNumberRange.EndingSequenceNumber == nil || shards[2].ParentShardId == nil {
		t.Fatalf("want two closed parents and two children, got %+v", shards)
	}
	return e, arn, shards
}

// listed reports whether a full description (paged two shards at a time)
// lists the shard.
func (e *env) listed(arn *string, id string) bool {
	e.t.Helper()
	return slices.ContainsFunc(e.shards(arn), func(s stypes.Shard) bool { return aws.ToString(s.ShardId) == id })
}

// childrenOf lists the shards a CHILD_SHARDS description of parent returns.
func (e *env) childrenOf(arn *string, parent string) []string {
	e.t.Helper()
	out, err := e.st.DescribeStream(e.ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: arn,
		ShardFilter: &stypes.ShardFilter{Type: stypes.ShardFilterTypeChildShards, ShardId: aws.String(parent)}})
	if err != nil {
		e.t.Fatal(err)
	}
	var ids []string
	for _, s := range out.StreamDescription.Shards {
		ids = append(ids, aws.ToString(s.ShardId))
	}
	return ids
}

// TestOmitShardFromDescribe: the next N descriptions that would list the
// shard leave it out, then it is listed again; descriptions that would not
// list it (another shard's children) leave the count alone.
func TestOmitShardFromDescribe(t *testing.T) {
	tests := []struct {
		name   string
		target int // index into the shards: 0, 1 parents, 2, 3 children
		times  []int
		// before runs after the omission was set, before the full
		// descriptions are counted.
		before func(e *env, arn *string, shards []stypes.Shard)
		want   []bool // listed by each following full description
	}{
		{name: "closed parent once", target: 0, times: []int{1}, want: []bool{false, true, true}},
		{name: "second page", target: 3, times: []int{1}, want: []bool{false, true}},
		{name: "three times", target: 1, times: []int{3}, want: []bool{false, false, false, true}},
		{name: "cancelled", target: 0, times: []int{2, 0}, want: []bool{true, true}},
		{name: "set again", target: 0, times: []int{5, 1}, want: []bool{false, true}},
		{
			name: "filtered description of another parent", target: 2, times: []int{1},
			before: func(e *env, arn *string, shards []stypes.Shard) {
				if got := e.childrenOf(arn, aws.ToString(shards[3].ParentShardId)); !slices.Equal(got, []string{aws.ToString(shards[3].ShardId)}) {
					e.t.Errorf("children of the other parent: %v", got)
				}
			},
			want: []bool{false, true},
		},
		{
			name: "filtered description of its parent", target: 2, times: []int{1},
			before: func(e *env, arn *string, shards []stypes.Shard) {
				if got := e.childrenOf(arn, aws.ToString(shards[2].ParentShardId)); len(got) != 0 {
					e.t.Errorf("children of the omitted shard's parent: %v, want none (omitted)", got)
				}
			},
			want: []bool{true},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, arn, shards := omitEnv(t)
			id := aws.ToString(shards[tc.target].ShardId)
			for _, n := range tc.times {
				if err := e.eng.OmitShardFromDescribe("str1", id, n); err != nil {
					t.Fatalf("OmitShardFromDescribe(%d): %v", n, err)
				}
			}
			if tc.before != nil {
				tc.before(e, arn, shards)
			}
			var got []bool
			for range tc.want {
				got = append(got, e.listed(arn, id))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("listed by the descriptions: %v, want %v", got, tc.want)
			}
		})
	}
}

// TestOmittedShardIsReadable: a shard left out of descriptions still serves
// GetShardIterator and GetRecords to its end.
func TestOmittedShardIsReadable(t *testing.T) {
	e, arn, shards := omitEnv(t)
	parent := shards[0]
	if err := e.eng.OmitShardFromDescribe("str1", aws.ToString(parent.ShardId), 100); err != nil {
		t.Fatal(err)
	}
	if e.listed(arn, aws.ToString(parent.ShardId)) {
		t.Fatalf("omitted shard listed")
	}
	it, err := e.st.GetShardIterator(e.ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: arn, ShardId: parent.ShardId,
		ShardIteratorType: stypes.ShardIteratorTypeTrimHorizon})
	if err != nil {
		t.Fatalf("GetShardIterator on the omitted shard: %v", err)
	}
	n := 0
	for iter := it.ShardIterator; iter != nil; {
		out, err := e.st.GetRecords(e.ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter})
		if err != nil {
			t.Fatalf("GetRecords on the omitted shard: %v", err)
		}
		n += len(out.Records)
		iter = out.NextShardIterator
	}
	if n == 0 {
		t.Errorf("read no record of the omitted closed shard, which holds some")
	}
}

// TestOmitShardFromDescribeErrors: unknown tables and shards are errors.
func TestOmitShardFromDescribeErrors(t *testing.T) {
	e, _, _ := omitEnv(t)
	var ee *engine.Error
	if err := e.eng.OmitShardFromDescribe("nope", "shardId-00000000000000000000-00000000", 1); !errors.As(err, &ee) || ee.Code != "ResourceNotFoundException" {
		t.Errorf("unknown table: %v, want ResourceNotFoundException", err)
	}
	if err := e.eng.OmitShardFromDescribe("str1", "shardId-00000000000000000000-00000000", 1); err == nil {
		t.Errorf("unknown shard: no error")
	}
}
