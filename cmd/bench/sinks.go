package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/cmd/bench/internal/benchkit"
	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/sinks"
)

const (
	sinksBenchShards     = 4
	sinksBenchBatch      = 250
	sinksBenchFlushBytes = 8 << 20
)

// sinksSizes are the records a round writes through each sink and the
// rounds.
type sinksSizes struct{ natsRecords, s3Records, rounds int }

func sinksSizesFor(tiny bool) sinksSizes {
	if tiny {
		return sinksSizes{natsRecords: 1000, s3Records: 1000, rounds: 1}
	}
	return sinksSizes{natsRecords: 50_000, s3Records: 200_000, rounds: 7}
}

// runSinksBench measures records/s through the NATS JetStream sink beside a
// raw PublishAsync loop of the same messages, and through the S3 sink (gzip)
// into versitygw beside a raw PutObject loop of the same object bytes. Both
// baselines run in the same process, on the same servers, right before.
func runSinksBench(ctx context.Context, w io.Writer, tiny bool) error {
	sz := sinksSizesFor(tiny)
	var errs []error
	if err := sinksBenchNATS(ctx, w, sz); err != nil {
		errs = append(errs, fmt.Errorf("nats: %w", err))
	}
	if err := sinksBenchS3(ctx, w, sz); err != nil {
		errs = append(errs, fmt.Errorf("s3: %w", err))
	}
	return errors.Join(errs...)
}

// sinksBenchEvents makes n expired events spread over the shards, each with
// a typical session item (~400 bytes as an archive line).
func sinksBenchEvents(prefix string, n int) [][]event.Event {
	perShard := make([][]event.Event, sinksBenchShards)
	t0 := time.Now().UTC().Truncate(time.Hour)
	for i := 0; i < n; i++ {
		shard := i % sinksBenchShards
		seq := i / sinksBenchShards
		keys := event.Item{"pk": &stypes.AttributeValueMemberS{Value: fmt.Sprintf("session#%s#%09d", prefix, i)}}
		perShard[shard] = append(perShard[shard], event.Event{
			Kind:                    event.Expired,
			Table:                   "sessions",
			StreamARN:               "arn:aws:dynamodb:us-east-1:000000000000:table/sessions/stream/bench",
			Region:                  "us-east-1",
			ShardID:                 fmt.Sprintf("shardId-%s-%04d", prefix, shard),
			SequenceNumber:          fmt.Sprintf("%021d", 1000+seq),
			EventID:                 fmt.Sprintf("%s-%d", prefix, i),
			EventName:               "REMOVE",
			ApproximateCreationTime: t0.Add(time.Duration(seq) * time.Microsecond),
			Keys:                    keys,
			OldImage: event.Item{
				"pk":        keys["pk"],
				"user":      &stypes.AttributeValueMemberS{Value: fmt.Sprintf("user-%d", i%5000)},
				"expiresAt": &stypes.AttributeValueMemberN{Value: fmt.Sprint(1767322800 + i)},
				"cart":      &stypes.AttributeValueMemberL{Value: []stypes.AttributeValue{&stypes.AttributeValueMemberS{Value: "sku-1"}, &stypes.AttributeValueMemberN{Value: "2"}}},
				"flags":     &stypes.AttributeValueMemberSS{Value: []string{"beta", "mobile"}},
				"token":     &stypes.AttributeValueMemberB{Value: bytes.Repeat([]byte{byte(i)}, 32)},
			},
			TTLAttribute: "expiresAt",
			TTLValue:     fmt.Sprint(1767322800 + i),
			TTLTime:      time.Unix(int64(1767322800+i), 0).UTC(),
			TTLLag:       90 * time.Second,
		})
	}
	return perShard
}

// sinksBenchWrite writes every shard's events in batches, one goroutine per
// shard (as the consumer does: shards run in parallel, each in order), and
// waits for every acknowledgement.
func sinksBenchWrite(ctx context.Context, s sinks.Sink, perShard [][]event.Event) error {
	var acks, writers sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
	}
	ack := func(err error) {
		if err != nil {
			fail(err)
		}
		acks.Done()
	}
	for _, evs := range perShard {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for off := 0; off < len(evs); off += sinksBenchBatch {
				end := min(off+sinksBenchBatch, len(evs))
				acks.Add(1)
				if err := s.Write(ctx, sinks.Batch{ShardID: evs[0].ShardID, Events: evs[off:end]}, ack); err != nil {
					acks.Done()
					fail(err)
					return
				}
			}
		}()
	}
	writers.Wait()
	if err := s.Flush(ctx); err != nil {
		return err
	}
	acks.Wait()
	return firstErr
}

// sinksBenchRatio prints the sink's best round beside the baseline's and
// the median of the rounds' own ratios (paired[i]: sink / baseline in round
// i), the figure the target is judged on: a round runs both on the same
// machine state, so load from elsewhere cancels out.
func sinksBenchRatio(w io.Writer, name string, sinkRate, rawRate float64, baseline string, paired []float64) {
	fmt.Fprintf(w, "%-28s %10.0f records/s   %s %10.0f records/s   ratio: median of %d rounds %5.1f%% (target >= 70%%), best against best %5.1f%% (rounds: %s)\n",
		name, sinkRate, baseline, rawRate, len(paired), 100*benchkit.Median(slices.Clone(paired)), 100*sinkRate/rawRate, benchkit.Percents(paired))
}

func sinksBenchTotal[T any](xs []T, f func(T) int) int {
	n := 0
	for _, x := range xs {
		n += f(x)
	}
	return n
}
