package engine_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/engine"
)

func streamEnv(t *testing.T, o engine.Options, view types.StreamViewType) (*env, *string) {
	e := newEnv(t, o)
	d := e.createTable("str1", "N", func(in *dynamodb.CreateTableInput) {
		in.StreamSpecification = &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: view}
	})
	return e, d.LatestStreamArn
}

func (e *env) shards(arn *string) []stypes.Shard {
	e.t.Helper()
	var shards []stypes.Shard
	in := &dynamodbstreams.DescribeStreamInput{StreamArn: arn, Limit: aws.Int32(2)}
	for {
		out, err := e.st.DescribeStream(e.ctx, in)
		if err != nil {
			e.t.Fatal(err)
		}
		shards = append(shards, out.StreamDescription.Shards...)
		if out.StreamDescription.LastEvaluatedShardId == nil {
			return shards
		}
		in.ExclusiveStartShardId = out.StreamDescription.LastEvaluatedShardId
	}
}

func TestStreamEndToEnd(t *testing.T) {
	e, arn := streamEnv(t, engine.Options{StreamShards: 2}, types.StreamViewTypeNewAndOldImages)
	ls, err := e.st.ListStreams(e.ctx, &dynamodbstreams.ListStreamsInput{TableName: aws.String("str1")})
	if err != nil || len(ls.Streams) != 1 || aws.ToString(ls.Streams[0].StreamArn) != aws.ToString(arn) {
		t.Fatalf("ListStreams: %v %+v", err, ls)
	}
	for i := 0; i < 30; i++ {
		e.put("str1", item{"pk": S(fmt.Sprint(i % 5)), "sk": N(fmt.Sprint(i)), "v": N("1")})
	}
	if _, err := e.db.UpdateItem(e.ctx, &dynamodb.UpdateItemInput{TableName: aws.String("str1"), Key: item{"pk": S("0"), "sk": N("0")},
		UpdateExpression: aws.String("SET v = :v"), ExpressionAttributeValues: item{":v": N("2")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.DeleteItem(e.ctx, &dynamodb.DeleteItemInput{TableName: aws.String("str1"), Key: item{"pk": S("0"), "sk": N("0")}}); err != nil {
		t.Fatal(err)
	}
	recs := e.readAll("str1")
	if len(recs) != 32 {
		t.Fatalf("%d records, want 32", len(recs))
	}
	// Item (0,0): INSERT, MODIFY, REMOVE in order, with images.
	var seq []string
	for _, r := range recs {
		if r.Dynamodb.Keys["pk"].(*stypes.AttributeValueMemberS).Value == "0" && r.Dynamodb.Keys["sk"].(*stypes.AttributeValueMemberN).Value == "0" {
			seq = append(seq, string(r.EventName))
			if r.EventName == stypes.OperationTypeModify && (r.Dynamodb.OldImage == nil || r.Dynamodb.NewImage == nil) {
				t.Fatalf("MODIFY images: %+v", r.Dynamodb)
			}
		}
		if aws.ToString(r.EventSource) != "aws:dynamodb" || aws.ToString(r.AwsRegion) != "us-east-1" {
			t.Fatalf("record source %+v", r)
		}
	}
	if fmt.Sprint(seq) != "[INSERT MODIFY REMOVE]" {
		t.Fatalf("item history %v", seq)
	}

	// Rollover: every open shard closes and gets a child.
	before := e.shards(arn)
	if err := e.eng.ForceRollover("str1"); err != nil {
		t.Fatal(err)
	}
	after := e.shards(arn)
	if len(after) != 2*len(before) {
		t.Fatalf("shards before %d after rollover %d", len(before), len(after))
	}
	parents := map[string]bool{}
	for _, s := range before {
		parents[aws.ToString(s.ShardId)] = true
	}
	children := 0
	for _, s := range after {
		if parents[aws.ToString(s.ParentShardId)] {
			children++
		}
	}
	if children != len(before) {
		t.Fatalf("%d children of %d parents", children, len(before))
	}
	// Split an open shard.
	var open string
	for _, s := range after {
		if s.SequenceNumberRange.EndingSequenceNumber == nil {
			open = aws.ToString(s.ShardId)
		}
	}
	if err := e.eng.SplitShard("str1", open); err != nil {
		t.Fatal(err)
	}
	if n := len(e.shards(arn)); n != len(after)+2 {
		t.Fatalf("after split %d shards, want %d", n, len(after)+2)
	}
	for i := 0; i < 10; i++ {
		e.put("str1", item{"pk": S(fmt.Sprint(i)), "sk": N("100")})
	}
	if n := len(e.readAll("str1")); n != 42 {
		t.Fatalf("after rollover and split: %d records, want 42", n)
	}

	// Faults: throttling, iterator expiry, trimming.
	it, err := e.st.GetShardIterator(e.ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: arn, ShardId: before[0].ShardId, ShardIteratorType: stypes.ShardIteratorTypeTrimHorizon})
	if err != nil {
		t.Fatal(err)
	}
	e.eng.ThrottleGetRecords(1)
	if _, err := e.st.GetRecords(e.ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it.ShardIterator}); errCode(err) != "LimitExceededException" {
		t.Fatalf("throttled GetRecords: %v", err)
	}
	page, err := e.st.GetRecords(e.ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it.ShardIterator, Limit: aws.Int32(2)})
	if err != nil || len(page.Records) != 2 || page.NextShardIterator == nil {
		t.Fatalf("paged GetRecords: %v %d", err, len(page.Records))
	}
	e.eng.ExpireIterators()
	if _, err := e.st.GetRecords(e.ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: page.NextShardIterator}); errCode(err) != "ExpiredIteratorException" {
		t.Fatalf("expired iterator: %v", err)
	}
	e.clock.Advance(time.Minute)
	if err := e.eng.TrimStream("str1", e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	_, err = e.st.GetShardIterator(e.ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: arn, ShardId: before[0].ShardId,
		ShardIteratorType: stypes.ShardIteratorTypeAtSequenceNumber, SequenceNumber: recs[0].Dynamodb.SequenceNumber})
	if err == nil {
		t.Fatal("iterator at a trimmed sequence number was handed out")
	}
	var ee *engine.Error
	if err := e.eng.ForceRollover("nope"); !asErr(err, &ee) || ee.Code != "ResourceNotFoundException" {
		t.Fatalf("rollover of a missing table: %v", err)
	}
}

