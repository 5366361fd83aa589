package shard

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/engine/enginetest"
	"github.com/ttl-archiver/archiver/event"
)

// TestEstimateMemoryMatchesHeld: the memory budgets count event.EstimateMemory,
// so it must be what a decoded record really holds on the heap (its
// structs, maps, values and its share of the response it was decoded
// from), within 25%, for small items and for large ones. Records are read
// from the engine with FastGetRecords, as readers read them, and held;
// the heap's growth per held record is set against the estimate.
func TestEstimateMemoryMatchesHeld(t *testing.T) {
	cases := []struct {
		name    string
		n       int
		padding int // bytes of one more string attribute
		attrs   int // more Number attributes
	}{
		{"small items", 4000, 0, 0},
		{"1 KB items", 2000, 1000, 0},
		{"100 KB items", 150, 100_000, 0},
		{"items of 60 small attributes", 2000, 0, 50},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := newEnv(t, engine.Options{StreamShards: 1})
			table := "Mem" + strconv.Itoa(c.padding) + "x" + strconv.Itoa(c.attrs)
			arn := env.createTable(t, table)
			putSessions(t, env.ddb, table, c.n, c.padding, c.attrs)
			streams := enginetest.StreamsClientAt(env.srv.Endpoint(), enginetest.DefaultKey, FastGetRecords)
			sh := openShards(t, env.streams, arn)[0]
			read := func(limit int32) [][]types.Record {
				it, err := streams.GetShardIterator(context.Background(), &dynamodbstreams.GetShardIteratorInput{
					StreamArn: aws.String(arn), ShardId: aws.String(sh.ID), ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
				if err != nil {
					t.Fatal(err)
				}
				var held [][]types.Record
				for iter := it.ShardIterator; iter != nil; {
					out, err := streams.GetRecords(context.Background(), &dynamodbstreams.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(limit)})
					if err != nil {
						t.Fatal(err)
					}
					if len(out.Records) == 0 {
						break
					}
					held = append(held, out.Records)
					iter = out.NextShardIterator
				}
				return held
			}
			read(1) // warm the connection and the engine's caches
			before := heapInUse()
			held := read(1000)
			after := heapInUse()
			est, n := 0, 0
			for _, recs := range held {
				for _, r := range recs {
					est += event.EstimateMemory(r)
					n++
				}
			}
			if n != c.n {
				t.Fatalf("read %d records, want %d", n, c.n)
			}
			real := float64(after-before) / float64(n)
			perEst := float64(est) / float64(n)
			t.Logf("%s: %.0f bytes of heap per held record, estimate %.0f (%.2fx), SizeBytes %d",
				c.name, real, perEst, perEst/real, *held[0][0].Dynamodb.SizeBytes)
			if perEst < 0.75*real || perEst > 1.25*real {
				t.Fatalf("EstimateMemory says %.0f bytes per record, the heap grew %.0f: more than 25%% off", perEst, real)
			}
			runtime.KeepAlive(held)
		})
	}
}

// heapInUse is the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// putSessions writes n items shaped like the pipeline bench's sessions
// (keys, two numbers, a map), each padded with a string of padding bytes
// and attrs more Number attributes.
func putSessions(t testing.TB, ddb *dynamodb.Client, table string, n, padding, attrs int) {
	t.Helper()
	pad := strings.Repeat("p", padding)
	for from := 0; from < n; from += 25 {
		var reqs []dtypes.WriteRequest
		for i := from; i < min(from+25, n); i++ {
			item := map[string]dtypes.AttributeValue{
				"pk":             &dtypes.AttributeValueMemberS{Value: fmt.Sprintf("user%05d#%016x", i, uint64(i)*0x9E3779B97F4A7C15)},
				"CreationTime":   &dtypes.AttributeValueMemberN{Value: "1763900000"},
				"ExpirationTime": &dtypes.AttributeValueMemberN{Value: strconv.Itoa(1763990000 + i)},
				"SessionInfo": &dtypes.AttributeValueMemberM{Value: map[string]dtypes.AttributeValue{
					"device": &dtypes.AttributeValueMemberS{Value: "laptop"},
					"ip":     &dtypes.AttributeValueMemberS{Value: "192.0.2.10"},
					"pages":  &dtypes.AttributeValueMemberN{Value: strconv.Itoa(i % 97)},
				}},
			}
			for a := range attrs {
				item["n"+strconv.Itoa(a)] = &dtypes.AttributeValueMemberN{Value: strconv.Itoa(i + a)}
			}
			if padding > 0 {
				item["Payload"] = &dtypes.AttributeValueMemberS{Value: pad}
			}
			reqs = append(reqs, dtypes.WriteRequest{PutRequest: &dtypes.PutRequest{Item: item}})
		}
		items := map[string][]dtypes.WriteRequest{table: reqs}
		for len(items) > 0 {
			out, err := ddb.BatchWriteItem(context.Background(), &dynamodb.BatchWriteItemInput{RequestItems: items})
			if err != nil {
				t.Fatalf("batch write: %v", err)
			}
			items = out.UnprocessedItems
		}
	}
}
