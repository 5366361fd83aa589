package deploy

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/event"
)

func attrS(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func attrN(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }

// athenaEvent is one stream record of the test archive.
func athenaEvent(table, shard string, seq int, kind event.Kind, at time.Time, keys event.Item) event.Event {
	names := map[event.Kind]string{event.Inserted: "INSERT", event.Modified: "MODIFY", event.Expired: "REMOVE", event.Deleted: "REMOVE"}
	// sessions is read in us-east-1, its lines naming their Region;
	// carts in eu-west-1, its lines as written before lines named it
	// (the view takes the Region from streamArn).
	region := "us-east-1"
	if table == "carts" {
		region = "eu-west-1"
	}
	e := event.Event{
		Kind:                    kind,
		Table:                   table,
		StreamARN:               "arn:aws:dynamodb:" + region + ":000000000000:table/" + table + "/stream/2025-01-01T00:00:00.000",
		ShardID:                 shard,
		SequenceNumber:          strconv.Itoa(seq), // lengths differ: stream_order sorts them
		EventID:                 fmt.Sprintf("%s-%d", table, seq),
		EventName:               names[kind],
		ApproximateCreationTime: at,
		Keys:                    keys,
		SizeBytes:               100,
	}
	if e.EventName == "REMOVE" {
		e.DeletedBy = event.DeletedByOther
	}
	if table != "carts" {
		e.Region = region
	}
	return e
}

// expire makes e an expiry lag after its TTL, with the TTL attribute in
// its old image, deleted by DynamoDB's TTL process.
func expire(e event.Event, image event.Item, lag time.Duration) event.Event {
	ttl := e.ApproximateCreationTime.Add(-lag)
	e.TTLAttribute = "expiresAt"
	e.TTLValue = strconv.FormatInt(ttl.Unix(), 10)
	e.TTLTime = ttl
	e.TTLLag = lag
	e.DeletedBy = event.DeletedByTTL
	e.OldImage = image
	e.OldImage["expiresAt"] = attrN(e.TTLValue)
	return e
}

// athenaBatches is the test archive, batch by batch in stream order per
// shard:
//   - sessions, day 1: user#7 inserted at 01:10 and modified at 02:20
//     (plan free, then pro), two items deleted by someone else, then 100
//     expiries user#1..user#100 at 03:01..04:40 (hours 03 and 04) with
//     lags of 1..99 s and 100.5 s, every tenth deleted by another
//     principal; the expiries at 03:50..03:59 are delivered twice (the
//     third batch starts again at user#50, as after a crash);
//   - sessions, day 2: three expiries, lags 10, 20, 30 s;
//   - carts, day 1 hour 12: five expiries keyed (cartId, version), lags 0,
//     2, 4, 6, 8 s, and one keys-only expiry with no TTL known;
//   - the day 2 expiries again, as the table's replica in eu-west-1
//     archived them a second later (one expiry each, archived twice).
func athenaBatches() [][]event.Event {
	const sessions, s1 = "sessions", "shardId-00000001"
	user := func(i int) event.Item { return event.Item{"pk": attrS(fmt.Sprintf("user#%d", i))} }
	image := func(i int, plan string) event.Item {
		return event.Item{"pk": attrS(fmt.Sprintf("user#%d", i)), "plan": attrS(plan)}
	}
	day1 := athenaDay1
	// user#7's TTL, 03:06:53: it expires at 03:07 with a lag of 7 s.
	ttl7 := attrN(strconv.FormatInt(day1.Add(3*time.Hour+7*time.Minute-7*time.Second).Unix(), 10))
	ins := athenaEvent(sessions, s1, 1, event.Inserted, day1.Add(70*time.Minute), user(7))
	ins.NewImage = image(7, "free")
	ins.NewImage["expiresAt"] = ttl7
	mod := athenaEvent(sessions, s1, 2, event.Modified, day1.Add(140*time.Minute), user(7))
	mod.OldImage, mod.NewImage = ins.NewImage, image(7, "pro")
	mod.NewImage["expiresAt"] = ttl7
	first := []event.Event{ins, mod}
	for i := 500; i < 502; i++ {
		del := athenaEvent(sessions, s1, i-497, event.Deleted, day1.Add(150*time.Minute+time.Duration(i)*time.Second), user(i))
		del.OldImage = image(i, "free")
		first = append(first, del)
	}
	expired := func(from, to int) []event.Event {
		var evs []event.Event
		for i := from; i <= to; i++ {
			at, lag := day1.Add(3*time.Hour+time.Duration(i)*time.Minute), time.Duration(i)*time.Second
			if i == 100 {
				at, lag = at.Add(500*time.Millisecond), lag+500*time.Millisecond
			}
			e := expire(athenaEvent(sessions, s1, 1000+i, event.Expired, at, user(i)), image(i, "pro"), lag)
			if i%10 == 0 {
				e.DeletedBy = event.DeletedByOther // a sweeper, under --expired-when past-ttl
			}
			evs = append(evs, e)
		}
		return evs
	}
	var day2 []event.Event
	for i := 1; i <= 3; i++ {
		at := athenaDay2.Add(time.Duration(i) * 10 * time.Second)
		day2 = append(day2, expire(athenaEvent(sessions, s1, 2000+i, event.Expired, at, user(200+i)), image(200+i, "free"), time.Duration(i)*10*time.Second))
	}

	const carts, s2 = "carts", "shardId-00000002"
	var cartEvents []event.Event
	for k := 0; k < 6; k++ {
		keys := event.Item{"cartId": attrS(fmt.Sprintf("cart#%d", k)), "version": attrN("2")}
		e := athenaEvent(carts, s2, 10+k, event.Expired, day1.Add(12*time.Hour+time.Duration(k)*time.Minute), keys)
		if k < 5 {
			img := event.Item{"cartId": keys["cartId"], "version": keys["version"], "cart-total": attrN(fmt.Sprintf("%d.99", 16+k))}
			e = expire(e, img, time.Duration(2*k)*time.Second)
		} else {
			e.DeletedBy = event.DeletedByTTL // keys-only: no image, no TTL
		}
		cartEvents = append(cartEvents, e)
	}
	return [][]event.Event{first, expired(1, 59), expired(50, 100), day2, cartEvents, otherRegion(day2)}
}

// otherRegion is evs as a global table's replica in eu-west-1 archives
// them under --expired-when past-ttl: the same expiries (items, keys,
// TTLs), its own records of them a second later (another shard, event
// IDs, no TTL principal).
func otherRegion(evs []event.Event) []event.Event {
	out := make([]event.Event, len(evs))
	for i, e := range evs {
		e.StreamARN = strings.Replace(e.StreamARN, ":us-east-1:", ":eu-west-1:", 1)
		e.Region, e.ShardID, e.EventID = "eu-west-1", "shardId-00000009", "west-"+e.EventID
		e.ApproximateCreationTime, e.TTLLag = e.ApproximateCreationTime.Add(time.Second), e.TTLLag+time.Second
		e.DeletedBy = event.DeletedByOther
		out[i] = e
	}
	return out
}
