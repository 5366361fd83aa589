package shard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/smithy-go"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/engine/enginetest"
	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/eventually"
)

// testEnv is an engine served over real HTTP in-process, with real SDK
// clients pointed at it.
type testEnv struct {
	bed     *enginetest.Bed
	srv     *engine.Server
	eng     *engine.Engine
	ddb     *dynamodb.Client
	streams *dynamodbstreams.Client
	// streamsNoRetry is a Streams client whose SDK retryer is off
	// (RetryMaxAttempts 1): every throttle reaches the walker.
	streamsNoRetry *dynamodbstreams.Client
}

func newEnv(t testing.TB, o engine.Options) *testEnv {
	t.Helper()
	if o.TTLInterval == 0 {
		o.TTLInterval = -1
	}
	b := enginetest.Start(t, o)
	return &testEnv{
		bed:            b,
		srv:            b.Server,
		eng:            b.Engine,
		ddb:            b.DynamoDB,
		streams:        b.Streams,
		streamsNoRetry: b.StreamsClient(enginetest.DefaultKey, func(o *dynamodbstreams.Options) { o.RetryMaxAttempts = 1 }),
	}
}

// createTable creates a table with a NEW_AND_OLD_IMAGES stream and returns
// the stream's ARN.
func (e *testEnv) createTable(t testing.TB, name string) string {
	t.Helper()
	return enginetest.CreateTable(t, e.ddb, enginetest.Table{Name: name})
}

// put writes items pk=<prefix><i> for i in [from, to) with BatchWriteItem,
// 25 items a call, 4 calls at a time.
func (e *testEnv) put(t testing.TB, table, prefix string, from, to int) {
	t.Helper()
	putWith(t, e.ddb, table, prefix, from, to)
}

// putWith is put through the client db (of some Region).
func putWith(t testing.TB, db *dynamodb.Client, table, prefix string, from, to int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	next := make(chan [2]int)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range next {
				var reqs []dtypes.WriteRequest
				for i := r[0]; i < r[1]; i++ {
					reqs = append(reqs, dtypes.WriteRequest{PutRequest: &dtypes.PutRequest{Item: map[string]dtypes.AttributeValue{
						"pk":   &dtypes.AttributeValueMemberS{Value: fmt.Sprintf("%s%05d", prefix, i)},
						"body": &dtypes.AttributeValueMemberS{Value: "some payload"},
					}}})
				}
				items := map[string][]dtypes.WriteRequest{table: reqs}
				for len(items) > 0 {
					out, err := db.BatchWriteItem(context.Background(), &dynamodb.BatchWriteItemInput{RequestItems: items})
					if err != nil {
						select {
						case errs <- err:
						default:
						}
						break
					}
					items = out.UnprocessedItems
				}
			}
		}()
	}
	for i := from; i < to; i += 25 {
		next <- [2]int{i, min(i+25, to)}
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatalf("batch write: %v", err)
	default:
	}
}

// openShards lists the stream's open shards.
func openShards(t testing.TB, api StreamsAPI, arn string) []Shard {
	var out []Shard
	for _, s := range describeAll(t, api, arn) {
		if !s.Closed() {
			out = append(out, s)
		}
	}
	return out
}

// startWalker runs a walker until the returned stop is called (or the test
// ends); stop waits for Run to return and fails the test unless it returned
// nil.
func startWalker(t testing.TB, o Options) (stop func()) {
	t.Helper()
	if o.Logger == nil {
		o.Logger = zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel))
	}
	if o.DiscoveryInterval == 0 {
		o.DiscoveryInterval = 300 * time.Millisecond
	}
	if o.IdleBackoff == 0 {
		o.IdleBackoff = 50 * time.Millisecond
	}
	w, err := New(o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run returned %v, want nil", err)
				}
			case <-time.After(60 * time.Second):
				t.Errorf("Run did not return within 60s of its context ending")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// counter returns the sum of a counter's values over all label sets.
func metricSum(t testing.TB, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			switch {
			case m.Counter != nil:
				sum += m.Counter.GetValue()
			case m.Gauge != nil:
				sum += m.Gauge.GetValue()
			}
		}
	}
	return sum
}

// rejectFilter makes DescribeStream reject ShardFilter, as endpoints that
// do not support it do.
type rejectFilter struct{ StreamsAPI }

func (r rejectFilter) DescribeStream(ctx context.Context, in *dynamodbstreams.DescribeStreamInput, f ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error) {
	if in.ShardFilter != nil {
		return nil, &smithy.GenericAPIError{Code: "ValidationException", Message: "1 validation error detected: unknown field ShardFilter"}
	}
	return r.StreamsAPI.DescribeStream(ctx, in, f...)
}

// everyFifthStreamsCallFails is an engine hook failing every 5th
// GetRecords, GetShardIterator and DescribeStream call with a 500.
func everyFifthStreamsCallFails() func(op string, r *http.Request) error {
	var n atomic.Int64
	return func(op string, r *http.Request) error {
		switch op {
		case "GetRecords", "GetShardIterator", "DescribeStream":
			if n.Add(1)%5 == 0 {
				return engine.NewError("InternalServerError", "injected server error", 500)
			}
		}
		return nil
	}
}

