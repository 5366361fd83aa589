package sweep

import (
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// maxTTLMillis is the last millisecond of the year 9999: later TTLs are
// filed in the window holding it.
var maxTTLMillis = time.Date(9999, 12, 31, 23, 59, 59, 999e6, time.UTC).UnixMilli()

// fiveYears is how far before now a TTL may lie and still expire:
// DynamoDB's TTL ignores older values (0 and negative ones among them),
// and so does the sweeper. The engine and the consumer's past-ttl rule
// use the same length.
const fiveYears = 5 * 365 * 24 * time.Hour

// tooOldMargin is how much younger than five years a TTL must be for a
// delete to be sent. The consumer's past-ttl rule measures the five years
// from the delete's stream record, a little after the sweeper's clock was
// read (the request, its retries, the skew the clock check allows): the
// margin keeps every delete the sweeper makes an expiry by that rule, at
// the price of leaving the items in the last minute of their five years
// to DynamoDB's TTL.
const tooOldMargin = time.Minute

// epochNumber renders epoch milliseconds as a DynamoDB Number of epoch
// seconds ("1658266025.123", "-1.500").
func epochNumber(ms int64) string {
	sign := ""
	if ms < 0 {
		sign, ms = "-", -ms
	}
	return fmt.Sprintf("%s%d.%03d", sign, ms/1000, ms%1000)
}

// oldestTTL is the oldest TTL the sweeper deletes at now: five years
// before it, less tooOldMargin.
func oldestTTL(now time.Time) time.Time { return now.Add(-fiveYears + tooOldMargin) }

// tooOld reports whether av is a Number TTL older than oldest.
func tooOld(av types.AttributeValue, oldest time.Time) bool {
	ttl, ok := parseTTL(av)
	return ok && ttl.rat.Cmp(big.NewRat(oldest.UnixMilli(), 1000)) < 0
}

// ttlValue is an item's TTL attribute.
type ttlValue struct {
	av  types.AttributeValue // as read: the re-file's condition
	rat *big.Rat             // epoch seconds, exactly
	ms  int64                // epoch milliseconds, rounded down, within 1970..9999
}

// parseTTL reads a TTL attribute; ok is false unless it is a Number.
func parseTTL(av types.AttributeValue) (v ttlValue, ok bool) {
	n, isN := av.(*types.AttributeValueMemberN)
	if !isN {
		return v, false
	}
	rat, ok := new(big.Rat).SetString(n.Value)
	if !ok {
		return v, false
	}
	ms := new(big.Int).Mul(rat.Num(), big.NewInt(1000))
	ms.Div(ms, rat.Denom()) // Euclidean: rounds down, as Denom > 0
	v = ttlValue{av: av, rat: rat, ms: maxTTLMillis}
	switch {
	case ms.Sign() < 0:
		v.ms = 0
	case ms.IsInt64() && ms.Int64() < maxTTLMillis:
		v.ms = ms.Int64()
	}
	return v, true
}

// keyOf is the table key of an item read from the index.
func (s *Sweeper) keyOf(item map[string]types.AttributeValue) (map[string]types.AttributeValue, error) {
	key := make(map[string]types.AttributeValue, len(s.table.keys))
	for _, k := range s.table.keys {
		v, ok := item[k]
		if !ok {
			return nil, fmt.Errorf("an item of the index lacks the table's key attribute %q", k)
		}
		key[k] = v
	}
	return key, nil
}

// queryInput is the first page's Query of window key: its due items
// (TTL below now and not older than oldest) while it is open, all of it
// when it is closing. Only the table key and the TTL are read.
func (s *Sweeper) queryInput(key string, closing bool, now, oldest string) *dynamodb.QueryInput {
	names := map[string]string{"#w": s.cfg.WindowAttribute, "#t": s.table.ttl}
	proj := "#t"
	for i, k := range s.table.keys {
		if k != s.table.ttl {
			ph := "#k" + strconv.Itoa(i)
			names[ph] = k
			proj += ", " + ph
		}
	}
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(s.cfg.Table),
		IndexName:                 aws.String(s.cfg.Index),
		KeyConditionExpression:    aws.String("#w = :w"),
		ProjectionExpression:      aws.String(proj),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: map[string]types.AttributeValue{":w": &types.AttributeValueMemberS{Value: key}},
	}
	if !closing {
		in.ExpressionAttributeValues[":now"] = &types.AttributeValueMemberN{Value: now}
		in.ExpressionAttributeValues[":oldest"] = &types.AttributeValueMemberN{Value: oldest}
		if s.table.rangeIsTTL {
			// A key condition takes one comparison of the range key:
			// BETWEEN includes now, and an item whose TTL is now is
			// passed over by the pass (not yet due).
			in.KeyConditionExpression = aws.String("#w = :w AND #t BETWEEN :oldest AND :now")
		} else {
			in.FilterExpression = aws.String("#t < :now AND #t >= :oldest")
		}
	}
	return in
}

// conditionItem is the item a ConditionalCheckFailedException carries
// (ReturnValuesOnConditionCheckFailure ALL_OLD): nil when there was none.
func conditionItem(err error) map[string]types.AttributeValue {
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) && len(ccf.Item) > 0 {
		return ccf.Item
	}
	return nil
}

// tally counts what a pass did; its tasks add to it concurrently.
type tally struct {
	windows, closed, pages, deleted, extended, gone, notNumber, tooOld, refiled, throttles, errors atomic.Int64
}

func (t *tally) stats(cursor time.Time) PassStats {
	return PassStats{
		Windows: int(t.windows.Load()), Closed: int(t.closed.Load()), Pages: int(t.pages.Load()),
		Deleted: int(t.deleted.Load()), Extended: int(t.extended.Load()), Gone: int(t.gone.Load()),
		NotNumber: int(t.notNumber.Load()), TooOld: int(t.tooOld.Load()), Refiled: int(t.refiled.Load()),
		Throttles: int(t.throttles.Load()), Errors: int(t.errors.Load()), Cursor: cursor,
	}
}
