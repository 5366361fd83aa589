package engine_test

import (
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/engine"
)

// Stream records exactly when DynamoDB writes them: a write that leaves the
// item identical (names, types, values; numbers by value, sets as sets)
// writes no record, whatever the write path.

func NS(s ...string) types.AttributeValue { return &types.AttributeValueMemberNS{Value: s} }
func SS(s ...string) types.AttributeValue { return &types.AttributeValueMemberSS{Value: s} }

// noopItem is the item most cases write over: every attribute type.
func noopItem(n, ns1, ns2 string, ss ...string) item {
	return item{
		"pk": S("k"),
		"n":  N(n),
		"s":  S("x"),
		"b":  B([]byte{1, 2}),
		"t":  BOOL(true),
		"z":  &types.AttributeValueMemberNULL{Value: true},
		"ns": NS(ns1, ns2),
		"ss": SS(ss...),
		"bs": &types.AttributeValueMemberBS{Value: [][]byte{{1}, {2}, {3}}},
		"m":  &types.AttributeValueMemberM{Value: item{"x": N("10"), "y": S("y")}},
		"l":  &types.AttributeValueMemberL{Value: []types.AttributeValue{N("1"), S("y")}},
	}
}

func noopTable(e *env, name string) {
	e.createTable(name, "", func(in *dynamodb.CreateTableInput) {
		in.StreamSpecification = &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewAndOldImages}
	})
}

func (e *env) updateErr(table string, in *dynamodb.UpdateItemInput) error {
	in.TableName = aws.String(table)
	_, err := e.db.UpdateItem(e.ctx, in)
	return err
}

