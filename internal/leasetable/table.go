package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/internal/awserr"
	"github.com/ttl-archiver/archiver/internal/backoff"
)

// leaseTable is the lease table's I/O, shared by the store's roles (the
// checkpoints, the leases and the sweeper's locks): the client (with the
// store's own retries, the SDK's turned off), reading rows, the fenced
// conditional write, the retry policy and the metrics, and what this worker
// observed of each item. It holds no lease: whether this worker may write
// is for the caller to know (see leases).
type leaseTable struct {
	client  DynamoAPI // ownRetries around DynamoOptions.Client
	table   string
	worker  string
	leaseD  time.Duration
	now     func() time.Time
	log     *zap.Logger
	metrics *leaseMetrics

	// seenMu guards seen and nothing else. It is a leaf: nothing is
	// called and no other lock is taken while it is held.
	seenMu sync.Mutex
	seen   map[leaseKey]seenVersion
}

func (t *leaseTable) ensureTable(ctx context.Context, create bool) error {
	out, err := t.client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(t.table)})
	var nf *types.ResourceNotFoundException
	switch {
	case err == nil:
		if err := checkSchema(out.Table); err != nil {
			return fmt.Errorf("checkpoint: table %q: %w", t.table, err)
		}
		if out.Table.TableStatus == types.TableStatusActive {
			return nil
		}
	case errors.As(err, &nf):
		if !create {
			return fmt.Errorf("checkpoint: lease table %q does not exist (use create=true to create it): %w", t.table, err)
		}
		_, err := t.client.CreateTable(ctx, &dynamodb.CreateTableInput{
			TableName:   aws.String(t.table),
			BillingMode: types.BillingModePayPerRequest,
			AttributeDefinitions: []types.AttributeDefinition{
				{AttributeName: aws.String(attrStream), AttributeType: types.ScalarAttributeTypeS},
				{AttributeName: aws.String(attrShard), AttributeType: types.ScalarAttributeTypeS},
			},
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(attrStream), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(attrShard), KeyType: types.KeyTypeRange},
			},
		})
		var inUse *types.ResourceInUseException
		if err != nil && !errors.As(err, &inUse) { // another worker created it first
			return fmt.Errorf("checkpoint: create lease table %q: %w", t.table, err)
		}
		t.log.Info("created lease table")
	default:
		return fmt.Errorf("checkpoint: describe lease table %q: %w", t.table, err)
	}
	// Wait for ACTIVE.
	wait := backoff.Policy{Min: 50 * time.Millisecond, Max: 2 * time.Second}
	for n := 0; ; n++ {
		out, err := t.client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(t.table)})
		if err == nil && out.Table != nil && out.Table.TableStatus == types.TableStatusActive {
			if err := checkSchema(out.Table); err != nil {
				return fmt.Errorf("checkpoint: table %q: %w", t.table, err)
			}
			return nil
		}
		if err != nil && !errors.As(err, &nf) && !awserr.IsRetryable(err) {
			return fmt.Errorf("checkpoint: describe lease table %q: %w", t.table, err)
		}
		if !backoff.Sleep(ctx, wait.Step(n)) {
			return fmt.Errorf("checkpoint: waiting for lease table %q to become ACTIVE: %w", t.table, ctx.Err())
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
	if hash != attrStream || rng != attrShard {
		return fmt.Errorf("key schema is (%q, %q), want partition key %q and sort key %q: not a lease table", hash, rng, attrStream, attrShard)
	}
	return nil
}

// fencedUpdate applies the update expression upd to k's item, conditional
// on this worker still owning it at counter (and on extra, unless empty);
// it sets :me and :c in vals. Throttling is retried until ctx ends. The
// answer holds the item as updated; when the condition failed, the error's
// ConditionalCheckFailedException holds it as it was.
func (t *leaseTable) fencedUpdate(ctx context.Context, k leaseKey, counter int64, upd, extra string, vals map[string]types.AttributeValue) (*dynamodb.UpdateItemOutput, error) {
	vals[":me"] = &types.AttributeValueMemberS{Value: t.worker}
	vals[":c"] = num(counter)
	cond := attrOwner + " = :me AND " + attrCounter + " = :c"
	if extra != "" {
		cond += " AND (" + extra + ")"
	}
	var out *dynamodb.UpdateItemOutput
	err := t.retry(ctx, func(ctx context.Context) error {
		var err error
		out, err = t.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                           aws.String(t.table),
			Key:                                 itemKey(k.stream, k.shard),
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

// getRow reads k's item (consistent read; throttling retried until ctx
// ends); a missing item is a row that does not exist.
func (t *leaseTable) getRow(ctx context.Context, k leaseKey) (row, error) {
	var out *dynamodb.GetItemOutput
	err := t.retry(ctx, func(ctx context.Context) error {
		var err error
		out, err = t.client.GetItem(ctx, &dynamodb.GetItemInput{
			TableName: aws.String(t.table), Key: itemKey(k.stream, k.shard), ConsistentRead: aws.Bool(true),
		})
		return err
	})
	if err != nil {
		return row{}, fmt.Errorf("checkpoint: read %s %s in table %s: %w", k.stream, k.shard, t.table, err)
	}
	r, err := decodeRow(out.Item)
	if err != nil {
		return row{}, fmt.Errorf("checkpoint: table %s, %s %s: bad item: %w", t.table, k.stream, k.shard, err)
	}
	t.seenMu.Lock()
	t.observe(k, &r, t.now())
	t.seenMu.Unlock()
	return r, nil
}
