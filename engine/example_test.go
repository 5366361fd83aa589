package engine_test

import (
	"context"
	"fmt"
	"log"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ttl-archiver/archiver/engine"
)

// Start an engine in-process, create a table with TTL, let an item expire
// and sweep it away.
func Example() {
	ctx := context.Background()
	clock := engine.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	srv, err := engine.Listen("127.0.0.1:0", engine.Options{
		Clock:       clock,
		TTLInterval: -1, // no background sweeper: this example sweeps explicitly
	})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	db := dynamodb.NewFromConfig(aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("any", "any", ""),
	}, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(srv.Endpoint()) })

	_, err = db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String("sessions"),
		BillingMode:          types.BillingModePayPerRequest,
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		StreamSpecification:  &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeOldImage},
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
	expires := clock.Now().Add(time.Hour).Unix()
	_, err = db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String("sessions"),
		Item: map[string]types.AttributeValue{
			"id":      &types.AttributeValueMemberS{Value: "s-1"},
			"expires": &types.AttributeValueMemberN{Value: strconv.FormatInt(expires, 10)},
		},
	})
	if err != nil {
		log.Fatal(err)
	}

	n, _ := srv.Engine().SweepTTL(ctx)
	fmt.Println("deleted before expiry:", n)
	clock.Advance(2 * time.Hour)
	n, _ = srv.Engine().SweepTTL(ctx)
	fmt.Println("deleted after expiry:", n)
	// Output:
	// deleted before expiry: 0
	// deleted after expiry: 1
}

// Fault injection: throttle the next GetRecords call of any stream.
func ExampleEngine_ThrottleGetRecords() {
	eng, err := engine.New(engine.Options{TTLInterval: -1})
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()
	eng.ThrottleGetRecords(1) // the next GetRecords fails with LimitExceededException
	fmt.Println("armed")
	// Output: armed
}

// The --shard-rollover flag takes an age or a record count.
func ExampleParseRollover() {
	d, n, _ := engine.ParseRollover("4h")
	fmt.Println(d, n)
	d, n, _ = engine.ParseRollover("500")
	fmt.Println(d, n)
	// Output:
	// 4h0m0s 0
	// 0s 500
}

// Fault injection: the next BatchWriteItem call processes only half of its
// requests and hands the rest back in UnprocessedItems, so an
// application's retry loop runs as it would under throttling in AWS.
func ExampleEngine_ThrottleBatchWrites() {
	ctx := context.Background()
	srv, err := engine.Listen("127.0.0.1:0", engine.Options{TTLInterval: -1})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	db := dynamodb.NewFromConfig(aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("any", "any", ""),
	}, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(srv.Endpoint()) })
	_, err = db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String("events"),
		BillingMode:          types.BillingModePayPerRequest,
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
	})
	if err != nil {
		log.Fatal(err)
	}
	var reqs []types.WriteRequest
	for i := 0; i < 10; i++ {
		reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: map[string]types.AttributeValue{
			"id": &types.AttributeValueMemberS{Value: strconv.Itoa(i)},
		}}})
	}

	srv.Engine().ThrottleBatchWrites(1)
	pending := map[string][]types.WriteRequest{"events": reqs}
	for len(pending) > 0 {
		out, err := db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: pending})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("unprocessed:", len(out.UnprocessedItems["events"]))
		pending = out.UnprocessedItems
	}
	// Output:
	// unprocessed: 5
	// unprocessed: 0
}
