package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// plLoadExpiredTable creates the table without a stream, writes n items
// (their TTL an hour ago, padded with itemBytes bytes) with BatchWriteItem from 16 writers, then enables
// the stream and TTL.
func plLoadExpiredTable(ctx context.Context, ddb *dynamodb.Client, table string, n, itemBytes int) error {
	_, err := ddb.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:   aws.String(table),
		BillingMode: ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{
			{AttributeName: aws.String("UserName"), AttributeType: ddbtypes.ScalarAttributeTypeS},
			{AttributeName: aws.String("SessionId"), AttributeType: ddbtypes.ScalarAttributeTypeS},
		},
		KeySchema: []ddbtypes.KeySchemaElement{
			{AttributeName: aws.String("UserName"), KeyType: ddbtypes.KeyTypeHash},
			{AttributeName: aws.String("SessionId"), KeyType: ddbtypes.KeyTypeRange},
		},
	})
	if err != nil {
		return fmt.Errorf("create table: %w", err)
	}
	hourAgo := time.Now().Add(-time.Hour).Unix()
	if err := plPutItems(ctx, ddb, table, 0, n, itemBytes, func(int) int64 { return hourAgo }); err != nil {
		return err
	}
	if _, err := ddb.UpdateTable(ctx, &dynamodb.UpdateTableInput{
		TableName: aws.String(table),
		StreamSpecification: &ddbtypes.StreamSpecification{StreamEnabled: aws.Bool(true),
			StreamViewType: ddbtypes.StreamViewTypeNewAndOldImages},
	}); err != nil {
		return fmt.Errorf("enable stream: %w", err)
	}
	if _, err := ddb.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName: aws.String(table),
		TimeToLiveSpecification: &ddbtypes.TimeToLiveSpecification{AttributeName: aws.String("ExpirationTime"),
			Enabled: aws.Bool(true)},
	}); err != nil {
		return fmt.Errorf("enable TTL: %w", err)
	}
	return nil
}

// plPutItems writes items from..from+n-1 (TTL exp(i), padded with a
// string of itemBytes bytes unless 0) to table with
// BatchWriteItem from 16 writers.
func plPutItems(ctx context.Context, ddb *dynamodb.Client, table string, from, n, itemBytes int, exp func(i int) int64) error {
	created := strconv.FormatInt(time.Now().Add(-3*time.Hour).Unix(), 10)
	const writers = 16
	var next atomic.Int64
	errs := make(chan error, writers)
	var wg sync.WaitGroup
	for g := 0; g < writers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				start := from + int(next.Add(25)) - 25
				if start >= from+n {
					return
				}
				var reqs []ddbtypes.WriteRequest
				for i := start; i < min(start+25, from+n); i++ {
					reqs = append(reqs, ddbtypes.WriteRequest{PutRequest: &ddbtypes.PutRequest{Item: map[string]ddbtypes.AttributeValue{
						"UserName":       &ddbtypes.AttributeValueMemberS{Value: fmt.Sprintf("user%05d", i%10000)},
						"SessionId":      &ddbtypes.AttributeValueMemberS{Value: fmt.Sprintf("%016x", uint64(i)*0x9E3779B97F4A7C15)},
						"CreationTime":   &ddbtypes.AttributeValueMemberN{Value: created},
						"ExpirationTime": &ddbtypes.AttributeValueMemberN{Value: strconv.FormatInt(exp(i), 10)},
						"SessionInfo": &ddbtypes.AttributeValueMemberM{Value: map[string]ddbtypes.AttributeValue{
							"device": &ddbtypes.AttributeValueMemberS{Value: "laptop"},
							"ip":     &ddbtypes.AttributeValueMemberS{Value: "192.0.2.10"},
							"pages":  &ddbtypes.AttributeValueMemberN{Value: strconv.Itoa(i % 97)},
						}},
					}}})
					if itemBytes > 0 {
						reqs[len(reqs)-1].PutRequest.Item["Payload"] = &ddbtypes.AttributeValueMemberS{Value: strings.Repeat("p", itemBytes)}
					}
				}
				for len(reqs) > 0 {
					out, err := ddb.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{
						RequestItems: map[string][]ddbtypes.WriteRequest{table: reqs}})
					if err != nil {
						errs <- err
						return
					}
					reqs = out.UnprocessedItems[table]
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return fmt.Errorf("load: %w", err)
	}
	return nil
}
