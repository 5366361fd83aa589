package leasetable

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/internal/awserr"
	"github.com/ttl-archiver/archiver/internal/backoff"
)

// Config configures [Open].
type Config struct {
	// Client talks to DynamoDB; the table turns the SDK's retries off
	// for its calls and makes its own (see Retry).
	Client DynamoAPI
	// Name is the table's name.
	Name string
	// Namespace, when set, prefixes every partition key the table's users
	// name with NamespacePrefix(Namespace), so that deployments with
	// different namespaces share one table without seeing each other's
	// checkpoints, leases, heartbeats or sweeper items. "" (the default):
	// the keys as they always were. See CheckNamespace.
	Namespace string
	// Create creates the table (PAY_PER_REQUEST) when it does not exist.
	Create bool
	// Worker names this worker in the items it writes.
	Worker string
	// LeaseDuration is how long another worker's lease lasts, from when
	// this worker first saw its current version (see Row.Expired).
	LeaseDuration time.Duration
	// Now is this worker's clock.
	Now func() time.Time
	// Logger receives the table's events.
	Logger *zap.Logger
	// Retries counts the requests retried after throttling or a
	// transient error.
	Retries prometheus.Counter
}

// Table is the lease table's I/O, shared by the table's users (the
// checkpoints, the leases and the sweeper's locks): the client (with the
// table's own retries, the SDK's turned off), reading rows, the fenced
// conditional write, the retry policy, and what this worker observed of
// each item. It holds no lease: whether this worker may write is for the
// caller to know (see [Fence]).
type Table struct {
	Client DynamoAPI // ownRetries around Config.Client, namespaced with Config.Namespace
	Name   string
	Worker string
	LeaseD time.Duration
	Now    func() time.Time
	Log    *zap.Logger

	retries prometheus.Counter

	// seenMu guards seen and nothing else. It is a leaf: nothing is
	// called and no other lock is taken while it is held.
	seenMu sync.Mutex
	seen   map[Key]seenVersion
}

// Open opens (and with Create, creates) the table and waits until it is
// ACTIVE; a table of another key schema is refused.
func Open(ctx context.Context, c Config) (*Table, error) {
	if err := CheckNamespace(c.Namespace); err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	var client DynamoAPI = ownRetries{c.Client}
	if c.Namespace != "" {
		client = namespaced{c: client, prefix: NamespacePrefix(c.Namespace)}
	}
	t := &Table{
		Client: client, Name: c.Name, Worker: c.Worker, LeaseD: c.LeaseDuration,
		Now: c.Now, Log: c.Logger, retries: c.Retries, seen: map[Key]seenVersion{},
	}
	if err := t.ensure(ctx, c.Create); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *Table) ensure(ctx context.Context, create bool) error {
	out, err := t.Client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(t.Name)})
	var nf *types.ResourceNotFoundException
	switch {
	case err == nil:
		if err := checkSchema(out.Table); err != nil {
			return fmt.Errorf("checkpoint: table %q: %w", t.Name, err)
		}
		if out.Table.TableStatus == types.TableStatusActive {
			return nil
		}
	case errors.As(err, &nf):
		if !create {
			return fmt.Errorf("checkpoint: lease table %q does not exist (use create=true to create it): %w", t.Name, err)
		}
		_, err := t.Client.CreateTable(ctx, &dynamodb.CreateTableInput{
			TableName:   aws.String(t.Name),
			BillingMode: types.BillingModePayPerRequest,
			AttributeDefinitions: []types.AttributeDefinition{
				{AttributeName: aws.String(AttrStream), AttributeType: types.ScalarAttributeTypeS},
				{AttributeName: aws.String(AttrShard), AttributeType: types.ScalarAttributeTypeS},
			},
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(AttrStream), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(AttrShard), KeyType: types.KeyTypeRange},
			},
		})
		var inUse *types.ResourceInUseException
		if err != nil && !errors.As(err, &inUse) { // another worker created it first
			return fmt.Errorf("checkpoint: create lease table %q: %w", t.Name, err)
		}
		t.Log.Info("created lease table")
	default:
		return fmt.Errorf("checkpoint: describe lease table %q: %w", t.Name, err)
	}
	// Wait for ACTIVE.
	wait := backoff.Policy{Min: 50 * time.Millisecond, Max: 2 * time.Second}
	for n := 0; ; n++ {
		out, err := t.Client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(t.Name)})
		if err == nil && out.Table != nil && out.Table.TableStatus == types.TableStatusActive {
			if err := checkSchema(out.Table); err != nil {
				return fmt.Errorf("checkpoint: table %q: %w", t.Name, err)
			}
			return nil
		}
		if err != nil && !errors.As(err, &nf) && !awserr.IsRetryable(err) {
			return fmt.Errorf("checkpoint: describe lease table %q: %w", t.Name, err)
		}
		if !backoff.Sleep(ctx, wait.Step(n)) {
			return fmt.Errorf("checkpoint: waiting for lease table %q to become ACTIVE: %w", t.Name, ctx.Err())
		}
	}
}