// TestScenarios reads a table's stream while items are written and the
// engine injects a fault half-way, and counts every record.
func TestScenarios(t *testing.T) {
	tests := []struct {
		name   string
		engine engine.Options
		items  int
		// during runs after the first half of the items was written.
		during  func(t *testing.T, e *testEnv, table, arn string)
		noRetry bool // read with the SDK's retries off
		opts    func(o *Options, ws *watchedStreams)
		check   func(t *testing.T, e *testEnv, ws *watchedStreams, reg *prometheus.Registry, arn string)
	}{
		{
			name:   "several shards",
			engine: engine.Options{StreamShards: 4},
			items:  2000,
		},
		{
			name:   "rollover",
			engine: engine.Options{StreamShards: 2, ShardRolloverRecords: 100},
			items:  2000,
			check: func(t *testing.T, e *testEnv, ws *watchedStreams, reg *prometheus.Registry, arn string) {
				if n := len(describeAll(t, e.streams, arn)); n < 20 {
					t.Errorf("stream has %d shards, want at least 20 after rollovers", n)
				}
				if _, filtered := ws.describeCounts(); filtered == 0 {
					t.Errorf("no DescribeStream call used ShardFilter CHILD_SHARDS")
				}
				if metricSum(t, reg, "archiver_shards_ended_total") < 18 {
					t.Errorf("archiver_shards_ended_total = %v, want >= 18", metricSum(t, reg, "archiver_shards_ended_total"))
				}
			},
		},
		{
			name:   "rollover, endpoint without ShardFilter",
			engine: engine.Options{StreamShards: 2, ShardRolloverRecords: 150},
			items:  1500,
			opts:   func(o *Options, ws *watchedStreams) { ws.StreamsAPI = rejectFilter{ws.StreamsAPI} },
		},
		{
			name:   "forced split mid-stream",
			engine: engine.Options{StreamShards: 2},
			items:  2000,
			during: func(t *testing.T, e *testEnv, table, arn string) {
				for _, s := range openShards(t, e.streams, arn) {
					if err := e.eng.SplitShard(table, s.ID); err != nil {
						t.Fatalf("split %s: %v", s.ID, err)
					}
				}
			},
			check: func(t *testing.T, e *testEnv, ws *watchedStreams, reg *prometheus.Registry, arn string) {
				if n := len(openShards(t, e.streams, arn)); n != 4 {
					t.Errorf("after splitting 2 shards, %d are open, want 4", n)
				}
			},
		},
		{
			name:   "forced rollover mid-stream",
			engine: engine.Options{StreamShards: 3},
			items:  1500,
			during: func(t *testing.T, e *testEnv, table, arn string) {
				for i := 0; i < 3; i++ {
					if err := e.eng.ForceRollover(table); err != nil {
						t.Fatalf("rollover: %v", err)
					}
				}
			},
		},
		{
			name:   "expired iterators",
			engine: engine.Options{StreamShards: 4},
			items:  2000,
			during: func(t *testing.T, e *testEnv, table, arn string) {
				for i := 0; i < 5; i++ {
					e.eng.ExpireIterators()
					e.put(t, table, "extra", i*20, i*20+20)
				}
			},
			check: func(t *testing.T, e *testEnv, ws *watchedStreams, reg *prometheus.Registry, arn string) {
				// The extra items are counted below through distinct keys.
			},
		},
		{
			// The SDK retries each throttle (up to 3 attempts, with its
			// own backoff) before the walker sees it.
			name:   "throttling",
			engine: engine.Options{StreamShards: 2, ShardRolloverRecords: 300},
			items:  1500,
			during: func(t *testing.T, e *testEnv, table, arn string) {
				e.eng.ThrottleGetRecords(9)
			},
			opts: func(o *Options, ws *watchedStreams) {
				o.MinBackoff, o.MaxBackoff = 5*time.Millisecond, 100*time.Millisecond
			},
			check: func(t *testing.T, e *testEnv, ws *watchedStreams, reg *prometheus.Registry, arn string) {
				if metricSum(t, reg, "archiver_shard_throttles_total") == 0 {
					t.Errorf("archiver_shard_throttles_total = 0 after 9 injected throttles")
				}
			},
		},
		{
			name:    "throttling, SDK retries off",
			engine:  engine.Options{StreamShards: 2, ShardRolloverRecords: 300},
			items:   1500,
			noRetry: true,
			during: func(t *testing.T, e *testEnv, table, arn string) {
				e.eng.ThrottleGetRecords(40)
			},
			opts: func(o *Options, ws *watchedStreams) {
				o.MinBackoff, o.MaxBackoff = 5*time.Millisecond, 100*time.Millisecond
			},
			check: func(t *testing.T, e *testEnv, ws *watchedStreams, reg *prometheus.Registry, arn string) {
				if metricSum(t, reg, "archiver_shard_throttles_total") == 0 {
					t.Errorf("archiver_shard_throttles_total = 0 after 40 injected throttles")
				}
			},
		},
		{
			// Every 5th Streams call fails with a 500, straight to the
			// walker (SDK retries off): backoff and a fresh iterator.
			name:    "server errors",
			engine:  engine.Options{StreamShards: 2, ShardRolloverRecords: 250, Hooks: engine.Hooks{OnRequest: everyFifthStreamsCallFails()}},
			items:   1200,
			noRetry: true,
			opts: func(o *Options, ws *watchedStreams) {
				o.MinBackoff, o.MaxBackoff = 5*time.Millisecond, 50*time.Millisecond
			},
			check: func(t *testing.T, e *testEnv, ws *watchedStreams, reg *prometheus.Registry, arn string) {
				if metricSum(t, reg, "archiver_shard_api_errors_total") == 0 {
					t.Errorf("archiver_shard_api_errors_total = 0 with every 5th call failing")
				}
			},
		},
		{
			name:   "process fails once per shard",
			engine: engine.Options{StreamShards: 2, ShardRolloverRecords: 400},
			items:  1200,
			check: func(t *testing.T, e *testEnv, ws *watchedStreams, reg *prometheus.Registry, arn string) {
				if n := metricSum(t, reg, "archiver_shard_reader_failures_total"); n < 2 {
					t.Errorf("archiver_shard_reader_failures_total = %v, want >= 2 (one per shard)", n)
				}
			},
		},
		{
			name:   "shard end fails once per shard",
			engine: engine.Options{StreamShards: 2, ShardRolloverRecords: 200},
			items:  1200,
			opts: func(o *Options, ws *watchedStreams) {
				o.MinBackoff, o.MaxBackoff = 5*time.Millisecond, 50*time.Millisecond
			},
			check: func(t *testing.T, e *testEnv, ws *watchedStreams, reg *prometheus.Registry, arn string) {
				if metricSum(t, reg, "archiver_shards_ended_total") < 4 {
					t.Errorf("archiver_shards_ended_total = %v, want >= 4 after retried shard ends", metricSum(t, reg, "archiver_shards_ended_total"))
				}
			},
		},
		{
			name:   "small byte budget",
			engine: engine.Options{StreamShards: 2},
			items:  1000,
			opts:   func(o *Options, ws *watchedStreams) { o.ShardBufferBytes = 1; o.GetRecordsLimit = 7 },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.engine)
			table := "orders"
			arn := e.createTable(t, table)
			rec := newRecorder(t)
			if tc.name == "process fails once per shard" {
				for _, s := range openShards(t, e.streams, arn) {
					rec.failOnce[s.ID] = true
				}
			}
			rec.failEndOnce = tc.name == "shard end fails once per shard"
			var client StreamsAPI = e.streams
			if tc.noRetry {
				client = e.streamsNoRetry
			}
			ws := watch(t, client)
			reg := prometheus.NewRegistry()
			o := Options{Streams: ws, Tables: e.ddb, TableNames: []string{table}, Processor: rec, Positions: rec, Registerer: reg}
			if tc.opts != nil {
				tc.opts(&o, ws)
			}
			stop := startWalker(t, o)
			began := time.Now()
			half := tc.items / 2
			e.put(t, table, "k", 0, half)
			extra := 0
			if tc.during != nil {
				tc.during(t, e, table, arn)
				if tc.name == "expired iterators" {
					extra = 100
				}
			}
			e.put(t, table, "k", half, tc.items)
			want := tc.items + extra
			t.Logf("wrote %d items in %v", want, time.Since(began))
			eventually.True(t, 60*time.Second, fmt.Sprintf("%d records", want), func() bool { return rec.distinct() >= want })
			t.Logf("read them all %v after the first write", time.Since(began))
			stop()
			if got := rec.distinct(); got != want {
				t.Errorf("read %d distinct items, want %d", got, want)
			}
			if d := rec.duplicates(); d != 0 {
				t.Errorf("%d records delivered twice in a run that checkpoints every batch", d)
			}
			rec.check(t, arn, describeAll(t, e.streams, arn))
			if tc.check != nil {
				tc.check(t, e, ws, reg, arn)
			}
		})
	}
}

