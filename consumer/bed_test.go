package consumer

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/ttl-archiver/archiver/checkpoint"
	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/engine/enginetest"
	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/shard"
)

// bed is the real engine served over HTTP, with real SDK clients.
type bed struct {
	t       *testing.T
	srv     *engine.Server
	eng     *engine.Engine
	db      *dynamodb.Client
	streams *dynamodbstreams.Client
}

func newBed(t *testing.T, o engine.Options) *bed {
	t.Helper()
	if o.TTLInterval == 0 {
		o.TTLInterval = -1 // tests sweep explicitly
	}
	eb := enginetest.Start(t, o)
	return &bed{t: t, srv: eb.Server, eng: eb.Engine, db: eb.DynamoDB, streams: eb.Streams}
}

// createTable makes a table with a stream of new and old images and TTL on
// "expires".
func (b *bed) createTable(name string) {
	b.t.Helper()
	enginetest.CreateTable(b.t, b.db, enginetest.Table{Name: name, TTL: "expires"})
}

// put writes items pk = prefix-i (i in [from, to)) with the given expiry
// (epoch seconds) and a payload, in parallel BatchWriteItem calls.
func (b *bed) put(table, prefix string, from, to int, expires int64) {
	b.t.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	sem := make(chan struct{}, 8)
	for i := from; i < to; i += 25 {
		end := min(i+25, to)
		sem <- struct{}{}
		wg.Add(1)
		go func(i, end int) {
			defer func() { <-sem; wg.Done() }()
			var reqs []types.WriteRequest
			for j := i; j < end; j++ {
				reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: map[string]types.AttributeValue{
					"pk":      &types.AttributeValueMemberS{Value: fmt.Sprintf("%s-%d", prefix, j)},
					"expires": &types.AttributeValueMemberN{Value: strconv.FormatInt(expires, 10)},
					"payload": &types.AttributeValueMemberB{Value: []byte{byte(j), 0, 0xff}},
					"n":       &types.AttributeValueMemberN{Value: strconv.Itoa(j) + ".50"},
				}}})
			}
			in := &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: reqs}}
			for {
				out, err := b.db.BatchWriteItem(ctx, in)
				if err != nil {
					select {
					case errs <- err:
					default:
					}
					return
				}
				if len(out.UnprocessedItems) == 0 {
					return
				}
				in.RequestItems = out.UnprocessedItems
			}
		}(i, end)
	}
	wg.Wait()
	select {
	case err := <-errs:
		b.t.Fatal(err)
	default:
	}
}

// sweep runs the engine's TTL pass and checks how many items it deleted.
func (b *bed) sweep(want int) {
	b.t.Helper()
	n, err := b.eng.SweepTTL(context.Background())
	if err != nil {
		b.t.Fatal(err)
	}
	if want >= 0 && n != want {
		b.t.Fatalf("SweepTTL deleted %d items, want %d", n, want)
	}
}

func (b *bed) streamARN(table string) string {
	b.t.Helper()
	arn, err := b.eng.StreamARN(table)
	if err != nil {
		b.t.Fatal(err)
	}
	return arn
}

// openShards lists the stream's open shards.
func (b *bed) openShards(table string) []string {
	b.t.Helper()
	var out []string
	in := &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(b.streamARN(table))}
	for {
		d, err := b.streams.DescribeStream(context.Background(), in)
		if err != nil {
			b.t.Fatal(err)
		}
		for _, s := range d.StreamDescription.Shards {
			if s.SequenceNumberRange == nil || s.SequenceNumberRange.EndingSequenceNumber == nil {
				out = append(out, *s.ShardId)
			}
		}
		if d.StreamDescription.LastEvaluatedShardId == nil {
			return out
		}
		in.ExclusiveStartShardId = d.StreamDescription.LastEvaluatedShardId
	}
}

var past = time.Now().Add(-time.Hour).Unix()

// baseConfig is a consumer configuration for the bed with fast timings.
func (b *bed) config(t *testing.T, table string, store checkpoint.Store, routes ...Route) Config {
	return Config{
		Options: shard.Options{
			Streams: b.streams, TableNames: []string{table},
			DiscoveryInterval: 200 * time.Millisecond, IdleBackoff: 20 * time.Millisecond,
			Logger:     zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)),
			Registerer: prometheus.NewRegistry(),
		},
		Tables: b.db, Store: store,
		Routes:             routes,
		CheckpointInterval: 50 * time.Millisecond,
		RetryMinBackoff:    5 * time.Millisecond, RetryMaxBackoff: 200 * time.Millisecond,
	}
}

// runner runs a consumer until stop.
type runner struct {
	cancel context.CancelFunc
	done   chan error
}

func start(t *testing.T, cfg Config) *runner {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &runner{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- c.Run(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop cancels the consumer and waits for Run to return nil.
func (r *runner) stop(t *testing.T) {
	t.Helper()
	if r.done == nil {
		return
	}
	r.cancel()
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("Run returned %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	r.done = nil
}

// readArchive decodes every line the file sink wrote under dir.
func readArchive(t *testing.T, dir string) []event.Event {
	t.Helper()
	var out []event.Event
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(p) != ".jsonl" {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		// The sink may be appending right now: a last line without its
		// newline is not yet there.
		if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
			data = data[:i+1]
		} else {
			data = nil
		}
		for _, line := range bytes.Split(data, []byte("\n")) {
			if len(line) == 0 {
				continue
			}
			e, err := event.DecodeLine(line)
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			out = append(out, e)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func pkOf(e event.Event) string {
	if v, ok := e.Keys["pk"].(*stypes.AttributeValueMemberS); ok {
		return v.Value
	}
	return fmt.Sprint(e.Keys["pk"])
}

func deleteInput(table, pk string) *dynamodb.DeleteItemInput {
	return &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}}}
}
