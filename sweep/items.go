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
// (TTL below now) while it is open, all of it when it is closing. Only
// the table key and the TTL are read.
func (s *Sweeper) queryInput(key string, closing bool, now string) *dynamodb.QueryInput {
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
		if s.table.rangeIsTTL {
			in.KeyConditionExpression = aws.String("#w = :w AND #t < :now")
		} else {
			in.FilterExpression = aws.String("#t < :now")
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
	windows, closed, pages, deleted, extended, gone, notNumber, refiled, throttles, errors atomic.Int64
}

func (t *tally) stats(cursor time.Time) PassStats {
	return PassStats{
		Windows: int(t.windows.Load()), Closed: int(t.closed.Load()), Pages: int(t.pages.Load()),
		Deleted: int(t.deleted.Load()), Extended: int(t.extended.Load()), Gone: int(t.gone.Load()),
		NotNumber: int(t.notNumber.Load()), Refiled: int(t.refiled.Load()),
		Throttles: int(t.throttles.Load()), Errors: int(t.errors.Load()), Cursor: cursor,
	}
}
