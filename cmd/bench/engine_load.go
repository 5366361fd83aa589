package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
)

// The loads of the engine sections: tables, items, concurrent clients,
// plain HTTP requests and stream drains.

func createBenchTable(ctx context.Context, db *dynamodb.Client, name string, withStream, withGSI bool) error {
	in := &dynamodb.CreateTableInput{
		TableName:   aws.String(name),
		BillingMode: types.BillingModePayPerRequest,
		KeySchema: []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("sk"), AttributeType: types.ScalarAttributeTypeN}},
	}
	if withStream {
		in.StreamSpecification = &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewAndOldImages}
	}
	if withGSI {
		in.AttributeDefinitions = append(in.AttributeDefinitions, types.AttributeDefinition{AttributeName: aws.String("g"), AttributeType: types.ScalarAttributeTypeS})
		in.GlobalSecondaryIndexes = []types.GlobalSecondaryIndex{{IndexName: aws.String("by-g"),
			KeySchema:  []types.KeySchemaElement{{AttributeName: aws.String("g"), KeyType: types.KeyTypeHash}, {AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange}},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll}}}
	}
	_, err := db.CreateTable(ctx, in)
	return err
}

func benchPartition(i int) string { return "p" + strconv.Itoa(i%1000) }

func benchKey(k int) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: benchPartition(k)},
		"sk": &types.AttributeValueMemberN{Value: strconv.Itoa(k)},
	}
}

var payload = strings.Repeat("x", benchPayload)

func benchItem(k int) map[string]types.AttributeValue {
	it := benchKey(k)
	it["data"] = &types.AttributeValueMemberS{Value: payload}
	it["n"] = &types.AttributeValueMemberN{Value: strconv.Itoa(k * 7)}
	return it
}

// runClients runs fn from benchClients goroutines for d and returns calls/s.
func runClients(ctx context.Context, d time.Duration, fn func(client, i int, r *rand.Rand) error) (float64, error) {
	var ops atomic.Int64
	var firstErr error
	var once sync.Once
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	start := time.Now()
	for c := 0; c < benchClients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(c), 42))
			for i := 0; time.Now().Before(stop) && ctx.Err() == nil; i++ {
				if err := fn(c, i, r); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				ops.Add(1)
			}
		}(c)
	}
	wg.Wait()
	if firstErr != nil {
		return 0, firstErr
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return float64(ops.Load()) / time.Since(start).Seconds(), nil
}

// putLoad writes items with keys 0, 1, 2, ... and returns the rate and how
// many were written (keys 0..n-1 all exist).
func putLoad(ctx context.Context, db *dynamodb.Client, table string, d time.Duration) (float64, int64, error) {
	var next atomic.Int64
	rate, err := runClients(ctx, d, func(c, i int, r *rand.Rand) error {
		k := int(next.Add(1) - 1)
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: benchItem(k)})
		return err
	})
	// Keys handed out but not written (the last call of each client may
	// have been cut short by an error) are not counted.
	return rate, next.Load() - benchClients, err
}

// loadExpired writes n items whose TTL is exp with BatchWriteItem over
// plain HTTP (the SDK's own cost is measured by the PutItem phase; here it
// would only make the bench slower).
func loadExpired(ctx context.Context, endpoint, table string, n int, exp int64) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, benchClients)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	for c := 0; c < benchClients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var b []byte
			for {
				base := int(next.Add(25) - 25)
				if base >= n || ctx.Err() != nil {
					return
				}
				b = append(b[:0], `{"RequestItems":{"`...)
				b = append(b, table...)
				b = append(b, `":[`...)
				for k := base; k < base+25 && k < n; k++ {
					if k > base {
						b = append(b, ',')
					}
					b = fmt.Appendf(b, `{"PutRequest":{"Item":{"pk":{"S":"%s"},"sk":{"N":"%d"},"data":{"S":"%s"},"n":{"N":"%d"},"g":{"S":"g%d"},"exp":{"N":"%d"}}}}`,
						benchPartition(k), k, payload, k*7, k%100, exp)
				}
				b = append(b, "]}}"...)
				if err := rawPost(ctx, hc, endpoint, "BatchWriteItem", b); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// rawPost sends one unsigned DynamoDB request (the engine accepts any
// credentials, including none) and fails on a non-200 answer.
func rawPost(ctx context.Context, hc *http.Client, endpoint, op string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810."+op)
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return fmt.Errorf("%s: %d %s", op, resp.StatusCode, msg)
	}
	return nil
}

// rawPutLoad measures PutItem over plain HTTP: the server's capacity
// without the SDK's client-side cost.
func rawPutLoad(ctx context.Context, endpoint, table string, d time.Duration) (float64, error) {
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	return runClients(ctx, d, func(c, i int, r *rand.Rand) error {
		k := 10_000_000 + c*1_000_000 + i
		body := fmt.Appendf(nil, `{"TableName":"%s","Item":{"pk":{"S":"%s"},"sk":{"N":"%d"},"data":{"S":"%s"},"n":{"N":"%d"}}}`, table, benchPartition(k), k, payload, k*7)
		return rawPost(ctx, hc, endpoint, "PutItem", body)
	})
}

// drainStream reads the table's latest stream from TRIM_HORIZON, every
// shard in parallel and children as they appear, until want records of the
// given kind were read; it returns the count and the time taken.
func drainStream(ctx context.Context, db *dynamodb.Client, st *dynamodbstreams.Client, table string, want int, kind stypes.OperationType) (int, time.Duration, error) {
	d, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		return 0, 0, err
	}
	arn := d.Table.LatestStreamArn
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	start := time.Now()
	var got atomic.Int64
	started := map[string]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var firstErr error
	readShard := func(id *string) {
		defer wg.Done()
		it, err := st.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: arn, ShardId: id, ShardIteratorType: stypes.ShardIteratorTypeTrimHorizon})
		if err != nil {
			mu.Lock()
			firstErr = err
			mu.Unlock()
			return
		}
		iter := it.ShardIterator
		for iter != nil && ctx.Err() == nil && int(got.Load()) < want {
			out, err := st.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(1000)})
			if err != nil {
				if ctx.Err() == nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
				}
				return
			}
			n := 0
			for _, r := range out.Records {
				if r.EventName == kind {
					n++
				}
			}
			got.Add(int64(n))
			if len(out.Records) == 0 {
				time.Sleep(5 * time.Millisecond)
			}
			iter = out.NextShardIterator
		}
	}
	for int(got.Load()) < want {
		if err := ctx.Err(); err != nil {
			return int(got.Load()), time.Since(start), fmt.Errorf("read %d of %d records: %w", got.Load(), want, err)
		}
		mu.Lock()
		e := firstErr
		mu.Unlock()
		if e != nil {
			return int(got.Load()), time.Since(start), e
		}
		ds, err := st.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: arn})
		if err != nil {
			return 0, 0, err
		}
		for _, s := range ds.StreamDescription.Shards {
			id := aws.ToString(s.ShardId)
			if !started[id] {
				started[id] = true
				wg.Add(1)
				go readShard(s.ShardId)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	dur := time.Since(start)
	cancel()
	wg.Wait()
	return int(got.Load()), dur, nil
}