func checkSchema(t *types.TableDescription) error {
	if t == nil {
		return errors.New("DescribeTable returned no table description")
	}
	var hash, rng string
	for _, k := range t.KeySchema {
		switch k.KeyType {
		case types.KeyTypeHash:
			hash = aws.ToString(k.AttributeName)
		case types.KeyTypeRange:
			rng = aws.ToString(k.AttributeName)
		}
	}
	if hash != AttrStream || rng != AttrShard {
		return fmt.Errorf("key schema is (%q, %q), want partition key %q and sort key %q: not a lease table", hash, rng, AttrStream, AttrShard)
	}
	return nil
}

// FencedUpdate applies the update expression upd to k's item, conditional
// on this worker still owning it at counter (and on extra, unless empty);
// it sets :me and :c in vals. Throttling is retried until ctx ends. The
// answer holds the item as updated; when the condition failed, the error's
// ConditionalCheckFailedException holds it as it was.
func (t *Table) FencedUpdate(ctx context.Context, k Key, counter int64, upd, extra string, vals map[string]types.AttributeValue) (*dynamodb.UpdateItemOutput, error) {
	vals[":me"] = &types.AttributeValueMemberS{Value: t.Worker}
	vals[":c"] = Num(counter)
	cond := AttrOwner + " = :me AND " + AttrCounter + " = :c"
	if extra != "" {
		cond += " AND (" + extra + ")"
	}
	var out *dynamodb.UpdateItemOutput
	err := t.Retry(ctx, func(ctx context.Context) error {
		var err error
		out, err = t.Client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                           aws.String(t.Name),
			Key:                                 ItemKey(k.Stream, k.Shard),
			UpdateExpression:                    aws.String(upd),
			ConditionExpression:                 aws.String(cond),
			ExpressionAttributeValues:           vals,
			ReturnValues:                        types.ReturnValueAllNew,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
		return err
	})
	return out, err
}

// GetRow reads k's item (consistent read; throttling retried until ctx
// ends); a missing item is a row that does not exist.
func (t *Table) GetRow(ctx context.Context, k Key) (Row, error) {
	var out *dynamodb.GetItemOutput
	err := t.Retry(ctx, func(ctx context.Context) error {
		var err error
		out, err = t.Client.GetItem(ctx, &dynamodb.GetItemInput{
			TableName: aws.String(t.Name), Key: ItemKey(k.Stream, k.Shard), ConsistentRead: aws.Bool(true),
		})
		return err
	})
	if err != nil {
		return Row{}, fmt.Errorf("checkpoint: read %s %s in table %s: %w", k.Stream, k.Shard, t.Name, err)
	}
	r, err := DecodeRow(out.Item)
	if err != nil {
		return Row{}, fmt.Errorf("checkpoint: table %s, %s %s: bad item: %w", t.Name, k.Stream, k.Shard, err)
	}
	t.seenMu.Lock()
	t.observe(k, &r, t.Now())
	t.seenMu.Unlock()
	return r, nil
}
