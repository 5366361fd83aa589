package checkpoint_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/ttl-archiver/archiver/checkpoint"
)

// A file store keeps one archiver's checkpoints across restarts.
func ExampleOpenFile() {
	dir, err := os.MkdirTemp("", "checkpoints")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "archiver.json")
	ctx := context.Background()

	store, err := checkpoint.OpenFile(path)
	if err != nil {
		log.Fatal(err)
	}
	arn := "arn:aws:dynamodb:us-east-1:000000000000:table/t/stream/2026-01-01T00:00:00.000"
	if err := store.Save(ctx, arn, "shardId-0001", checkpoint.Checkpoint{SequenceNumber: "4200"}); err != nil {
		log.Fatal(err)
	}

	// A second archiver on the same file is refused while the first runs.
	if _, err := checkpoint.OpenFile(path); err != nil {
		fmt.Println("second open locked:", errors.Is(err, checkpoint.ErrLocked))
	}
	store.Close()

	// After a restart the checkpoint is still there.
	store, err = checkpoint.OpenFile(path)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	cps, err := store.Load(ctx, arn)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(cps["shardId-0001"].SequenceNumber)
	// Output:
	// second open locked: true
	// 4200
}

// Finished shards are forgotten PruneFinishedAfter after they finished, so
// the file follows the stream's live shards, not its history.
func ExampleOpenFileWith() {
	dir, err := os.MkdirTemp("", "checkpoints")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	now := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	store, err := checkpoint.OpenFileWith(filepath.Join(dir, "archiver.json"), checkpoint.FileOptions{
		PruneFinishedAfter: 72 * time.Hour,
		Now:                func() time.Time { return now },
	})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	arn := "arn:aws:dynamodb:us-east-1:000000000000:table/t/stream/2026-01-01T00:00:00.000"
	save := func(shard string, cp checkpoint.Checkpoint) {
		if err := store.Save(ctx, arn, shard, cp); err != nil {
			log.Fatal(err)
		}
	}
	save("parent", checkpoint.Checkpoint{SequenceNumber: "100", Finished: true})
	save("child", checkpoint.Checkpoint{SequenceNumber: "200"})

	now = now.Add(73 * time.Hour)
	save("child", checkpoint.Checkpoint{SequenceNumber: "250"})
	cps, err := store.Load(ctx, arn)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(cps), cps["child"].SequenceNumber)
	// Output:
	// 1 250
}

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
