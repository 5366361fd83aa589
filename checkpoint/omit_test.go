package checkpoint_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/ttl-archiver/archiver/checkpoint"
	"github.com/ttl-archiver/archiver/consumer"
	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/shard"
	"github.com/ttl-archiver/archiver/sinks"
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

// orderSink holds every write until its gate opens, then records each
// event's shard and key in arrival order.
type orderSink struct {
	gate     chan struct{}
	held     chan struct{}
	heldOnce sync.Once

	mu     sync.Mutex
	shards []string       // shard of each event, in arrival order
	keys   map[string]int // item key → deliveries
}

func (s *orderSink) Name() string { return "order" }

func (s *orderSink) Write(ctx context.Context, b sinks.Batch, ack sinks.Ack) error {
	s.heldOnce.Do(func() { close(s.held) })
	select {
	case <-s.gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	s.mu.Lock()
	for _, ev := range b.Events {
		s.shards = append(s.shards, ev.ShardID)
		if v, ok := ev.Keys["id"].(*stypes.AttributeValueMemberS); ok {
			s.keys[v.Value]++
		}
	}
	s.mu.Unlock()
	ack(nil)
	return nil
}

func (s *orderSink) Flush(context.Context) error { return nil }
func (s *orderSink) Close(context.Context) error { return nil }

func (s *orderSink) distinct() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.keys)
}

// omitBed is an engine with a table "items" whose one shard was rolled
// over: the closed parent holds 300 items, its open child 300 more.
type omitBed struct {
	srv           *engine.Server
	ddb           *dynamodb.Client
	arn           string
	parent, child string
}

func newOmitBed(t *testing.T) *omitBed {
	t.Helper()
	srv, err := engine.Listen("127.0.0.1:0", engine.Options{TTLInterval: -1, StreamShards: 1, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	b := &omitBed{srv: srv, ddb: dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.Endpoint()),
		Credentials: credentials.NewStaticCredentialsProvider("test", "secret", "")})}
	ctx := context.Background()
	out, err := b.ddb.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String("items"), BillingMode: dtypes.BillingModePayPerRequest,
		AttributeDefinitions: []dtypes.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: dtypes.ScalarAttributeTypeS}},
		KeySchema:            []dtypes.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: dtypes.KeyTypeHash}},
		StreamSpecification:  &dtypes.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: dtypes.StreamViewTypeNewAndOldImages},
	})
	if err != nil {
		t.Fatal(err)
	}
	b.arn = aws.ToString(out.TableDescription.LatestStreamArn)
	b.write(t, "p")
	if err := srv.Engine().ForceRollover("items"); err != nil {
		t.Fatal(err)
	}
	b.write(t, "c")
	d, err := b.streams("test").DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(b.arn)})
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
			out, err := b.ddb.BatchWriteItem(context.Background(), &dynamodb.BatchWriteItemInput{RequestItems: map[string][]dtypes.WriteRequest{"items": reqs}})
			if err != nil {
				t.Fatalf("BatchWriteItem: %v", err)
			}
			reqs = out.UnprocessedItems["items"]
		}
	}
}

func (b *omitBed) streams(key string) *dynamodbstreams.Client {
	return dynamodbstreams.New(dynamodbstreams.Options{Region: "us-east-1", BaseEndpoint: aws.String(b.srv.Endpoint()),
		Credentials: credentials.NewStaticCredentialsProvider(key, "secret", "")})
}

// openOmitStore opens the file store or the DynamoDB lease store; the lease
// store is also the Assigner.
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
	s, err := checkpoint.OpenDynamo(context.Background(), checkpoint.DynamoOptions{Client: b.ddb, Table: "leases", Create: true,
		WorkerID: "w1", LeaseDuration: 6 * time.Second, RenewEvery: time.Second})
	if err != nil {
		t.Fatalf("OpenDynamo: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s, s
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
			spy := &omitSpy{Client: b.streams("w1"), shard: b.parent}
			sink := &orderSink{gate: make(chan struct{}), held: make(chan struct{}), keys: map[string]int{}}
			c, err := consumer.New(consumer.Config{
				Options: shard.Options{
					Streams: spy, TableNames: []string{"items"}, Assigner: asg, GetRecordsLimit: 25,
					DiscoveryInterval: 50 * time.Millisecond, IdleBackoff: 50 * time.Millisecond,
					StopTimeout: 5 * time.Second,
					Logger:      zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)),
				},
				Tables: b.ddb, Store: store,
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
			case <-sink.held:
			case <-time.After(30 * time.Second):
				t.Fatal("the parent's first batch never reached the sink")
			}
			if err := b.srv.Engine().OmitShardFromDescribe("items", b.parent, 1); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 30*time.Second, "three descriptions after the one without the parent", func() error {
				if without, since := spy.counts(); without != 1 || since < 3 {
					return fmt.Errorf("%d descriptions without the parent, %d since", without, since)
				}
				return nil
			})
			close(sink.gate)
			waitFor(t, 60*time.Second, "all 600 items", func() error {
				if n := sink.distinct(); n < 600 {
					return fmt.Errorf("%d delivered", n)
				}
				return nil
			})
			stop()
			checkOmitted(t, b, store, sink)
		})
	}
}

// checkOmitted checks that every item arrived and the parent's events came
// before the child's, and that the parent is stored finished.
func checkOmitted(t *testing.T, b *omitBed, store checkpoint.Store, sink *orderSink) {
	t.Helper()
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(sink.keys) != 600 {
		t.Errorf("%d distinct items delivered, want 600", len(sink.keys))
	}
	lastParent, firstChild := -1, len(sink.shards)
	for i, id := range sink.shards {
		if id == b.parent {
			lastParent = i
		} else if id == b.child && i < firstChild {
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
