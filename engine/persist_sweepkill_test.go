package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// TestSweepKill9 SIGKILLs the real binary 0.05, 0.15 and 0.3 s into a TTL
// sweep of expired items, three rounds on one --data-dir, and after each
// restart compares the table with its stream: no item is gone without a
// REMOVE record, and no REMOVE record names an item still there (an
// item's delete and its record are one log entry). The sweep has 20,000
// items to keep the suite fast; SWEEPKILL_ITEMS=150000 runs the full size.
func TestSweepKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the archiver binary")
	}
	n := 20000
	if s := os.Getenv("SWEEPKILL_ITEMS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			t.Fatalf("SWEEPKILL_ITEMS=%q: %v", s, err)
		}
	}
	bin := buildArchiver(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	cmd, ep := startBinary(t, bin, dir)
	db, _ := binaryClients(ep, 3)
	if _, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String("sweep"), BillingMode: types.BillingModePayPerRequest,
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		StreamSpecification:  &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeKeysOnly},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: aws.String("sweep"),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String("exp"), Enabled: aws.Bool(true)}}); err != nil {
		t.Fatal(err)
	}
	// Expired an hour ago by the engine's own clock.
	exp := fmt.Sprint(engineNow(t, ep).Add(-time.Hour).Unix())
	writeItems(ctx, t, db, n, exp)

	all := make(map[string]bool, n)
	for i := 0; i < n; i++ {
		all[fmt.Sprintf("k%07d", i)] = true
	}
	for _, delay := range []time.Duration{50 * time.Millisecond, 150 * time.Millisecond, 300 * time.Millisecond} {
		sweep := make(chan error, 1)
		go func() {
			resp, err := http.Post(ep+"/_engine/ttl/sweep", "application/json", nil)
			if err == nil {
				resp.Body.Close()
			}
			sweep <- err
		}()
		time.Sleep(delay)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
		<-sweep
		cmd, ep = startBinary(t, bin, dir)
		db, st := binaryClients(ep, 3)
		left := scanKeys(ctx, t, db)
		removed := removeRecords(ctx, t, db, st)
		gone, stale := 0, 0
		for k := range all {
			if !left[k] && !removed[k] {
				gone++
			}
		}
		for k := range removed {
			if left[k] {
				stale++
			}
		}
		t.Logf("kill -9 at %v: %d of %d items left, %d REMOVE records", delay, len(left), n, len(removed))
		if gone > 0 || stale > 0 {
			t.Fatalf("kill -9 at %v: %d items gone without a REMOVE record, %d REMOVE records whose item is still there", delay, gone, stale)
		}
	}
}

// engineNow reads the engine's clock over the control API.
func engineNow(t *testing.T, ep string) time.Time {
	t.Helper()
	resp, err := http.Get(ep + "/_engine/clock")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct{ Now time.Time }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out.Now
}

// writeItems writes items k0000000.. with TTL exp, 25 to a BatchWriteItem
// from 8 goroutines.
func writeItems(ctx context.Context, t *testing.T, db *dynamodb.Client, n int, exp string) {
	t.Helper()
	var wg sync.WaitGroup
	batches := make(chan int)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for start := range batches {
				var reqs []types.WriteRequest
				for i := start; i < min(start+25, n); i++ {
					reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: item{"pk": S(fmt.Sprintf("k%07d", i)), "exp": N(exp)}}})
				}
				for len(reqs) > 0 {
					out, err := db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{"sweep": reqs}})
					if err != nil {
						t.Error(err)
						return
					}
					reqs = out.UnprocessedItems["sweep"]
				}
			}
		}()
	}
	for i := 0; i < n; i += 25 {
		batches <- i
	}
	close(batches)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
}

// scanKeys returns the pk of every item of the table "sweep".
func scanKeys(ctx context.Context, t *testing.T, db *dynamodb.Client) map[string]bool {
	t.Helper()
	keys := map[string]bool{}
	for _, it := range scanItems(ctx, t, db, "sweep") {
		keys[it["pk"].(*types.AttributeValueMemberS).Value] = true
	}
	return keys
}

// scanItems returns every item of the table (a consistent scan).
func scanItems(ctx context.Context, t *testing.T, db *dynamodb.Client, table string) []item {
	t.Helper()
	var items []item
	p := dynamodb.NewScanPaginator(db, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, out.Items...)
	}
	return items
}

// removeRecords returns the pk of every REMOVE record of the table
// "sweep"'s stream.
func removeRecords(ctx context.Context, t *testing.T, db *dynamodb.Client, st *dynamodbstreams.Client) map[string]bool {
	t.Helper()
	keys := map[string]bool{}
	for _, r := range streamRecords(ctx, t, db, st, "sweep") {
		if r.EventName == stypes.OperationTypeRemove {
			keys[r.Dynamodb.Keys["pk"].(*stypes.AttributeValueMemberS).Value] = true
		}
	}
	return keys
}

// streamRecords returns every record of the table's stream, reading every
// shard from TRIM_HORIZON, shard by shard.
func streamRecords(ctx context.Context, t *testing.T, db *dynamodb.Client, st *dynamodbstreams.Client, table string) []stypes.Record {
	t.Helper()
	desc, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	var recs []stypes.Record
	var start *string
	for {
		ds, err := st.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: desc.Table.LatestStreamArn, ExclusiveStartShardId: start})
		if err != nil {
			t.Fatal(err)
		}
		for _, sh := range ds.StreamDescription.Shards {
			it, err := st.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: desc.Table.LatestStreamArn, ShardId: sh.ShardId, ShardIteratorType: stypes.ShardIteratorTypeTrimHorizon})
			if err != nil {
				t.Fatal(err)
			}
			for iter := it.ShardIterator; iter != nil; {
				out, err := st.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter})
				if err != nil {
					t.Fatal(err)
				}
				recs = append(recs, out.Records...)
				if len(out.Records) == 0 {
					break
				}
				iter = out.NextShardIterator
			}
		}
		if start = ds.StreamDescription.LastEvaluatedShardId; start == nil {
			return recs
		}
	}
}
