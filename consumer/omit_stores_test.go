package consumer_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/ttl-archiver/archiver/checkpoint"
	"github.com/ttl-archiver/archiver/consumer"
	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/engine/enginetest"
	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/eventually"
	"github.com/ttl-archiver/archiver/lease"
	"github.com/ttl-archiver/archiver/shard"
	"github.com/ttl-archiver/archiver/sinks/sinktest"
)

// omitSpy is a real Streams client that counts the full descriptions of the
// stream and those that left one shard out.
type omitSpy struct {
	*dynamodbstreams.Client
	shard string

	mu       sync.Mutex
	without  int // full descriptions that did not list shard
	sinceGap int // full descriptions since the first that did not
}

func (s *omitSpy) DescribeStream(ctx context.Context, in *dynamodbstreams.DescribeStreamInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error) {
	out, err := s.Client.DescribeStream(ctx, in, optFns...)
	if err != nil || in.ShardFilter != nil || in.ExclusiveStartShardId != nil {
		return out, err
	}
	listed := slices.ContainsFunc(out.StreamDescription.Shards, func(sh stypes.Shard) bool { return aws.ToString(sh.ShardId) == s.shard })
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.without > 0 {
		s.sinceGap++
	}
	if !listed {
		s.without++
	}
	return out, err
}

func (s *omitSpy) counts() (without, sinceGap int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.without, s.sinceGap
}

// omitBed is an engine with a table "items" whose one shard was rolled
// over: the closed parent holds 300 items, its open child 300 more.
type omitBed struct {
	*enginetest.Bed
	arn           string
	parent, child string
}

func newOmitBed(t *testing.T) *omitBed {
	t.Helper()
	b := &omitBed{Bed: enginetest.Start(t, engine.Options{TTLInterval: -1, StreamShards: 1, Logger: zap.NewNop()})}
	b.arn = b.CreateTable(t, enginetest.Table{Name: "items", Hash: "id"})
	b.write(t, "p")
	if err := b.Engine.ForceRollover("items"); err != nil {
		t.Fatal(err)
	}
	b.write(t, "c")
	d, err := b.Streams.DescribeStream(context.Background(), &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(b.arn)})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range d.StreamDescription.Shards {
		if s.ParentShardId != nil {
			b.parent, b.child = aws.ToString(s.ParentShardId), aws.ToString(s.ShardId)
		}
	}
	if b.parent == "" {
		t.Fatalf("no child shard after the rollover: %+v", d.StreamDescription.Shards)
	}
	return b
}

// write puts items prefix000..prefix299.
func (b *omitBed) write(t *testing.T, prefix string) {
	t.Helper()
	for i := 0; i < 300; i += 25 {
		var reqs []dtypes.WriteRequest
		for j := i; j < i+25; j++ {
			reqs = append(reqs, dtypes.WriteRequest{PutRequest: &dtypes.PutRequest{Item: map[string]dtypes.AttributeValue{
				"id": &dtypes.AttributeValueMemberS{Value: fmt.Sprintf("%s%03d", prefix, j)},
			}}})
		}
		for len(reqs) > 0 {
			out, err := b.DynamoDB.BatchWriteItem(context.Background(), &dynamodb.BatchWriteItemInput{RequestItems: map[string][]dtypes.WriteRequest{"items": reqs}})
			if err != nil {
				t.Fatalf("BatchWriteItem: %v", err)
			}
			reqs = out.UnprocessedItems["items"]
		}
	}
}

