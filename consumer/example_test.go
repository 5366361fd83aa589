package consumer_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/checkpoint"
	"github.com/ttl-archiver/archiver/consumer"
	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/shard"
	"github.com/ttl-archiver/archiver/sinks"
)

// printSink prints the key of every event it gets and acknowledges at once.
type printSink struct{ seen chan struct{} }

func (p printSink) Name() string { return "print" }
func (p printSink) Write(ctx context.Context, b sinks.Batch, ack sinks.Ack) error {
	for _, e := range b.Events {
		key := e.Keys["id"].(*stypes.AttributeValueMemberS).Value
		fmt.Printf("%s %s (TTL attribute %q)\n", e.Kind, key, e.TTLAttribute)
		p.seen <- struct{}{}
	}
	ack(nil)
	return nil
}
func (p printSink) Flush(context.Context) error { return nil }
func (p printSink) Close(context.Context) error { return nil }

// Archive the items DynamoDB's TTL deletes: here from the local engine,
// into a sink that prints them. A user's own delete is not archived.
func Example() {
	ctx := context.Background()
	srv, err := engine.Listen("127.0.0.1:0", engine.Options{TTLInterval: -1})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("x", "x", "")}
	db := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(srv.Endpoint()) })
	streams := dynamodbstreams.NewFromConfig(cfg, func(o *dynamodbstreams.Options) { o.BaseEndpoint = aws.String(srv.Endpoint()) })

	_, err = db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String("sessions"),
		BillingMode:          types.BillingModePayPerRequest,
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		StreamSpecification:  &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewAndOldImages},
	})
	if err != nil {
		log.Fatal(err)
	}
	_, err = db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String("sessions"),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String("expires"), Enabled: aws.Bool(true)},
	})
	if err != nil {
		log.Fatal(err)
	}
	expired := strconv.FormatInt(time.Now().Add(-time.Hour).Unix(), 10)
	for _, id := range []string{"s-1", "s-2", "s-3"} {
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("sessions"), Item: map[string]types.AttributeValue{
			"id": &types.AttributeValueMemberS{Value: id}, "expires": &types.AttributeValueMemberN{Value: expired}}})
		if err != nil {
			log.Fatal(err)
		}
	}
	// A user's delete: classified "deleted", which this route does not want.
	if _, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String("sessions"),
		Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "s-2"}}}); err != nil {
		log.Fatal(err)
	}
	if _, err := srv.Engine().SweepTTL(ctx); err != nil { // the TTL process deletes s-1 and s-3
		log.Fatal(err)
	}

	dir, err := os.MkdirTemp("", "example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := checkpoint.OpenFile(filepath.Join(dir, "checkpoints.json"))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	sink := printSink{seen: make(chan struct{}, 10)}
	c, err := consumer.New(consumer.Config{
		Options: shard.Options{Streams: streams, TableNames: []string{"sessions"}},
		Tables:  db,
		Store:   store,
		Routes:  []consumer.Route{{Sink: sink}}, // Kinds default to expired only
	})
	if err != nil {
		log.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- c.Run(runCtx) }()
	<-sink.seen
	<-sink.seen
	stop() // as on SIGTERM: stop reading, flush, checkpoint
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	// Output:
	// expired s-1 (TTL attribute "expires")
	// expired s-3 (TTL attribute "expires")
}
