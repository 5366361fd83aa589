package engine_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ttl-archiver/archiver/engine"
)

// addOne is a one-action transaction adding one to counter n of item pk
// under token, with the increment spelled one.
func addOne(table, token, one string) *dynamodb.TransactWriteItemsInput {
	return &dynamodb.TransactWriteItemsInput{
		ClientRequestToken:     aws.String(token),
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
		TransactItems: []types.TransactWriteItem{{Update: &types.Update{TableName: aws.String(table), Key: item{"pk": S("c")},
			UpdateExpression: aws.String("ADD n :one"), ExpressionAttributeValues: item{":one": N(one)}}}},
	}
}

// TestTransactClientRequestToken checks TransactWriteItems' idempotency
// window: a second call with the first one's token, within 10 minutes by
// the engine clock, is not applied again when its TransactItems are the
// same (numbers compared as numbers) and is refused when they differ;
// after 10 minutes the token is forgotten and the call applies.
func TestTransactClientRequestToken(t *testing.T) {
	cases := []struct {
		name     string
		wait     time.Duration
		one      string // the second call's increment
		wantCode string
		wantN    string // the counter after both calls
	}{
		{"same items replay", 0, "1", "", "1"},
		{"same number spelled otherwise", time.Minute, "1.0", "", "1"},
		{"other items", 0, "2", "IdempotentParameterMismatchException", "1"},
		{"other items near the end of the window", 10*time.Minute - time.Second, "2", "IdempotentParameterMismatchException", "1"},
		{"same items near the end of the window", 10*time.Minute - time.Second, "1", "", "1"},
		{"same items after 10 minutes", 10 * time.Minute, "1", "", "2"},
		{"other items after 10 minutes", 11 * time.Minute, "2", "", "3"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, engine.Options{})
			e.createTable("tok", "", nil)
			first, err := e.db.TransactWriteItems(e.ctx, addOne("tok", "token-1", "1"))
			if err != nil {
				t.Fatal(err)
			}
			if cc := first.ConsumedCapacity; len(cc) != 1 || aws.ToFloat64(cc[0].WriteCapacityUnits) != 2 {
				t.Fatalf("first call's ConsumedCapacity = %+v, want 2 write units", cc)
			}
			e.clock.Advance(c.wait)
			second, err := e.db.TransactWriteItems(e.ctx, addOne("tok", "token-1", c.one))
			if errCode(err) != c.wantCode {
				t.Fatalf("second call: %v, want %q", err, c.wantCode)
			}
			if got := sOf(e.get("tok", item{"pk": S("c")}), "n"); got != c.wantN {
				t.Fatalf("counter = %s, want %s", got, c.wantN)
			}
			if err != nil || c.wantN != "1" {
				return
			}
			// A replay consumes read units, as DynamoDB documents.
			if cc := second.ConsumedCapacity; len(cc) != 1 || aws.ToFloat64(cc[0].ReadCapacityUnits) != 2 || cc[0].WriteCapacityUnits != nil {
				t.Fatalf("replay's ConsumedCapacity = %+v, want 2 read units", cc)
			}
		})
	}
}

// TestTransactTokenMismatchMessage checks the mismatch's error text.
func TestTransactTokenMismatchMessage(t *testing.T) {
	e := newEnv(t, engine.Options{})
	e.createTable("tokm", "", nil)
	if _, err := e.db.TransactWriteItems(e.ctx, addOne("tokm", "t", "1")); err != nil {
		t.Fatal(err)
	}
	_, err := e.db.TransactWriteItems(e.ctx, addOne("tokm", "t", "3"))
	var ipm *types.IdempotentParameterMismatchException
	if !asErr(err, &ipm) || !strings.Contains(errMsg(err), "different payload") {
		t.Fatalf("mismatch: %v", err)
	}
}

// TestTransactTokenKeyOrder sends, over the raw wire, the same
// transaction twice with its JSON keys in another order: it is the same
// request, replayed, not applied twice.
func TestTransactTokenKeyOrder(t *testing.T) {
	e := newEnv(t, engine.Options{})
	e.createTable("tokk", "", nil)
	bodies := []string{
		`{"ClientRequestToken":"k","TransactItems":[{"Update":{"TableName":"tokk","Key":{"pk":{"S":"c"}},"UpdateExpression":"ADD n :one SET #a = :a","ExpressionAttributeNames":{"#a":"a"},"ExpressionAttributeValues":{":one":{"N":"1"},":a":{"M":{"x":{"S":"1"},"y":{"N":"2"}}}}}}]}`,
		`{"TransactItems":[{"Update":{"ExpressionAttributeValues":{":a":{"M":{"y":{"N":"2.0"},"x":{"S":"1"}}},":one":{"N":"1"}},"ExpressionAttributeNames":{"#a":"a"},"UpdateExpression":"ADD n :one SET #a = :a","Key":{"pk":{"S":"c"}},"TableName":"tokk"}}],"ClientRequestToken":"k"}`,
	}
	for i, b := range bodies {
		if w := post(e.eng, "DynamoDB_20120810.TransactWriteItems", b); w.Code != 200 {
			t.Fatalf("call %d: %d %s", i, w.Code, w.Body)
		}
	}
	if got := sOf(e.get("tokk", item{"pk": S("c")}), "n"); got != "1" {
		t.Fatalf("counter = %s after a replay, want 1", got)
	}
}

