package enginetest

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Table describes a table for CreateTable. The zero value (but its Name)
// is a table with a string hash key "pk" and a stream of new and old
// images, without TTL.
type Table struct {
	Name string
	// Hash and Range are the key's attributes (Hash defaults to "pk"; no
	// Range: a hash key only); their types default to S.
	Hash, Range         string
	HashType, RangeType types.ScalarAttributeType
	// Stream is the stream's view type (default NEW_AND_OLD_IMAGES);
	// NoStream creates the table without one.
	Stream   types.StreamViewType
	NoStream bool
	// TTL, when set, enables TTL on this attribute.
	TTL string
	// Indexes are the table's global secondary indexes; Attributes
	// defines their key attributes that the table's key does not.
	Indexes    []types.GlobalSecondaryIndex
	Attributes []types.AttributeDefinition
	// Replicas, when set, make the table a global table (version
	// 2019.11.21): a replica is added in each of these Regions, one
	// UpdateTable ReplicaUpdates Create at a time, after TTL is enabled.
	Replicas []string
}

// TableAPI is what CreateTable needs of a DynamoDB client.
type TableAPI interface {
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
	UpdateTable(ctx context.Context, in *dynamodb.UpdateTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateTableOutput, error)
}

// CreateTable creates the table with the bed's own client and returns its
// stream's ARN ("" with NoStream).
func (b *Bed) CreateTable(t testing.TB, tbl Table) string {
	t.Helper()
	return CreateTable(t, b.DynamoDB, tbl)
}

// CreateTable creates the table (on demand billing) with db, enables its
// TTL when asked, and returns its stream's ARN ("" with NoStream). Any
// error fails the test, naming the table.
func CreateTable(t testing.TB, db TableAPI, tbl Table) string {
	t.Helper()
	ctx := t.Context() // ends with the test
	out, err := db.CreateTable(ctx, tbl.input())
	if err != nil {
		t.Fatalf("CreateTable %s: %v", tbl.Name, err)
	}
	arn := aws.ToString(out.TableDescription.LatestStreamArn)
	if arn == "" && !tbl.NoStream {
		t.Fatalf("CreateTable %s: no LatestStreamArn", tbl.Name)
	}
	if tbl.TTL != "" {
		_, err = db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
			TableName:               aws.String(tbl.Name),
			TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(tbl.TTL), Enabled: aws.Bool(true)},
		})
		if err != nil {
			t.Fatalf("UpdateTimeToLive %s: %v", tbl.Name, err)
		}
	}
	for _, r := range tbl.Replicas {
		_, err := db.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: aws.String(tbl.Name),
			ReplicaUpdates: []types.ReplicationGroupUpdate{{Create: &types.CreateReplicationGroupMemberAction{RegionName: aws.String(r)}}}})
		if err != nil {
			t.Fatalf("UpdateTable %s: adding a replica in %s: %v", tbl.Name, r, err)
		}
	}
	return arn
}

// input is the table's CreateTableInput.
func (tbl Table) input() *dynamodb.CreateTableInput {
	hash, hashType := or(tbl.Hash, "pk"), or(tbl.HashType, types.ScalarAttributeTypeS)
	in := &dynamodb.CreateTableInput{
		TableName:              aws.String(tbl.Name),
		BillingMode:            types.BillingModePayPerRequest,
		KeySchema:              []types.KeySchemaElement{{AttributeName: aws.String(hash), KeyType: types.KeyTypeHash}},
		AttributeDefinitions:   []types.AttributeDefinition{{AttributeName: aws.String(hash), AttributeType: hashType}},
		GlobalSecondaryIndexes: tbl.Indexes,
	}
	if tbl.Range != "" {
		in.KeySchema = append(in.KeySchema, types.KeySchemaElement{AttributeName: aws.String(tbl.Range), KeyType: types.KeyTypeRange})
		in.AttributeDefinitions = append(in.AttributeDefinitions,
			types.AttributeDefinition{AttributeName: aws.String(tbl.Range), AttributeType: or(tbl.RangeType, types.ScalarAttributeTypeS)})
	}
	in.AttributeDefinitions = append(in.AttributeDefinitions, tbl.Attributes...)
	if !tbl.NoStream {
		in.StreamSpecification = &types.StreamSpecification{StreamEnabled: aws.Bool(true),
			StreamViewType: or(tbl.Stream, types.StreamViewTypeNewAndOldImages)}
	}
	return in
}

func or[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}
