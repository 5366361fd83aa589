package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/checkpoint"
	"github.com/ttl-archiver/archiver/cmd/bench/internal/benchkit"
	"github.com/ttl-archiver/archiver/consumer"
	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/shard"
	"github.com/ttl-archiver/archiver/sinks"
)

const consumerBenchShards = 4

// consumerSizes are the expired items and the rounds.
type consumerSizes struct{ items, rounds int }

func consumerSizesFor(tiny bool) consumerSizes {
	if tiny {
		return consumerSizes{items: 1000, rounds: 1}
	}
	return consumerSizes{items: 200_000, rounds: 9}
}

// runConsumerBench measures the consumer against the source's limit: the
// engine's stream holds 200,000 TTL expiries (REMOVE records only: the
// stream is enabled after the items were written); the baseline is a raw
// GetRecords drain of every shard in parallel, the figure is the consumer
// archiving the same stream into the file sink (fsynced NDJSON). Both read
// the same engine over HTTP with the real SDK in the same run.
func runConsumerBench(ctx context.Context, w io.Writer, tiny bool) error {
	sz := consumerSizesFor(tiny)
	srv, err := engine.Listen("127.0.0.1:0", engine.Options{TTLInterval: -1, StreamShards: consumerBenchShards})
	if err != nil {
		return err
	}
	defer srv.Close()
	db, st := benchkit.Clients(srv.Endpoint())
	const table = "bench"
	arn, err := consumerBacklog(ctx, w, srv, db, table, sz.items)
	if err != nil {
		return err
	}
	r, err := consumerRounds(ctx, st, db, table, arn, sz)
	if err != nil {
		return err
	}
	r.print(w, sz)
	return nil
}

// consumerBacklog writes n items whose TTL passed, enables the stream only
// then (so that it holds the expiries alone), sweeps them and returns the
// stream's ARN.
func consumerBacklog(ctx context.Context, w io.Writer, srv *engine.Server, db *dynamodb.Client, table string, n int) (string, error) {
	t0 := time.Now()
	if err := benchTable(ctx, db, table); err != nil {
		return "", err
	}
	if err := benchPut(ctx, db, table, n); err != nil {
		return "", err
	}
	if _, err := db.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: aws.String(table),
		StreamSpecification: &dtypes.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: dtypes.StreamViewTypeNewAndOldImages}}); err != nil {
		return "", fmt.Errorf("enable stream: %w", err)
	}
	swept, err := srv.Engine().SweepTTL(ctx)
	if err != nil {
		return "", err
	}
	if swept != n {
		return "", fmt.Errorf("sweep deleted %d items, want %d", swept, n)
	}
	arn, err := srv.Engine().StreamARN(table)
	if err != nil {
		return "", err
	}
	fmt.Fprintf(w, "setup: %d expired items in %d shards (%.1fs)\n", n, consumerBenchShards, time.Since(t0).Seconds())
	return arn, nil
}

// consumerResult is the best run of each side over the rounds, and the
// rounds' own ratios drain time / consumer time.
type consumerResult struct {
	rawSDK, rawFast, file, discard time.Duration
	pairedFast, pairedSDK          []float64
}

// consumerRounds interleaves the runs so that each sees the same machine.
// Two raw drains: through the SDK as it comes (the baseline: what
// a plain GetRecords loop reaches), and through the SDK with the decoder
// the archiver's readers use (shard.FastGetRecords), which is faster than
// the plain loop; the consumer is printed against both. Ratios are the
// median of the rounds' own ratios: a round pairs drain and consumer on
// the same machine state, so load from elsewhere cancels out, and the
// median is not moved by the odd round whose fsyncs stalled on the disk.
// Best against best (each run's least disturbed round) is printed beside
// it; it pairs rounds that did not run together, and a single fast drain
// round sets its bar.
func consumerRounds(ctx context.Context, st *dynamodbstreams.Client, db *dynamodb.Client, table, arn string, sz consumerSizes) (consumerResult, error) {
	var r consumerResult
	for i := 0; i < sz.rounds; i++ {
		benchkit.Settle()
		ds, err := benchRawDrain(ctx, st, arn, sz.items, false)
		if err != nil {
			return r, fmt.Errorf("raw drain: %w", err)
		}
		r.rawSDK = benchkit.Best(r.rawSDK, ds)
		benchkit.Settle()
		df, err := benchRawDrain(ctx, st, arn, sz.items, true)
		if err != nil {
			return r, fmt.Errorf("raw drain: %w", err)
		}
		r.rawFast = benchkit.Best(r.rawFast, df)
		benchkit.Settle()
		d, err := benchConsume(ctx, st, db, table, sz.items, false)
		if err != nil {
			return r, fmt.Errorf("consumer: %w", err)
		}
		r.file = benchkit.Best(r.file, d)
		r.pairedFast = append(r.pairedFast, df.Seconds()/d.Seconds())
		r.pairedSDK = append(r.pairedSDK, ds.Seconds()/d.Seconds())
		benchkit.Settle()
		if d, err = benchConsume(ctx, st, db, table, sz.items, true); err != nil {
			return r, fmt.Errorf("consumer (discard): %w", err)
		}
		r.discard = benchkit.Best(r.discard, d)
	}
	return r, nil
}

