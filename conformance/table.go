package conformance

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ttl-archiver/archiver/internal/awserr"
)

// tableWait bounds the wait for a table to become ACTIVE (or be deleted):
// seconds on AWS, minutes for a replica, none locally.
const tableWait = 10 * time.Minute

// The attributes of every table of the suite: the key is pk (hash) and sk
// (range), both strings; ttlAttr is the TTL attribute; g keys the global
// secondary index gsiName and l sorts the local one, lsiName.
const (
	ttlAttr = "exp"
	gsiName = "by-g"
	lsiName = "by-l"
)

// item is an item, or a key, of the DynamoDB client's attribute values.
type item = map[string]types.AttributeValue

// tableSpec is what a check's table has besides its key.
type tableSpec struct {
	stream  types.StreamViewType // "": no stream
	ttl     bool                 // TTL enabled on ttlAttr
	indexes bool                 // gsiName and lsiName
}

// table creates a table for the check with db, waits for it to be ACTIVE,
// enables TTL when spec asks, and registers its deletion. It returns the
// table's name and its stream's ARN ("" without a stream). Its errors do
// not name the table (the check's name does, and the lines of two
// endpoints that fail alike then read alike); its deletion's do.
func (e *Env) table(ctx context.Context, db *dynamodb.Client, spec tableSpec) (name, streamARN string, err error) {
	name = e.tableName()
	out, err := db.CreateTable(ctx, createInput(name, spec))
	if err != nil {
		return "", "", fmt.Errorf("CreateTable: %w", err)
	}
	made := name // name, a result, is "" when this returns an error
	e.defer_(func(ctx context.Context) error { return deleteTable(ctx, db, made) })
	if out.TableDescription != nil {
		streamARN = aws.ToString(out.TableDescription.LatestStreamArn)
	}
	desc, err := waitActive(ctx, db, name, tableWait)
	if err != nil {
		return "", "", err
	}
	if streamARN == "" {
		streamARN = aws.ToString(desc.LatestStreamArn)
	}
	if spec.stream != "" && streamARN == "" {
		return "", "", errors.New("the table was created with a stream, but neither CreateTable nor DescribeTable names its LatestStreamArn")
	}
	if spec.ttl {
		_, err := db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: &name,
			TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(ttlAttr), Enabled: aws.Bool(true)}})
		if err != nil {
			return "", "", fmt.Errorf("UpdateTimeToLive: %w", err)
		}
	}
	return name, streamARN, nil
}

// createInput is the CreateTable request of a table of spec.
func createInput(name string, spec tableSpec) *dynamodb.CreateTableInput {
	s := func(n string) types.AttributeDefinition {
		return types.AttributeDefinition{AttributeName: aws.String(n), AttributeType: types.ScalarAttributeTypeS}
	}
	ks := func(n string, t types.KeyType) types.KeySchemaElement {
		return types.KeySchemaElement{AttributeName: aws.String(n), KeyType: t}
	}
	in := &dynamodb.CreateTableInput{TableName: aws.String(name), BillingMode: types.BillingModePayPerRequest,
		KeySchema:            []types.KeySchemaElement{ks("pk", types.KeyTypeHash), ks("sk", types.KeyTypeRange)},
		AttributeDefinitions: []types.AttributeDefinition{s("pk"), s("sk")}}
	if spec.stream != "" {
		in.StreamSpecification = &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: spec.stream}
	}
	if spec.indexes {
		all := &types.Projection{ProjectionType: types.ProjectionTypeAll}
		in.AttributeDefinitions = append(in.AttributeDefinitions, s("g"), s("l"))
		in.GlobalSecondaryIndexes = []types.GlobalSecondaryIndex{{IndexName: aws.String(gsiName),
			KeySchema: []types.KeySchemaElement{ks("g", types.KeyTypeHash)}, Projection: all}}
		in.LocalSecondaryIndexes = []types.LocalSecondaryIndex{{IndexName: aws.String(lsiName),
			KeySchema: []types.KeySchemaElement{ks("pk", types.KeyTypeHash), ks("l", types.KeyTypeRange)}, Projection: all}}
	}
	return in
}

// waitActive waits up to limit until the table and its global indexes
// are ACTIVE.
func waitActive(ctx context.Context, db *dynamodb.Client, name string, limit time.Duration) (*types.TableDescription, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	state := "does not exist"
	for n := 0; ; n++ {
		out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &name})
		if err != nil && ctx.Err() == nil && awserr.Code(err) != "ResourceNotFoundException" {
			return nil, fmt.Errorf("DescribeTable: %w", err)
		}
		if err == nil && active(out.Table) {
			return out.Table, nil
		}
		if err == nil {
			state = "is not ACTIVE"
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("the table %s after %v", state, limit)
		case <-time.After(min(50*time.Millisecond<<min(n, 6), 2*time.Second)):
		}
	}
}

func active(t *types.TableDescription) bool {
	if t == nil || t.TableStatus != types.TableStatusActive {
		return false
	}
	for _, g := range t.GlobalSecondaryIndexes {
		if g.IndexStatus != "" && g.IndexStatus != types.IndexStatusActive {
			return false
		}
	}
	return true
}

// deleteTable deletes a table the check made, retrying while it is busy
// (AWS refuses to delete a table still updating); a table already gone is
// no error.
func deleteTable(ctx context.Context, db *dynamodb.Client, name string) error {
	for {
		_, err := db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: &name})
		switch code := awserr.Code(err); {
		case err == nil, code == "ResourceNotFoundException":
			return nil
		case code != "ResourceInUseException" || ctx.Err() != nil:
			return fmt.Errorf("DeleteTable %s: %w", name, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("DeleteTable %s: %w", name, errors.Join(err, ctx.Err()))
		case <-time.After(time.Second):
		}
	}
}

// str and num are attribute values; key is the key of the item id (every
// check's items have sk "0"), expiring that item with its TTL at epoch
// second at.
func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }
func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}
func key(id string) item                { return item{"pk": str(id), "sk": str("0")} }
func expiring(id string, at int64) item { return item{"pk": str(id), "sk": str("0"), ttlAttr: num(at)} }

// put writes it to table.
func put(ctx context.Context, db *dynamodb.Client, table string, it item) error {
	_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: it})
	if err != nil {
		return fmt.Errorf("PutItem %s: %w", describeKey(it), err)
	}
	return nil
}

// get reads id's item with a consistent read; nil when there is none.
func get(ctx context.Context, db *dynamodb.Client, table, id string) (item, error) {
	out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: key(id), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("GetItem %s: %w", id, err)
	}
	if len(out.Item) == 0 {
		return nil, nil
	}
	return out.Item, nil
}

// describeKey names an item by its pk for a detail.
func describeKey(it item) string {
	if s, ok := it["pk"].(*types.AttributeValueMemberS); ok {
		return s.Value
	}
	return "an item"
}
