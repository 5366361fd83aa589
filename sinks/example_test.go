package sinks_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/sinks"
)

func expiredSession() event.Event {
	keys := event.Item{"pk": &types.AttributeValueMemberS{Value: "session#42"}}
	return event.Event{
		Kind:                    event.Expired,
		Table:                   "sessions",
		ShardID:                 "shardId-0001",
		SequenceNumber:          "100",
		EventID:                 "e-100",
		EventName:               "REMOVE",
		ApproximateCreationTime: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Keys:                    keys,
		OldImage: event.Item{
			"pk":        keys["pk"],
			"user":      &types.AttributeValueMemberS{Value: "ada"},
			"expiresAt": &types.AttributeValueMemberN{Value: "1767322800"},
		},
	}
}

// Open a file sink from its URL, write a batch, and wait for the
// acknowledgement (which comes once the lines are fsynced).
func ExampleOpen() {
	dir, _ := os.MkdirTemp("", "archive")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	sink, kinds, err := sinks.Open(ctx, "file://"+dir+"?events=expired,deleted", sinks.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("route:", kinds)

	acked := make(chan error, 1)
	batch := sinks.Batch{ShardID: "shardId-0001", Events: []event.Event{expiredSession()}}
	if err := sink.Write(ctx, batch, func(err error) { acked <- err }); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("ack:", <-acked)
	if err := sink.Close(ctx); err != nil {
		fmt.Println(err)
	}

	data, _ := os.ReadFile(filepath.Join(dir, "sessions", "2026-01-02", "03.jsonl"))
	line, _ := event.DecodeLine(data)
	fmt.Println(string(event.MarshalItem(line.OldImage)))
	// Output:
	// route: [expired deleted]
	// ack: <nil>
	// {"expiresAt":{"N":"1767322800"},"pk":{"S":"session#42"},"user":{"S":"ada"}}
}

// Bad parameters are reported by name.
func ExampleOpen_badURL() {
	_, _, err := sinks.Open(context.Background(), "s3://archive/ttl?compression=lz4", sinks.Options{})
	fmt.Println(err)
	// Output:
	// sink "s3://archive/ttl?compression=lz4": compression: must be gzip, zstd or none
}

// A writer sink prints one line per event; format item gives the item as
// plain JSON.
func ExampleNewWriterSink() {
	var out strings.Builder
	sink := sinks.NewWriterSink("example://", &out, true, sinks.Options{})
	ctx := context.Background()
	done := make(chan struct{})
	sink.Write(ctx, sinks.Batch{Events: []event.Event{expiredSession()}}, func(error) { close(done) })
	<-done
	sink.Close(ctx)
	fmt.Print(out.String())
	// Output:
	// {"expiresAt":1767322800,"pk":"session#42","user":"ada"}
}
