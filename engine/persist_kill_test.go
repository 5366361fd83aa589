package engine_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ttl-archiver/archiver/engine/enginetest"
)

var endpointRE = regexp.MustCompile(`http://127\.0\.0\.1:[0-9]+`)

// startBinary runs `archiver engine --data-dir dir` and returns it with
// its endpoint, read from its "engine listening" log line.
func startBinary(t *testing.T, bin, dir string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(bin, "engine", "--data-dir", dir, "--listen", "127.0.0.1:0", "--ttl-interval", "-1s", "--log-level", "info")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := endpointRE.FindString(sc.Text()); m != "" {
				select {
				case found <- m:
				default:
				}
			}
		}
	}()
	select {
	case ep := <-found:
		return cmd, ep
	case <-time.After(time.Minute):
		t.Fatal("the engine printed no endpoint within a minute")
	}
	return nil, ""
}

// binaryClients returns SDK clients for an engine at endpoint that make
// at most attempts attempts per call (1: an answer is the answer to that
// one attempt).
func binaryClients(endpoint string, attempts int) (*dynamodb.Client, *dynamodbstreams.Client) {
	retryer := retry.AddWithMaxAttempts(retry.NewStandard(), attempts)
	return enginetest.ClientAt(endpoint, "AKIDTEST", func(o *dynamodb.Options) { o.Retryer = retryer }),
		enginetest.StreamsClientAt(endpoint, "AKIDTEST", func(o *dynamodbstreams.Options) { o.Retryer = retryer })
}

// TestPersistKill9 writes items from many goroutines into the real binary,
// SIGKILLs it mid-load, restarts it on the same directory and finds every
// item whose PutItem was acknowledged, and its stream record.
func TestPersistKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the archiver binary")
	}
	bin := buildArchiver(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	cmd, ep := startBinary(t, bin, dir)
	db, _ := binaryClients(ep, 1)
	if _, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String("kill"), BillingMode: types.BillingModePayPerRequest,
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		StreamSpecification:  &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewImage},
	}); err != nil {
		t.Fatal(err)
	}

	var acked sync.Map
	var nAcked atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				key := fmt.Sprintf("w%02d-%06d", w, i)
				_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("kill"), Item: item{"pk": S(key), "v": N(fmt.Sprint(i))}})
				if err != nil {
					return // the engine is gone
				}
				acked.Store(key, true)
				nAcked.Add(1)
			}
		}()
	}
	for nAcked.Load() < 2000 {
		time.Sleep(5 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	cmd.Wait()
	t.Logf("%d writes acknowledged before SIGKILL", nAcked.Load())

	_, ep = startBinary(t, bin, dir)
	// Reading back retries the SDK's connection race
	// (aws/aws-sdk-go-v2#2737), as newEnv's clients do.
	db, st := binaryClients(ep, 3)
	missing := 0
	acked.Range(func(k, _ any) bool {
		out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("kill"), Key: item{"pk": S(k.(string))}, ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		if out.Item == nil {
			missing++
		}
		return true
	})
	if missing > 0 {
		t.Fatalf("%d of %d acknowledged items are gone after kill -9", missing, nAcked.Load())
	}
	inStream := map[string]bool{}
	desc, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String("kill")})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := st.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: desc.Table.LatestStreamArn})
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
			for _, r := range out.Records {
				inStream[r.Dynamodb.Keys["pk"].(*stypes.AttributeValueMemberS).Value] = true
			}
			if len(out.Records) == 0 {
				break
			}
			iter = out.NextShardIterator
		}
	}
	acked.Range(func(k, _ any) bool {
		if !inStream[k.(string)] {
			missing++
		}
		return true
	})
	if missing > 0 {
		t.Fatalf("%d of %d acknowledged items have no stream record after kill -9", missing, nAcked.Load())
	}
}
