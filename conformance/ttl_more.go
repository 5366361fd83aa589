package conformance

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/awserr"
)

// ttlRecordChecks are the checks of what a TTL deletion leaves behind: its
// stream record, the indexes, and the item until the deletion comes.
func ttlRecordChecks() []Check {
	return []Check{
		{Name: "ttl-service-identity", Run: checkServiceIdentity,
			Asserts: "a TTL deletion's REMOVE record has userIdentity Type \"Service\", PrincipalId \"dynamodb.amazonaws.com\"; a DeleteItem's REMOVE has none"},
		{Name: "ttl-old-image", Run: checkOldImage,
			Asserts: "a TTL deletion's REMOVE record (NEW_AND_OLD_IMAGES) carries the key and the whole item as OldImage, every type intact, and no NewImage"},
		{Name: "ttl-indexes", Run: checkIndexes,
			Asserts: "a TTL deletion removes the item from every global and local secondary index; an unexpired item stays in both"},
		{Name: "ttl-expired-readable", Run: checkExpiredReadable,
			Asserts: "an expired item not yet deleted is returned by GetItem, Query and Scan and can be updated; an update moving its TTL ahead keeps it"},
	}
}

// expireWithStream writes its, the first of which has expired, into a new
// table with a NEW_AND_OLD_IMAGES stream and TTL, runs then (may be nil)
// and waits for the TTL deletion of the first. It returns the table, its
// stream and the deletion's delay.
func (e *Env) expireWithStream(ctx context.Context, its []item, then func(table string) error) (string, string, time.Duration, *Outcome) {
	table, arn, err := e.table(ctx, e.DynamoDB, tableSpec{ttl: true, stream: types.StreamViewTypeNewAndOldImages})
	if err != nil {
		o := failed("creating the table", err)
		return "", "", 0, &o
	}
	for _, it := range its {
		if err := put(ctx, e.DynamoDB, table, it); err != nil {
			o := failed("writing", err)
			return "", "", 0, &o
		}
	}
	if then != nil {
		if err := then(table); err != nil {
			o := failed("writing", err)
			return "", "", 0, &o
		}
	}
	delay, bad := e.awaitExpiry(ctx, e.DynamoDB, table, describeKey(its[0]))
	return table, arn, delay, bad
}

func checkServiceIdentity(ctx context.Context, e *Env) Outcome {
	now, err := e.now(ctx)
	if err != nil {
		return failed("reading the engine's clock", err)
	}
	del := func(table string) error {
		_, err := e.DynamoDB.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &table, Key: key("user")})
		return err
	}
	_, arn, delay, bad := e.expireWithStream(ctx, []item{expiring("expired", now.Add(-expiredAgo).Unix()), key("user")}, del)
	if bad != nil {
		return *bad
	}
	recs, err := e.awaitRecords(ctx, e.Streams, arn, "the REMOVE records of the TTL deletion and of DeleteItem", has(stypes.OperationTypeRemove, "expired", "user"))
	if err != nil {
		return failed("reading the stream", err)
	}
	ttl, user := find(recs, stypes.OperationTypeRemove, "expired"), find(recs, stypes.OperationTypeRemove, "user")
	if !event.IsTTLDelete(ttl) {
		return failf("the TTL deletion's REMOVE has userIdentity %s, want Type \"Service\", PrincipalId \"dynamodb.amazonaws.com\"", identity(ttl.UserIdentity))
	}
	if user.UserIdentity != nil {
		return failf("DeleteItem's REMOVE has userIdentity %s, want none (only TTL's deletions carry one)", identity(user.UserIdentity))
	}
	return Outcome{Status: Pass, Delay: delay, Detail: "TTL's REMOVE names Service dynamodb.amazonaws.com; DeleteItem's REMOVE has no userIdentity"}
}

// identity shows a userIdentity for a detail.
func identity(id *stypes.Identity) string {
	if id == nil {
		return "none"
	}
	return fmt.Sprintf("Type %q, PrincipalId %q", aws.ToString(id.Type), aws.ToString(id.PrincipalId))
}