// TestSeveralStreams reads one table by name and another by stream ARN in
// one walker.
func TestSeveralStreams(t *testing.T) {
	e := newEnv(t, engine.Options{StreamShards: 3, ShardRolloverRecords: 100})
	arnA := e.createTable(t, "alpha")
	arnB := e.createTable(t, "beta")
	rec := newRecorder(t)
	startWalker(t, Options{Streams: watch(t, e.streams), Tables: e.ddb, TableNames: []string{"alpha"}, StreamARNs: []string{arnB}, Processor: rec, Positions: rec})
	e.put(t, "alpha", "a", 0, 600)
	e.put(t, "beta", "b", 0, 400)
	eventually.True(t, 60*time.Second, "1000 records", func() bool { return rec.distinct() >= 1000 })
	rec.mu.Lock()
	if rec.byStream[arnA] != 600 || rec.byStream[arnB] != 400 {
		t.Errorf("read %d from a and %d from b, want 600 and 400", rec.byStream[arnA], rec.byStream[arnB])
	}
	rec.mu.Unlock()
	rec.check(t, arnA, describeAll(t, e.streams, arnA))
	rec.check(t, arnB, describeAll(t, e.streams, arnB))
}

// TestSeveralRegions reads one table name in two Regions (Options.Regions:
// each Region's clients sign for it, against one endpoint) and an explicit
// stream of a third table through the clients of the Region its ARN
// names; a table listed for one Region only is not looked for in the
// other.
func TestSeveralRegions(t *testing.T) {
	e := newEnv(t, engine.Options{StreamShards: 2})
	us, eu := e.bed.In("us-east-1"), e.bed.In("eu-west-1")
	usA := enginetest.CreateTable(t, us.DynamoDB, enginetest.Table{Name: "alpha"})
	euA := enginetest.CreateTable(t, eu.DynamoDB, enginetest.Table{Name: "alpha"})
	euB := enginetest.CreateTable(t, eu.DynamoDB, enginetest.Table{Name: "beta"})
	enginetest.CreateTable(t, us.DynamoDB, enginetest.Table{Name: "gamma"})
	if event.RegionOf(usA) != "us-east-1" || event.RegionOf(euA) != "eu-west-1" || usA == euA {
		t.Fatalf("stream ARNs %s and %s: want one per Region", usA, euA)
	}
	rec := newRecorder(t)
	startWalker(t, Options{Streams: watch(t, us.Streams), Tables: us.DynamoDB, TableNames: []string{"alpha", "gamma"}, StreamARNs: []string{euB},
		Regions: []Region{
			{Name: "us-east-1", Streams: us.Streams, Tables: us.DynamoDB},
			{Name: "eu-west-1", Streams: eu.Streams, Tables: eu.DynamoDB, TableNames: []string{"alpha"}},
		}, Processor: rec, Positions: rec})
	putWith(t, us.DynamoDB, "alpha", "u", 0, 300)
	putWith(t, eu.DynamoDB, "alpha", "e", 0, 200)
	putWith(t, eu.DynamoDB, "beta", "b", 0, 100)
	putWith(t, us.DynamoDB, "gamma", "g", 0, 50)
	eventually.True(t, 60*time.Second, "650 records", func() bool { return rec.distinct() >= 650 })
	rec.mu.Lock()
	got := [3]int{rec.byStream[usA], rec.byStream[euA], rec.byStream[euB]}
	rec.mu.Unlock()
	if got != [3]int{300, 200, 100} {
		t.Errorf("read %v from alpha in us-east-1, alpha in eu-west-1 and beta in eu-west-1, want [300 200 100]", got)
	}
	rec.check(t, usA, describeAll(t, us.Streams, usA))
	rec.check(t, euA, describeAll(t, eu.Streams, euA))
	rec.check(t, euB, describeAll(t, eu.Streams, euB))
}

