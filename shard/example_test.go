package shard_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/shard"
)

// printer is a Processor that prints each record and keeps each shard's
// position in memory (a real one writes them to a checkpoint store, after
// its sinks acknowledged the records).
type printer struct {
	mu   sync.Mutex
	pos  map[string]shard.Position
	seen int
	want int
	done chan struct{}
}

func (p *printer) Process(ctx context.Context, b shard.Batch) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range b.Records {
		key := r.Dynamodb.Keys["pk"].(*types.AttributeValueMemberS).Value
		fmt.Println(r.EventName, key)
		p.pos[b.ShardID] = shard.Position{SequenceNumber: aws.ToString(r.Dynamodb.SequenceNumber)}
		if p.seen++; p.seen == p.want {
			close(p.done)
		}
	}
	return nil
}

func (p *printer) ShardEnded(ctx context.Context, streamARN, shardID string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pos[shardID] = shard.Position{SequenceNumber: p.pos[shardID].SequenceNumber, Finished: true}
	return nil
}

func (p *printer) ShardStopped(ctx context.Context, streamARN, shardID string) error { return nil }

// Positions makes printer the walker's Positions too, so a restarted walker
// resumes after the last printed record.
func (p *printer) Positions(ctx context.Context, streamARN string) (map[string]shard.Position, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]shard.Position, len(p.pos))
	for k, v := range p.pos {
		out[k] = v
	}
	return out, nil
}