// TestTransactTokenAfterCancel checks that a canceled transaction leaves
// its token free: the retry, once the condition holds, applies.
func TestTransactTokenAfterCancel(t *testing.T) {
	e := newEnv(t, engine.Options{})
	e.createTable("tokc", "", nil)
	in := addOne("tokc", "tc", "1")
	in.TransactItems[0].Update.ConditionExpression = aws.String("attribute_exists(ready)")
	var tce *types.TransactionCanceledException
	if _, err := e.db.TransactWriteItems(e.ctx, in); !asErr(err, &tce) {
		t.Fatalf("first call: %v, want TransactionCanceledException", err)
	}
	e.put("tokc", item{"pk": S("c"), "ready": BOOL(true)})
	if _, err := e.db.TransactWriteItems(e.ctx, in); err != nil {
		t.Fatal(err)
	}
	if got := sOf(e.get("tokc", item{"pk": S("c")}), "n"); got != "1" {
		t.Fatalf("counter = %s, want 1", got)
	}
}

// TestTransactTokenInProgress holds the table's lock so that a
// transaction waits inside the engine with its token claimed: another
// call with that token meanwhile gets TransactionInProgressException, and
// the waiting one completes once the lock is released.
func TestTransactTokenInProgress(t *testing.T) {
	e := newEnv(t, engine.Options{})
	e.createTable("tokp", "", nil)
	unlock := e.eng.LockTableForTest("tokp")
	noRetry := func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 }
	errs := make(chan error, 2)
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := e.db.TransactWriteItems(e.ctx, addOne("tokp", "tp", "1"), noRetry)
			errs <- err
		}()
	}
	// One call claims the token and waits for the lock; the other is
	// refused at once.
	if err := <-errs; errCode(err) != "TransactionInProgressException" || errMsg(err) != "Transaction from previous request is still in progress" {
		unlock()
		t.Fatalf("concurrent call: %v", err)
	}
	unlock()
	wg.Wait()
	if err := <-errs; err != nil {
		t.Fatalf("waiting call: %v", err)
	}
	if got := sOf(e.get("tokp", item{"pk": S("c")}), "n"); got != "1" {
		t.Fatalf("counter = %s, want 1", got)
	}
}

// TestTransactTokenLength checks ClientRequestToken's 1..36 characters.
func TestTransactTokenLength(t *testing.T) {
	e := newEnv(t, engine.Options{})
	e.createTable("tokl", "", nil)
	cases := []struct {
		token   string
		wantMsg string // "" for success
	}{
		{strings.Repeat("a", 36), ""},
		{strings.Repeat("é", 36), ""},
		{strings.Repeat("a", 37), "1 validation error detected: Value '" + strings.Repeat("a", 37) + "' at 'clientRequestToken' failed to satisfy constraint: Member must have length less than or equal to 36"},
		{"", "1 validation error detected: Value '' at 'clientRequestToken' failed to satisfy constraint: Member must have length greater than or equal to 1"},
	}
	for _, c := range cases {
		_, err := e.db.TransactWriteItems(e.ctx, addOne("tokl", c.token, "1"))
		if c.wantMsg == "" && err != nil || c.wantMsg != "" && (errCode(err) != "ValidationException" || errMsg(err) != c.wantMsg) {
			t.Errorf("token of %d bytes: %v, want %q", len(c.token), err, c.wantMsg)
		}
	}
}