// openOmitStore opens the file store, or the DynamoDB checkpoint store and
// the leases that fence it, which are also the Assigner.
func openOmitStore(t *testing.T, b *omitBed, mode string) (checkpoint.Store, shard.Assigner) {
	t.Helper()
	if mode == "file store" {
		s, err := checkpoint.OpenFile(filepath.Join(t.TempDir(), "checkpoints.json"))
		if err != nil {
			t.Fatalf("OpenFile: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		return s, nil
	}
	ls, err := lease.Open(context.Background(), lease.Options{Client: b.DynamoDB, Table: "leases", Create: true,
		WorkerID: "w1", LeaseDuration: 6 * time.Second, RenewEvery: time.Second})
	if err != nil {
		t.Fatalf("lease.Open: %v", err)
	}
	t.Cleanup(func() { ls.Close() })
	return checkpoint.NewDynamo(ls), ls
}

// TestOmittedParentInBothStores runs the consumer with the file store and
// with the DynamoDB lease store. The parent shard's reader is held with
// records still unread (the sink holds the first batch; the in-flight
// budget holds the next) when one stream description leaves the parent
// out. Every record of both shards must be delivered, every one of the
// parent's before any of the child's, and the parent stored finished.
func TestOmittedParentInBothStores(t *testing.T) {
	for _, mode := range []string{"file store", "lease store"} {
		t.Run(mode, func(t *testing.T) {
			b := newOmitBed(t)
			store, asg := openOmitStore(t, b, mode)
			spy := &omitSpy{Client: b.StreamsClient("w1"), shard: b.parent}
			gate := make(chan struct{})
			sink := sinktest.New("order")
			sink.Gate(gate)
			c, err := consumer.New(consumer.Config{
				Options: shard.Options{
					Streams: spy, TableNames: []string{"items"}, Assigner: asg, GetRecordsLimit: 25,
					DiscoveryInterval: 50 * time.Millisecond, IdleBackoff: 50 * time.Millisecond,
					StopTimeout: 5 * time.Second,
					Logger:      zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)),
				},
				Tables: b.DynamoDB, Store: store,
				Routes:           []consumer.Route{{Sink: sink, Kinds: []event.Kind{event.Inserted}}},
				MaxInFlightBytes: 1, CheckpointInterval: 100 * time.Millisecond, ShutdownTimeout: 5 * time.Second,
			})
			if err != nil {
				t.Fatalf("consumer.New: %v", err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- c.Run(ctx) }()
			var once sync.Once
			stop := func() {
				once.Do(func() {
					cancel()
					select {
					case err := <-done:
						if err != nil {
							t.Errorf("Run: %v", err)
						}
					case <-time.After(30 * time.Second):
						t.Errorf("Run did not return")
					}
				})
			}
			defer stop()

			select {
			case <-sink.Arrived():
			case <-time.After(30 * time.Second):
				t.Fatal("the parent's first batch never reached the sink")
			}
			if err := b.Engine.OmitShardFromDescribe("items", b.parent, 1); err != nil {
				t.Fatal(err)
			}
			eventually.Wait(t, 30*time.Second, "three descriptions after the one without the parent", func() error {
				if without, since := spy.counts(); without != 1 || since < 3 {
					return fmt.Errorf("%d descriptions without the parent, %d since", without, since)
				}
				return nil
			})
			close(gate)
			eventually.Wait(t, 60*time.Second, "all 600 items", func() error {
				if n := len(deliveries(sink.Events())); n < 600 {
					return fmt.Errorf("%d delivered", n)
				}
				return nil
			})
			stop()
			checkOmitted(t, b, store, sink)
		})
	}
}

// deliveries counts the deliveries of each item key ("id").
func deliveries(evs []event.Event) map[string]int {
	keys := map[string]int{}
	for _, ev := range evs {
		if v, ok := ev.Keys["id"].(*stypes.AttributeValueMemberS); ok {
			keys[v.Value]++
		}
	}
	return keys
}

// checkOmitted checks that every item arrived and the parent's events came
// before the child's, and that the parent is stored finished.
func checkOmitted(t *testing.T, b *omitBed, store checkpoint.Store, sink *sinktest.Recorder) {
	t.Helper()
	evs := sink.Events()
	if n := len(deliveries(evs)); n != 600 {
		t.Errorf("%d distinct items delivered, want 600", n)
	}
	lastParent, firstChild := -1, len(evs)
	for i, ev := range evs {
		if ev.ShardID == b.parent {
			lastParent = i
		} else if ev.ShardID == b.child && i < firstChild {
			firstChild = i
		}
	}
	if lastParent > firstChild {
		t.Errorf("a parent event arrived at %d, after the child's first at %d", lastParent, firstChild)
	}
	cps, err := store.Load(context.Background(), b.arn)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if !cps[b.parent].Finished {
		t.Errorf("parent's checkpoint %+v, want finished", cps[b.parent])
	}
}
