package engine_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ttl-archiver/archiver/engine"
)

func TestBatchWriteAndGet(t *testing.T) {
	e := newEnv(t, engine.Options{})
	e.createTable("bat1", "", nil)
	e.createTable("bat2", "N", nil)
	var reqs []types.WriteRequest
	for i := 0; i < 20; i++ {
		reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: item{"pk": S(fmt.Sprint(i)), "v": N(fmt.Sprint(i))}}})
	}
	out, err := e.db.BatchWriteItem(e.ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{
		"bat1": reqs,
		"bat2": {{PutRequest: &types.PutRequest{Item: item{"pk": S("x"), "sk": N("1")}}}},
	}, ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal})
	if err != nil || len(out.UnprocessedItems) != 0 || len(out.ConsumedCapacity) != 2 {
		t.Fatalf("batch write: %v %+v", err, out)
	}
	_, err = e.db.BatchWriteItem(e.ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{
		"bat1": {{DeleteRequest: &types.DeleteRequest{Key: item{"pk": S("0")}}}, {DeleteRequest: &types.DeleteRequest{Key: item{"pk": S("missing")}}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	var keys []map[string]types.AttributeValue
	for i := 0; i < 20; i++ {
		keys = append(keys, item{"pk": S(fmt.Sprint(i))})
	}
	g, err := e.db.BatchGetItem(e.ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
		"bat1": {Keys: keys, ProjectionExpression: aws.String("v")},
		"bat2": {Keys: []map[string]types.AttributeValue{{"pk": S("x"), "sk": N("1")}}, ConsistentRead: aws.Bool(true)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Responses["bat1"]) != 19 || len(g.Responses["bat2"]) != 1 || len(g.Responses["bat1"][0]) != 1 || len(g.UnprocessedKeys) != 0 {
		t.Fatalf("batch get: %+v", g.Responses)
	}
	// Limits and duplicates.
	var many []types.WriteRequest
	for i := 0; i < 26; i++ {
		many = append(many, types.WriteRequest{PutRequest: &types.PutRequest{Item: item{"pk": S(fmt.Sprint(i))}}})
	}
	var manyKeys []map[string]types.AttributeValue
	for i := 0; i < 101; i++ {
		manyKeys = append(manyKeys, item{"pk": S(fmt.Sprint(i))})
	}
	for _, c := range []struct {
		name string
		call func() error
		msg  string
	}{
		{"26 writes", func() error {
			_, err := e.db.BatchWriteItem(e.ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{"bat1": many}})
			return err
		}, "less than or equal to 25"},
		{"duplicate writes", func() error {
			_, err := e.db.BatchWriteItem(e.ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{"bat1": {
				{PutRequest: &types.PutRequest{Item: item{"pk": S("d")}}}, {DeleteRequest: &types.DeleteRequest{Key: item{"pk": S("d")}}}}}})
			return err
		}, "duplicates"},
		// DynamoDB: over 100 keys for one table breaks the model's Keys
		// constraint (named as sent, without the keys); over 100 over all
		// tables has its own message.
		{"101 keys for one table", func() error {
			_, err := e.db.BatchGetItem(e.ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{"bat1": {Keys: manyKeys}}})
			return err
		}, "1 validation error detected: Value at 'RequestItems.bat1.member.Keys' failed to satisfy constraint: Member must have length less than or equal to 100"},
		{"101 keys over two tables", func() error {
			_, err := e.db.BatchGetItem(e.ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
				"bat1": {Keys: manyKeys[:100]}, "bat2": {Keys: []map[string]types.AttributeValue{{"pk": S("x"), "sk": N("1")}}}}})
			return err
		}, "Too many items requested for the BatchGetItem call"},
		{"duplicate keys", func() error {
			_, err := e.db.BatchGetItem(e.ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{"bat1": {Keys: []map[string]types.AttributeValue{{"pk": S("a")}, {"pk": S("a")}}}}})
			return err
		}, "duplicates"},
		{"bad key", func() error {
			_, err := e.db.BatchWriteItem(e.ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{"bat1": {{PutRequest: &types.PutRequest{Item: item{"x": S("d")}}}}}})
			return err
		}, "Missing the key pk"},
	} {
		if err := c.call(); errCode(err) != "ValidationException" || !strings.Contains(errMsg(err), c.msg) {
			t.Errorf("%s: got %s %q", c.name, errCode(err), errMsg(err))
		}
	}
	_, err = e.db.BatchGetItem(e.ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{"nope": {Keys: keys[:1]}}})
	if errCode(err) != "ResourceNotFoundException" {
		t.Fatalf("missing table: %v", err)
	}
}