func TestNoStreamRecordForIdenticalWrite(t *testing.T) {
	seed := noopItem("1", "1", "2", "a", "b", "c")
	key := item{"pk": S("k")}
	put := func(it item) func(*env, string) error {
		return func(e *env, table string) error {
			_, err := e.db.PutItem(e.ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: it})
			return err
		}
	}
	update := func(expr string, vals item) func(*env, string) error {
		return func(e *env, table string) error {
			return e.updateErr(table, &dynamodb.UpdateItemInput{Key: key, UpdateExpression: aws.String(expr), ExpressionAttributeValues: vals})
		}
	}
	batchPut := func(it item) func(*env, string) error {
		return func(e *env, table string) error {
			out, err := e.db.BatchWriteItem(e.ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{
				table: {{PutRequest: &types.PutRequest{Item: it}}},
			}})
			if err == nil && len(out.UnprocessedItems) > 0 {
				err = fmt.Errorf("unprocessed %v", out.UnprocessedItems)
			}
			return err
		}
	}
	txPut := func(it item) func(*env, string) error {
		return func(e *env, table string) error {
			_, err := e.db.TransactWriteItems(e.ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
				{Put: &types.Put{TableName: aws.String(table), Item: it}},
			}})
			return err
		}
	}
	changed := noopItem("2", "1", "2", "a", "b", "c")
	cases := []struct {
		name  string
		seed  item // nil: the table starts empty
		write func(*env, string) error
		want  string // event names of the records the write adds
	}{
		{"PutItem identical", seed, put(seed), "[]"},
		{"PutItem 1.0 and 1E0 over 1", seed, put(noopItem("1.0", "2.00", "1E0", "a", "b", "c")), "[]"},
		{"PutItem 38 digits equal", noopItem("12345678901234567890123456789012345678", "1", "2", "a"), put(noopItem("1.2345678901234567890123456789012345678E37", "1", "2", "a")), "[]"},
		{"PutItem set in another order", seed, put(noopItem("1", "2", "1", "c", "a", "b")), "[]"},
		{"UpdateItem SET same value", seed, update("SET n = :n, ns = :ns, m.x = :x", item{":n": N("1.00"), ":ns": NS("2", "1"), ":x": N("1E1")}), "[]"},
		{"UpdateItem REMOVE missing attribute", seed, update("REMOVE nothere, m.nothere", nil), "[]"},
		{"UpdateItem ADD and DELETE nothing new", seed, update("ADD ss :a DELETE ns :gone", item{":a": SS("a"), ":gone": NS("7")}), "[]"},
		{"UpdateItem no expression on existing item", seed, func(e *env, table string) error {
			return e.updateErr(table, &dynamodb.UpdateItemInput{Key: key})
		}, "[]"},
		{"BatchWriteItem identical overwrite", seed, batchPut(noopItem("1.0", "2", "1", "b", "c", "a")), "[]"},
		{"TransactWriteItems Put identical", seed, txPut(noopItem("1", "1", "2", "c", "b", "a")), "[]"},
		{"TransactWriteItems Update same value", seed, func(e *env, table string) error {
			_, err := e.db.TransactWriteItems(e.ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
				{Update: &types.Update{TableName: aws.String(table), Key: key, UpdateExpression: aws.String("SET n = :n REMOVE nothere"), ExpressionAttributeValues: item{":n": N("1.0")}}},
			}})
			return err
		}, "[]"},
		{"DeleteItem of a missing item", nil, func(e *env, table string) error {
			_, err := e.db.DeleteItem(e.ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: key})
			return err
		}, "[]"},

		// Real changes still write their record.
		{"PutItem change", seed, put(changed), "[MODIFY]"},
		{"PutItem change in the 38th digit", noopItem("12345678901234567890123456789012345678", "1", "2", "a"), put(noopItem("12345678901234567890123456789012345679", "1", "2", "a")), "[MODIFY]"},
		{"PutItem set member change", seed, put(noopItem("1", "1", "3", "a", "b", "c")), "[MODIFY]"},
		{"PutItem type change", seed, put(func() item { it := noopItem("1", "1", "2", "a", "b", "c"); it["s"] = SS("x"); return it }()), "[MODIFY]"},
		{"UpdateItem SET change", seed, update("SET n = :n", item{":n": N("1.5")}), "[MODIFY]"},
		{"UpdateItem REMOVE present attribute", seed, update("REMOVE z", nil), "[MODIFY]"},
		{"BatchWriteItem change", seed, batchPut(changed), "[MODIFY]"},
		{"TransactWriteItems Put change", seed, txPut(changed), "[MODIFY]"},
		{"PutItem new item", nil, put(seed), "[INSERT]"},
		{"UpdateItem no expression on missing key creates it", nil, func(e *env, table string) error {
			return e.updateErr(table, &dynamodb.UpdateItemInput{Key: key})
		}, "[INSERT]"},
		{"DeleteItem", seed, func(e *env, table string) error {
			_, err := e.db.DeleteItem(e.ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: key})
			return err
		}, "[REMOVE]"},
	}
	e := newEnv(t, engine.Options{})
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e.t = t
			table := fmt.Sprintf("noop%d", i)
			noopTable(e, table)
			if c.seed != nil {
				e.put(table, c.seed)
			}
			before := len(e.readAll(table))
			if err := c.write(e, table); err != nil {
				t.Fatalf("write: %v", err)
			}
			recs := e.readAll(table)[before:]
			var got []string
			for _, r := range recs {
				got = append(got, string(r.EventName))
				if r.EventName == stypes.OperationTypeModify && (r.Dynamodb.OldImage == nil || r.Dynamodb.NewImage == nil) {
					t.Errorf("MODIFY without both images: %+v", r.Dynamodb)
				}
			}
			if fmt.Sprint(got) != c.want && !(c.want == "[]" && len(got) == 0) {
				t.Fatalf("records %v, want %s", got, c.want)
			}
		})
	}
}

