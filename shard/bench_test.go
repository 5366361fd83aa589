package shard

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/engine"
)

// counting is a Processor that only counts.
type counting struct {
	n    atomic.Int64
	want int64
	done chan struct{}
}

func (c *counting) Process(ctx context.Context, b Batch) error {
	if c.n.Add(int64(len(b.Records))) == c.want {
		close(c.done)
	}
	return nil
}
func (c *counting) ShardEnded(context.Context, string, string) error   { return nil }
func (c *counting) ShardStopped(context.Context, string, string) error { return nil }

const benchItems = 20000

func benchStream(b *testing.B) (*testEnv, string) {
	e := newEnv(b, engine.Options{StreamShards: 4, ShardRolloverRecords: 2000})
	arn := e.createTable(b, "bench")
	e.put(b, "bench", "k", 0, benchItems)
	return e, arn
}

// BenchmarkWalkerDrain measures how fast a walker drains a stream of 20,000
// records over 4 shards with rollover into a Processor that only counts.
func BenchmarkWalkerDrain(b *testing.B) {
	e, arn := benchStream(b)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		c := &counting{want: benchItems, done: make(chan struct{})}
		w, err := New(Options{Streams: e.streams, StreamARNs: []string{arn}, Processor: c})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- w.Run(ctx) }()
		<-c.done
		cancel()
		<-done
	}
	b.ReportMetric(float64(benchItems*b.N)/time.Since(start).Seconds(), "records/s")
}

// BenchmarkRawDrain is the baseline: one GetRecords loop per shard, in
// lineage order, no walker.
func BenchmarkRawDrain(b *testing.B) {
	e, arn := benchStream(b)
	shards := describeAll(b, e.streams, arn)
	b.ResetTimer()
	start := time.Now()
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		n := 0
		for _, s := range shards { // IDs sort in creation order in the engine
			it, err := e.streams.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(arn), ShardId: aws.String(s.ID), ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
			if err != nil {
				b.Fatal(err)
			}
			next := it.ShardIterator
			for next != nil {
				out, err := e.streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: next})
				if err != nil {
					b.Fatal(err)
				}
				n += len(out.Records)
				if len(out.Records) == 0 && !s.Closed() {
					break
				}
				next = out.NextShardIterator
			}
		}
		if n != benchItems {
			b.Fatalf("raw drain read %d records, want %d", n, benchItems)
		}
	}
	b.ReportMetric(float64(benchItems*b.N)/time.Since(start).Seconds(), "records/s")
}
