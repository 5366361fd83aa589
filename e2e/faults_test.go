package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/ttl-archiver/archiver/checkpoint"
	"github.com/ttl-archiver/archiver/consumer"
	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/engine/enginetest"
	"github.com/ttl-archiver/archiver/internal/eventually"
	"github.com/ttl-archiver/archiver/lease"
	"github.com/ttl-archiver/archiver/shard"
	"github.com/ttl-archiver/archiver/sinks"
)

const faultTable = "faults"

// faultEnv is one fault scenario: an in-process engine (TTL sweeper every
// 100 ms, 4 shards rolling over every 200 records), workers each running
// the real consumer into its own real file sink (behind a switchable fault
// wrapper), and a checkpoint store: the DynamoDB lease store on the same
// engine for several workers, the file store for one.
type faultEnv struct {
	t       *testing.T
	ctx     context.Context
	srv     *engine.Server
	db      *dynamodb.Client
	streams *dynamodbstreams.Client
	stream  string
	dir     string
	workers int

	sinkDown atomic.Bool // the fault wrapper fails every batch while set
	sinkFail atomic.Int64

	// configure, when set, adjusts each worker's consumer configuration
	// before consumer.New; inst names the worker's start ("w0-1"), as
	// its file sink's directory under archive/ does.
	configure func(inst string, c *consumer.Config)

	mu      sync.Mutex
	running []*faultWorker
	regs    []*prometheus.Registry
	started int
	reader  *fileSinkReader

	expirer // wave: items that expire, keys f-000000, f-000001, ...
}

func newFaultEnv(t *testing.T, workers int) *faultEnv {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	env := &faultEnv{t: t, ctx: ctx, dir: t.TempDir(), workers: workers}
	bed := enginetest.Start(t, engine.Options{
		TTLInterval: 100 * time.Millisecond, StreamShards: 4, ShardRolloverRecords: 200, Logger: zap.NewNop(),
	})
	env.srv = bed.Server
	env.db = bed.Client("writer")
	env.expirer = expirer{t: t, ctx: ctx, db: env.db, table: faultTable, prefix: "f"}
	env.streams = bed.StreamsClient("writer")
	env.stream = enginetest.CreateTable(t, env.db, table(faultTable))
	return env
}

// faultWorker is one running consumer.
type faultWorker struct {
	name   string
	cancel context.CancelFunc
	done   chan struct{}
	err    error
	store  checkpoint.Store
	leases *lease.Store // with several workers: they fence store
}

// start starts the configured number of workers.
func (env *faultEnv) start() {
	for i := 0; i < env.workers; i++ {
		env.startWorker(fmt.Sprintf("w%d", i))
	}
}

func (env *faultEnv) startWorker(name string) {
	t := env.t
	env.mu.Lock()
	gen := env.started
	env.started++
	env.mu.Unlock()
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)).Named(name)
	var store checkpoint.Store
	var assigner shard.Assigner
	var leases *lease.Store
	if env.workers == 1 {
		fs, err := checkpoint.OpenFile(filepath.Join(env.dir, "checkpoints.json"))
		if err != nil {
			t.Fatal(err)
		}
		store = fs
	} else {
		ls, err := lease.Open(env.ctx, lease.Options{
			Client: enginetest.ClientAt(env.srv.Endpoint(), "lease-"+name), Table: "leases", Create: true, WorkerID: name,
			LeaseDuration: 3 * time.Second, RenewEvery: 500 * time.Millisecond, Logger: log.Named("lease"),
		})
		if err != nil {
			t.Fatalf("lease.Open(%s): %v", name, err)
		}
		store, assigner, leases = checkpoint.NewDynamo(ls), ls, ls
	}
	inst := fmt.Sprintf("%s-%d", name, gen)
	fsink, err := sinks.NewFileSink(filepath.Join(env.dir, "archive", inst), sinks.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	cfg := consumer.Config{
		Options: shard.Options{
			Streams:    enginetest.StreamsClientAt(env.srv.Endpoint(), "reader-"+name),
			TableNames: []string{faultTable}, Assigner: assigner, DiscoveryInterval: 300 * time.Millisecond,
			IdleBackoff: 100 * time.Millisecond, StopTimeout: 5 * time.Second,
			Logger: log, Registerer: reg,
		},
		Tables: enginetest.ClientAt(env.srv.Endpoint(), "reader-"+name), Store: store,
		Routes:             []consumer.Route{{Sink: &faultSink{Sink: fsink, env: env}}},
		CheckpointInterval: 200 * time.Millisecond, ShutdownTimeout: 10 * time.Second,
		RetryMaxBackoff: 2 * time.Second,
	}
	if env.configure != nil {
		env.configure(inst, &cfg)
	}
	c, err := consumer.New(cfg)
	if err != nil {
		t.Fatalf("consumer.New(%s): %v", name, err)
	}
	ctx, cancel := context.WithCancel(env.ctx)
	w := &faultWorker{name: name, cancel: cancel, done: make(chan struct{}), store: store, leases: leases}
	go func() {
		w.err = c.Run(ctx)
		close(w.done)
	}()
	env.mu.Lock()
	env.running = append(env.running, w)
	env.regs = append(env.regs, reg)
	env.mu.Unlock()
	t.Cleanup(func() {
		cancel()
		select {
		case <-w.done:
		case <-time.After(60 * time.Second):
			t.Errorf("worker %s did not stop", name)
		}
		store.Close()
		if leases != nil {
			leases.Close()
		}
	})
}