// TestPagingPastOneHundredShards reads a stream of 120 open shards: shards
// on DescribeStream's second page must be read too.
func TestPagingPastOneHundredShards(t *testing.T) {
	e := newEnv(t, engine.Options{StreamShards: 120})
	arn := e.createTable(t, "wide")
	shards := describeAll(t, e.streams, arn)
	if len(shards) != 120 {
		t.Fatalf("engine made %d shards, want 120", len(shards))
	}
	rec := newRecorder(t)
	ws := watch(t, e.streams)
	// Written first: 120 idle pollers would slow the writes down.
	e.put(t, "wide", "k", 0, 1200)
	startWalker(t, Options{Streams: ws, StreamARNs: []string{arn}, Processor: rec, Positions: rec, IdleBackoff: 250 * time.Millisecond})
	eventually.True(t, 90*time.Second, "1200 records", func() bool { return rec.distinct() >= 1200 })
	for _, s := range shards {
		if ws.callsOn(s.ID) == 0 {
			t.Errorf("shard %s was never read", s.ID)
		}
	}
	if n, _ := ws.describeCounts(); n < 2 {
		t.Errorf("DescribeStream called %d times, want paging (>= 2)", n)
	}
}

// TestBoundedConcurrency reads 6 open shards with 2 reader slots: idle
// readers give their slot up, so every shard is read, never more than 2 at
// once.
func TestBoundedConcurrency(t *testing.T) {
	e := newEnv(t, engine.Options{StreamShards: 6, ShardRolloverRecords: 120})
	arn := e.createTable(t, "narrow")
	rec := newRecorder(t)
	ws := watch(t, e.streams)
	e.put(t, "narrow", "k", 0, 600)
	startWalker(t, Options{Streams: ws, StreamARNs: []string{arn}, Processor: rec, Positions: rec,
		MaxConcurrentShards: 2, IdleYield: 100 * time.Millisecond})
	e.put(t, "narrow", "k", 600, 900)
	eventually.True(t, 90*time.Second, "900 records", func() bool { return rec.distinct() >= 900 })
	rec.mu.Lock()
	maxLive := rec.maxLive
	rec.mu.Unlock()
	if maxLive > 2 {
		t.Errorf("%d shards were read at once, want at most MaxConcurrentShards = 2", maxLive)
	}
	if d := rec.duplicates(); d != 0 {
		t.Errorf("%d duplicates", d)
	}
	rec.check(t, arn, describeAll(t, e.streams, arn))
}

// TestTwoHundredShardsRace reads 200 shards at once under the race detector
// and counts every record.
func TestTwoHundredShardsRace(t *testing.T) {
	e := newEnv(t, engine.Options{StreamShards: 200})
	arn := e.createTable(t, "many")
	rec := newRecorder(t)
	ws := watch(t, e.streams)
	reg := prometheus.NewRegistry()
	// Most items are written first (200 idle pollers slow writes down
	// on a small machine), the rest while the walker reads.
	e.put(t, "many", "k", 0, 3000)
	start := time.Now()
	startWalker(t, Options{Streams: ws, Tables: e.ddb, TableNames: []string{"many"}, Processor: rec, Positions: rec, Registerer: reg, IdleBackoff: 250 * time.Millisecond})
	e.put(t, "many", "k", 3000, 3400)
	eventually.True(t, 120*time.Second, "3400 records", func() bool { return rec.distinct() >= 3400 })
	t.Logf("read 3400 records %v after the walker started", time.Since(start))
	eventually.True(t, 30*time.Second, "200 active shards", func() bool { return metricSum(t, reg, "archiver_shards_active") == 200 })
	if d := rec.duplicates(); d != 0 {
		t.Errorf("%d duplicates", d)
	}
	if n := metricSum(t, reg, "archiver_shard_records_read_total"); n != 3400 {
		t.Errorf("archiver_shard_records_read_total = %v, want 3400", n)
	}
	rec.check(t, arn, describeAll(t, e.streams, arn))
}

// TestRestartResumesAfterPositions stops a walker and starts another on the
// same positions: nothing is read twice, nothing is lost.
func TestRestartResumesAfterPositions(t *testing.T) {
	e := newEnv(t, engine.Options{StreamShards: 2, ShardRolloverRecords: 150})
	arn := e.createTable(t, "orders")
	rec := newRecorder(t)
	o := Options{Streams: watch(t, e.streams), Tables: e.ddb, TableNames: []string{"orders"}, Processor: rec, Positions: rec}
	stop := startWalker(t, o)
	e.put(t, "orders", "a", 0, 1000)
	eventually.True(t, 60*time.Second, "1000 records", func() bool { return rec.distinct() >= 1000 })
	stop()
	e.put(t, "orders", "b", 0, 1000)
	o.Streams = watch(t, e.streams)
	stop = startWalker(t, o)
	eventually.True(t, 60*time.Second, "2000 records", func() bool { return rec.distinct() >= 2000 })
	stop()
	if d := rec.duplicates(); d != 0 {
		t.Errorf("%d records re-read after a clean restart", d)
	}
	rec.check(t, arn, describeAll(t, e.streams, arn))
}

