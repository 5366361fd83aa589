package archive

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"go.uber.org/zap"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/shard"
)

// StreamRemove is a REMOVE record of an archived kind found in the stream.
type StreamRemove struct {
	EventID string    `json:"eventID"`
	Created time.Time `json:"approximateCreationDateTime"`
	Shard   string    `json:"shardId"`
	// Stream and Sequence place the record in its shard (a gap of the
	// archive's coverage); Keys are the item's keys, in DynamoDB JSON.
	Stream   string          `json:"streamArn,omitempty"`
	Sequence string          `json:"sequenceNumber,omitempty"`
	Keys     json.RawMessage `json:"keys,omitempty"`
}

// StreamTables is what StreamRemoves calls of DynamoDB: the walker's
// DescribeTable, and DescribeTimeToLive under past-ttl without
// StreamCheck.TTLAttribute. *dynamodb.Client satisfies it.
type StreamTables interface {
	shard.TableAPI
	DescribeTimeToLive(ctx context.Context, in *dynamodb.DescribeTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error)
}

// StreamCheck says which of a table's stream records StreamRemoves
// returns: `archiver verify --table`.
type StreamCheck struct {
	Tables  StreamTables
	Streams shard.StreamsAPI
	Table   string
	// Kinds are the archived kinds, classified as `archiver run` does with
	// ExpiredWhen and TTLAttribute (under past-ttl, "" asks the table's).
	Kinds        []event.Kind
	ExpiredWhen  event.ExpiredWhen
	TTLAttribute string
	// Since and Until bound the records' creation time, [Since, Until);
	// zero: unbounded.
	Since, Until time.Time
	// Timeout bounds reading the stream to its end.
	Timeout time.Duration
	Logger  *zap.Logger
}

// StreamRemoves reads every record of the table's stream still in its
// retention window with the shard package's walker (no checkpoints, no
// leases: read-only) until every shard was read to its end or caught up,
// and returns the REMOVE records whose kind is one of c.Kinds and whose
// creation time is in [c.Since, c.Until), by event ID.
func StreamRemoves(ctx context.Context, c StreamCheck) (map[string]StreamRemove, error) {
	ttlAttr := c.TTLAttribute
	if c.ExpiredWhen == event.ExpiredWhenPastTTL && ttlAttr == "" {
		out, err := c.Tables.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(c.Table)})
		if err != nil {
			return nil, fmt.Errorf("--expired-when past-ttl: DescribeTimeToLive %s: %w", c.Table, err)
		}
		if d := out.TimeToLiveDescription; d != nil {
			ttlAttr = aws.ToString(d.AttributeName)
		}
	}
	col := &removeCollector{kinds: c.Kinds, when: c.ExpiredWhen, ttlAttr: ttlAttr, since: c.Since, until: c.Until, found: map[string]StreamRemove{}}
	watch := &catchUp{StreamsAPI: c.Streams, iters: map[string]string{}, done: map[string]bool{}, empty: map[string]int{}}
	w, err := shard.New(shard.Options{
		Streams: watch, Tables: c.Tables, TableNames: []string{c.Table},
		Processor: col, Start: shard.TrimHorizon,
		IdleBackoff: 50 * time.Millisecond, IdleYield: -1, Logger: c.Logger,
	})
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	walked := make(chan error, 1)
	go func() { walked <- w.Run(rctx) }()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	caught := false
	for !caught && rctx.Err() == nil {
		select {
		case <-rctx.Done():
		case <-t.C:
			caught = watch.caughtUp()
		}
	}
	timedOut := !caught && ctx.Err() == nil
	cancel()
	if err := <-walked; err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if timedOut {
		return nil, fmt.Errorf("the stream of %s was not read to its end within --stream-timeout %s", c.Table, c.Timeout)
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	if col.err != nil {
		return nil, col.err
	}
	return col.found, nil
}

// removeCollector is the walker's Processor: it keeps the REMOVE records
// of the wanted kinds and acknowledges everything at once.
type removeCollector struct {
	kinds        []event.Kind
	when         event.ExpiredWhen
	ttlAttr      string
	since, until time.Time

	mu    sync.Mutex
	found map[string]StreamRemove
	err   error
}

