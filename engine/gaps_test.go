package engine_test

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ttl-archiver/archiver/engine"
)

// TestThrottleBatchWrites drives the retry loop applications write around
// BatchWriteItem: throttled calls hand back UnprocessedItems in the
// request's shape, and resending them eventually stores everything.
func TestThrottleBatchWrites(t *testing.T) {
	e := newEnv(t, engine.Options{})
	e.createTable("tbw1", "", nil)
	e.createTable("tbw2", "", nil)
	e.put("tbw2", item{"pk": S("gone")})
	var reqs1 []types.WriteRequest
	for i := 0; i < 20; i++ {
		reqs1 = append(reqs1, types.WriteRequest{PutRequest: &types.PutRequest{Item: item{"pk": S(fmt.Sprint(i)), "v": N(fmt.Sprint(i))}}})
	}
	pending := map[string][]types.WriteRequest{
		"tbw1": reqs1,
		"tbw2": {
			{PutRequest: &types.PutRequest{Item: item{"pk": S("a")}}},
			{DeleteRequest: &types.DeleteRequest{Key: item{"pk": S("gone")}}},
		},
	}
	e.eng.ThrottleBatchWrites(3)
	calls := 0
	var sizes []int
	for len(pending) > 0 {
		calls++
		if calls > 10 {
			t.Fatalf("still unprocessed after %d calls: %v", calls, pending)
		}
		out, err := e.db.BatchWriteItem(e.ctx, &dynamodb.BatchWriteItemInput{RequestItems: pending, ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, rs := range out.UnprocessedItems {
			n += len(rs)
		}
		sizes = append(sizes, n)
		pending = out.UnprocessedItems
	}
	// 22 requests: 11 left, then 6, then 3, then none.
	if fmt.Sprint(sizes) != "[11 6 3 0]" {
		t.Fatalf("unprocessed per call = %v, want [11 6 3 0]", sizes)
	}
	for i := 0; i < 20; i++ {
		if it := e.get("tbw1", item{"pk": S(fmt.Sprint(i))}); sOf(it, "v") != fmt.Sprint(i) {
			t.Fatalf("item %d = %v", i, it)
		}
	}
	if it := e.get("tbw2", item{"pk": S("a")}); it == nil {
		t.Fatal("put of tbw2/a lost")
	}
	if it := e.get("tbw2", item{"pk": S("gone")}); it != nil {
		t.Fatal("delete of tbw2/gone lost")
	}

	// The unprocessed part keeps each request's kind and payload.
	e.eng.ThrottleBatchWrites(1)
	out, err := e.db.BatchWriteItem(e.ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{
		"tbw2": {
			{PutRequest: &types.PutRequest{Item: item{"pk": S("b"), "x": N("1")}}},
			{DeleteRequest: &types.DeleteRequest{Key: item{"pk": S("a")}}},
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	left := out.UnprocessedItems["tbw2"]
	if len(left) != 1 || left[0].PutRequest != nil || left[0].DeleteRequest == nil || sOf(left[0].DeleteRequest.Key, "pk") != "a" {
		t.Fatalf("unprocessed = %+v", out.UnprocessedItems)
	}
	if e.get("tbw2", item{"pk": S("b")}) == nil || e.get("tbw2", item{"pk": S("a")}) == nil {
		t.Fatal("first half not processed, or second half processed")
	}

	// A single request is refused with an exception instead:
	// TestThrottledSingleRequestBatch.
}

// TestThrottleBatchGets checks that throttled BatchGetItem calls return
// UnprocessedKeys with the table's projection and read options, and that
// resending them returns every item exactly once.
func TestThrottleBatchGets(t *testing.T) {
	e := newEnv(t, engine.Options{})
	e.createTable("tbg1", "", nil)
	e.createTable("tbg2", "", nil)
	var keys1, keys2 []map[string]types.AttributeValue
	for i := 0; i < 30; i++ {
		e.put("tbg1", item{"pk": S(fmt.Sprint(i)), "v": N(fmt.Sprint(i)), "w": S("x")})
		keys1 = append(keys1, item{"pk": S(fmt.Sprint(i))})
	}
	for i := 0; i < 5; i++ {
		e.put("tbg2", item{"pk": S(fmt.Sprint(i))})
		keys2 = append(keys2, item{"pk": S(fmt.Sprint(i))})
	}
	pending := map[string]types.KeysAndAttributes{
		"tbg1": {Keys: keys1, ProjectionExpression: aws.String("#v"), ExpressionAttributeNames: map[string]string{"#v": "v"}, ConsistentRead: aws.Bool(true)},
		"tbg2": {Keys: keys2},
	}
	e.eng.ThrottleBatchGets(2)
	got := map[string][]string{}
	var sizes []int
	for calls := 0; len(pending) > 0; calls++ {
		if calls > 10 {
			t.Fatalf("still unprocessed: %v", pending)
		}
		out, err := e.db.BatchGetItem(e.ctx, &dynamodb.BatchGetItemInput{RequestItems: pending})
		if err != nil {
			t.Fatal(err)
		}
		for name, its := range out.Responses {
			for _, it := range its {
				if name == "tbg1" && (len(it) != 1 || it["v"] == nil) {
					t.Fatalf("projection lost: %v", it)
				}
				got[name] = append(got[name], sOf(it, map[string]string{"tbg1": "v", "tbg2": "pk"}[name]))
			}
		}
		n := 0
		for name, ka := range out.UnprocessedKeys {
			n += len(ka.Keys)
			if name == "tbg1" && (aws.ToString(ka.ProjectionExpression) != "#v" || ka.ExpressionAttributeNames["#v"] != "v" || !aws.ToBool(ka.ConsistentRead)) {
				t.Fatalf("unprocessed keys lost their options: %+v", ka)
			}
		}
		sizes = append(sizes, n)
		pending = out.UnprocessedKeys
	}
	if fmt.Sprint(sizes) != "[18 9 0]" {
		t.Fatalf("unprocessed per call = %v, want [18 9 0]", sizes)
	}
	for name, want := range map[string]int{"tbg1": 30, "tbg2": 5} {
		sort.Strings(got[name])
		seen := map[string]bool{}
		for _, v := range got[name] {
			if seen[v] {
				t.Fatalf("%s: %s returned twice", name, v)
			}
			seen[v] = true
		}
		if len(seen) != want {
			t.Fatalf("%s: got %d items, want %d", name, len(seen), want)
		}
	}
}

// TestUpdatedReturnValuesNestedPaths checks that UPDATED_OLD and
// UPDATED_NEW return only the document paths the update touched, as
// DynamoDB does, not whole top-level attributes.
func TestUpdatedReturnValuesNestedPaths(t *testing.T) {
	e := newEnv(t, engine.Options{})
	e.createTable("urv", "", nil)
	key := item{"pk": S("k")}
	base := item{"pk": S("k"), "n": N("5"), "other": S("o"),
		"a": &types.AttributeValueMemberM{Value: item{"b": N("1"), "c": S("keep"), "d": S("drop")}},
		"l": &types.AttributeValueMemberL{Value: []types.AttributeValue{S("l0"), S("l1"), S("l2")}}}
	for _, c := range []struct {
		name, expr string
		values     item
		rv         types.ReturnValue
		want       string
	}{
		{"nested set old", "SET a.b = :v", item{":v": N("2")}, types.ReturnValueUpdatedOld, `{"a":{"b":1}}`},
		{"nested set new", "SET a.b = :v", item{":v": N("2")}, types.ReturnValueUpdatedNew, `{"a":{"b":2}}`},
		{"list index new", "SET l[1] = :v", item{":v": S("x")}, types.ReturnValueUpdatedNew, `{"l":[x]}`},
		{"list index old", "SET l[1] = :v", item{":v": S("x")}, types.ReturnValueUpdatedOld, `{"l":[l1]}`},
		{"nested remove old", "REMOVE a.d", nil, types.ReturnValueUpdatedOld, `{"a":{"d":drop}}`},
		{"nested remove new", "REMOVE a.d", nil, types.ReturnValueUpdatedNew, `{}`},
		{"new nested path old", "SET a.z = :v", item{":v": S("z")}, types.ReturnValueUpdatedOld, `{}`},
		{"mixed new", "SET n = n + :one, a.c = :v ADD s :s", item{":one": N("1"), ":v": S("c2"), ":s": &types.AttributeValueMemberSS{Value: []string{"p"}}}, types.ReturnValueUpdatedNew, `{"a":{"c":c2},"n":6,"s":[p]}`},
	} {
		e.put("urv", base)
		out, err := e.db.UpdateItem(e.ctx, &dynamodb.UpdateItemInput{TableName: aws.String("urv"), Key: key,
			UpdateExpression: aws.String(c.expr), ExpressionAttributeValues: c.values, ReturnValues: c.rv})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := render(out.Attributes); got != c.want {
			t.Errorf("%s: got %s, want %s", c.name, got, c.want)
		}
	}
	// Legacy AttributeUpdates still return their whole attributes.
	e.put("urv", base)
	out, err := e.db.UpdateItem(e.ctx, &dynamodb.UpdateItemInput{TableName: aws.String("urv"), Key: key,
		AttributeUpdates: map[string]types.AttributeValueUpdate{"n": {Value: N("9"), Action: types.AttributeActionPut}},
		ReturnValues:     types.ReturnValueUpdatedOld})
	if err != nil || render(out.Attributes) != `{"n":5}` {
		t.Fatalf("legacy: %v %s", err, render(out.Attributes))
	}
}

// render prints an attribute map compactly with sorted keys: strings and
// numbers bare, maps in braces, lists and sets in brackets.
func render(it item) string {
	return renderValue(&types.AttributeValueMemberM{Value: it})
}

func renderValue(v types.AttributeValue) string {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return v.Value
	case *types.AttributeValueMemberN:
		return v.Value
	case *types.AttributeValueMemberSS:
		return fmt.Sprint(v.Value)
	case *types.AttributeValueMemberL:
		s := "["
		for i, x := range v.Value {
			if i > 0 {
				s += ","
			}
			s += renderValue(x)
		}
		return s + "]"
	case *types.AttributeValueMemberM:
		keys := make([]string, 0, len(v.Value))
		for k := range v.Value {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		s := "{"
		for i, k := range keys {
			if i > 0 {
				s += ","
			}
			s += fmt.Sprintf("%q:%s", k, renderValue(v.Value[k]))
		}
		return s + "}"
	}
	return fmt.Sprintf("%T", v)
}

// TestDescribeTableDisabledStream pins DynamoDB's shape after a stream is
// switched off: no StreamSpecification, but LatestStreamArn and
// LatestStreamLabel still name the last stream (ScyllaDB's Alternator
// tests, checked against DynamoDB, show the same: scylladb/scylladb#31553).
func TestDescribeTableDisabledStream(t *testing.T) {
	e := newEnv(t, engine.Options{})
	created := e.createTable("dts", "", func(in *dynamodb.CreateTableInput) {
		in.StreamSpecification = &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewAndOldImages}
	})
	arn, label := aws.ToString(created.LatestStreamArn), aws.ToString(created.LatestStreamLabel)
	if arn == "" || label == "" || created.StreamSpecification == nil || !aws.ToBool(created.StreamSpecification.StreamEnabled) {
		t.Fatalf("created: %+v", created)
	}
	up, err := e.db.UpdateTable(e.ctx, &dynamodb.UpdateTableInput{TableName: aws.String("dts"),
		StreamSpecification: &types.StreamSpecification{StreamEnabled: aws.Bool(false)}})
	if err != nil {
		t.Fatal(err)
	}
	d, err := e.db.DescribeTable(e.ctx, &dynamodb.DescribeTableInput{TableName: aws.String("dts")})
	if err != nil {
		t.Fatal(err)
	}
	for what, td := range map[string]*types.TableDescription{"UpdateTable": up.TableDescription, "DescribeTable": d.Table} {
		if td.StreamSpecification != nil {
			t.Errorf("%s: StreamSpecification = %+v, want none", what, td.StreamSpecification)
		}
		if aws.ToString(td.LatestStreamArn) != arn || aws.ToString(td.LatestStreamLabel) != label {
			t.Errorf("%s: latest stream %q %q, want %q %q", what, aws.ToString(td.LatestStreamArn), aws.ToString(td.LatestStreamLabel), arn, label)
		}
	}
}

// TestScanExclusiveStartKeySegment checks that a parallel Scan rejects an
// ExclusiveStartKey of another segment, as DynamoDB does, and still pages
// through its own segment.
func TestScanExclusiveStartKeySegment(t *testing.T) {
	e := newEnv(t, engine.Options{})
	e.createTable("ses", "N", nil)
	for i := 0; i < 40; i++ {
		e.put("ses", item{"pk": S(fmt.Sprint("p", i%10)), "sk": N(fmt.Sprint(i))})
	}
	const total = 3
	var firstKey [total]item
	count := 0
	for sg := 0; sg < total; sg++ {
		its := e.scanAll(&dynamodb.ScanInput{TableName: aws.String("ses"), Segment: aws.Int32(int32(sg)), TotalSegments: aws.Int32(total), Limit: aws.Int32(3)})
		count += len(its)
		if len(its) == 0 {
			t.Fatalf("segment %d is empty; pick other keys", sg)
		}
		firstKey[sg] = item{"pk": its[0]["pk"], "sk": its[0]["sk"]}
	}
	if count != 40 {
		t.Fatalf("segments returned %d items, want 40", count)
	}
	for sg := 0; sg < total; sg++ {
		for from := 0; from < total; from++ {
			_, err := e.db.Scan(e.ctx, &dynamodb.ScanInput{TableName: aws.String("ses"), Segment: aws.Int32(int32(sg)), TotalSegments: aws.Int32(total), ExclusiveStartKey: firstKey[from]})
			if from == sg {
				if err != nil {
					t.Errorf("segment %d, own start key: %v", sg, err)
				}
				continue
			}
			if errCode(err) != "ValidationException" || errMsg(err) != "The provided Exclusive start key does not map to the provided segment" {
				t.Errorf("segment %d, start key of segment %d: %s %q", sg, from, errCode(err), errMsg(err))
			}
		}
	}
}

// TestExpressionParameterValidation checks the request-level checks of
// ExpressionAttributeNames/Values that DynamoDB makes before parsing any
// expression, across the operations that take them.
func TestExpressionParameterValidation(t *testing.T) {
	e := newEnv(t, engine.Options{})
	e.createTable("epv", "", nil)
	e.put("epv", item{"pk": S("a"), "n": N("1")})
	key := item{"pk": S("a")}
	names := map[string]string{"#n": "n"}
	values := item{":v": N("1")}
	const (
		namesOnly  = "ExpressionAttributeNames can only be specified when using expressions"
		valuesOnly = "ExpressionAttributeValues can only be specified when using expressions"
	)
	for _, c := range []struct {
		name string
		call func() error
		msg  string
	}{
		{"put names without expressions", func() error {
			_, err := e.db.PutItem(e.ctx, &dynamodb.PutItemInput{TableName: aws.String("epv"), Item: key, ExpressionAttributeNames: names})
			return err
		}, namesOnly},
		{"put values without expressions", func() error {
			_, err := e.db.PutItem(e.ctx, &dynamodb.PutItemInput{TableName: aws.String("epv"), Item: key, ExpressionAttributeValues: values})
			return err
		}, valuesOnly},
		{"put names with legacy Expected", func() error {
			_, err := e.db.PutItem(e.ctx, &dynamodb.PutItemInput{TableName: aws.String("epv"), Item: key, ExpressionAttributeNames: names,
				Expected: map[string]types.ExpectedAttributeValue{"n": {Exists: aws.Bool(true)}}})
			return err
		}, namesOnly},
		{"delete values without expressions", func() error {
			_, err := e.db.DeleteItem(e.ctx, &dynamodb.DeleteItemInput{TableName: aws.String("epv"), Key: key, ExpressionAttributeValues: values})
			return err
		}, valuesOnly},
		{"get names without projection", func() error {
			_, err := e.db.GetItem(e.ctx, &dynamodb.GetItemInput{TableName: aws.String("epv"), Key: key, ExpressionAttributeNames: names})
			return err
		}, namesOnly},
		{"delete names without expressions", func() error {
			_, err := e.db.DeleteItem(e.ctx, &dynamodb.DeleteItemInput{TableName: aws.String("epv"), Key: key, ExpressionAttributeNames: names})
			return err
		}, namesOnly},
		{"update with AttributeUpdates and values", func() error {
			_, err := e.db.UpdateItem(e.ctx, &dynamodb.UpdateItemInput{TableName: aws.String("epv"), Key: key, ExpressionAttributeValues: values,
				AttributeUpdates: map[string]types.AttributeValueUpdate{"n": {Value: N("2"), Action: types.AttributeActionPut}}})
			return err
		}, valuesOnly},
		{"scan names without expressions", func() error {
			_, err := e.db.Scan(e.ctx, &dynamodb.ScanInput{TableName: aws.String("epv"), ExpressionAttributeNames: names})
			return err
		}, namesOnly},
		{"batch get names without projection", func() error {
			_, err := e.db.BatchGetItem(e.ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
				"epv": {Keys: []map[string]types.AttributeValue{key}, ExpressionAttributeNames: names}}})
			return err
		}, namesOnly},
		{"transact get names without projection", func() error {
			_, err := e.db.TransactGetItems(e.ctx, &dynamodb.TransactGetItemsInput{TransactItems: []types.TransactGetItem{
				{Get: &types.Get{TableName: aws.String("epv"), Key: key, ExpressionAttributeNames: names}}}})
			return err
		}, namesOnly},
		{"transact put names without condition", func() error {
			_, err := e.db.TransactWriteItems(e.ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
				{Put: &types.Put{TableName: aws.String("epv"), Item: key, ExpressionAttributeNames: names}}}})
			return err
		}, namesOnly},
		{"empty names", func() error {
			_, err := e.db.GetItem(e.ctx, &dynamodb.GetItemInput{TableName: aws.String("epv"), Key: key, ProjectionExpression: aws.String("n"), ExpressionAttributeNames: map[string]string{}})
			return err
		}, "ExpressionAttributeNames must not be empty"},
		{"empty values", func() error {
			_, err := e.db.PutItem(e.ctx, &dynamodb.PutItemInput{TableName: aws.String("epv"), Item: key, ConditionExpression: aws.String("attribute_exists(pk)"), ExpressionAttributeValues: item{}})
			return err
		}, "ExpressionAttributeValues must not be empty"},
		{"empty number set value", func() error {
			_, err := e.db.PutItem(e.ctx, &dynamodb.PutItemInput{TableName: aws.String("epv"), Item: key, ConditionExpression: aws.String("n = :a OR n = :v"),
				ExpressionAttributeValues: item{":a": N("1"), ":v": &types.AttributeValueMemberNS{Value: []string{}}}})
			return err
		}, "ExpressionAttributeValues contains invalid value: One or more parameter values were invalid: An number set  may not be empty for key :v"},
		{"bad number value", func() error {
			_, err := e.db.UpdateItem(e.ctx, &dynamodb.UpdateItemInput{TableName: aws.String("epv"), Key: key, UpdateExpression: aws.String("SET n = :n"),
				ExpressionAttributeValues: item{":n": N("12x")}})
			return err
		}, "ExpressionAttributeValues contains invalid value: "},
	} {
		err := c.call()
		if errCode(err) != "ValidationException" || !strings.HasPrefix(errMsg(err), c.msg) {
			t.Errorf("%s: got %s %q, want %q", c.name, errCode(err), errMsg(err), c.msg)
		}
	}
	// The item is untouched by every rejected request.
	if it := e.get("epv", key); sOf(it, "n") != "1" {
		t.Fatalf("item changed: %v", it)
	}
	// A valid request with expressions still works.
	if _, err := e.db.UpdateItem(e.ctx, &dynamodb.UpdateItemInput{TableName: aws.String("epv"), Key: key, UpdateExpression: aws.String("SET #n = :v"),
		ExpressionAttributeNames: names, ExpressionAttributeValues: values}); err != nil {
		t.Fatal(err)
	}
}