// print prints the rates and the consumer's ratios to each drain.
func (r consumerResult) print(w io.Writer, sz consumerSizes) {
	rate := func(d time.Duration) float64 { return float64(sz.items) / d.Seconds() }
	limit := min(r.rawFast, r.rawSDK)
	fmt.Fprintf(w, "raw GetRecords drain, SDK decoder:      %8.0f records/s (%.2fs, best of %d)\n", rate(r.rawSDK), r.rawSDK.Seconds(), sz.rounds)
	fmt.Fprintf(w, "raw GetRecords drain, archiver decoder: %8.0f records/s (%.2fs, best of %d)\n", rate(r.rawFast), r.rawFast.Seconds(), sz.rounds)
	fmt.Fprintf(w, "consumer -> file sink:                  %8.0f expired records/s (%.2fs, best of %d)\n", rate(r.file), r.file.Seconds(), sz.rounds)
	fmt.Fprintf(w, "ratio consumer / plain SDK drain: median of the %d rounds' own ratios %.0f%% (target >= 70%%); best against best %.0f%% (rounds: %s)\n",
		sz.rounds, 100*benchkit.Median(slices.Clone(r.pairedSDK)), 100*rate(r.file)/rate(r.rawSDK), benchkit.Percents(r.pairedSDK))
	fmt.Fprintf(w, "ratio consumer / drain with the archiver's decoder (stricter, info): median %.0f%%, best against best %.0f%% (rounds: %s)\n",
		100*benchkit.Median(slices.Clone(r.pairedFast)), 100*rate(r.file)/rate(r.rawFast), benchkit.Percents(r.pairedFast))
	// The consumer alone (a sink that acknowledges at once) separates the
	// consumer's own cost from the file sink's (fsync-bound).
	fmt.Fprintf(w, "consumer -> discard (info):             %8.0f expired records/s (%.2fs), %.0f%% of the faster drain\n", rate(r.discard), r.discard.Seconds(), 100*rate(r.discard)/rate(limit))
}

func benchTable(ctx context.Context, db *dynamodb.Client, table string) error {
	_, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		BillingMode:          dtypes.BillingModePayPerRequest,
		KeySchema:            []dtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: dtypes.KeyTypeHash}},
		AttributeDefinitions: []dtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: dtypes.ScalarAttributeTypeS}},
	})
	if err != nil {
		return fmt.Errorf("create table: %w", err)
	}
	_, err = db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String(table),
		TimeToLiveSpecification: &dtypes.TimeToLiveSpecification{AttributeName: aws.String("expires"), Enabled: aws.Bool(true)},
	})
	if err != nil {
		return fmt.Errorf("enable TTL: %w", err)
	}
	return nil
}

