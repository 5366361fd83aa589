package engine_test

import (
	"fmt"
	"sort"
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

	// A single request is handed back whole; the throttle is then spent.
	e.eng.ThrottleBatchWrites(1)
	one := map[string][]types.WriteRequest{"tbw1": {{PutRequest: &types.PutRequest{Item: item{"pk": S("solo")}}}}}
	out, err = e.db.BatchWriteItem(e.ctx, &dynamodb.BatchWriteItemInput{RequestItems: one})
	if err != nil || len(out.UnprocessedItems["tbw1"]) != 1 || sOf(out.UnprocessedItems["tbw1"][0].PutRequest.Item, "pk") != "solo" {
		t.Fatalf("single throttled: %v %+v", err, out)
	}
	out, err = e.db.BatchWriteItem(e.ctx, &dynamodb.BatchWriteItemInput{RequestItems: one})
	if err != nil || len(out.UnprocessedItems) != 0 || e.get("tbw1", item{"pk": S("solo")}) == nil {
		t.Fatalf("after throttle: %v %+v", err, out)
	}
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