// Example reads a table's stream from the local engine: the walker finds
// the stream from the table name, reads each shard from TRIM_HORIZON in
// lineage order and hands the records to the Processor.
func Example() {
	srv, err := engine.Listen("127.0.0.1:0", engine.Options{TTLInterval: -1})
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	creds := credentials.NewStaticCredentialsProvider("local", "local", "")
	ddb := dynamodb.New(dynamodb.Options{BaseEndpoint: aws.String(srv.Endpoint()), Region: "us-east-1", Credentials: creds})
	streams := dynamodbstreams.New(dynamodbstreams.Options{BaseEndpoint: aws.String(srv.Endpoint()), Region: "us-east-1", Credentials: creds})

	ctx := context.Background()
	if _, err := ddb.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String("orders"),
		AttributeDefinitions: []dtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: dtypes.ScalarAttributeTypeS}},
		KeySchema:            []dtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: dtypes.KeyTypeHash}},
		BillingMode:          dtypes.BillingModePayPerRequest,
		StreamSpecification:  &dtypes.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: dtypes.StreamViewTypeNewAndOldImages},
	}); err != nil {
		panic(err)
	}
	for _, k := range []string{"a", "b", "c"} {
		if _, err := ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("orders"),
			Item: map[string]dtypes.AttributeValue{"pk": &dtypes.AttributeValueMemberS{Value: k}}}); err != nil {
			panic(err)
		}
	}

	p := &printer{pos: map[string]shard.Position{}, want: 3, done: make(chan struct{})}
	w, err := shard.New(shard.Options{
		Streams:    streams,
		Tables:     ddb,
		TableNames: []string{"orders"},
		Processor:  p,
		Positions:  p,
	})
	if err != nil {
		panic(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	go func() { <-p.done; stop() }()
	if err := w.Run(runCtx); err != nil { // returns nil once runCtx ends
		panic(err)
	}
	// Output:
	// INSERT a
	// INSERT b
	// INSERT c
}

// leases is a sketch of an Assigner: a lease store grants this worker the
// ready shards it holds leases on, with a context that ends when a lease is
// lost or handed off.
type leases struct {
	mu    sync.Mutex
	held  map[string]context.CancelFunc
	limit int
}

func (l *leases) Assign(ctx context.Context, streamARN string, ready []shard.Shard) ([]shard.Assignment, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []shard.Assignment
	for _, s := range ready {
		if _, ok := l.held[s.ID]; ok || len(l.held) >= l.limit {
			continue // already ours (the walker keeps the first Ctx), or enough
		}
		// A real store takes the lease with a conditional write here.
		leaseCtx, cancel := context.WithCancel(context.Background())
		l.held[s.ID] = cancel
		out = append(out, shard.Assignment{ShardID: s.ID, Ctx: leaseCtx})
	}
	return out, nil
}

func (l *leases) Release(ctx context.Context, streamARN, shardID string, finished bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if cancel, ok := l.held[shardID]; ok {
		cancel()
		delete(l.held, shardID)
	}
	// A real store lets the lease go (or marks it finished) here.
	return nil
}

// ExampleAssigner shows where a lease store plugs in: several walkers (in
// several processes) split a stream's shards, each reading only the shards
// its Assigner grants, and stopping one the moment its assignment ends.
func ExampleAssigner() {
	streams := dynamodbstreams.New(dynamodbstreams.Options{Region: "us-east-1"})
	w, err := shard.New(shard.Options{
		Streams:             streams,
		StreamARNs:          []string{"arn:aws:dynamodb:us-east-1:123456789012:table/orders/stream/2026-01-01T00:00:00.000"},
		Processor:           &printer{pos: map[string]shard.Position{}}, // the consumer, in the archiver
		Assigner:            &leases{held: map[string]context.CancelFunc{}, limit: 16},
		MaxConcurrentShards: 16, // never more readers than leases
	})
	if err != nil {
		panic(err)
	}
	_ = w // w.Run(ctx) until the worker shuts down; it then releases every lease
}

func ExampleParseStartPosition() {
	for _, s := range []string{"", "latest", "TRIM_HORIZON", "yesterday"} {
		p, err := shard.ParseStartPosition(s)
		fmt.Printf("%q %q %v\n", s, p, err)
	}
	// Output:
	// "" "trim-horizon" <nil>
	// "latest" "latest" <nil>
	// "TRIM_HORIZON" "trim-horizon" <nil>
	// "yesterday" "" start position "yesterday": want trim-horizon or latest
}

// FastGetRecords goes on a Streams client of your own (the walker's readers
// use it on their GetRecords calls either way): every GetRecords response
// is then decoded by the archiver's decoder, anything it does not
// recognise by the SDK's, and errors keep their SDK types.
func ExampleFastGetRecords() {
	ctx := context.Background()
	srv, err := engine.Listen("127.0.0.1:0", engine.Options{})
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	creds := credentials.NewStaticCredentialsProvider("local", "local", "")
	db := dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.Endpoint()), Credentials: creds})
	st := dynamodbstreams.New(dynamodbstreams.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.Endpoint()), Credentials: creds},
		shard.FastGetRecords)

	table, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String("Sessions"),
		AttributeDefinitions: []dtypes.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: dtypes.ScalarAttributeTypeS}},
		KeySchema:            []dtypes.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: dtypes.KeyTypeHash}},
		BillingMode:          dtypes.BillingModePayPerRequest,
		StreamSpecification:  &dtypes.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: dtypes.StreamViewTypeNewImage},
	})
	if err != nil {
		panic(err)
	}
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("Sessions"),
		Item: map[string]dtypes.AttributeValue{"id": &dtypes.AttributeValueMemberS{Value: "s-1"}}}); err != nil {
		panic(err)
	}
	desc, err := st.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: table.TableDescription.LatestStreamArn})
	if err != nil {
		panic(err)
	}
	for _, sh := range desc.StreamDescription.Shards {
		it, err := st.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: table.TableDescription.LatestStreamArn,
			ShardId: sh.ShardId, ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
		if err != nil {
			panic(err)
		}
		out, err := st.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it.ShardIterator})
		if err != nil {
			panic(err)
		}
		for _, r := range out.Records {
			fmt.Println(r.EventName, r.Dynamodb.Keys["id"].(*types.AttributeValueMemberS).Value)
		}
	}
	// Output: INSERT s-1
}
