package conformance

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/internal/awserr"
	"github.com/ttl-archiver/archiver/internal/backoff"
)

// streamChecks are the checks of DynamoDB Streams.
func streamChecks() []Check {
	return []Check{
		{Name: "stream-real-changes", Run: checkRealChanges,
			Asserts: "a write that changes nothing makes no stream record: the same PutItem again (a set reordered, 1 written 1.0), UpdateItem to the value held, DeleteItem of no item, a failed condition"},
		{Name: "stream-lineage", Run: checkLineage,
			Asserts: "a closed shard has an EndingSequenceNumber, a child names it as ParentShardId and starts above its end, and a key's records go on in the child, in order"},
		{Name: "stream-shard-filter", Run: checkShardFilter,
			Asserts: "DescribeStream with ShardFilter CHILD_SHARDS lists exactly the shard's children: none of an open shard"},
		{Name: "stream-iterator-expiry", Run: checkIteratorExpiry,
			Asserts: "a shard iterator is good for 15 minutes; after that GetRecords answers ExpiredIteratorException"},
		{Name: "stream-trim-horizon", Run: checkTrimHorizon,
			Asserts: "TRIM_HORIZON starts at the oldest record, AT_ and AFTER_SEQUENCE_NUMBER at and after one, LATEST after the newest; a trimmed position is TrimmedDataAccessException"},
	}
}

// noOp is one step of stream-real-changes: an item is written, then
// written again in a way that changes nothing (or, for real, changes it).
type noOp struct {
	id, what string
	first    item // written first (nil: nothing)
	again    func(ctx context.Context, db *dynamodb.Client, table string) error
	want     string // the item's records: "INSERT" or "INSERT MODIFY"
}

func noOps() []noOp {
	it := func(id string, a types.AttributeValue, set ...string) item {
		return item{"pk": str(id), "sk": str("0"), "a": a, "set": &types.AttributeValueMemberSS{Value: set}}
	}
	putAgain := func(again item) func(context.Context, *dynamodb.Client, string) error {
		return func(ctx context.Context, db *dynamodb.Client, table string) error { return put(ctx, db, table, again) }
	}
	setA := func(id, v string) func(context.Context, *dynamodb.Client, string) error {
		return func(ctx context.Context, db *dynamodb.Client, table string) error {
			_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &table, Key: key(id),
				UpdateExpression: aws.String("SET a = :v"), ExpressionAttributeValues: item{":v": &types.AttributeValueMemberN{Value: v}}})
			return wrap("UpdateItem", err)
		}
	}
	return []noOp{
		{id: "same-put", what: "the same PutItem again", first: it("same-put", num(1), "p", "q"), again: putAgain(it("same-put", num(1), "p", "q")), want: "INSERT"},
		{id: "same-value", what: "PutItem of the item with its set reordered and 1 written 1.0",
			first: it("same-value", num(1), "p", "q"), again: putAgain(it("same-value", &types.AttributeValueMemberN{Value: "1.0"}, "q", "p")), want: "INSERT"},
		{id: "same-update", what: "UpdateItem SET a to the value it has", first: it("same-update", num(1), "p"), again: setA("same-update", "1"), want: "INSERT"},
		{id: "no-item", what: "DeleteItem of a key that holds no item", again: func(ctx context.Context, db *dynamodb.Client, table string) error {
			_, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &table, Key: key("no-item")})
			return wrap("DeleteItem", err)
		}, want: ""},
		{id: "failed-condition", what: "a PutItem whose condition fails", first: it("failed-condition", num(1), "p"),
			again: func(ctx context.Context, db *dynamodb.Client, table string) error {
				_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: it("failed-condition", num(2), "p"),
					ConditionExpression: aws.String("attribute_not_exists(pk)")})
				if awserr.IsConditionFailed(err) {
					return nil
				}
				return fmt.Errorf("PutItem with a condition that must fail: %v, want ConditionalCheckFailedException", orNone(err))
			}, want: "INSERT"},
		{id: "real", what: "UpdateItem SET a = 2, a real change (the control)", first: it("real", num(1), "p"), again: setA("real", "2"), want: "INSERT MODIFY"},
	}
}