// TestRestartAfterCrash rewinds the positions to a snapshot taken mid-run,
// as a crash between processing and checkpointing leaves them: the restart
// re-delivers exactly the records after the snapshot and loses none.
func TestRestartAfterCrash(t *testing.T) {
	e := newEnv(t, engine.Options{StreamShards: 2, ShardRolloverRecords: 120})
	arn := e.createTable(t, "crash")
	rec := newRecorder(t)
	o := Options{Streams: watch(t, e.streams), StreamARNs: []string{arn}, Processor: rec, Positions: rec}
	stop := startWalker(t, o)
	e.put(t, "crash", "a", 0, 500)
	eventually.True(t, 60*time.Second, "500 records", func() bool { return rec.distinct() >= 500 })
	snapshot, _ := rec.Positions(context.Background(), arn)
	e.put(t, "crash", "b", 0, 300)
	eventually.True(t, 60*time.Second, "800 records", func() bool { return rec.distinct() >= 800 })
	stop()
	rec.check(t, arn, describeAll(t, e.streams, arn))

	rec.mu.Lock()
	rec.pos[arn] = snapshot
	// The crashed process's memory is gone; lineage is checked afresh.
	clear(rec.lastSeq)
	clear(rec.first)
	clear(rec.ended)
	rec.mu.Unlock()
	o.Streams = watch(t, e.streams)
	stop = startWalker(t, o)
	eventually.True(t, 60*time.Second, "the 300 records after the snapshot again", func() bool { return rec.count() >= 800+300 })
	stop()
	if got, d := rec.distinct(), rec.duplicates(); got != 800 || d != 300 {
		t.Errorf("after the crash restart: %d distinct items, %d re-delivered; want 800 and exactly the 300 after the snapshot", got, d)
	}
	rec.check(t, arn, describeAll(t, e.streams, arn))
}

// TestInferredFinishedParents restarts on positions where no shard is
// marked Finished: every parent of a shard with a position is inferred
// finished and never read again.
func TestInferredFinishedParents(t *testing.T) {
	e := newEnv(t, engine.Options{StreamShards: 1, ShardRolloverRecords: 50})
	arn := e.createTable(t, "chain")
	e.put(t, "chain", "a", 0, 520)
	first := newRecorder(t)
	stop := startWalker(t, Options{Streams: e.streams, StreamARNs: []string{arn}, Processor: first, Positions: first})
	eventually.True(t, 60*time.Second, "520 records", func() bool { return first.distinct() >= 520 })
	stop()

	shards := describeAll(t, e.streams, arn)
	stored, _ := first.Positions(context.Background(), arn)
	unfinished := map[string]Position{}
	for id, p := range stored {
		unfinished[id] = Position{SequenceNumber: p.SequenceNumber}
	}
	second := newRecorder(t)
	second.setPositions(arn, unfinished)
	ws := watch(t, e.streams)
	startWalker(t, Options{Streams: ws, StreamARNs: []string{arn}, Processor: second, Positions: second})
	e.put(t, "chain", "b", 0, 10)
	eventually.True(t, 60*time.Second, "10 new records", func() bool { return second.distinct() >= 10 })
	closedWithChildPos := 0
	for _, s := range shards {
		hasChildPos := false
		for _, c := range shards {
			if len(c.Parents) == 1 && c.Parents[0] == s.ID && unfinished[c.ID].SequenceNumber != "" {
				hasChildPos = true
			}
		}
		if !hasChildPos {
			continue
		}
		closedWithChildPos++
		if n := ws.callsOn(s.ID); n != 0 {
			t.Errorf("shard %s has a child with a position, yet it was read again (%d GetRecords)", s.ID, n)
		}
	}
	if closedWithChildPos < 9 {
		t.Errorf("only %d closed shards with a child's position, want >= 9", closedWithChildPos)
	}
	if got := second.distinct(); got != 10 {
		t.Errorf("second walker read %d items, want the 10 new ones", got)
	}
}

// TestTrimmedData resumes from a position the stream has trimmed: the gap
// is counted and reading goes on from the trim horizon.
func TestTrimmedData(t *testing.T) {
	clock := engine.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	e := newEnv(t, engine.Options{StreamShards: 1, Clock: clock})
	arn := e.createTable(t, "trim")
	rec := newRecorder(t)
	o := Options{Streams: e.streams, StreamARNs: []string{arn}, Processor: rec, Positions: rec}
	stop := startWalker(t, o)
	e.put(t, "trim", "a", 0, 100)
	eventually.True(t, 60*time.Second, "100 records", func() bool { return rec.distinct() >= 100 })
	stop()

	clock.Advance(time.Minute)
	e.put(t, "trim", "lost", 0, 100)
	clock.Advance(time.Minute)
	if err := e.eng.TrimStream("trim", clock.Now()); err != nil {
		t.Fatalf("trim: %v", err)
	}
	clock.Advance(time.Minute)
	e.put(t, "trim", "c", 0, 100)

	reg := prometheus.NewRegistry()
	o.Registerer = reg
	startWalker(t, o)
	eventually.True(t, 60*time.Second, "100 records after the trim", func() bool { return rec.distinct() >= 200 })
	if n := metricSum(t, reg, "archiver_shard_trimmed_gaps_total"); n < 1 {
		t.Errorf("archiver_shard_trimmed_gaps_total = %v, want >= 1", n)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for k := range rec.keys {
		if len(k) > 4 && k[:4] == "lost" {
			t.Errorf("trimmed item %s was read", k)
		}
	}
}

// TestStreamDisabledAndReenabled follows a table's new stream after its
// stream was disabled and enabled again; the old stream is read to its end
// before the new one, also by a walker that starts after the switch.
func TestStreamDisabledAndReenabled(t *testing.T) {
	e := newEnv(t, engine.Options{StreamShards: 2})
	oldARN := e.createTable(t, "flip")
	live := newRecorder(t)
	startWalker(t, Options{Streams: watch(t, e.streams), Tables: e.ddb, TableNames: []string{"flip"}, Processor: live, Positions: live})
	e.put(t, "flip", "a", 0, 200)
	eventually.True(t, 60*time.Second, "200 records", func() bool { return live.distinct() >= 200 })

	e.put(t, "flip", "b", 0, 100) // maybe not read yet when the stream closes
	ctx := context.Background()
	if _, err := e.ddb.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: aws.String("flip"),
		StreamSpecification: &dtypes.StreamSpecification{StreamEnabled: aws.Bool(false)}}); err != nil {
		t.Fatalf("disable stream: %v", err)
	}
	out, err := e.ddb.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: aws.String("flip"),
		StreamSpecification: &dtypes.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: dtypes.StreamViewTypeNewAndOldImages}})
	if err != nil {
		t.Fatalf("enable stream: %v", err)
	}
	newARN := aws.ToString(out.TableDescription.LatestStreamArn)
	if newARN == "" || newARN == oldARN {
		t.Fatalf("re-enabled stream ARN %q, old %q: want a new one", newARN, oldARN)
	}
	e.put(t, "flip", "c", 0, 200)
	eventually.True(t, 60*time.Second, "500 records", func() bool { return live.distinct() >= 500 })
	if live.duplicates() != 0 {
		t.Errorf("%d duplicates", live.duplicates())
	}

	// A walker starting now finds both streams and reads the old one first.
	late := newRecorder(t)
	startWalker(t, Options{Streams: watch(t, e.streams), Tables: e.ddb, TableNames: []string{"flip"}, Processor: late, Positions: late})
	eventually.True(t, 60*time.Second, "500 records", func() bool { return late.distinct() >= 500 })
	late.mu.Lock()
	defer late.mu.Unlock()
	if late.byStream[oldARN] != 300 || late.byStream[newARN] != 200 {
		t.Errorf("late walker read %d old-stream and %d new-stream records, want 300 and 200", late.byStream[oldARN], late.byStream[newARN])
	}
	firstNew, lastOld := -1, -1
	for k, idx := range late.first {
		if len(k) > len(newARN) && k[:len(newARN)] == newARN && (firstNew < 0 || idx < firstNew) {
			firstNew = idx
		}
	}
	for k, idx := range late.ended {
		if len(k) > len(oldARN) && k[:len(oldARN)] == oldARN && idx > lastOld {
			lastOld = idx
		}
	}
	if firstNew >= 0 && lastOld > firstNew {
		t.Errorf("new stream read (event %d) before the old stream ended (event %d)", firstNew, lastOld)
	}
}