// benchPut writes n items whose TTL passed an hour ago, ~200 bytes each.
func benchPut(ctx context.Context, db *dynamodb.Client, table string, n int) error {
	expires := strconv.FormatInt(time.Now().Add(-time.Hour).Unix(), 10)
	payload := make([]byte, 128)
	var wg sync.WaitGroup
	var first error
	var mu sync.Mutex
	next := atomic.Int64{}
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(25)) - 25
				if i >= n || ctx.Err() != nil {
					return
				}
				var reqs []dtypes.WriteRequest
				for j := i; j < min(i+25, n); j++ {
					reqs = append(reqs, dtypes.WriteRequest{PutRequest: &dtypes.PutRequest{Item: map[string]dtypes.AttributeValue{
						"pk":      &dtypes.AttributeValueMemberS{Value: "item-" + strconv.Itoa(j)},
						"expires": &dtypes.AttributeValueMemberN{Value: expires},
						"owner":   &dtypes.AttributeValueMemberS{Value: "user-" + strconv.Itoa(j%997)},
						"payload": &dtypes.AttributeValueMemberB{Value: payload},
					}}})
				}
				in := &dynamodb.BatchWriteItemInput{RequestItems: map[string][]dtypes.WriteRequest{table: reqs}}
				for len(in.RequestItems) > 0 {
					out, err := db.BatchWriteItem(ctx, in)
					if err != nil {
						mu.Lock()
						if first == nil {
							first = fmt.Errorf("put: %w", err)
						}
						mu.Unlock()
						return
					}
					in.RequestItems = out.UnprocessedItems
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// benchRawDrain reads every shard of the stream from TRIM_HORIZON, all in
// parallel, until want records were read: the source's limit.
func benchRawDrain(ctx context.Context, st *dynamodbstreams.Client, arn string, want int, fast bool) (time.Duration, error) {
	var decode []func(*dynamodbstreams.Options)
	if fast {
		decode = append(decode, shard.FastGetRecords)
	}
	start := time.Now()
	var shards []stypes.Shard
	in := &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn)}
	for {
		out, err := st.DescribeStream(ctx, in)
		if err != nil {
			return 0, err
		}
		shards = append(shards, out.StreamDescription.Shards...)
		if out.StreamDescription.LastEvaluatedShardId == nil {
			break
		}
		in.ExclusiveStartShardId = out.StreamDescription.LastEvaluatedShardId
	}
	var total atomic.Int64
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(shards))
	var wg sync.WaitGroup
	for _, sh := range shards {
		wg.Add(1)
		go func(id string) {
			defer wg.Done()
			it, err := st.GetShardIterator(dctx, &dynamodbstreams.GetShardIteratorInput{
				StreamArn: aws.String(arn), ShardId: aws.String(id), ShardIteratorType: stypes.ShardIteratorTypeTrimHorizon})
			if err != nil {
				errs <- err
				return
			}
			iter := it.ShardIterator
			for iter != nil && dctx.Err() == nil {
				out, err := st.GetRecords(dctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(1000)}, decode...)
				if err != nil {
					if dctx.Err() == nil {
						errs <- err
					}
					return
				}
				if total.Add(int64(len(out.Records))) >= int64(want) {
					cancel()
					return
				}
				if len(out.Records) == 0 {
					return // an open shard read to its current end
				}
				iter = out.NextShardIterator
			}
		}(aws.ToString(sh.ShardId))
	}
	wg.Wait()
	took := time.Since(start)
	select {
	case err := <-errs:
		return 0, err
	default:
	}
	if got := total.Load(); got < int64(want) {
		return 0, fmt.Errorf("read %d records, want %d", got, want)
	}
	return took, nil
}

// countingSink counts the events the wrapped sink acknowledged.
type countingSink struct {
	sinks.Sink
	acked atomic.Int64
	done  chan struct{}
	want  int64
	once  sync.Once
}

func (c *countingSink) Write(ctx context.Context, b sinks.Batch, ack sinks.Ack) error {
	n := int64(len(b.Events))
	return c.Sink.Write(ctx, b, func(err error) {
		if err == nil && c.acked.Add(n) >= c.want {
			c.once.Do(func() { close(c.done) })
		}
		ack(err)
	})
}

// benchConsume runs the consumer into the file sink until every expired
// record was acknowledged by the sink.
func benchConsume(ctx context.Context, st *dynamodbstreams.Client, db *dynamodb.Client, table string, want int, discard bool) (time.Duration, error) {
	dir, err := os.MkdirTemp("", "archiver-bench-consumer-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	file, err := sinks.NewFileSink(filepath.Join(dir, "archive"), sinks.Options{})
	if err != nil {
		return 0, err
	}
	var inner sinks.Sink = file
	if discard {
		inner = discardSink{}
	}
	sink := &countingSink{Sink: inner, done: make(chan struct{}), want: int64(want)}
	store, err := checkpoint.OpenFile(filepath.Join(dir, "checkpoints.json"))
	if err != nil {
		return 0, err
	}
	defer store.Close()
	c, err := consumer.New(consumer.Config{
		Options: shard.Options{Streams: st, TableNames: []string{table}},
		Tables:  db, Store: store,
		Routes: []consumer.Route{{Sink: sink}},
	})
	if err != nil {
		return 0, err
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	runErr := make(chan error, 1)
	go func() { runErr <- c.Run(rctx) }()
	var took time.Duration
	select {
	case <-sink.done:
		took = time.Since(start)
	case err := <-runErr:
		return 0, fmt.Errorf("consumer stopped early: %v", err)
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	cancel()
	if err := <-runErr; err != nil && !errors.Is(err, context.Canceled) {
		return 0, err
	}
	return took, nil
}

// discardSink acknowledges every batch at once and keeps nothing.
type discardSink struct{}

func (discardSink) Name() string { return "discard" }
func (discardSink) Write(ctx context.Context, b sinks.Batch, ack sinks.Ack) error {
	ack(nil)
	return nil
}
func (discardSink) Flush(context.Context) error { return nil }
func (discardSink) Close(context.Context) error { return nil }