func TestStreamDisableKeepsRecords(t *testing.T) {
	e, arn := streamEnv(t, engine.Options{}, types.StreamViewTypeKeysOnly)
	e.put("str1", item{"pk": S("a"), "sk": N("1"), "v": S("x")})
	if _, err := e.db.UpdateTable(e.ctx, &dynamodb.UpdateTableInput{TableName: aws.String("str1"),
		StreamSpecification: &types.StreamSpecification{StreamEnabled: aws.Bool(false)}}); err != nil {
		t.Fatal(err)
	}
	e.put("str1", item{"pk": S("b"), "sk": N("1")})
	d, err := e.st.DescribeStream(e.ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: arn})
	if err != nil || d.StreamDescription.StreamStatus != stypes.StreamStatusDisabled {
		t.Fatalf("disabled stream: %v %+v", err, d)
	}
	recs := e.readAll("str1")
	if len(recs) != 1 || recs[0].Dynamodb.NewImage != nil {
		t.Fatalf("records of the disabled KEYS_ONLY stream: %+v", recs)
	}
}

// TestStreamCommitOrder: concurrent updates of one item enter the stream in
// commit order, so the counter in the new images counts up without gaps.
func TestStreamCommitOrder(t *testing.T) {
	e, _ := streamEnv(t, engine.Options{StreamShards: 3}, types.StreamViewTypeNewImage)
	const workers, each = 8, 25
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		go func() {
			for i := 0; i < each; i++ {
				_, err := e.db.UpdateItem(e.ctx, &dynamodb.UpdateItemInput{TableName: aws.String("str1"), Key: item{"pk": S("hot"), "sk": N("1")},
					UpdateExpression: aws.String("ADD n :one"), ExpressionAttributeValues: item{":one": N("1")}})
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for w := 0; w < workers; w++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	recs := e.readAll("str1")
	if len(recs) != workers*each {
		t.Fatalf("%d records", len(recs))
	}
	for i, r := range recs {
		if got := r.Dynamodb.NewImage["n"].(*stypes.AttributeValueMemberN).Value; got != fmt.Sprint(i+1) {
			t.Fatalf("record %d has n=%s", i, got)
		}
	}
}
