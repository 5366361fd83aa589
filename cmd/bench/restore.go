package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	st "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/archive"
	"github.com/ttl-archiver/archiver/cmd/bench/internal/benchkit"
	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/restore"
	"github.com/ttl-archiver/archiver/sinks"
)

const restoreParallel = 8

// restoreSizes are the items restored and the rounds.
type restoreSizes struct{ items, rounds int }

func restoreSizesFor(tiny bool) restoreSizes {
	if tiny {
		return restoreSizes{items: 200, rounds: 1}
	}
	return restoreSizes{items: 20_000, rounds: 5}
}

// runRestoreBench measures `archiver restore` into the engine: items/s
// restored from a file:// archive (read, selected, TTL extended, written
// with attribute_not_exists by 8 writers), against a plain PutItem loop of
// the same items by 8 goroutines of the same process, each into a new
// table.
func runRestoreBench(ctx context.Context, w io.Writer, tiny bool) error {
	sz := restoreSizesFor(tiny)
	srv, err := engine.Listen("127.0.0.1:0", engine.Options{TTLInterval: -1})
	if err != nil {
		return err
	}
	defer srv.Close()
	db, _ := benchkit.PooledClients(srv.Endpoint())
	dir, err := os.MkdirTemp("", "restorebench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	evs := restoreBenchEvents(sz.items)
	if err := writeRestoreArchive(ctx, dir, evs); err != nil {
		return err
	}
	fmt.Fprintf(w, "restore: %d expired items (~%d B each) from a file:// archive, %d writers, engine over loopback HTTP\n",
		sz.items, benchPayload+60, restoreParallel)
	var loopR, restR, ratios []float64
	for round := range sz.rounds {
		// Alternate which runs first, and drop each table after its
		// phase, so neither side inherits the other's heap.
		var l, r float64
		for i, phase := range []string{"loop", "restore"} {
			if round%2 == 1 {
				phase = []string{"restore", "loop"}[i]
			}
			benchkit.Settle()
			table := fmt.Sprintf("%s%d", phase, round)
			var err error
			if phase == "loop" {
				l, err = putLoop(ctx, db, table, evs)
			} else {
				r, err = restoreOnce(ctx, db, table, dir, len(evs))
			}
			if err != nil {
				return fmt.Errorf("%s: %w", phase, err)
			}
			if _, err := db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)}); err != nil {
				return err
			}
		}
		loopR, restR, ratios = append(loopR, l), append(restR, r), append(ratios, r/l)
	}
	fmt.Fprintf(w, "  PutItem loop, %d goroutines: %8.0f items/s (median of %d)\n", restoreParallel, benchkit.Median(loopR), sz.rounds)
	fmt.Fprintf(w, "  archiver restore:           %8.0f items/s (median of %d)\n", benchkit.Median(restR), sz.rounds)
	lo, hi := slices.Min(ratios), slices.Max(ratios)
	fmt.Fprintf(w, "  restore / loop, median of the rounds' ratios: %.0f%% (target >= 70%%; rounds %.0f-%.0f%%)\n", 100*benchkit.Median(ratios), 100*lo, 100*hi)
	return nil
}

// restoreBenchEvents are n expired items as the consumer decodes them.
func restoreBenchEvents(n int) []event.Event {
	payload := make([]byte, benchPayload)
	for i := range payload {
		payload[i] = 'a' + byte(i%26)
	}
	t0 := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	evs := make([]event.Event, n)
	for i := range evs {
		pk := &st.AttributeValueMemberS{Value: "user#" + strconv.Itoa(i)}
		evs[i] = event.Event{
			Kind: event.Expired, Table: "sessions", StreamARN: "arn:aws:dynamodb:us-east-1:000000000000:table/sessions/stream/x",
			ShardID: "shardId-1", SequenceNumber: strconv.Itoa(1_000_000 + i), EventID: "ev" + strconv.Itoa(i), EventName: "REMOVE",
			DeletedBy: event.DeletedByTTL, ApproximateCreationTime: t0.Add(time.Duration(i) * time.Millisecond),
			Keys: event.Item{"pk": pk}, TTLAttribute: "ttl",
			OldImage: event.Item{"pk": pk, "ttl": &st.AttributeValueMemberN{Value: strconv.FormatInt(t0.Unix(), 10)},
				"data": &st.AttributeValueMemberS{Value: string(payload)}, "n": &st.AttributeValueMemberN{Value: strconv.Itoa(i)}},
		}
	}
	return evs
}

// writeRestoreArchive archives evs through the file sink under dir.
func writeRestoreArchive(ctx context.Context, dir string, evs []event.Event) error {
	sk, err := sinks.NewFileSink(dir, sinks.Options{NoManifests: true})
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	if err := sk.Write(ctx, sinks.Batch{StreamARN: evs[0].StreamARN, ShardID: evs[0].ShardID, Events: evs}, func(err error) { done <- err }); err != nil {
		return err
	}
	if err := <-done; err != nil {
		return err
	}
	return sk.Close(ctx)
}

func createRestoreTable(ctx context.Context, db *dynamodb.Client, name string) error {
	_, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String(name), BillingMode: types.BillingModePayPerRequest,
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
	})
	return err
}

// putLoop puts evs' images into a new table from restoreParallel
// goroutines and returns items/s.
func putLoop(ctx context.Context, db *dynamodb.Client, table string, evs []event.Event) (float64, error) {
	if err := createRestoreTable(ctx, db, table); err != nil {
		return 0, err
	}
	items := make([]map[string]types.AttributeValue, len(evs))
	for i := range evs {
		items[i] = restore.ToDynamoDB(evs[i].OldImage)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Value
	start := time.Now()
	for range restoreParallel {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(items) || ctx.Err() != nil {
					return
				}
				if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: items[i]}); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return 0, err
	}
	return float64(len(items)) / time.Since(start).Seconds(), nil
}

// restoreOnce restores the archive under dir (want items) into a new table
// and returns items/s.
func restoreOnce(ctx context.Context, db *dynamodb.Client, table, dir string, want int) (float64, error) {
	if err := createRestoreTable(ctx, db, table); err != nil {
		return 0, err
	}
	start := time.Now()
	a, err := archive.Open(ctx, "file://"+dir, archive.Options{})
	if err != nil {
		return 0, err
	}
	res, err := restore.Run(ctx, restore.Config{DB: db, Table: table, Parallel: restoreParallel, TTLAttribute: "ttl"},
		restore.ArchiveSource(a, archive.Selection{Kinds: []event.Kind{event.Expired}}, nil))
	if err != nil {
		return 0, err
	}
	if res.Written != int64(want) {
		return 0, fmt.Errorf("restored %d items, want %d (%+v)", res.Written, want, res)
	}
	return float64(res.Written) / time.Since(start).Seconds(), nil
}
