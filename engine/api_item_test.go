package engine_test

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ttl-archiver/archiver/engine"
)

func TestPutGetDelete(t *testing.T) {
	e := newEnv(t, engine.Options{})
	e.createTable("tbl1", "N", nil)
	big := N("12345678901234567890123456789012345678")
	e.put("tbl1", item{"pk": S("a"), "sk": N("1.50"), "empty": S(""), "big": big,
		"m":  &types.AttributeValueMemberM{Value: item{"x": &types.AttributeValueMemberL{Value: []types.AttributeValue{N("1"), S("two")}}}},
		"ss": &types.AttributeValueMemberSS{Value: []string{"b", "a"}}})
	got := e.get("tbl1", item{"pk": S("a"), "sk": N("1.5")})
	if sOf(got, "empty") != "" || sOf(got, "big") != "12345678901234567890123456789012345678" || sOf(got, "sk") != "1.5" {
		t.Fatalf("get: %+v", got)
	}
	// ProjectionExpression with nested paths.
	out, err := e.db.GetItem(e.ctx, &dynamodb.GetItemInput{TableName: aws.String("tbl1"), Key: item{"pk": S("a"), "sk": N("1.5")},
		ProjectionExpression: aws.String("#m.x[1], big"), ExpressionAttributeNames: map[string]string{"#m": "m"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Item) != 2 || out.Item["m"] == nil || out.Item["pk"] != nil {
		t.Fatalf("projection: %+v", out.Item)
	}
	l := out.Item["m"].(*types.AttributeValueMemberM).Value["x"].(*types.AttributeValueMemberL).Value
	if len(l) != 1 || l[0].(*types.AttributeValueMemberS).Value != "two" {
		t.Fatalf("nested projection: %+v", l)
	}
	// Missing item: no Item.
	if got := e.get("tbl1", item{"pk": S("zz"), "sk": N("1")}); got != nil {
		t.Fatalf("missing item: %+v", got)
	}
	// ReturnValues ALL_OLD on put and delete.
	po, err := e.db.PutItem(e.ctx, &dynamodb.PutItemInput{TableName: aws.String("tbl1"), Item: item{"pk": S("a"), "sk": N("1.5"), "v": N("2")},
		ReturnValues: types.ReturnValueAllOld, ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal})
	if err != nil || sOf(po.Attributes, "big") == "<missing>" || po.ConsumedCapacity == nil || aws.ToFloat64(po.ConsumedCapacity.CapacityUnits) < 1 {
		t.Fatalf("put ALL_OLD: %v %+v", err, po)
	}
	do, err := e.db.DeleteItem(e.ctx, &dynamodb.DeleteItemInput{TableName: aws.String("tbl1"), Key: item{"pk": S("a"), "sk": N("1.5")}, ReturnValues: types.ReturnValueAllOld})
	if err != nil || sOf(do.Attributes, "v") != "2" {
		t.Fatalf("delete ALL_OLD: %v %+v", err, do)
	}
	if got := e.get("tbl1", item{"pk": S("a"), "sk": N("1.5")}); got != nil {
		t.Fatalf("after delete: %+v", got)
	}
	_, err = e.db.PutItem(e.ctx, &dynamodb.PutItemInput{TableName: aws.String("tbl1"), Item: item{"pk": S("a"), "sk": N("1")}, ReturnValues: types.ReturnValueAllNew})
	if errCode(err) != "ValidationException" || !strings.Contains(errMsg(err), "Return values set to invalid value") {
		t.Fatalf("put ALL_NEW: %v", err)
	}
}

func TestKeyValidation(t *testing.T) {
	e := newEnv(t, engine.Options{})
	e.createTable("tbl1", "N", func(in *dynamodb.CreateTableInput) {
		in.AttributeDefinitions = append(in.AttributeDefinitions, types.AttributeDefinition{AttributeName: aws.String("g"), AttributeType: types.ScalarAttributeTypeS})
		in.GlobalSecondaryIndexes = []types.GlobalSecondaryIndex{{IndexName: aws.String("gsi1"), KeySchema: []types.KeySchemaElement{{AttributeName: aws.String("g"), KeyType: types.KeyTypeHash}},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll}}}
	})
	cases := []struct {
		name string
		it   item
		msg  string
	}{
		{"missing range", item{"pk": S("a")}, "Missing the key sk in the item"},
		{"missing hash", item{"sk": N("1")}, "Missing the key pk in the item"},
		{"wrong type", item{"pk": N("1"), "sk": N("1")}, "Type mismatch for key pk expected: S actual: N"},
		{"empty key", item{"pk": S(""), "sk": N("1")}, "cannot contain an empty string value"},
		{"gsi type", item{"pk": S("a"), "sk": N("1"), "g": N("3")}, "Type mismatch for Index Key g"},
		{"gsi empty", item{"pk": S("a"), "sk": N("1"), "g": S("")}, "secondary index key"},
		{"too big", item{"pk": S("a"), "sk": N("1"), "x": S(strings.Repeat("x", 400*1024))}, "Item size has exceeded the maximum allowed size"},
		{"bad number", item{"pk": S("a"), "sk": N("1"), "x": N("1e400")}, ""},
		{"empty set", item{"pk": S("a"), "sk": N("1"), "x": &types.AttributeValueMemberSS{Value: []string{}}}, ""},
		{"duplicate set", item{"pk": S("a"), "sk": N("1"), "x": &types.AttributeValueMemberNS{Value: []string{"1", "1.0"}}}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := e.db.PutItem(e.ctx, &dynamodb.PutItemInput{TableName: aws.String("tbl1"), Item: c.it})
			if errCode(err) != "ValidationException" || !strings.Contains(errMsg(err), c.msg) {
				t.Fatalf("got %s %q, want ValidationException with %q", errCode(err), errMsg(err), c.msg)
			}
		})
	}
	for _, key := range []item{{"pk": S("a")}, {"pk": S("a"), "sk": S("1")}, {"pk": S("a"), "sk": N("1"), "x": S("y")}} {
		_, err := e.db.GetItem(e.ctx, &dynamodb.GetItemInput{TableName: aws.String("tbl1"), Key: key})
		if errCode(err) != "ValidationException" || !strings.Contains(errMsg(err), "does not match the schema") {
			t.Fatalf("GetItem %v: %v", key, err)
		}
	}
}