func checkRealChanges(ctx context.Context, e *Env) Outcome {
	table, arn, err := e.table(ctx, e.DynamoDB, tableSpec{stream: types.StreamViewTypeNewAndOldImages})
	if err != nil {
		return failed("creating the table", err)
	}
	steps := noOps()
	var inserted []string
	for _, s := range steps {
		if s.first != nil {
			if err := put(ctx, e.DynamoDB, table, s.first); err != nil {
				return failed("writing", err)
			}
			inserted = append(inserted, s.id)
		}
		if err := s.again(ctx, e.DynamoDB, table); err != nil {
			return failed(s.what, err)
		}
	}
	recs, err := e.awaitRecords(ctx, e.Streams, arn, "every INSERT and the control's MODIFY", func(recs []stypes.Record) bool {
		return has(stypes.OperationTypeInsert, inserted...)(recs) && has(stypes.OperationTypeModify, "real")(recs)
	})
	if err != nil {
		return failed("reading the stream", err)
	}
	var wrong []string
	for _, s := range steps {
		var got []string
		for _, r := range recs {
			if id := recordID(r); strings.HasSuffix(id, " "+s.id) {
				got = append(got, string(r.EventName))
			}
		}
		if g := strings.Join(got, " "); g != s.want {
			wrong = append(wrong, fmt.Sprintf("%s: records %q, want %q", s.what, g, s.want))
		}
	}
	if len(wrong) > 0 {
		return failf("%s", strings.Join(wrong, "; "))
	}
	return passf("%d writes that changed nothing made no record; the real change made its MODIFY", len(steps)-1)
}

func checkIteratorExpiry(ctx context.Context, e *Env) Outcome {
	if e.Control == nil && !e.Slow {
		return skipf("an iterator lives 15 minutes: --slow waits that long in real time, --engine-control moves the engine's clock")
	}
	_, arn, err := e.table(ctx, e.DynamoDB, tableSpec{stream: types.StreamViewTypeKeysOnly})
	if err != nil {
		return failed("creating the table", err)
	}
	list, err := shards(ctx, e.Streams, arn, nil)
	if err != nil || len(list) == 0 {
		return failf("no shard to read: %v", orNone(err))
	}
	shard := aws.ToString(list[0].ShardId)
	var its [2]string
	for i := range its {
		if its[i], err = iterator(ctx, e.Streams, arn, shard, stypes.ShardIteratorTypeTrimHorizon, ""); err != nil {
			return failed("the iterators", err)
		}
	}
	return iteratorLifetime(ctx, e, its)
}

// iteratorLifetime uses the first iterator 14 minutes after it was
// issued, which must work, and the second at 16 minutes (15.5 in real
// time), which must be ExpiredIteratorException.
func iteratorLifetime(ctx context.Context, e *Env, its [2]string) Outcome {
	wait, how := sleep, "waited in real time"
	if e.Control != nil {
		err := e.Control.Advance(ctx, 0)
		if err == errNoManualClock {
			return expireByControl(ctx, e, its[0])
		}
		if err != nil {
			return failed("moving the engine's clock", err)
		}
		wait, how = e.Control.Advance, "moved the engine's clock"
	}
	if err := wait(ctx, 14*time.Minute); err != nil {
		return failed("waiting", err)
	}
	if _, err := e.Streams.GetRecords(ctx, getRecords(its[0])); err != nil {
		return failf("GetRecords with an iterator 14 minutes old: %v, want records (an iterator lives 15 minutes)", short(err))
	}
	later := 2 * time.Minute
	if e.Control == nil {
		later = 90 * time.Second
	}
	if err := wait(ctx, later); err != nil {
		return failed("waiting", err)
	}
	_, err := e.Streams.GetRecords(ctx, getRecords(its[1]))
	if code := awserr.Code(err); code != "ExpiredIteratorException" {
		return failf("GetRecords with an iterator %v old: %v, want ExpiredIteratorException", 14*time.Minute+later, orNone(err))
	}
	return passf("an iterator worked at 14 minutes and was ExpiredIteratorException at %v (%s)", 14*time.Minute+later, how)
}

// expireByControl is iteratorLifetime for an engine on real time: the
// control API expires every iterator, and the check sees that GetRecords
// then answers as DynamoDB does, without measuring the 15 minutes.
func expireByControl(ctx context.Context, e *Env, it string) Outcome {
	if err := e.Control.ExpireIterators(ctx); err != nil {
		return failed("expiring the iterators", err)
	}
	_, err := e.Streams.GetRecords(ctx, getRecords(it))
	if code := awserr.Code(err); code != "ExpiredIteratorException" {
		return failf("GetRecords with an expired iterator: %v, want ExpiredIteratorException", orNone(err))
	}
	return passf("an expired iterator is ExpiredIteratorException (expired through the control API: the engine's clock is real time, so the 15 minutes were not measured)")
}

func getRecords(it string) *dynamodbstreams.GetRecordsInput {
	return &dynamodbstreams.GetRecordsInput{ShardIterator: aws.String(it)}
}

// sleep waits d in real time, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if !backoff.Sleep(ctx, d) {
		return ctx.Err()
	}
	return nil
}

// orNone shows an error, or that there was none.
func orNone(err error) string {
	if err == nil {
		return "no error"
	}
	return short(err).Error()
}