// TestLatestStart skips what the stream already holds.
func TestLatestStart(t *testing.T) {
	e := newEnv(t, engine.Options{StreamShards: 2, ShardRolloverRecords: 80})
	arn := e.createTable(t, "late")
	e.put(t, "late", "old", 0, 300)
	rec := newRecorder(t)
	ws := watch(t, e.streams)
	startWalker(t, Options{Streams: ws, StreamARNs: []string{arn}, Start: Latest, Processor: rec, Positions: rec})
	open := openShards(t, e.streams, arn)
	eventually.True(t, 30*time.Second, "readers on the open shards", func() bool {
		for _, s := range open {
			if ws.callsOn(s.ID) == 0 {
				return false
			}
		}
		return true
	})
	e.put(t, "late", "new", 0, 300)
	eventually.True(t, 60*time.Second, "300 new records", func() bool { return rec.distinct() >= 300 })
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for k := range rec.keys {
		if k[:3] == "old" {
			t.Errorf("LATEST start read old item %s", k)
		}
	}
}

// grantAll is an Assigner that grants every ready shard until it is
// withdrawn, and logs Release calls into the recorder's event log.
type grantAll struct {
	rec *recorder
	mu  sync.Mutex
	// held maps shard → cancel of its assignment.
	held    map[string]context.CancelFunc
	blocked map[string]bool
	assigns int
}

func (g *grantAll) Assign(ctx context.Context, arn string, ready []Shard) ([]Assignment, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.assigns++
	var out []Assignment
	for _, s := range ready {
		if g.blocked[s.ID] {
			continue
		}
		if _, ok := g.held[s.ID]; ok {
			continue
		}
		ctx, cancel := context.WithCancel(context.Background())
		g.held[s.ID] = cancel
		out = append(out, Assignment{ShardID: s.ID, Ctx: ctx})
	}
	return out, nil
}

func (g *grantAll) Release(ctx context.Context, arn, id string, finished bool) error {
	g.mu.Lock()
	if cancel, ok := g.held[id]; ok {
		cancel()
		delete(g.held, id)
	}
	g.mu.Unlock()
	g.rec.mu.Lock()
	g.rec.events = append(g.rec.events, fmt.Sprintf("release %s %v", id, finished))
	g.rec.mu.Unlock()
	return nil
}

// withdraw ends the shard's assignment and keeps it from being granted
// again until allow.
func (g *grantAll) withdraw(id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.blocked[id] = true
	if cancel, ok := g.held[id]; ok {
		cancel()
	}
}

func (g *grantAll) allow(id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.blocked, id)
}

// TestAssignerWithdraw withdraws a shard's assignment while Process is
// blocked on it: the reader stops, ShardStopped is called, then Release;
// once granted again the shard resumes and nothing is lost.
func TestAssignerWithdraw(t *testing.T) {
	e := newEnv(t, engine.Options{StreamShards: 2})
	arn := e.createTable(t, "lease")
	open := openShards(t, e.streams, arn)
	victim := open[0].ID
	rec := newRecorder(t)
	var blocking sync.Mutex
	blockVictim := true
	rec.block = func(b Batch) bool {
		blocking.Lock()
		defer blocking.Unlock()
		// Called with rec.mu held: block the victim from its second batch on.
		return blockVictim && b.ShardID == victim && hasKey(rec.first, b.StreamARN+"|"+b.ShardID)
	}
	g := &grantAll{rec: rec, held: map[string]context.CancelFunc{}, blocked: map[string]bool{}}
	ws := watch(t, e.streams)
	stop := startWalker(t, Options{Streams: ws, StreamARNs: []string{arn}, Processor: rec, Positions: rec, Assigner: g})
	e.put(t, "lease", "k", 0, 400)
	eventually.True(t, 30*time.Second, "the victim's first batch", func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return hasKey(rec.first, arn+"|"+victim)
	})
	e.put(t, "lease", "k", 400, 800)
	g.withdraw(victim)
	eventually.True(t, 30*time.Second, "release of the withdrawn shard", func() bool {
		for _, ev := range rec.eventLog() {
			if ev == "release "+victim+" false" {
				return true
			}
		}
		return false
	})
	evs := rec.eventLog()
	stopped, released := -1, -1
	for i, ev := range evs {
		if ev == "stopped "+victim && stopped < 0 {
			stopped = i
		}
		if ev == "release "+victim+" false" && released < 0 {
			released = i
		}
	}
	if stopped < 0 || stopped > released {
		t.Fatalf("want ShardStopped before Release for %s; events: stopped at %d, released at %d", victim, stopped, released)
	}
	for _, ev := range evs[stopped:released] {
		if ev == "process "+victim {
			t.Errorf("Process on %s between ShardStopped and Release", victim)
		}
	}
	blocking.Lock()
	blockVictim = false
	blocking.Unlock()
	g.allow(victim)
	eventually.True(t, 60*time.Second, "800 records", func() bool { return rec.distinct() >= 800 })
	stop()
	if d := rec.duplicates(); d != 0 {
		t.Errorf("%d duplicates after a hand-back", d)
	}
	// Shutdown released every shard after ShardStopped.
	evs = rec.eventLog()
	for _, s := range open {
		last := ""
		for _, ev := range evs {
			if ev == "stopped "+s.ID || ev == "release "+s.ID+" false" {
				last = ev
			}
		}
		if last != "release "+s.ID+" false" {
			t.Errorf("shard %s: last shutdown event %q, want its release after ShardStopped", s.ID, last)
		}
	}
	rec.check(t, arn, describeAll(t, e.streams, arn))
}