func TestConditionsAndReturnValues(t *testing.T) {
	e := newEnv(t, engine.Options{})
	e.createTable("tbl1", "", nil)
	e.put("tbl1", item{"pk": S("a"), "n": N("5"), "tags": &types.AttributeValueMemberSS{Value: []string{"x", "y"}}})
	cases := []struct {
		cond   string
		values item
		ok     bool
	}{
		{"attribute_exists(pk)", nil, true},
		{"attribute_not_exists(pk)", nil, false},
		{"n = :v", item{":v": N("5.0")}, true},
		{"n BETWEEN :a AND :b", item{":a": N("1"), ":b": N("4")}, false},
		{"n IN (:a, :b)", item{":a": N("1"), ":b": N("5")}, true},
		{"contains(tags, :x) AND NOT begins_with(pk, :p)", item{":x": S("y"), ":p": S("b")}, true},
		{"size(tags) > :two OR n < :zero", item{":two": N("2"), ":zero": N("0")}, false},
		{"attribute_type(n, :t)", item{":t": S("N")}, true},
		{"(n > :a OR n < :a) AND n <> :b", item{":a": N("5"), ":b": N("6")}, false},
	}
	for _, c := range cases {
		_, err := e.db.PutItem(e.ctx, &dynamodb.PutItemInput{TableName: aws.String("tbl1"),
			Item: item{"pk": S("a"), "n": N("5"), "tags": &types.AttributeValueMemberSS{Value: []string{"x", "y"}}}, ConditionExpression: aws.String(c.cond), ExpressionAttributeValues: c.values})
		if c.ok && err != nil || !c.ok && errCode(err) != "ConditionalCheckFailedException" {
			t.Errorf("%s: %v", c.cond, err)
		}
	}
	// ReturnValuesOnConditionCheckFailure carries the item.
	_, err := e.db.DeleteItem(e.ctx, &dynamodb.DeleteItemInput{TableName: aws.String("tbl1"), Key: item{"pk": S("a")},
		ConditionExpression: aws.String("n = :v"), ExpressionAttributeValues: item{":v": N("6")},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld})
	var ccf *types.ConditionalCheckFailedException
	if !asErr(err, &ccf) || sOf(ccf.Item, "n") != "5" {
		t.Fatalf("condition failure item: %v", err)
	}
	// Expression parameter errors.
	bad := []struct {
		in  dynamodb.PutItemInput
		msg string
	}{
		{dynamodb.PutItemInput{ConditionExpression: aws.String("n = :v")}, ":v"},
		{dynamodb.PutItemInput{ConditionExpression: aws.String("n = :v"), ExpressionAttributeValues: item{":v": N("1"), ":w": N("2")}}, "unused"},
		{dynamodb.PutItemInput{ConditionExpression: aws.String("size = :v"), ExpressionAttributeValues: item{":v": N("1")}}, "reserved keyword"},
		{dynamodb.PutItemInput{ConditionExpression: aws.String("n = = :v"), ExpressionAttributeValues: item{":v": N("1")}}, "Syntax error"},
		{dynamodb.PutItemInput{ExpressionAttributeNames: map[string]string{"#n": "n"}}, "ExpressionAttributeNames can only be specified when using expressions"},
	}
	for _, b := range bad {
		in := b.in
		in.TableName = aws.String("tbl1")
		in.Item = item{"pk": S("a")}
		_, err := e.db.PutItem(e.ctx, &in)
		if errCode(err) != "ValidationException" || !strings.Contains(errMsg(err), b.msg) {
			t.Errorf("%v: got %s %q, want %q", aws.ToString(in.ConditionExpression), errCode(err), errMsg(err), b.msg)
		}
	}
}