func (c *removeCollector) Process(_ context.Context, b shard.Batch) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range b.Records {
		if r.Dynamodb == nil || string(r.EventName) != "REMOVE" {
			continue
		}
		k, err := event.ClassifyWith(r, c.when, c.ttlAttr)
		if err != nil {
			if c.err == nil {
				c.err = fmt.Errorf("shard %s: record %s: %w", b.ShardID, aws.ToString(r.EventID), err)
			}
			continue
		}
		created := aws.ToTime(r.Dynamodb.ApproximateCreationDateTime)
		if !slices.Contains(c.kinds, k) || (!c.since.IsZero() && created.Before(c.since)) || (!c.until.IsZero() && !created.Before(c.until)) {
			continue
		}
		id := aws.ToString(r.EventID)
		c.found[id] = StreamRemove{EventID: id, Created: created.UTC(), Shard: b.ShardID, Stream: b.StreamARN,
			Sequence: event.RecordSequence(&r), Keys: event.AppendItem(nil, r.Dynamodb.Keys)}
	}
	return nil
}

func (c *removeCollector) ShardEnded(context.Context, string, string) error   { return nil }
func (c *removeCollector) ShardStopped(context.Context, string, string) error { return nil }

// catchUp passes the walker's Streams calls through and tells when every
// shard described so far was read to its end (a closed shard) or caught up
// (an open shard's GetRecords returned nothing caughtUpAfter times in a
// row: an empty page does not always mean the end). It follows each
// shard's iterators from GetShardIterator through every GetRecords.
type catchUp struct {
	shard.StreamsAPI
	mu        sync.Mutex
	described bool
	iters     map[string]string // iterator -> shard ID
	done      map[string]bool   // shard ID -> read to its end or caught up
	empty     map[string]int    // shard ID -> empty pages in a row
}

// caughtUpAfter is how many empty pages in a row mark an open shard as
// read up to now.
const caughtUpAfter = 3

func (c *catchUp) DescribeStream(ctx context.Context, in *dynamodbstreams.DescribeStreamInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error) {
	out, err := c.StreamsAPI.DescribeStream(ctx, in, optFns...)
	if err == nil && out.StreamDescription != nil {
		c.mu.Lock()
		c.described = true
		for _, s := range out.StreamDescription.Shards {
			id := aws.ToString(s.ShardId)
			if _, ok := c.done[id]; !ok {
				c.done[id] = false
			}
		}
		c.mu.Unlock()
	}
	return out, err
}

func (c *catchUp) GetShardIterator(ctx context.Context, in *dynamodbstreams.GetShardIteratorInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error) {
	out, err := c.StreamsAPI.GetShardIterator(ctx, in, optFns...)
	if err == nil && out.ShardIterator != nil {
		c.mu.Lock()
		c.iters[*out.ShardIterator] = aws.ToString(in.ShardId)
		c.mu.Unlock()
	}
	return out, err
}

func (c *catchUp) GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error) {
	out, err := c.StreamsAPI.GetRecords(ctx, in, optFns...)
	if err != nil {
		return out, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	id, ok := c.iters[aws.ToString(in.ShardIterator)]
	if !ok {
		return out, nil
	}
	delete(c.iters, aws.ToString(in.ShardIterator))
	if len(out.Records) == 0 {
		c.empty[id]++
	} else {
		c.empty[id] = 0
	}
	if out.NextShardIterator == nil || c.empty[id] >= caughtUpAfter {
		c.done[id] = true
	}
	if out.NextShardIterator != nil {
		c.iters[*out.NextShardIterator] = id
	}
	return out, nil
}

// caughtUp reports whether the stream was described and every shard in it
// read to its end or caught up.
func (c *catchUp) caughtUp() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.described || len(c.done) == 0 {
		return c.described
	}
	for _, d := range c.done {
		if !d {
			return false
		}
	}
	return true
}
