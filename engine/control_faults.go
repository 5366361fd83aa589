package engine

import (
	"net/http"
	"sync/atomic"
	"time"
)

// Faults for tests: throttles, shard rollover and split, trimming, expired
// iterators and shards left out of DescribeStream, first as Go methods,
// then as the control API's endpoints that serve them over HTTP (routed by
// Engine.control, control_api.go).
//
// The fault methods name a table as the Go API does everywhere: by
// name, a table of Options.Region; by table ARN, the table of the ARN's
// Region.

// ThrottleGetRecords makes the next n GetRecords calls (any stream) fail
// with LimitExceededException.
func (e *Engine) ThrottleGetRecords(n int) { e.streams.ThrottleGetRecords(n) }

// ThrottleBatchWrites makes the next n BatchWriteItem calls (any table)
// process only the first half of their requests, rounded down (tables in
// name order, each table's requests in request order), and return the rest
// in UnprocessedItems in the request's shape, as DynamoDB does when
// throughput runs out. A call with one request, of which half is nothing,
// fails with ProvisionedThroughputExceededException instead, as DynamoDB
// answers a batch it could not process any of (SDKs retry it).
// n <= 0 cancels throttling still pending.
func (e *Engine) ThrottleBatchWrites(n int) { e.throttleBatchWrites.Store(int64(max(n, 0))) }

// ThrottleBatchGets makes the next n BatchGetItem calls (any table) read
// only the first half of their keys, rounded down (tables in name order),
// and return the rest in UnprocessedKeys with the table's
// ProjectionExpression, ExpressionAttributeNames and ConsistentRead. A
// call with one key fails with ProvisionedThroughputExceededException.
// n <= 0 cancels throttling still pending.
func (e *Engine) ThrottleBatchGets(n int) { e.throttleBatchGets.Store(int64(max(n, 0))) }

// takeFault consumes one pending fault from c and reports whether there was
// one.
func takeFault(c *atomic.Int64) bool {
	for {
		n := c.Load()
		if n <= 0 {
			return false
		}
		if c.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

// ForceRollover closes every open shard of the table's latest stream and
// opens one child for each.
func (e *Engine) ForceRollover(table string) error {
	arn, err := e.streamARN(table)
	if err != nil {
		return public(err)
	}
	return public(e.streams.Rollover(arn))
}

// SplitShard closes one open shard of the table's latest stream and opens
// two children that share its key range.
func (e *Engine) SplitShard(table, shardID string) error {
	arn, err := e.streamARN(table)
	if err != nil {
		return public(err)
	}
	return public(e.streams.Split(arn, shardID))
}

// TrimStream drops the records of the table's latest stream created before
// the given time; reading them then fails with TrimmedDataAccessException.
func (e *Engine) TrimStream(table string, before time.Time) error {
	arn, err := e.streamARN(table)
	if err != nil {
		return public(err)
	}
	return public(e.streams.Trim(arn, before))
}

// ExpireIterators expires every shard iterator handed out so far.
func (e *Engine) ExpireIterators() { e.streams.ExpireIterators() }

// OmitShardFromDescribe makes the next times DescribeStream responses that
// would list the shard (of the table's latest stream) leave it out, as the
// real service's eventually consistent descriptions sometimes do; times <= 0
// cancels an omission still pending. A response counts only when the shard
// would have been on it: pages and ShardFilter responses that would not
// list the shard leave the count alone. GetShardIterator and GetRecords
// serve the shard as before.
func (e *Engine) OmitShardFromDescribe(table, shardID string, times int) error {
	arn, err := e.streamARN(table)
	if err != nil {
		return public(err)
	}
	return public(e.streams.OmitFromDescribe(arn, shardID, times))
}

// controlThrottle serves POST /_engine/throttle: ThrottleGetRecords,
// ThrottleBatchWrites or ThrottleBatchGets.
func (e *Engine) controlThrottle(r *http.Request) (any, error) {
	if err := requirePost(r); err != nil {
		return nil, err
	}
	var in struct {
		Operation *string `json:"operation"`
		Count     *int    `json:"count"`
	}
	if err := decodeControl(r, &in); err != nil {
		return nil, err
	}
	if in.Operation == nil {
		return nil, controlErrf(http.StatusBadRequest, `"operation" is required: GetRecords, BatchWriteItem or BatchGetItem`)
	}
	if in.Count == nil {
		return nil, controlErrf(http.StatusBadRequest, `"count" is required: how many calls to throttle (0 cancels)`)
	}
	if *in.Count < 0 {
		return nil, controlErrf(http.StatusBadRequest, `"count" must not be negative, got %d`, *in.Count)
	}
	switch *in.Operation {
	case "GetRecords":
		e.ThrottleGetRecords(*in.Count)
	case "BatchWriteItem":
		e.ThrottleBatchWrites(*in.Count)
	case "BatchGetItem":
		e.ThrottleBatchGets(*in.Count)
	default:
		return nil, controlErrf(http.StatusBadRequest, `"operation": %q cannot be throttled; the engine throttles GetRecords, BatchWriteItem and BatchGetItem`, *in.Operation)
	}
	return nil, e.keepControl()
}

// controlRollover serves POST /_engine/tables/{table}/rollover.
func (e *Engine) controlRollover(r *http.Request, table string) (any, error) {
	if err := requireEmptyPost(r); err != nil {
		return nil, err
	}
	return nil, e.ForceRollover(table)
}

// controlTrim serves POST /_engine/tables/{table}/trim.
func (e *Engine) controlTrim(r *http.Request, table string) (any, error) {
	if err := requirePost(r); err != nil {
		return nil, err
	}
	var in struct {
		Before *string `json:"before"`
	}
	if err := decodeControl(r, &in); err != nil {
		return nil, err
	}
	if in.Before == nil {
		return nil, controlErrf(http.StatusBadRequest, `"before" is required: an RFC 3339 time; records created before it are dropped`)
	}
	before, err := time.Parse(time.RFC3339Nano, *in.Before)
	if err != nil {
		return nil, controlErrf(http.StatusBadRequest, `"before": %q is not an RFC 3339 time like 2026-11-01T12:00:00Z`, *in.Before)
	}
	return nil, e.TrimStream(table, before)
}

// controlSplit serves POST /_engine/tables/{table}/shards/{shard}/split.
func (e *Engine) controlSplit(r *http.Request, table, shardID string) (any, error) {
	if err := requireEmptyPost(r); err != nil {
		return nil, err
	}
	return nil, e.SplitShard(table, shardID)
}

// controlOmit serves POST /_engine/tables/{table}/shards/{shard}/omit.
func (e *Engine) controlOmit(r *http.Request, table, shardID string) (any, error) {
	if err := requirePost(r); err != nil {
		return nil, err
	}
	var in struct {
		Times *int `json:"times"`
	}
	if err := decodeControl(r, &in); err != nil {
		return nil, err
	}
	if in.Times == nil {
		return nil, controlErrf(http.StatusBadRequest, `"times" is required: how many DescribeStream responses leave the shard out (0 cancels)`)
	}
	if *in.Times < 0 {
		return nil, controlErrf(http.StatusBadRequest, `"times" must not be negative, got %d`, *in.Times)
	}
	if err := e.OmitShardFromDescribe(table, shardID, *in.Times); err != nil {
		return nil, err
	}
	return nil, e.keepControl()
}