// TestTransactGetSameItemTwice checks that TransactGetItems refuses two
// gets of one item (the same key of the same table) as TransactWriteItems
// refuses two operations on one (numbers compared as numbers), and
// accepts the same key in two tables.
func TestTransactGetSameItemTwice(t *testing.T) {
	e := newEnv(t, engine.Options{})
	e.createTable("tg1", "N", nil)
	e.createTable("tg2", "N", nil)
	get := func(table, sk string) types.TransactGetItem {
		return types.TransactGetItem{Get: &types.Get{TableName: aws.String(table), Key: item{"pk": S("a"), "sk": N(sk)}}}
	}
	cases := []struct {
		name    string
		gets    []types.TransactGetItem
		wantErr bool
	}{
		{"same key twice", []types.TransactGetItem{get("tg1", "1"), get("tg1", "1")}, true},
		{"same number spelled otherwise", []types.TransactGetItem{get("tg1", "1"), get("tg2", "2"), get("tg1", "1.0")}, true},
		{"same key in two tables", []types.TransactGetItem{get("tg1", "1"), get("tg2", "1")}, false},
		{"two keys of a partition", []types.TransactGetItem{get("tg1", "1"), get("tg1", "2")}, false},
	}
	for _, c := range cases {
		_, err := e.db.TransactGetItems(e.ctx, &dynamodb.TransactGetItemsInput{TransactItems: c.gets})
		if c.wantErr && (errCode(err) != "ValidationException" || errMsg(err) != "Transaction request cannot include multiple operations on one item") || !c.wantErr && err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

// TestTransactAggregateSize checks DynamoDB's 4 MB limit on the items of
// one TransactWriteItems: ten puts of 400 KB pass, eleven of 390 KB are
// refused whole, and so are ten deletes of 400 KB items with a put.
func TestTransactAggregateSize(t *testing.T) {
	e := newEnv(t, engine.Options{})
	e.createTable("tsz", "", nil)
	puts := func(n, size int, prefix string) []types.TransactWriteItem {
		var out []types.TransactWriteItem
		for i := 0; i < n; i++ {
			pk := fmt.Sprintf("%s%02d", prefix, i)
			// pk (2 + 3 bytes) and v (1 + the rest) make size bytes.
			out = append(out, types.TransactWriteItem{Put: &types.Put{TableName: aws.String("tsz"),
				Item: item{"pk": S(pk), "v": S(strings.Repeat("x", size-len(pk)-3))}}})
		}
		return out
	}
	if _, err := e.db.TransactWriteItems(e.ctx, &dynamodb.TransactWriteItemsInput{TransactItems: puts(10, 400*1024, "a")}); err != nil {
		t.Fatalf("10 x 400 KB: %v", err)
	}
	_, err := e.db.TransactWriteItems(e.ctx, &dynamodb.TransactWriteItemsInput{TransactItems: puts(11, 390*1024, "b")})
	if errCode(err) != "ValidationException" || !strings.Contains(errMsg(err), "4MB limit") {
		t.Fatalf("11 x 390 KB: %v", err)
	}
	if it := e.get("tsz", item{"pk": S("b00")}); it != nil {
		t.Fatalf("a refused transaction wrote %v", sOf(it, "pk"))
	}
	// A delete counts the stored item it removes.
	var dels []types.TransactWriteItem
	for i := 0; i < 10; i++ {
		dels = append(dels, types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String("tsz"), Key: item{"pk": S(fmt.Sprintf("a%02d", i))}}})
	}
	dels = append(dels, puts(1, 200*1024, "c")...)
	if _, err := e.db.TransactWriteItems(e.ctx, &dynamodb.TransactWriteItemsInput{TransactItems: dels}); errCode(err) != "ValidationException" {
		t.Fatalf("10 deletes of 400 KB and a put of 200 KB: %v", err)
	}
}

// TestTransactReplayMetrics checks that a replay asking for
// ItemCollectionMetrics gets the first call's, even when the first call
// did not ask, and that a replay's ConsumedCapacity follows its own
// ReturnConsumedCapacity.
func TestTransactReplayMetrics(t *testing.T) {
	e := newEnv(t, engine.Options{})
	e.createTable("tokr", "S", withLSIs)
	in := &dynamodb.TransactWriteItemsInput{ClientRequestToken: aws.String("r"), TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{TableName: aws.String("tokr"), Item: item{"pk": S("p"), "sk": S("a"), "v": S("x")}}},
	}}
	first, err := e.db.TransactWriteItems(e.ctx, in)
	if err != nil || first.ItemCollectionMetrics != nil || first.ConsumedCapacity != nil {
		t.Fatalf("first call: %+v, %v", first, err)
	}
	in.ReturnItemCollectionMetrics = types.ReturnItemCollectionMetricsSize
	in.ReturnConsumedCapacity = types.ReturnConsumedCapacityIndexes
	again, err := e.db.TransactWriteItems(e.ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if m := again.ItemCollectionMetrics["tokr"]; len(m) != 1 || sOf(m[0].ItemCollectionKey, "pk") != "p" {
		t.Fatalf("replay's ItemCollectionMetrics = %v", again.ItemCollectionMetrics)
	}
	if cc := again.ConsumedCapacity; len(cc) != 1 || cc[0].Table == nil || aws.ToFloat64(cc[0].Table.ReadCapacityUnits) != 2 {
		t.Fatalf("replay's ConsumedCapacity = %+v", cc)
	}
}