func TestBatchGetSizeCap(t *testing.T) {
	e := newEnv(t, engine.Options{})
	e.createTable("bigb", "", nil)
	blob := strings.Repeat("z", 390*1024)
	var keys []map[string]types.AttributeValue
	for i := 0; i < 60; i++ {
		e.put("bigb", item{"pk": S(fmt.Sprint(i)), "blob": S(blob)})
		keys = append(keys, item{"pk": S(fmt.Sprint(i))})
	}
	got := 0
	req := map[string]types.KeysAndAttributes{"bigb": {Keys: keys}}
	rounds := 0
	for len(req) > 0 {
		out, err := e.db.BatchGetItem(e.ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
		if err != nil {
			t.Fatal(err)
		}
		rounds++
		got += len(out.Responses["bigb"])
		req = out.UnprocessedKeys
	}
	if got != 60 || rounds < 2 {
		t.Fatalf("got %d items in %d rounds", got, rounds)
	}
}

func TestTransactions(t *testing.T) {
	e := newEnv(t, engine.Options{})
	e.createTable("acct", "", nil)
	e.put("acct", item{"pk": S("a"), "bal": N("10")})
	e.put("acct", item{"pk": S("b"), "bal": N("0")})
	move := func(amount string) error {
		_, err := e.db.TransactWriteItems(e.ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Update: &types.Update{TableName: aws.String("acct"), Key: item{"pk": S("a")}, UpdateExpression: aws.String("SET bal = bal - :x"),
				ConditionExpression: aws.String("bal >= :x"), ExpressionAttributeValues: item{":x": N(amount)}}},
			{Update: &types.Update{TableName: aws.String("acct"), Key: item{"pk": S("b")}, UpdateExpression: aws.String("SET bal = bal + :x"), ExpressionAttributeValues: item{":x": N(amount)}}},
			{Put: &types.Put{TableName: aws.String("acct"), Item: item{"pk": S("log-" + amount)}, ConditionExpression: aws.String("attribute_not_exists(pk)")}},
		}})
		return err
	}
	if err := move("4"); err != nil {
		t.Fatal(err)
	}
	err := move("7")
	var tce *types.TransactionCanceledException
	if !asErr(err, &tce) || len(tce.CancellationReasons) != 3 || aws.ToString(tce.CancellationReasons[0].Code) != "ConditionalCheckFailed" || aws.ToString(tce.CancellationReasons[1].Code) != "None" {
		t.Fatalf("overdraft: %v", err)
	}
	g, err := e.db.TransactGetItems(e.ctx, &dynamodb.TransactGetItemsInput{TransactItems: []types.TransactGetItem{
		{Get: &types.Get{TableName: aws.String("acct"), Key: item{"pk": S("a")}}},
		{Get: &types.Get{TableName: aws.String("acct"), Key: item{"pk": S("b")}}},
		{Get: &types.Get{TableName: aws.String("acct"), Key: item{"pk": S("log-7")}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if sOf(g.Responses[0].Item, "bal") != "6" || sOf(g.Responses[1].Item, "bal") != "4" || g.Responses[2].Item != nil {
		t.Fatalf("balances: %+v %+v %+v", g.Responses[0].Item, g.Responses[1].Item, g.Responses[2].Item)
	}
	_, err = e.db.TransactWriteItems(e.ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Delete: &types.Delete{TableName: aws.String("acct"), Key: item{"pk": S("a")}}},
		{ConditionCheck: &types.ConditionCheck{TableName: aws.String("acct"), Key: item{"pk": S("a")}, ConditionExpression: aws.String("attribute_exists(pk)")}},
	}})
	if errCode(err) != "ValidationException" || !strings.Contains(errMsg(err), "multiple operations on one item") {
		t.Fatalf("same item twice: %v", err)
	}
}