func checkOldImage(ctx context.Context, e *Env) Outcome {
	now, err := e.now(ctx)
	if err != nil {
		return failed("reading the engine's clock", err)
	}
	it := richItem("expired", now.Add(-expiredAgo).Unix())
	_, arn, delay, bad := e.expireWithStream(ctx, []item{it}, nil)
	if bad != nil {
		return *bad
	}
	recs, err := e.awaitRecords(ctx, e.Streams, arn, "the TTL deletion's REMOVE record", has(stypes.OperationTypeRemove, "expired"))
	if err != nil {
		return failed("reading the stream", err)
	}
	d := find(recs, stypes.OperationTypeRemove, "expired").Dynamodb
	switch {
	case d == nil:
		return failf("the REMOVE record has no dynamodb member")
	case !sameItem(event.ToDynamoDB(d.Keys), key("expired")):
		return failf("the REMOVE's Keys are %s, want %s", show(event.ToDynamoDB(d.Keys)), show(key("expired")))
	case len(d.OldImage) == 0:
		return failf("the REMOVE has no OldImage (the stream's view type is NEW_AND_OLD_IMAGES)")
	case !sameItem(event.ToDynamoDB(d.OldImage), it):
		return failf("the REMOVE's OldImage is %s, want the item %s", show(event.ToDynamoDB(d.OldImage)), show(it))
	case len(d.NewImage) > 0:
		return failf("the REMOVE has a NewImage %s, want none", show(event.ToDynamoDB(d.NewImage)))
	}
	return Outcome{Status: Pass, Delay: delay, Detail: fmt.Sprintf("Keys and an OldImage of %d attributes of every type, no NewImage", len(it))}
}

// richItem is the item id with an attribute of every type besides its TTL.
func richItem(id string, ttl int64) item {
	return item{"pk": str(id), "sk": str("0"), ttlAttr: num(ttl),
		"s": str("text"), "n": &types.AttributeValueMemberN{Value: "3.25"}, "b": &types.AttributeValueMemberB{Value: []byte{0, 1, 2}},
		"bool": &types.AttributeValueMemberBOOL{Value: true}, "null": &types.AttributeValueMemberNULL{Value: true},
		"ss": &types.AttributeValueMemberSS{Value: []string{"a", "b"}}, "ns": &types.AttributeValueMemberNS{Value: []string{"1", "2"}},
		"bs": &types.AttributeValueMemberBS{Value: [][]byte{{1}, {2}}},
		"l":  &types.AttributeValueMemberL{Value: []types.AttributeValue{str("x"), num(1)}},
		"m":  &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"k": str("v"), "deep": &types.AttributeValueMemberL{}}}}
}

func checkIndexes(ctx context.Context, e *Env) Outcome {
	table, _, err := e.table(ctx, e.DynamoDB, tableSpec{ttl: true, indexes: true})
	if err != nil {
		return failed("creating the table", err)
	}
	now, err := e.now(ctx)
	if err != nil {
		return failed("reading the engine's clock", err)
	}
	// Both start a day ahead, so that both are seen in the indexes
	// before one expires.
	for _, id := range []string{"expiring", "kept"} {
		it := expiring(id, now.Add(24*time.Hour).Unix())
		it["g"], it["l"] = str("g-"+id), str("l-"+id)
		if err := put(ctx, e.DynamoDB, table, it); err != nil {
			return failed("writing", err)
		}
	}
	ix := indexQueries{e: e, table: table}
	if err := ix.await(ctx, map[string]bool{"expiring": true, "kept": true}); err != nil {
		return failed("before the expiry", err)
	}
	_, err = e.DynamoDB.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &table, Key: key("expiring"),
		UpdateExpression:          aws.String("SET #t = :t"),
		ExpressionAttributeNames:  map[string]string{"#t": ttlAttr},
		ExpressionAttributeValues: item{":t": num(now.Add(-expiredAgo).Unix())}})
	if err != nil {
		return failed("UpdateItem moving the TTL into the past", err)
	}
	delay, bad := e.awaitExpiry(ctx, e.DynamoDB, table, "expiring")
	if bad != nil {
		return *bad
	}
	if err := ix.await(ctx, map[string]bool{"expiring": false, "kept": true}); err != nil {
		return failed("after the TTL deletion", err)
	}
	return Outcome{Status: Pass, Delay: delay, Detail: "the deleted item left the GSI and the LSI; the unexpired one stayed in both"}
}

// indexQueries asks a table's two indexes whether they hold items.
type indexQueries struct {
	e     *Env
	table string
}

// await polls both indexes until each holds exactly the items want marks
// true (a GSI is eventually consistent) or the bound passes.
func (q indexQueries) await(ctx context.Context, want map[string]bool) error {
	var last string
	_, err := q.e.waitFor(ctx, q.e.Bound, false, func(ctx context.Context) error {
		for id, in := range want {
			g, err := q.count(ctx, gsiName, "g", "g-"+id, nil)
			if err != nil {
				return err
			}
			l, err := q.count(ctx, lsiName, "pk", id, aws.Bool(true))
			if err != nil {
				return err
			}
			if (g == 1) != in || (l == 1) != in {
				last = fmt.Sprintf("%s: %d entries in the GSI, %d in the LSI; want %d", id, g, l, map[bool]int{true: 1}[in])
				return errNotYet
			}
		}
		return nil
	})
	if errors.Is(err, errNotYet) {
		return fmt.Errorf("not within the bound (%v): %s", q.e.Bound, last)
	}
	return err
}

