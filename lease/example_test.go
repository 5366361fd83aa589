package checkpoint_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ttl-archiver/archiver/checkpoint"
)

func ExampleParseDynamoURL() {
	u, err := checkpoint.ParseDynamoURL("dynamodb://archiver-leases?region=eu-west-1&create=true")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("table %s, region %s, create %v\n", u.Table, u.Region, u.Create)

	_, err = checkpoint.ParseDynamoURL("dynamodb://archiver-leases?create=yes")
	fmt.Println(err)
	// Output:
	// table archiver-leases, region eu-west-1, create true
	// checkpoint URL "dynamodb://archiver-leases?create=yes": parameter create "yes" is not true or false
}

// Several workers share a stream: each opens the same table with its own
// worker ID and passes the store to the consumer both as its checkpoint
// Store and as the shard walker's Assigner. On shutdown, after the consumer
// returned, ReleaseAll hands every lease over at once.
func ExampleOpenDynamo() {
	ctx := context.Background()
	client := dynamodb.New(dynamodb.Options{Region: "eu-west-1"}) // credentials from the default chain in real use
	store, err := checkpoint.OpenDynamo(ctx, checkpoint.DynamoOptions{
		Client:        client,
		Table:         "archiver-leases",
		Create:        true,
		WorkerID:      checkpoint.DefaultWorkerID(ctx),
		LeaseDuration: 20 * time.Second,
		RenewEvery:    5 * time.Second,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	// ... consumer.New(consumer.Config{Store: store, Assigner: store, ...}).Run(ctx)

	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := store.ReleaseAll(shutdown); err != nil {
		log.Print(err)
	}
}
