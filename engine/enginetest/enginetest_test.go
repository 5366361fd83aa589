package enginetest_test

import (
	"context"
	"net/http"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/engine/enginetest"
)

// TestCreateTable: the tables the helper makes, as DescribeTable and
// DescribeTimeToLive see them.
func TestCreateTable(t *testing.T) {
	b := enginetest.Start(t, engine.Options{TTLInterval: -1})
	ctx := context.Background()
	for _, c := range []struct {
		tbl        enginetest.Table
		wantKey    int
		wantStream types.StreamViewType
		wantTTL    string
		wantGSIs   int
	}{
		{tbl: enginetest.Table{Name: "plain"}, wantKey: 1, wantStream: types.StreamViewTypeNewAndOldImages},
		{tbl: enginetest.Table{Name: "ttl", Hash: "id", TTL: "exp", Stream: types.StreamViewTypeKeysOnly},
			wantKey: 1, wantStream: types.StreamViewTypeKeysOnly, wantTTL: "exp"},
		{tbl: enginetest.Table{Name: "gsi", Range: "sk", RangeType: types.ScalarAttributeTypeN, NoStream: true, TTL: "ttl",
			Attributes: []types.AttributeDefinition{{AttributeName: aws.String("w"), AttributeType: types.ScalarAttributeTypeS}},
			Indexes: []types.GlobalSecondaryIndex{{IndexName: aws.String("by-w"),
				KeySchema:  []types.KeySchemaElement{{AttributeName: aws.String("w"), KeyType: types.KeyTypeHash}},
				Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly}}}},
			wantKey: 2, wantTTL: "ttl", wantGSIs: 1},
	} {
		arn := b.CreateTable(t, c.tbl)
		if (arn != "") != (c.wantStream != "") {
			t.Errorf("%s: stream ARN %q, want one: %v", c.tbl.Name, arn, c.wantStream != "")
		}
		d, err := b.DynamoDB.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(c.tbl.Name)})
		if err != nil {
			t.Fatal(err)
		}
		td := d.Table
		var view types.StreamViewType
		if s := td.StreamSpecification; s != nil && aws.ToBool(s.StreamEnabled) {
			view = s.StreamViewType
		}
		if len(td.KeySchema) != c.wantKey || view != c.wantStream || len(td.GlobalSecondaryIndexes) != c.wantGSIs {
			t.Errorf("%s: key %d, stream %q, GSIs %d; want %d, %q, %d", c.tbl.Name,
				len(td.KeySchema), view, len(td.GlobalSecondaryIndexes), c.wantKey, c.wantStream, c.wantGSIs)
		}
		ttl, err := b.DynamoDB.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(c.tbl.Name)})
		if err != nil {
			t.Fatal(err)
		}
		if got := aws.ToString(ttl.TimeToLiveDescription.AttributeName); got != c.wantTTL {
			t.Errorf("%s: TTL on %q, want %q", c.tbl.Name, got, c.wantTTL)
		}
	}
}

// TestClientsSignWithTheirKey: a hook tells the bed's clients apart by
// their access keys.
func TestClientsSignWithTheirKey(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]string{}
	b := enginetest.Start(t, engine.Options{TTLInterval: -1, Hooks: engine.Hooks{OnRequest: func(op string, r *http.Request) error {
		mu.Lock()
		defer mu.Unlock()
		seen[op] = enginetest.AccessKey(r)
		return nil
	}}})
	ctx := context.Background()
	if _, err := b.Client("worker-1").ListTables(ctx, &dynamodb.ListTablesInput{}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Streams.ListStreams(ctx, nil); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if seen["ListTables"] != "worker-1" || seen["ListStreams"] != enginetest.DefaultKey {
		t.Errorf("access keys seen: %v", seen)
	}
}