// TestStreamGone deletes the table; once its stream has aged out of the
// engine (ResourceNotFoundException), the walker stops that stream cleanly
// and keeps running until its context ends.
func TestStreamGone(t *testing.T) {
	clock := engine.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	// A positive TTLInterval runs the engine's housekeeping, which drops
	// a disabled stream once its shards aged out.
	e := newEnv(t, engine.Options{StreamShards: 2, Clock: clock, TTLInterval: 20 * time.Millisecond})
	arn := e.createTable(t, "doomed")
	rec := newRecorder(t)
	reg := prometheus.NewRegistry()
	stop := startWalker(t, Options{Streams: e.streams, StreamARNs: []string{arn}, Processor: rec, Positions: rec, Registerer: reg})
	e.put(t, "doomed", "k", 0, 100)
	eventually.True(t, 30*time.Second, "100 records", func() bool { return rec.distinct() >= 100 })
	if _, err := e.ddb.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String("doomed")}); err != nil {
		t.Fatalf("delete table: %v", err)
	}
	eventually.True(t, 30*time.Second, "both shards ended", func() bool { return metricSum(t, reg, "archiver_shards_ended_total") == 2 })
	clock.Advance(25 * time.Hour)
	eventually.True(t, 30*time.Second, "the engine to drop the stream", func() bool {
		_, err := e.streams.DescribeStream(context.Background(), &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn)})
		var nf *types.ResourceNotFoundException
		return errors.As(err, &nf)
	})
	eventually.True(t, 30*time.Second, "the walker to notice", func() bool {
		return metricSum(t, reg, "archiver_shard_api_errors_total") >= 1
	})
	if n := metricSum(t, reg, "archiver_shards_active"); n != 0 {
		t.Errorf("archiver_shards_active = %v after the stream went away", n)
	}
	stop()
	if d := rec.duplicates(); d != 0 {
		t.Errorf("%d duplicates", d)
	}
}

// capturingTB records Errorf calls instead of failing the test.
type capturingTB struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (c *capturingTB) Errorf(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.errs = append(c.errs, fmt.Sprintf(format, args...))
}

func (c *capturingTB) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.errs)
}

// TestWatcherCatchesTwoReaders proves the two-readers detector the other
// tests rely on: two walkers without an Assigner on one stream read every
// shard twice at once, and the detector must say so.
func TestWatcherCatchesTwoReaders(t *testing.T) {
	e := newEnv(t, engine.Options{StreamShards: 2})
	arn := e.createTable(t, "twice")
	tb := &capturingTB{TB: t}
	ws := watch(tb, e.streams)
	a, b := newRecorder(t), newRecorder(t)
	startWalker(t, Options{Streams: ws, StreamARNs: []string{arn}, Processor: a, Positions: a})
	startWalker(t, Options{Streams: ws, StreamARNs: []string{arn}, Processor: b, Positions: b})
	e.put(t, "twice", "k", 0, 200)
	eventually.True(t, 30*time.Second, "the detector to fire", func() bool { return tb.count() > 0 })
}

// sharedLeases hands each shard to at most one of several walkers at once,
// each walker taking at most half of what it sees ready: a stand-in for
// the DynamoDB lease store.
type sharedLeases struct {
	mu     sync.Mutex
	owner  map[string]string
	cancel map[string]context.CancelFunc
}

type leaseView struct {
	l  *sharedLeases
	id string
}

func (v leaseView) Assign(ctx context.Context, arn string, ready []Shard) ([]Assignment, error) {
	v.l.mu.Lock()
	defer v.l.mu.Unlock()
	share := (len(ready) + 1) / 2
	mine := 0
	for _, o := range v.l.owner {
		if o == v.id {
			mine++
		}
	}
	var out []Assignment
	for _, s := range ready {
		if o, ok := v.l.owner[s.ID]; ok && o != v.id {
			continue
		} else if ok {
			continue // ours already; the walker keeps the first Ctx
		}
		if mine >= share {
			break
		}
		ctx, cancel := context.WithCancel(context.Background())
		v.l.owner[s.ID], v.l.cancel[s.ID] = v.id, cancel
		mine++
		out = append(out, Assignment{ShardID: s.ID, Ctx: ctx})
	}
	return out, nil
}

func (v leaseView) Release(ctx context.Context, arn, id string, finished bool) error {
	v.l.mu.Lock()
	defer v.l.mu.Unlock()
	if v.l.owner[id] == v.id {
		v.l.cancel[id]()
		delete(v.l.owner, id)
		delete(v.l.cancel, id)
	}
	return nil
}