// stopAll stops every running worker gracefully (as on SIGTERM: final
// checkpoints, leases released).
func (env *faultEnv) stopAll() {
	t := env.t
	env.mu.Lock()
	ws := env.running
	env.running = nil
	env.mu.Unlock()
	for _, w := range ws {
		w.cancel()
	}
	for _, w := range ws {
		select {
		case <-w.done:
		case <-time.After(60 * time.Second):
			t.Fatalf("worker %s: Run did not return within 60s", w.name)
		}
		if w.err != nil {
			t.Errorf("worker %s: Run: %v", w.name, w.err)
		}
		if w.leases != nil {
			if err := w.leases.ReleaseAll(env.ctx); err != nil {
				t.Errorf("worker %s: ReleaseAll: %v", w.name, err)
			}
			if err := w.leases.Close(); err != nil {
				t.Errorf("worker %s: closing its leases: %v", w.name, err)
			}
		}
		if err := w.store.Close(); err != nil {
			t.Errorf("worker %s: closing its store: %v", w.name, err)
		}
	}
}

// checkWorkers fails the test if a worker's Run returned on its own.
func (env *faultEnv) checkWorkers() {
	env.mu.Lock()
	defer env.mu.Unlock()
	for _, w := range env.running {
		select {
		case <-w.done:
			env.t.Fatalf("worker %s stopped on its own: %v", w.name, w.err)
		default:
		}
	}
}

// sweep deletes every expired item now (besides the background sweeper).
func (env *faultEnv) sweep() {
	if _, err := env.srv.Engine().SweepTTL(env.ctx); err != nil {
		env.t.Fatalf("SweepTTL: %v", err)
	}
}

// farEnd reads what every worker's file sink holds.
func (env *faultEnv) farEnd() *tally {
	env.mu.Lock()
	if env.reader == nil {
		env.reader = newFileSinkReader(filepath.Join(env.dir, "archive"))
	}
	r := env.reader
	env.mu.Unlock()
	return r.poll(env.t)
}

// waitArrived waits until every key of keys is at the far end.
func (env *faultEnv) waitArrived(what string, keys []string) *tally {
	var got *tally
	eventually.Wait(env.t, 120*time.Second, what, func() error {
		env.checkWorkers()
		got = env.farEnd()
		return got.allArrived(keys)
	})
	return got
}

// metric sums a counter over every worker's registry, over all label
// values but those given as name, value pairs.
func (env *faultEnv) metric(name string, labels ...string) float64 {
	env.mu.Lock()
	regs := append([]*prometheus.Registry(nil), env.regs...)
	env.mu.Unlock()
	sum := 0.0
	for _, reg := range regs {
		mfs, err := reg.Gather()
		if err != nil {
			env.t.Fatalf("gathering metrics: %v", err)
		}
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
			for _, m := range mf.GetMetric() {
				if c := m.GetCounter(); c != nil && hasLabels(m, labels) {
					sum += c.GetValue()
				}
			}
		}
	}
	return sum
}

