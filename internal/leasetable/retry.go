package leasetable

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ttl-archiver/archiver/internal/awserr"
	"github.com/ttl-archiver/archiver/internal/backoff"
)

// ownRetries turns off the SDK's retries for the table's calls: its backoff
// (seconds, growing to 20 s) and retry quota do not fit leases that must be
// renewed within a few seconds. The table's users retry throttling and
// transient errors themselves (Retry) with short backoff, bounded by each
// lease's deadline.
type ownRetries struct{ c DynamoAPI }

func noSDKRetry(fns []func(*dynamodb.Options)) []func(*dynamodb.Options) {
	return append(fns, func(o *dynamodb.Options) { o.Retryer = aws.NopRetryer{} })
}

func (r ownRetries) CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, fns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	return r.c.CreateTable(ctx, in, noSDKRetry(fns)...)
}

func (r ownRetries) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, fns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	return r.c.DescribeTable(ctx, in, noSDKRetry(fns)...)
}

func (r ownRetries) GetItem(ctx context.Context, in *dynamodb.GetItemInput, fns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return r.c.GetItem(ctx, in, noSDKRetry(fns)...)
}

func (r ownRetries) PutItem(ctx context.Context, in *dynamodb.PutItemInput, fns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return r.c.PutItem(ctx, in, noSDKRetry(fns)...)
}

func (r ownRetries) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, fns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return r.c.UpdateItem(ctx, in, noSDKRetry(fns)...)
}

func (r ownRetries) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, fns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return r.c.DeleteItem(ctx, in, noSDKRetry(fns)...)
}

func (r ownRetries) Query(ctx context.Context, in *dynamodb.QueryInput, fns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	return r.c.Query(ctx, in, noSDKRetry(fns)...)
}

// Retry runs op until it succeeds, fails for good, or ctx ends; what
// [awserr.IsRetryable] retries (throttling, faults of the service, no
// answer) is retried with capped, jittered exponential backoff.
func (t *Table) Retry(ctx context.Context, op func(context.Context) error) error {
	wait := backoff.Policy{Min: 25 * time.Millisecond, Max: time.Second}
	for n := 0; ; n++ {
		err := op(ctx)
		if err == nil || !awserr.IsRetryable(err) {
			return err
		}
		t.retries.Inc()
		if !backoff.Sleep(ctx, wait.Delay(n)) {
			return fmt.Errorf("%w (gave up: %w)", err, ctx.Err())
		}
	}
}