func TestUpdateItem(t *testing.T) {
	e := newEnv(t, engine.Options{})
	e.createTable("tbl1", "S", nil)
	key := item{"pk": S("a"), "sk": S("b")}
	// Update of a missing item creates it.
	out, err := e.db.UpdateItem(e.ctx, &dynamodb.UpdateItemInput{TableName: aws.String("tbl1"), Key: key,
		UpdateExpression:          aws.String("SET n = if_not_exists(n, :zero) + :one, l = list_append(if_not_exists(l, :empty), :l), m = :m ADD c :one, s :s"),
		ExpressionAttributeValues: item{":zero": N("0"), ":one": N("1"), ":empty": &types.AttributeValueMemberL{Value: []types.AttributeValue{}}, ":l": &types.AttributeValueMemberL{Value: []types.AttributeValue{S("x")}}, ":m": &types.AttributeValueMemberM{Value: item{"k": S("v")}}, ":s": &types.AttributeValueMemberSS{Value: []string{"p", "q"}}},
		ReturnValues:              types.ReturnValueAllNew})
	if err != nil {
		t.Fatal(err)
	}
	if sOf(out.Attributes, "n") != "1" || sOf(out.Attributes, "c") != "1" || sOf(out.Attributes, "pk") != "a" {
		t.Fatalf("ALL_NEW: %+v", out.Attributes)
	}
	out, err = e.db.UpdateItem(e.ctx, &dynamodb.UpdateItemInput{TableName: aws.String("tbl1"), Key: key,
		UpdateExpression:          aws.String("SET n = n - :one, m.k2 = :v REMOVE l[0] DELETE s :p"),
		ExpressionAttributeValues: item{":one": N("1"), ":v": S("w"), ":p": &types.AttributeValueMemberSS{Value: []string{"p"}}},
		ReturnValues:              types.ReturnValueUpdatedOld})
	if err != nil {
		t.Fatal(err)
	}
	if sOf(out.Attributes, "n") != "1" || out.Attributes["c"] != nil || out.Attributes["pk"] != nil {
		t.Fatalf("UPDATED_OLD: %+v", out.Attributes)
	}
	got := e.get("tbl1", key)
	if sOf(got, "n") != "0" || len(got["l"].(*types.AttributeValueMemberL).Value) != 0 || len(got["s"].(*types.AttributeValueMemberSS).Value) != 1 {
		t.Fatalf("after update: %+v", got)
	}
	if v := got["m"].(*types.AttributeValueMemberM).Value; sOf(v, "k2") != "w" || sOf(v, "k") != "v" {
		t.Fatalf("nested set: %+v", v)
	}
	out, err = e.db.UpdateItem(e.ctx, &dynamodb.UpdateItemInput{TableName: aws.String("tbl1"), Key: key,
		UpdateExpression: aws.String("REMOVE c"), ReturnValues: types.ReturnValueUpdatedNew})
	if err != nil || len(out.Attributes) != 0 {
		t.Fatalf("UPDATED_NEW after remove: %v %+v", err, out.Attributes)
	}
	for _, c := range []struct {
		expr   string
		values item
		code   string
		msg    string
	}{
		{"SET pk = :v", item{":v": S("x")}, "ValidationException", "part of the key"},
		{"SET n = n + :v", item{":v": S("x")}, "ValidationException", "operand type"},
		{"SET n = :v", item{":v": N("1")}, "", ""},
	} {
		_, err := e.db.UpdateItem(e.ctx, &dynamodb.UpdateItemInput{TableName: aws.String("tbl1"), Key: key,
			UpdateExpression: aws.String(c.expr), ExpressionAttributeValues: c.values})
		if errCode(err) != c.code || !strings.Contains(errMsg(err), c.msg) {
			t.Errorf("%s: got %s %q", c.expr, errCode(err), errMsg(err))
		}
	}
	_, err = e.db.UpdateItem(e.ctx, &dynamodb.UpdateItemInput{TableName: aws.String("tbl1"), Key: key,
		UpdateExpression: aws.String("SET n = :v"), ConditionExpression: aws.String("n > :v"), ExpressionAttributeValues: item{":v": N("1")}})
	if errCode(err) != "ConditionalCheckFailedException" {
		t.Fatalf("conditional update: %v", err)
	}
}