// hasLabels reports whether m has every label of pairs (name, value, ...).
func hasLabels(m *dto.Metric, pairs []string) bool {
	for i := 0; i+1 < len(pairs); i += 2 {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == pairs[i] && l.GetValue() == pairs[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// openShards lists the stream's open shards.
func (env *faultEnv) openShards() []string {
	var open []string
	for _, s := range env.shards() {
		if s.SequenceNumberRange == nil || s.SequenceNumberRange.EndingSequenceNumber == nil {
			open = append(open, aws.ToString(s.ShardId))
		}
	}
	return open
}

// shards describes the stream to its end.
func (env *faultEnv) shards() []stypes.Shard {
	var shards []stypes.Shard
	var last *string
	for {
		out, err := env.streams.DescribeStream(env.ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(env.stream), ExclusiveStartShardId: last})
		if err != nil {
			env.t.Fatalf("DescribeStream: %v", err)
		}
		shards = append(shards, out.StreamDescription.Shards...)
		last = out.StreamDescription.LastEvaluatedShardId
		if last == nil {
			return shards
		}
	}
}

// finish waits for every written key, stops the workers gracefully and
// checks again: no item lost. It logs the duplicates.
func (env *faultEnv) finish() *tally {
	keys := env.written.all()
	env.waitArrived("every expired item reaches the far end", keys)
	env.stopAll()
	got := env.farEnd()
	if err := got.allArrived(keys); err != nil {
		env.t.Errorf("after the graceful stop: %v", err)
	}
	got.checkItems(env.t, "far end")
	if env.t.Failed() {
		env.t.Logf("DescribeTimeToLive failures counted by the workers: %v", env.metric("archiver_ttl_lookup_failures_total"))
	}
	if got.torn > 0 {
		env.t.Errorf("%d archive lines do not decode", got.torn)
	}
	env.t.Logf("%d expired items, %d delivered lines, %d duplicates", len(keys), got.lines, got.duplicates())
	return got
}

// faultSink wraps a real sink; while the env's sinkDown is set it fails
// every batch: half of them after the inner sink made them durable (so the
// retry writes them twice), half without writing anything.
// It is its own fake rather than a sinktest.Recorder: the failure strikes
// a real sink (after or instead of its write), whose archive is the far
// end.
type faultSink struct {
	sinks.Sink
	env *faultEnv
}

var errSinkDown = errors.New("injected sink outage")

func (s *faultSink) Write(ctx context.Context, b sinks.Batch, ack sinks.Ack) error {
	if !s.env.sinkDown.Load() {
		return s.Sink.Write(ctx, b, ack)
	}
	if s.env.sinkFail.Add(1)%2 == 0 {
		ack(errSinkDown)
		return nil
	}
	return s.Sink.Write(ctx, b, func(error) { ack(errSinkDown) })
}

func faultWorkers() int {
	if os.Getenv("E2E_FAULT_WORKERS") == "1" {
		return 1
	}
	return 2
}

// TestFaults runs issue 5's fault scenarios, each on its own engine with
// two workers sharing the stream through the DynamoDB lease store
// (E2E_FAULT_WORKERS=1: one worker with the file store). Items keep
// expiring in waves while the fault strikes; at the end every expired item
// must be at the far end (the workers' file sinks).
func TestFaults(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		run  func(t *testing.T, env *faultEnv)
	}{
		{"engine throttles GetRecords", func(t *testing.T, env *faultEnv) {
			env.start()
			for i := 0; i < 5; i++ {
				env.srv.Engine().ThrottleGetRecords(40)
				env.wave(300)
				time.Sleep(300 * time.Millisecond)
			}
			env.finish()
			if n := env.metric("archiver_shard_throttles_total"); n == 0 {
				t.Errorf("archiver_shard_throttles_total is 0 after 200 throttled GetRecords calls")
			} else {
				t.Logf("walker saw %v throttled calls (after the SDK's retries)", n)
			}
		}},
		{"iterators expire", func(t *testing.T, env *faultEnv) {
			env.start()
			for i := 0; i < 5; i++ {
				env.wave(150)
				env.srv.Engine().ExpireIterators()
				env.wave(150)
				time.Sleep(200 * time.Millisecond)
				env.srv.Engine().ExpireIterators()
			}
			env.finish()
		}},
		{"shards split", func(t *testing.T, env *faultEnv) {
			env.start()
			rng := rand.New(rand.NewPCG(1, 2))
			splits := 0
			for i := 0; i < 5; i++ {
				env.wave(150)
				open := env.openShards()
				for _, j := range rng.Perm(len(open))[:min(2, len(open))] {
					if err := env.srv.Engine().SplitShard(faultTable, open[j]); err != nil {
						t.Fatalf("SplitShard %s: %v", open[j], err)
					}
					splits++
				}
				env.wave(150)
				time.Sleep(200 * time.Millisecond)
			}
			env.finish()
			t.Logf("%d splits; %v shards ended", splits, env.metric("archiver_shards_ended_total"))
		}},
		{"trimmed data", func(t *testing.T, env *faultEnv) {
			// The workers read a first wave and checkpoint it, then stop.
			// While they are down a second wave expires and the stream is
			// trimmed past it: those records are gone before anyone read
			// them. Restarted from checkpoints that point into the trimmed
			// range, the workers must count the gap and go on.
			env.start()
			first := env.wave(300)
			env.waitArrived("first wave", first)
			env.stopAll()
			gone := env.wave(300)
			env.sweep()
			time.Sleep(20 * time.Millisecond)
			if err := env.srv.Engine().TrimStream(faultTable, time.Now()); err != nil {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond)
			env.written.drop(gone)
			env.start()
			for i := 0; i < 4; i++ {
				env.wave(200)
				time.Sleep(200 * time.Millisecond)
			}
			got := env.finish()
			lost, _ := got.missing(gone)
			gaps := env.metric("archiver_shard_trimmed_gaps_total")
			t.Logf("trimmed before read: %d of %d items never arrived (legitimately gone); %v trimmed gaps counted", lost, len(gone), gaps)
			if gaps == 0 {
				t.Errorf("archiver_shard_trimmed_gaps_total is 0 after restarting from checkpoints inside trimmed data")
			}
		}},
		{"sink fails for a stretch", func(t *testing.T, env *faultEnv) {
			env.start()
			env.wave(200)
			env.sinkDown.Store(true)
			outage := sinkOutage()
			end := time.Now().Add(outage)
			for time.Now().Before(end) {
				env.wave(100)
				time.Sleep(500 * time.Millisecond)
			}
			env.sinkDown.Store(false)
			back := time.Now()
			env.wave(200)
			env.waitArrived("every item after the outage", env.written.all())
			t.Logf("caught up %v after the sink came back", time.Since(back).Round(time.Millisecond))
			env.finish()
			t.Logf("sink outage of %v: %d batches failed", outage, env.sinkFail.Load())
			if env.sinkFail.Load() == 0 {
				t.Errorf("no batch reached the failing sink during the outage")
			}
		}},
		{"checkpoint table throttled", func(t *testing.T, env *faultEnv) {
			// Every request of the lease store's client is throttled, first
			// half of them, then all of them for longer than a lease,
			// then none.
			var mode atomic.Int32 // 0 off, 1 half, 2 all
			var throttled atomic.Int64
			var n atomic.Int64
			env.srv.Engine().SetHook(func(op string, r *http.Request) error {
				if !strings.HasPrefix(enginetest.AccessKey(r), "lease-") {
					return nil
				}
				switch mode.Load() {
				case 2:
					throttled.Add(1)
					return engine.Throttle()
				case 1:
					if n.Add(1)%2 == 0 {
						throttled.Add(1)
						return engine.Throttle()
					}
				}
				return nil
			})
			if env.workers == 1 {
				t.Skip("the file store has no table to throttle")
			}
			env.start()
			env.wave(200)
			mode.Store(1)
			for i := 0; i < 4; i++ {
				env.wave(150)
				time.Sleep(400 * time.Millisecond)
			}
			mode.Store(2)
			for i := 0; i < 5; i++ { // 5 s: longer than the 3 s lease
				env.wave(100)
				time.Sleep(time.Second)
			}
			mode.Store(0)
			env.wave(200)
			env.finish()
			t.Logf("%d lease-table requests throttled", throttled.Load())
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := newFaultEnv(t, faultWorkers())
			tc.run(t, env)
		})
	}
}

// sinkOutage is how long the failing sink fails: 30 s as issue 5 says,
// 5 s with -short or E2E_SINK_OUTAGE set to a duration.
func sinkOutage() time.Duration {
	if s := os.Getenv("E2E_SINK_OUTAGE"); s != "" {
		if d, err := time.ParseDuration(s); err == nil {
			return d
		}
	}
	if testing.Short() {
		return 5 * time.Second
	}
	return 30 * time.Second
}