// count is how many items a Query of index finds where attr = value.
func (q indexQueries) count(ctx context.Context, index, attr, value string, consistent *bool) (int, error) {
	out, err := q.e.DynamoDB.Query(ctx, &dynamodb.QueryInput{TableName: &q.table, IndexName: &index, ConsistentRead: consistent,
		KeyConditionExpression: aws.String("#a = :v"), ExpressionAttributeNames: map[string]string{"#a": attr},
		ExpressionAttributeValues: item{":v": str(value)}})
	if err != nil {
		return 0, fmt.Errorf("Query %s: %w", index, err)
	}
	return len(out.Items), nil
}

// readableTries is how often ttl-expired-readable writes an expired item
// before it concludes that the endpoint hides or deletes expired items at
// once: a sweeper may take one between its write and the reads, now and
// then, but not every time.
const readableTries = 5

func checkExpiredReadable(ctx context.Context, e *Env) Outcome {
	table, _, err := e.table(ctx, e.DynamoDB, tableSpec{ttl: true})
	if err != nil {
		return failed("creating the table", err)
	}
	now, err := e.now(ctx)
	if err != nil {
		return failed("reading the engine's clock", err)
	}
	var why []string
	for try := range readableTries {
		id := fmt.Sprintf("expired-%d", try)
		miss, err := readAndSave(ctx, e.DynamoDB, table, id, now)
		if err != nil {
			return failed("reading the expired item", err)
		}
		if miss != "" {
			why = append(why, miss)
			continue
		}
		return keptAfterSave(ctx, e, table, id, now)
	}
	return failf("an expired item was gone before it could be read and updated, %d times out of %d: %s", readableTries, readableTries, why[0])
}

// readAndSave writes id expired, reads it with GetItem, Query and Scan,
// then updates it (only if it still exists) to a TTL a day ahead. It
// returns what missed it ("" when nothing did).
func readAndSave(ctx context.Context, db *dynamodb.Client, table, id string, now time.Time) (string, error) {
	if err := put(ctx, db, table, expiring(id, now.Add(-expiredAgo).Unix())); err != nil {
		return "", err
	}
	it, err := get(ctx, db, table, id)
	if err != nil || it == nil {
		return "GetItem found nothing", err
	}
	q, err := db.Query(ctx, &dynamodb.QueryInput{TableName: &table, ConsistentRead: aws.Bool(true),
		KeyConditionExpression: aws.String("pk = :p"), ExpressionAttributeValues: item{":p": str(id)}})
	if err != nil || len(q.Items) == 0 {
		return "Query found nothing", wrap("Query", err)
	}
	s, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: &table, ConsistentRead: aws.Bool(true),
		FilterExpression: aws.String("pk = :p"), ExpressionAttributeValues: item{":p": str(id)}})
	if err != nil || len(s.Items) == 0 {
		return "Scan found nothing", wrap("Scan", err)
	}
	_, err = db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &table, Key: key(id),
		ConditionExpression:       aws.String("attribute_exists(pk)"),
		UpdateExpression:          aws.String("SET #t = :t, saved = :y"),
		ExpressionAttributeNames:  map[string]string{"#t": ttlAttr},
		ExpressionAttributeValues: item{":t": num(now.Add(24 * time.Hour).Unix()), ":y": &types.AttributeValueMemberBOOL{Value: true}}})
	if awserr.IsConditionFailed(err) {
		return "gone before UpdateItem (its condition attribute_exists(pk) failed)", nil
	}
	return "", wrap("UpdateItem", err)
}

func wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}

// keptAfterSave checks that the saved item id outlives an item that
// expires beside it.
func keptAfterSave(ctx context.Context, e *Env, table, id string, now time.Time) Outcome {
	if err := put(ctx, e.DynamoDB, table, expiring("control", now.Add(-expiredAgo).Unix())); err != nil {
		return failed("writing the control item", err)
	}
	delay, bad := e.awaitExpiry(ctx, e.DynamoDB, table, "control")
	if bad != nil {
		return *bad
	}
	deleted, err := e.deletedWithin(ctx, e.DynamoDB, table, []string{id}, e.watchFor(delay))
	if err != nil {
		return failed("watching the saved item", err)
	}
	if len(deleted) > 0 {
		return failf("the expired item was read and its TTL moved a day ahead, yet TTL deleted it")
	}
	return Outcome{Status: Pass, Delay: delay,
		Detail: "GetItem, Query and Scan returned the expired item; UpdateItem moved its TTL ahead and it outlived a later expiry"}
}
