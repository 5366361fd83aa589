package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/ttl-archiver/archiver/cmd/bench/internal/benchkit"
)

// The raw limits of the pipeline's parts, measured on the same machine in
// the same run as the archiver.

// plRawDrain reads the whole stream from TRIM_HORIZON with plain GetRecords
// calls, one reader per shard, and returns records/s; it fails when it read
// fewer than want.
func plRawDrain(ctx context.Context, c *dynamodbstreams.Client, ddb *dynamodb.Client, want int) (float64, error) {
	desc, err := ddb.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(plBenchTable)})
	if err != nil {
		return 0, err
	}
	arn := desc.Table.LatestStreamArn
	var shards []streamtypes.Shard
	var start *string
	for {
		out, err := c.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: arn, ExclusiveStartShardId: start})
		if err != nil {
			return 0, err
		}
		shards = append(shards, out.StreamDescription.Shards...)
		start = out.StreamDescription.LastEvaluatedShardId
		if start == nil {
			break
		}
	}
	var total atomic.Int64
	began := time.Now()
	var wg sync.WaitGroup
	errc := make(chan error, len(shards))
	for _, sh := range shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			it, err := c.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: arn, ShardId: sh.ShardId,
				ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon})
			if err != nil {
				errc <- err
				return
			}
			iter := it.ShardIterator
			for iter != nil {
				out, err := c.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(1000)})
				if err != nil {
					errc <- err
					return
				}
				total.Add(int64(len(out.Records)))
				if len(out.Records) == 0 {
					return // an open shard read to its current end
				}
				iter = out.NextShardIterator
			}
		}()
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		return 0, err
	}
	if total.Load() < int64(want) {
		return 0, fmt.Errorf("read %d records, want %d", total.Load(), want)
	}
	return float64(total.Load()) / time.Since(began).Seconds(), nil
}

// plWindow bounds the raw JetStream publisher's unacknowledged publishes:
// the NATS sink's default max-in-flight.
const plWindow = 4096

// plRawJetStream publishes n messages of size bytes with
// PublishAsync into a fresh stream and returns acknowledged msgs/s.
func plRawJetStream(ctx context.Context, nc *nats.Conn, size, n int) (float64, error) {
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(plWindow))
	if err != nil {
		return 0, err
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "RAW", Subjects: []string{"raw.>"}}); err != nil {
		return 0, err
	}
	msg := bytes.Repeat([]byte("x"), max(size, 1))
	began := time.Now()
	for i := 0; i < n; i++ {
		if _, err := js.PublishAsync("raw.bench", msg); err != nil {
			return 0, err
		}
		if (i+1)%plWindow == 0 || i == n-1 {
			select {
			case <-js.PublishAsyncComplete():
			case <-time.After(time.Minute):
				return 0, errors.New("publishes not acknowledged within a minute")
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}
	}
	return float64(n) / time.Since(began).Seconds(), nil
}

// plRawS3 puts objects of size bytes with conc concurrent uploads for about
// d (three seconds in the full bench) and returns objects/s.
func plRawS3(ctx context.Context, c *s3.Client, size, conc int, d time.Duration) (float64, error) {
	body := make([]byte, max(size, 1))
	for i := range body {
		body[i] = byte(i * 7919 >> 3) // not all zeros
	}
	var done atomic.Int64
	stop := time.Now().Add(d)
	began := time.Now()
	var wg sync.WaitGroup
	errc := make(chan error, conc)
	for g := 0; g < conc; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(stop); i++ {
				_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(benchkit.Bucket),
					Key: aws.String(fmt.Sprintf("raw/%d-%d", g, i)), Body: bytes.NewReader(body)})
				if err != nil {
					errc <- err
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		return 0, err
	}
	return float64(done.Load()) / time.Since(began).Seconds(), nil
}