// An UpdateItem that only removes (REMOVE, DELETE from a set, or the legacy
// AttributeUpdates DELETE) creates nothing on a key that does not exist:
// no item, no stream record, and with ReturnValues ALL_NEW no attributes,
// since there is no item.
func TestRemoveOnlyUpdateOnMissingKeyCreatesNothing(t *testing.T) {
	key := item{"pk": S("gone")}
	cases := []struct {
		name string
		in   dynamodb.UpdateItemInput
	}{
		{"REMOVE", dynamodb.UpdateItemInput{UpdateExpression: aws.String("REMOVE a, b")}},
		{"DELETE from set", dynamodb.UpdateItemInput{UpdateExpression: aws.String("DELETE ss :v"), ExpressionAttributeValues: item{":v": SS("a")}}},
		{"REMOVE and DELETE", dynamodb.UpdateItemInput{UpdateExpression: aws.String("REMOVE a DELETE ss :v"), ExpressionAttributeValues: item{":v": SS("a")}}},
		{"legacy DELETE", dynamodb.UpdateItemInput{AttributeUpdates: map[string]types.AttributeValueUpdate{"a": {Action: types.AttributeActionDelete}}}},
		{"legacy DELETE value", dynamodb.UpdateItemInput{AttributeUpdates: map[string]types.AttributeValueUpdate{
			"a":  {Action: types.AttributeActionDelete},
			"ss": {Action: types.AttributeActionDelete, Value: SS("a")},
		}}},
		{"REMOVE with a condition that holds", dynamodb.UpdateItemInput{UpdateExpression: aws.String("REMOVE a"), ConditionExpression: aws.String("attribute_not_exists(pk)")}},
	}
	e := newEnv(t, engine.Options{})
	for i, c := range cases {
		for _, rv := range []types.ReturnValue{types.ReturnValueAllNew, types.ReturnValueUpdatedNew, types.ReturnValueAllOld} {
			t.Run(c.name+"/"+string(rv), func(t *testing.T) {
				e.t = t
				table := fmt.Sprintf("rmonly%d%s", i, rv)
				noopTable(e, table)
				in := c.in
				in.TableName, in.Key, in.ReturnValues = aws.String(table), key, rv
				out, err := e.db.UpdateItem(e.ctx, &in)
				if err != nil {
					t.Fatalf("UpdateItem: %v", err)
				}
				if len(out.Attributes) != 0 {
					t.Errorf("Attributes %v, want none", out.Attributes)
				}
				if got := e.get(table, key); got != nil {
					t.Errorf("item %v was created", got)
				}
				if n := len(e.scanAll(&dynamodb.ScanInput{TableName: aws.String(table)})); n != 0 {
					t.Errorf("scan: %d items", n)
				}
				if recs := e.readAll(table); len(recs) != 0 {
					t.Errorf("%d stream records, want none", len(recs))
				}
			})
		}
	}

	// A REMOVE-only update on an existing item does modify it, and one
	// that also SETs creates the item.
	e.t = t
	noopTable(e, "rmonly_contrast")
	if err := e.updateErr("rmonly_contrast", &dynamodb.UpdateItemInput{Key: key, UpdateExpression: aws.String("SET c = :v REMOVE a"), ExpressionAttributeValues: item{":v": N("1")}}); err != nil {
		t.Fatal(err)
	}
	if err := e.updateErr("rmonly_contrast", &dynamodb.UpdateItemInput{Key: key, UpdateExpression: aws.String("REMOVE c")}); err != nil {
		t.Fatal(err)
	}
	if got := e.get("rmonly_contrast", key); len(got) != 1 {
		t.Fatalf("item %v, want the key only", got)
	}
	var names []string
	for _, r := range e.readAll("rmonly_contrast") {
		names = append(names, string(r.EventName))
	}
	if fmt.Sprint(names) != "[INSERT MODIFY]" {
		t.Fatalf("records %v, want [INSERT MODIFY]", names)
	}
	// Removing a key attribute is still an error.
	if err := e.updateErr("rmonly_contrast", &dynamodb.UpdateItemInput{Key: item{"pk": S("other")}, UpdateExpression: aws.String("REMOVE pk")}); errCode(err) != "ValidationException" {
		t.Fatalf("REMOVE pk: %v", err)
	}
}
