package sweep_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ttl-archiver/archiver/sweep"
)

// A writer files each item in the window of its TTL.
func ExampleWindow() {
	ttl := time.Date(2022, 7, 19, 21, 27, 31, 0, time.UTC)
	fmt.Println(sweep.Window(ttl, time.Minute, 1))
	fmt.Println(sweep.Window(ttl, 5*time.Minute, 1))

	// A hot table spreads each window over 8 index partitions.
	span, _ := sweep.ParseWindow(sweep.Window(ttl, time.Minute, 8))
	fmt.Println(span.Start, span.End, span.Shard >= 0 && span.Shard < 8)
	// Output:
	// 2022-07-19T21:27:00.000Z_2022-07-19T21:28:00.000Z
	// 2022-07-19T21:25:00.000Z_2022-07-19T21:30:00.000Z
	// 2022-07-19 21:27:00 +0000 UTC 2022-07-19 21:28:00 +0000 UTC true
}

// tableStore stands for the checkpoint store `archiver sweep` uses
// (file:// or dynamodb://): it keeps the cursor and holds the table.
type tableStore interface {
	sweep.CursorStore
	sweep.Locker
}

// The outline of `archiver sweep`: one sweeper per table, running only
// while this process holds the table.
func Example() {
	ctx := context.Background()
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	var store tableStore // e.g. the lease table of `archiver run`

	s, err := sweep.New(sweep.Config{
		Client:              dynamodb.NewFromConfig(awsCfg),
		Table:               "sessions",
		Window:              time.Minute, // what the writers pass to sweep.Window
		MaxDeletesPerSecond: 500,
		Cursor:              store,
	})
	if err != nil {
		log.Fatal(err) // names the Config field that is wrong
	}
	held, release, err := store.Acquire(ctx, "sessions")
	if err != nil {
		log.Fatal(err)
	}
	defer release(context.Background())
	// Run returns when ctx ends or the hold is lost (held is cancelled),
	// or at once when the table is not set up for sweeping.
	if err := s.Run(held); err != nil {
		log.Fatal(err)
	}
}
