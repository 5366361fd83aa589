package engine_test

import (
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ttl-archiver/archiver/engine"
)

// withLSIs gives a table (pk, sk) two local secondary indexes: "all" on v
// projecting ALL and "keys" on w projecting KEYS_ONLY.
func withLSIs(in *dynamodb.CreateTableInput) {
	in.AttributeDefinitions = append(in.AttributeDefinitions,
		types.AttributeDefinition{AttributeName: aws.String("v"), AttributeType: types.ScalarAttributeTypeS},
		types.AttributeDefinition{AttributeName: aws.String("w"), AttributeType: types.ScalarAttributeTypeS})
	lsi := func(name, attrName string, p types.ProjectionType) types.LocalSecondaryIndex {
		return types.LocalSecondaryIndex{IndexName: aws.String(name), Projection: &types.Projection{ProjectionType: p},
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(attrName), KeyType: types.KeyTypeRange}}}
	}
	in.LocalSecondaryIndexes = []types.LocalSecondaryIndex{lsi("all", "v", types.ProjectionTypeAll), lsi("keys", "w", types.ProjectionTypeKeysOnly)}
}

// TestItemCollectionSize checks what an item collection's size counts:
// every item with the partition key plus each LSI's projection of those
// the index holds, and nothing of other partitions (even one whose key
// extends this one's).
func TestItemCollectionSize(t *testing.T) {
	e := newEnv(t, engine.Options{})
	e.createTable("icms", "S", withLSIs)
	// 16 bytes: pk 3, sk 3, v 3, w 3, z 4. In "all" (16) and "keys" (pk, sk, w: 9).
	e.put("icms", item{"pk": S("p"), "sk": S("a"), "v": S("xx"), "w": S("yy"), "z": S("123")})
	// 6 bytes, in no index.
	e.put("icms", item{"pk": S("p"), "sk": S("b")})
	e.put("icms", item{"pk": S("pp"), "sk": S("a"), "v": S("x")})
	e.put("icms", item{"pk": S("o"), "sk": S("a"), "w": S("x")})
	if got := e.eng.CollectionSizeForTest("icms", "p"); got != 16+16+9+6 {
		t.Fatalf("collection p = %d bytes, want 47", got)
	}
	if _, err := e.db.DeleteItem(e.ctx, &dynamodb.DeleteItemInput{TableName: aws.String("icms"), Key: item{"pk": S("p"), "sk": S("a")}}); err != nil {
		t.Fatal(err)
	}
	if got := e.eng.CollectionSizeForTest("icms", "p"); got != 6 {
		t.Fatalf("collection p after delete = %d bytes, want 6", got)
	}
}

// TestItemCollectionMetrics checks that every write asked
// for ReturnItemCollectionMetrics SIZE reports the collection it wrote on
// a table with LSIs (once per collection, even when a batch or a
// transaction writes two items of it) and reports nothing on a table
// without LSIs.
func TestItemCollectionMetrics(t *testing.T) {
	e := newEnv(t, engine.Options{})
	e.createTable("icm-lsi", "S", withLSIs)
	e.createTable("icm-plain", "S", nil)
	size := types.ReturnItemCollectionMetricsSize
	key := func(sk string) item { return item{"pk": S("p1"), "sk": S(sk)} }
	cases := []struct {
		name  string
		write func(table string) ([]types.ItemCollectionMetrics, error)
	}{
		{"PutItem", func(table string) ([]types.ItemCollectionMetrics, error) {
			out, err := e.db.PutItem(e.ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item{"pk": S("p1"), "sk": S("a"), "v": S("x")}, ReturnItemCollectionMetrics: size})
			return single(err, func() *types.ItemCollectionMetrics { return out.ItemCollectionMetrics })
		}},
		{"UpdateItem", func(table string) ([]types.ItemCollectionMetrics, error) {
			out, err := e.db.UpdateItem(e.ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key("b"), UpdateExpression: aws.String("SET w = :w"),
				ExpressionAttributeValues: item{":w": S("y")}, ReturnItemCollectionMetrics: size})
			return single(err, func() *types.ItemCollectionMetrics { return out.ItemCollectionMetrics })
		}},
		{"DeleteItem", func(table string) ([]types.ItemCollectionMetrics, error) {
			out, err := e.db.DeleteItem(e.ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: key("a"), ReturnItemCollectionMetrics: size})
			return single(err, func() *types.ItemCollectionMetrics { return out.ItemCollectionMetrics })
		}},
		{"BatchWriteItem", func(table string) ([]types.ItemCollectionMetrics, error) {
			out, err := e.db.BatchWriteItem(e.ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: {
				{PutRequest: &types.PutRequest{Item: key("c")}},
				{DeleteRequest: &types.DeleteRequest{Key: key("b")}},
			}}, ReturnItemCollectionMetrics: size})
			if err != nil {
				return nil, err
			}
			return out.ItemCollectionMetrics[table], nil
		}},
		{"TransactWriteItems", func(table string) ([]types.ItemCollectionMetrics, error) {
			// Two writes of p1, and a check of p2, which writes nothing.
			out, err := e.db.TransactWriteItems(e.ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
				{Put: &types.Put{TableName: aws.String(table), Item: key("d")}},
				{Update: &types.Update{TableName: aws.String(table), Key: key("c"), UpdateExpression: aws.String("SET v = :v"), ExpressionAttributeValues: item{":v": S("z")}}},
				{ConditionCheck: &types.ConditionCheck{TableName: aws.String(table), Key: item{"pk": S("p2"), "sk": S("a")}, ConditionExpression: aws.String("attribute_not_exists(pk)")}},
			}, ReturnItemCollectionMetrics: size})
			if err != nil {
				return nil, err
			}
			return out.ItemCollectionMetrics[table], nil
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.write("icm-lsi")
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || sOf(got[0].ItemCollectionKey, "pk") != "p1" || len(got[0].ItemCollectionKey) != 1 ||
				fmt.Sprint(got[0].SizeEstimateRangeGB) != "[0 1]" {
				t.Fatalf("table with LSIs: ItemCollectionMetrics = %s, want one {pk: p1} [0 1]", showICM(got))
			}
			if got, err = c.write("icm-plain"); err != nil || len(got) != 0 {
				t.Fatalf("table without LSIs: ItemCollectionMetrics = %s, %v; want none", showICM(got), err)
			}
		})
	}
}

// single turns one write's optional metrics into a list of zero or one.
func single(err error, icm func() *types.ItemCollectionMetrics) ([]types.ItemCollectionMetrics, error) {
	if err != nil {
		return nil, err
	}
	if m := icm(); m != nil {
		return []types.ItemCollectionMetrics{*m}, nil
	}
	return nil, nil
}

func showICM(ms []types.ItemCollectionMetrics) string {
	s := "["
	for _, m := range ms {
		s += fmt.Sprintf("{pk=%s %v}", sOf(m.ItemCollectionKey, "pk"), m.SizeEstimateRangeGB)
	}
	return s + "]"
}
