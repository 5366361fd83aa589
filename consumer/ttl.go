package consumer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/event"
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
	// fixed, when set, is every table's attribute (no lookups).
	fixed string
	// warnOff: warn once per table whose TTL is off (past-ttl then finds
	// no expiries there).
	warnOff bool
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
	// known: a DescribeTimeToLive call has succeeded; until then err is
	// the last failure.
	known bool
	err   error
	// warned: the TTL-off warning was logged.
	warned bool
}

// unknown is nil once the attribute is known (TTL off counts: the answer
// is ""), and otherwise says why it is not.
func (e *ttlEntry) unknown() error {
	if e.known {
		return nil
	}
	return fmt.Errorf("DescribeTimeToLive has not succeeded yet: %w", e.err)
}

func newTTLCache(api TTLAPI, refresh time.Duration, now func() time.Time, log *zap.Logger, m *metrics) *ttlCache {
	return &ttlCache{api: api, refresh: refresh, retry: 10 * time.Second, timeout: 5 * time.Second,
		now: now, log: log, m: m, entries: map[string]*ttlEntry{}}
}

// lookup returns the table's TTL attribute ("" when unknown or TTL is
// off). It calls DescribeTimeToLive when the cached answer is stale; a
// failed call is logged and counted, and lookup says (as an error) when
// the answer is unknown rather than "TTL is off": no DescribeTimeToLive
// call has succeeded for the table yet, or there is no API or table name
// to ask with. Once a call succeeded, a failed refresh keeps the last
// answer.
func (c *ttlCache) lookup(ctx context.Context, table string) (string, error) {
	if c != nil && c.fixed != "" {
		return c.fixed, nil
	}
	if c == nil || c.api == nil {
		return "", errors.New("no DynamoDB client to call DescribeTimeToLive with")
	}
	if table == "" {
		return "", errors.New("table name unknown")
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
			return e.attr, e.unknown()
		}
	}
	cctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	out, err := c.api.DescribeTimeToLive(cctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
	if err != nil && ctx.Err() != nil {
		// The caller was canceled (a stop, a lease handed off): no answer
		// about the table, so nothing is cached; the next caller asks.
		// Caching it made every other shard's events of the next retry
		// interval go without TTL metadata (TestFaults, trimmed data).
		return e.attr, fmt.Errorf("describe time to live of %s: %w", table, ctx.Err())
	}
	e.fetched, e.valid = now, true
	if err != nil {
		c.m.ttlLookupFailures.WithLabelValues(table).Inc()
		c.log.Warn("describe time to live failed; TTL values of expired events unknown until it succeeds",
			zap.String("table", table), zap.Error(err))
		if !e.known {
			e.err = err
		}
		return e.attr, e.unknown() // keep the last known answer
	}
	e.known, e.err = true, nil
	attr := ""
	// The name is used whatever the status: records already in the stream
	// were expired by it even when TTL is being disabled now.
	if d := out.TimeToLiveDescription; d != nil && d.AttributeName != nil {
		attr = *d.AttributeName
	}
	if attr != e.attr {
		c.log.Info("table TTL attribute", zap.String("table", table), zap.String("attribute", attr))
	}
	if attr == "" && c.warnOff && !e.warned {
		e.warned = true
		c.log.Warn("the table's TTL is off and no TTL attribute was given: no REMOVE counts as an expiry under expired-when past-ttl (set --ttl-attribute for a table only archiver sweep expires)",
			zap.String("table", table))
	}
	e.attr = attr
	return attr, nil
}

// ttlAttribute returns the table's TTL attribute when the batch needs it:
// for the TTL values of DynamoDB's TTL deletes, and for every other REMOVE
// with an old image: under event.ExpiredWhenPastTTL its kind depends on it,
// under event.ExpiredWhenService the warning about past-TTL user deletes
// (pastTTLWarner) does. Under past-ttl, an attribute unknown because
// DescribeTimeToLive has not succeeded yet fails the batch (the walker
// restarts the shard later from its checkpoint): classifying the batch
// without it would pass swept expiries off as user deletes, for good.
// Under service a failed lookup never holds the batch back: the attribute
// is then "" (no TTL values, no warning); only a lookup cut short because
// ctx is done fails the batch.
func (c *Consumer) ttlAttribute(ctx context.Context, table string, recs []types.Record) (string, error) {
	pastTTL := c.cfg.ExpiredWhen == event.ExpiredWhenPastTTL
	for i := range recs {
		r := &recs[i]
		if r.EventName != types.OperationTypeRemove {
			continue
		}
		if !pastTTL && !event.IsTTLDelete(r) && (r.Dynamodb == nil || len(r.Dynamodb.OldImage) == 0) {
			continue // KEYS_ONLY or NEW_IMAGE: nothing to warn about
		}
		if !pastTTL {
			attr, err := c.ttl.lookup(ctx, table)
			if err != nil && ctx.Err() != nil {
				// A stop or a lease handed off: the batch cannot be
				// checkpointed here, and handing it to the sinks without
				// its TTL metadata left lines the next owner's copy
				// could not mend (TestFaults, shards split).
				return "", fmt.Errorf("consumer: table %s: TTL attribute lookup stopped: %w", table, err)
			}
			return attr, nil
		}
		attr, err := c.ttl.lookup(ctx, table)
		if err != nil {
			return "", fmt.Errorf("consumer: table %s: TTL attribute unknown, so its REMOVE records cannot be classified (expired-when past-ttl): %w", table, err)
		}
		return attr, nil
	}
	return "", nil
}
