package engine_test

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ttl-archiver/archiver/engine"
)

// TestTableARNAsTableName: every operation on an existing table takes the
// table's ARN in TableName (and as a RequestItems key), as DynamoDB does;
// an ARN of another account, region or table is not found.
func TestTableARNAsTableName(t *testing.T) {
	e := newEnv(t, engine.Options{})
	arn := aws.ToString(e.createTable("Sessions", "", nil).TableArn)
	item := func(pk string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"pk": S(pk), "v": N("1")}
	}
	key := func(pk string) map[string]types.AttributeValue { return map[string]types.AttributeValue{"pk": S(pk)} }
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"DescribeTable", func() error {
			out, err := e.db.DescribeTable(e.ctx, &dynamodb.DescribeTableInput{TableName: aws.String(arn)})
			if err == nil && aws.ToString(out.Table.TableName) != "Sessions" {
				t.Errorf("DescribeTable by ARN names %q", aws.ToString(out.Table.TableName))
			}
			return err
		}},
		{"DescribeTimeToLive", func() error {
			_, err := e.db.DescribeTimeToLive(e.ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(arn)})
			return err
		}},
		{"PutItem", func() error {
			_, err := e.db.PutItem(e.ctx, &dynamodb.PutItemInput{TableName: aws.String(arn), Item: item("a")})
			return err
		}},
		{"GetItem", func() error {
			out, err := e.db.GetItem(e.ctx, &dynamodb.GetItemInput{TableName: aws.String(arn), Key: key("a")})
			if err == nil && out.Item == nil {
				t.Error("GetItem by ARN found nothing")
			}
			return err
		}},
		{"UpdateItem", func() error {
			_, err := e.db.UpdateItem(e.ctx, &dynamodb.UpdateItemInput{TableName: aws.String(arn), Key: key("a"),
				UpdateExpression: aws.String("SET v = :v"), ExpressionAttributeValues: map[string]types.AttributeValue{":v": N("2")}})
			return err
		}},
		{"Query", func() error {
			out, err := e.db.Query(e.ctx, &dynamodb.QueryInput{TableName: aws.String(arn), KeyConditionExpression: aws.String("pk = :p"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":p": S("a")}})
			if err == nil && out.Count != 1 {
				t.Errorf("Query by ARN: %d items", out.Count)
			}
			return err
		}},
		{"Scan", func() error {
			_, err := e.db.Scan(e.ctx, &dynamodb.ScanInput{TableName: aws.String(arn)})
			return err
		}},
		{"BatchWriteItem", func() error {
			_, err := e.db.BatchWriteItem(e.ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{
				arn: {{PutRequest: &types.PutRequest{Item: item("b")}}}}})
			return err
		}},
		{"BatchGetItem", func() error {
			out, err := e.db.BatchGetItem(e.ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
				arn: {Keys: []map[string]types.AttributeValue{key("a"), key("b")}}}})
			if err == nil && len(out.Responses[arn]) != 2 {
				t.Errorf("BatchGetItem by ARN: responses %v", out.Responses)
			}
			return err
		}},
		{"TransactWriteItems naming the table both ways", func() error {
			_, err := e.db.TransactWriteItems(e.ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
				{Put: &types.Put{TableName: aws.String(arn), Item: item("c")}},
				{Put: &types.Put{TableName: aws.String("Sessions"), Item: item("d")}},
			}})
			return err
		}},
		{"TransactGetItems", func() error {
			out, err := e.db.TransactGetItems(e.ctx, &dynamodb.TransactGetItemsInput{TransactItems: []types.TransactGetItem{
				{Get: &types.Get{TableName: aws.String(arn), Key: key("c")}},
				{Get: &types.Get{TableName: aws.String("Sessions"), Key: key("d")}},
			}})
			if err == nil && (out.Responses[0].Item == nil || out.Responses[1].Item == nil) {
				t.Errorf("TransactGetItems: %+v", out.Responses)
			}
			return err
		}},
		{"DeleteItem", func() error {
			_, err := e.db.DeleteItem(e.ctx, &dynamodb.DeleteItemInput{TableName: aws.String(arn), Key: key("a")})
			return err
		}},
	} {
		if err := tc.call(); err != nil {
			t.Errorf("%s by ARN: %v", tc.name, err)
		}
	}

	for _, tc := range []struct{ name, arn, code string }{
		{"another account", strings.Replace(arn, ":000000000000:", ":111111111111:", 1), "ResourceNotFoundException"},
		{"another region", strings.Replace(arn, ":us-east-1:", ":eu-west-1:", 1), "ResourceNotFoundException"},
		{"another table", strings.Replace(arn, "table/Sessions", "table/Carts", 1), "ResourceNotFoundException"},
		{"not an ARN of a table", "arn:aws:dynamodb:us-east-1:000000000000:stream/x", "ResourceNotFoundException"},
		{"over 1024 characters", arn + strings.Repeat("x", 1024), "ValidationException"},
	} {
		_, err := e.db.GetItem(e.ctx, &dynamodb.GetItemInput{TableName: aws.String(tc.arn), Key: key("a")})
		if got := errCode(err); got != tc.code {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.code)
		}
	}
	// DeleteTable by ARN removes the table.
	if _, err := e.db.DeleteTable(e.ctx, &dynamodb.DeleteTableInput{TableName: aws.String(arn)}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.DescribeTable(e.ctx, &dynamodb.DescribeTableInput{TableName: aws.String("Sessions")}); errCode(err) != "ResourceNotFoundException" {
		t.Errorf("after DeleteTable by ARN: %v", err)
	}
}
