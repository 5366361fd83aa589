package lease_test

import (
	"context"
	"log"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ttl-archiver/archiver/checkpoint"
	"github.com/ttl-archiver/archiver/lease"
)

// Several workers share a stream: each opens the same table with its own
// worker ID and passes the lease store to the consumer as the shard
// walker's Assigner, and the checkpoint store it fences as its Store. On
// shutdown, after the consumer returned, ReleaseAll hands every lease over
// at once.
func ExampleOpen() {
	ctx := context.Background()
	client := dynamodb.New(dynamodb.Options{Region: "eu-west-1"}) // credentials from the default chain in real use
	leases, err := lease.Open(ctx, lease.Options{
		Client:        client,
		Table:         "archiver-leases",
		Create:        true,
		WorkerID:      lease.DefaultWorkerID(ctx),
		LeaseDuration: 20 * time.Second,
		RenewEvery:    5 * time.Second,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer leases.Close()
	store := checkpoint.NewDynamo(leases)

	// ... consumer.New(consumer.Config{Store: store, Assigner: leases, ...}).Run(ctx)
	_ = store

	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := leases.ReleaseAll(shutdown); err != nil {
		log.Print(err)
	}
}