// TestTransactMissingExpressionBeforeNames checks, over the raw wire (the
// SDK refuses to send such a request), that a ConditionCheck without its
// ConditionExpression is reported as such even when it carries names.
func TestTransactMissingExpressionBeforeNames(t *testing.T) {
	eng, err := engine.New(engine.Options{TTLInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	w := post(eng, "DynamoDB_20120810.TransactWriteItems",
		`{"TransactItems":[{"ConditionCheck":{"TableName":"abc","Key":{"pk":{"S":"a"}},"ExpressionAttributeNames":{"#n":"n"}}}]}`)
	if w.Code != 400 || !strings.Contains(w.Body.String(), "transactItems.1.member.conditionCheck.conditionExpression") {
		t.Fatalf("status %d body %s", w.Code, w.Body)
	}
}

// TestThrottledSingleRequestBatch: a throttled batch call that could
// process none of its requests fails with ProvisionedThroughputExceeded
// (the SDK retries it), as DynamoDB answers, instead of returning
// everything unprocessed.
func TestThrottledSingleRequestBatch(t *testing.T) {
	e := newEnv(t, engine.Options{})
	e.createTable("tsr", "", nil)
	noRetry := func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 }
	var tpe *types.ProvisionedThroughputExceededException

	e.eng.ThrottleBatchWrites(1)
	_, err := e.db.BatchWriteItem(e.ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{
		"tsr": {{PutRequest: &types.PutRequest{Item: item{"pk": S("one")}}}},
	}}, noRetry)
	if !errors.As(err, &tpe) {
		t.Fatalf("throttled one-request BatchWriteItem: %v, want ProvisionedThroughputExceededException", err)
	}
	if it := e.get("tsr", item{"pk": S("one")}); it != nil {
		t.Fatalf("the refused put was stored: %v", it)
	}
	// With its retries, the SDK gets through.
	e.eng.ThrottleBatchWrites(1)
	if _, err := e.db.BatchWriteItem(e.ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{
		"tsr": {{PutRequest: &types.PutRequest{Item: item{"pk": S("one")}}}},
	}}); err != nil {
		t.Fatal(err)
	}

	e.eng.ThrottleBatchGets(1)
	_, err = e.db.BatchGetItem(e.ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
		"tsr": {Keys: []map[string]types.AttributeValue{{"pk": S("one")}}},
	}}, noRetry)
	if !errors.As(err, &tpe) {
		t.Fatalf("throttled one-key BatchGetItem: %v, want ProvisionedThroughputExceededException", err)
	}
}
