// Package leasetest is for tests of the lease table's users (lease,
// sweep/state, consumer): a lease table client the test can kill, and a
// raw read of the table's items.
package leasetest

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go"

	"github.com/ttl-archiver/archiver/internal/leasetable"
)

// errKilled is what every call of a killed worker's client returns. It is
// a client fault, so the store gives up at once rather than retrying.
var errKilled = &smithy.GenericAPIError{Code: "TestKilled",
	Message: "worker killed (test): its lease table client is cut", Fault: smithy.FaultClient}

// Killable wraps a DynamoDB client so that the lease store opened on it
// can be killed (Kill), as a kill -9 would: once dead, every call fails
// without reaching the table, so the worker's renewals, heartbeats,
// checkpoints and releases stop there.
func Killable(c leasetable.DynamoAPI) *Client { return &Client{c: c} }

// Client is a lease table client a test can kill.
type Client struct {
	c    leasetable.DynamoAPI
	dead atomic.Bool
}

// Kill cuts the client: no call reaches the table any more.
func (k *Client) Kill() { k.dead.Store(true) }

func (k *Client) CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, fns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	if k.dead.Load() {
		return nil, errKilled
	}
	return k.c.CreateTable(ctx, in, fns...)
}

func (k *Client) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, fns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	if k.dead.Load() {
		return nil, errKilled
	}
	return k.c.DescribeTable(ctx, in, fns...)
}

func (k *Client) GetItem(ctx context.Context, in *dynamodb.GetItemInput, fns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if k.dead.Load() {
		return nil, errKilled
	}
	return k.c.GetItem(ctx, in, fns...)
}

func (k *Client) PutItem(ctx context.Context, in *dynamodb.PutItemInput, fns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if k.dead.Load() {
		return nil, errKilled
	}
	return k.c.PutItem(ctx, in, fns...)
}

func (k *Client) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, fns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if k.dead.Load() {
		return nil, errKilled
	}
	return k.c.UpdateItem(ctx, in, fns...)
}

func (k *Client) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, fns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	if k.dead.Load() {
		return nil, errKilled
	}
	return k.c.DeleteItem(ctx, in, fns...)
}

func (k *Client) Query(ctx context.Context, in *dynamodb.QueryInput, fns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	if k.dead.Load() {
		return nil, errKilled
	}
	return k.c.Query(ctx, in, fns...)
}

// Row reads the item (stream, shard) of the lease table as it is stored
// (a consistent read through c, not observed by any worker), failing t
// on an error.
func Row(t testing.TB, c leasetable.DynamoAPI, table, stream, shard string) leasetable.Row {
	t.Helper()
	out, err := c.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(table), Key: leasetable.ItemKey(stream, shard), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		t.Fatalf("GetItem: %v", err)
	}
	r, err := leasetable.DecodeRow(out.Item)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
