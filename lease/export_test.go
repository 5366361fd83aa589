package checkpoint

import (
	"context"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go"
)

// Test-only access for the tests of this package: a store they can kill.

// errCrashed is what every call of a killed worker's client returns. It is
// a client fault, so the store gives up at once rather than retrying.
var errCrashed = &smithy.GenericAPIError{Code: "TestCrashed",
	Message: "checkpoint: lease store crashed (test)", Fault: smithy.FaultClient}

// Killable wraps a DynamoDB client so that the store opened on it can be
// killed with Crash.
func Killable(c DynamoAPI) DynamoAPI { return &killable{c: c} }

// killable is a DynamoAPI that a killed process stops: once dead, every
// call fails without reaching the table, so nothing more is written.
type killable struct {
	c    DynamoAPI
	dead atomic.Bool
}

func (k *killable) CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, fns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	if k.dead.Load() {
		return nil, errCrashed
	}
	return k.c.CreateTable(ctx, in, fns...)
}

func (k *killable) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, fns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	if k.dead.Load() {
		return nil, errCrashed
	}
	return k.c.DescribeTable(ctx, in, fns...)
}

func (k *killable) GetItem(ctx context.Context, in *dynamodb.GetItemInput, fns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if k.dead.Load() {
		return nil, errCrashed
	}
	return k.c.GetItem(ctx, in, fns...)
}

func (k *killable) PutItem(ctx context.Context, in *dynamodb.PutItemInput, fns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if k.dead.Load() {
		return nil, errCrashed
	}
	return k.c.PutItem(ctx, in, fns...)
}

func (k *killable) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, fns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if k.dead.Load() {
		return nil, errCrashed
	}
	return k.c.UpdateItem(ctx, in, fns...)
}

func (k *killable) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, fns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	if k.dead.Load() {
		return nil, errCrashed
	}
	return k.c.DeleteItem(ctx, in, fns...)
}

func (k *killable) Query(ctx context.Context, in *dynamodb.QueryInput, fns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	if k.dead.Load() {
		return nil, errCrashed
	}
	return k.c.Query(ctx, in, fns...)
}

// Crash simulates a killed process: renewals and heartbeats stop, nothing
// more is written (Save and Release fail), and every assignment's context
// is cancelled. The store must have been opened on a [Killable] client.
func (s *DynamoStore) Crash() {
	k, ok := s.client.(ownRetries).c.(*killable)
	if !ok {
		panic("checkpoint: Crash needs a store opened on a Killable client")
	}
	k.dead.Store(true)
	s.Close()
}