// TestTwoWalkersShareAStream runs two walkers on one stream with shared
// leases and one checkpoint store: children finished by one walker's
// parents are read by either, never by both at once, and nothing is lost.
func TestTwoWalkersShareAStream(t *testing.T) {
	e := newEnv(t, engine.Options{StreamShards: 4, ShardRolloverRecords: 100})
	arn := e.createTable(t, "shared")
	rec := newRecorder(t)
	ws := watch(t, e.streams)
	l := &sharedLeases{owner: map[string]string{}, cancel: map[string]context.CancelFunc{}}
	for _, id := range []string{"a", "b"} {
		startWalker(t, Options{Streams: ws, StreamARNs: []string{arn}, Processor: rec, Positions: rec,
			Assigner: leaseView{l: l, id: id}, DiscoveryInterval: 2 * time.Second})
	}
	e.put(t, "shared", "k", 0, 2000)
	eventually.True(t, 90*time.Second, "2000 records", func() bool { return rec.distinct() >= 2000 })
	if d := rec.duplicates(); d != 0 {
		t.Errorf("%d duplicates", d)
	}
	rec.check(t, arn, describeAll(t, e.streams, arn))
}

// regrantingLeases grants every ready shard nobody holds (new grants only,
// like a store that reports each lease once). Its Release of a withdrawn
// shard waits until Assign has granted that shard again, so the grant
// arrives while the walker still books the old reader as running.
type regrantingLeases struct {
	mu        sync.Mutex
	held      map[string]context.CancelFunc
	regrants  map[string]chan struct{}
	withdrawn map[string]bool
}

func (l *regrantingLeases) Assign(ctx context.Context, arn string, ready []Shard) ([]Assignment, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Assignment
	for _, s := range ready {
		if _, ok := l.held[s.ID]; ok {
			continue
		}
		actx, cancel := context.WithCancel(context.Background())
		l.held[s.ID] = cancel
		if ch, ok := l.regrants[s.ID]; ok {
			close(ch)
			delete(l.regrants, s.ID)
		}
		out = append(out, Assignment{ShardID: s.ID, Ctx: actx})
	}
	return out, nil
}

func (l *regrantingLeases) Release(ctx context.Context, arn, id string, finished bool) error {
	l.mu.Lock()
	if cancel, ok := l.held[id]; ok {
		cancel()
		delete(l.held, id)
	}
	var ch chan struct{}
	if l.withdrawn[id] {
		delete(l.withdrawn, id)
		ch = make(chan struct{})
		l.regrants[id] = ch
	}
	l.mu.Unlock()
	if ch != nil {
		select {
		case <-ch:
		case <-ctx.Done():
		}
	}
	return nil
}

func (l *regrantingLeases) withdraw(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.withdrawn[id] = true
	if cancel, ok := l.held[id]; ok {
		cancel()
	}
}

// TestGrantWhileReleasing: a shard granted again while its previous reader
// is still releasing it is read once that reader is gone, not forgotten.
func TestGrantWhileReleasing(t *testing.T) {
	e := newEnv(t, engine.Options{StreamShards: 2})
	arn := e.createTable(t, "regrant")
	victim := openShards(t, e.streams, arn)[0].ID
	rec := newRecorder(t)
	l := &regrantingLeases{held: map[string]context.CancelFunc{}, regrants: map[string]chan struct{}{}, withdrawn: map[string]bool{}}
	startWalker(t, Options{Streams: watch(t, e.streams), StreamARNs: []string{arn}, Processor: rec, Positions: rec,
		Assigner: l, DiscoveryInterval: 50 * time.Millisecond, StopTimeout: 20 * time.Second})
	e.put(t, "regrant", "a", 0, 200)
	eventually.True(t, 30*time.Second, "200 records", func() bool { return rec.distinct() >= 200 })
	l.withdraw(victim)
	eventually.True(t, 30*time.Second, "the victim stopped", func() bool {
		for _, ev := range rec.eventLog() {
			if ev == "stopped "+victim {
				return true
			}
		}
		return false
	})
	e.put(t, "regrant", "b", 0, 400)
	eventually.True(t, 60*time.Second, "600 records", func() bool { return rec.distinct() >= 600 })
}

// TestLatestStartSurvivesAReaderRestart: a reader started at LATEST that
// fails before any position was stored restarts at the first record it
// had read: nothing after it is lost, and nothing the LATEST start skipped
// is read.
func TestLatestStartSurvivesAReaderRestart(t *testing.T) {
	e := newEnv(t, engine.Options{StreamShards: 1})
	arn := e.createTable(t, "restart")
	e.put(t, "restart", "old", 0, 100)
	rec := newRecorder(t)
	proc := &failOnce{recorder: rec}
	ws := watch(t, e.streams)
	startWalker(t, Options{Streams: ws, StreamARNs: []string{arn}, Start: Latest, Processor: proc, Positions: noPositions{},
		MinBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond})
	open := openShards(t, e.streams, arn)
	eventually.True(t, 30*time.Second, "a reader on the open shard", func() bool { return ws.callsOn(open[0].ID) > 0 })
	e.put(t, "restart", "new", 0, 50)
	eventually.True(t, 30*time.Second, "50 new records", func() bool { return rec.distinct() >= 50 })
	proc.armed.Store(true) // the next batch fails: the reader stops and restarts
	e.put(t, "restart", "later", 0, 50)
	eventually.True(t, 60*time.Second, "50 later records", func() bool { return rec.distinct() >= 100 })
	if proc.armed.Load() {
		t.Fatal("no batch failed")
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for k := range rec.keys {
		if k[:3] == "old" {
			t.Errorf("the restarted reader read %s, which the LATEST start skipped", k)
		}
	}
}

// noPositions stores nothing: every restart finds no position, as before
// a consumer's first checkpoint.
type noPositions struct{}

func (noPositions) Positions(context.Context, string) (map[string]Position, error) {
	return map[string]Position{}, nil
}

// failOnce is a recorder whose Process fails once when armed.
type failOnce struct {
	*recorder
	armed atomic.Bool
}

func (f *failOnce) Process(ctx context.Context, b Batch) error {
	if f.armed.CompareAndSwap(true, false) {
		return errors.New("injected processing failure")
	}
	return f.recorder.Process(ctx, b)
}
