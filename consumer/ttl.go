package consumer

import (
	"context"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"go.uber.org/zap"
)

// TTLAPI is the DynamoDB call that names a table's TTL attribute.
// *dynamodb.Client satisfies it.
type TTLAPI interface {
	DescribeTimeToLive(ctx context.Context, in *dynamodb.DescribeTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error)
}

// ttlCache remembers each table's TTL attribute name. An entry is refreshed
// once it is older than refresh, and sooner (after retry) while the
// attribute is unknown (TTL disabled, or the call failed), so that an
// expired record arriving soon after TTL was enabled finds its attribute.
type ttlCache struct {
	api     TTLAPI
	refresh time.Duration
	retry   time.Duration
	timeout time.Duration
	now     func() time.Time
	log     *zap.Logger
	m       *metrics

	mu      sync.Mutex
	entries map[string]*ttlEntry
}

type ttlEntry struct {
	mu      sync.Mutex // held while fetching
	attr    string
	fetched time.Time
	valid   bool
}

func newTTLCache(api TTLAPI, refresh time.Duration, now func() time.Time, log *zap.Logger, m *metrics) *ttlCache {
	return &ttlCache{api: api, refresh: refresh, retry: 10 * time.Second, timeout: 5 * time.Second,
		now: now, log: log, m: m, entries: map[string]*ttlEntry{}}
}

// attribute returns the table's TTL attribute ("" when unknown). It calls
// DescribeTimeToLive when the cached answer is stale; a failed call leaves
// the attribute unknown (logged and counted) rather than stalling the shard.
func (c *ttlCache) attribute(ctx context.Context, table string) string {
	if c == nil || c.api == nil || table == "" {
		return ""
	}
	c.mu.Lock()
	e := c.entries[table]
	if e == nil {
		e = &ttlEntry{}
		c.entries[table] = e
	}
	c.mu.Unlock()

	e.mu.Lock()
	defer e.mu.Unlock()
	now := c.now()
	if e.valid {
		age := now.Sub(e.fetched)
		if age < c.refresh && (e.attr != "" || age < c.retry) {
			return e.attr
		}
	}
	cctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	out, err := c.api.DescribeTimeToLive(cctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
	e.fetched, e.valid = now, true
	if err != nil {
		c.m.ttlLookupFailures.WithLabelValues(table).Inc()
		c.log.Warn("describe time to live failed; TTL values of expired events unknown until it succeeds",
			zap.String("table", table), zap.Error(err))
		return e.attr // keep the last known answer
	}
	attr := ""
	// The name is used whatever the status: records already in the stream
	// were expired by it even when TTL is being disabled now.
	if d := out.TimeToLiveDescription; d != nil && d.AttributeName != nil {
		attr = *d.AttributeName
	}
	if attr != e.attr {
		c.log.Info("table TTL attribute", zap.String("table", table), zap.String("attribute", attr))
	}
	e.attr = attr
	return attr
}
