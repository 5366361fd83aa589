package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/ttl-archiver/archiver/checkpoint"
	"github.com/ttl-archiver/archiver/consumer"
	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/engine/enginetest"
	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/eventually"
	"github.com/ttl-archiver/archiver/lease"
	"github.com/ttl-archiver/archiver/lease/leasetest"
	"github.com/ttl-archiver/archiver/manifest"
	"github.com/ttl-archiver/archiver/shard"
	"github.com/ttl-archiver/archiver/sinks"
	"github.com/ttl-archiver/archiver/sinks/sinktest"
)

// ---- observation: which worker read which shard when ----

type readCall struct {
	worker     string
	start, end time.Time
}

// readLog records every GetRecords call per shard.
type readLog struct {
	mu     sync.Mutex
	calls  map[string][]readCall // shard → calls
	byKey  map[string]int        // access key → GetRecords seen by the engine
	byWrap map[string]int        // worker → GetRecords seen by its client
}

func newReadLog() *readLog {
	return &readLog{calls: map[string][]readCall{}, byKey: map[string]int{}, byWrap: map[string]int{}}
}

// watchedStreams is the worker's real Streams client, observed: it maps
// iterators back to their shards so each GetRecords call is logged with its
// shard and caller.
type watchedStreams struct {
	*dynamodbstreams.Client
	worker string
	log    *readLog
	mu     sync.Mutex
	iters  map[string]string // iterator → shard
}

func (w *watchedStreams) GetShardIterator(ctx context.Context, in *dynamodbstreams.GetShardIteratorInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error) {
	out, err := w.Client.GetShardIterator(ctx, in, optFns...)
	if err == nil && out.ShardIterator != nil {
		w.mu.Lock()
		w.iters[*out.ShardIterator] = aws.ToString(in.ShardId)
		w.mu.Unlock()
	}
	return out, err
}

func (w *watchedStreams) GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, optFns ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error) {
	it := aws.ToString(in.ShardIterator)
	w.mu.Lock()
	sh := w.iters[it]
	delete(w.iters, it)
	w.mu.Unlock()
	start := time.Now()
	out, err := w.Client.GetRecords(ctx, in, optFns...)
	end := time.Now()
	w.log.mu.Lock()
	w.log.calls[sh] = append(w.log.calls[sh], readCall{worker: w.worker, start: start, end: end})
	w.log.byWrap[w.worker]++
	w.log.mu.Unlock()
	if err == nil && out.NextShardIterator != nil {
		w.mu.Lock()
		w.iters[*out.NextShardIterator] = sh
		w.mu.Unlock()
	} else if err != nil {
		// The walker may retry with the same iterator.
		w.mu.Lock()
		w.iters[it] = sh
		w.mu.Unlock()
	}
	return out, err
}

// ---- the far end: a sink that records what each worker delivered ----

type delivery struct {
	worker string
	key    string
}

// farEnd is every worker's recording sink; while failUntil (unix ms) is
// ahead, they fail every batch.
type farEnd struct {
	failUntil atomic.Int64
	mu        sync.Mutex
	sinks     []*sinktest.Recorder // in start order; a sink's name is "rec-" + its worker
	gate      <-chan struct{}      // when set, every sink's writes wait until it is closed
}

var errSinkFault = errors.New("sink unavailable (test fault)")

// sink is a new recording sink of worker.
func (f *farEnd) sink(worker string) *sinktest.Recorder {
	r := sinktest.New("rec-" + worker)
	r.FailWith(func(sinks.Batch) error {
		if time.Now().UnixMilli() < f.failUntil.Load() {
			return errSinkFault
		}
		return nil
	})
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gate != nil {
		r.Gate(f.gate)
	}
	f.sinks = append(f.sinks, r)
	return r
}

// block makes every sink's writes wait until gate is closed.
func (f *farEnd) block(gate <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gate = gate
	for _, r := range f.sinks {
		r.Gate(gate)
	}
}

// recs returns the deliveries of every event ID, and the deliveries of
// every item key.
func (f *farEnd) recs() (map[string][]delivery, map[string]int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	recs, keys := map[string][]delivery{}, map[string]int{}
	for _, r := range f.sinks {
		worker := strings.TrimPrefix(r.Name(), "rec-")
		for _, ev := range r.Events() {
			key := ""
			if v, ok := ev.Keys["id"].(*stypes.AttributeValueMemberS); ok {
				key = v.Value
			}
			recs[ev.EventID] = append(recs[ev.EventID], delivery{worker: worker, key: key})
			keys[key]++
		}
	}
	return recs, keys
}

// failed is the number of batches the sinks failed.
func (f *farEnd) failed() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, r := range f.sinks {
		_, failed := r.Writes()
		n += failed
	}
	return n
}

// ---- workers ----

type mwWorker struct {
	name   string
	reg    *prometheus.Registry
	store  *lease.Store      // the worker's leases (its checkpoints are fenced by them)
	client *leasetest.Client // the store's lease table client
	cancel context.CancelFunc
	done   chan struct{} // closed when Run returned
	err    error         // Run's result, once done
}

// kill cuts the worker's lease table client, as a kill -9 would: its
// renewals, heartbeats, checkpoints and releases no longer reach the table.
// The store is not closed (a killed process closes nothing); its leases
// expire for the other workers as a dead process's do.
func (w *mwWorker) kill() { w.client.Kill() }

type mwEnv struct {
	t        *testing.T
	bed      *enginetest.Bed
	ddb      *dynamodb.Client
	stream   string
	log      *readLog
	end      *farEnd
	lease    time.Duration
	nextItem int
}

func (env *mwEnv) startWorker(name string) *mwWorker {
	t := env.t
	ctx, cancel := context.WithCancel(context.Background())
	logger := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)).Named(name)
	reg := prometheus.NewRegistry()
	client := leasetest.Killable(env.bed.Client(name))
	store, err := lease.Open(ctx, lease.Options{
		Client: client, Table: "leases", Create: true, WorkerID: name,
		LeaseDuration: env.lease, RenewEvery: env.lease / 6, Logger: logger.Named("lease"), Registerer: reg,
	})
	if err != nil {
		t.Fatalf("lease.Open(%s): %v", name, err)
	}
	streams := &watchedStreams{
		Client: env.bed.StreamsClient(name),
		worker: name, log: env.log, iters: map[string]string{},
	}
	c, err := consumer.New(consumer.Config{
		Options: shard.Options{
			Streams: streams, TableNames: []string{"items"}, Assigner: store,
			// The walker's default AssignInterval (1 s) is what picks up
			// released leases quickly; discovery stays slow, as in production.
			DiscoveryInterval: 5 * time.Second,
			IdleBackoff:       100 * time.Millisecond,
			StopTimeout:       5 * time.Second,
			Logger:            logger,
		},
		Tables:             env.bed.Client(name),
		Store:              checkpoint.NewDynamo(store),
		Routes:             []consumer.Route{{Sink: env.end.sink(name)}},
		CheckpointInterval: 200 * time.Millisecond,
		RetryMinBackoff:    50 * time.Millisecond,
		RetryMaxBackoff:    500 * time.Millisecond,
		ShutdownTimeout:    10 * time.Second,
	})
	if err != nil {
		t.Fatalf("consumer.New(%s): %v", name, err)
	}
	w := &mwWorker{name: name, reg: reg, store: store, client: client, cancel: cancel, done: make(chan struct{})}
	go func() {
		w.err = c.Run(ctx)
		close(w.done)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-w.done:
		case <-time.After(30 * time.Second):
			t.Errorf("worker %s did not stop", name)
		}
		store.Close()
	})
	return w
}

// stop ends the worker's consumer (graceful: final checkpoints, releases).
func (w *mwWorker) stop(t *testing.T) {
	t.Helper()
	w.cancel()
	select {
	case <-w.done:
		if w.err != nil {
			t.Errorf("worker %s: Run: %v", w.name, w.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("worker %s: Run did not return", w.name)
	}
}

// writeExpired writes n items whose TTL passed an hour ago and lets the
// engine's TTL process delete them.
func (env *mwEnv) writeExpired(n int) []string {
	return env.writeExpiredThen(n, nil)
}

// writeExpiredThen is writeExpired calling beforeSweep (if not nil) just
// before the items expire.
func (env *mwEnv) writeExpiredThen(n int, beforeSweep func()) []string {
	t := env.t
	ctx := context.Background()
	exp := strconv.FormatInt(time.Now().Add(-time.Hour).Unix(), 10)
	var keys []string
	for i := 0; i < n; i += 25 {
		var reqs []dtypes.WriteRequest
		for j := i; j < min(i+25, n); j++ {
			key := fmt.Sprintf("k%06d", env.nextItem)
			env.nextItem++
			keys = append(keys, key)
			reqs = append(reqs, dtypes.WriteRequest{PutRequest: &dtypes.PutRequest{Item: map[string]dtypes.AttributeValue{
				"id":      &dtypes.AttributeValueMemberS{Value: key},
				"exp":     &dtypes.AttributeValueMemberN{Value: exp},
				"payload": &dtypes.AttributeValueMemberS{Value: strings.Repeat("x", 100)},
			}}})
		}
		for len(reqs) > 0 {
			out, err := env.ddb.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]dtypes.WriteRequest{"items": reqs}})
			if err != nil {
				t.Fatalf("BatchWriteItem: %v", err)
			}
			reqs = out.UnprocessedItems["items"]
		}
	}
	if beforeSweep != nil {
		beforeSweep()
	}
	if _, err := env.bed.Engine.SweepTTL(ctx); err != nil {
		t.Fatalf("SweepTTL: %v", err)
	}
	return keys
}

// rows reads the lease table's items of the stream.
func (env *mwEnv) rows() map[string]map[string]dtypes.AttributeValue {
	out, err := env.ddb.Query(context.Background(), &dynamodb.QueryInput{
		TableName: aws.String("leases"), ConsistentRead: aws.Bool(true),
		KeyConditionExpression:    aws.String("stream_arn = :s"),
		ExpressionAttributeValues: map[string]dtypes.AttributeValue{":s": &dtypes.AttributeValueMemberS{Value: env.stream}},
	})
	if err != nil {
		env.t.Fatalf("Query leases: %v", err)
	}
	rows := map[string]map[string]dtypes.AttributeValue{}
	for _, it := range out.Items {
		rows[it["shard_id"].(*dtypes.AttributeValueMemberS).Value] = it
	}
	return rows
}

// heldShards lists the shards each worker holds and reads, as the lease
// table says: the items whose lease_owner it is, leases being handed off
// (handoff_to set) and finished shards excluded.
func (env *mwEnv) heldShards() map[string][]string {
	held := map[string][]string{}
	for sh, r := range env.rows() {
		if o := attrS(r, "lease_owner"); o != "" && attrS(r, "handoff_to") == "" && !finished(r) {
			held[o] = append(held[o], sh)
		}
	}
	return held
}

// settledShards is heldShards once no lease is between two of ws: each
// worker's own count of the leases it holds (archiver_leases_held) is the
// table's. While a hand-off is requested or being released, the old owner
// still counts the lease and the table no longer does; once released, the
// table names the new owner before that worker takes the lease up (which
// moves its counter once more). It fails while the two disagree.
func (env *mwEnv) settledShards(ws []*mwWorker) (map[string][]string, error) {
	held := env.heldShards()
	for _, w := range ws {
		if own := metric(env.t, w.reg, "archiver_leases_held"); own != float64(len(held[w.name])) {
			return nil, fmt.Errorf("%s holds %v leases, the table says %d (a hand-off in progress)", w.name, own, len(held[w.name]))
		}
	}
	return held, nil
}

func attrS(it map[string]dtypes.AttributeValue, name string) string {
	if v, ok := it[name].(*dtypes.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func attrN(it map[string]dtypes.AttributeValue, name string) int64 {
	if v, ok := it[name].(*dtypes.AttributeValueMemberN); ok {
		n, _ := strconv.ParseInt(v.Value, 10, 64)
		return n
	}
	return 0
}

func finished(it map[string]dtypes.AttributeValue) bool {
	v, ok := it["shard_finished"].(*dtypes.AttributeValueMemberBOOL)
	return ok && v.Value
}

// newMWEnv starts an engine with a 16-shard stream that rolls over every
// 60 records, a table "items" with TTL on "exp", and the observation hooks.
func newMWEnv(t *testing.T) *mwEnv {
	env := &mwEnv{t: t, log: newReadLog(), end: &farEnd{}, lease: 6 * time.Second}
	env.bed = enginetest.Start(t, engine.Options{
		TTLInterval: -1, StreamShards: 16, ShardRolloverRecords: 60, Logger: zap.NewNop(),
		Hooks: engine.Hooks{OnRequest: env.hook(nil)},
	})
	env.ddb = env.bed.DynamoDB
	env.stream = env.bed.CreateTable(t, enginetest.Table{Name: "items", Hash: "id", TTL: "exp"})
	return env
}

// hook counts each access key's GetRecords calls, then runs fault (when
// not nil) with the operation and the caller's access key.
func (env *mwEnv) hook(fault func(op, key string) error) func(op string, r *http.Request) error {
	return func(op string, r *http.Request) error {
		key := enginetest.AccessKey(r)
		if op == "GetRecords" {
			env.log.mu.Lock()
			env.log.byKey[key]++
			env.log.mu.Unlock()
		}
		if fault != nil {
			return fault(op, key)
		}
		return nil
	}
}

func (env *mwEnv) setFault(f func(op, key string) error) { env.bed.Engine.SetHook(env.hook(f)) }

// pickedUp waits until none of the shards is owned by gone (each is owned by
// another worker or finished) and returns how long that took.
func (env *mwEnv) pickedUp(gone string, shards []string, since time.Time) time.Duration {
	eventually.Wait(env.t, 60*time.Second, "shards of "+gone+" picked up", func() error {
		rows := env.rows()
		for _, sh := range shards {
			r := rows[sh]
			if finished(r) {
				continue
			}
			if o := attrS(r, "lease_owner"); o == "" || o == gone {
				return fmt.Errorf("shard %s owned by %q", sh, o)
			}
		}
		return nil
	})
	return time.Since(since)
}

func (env *mwEnv) allArrived(keys []string) {
	eventually.Wait(env.t, 90*time.Second, "every expired item reaches the sink", func() error {
		_, got := env.end.recs()
		missing := 0
		for _, k := range keys {
			if got[k] == 0 {
				missing++
			}
		}
		if missing > 0 {
			return fmt.Errorf("%d of %d missing", missing, len(keys))
		}
		return nil
	})
}

// TestMultiWorker runs three workers in one process on a 16-shard stream
// with rollover: they spread the shards evenly, one is killed (its shards
// are taken once its leases expire), one stops gracefully (its shards are
// taken at once), no shard is ever read by two workers at once, every
// expired item reaches the sink, and duplicates come only from the killed
// worker's un-checkpointed tail.
func TestMultiWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-worker scenario takes about a minute")
	}
	env := newMWEnv(t)
	ctx := context.Background()

	// Phase 1: worker a starts alone and takes every shard; b and c join
	// and get their shares by hand-off while items keep expiring.
	a := env.startWorker("worker-a")
	var all []string
	keys := env.writeExpired(300)
	all = append(all, keys...)
	eventually.Wait(t, 60*time.Second, "worker a takes every shard", func() error {
		if n := len(env.heldShards()["worker-a"]); n < 16 {
			return fmt.Errorf("holds %d", n)
		}
		return nil
	})
	joined := time.Now()
	b, c := env.startWorker("worker-b"), env.startWorker("worker-c")
	workers := []*mwWorker{a, b, c}
	keys = env.writeExpired(300)
	all = append(all, keys...)

	// Even spread once settled: nobody above its fair share + 1.
	count := func(ws []*mwWorker, shards map[string][]string) (map[string]int, int) {
		m, total := map[string]int{}, 0
		for _, w := range ws {
			m[w.name] = len(shards[w.name])
			total += m[w.name]
		}
		return m, total
	}
	held := func(ws []*mwWorker) (map[string]int, int) { return count(ws, env.heldShards()) }
	eventually.Wait(t, 60*time.Second, "shards spread evenly", func() error {
		shards, err := env.settledShards(workers)
		if err != nil {
			return err
		}
		m, total := count(workers, shards)
		fair := int(math.Ceil(float64(total) / 3))
		for _, h := range m {
			if h > fair+1 || h == 0 || total < 16 {
				return fmt.Errorf("held %v (fair share %d of %d)", m, fair, total)
			}
		}
		return nil
	})
	m, total := held(workers)
	t.Logf("spread after settling (%v after b and c joined): %v of %d shards", time.Since(joined), m, total)
	env.allArrived(all)
	for i := 0; i < 20; i++ { // it stays settled
		m, total := held(workers)
		fair := int(math.Ceil(float64(total) / 3))
		for n, h := range m {
			if h > fair+1 {
				t.Errorf("after settling: %s holds %d > fair share %d + 1 (%v)", n, h, fair, m)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}

	// Phase 2: worker c is killed while items keep expiring.
	keys = env.writeExpired(300)
	all = append(all, keys...)
	cShards := env.heldShards()["worker-c"]
	killedAt := time.Now()
	c.kill()
	c.stop(t) // its process is gone: the consumer's final writes fail
	keys = env.writeExpired(300)
	all = append(all, keys...)
	took := env.pickedUp("worker-c", cShards, killedAt)
	t.Logf("killed worker's %d shards picked up after %v (lease %v)", len(cShards), took, env.lease)
	env.allArrived(all)

	// Phase 3: worker b stops gracefully (as on SIGTERM).
	bShards := env.heldShards()["worker-b"]
	stopAt := time.Now()
	b.stop(t)
	if err := b.store.ReleaseAll(ctx); err != nil {
		t.Errorf("ReleaseAll: %v", err)
	}
	t.Logf("graceful stop of worker b took %v", time.Since(stopAt))
	took = env.pickedUp("worker-b", bShards, stopAt)
	t.Logf("gracefully stopped worker's %d shards picked up after %v", len(bShards), took)
	env.recordedBeforeRelease("worker-b", bShards)
	keys = env.writeExpired(400)
	all = append(all, keys...)
	env.allArrived(all)
	a.stop(t)

	// Every expired item arrived; duplicates only from the killed worker's
	// tail: each duplicated record was also delivered by worker c. (That
	// holds while the survivors renew their leases; a machine so loaded that
	// their renewals fail for most of a lease may re-deliver too, which is
	// then logged, not failed.)
	renewFailed := 0.0
	for _, w := range []*mwWorker{a, b} {
		renewFailed += metric(t, w.reg, "archiver_lease_renew_failures_total")
	}
	report := t.Errorf
	if renewFailed > 0 {
		report = t.Logf
	}
	recs, got := env.end.recs()
	dups, badDups := 0, 0
	for id, ds := range recs {
		if len(ds) < 2 {
			continue
		}
		dups += len(ds) - 1
		byC := false
		for _, d := range ds {
			byC = byC || d.worker == "worker-c"
		}
		if !byC {
			badDups++
			if badDups <= 5 {
				report("record %s (key %s) delivered %d times, never by the killed worker: %+v", id, ds[0].key, len(ds), ds)
			}
		}
	}
	for _, k := range all {
		if got[k] == 0 {
			t.Errorf("expired item %s never reached the sink", k)
		}
	}
	t.Logf("%d expired items, %d duplicate deliveries (killed worker's tail), %d not from it (survivors' failed renewals: %v)", len(all), dups, badDups, renewFailed)

	env.logLeaseMetrics(workers)
	env.checkExclusiveReads([]string{"worker-a", "worker-b", "worker-c"})
	env.checkRanges()
}

// recordedBeforeRelease checks that a worker that stopped gracefully
// recorded each of its shards' ranges before it released the lease: the
// checkpoint it left is the end of the last range it recorded of the
// shard (no record has been written since: its successor saved nothing).
func (env *mwEnv) recordedBeforeRelease(worker string, shards []string) {
	t := env.t
	var ranges []manifest.Range
	env.end.mu.Lock()
	for _, r := range env.end.sinks {
		if r.Name() == "rec-"+worker {
			ranges = append(ranges, r.Ranges()...)
		}
	}
	env.end.mu.Unlock()
	rows := env.rows()
	checked := 0
	for _, sh := range shards {
		last := ""
		for _, rg := range ranges {
			if rg.ShardID == sh && (last == "" || event.CompareSequence(rg.To, last) > 0) {
				last = rg.To
			}
		}
		if last == "" {
			continue // it read nothing of the shard
		}
		checked++
		if cp := attrS(rows[sh], "checkpoint_seq"); cp != last && !finished(rows[sh]) {
			t.Errorf("shard %s: %s left the checkpoint at %s, its last recorded range ends at %s", sh, worker, cp, last)
		}
	}
	t.Logf("%s recorded its last range before the release of %d of its %d shards (the others it read nothing of)", worker, checked, len(shards))
}

// checkRanges proves, from every worker's recorded ranges alone
// (manifest.Check), that each shard was read from its start without a
// gap: a successor's first range (after a hand-off, or a kill: re-read
// from the killed worker's last saved checkpoint) begins where a range
// recorded before it ended, and a parent was recorded to its end before
// its children were read. Findings of the kinds allowed are logged.
func (env *mwEnv) checkRanges(allowed ...string) {
	t := env.t
	var all []manifest.Range
	env.end.mu.Lock()
	for _, r := range env.end.sinks {
		all = append(all, r.Ranges()...)
	}
	env.end.mu.Unlock()
	res := consumer.CheckRanges(t, all)
	for _, f := range res.Findings {
		if slices.Contains(allowed, f.Kind) {
			t.Logf("finding allowed here: %+v", f)
			continue
		}
		t.Errorf("the recorded ranges do not prove shard %s: %s (%s, %s]: %s", f.Shard, f.Kind, f.From, f.To, f.Detail)
	}
	ended := 0
	for _, sh := range res.Shards {
		if sh.Start != "" || sh.Begun {
			t.Errorf("shard %s: ranges begin at %q, not at its start", sh.Shard, sh.Start)
		}
		if sh.Ended {
			ended++
		}
	}
	t.Logf("%d ranges recorded over %d shards (%d read to their end) prove every shard read from its start without a gap",
		len(all), len(res.Shards), ended)
}

// checkExclusiveReads asserts that no shard was ever read by two workers at
// once: per shard, GetRecords calls of different workers never overlap,
// and every change of reader is backed by a change of lease (the lease
// counter).
func (env *mwEnv) checkExclusiveReads(workers []string) {
	t := env.t
	// No shard was ever read by two workers at once: per shard, GetRecords
	// calls of different workers never interleave, and every change of
	// reader is backed by a change of lease (the lease counter).
	rows := env.rows()
	env.log.mu.Lock()
	defer env.log.mu.Unlock()
	shardsRead, handovers := 0, 0
	for sh, calls := range env.log.calls {
		if sh == "" {
			t.Errorf("%d GetRecords calls with an unknown iterator", len(calls))
			continue
		}
		shardsRead++
		sort.Slice(calls, func(i, j int) bool { return calls[i].start.Before(calls[j].start) })
		changes := 0
		lastEnd := map[string]time.Time{}
		for i, cl := range calls {
			if i > 0 && calls[i-1].worker != cl.worker {
				changes++
				prev := calls[i-1].worker
				if lastEnd[prev].After(cl.start) {
					t.Errorf("shard %s: %s called GetRecords at %s while %s's call ran until %s",
						sh, cl.worker, cl.start.Format("15:04:05.000"), prev, lastEnd[prev].Format("15:04:05.000"))
				}
			}
			if cl.end.After(lastEnd[cl.worker]) {
				lastEnd[cl.worker] = cl.end
			}
		}
		handovers += changes
		if counter := attrN(rows[sh], "lease_counter"); int64(changes) > counter {
			t.Errorf("shard %s changed reader %d times but its lease only %d times", sh, changes, counter)
		}
	}
	for _, w := range workers {
		if env.log.byKey[w] == 0 {
			t.Errorf("engine saw no GetRecords from %s", w)
		}
	}
	t.Logf("%d shards read, %d reader hand-overs; GetRecords per worker (engine): %v, (clients): %v",
		shardsRead, handovers, env.log.byKey, env.log.byWrap)
}

// openShards lists the stream's open shards.
func (env *mwEnv) openShards() []string {
	client := env.bed.Streams
	var open []string
	var start *string
	for {
		out, err := client.DescribeStream(context.Background(), &dynamodbstreams.DescribeStreamInput{
			StreamArn: aws.String(env.stream), ExclusiveStartShardId: start})
		if err != nil {
			env.t.Fatalf("DescribeStream: %v", err)
		}
		for _, sh := range out.StreamDescription.Shards {
			if sh.SequenceNumberRange == nil || sh.SequenceNumberRange.EndingSequenceNumber == nil {
				open = append(open, aws.ToString(sh.ShardId))
			}
		}
		start = out.StreamDescription.LastEvaluatedShardId
		if start == nil {
			return open
		}
	}
}

// TestMultiWorkerFaults runs three workers through the stream's and the
// lease table's faults: GetRecords throttling, expired iterators, shard
// splits, trimmed data, a sink down for a while, a lease table throttled
// some of the time and, once, entirely for longer than a lease. No expired
// item is lost and no shard is read by two workers at once.
func TestMultiWorkerFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-worker fault scenario takes about a minute")
	}
	env := newMWEnv(t)
	workers := []string{"worker-a", "worker-b", "worker-c"}
	var ws []*mwWorker
	for _, w := range workers {
		ws = append(ws, env.startWorker(w))
	}
	var all []string
	all = append(all, env.writeExpired(300)...)
	env.allArrived(all)
	// Everything so far was delivered: trim it from the stream. Readers
	// positioned in it see TrimmedDataAccessException.
	if err := env.bed.Engine.TrimStream("items", time.Now()); err != nil {
		t.Fatalf("TrimStream: %v", err)
	}

	// The lease table throttles 30% of the workers' requests, and during
	// one window every one of them, for longer than a lease.
	var fullThrottle atomic.Bool
	var throttled atomic.Int64
	var n atomic.Int64
	leaseOps := map[string]bool{"UpdateItem": true, "PutItem": true, "Query": true, "DeleteItem": true, "GetItem": true}
	env.setFault(func(op, key string) error {
		if !strings.HasPrefix(key, "worker-") || !leaseOps[op] {
			return nil
		}
		if fullThrottle.Load() || n.Add(1)%10 < 3 {
			throttled.Add(1)
			return engine.Throttle()
		}
		return nil
	})
	e := env.bed.Engine
	for round := 0; round < 12; round++ {
		var sinkDown func()
		if round == 4 {
			sinkDown = func() { env.end.failUntil.Store(time.Now().Add(3 * time.Second).UnixMilli()) }
		}
		all = append(all, env.writeExpiredThen(100, sinkDown)...)
		switch round {
		case 1, 5, 9:
			e.ThrottleGetRecords(30)
		case 2, 7:
			e.ExpireIterators()
		case 3, 8:
			if open := env.openShards(); len(open) > 0 {
				if err := e.SplitShard("items", open[round%len(open)]); err != nil {
					t.Errorf("SplitShard: %v", err)
				}
			}
		case 6:
			fullThrottle.Store(true)
			time.Sleep(env.lease + time.Second)
			fullThrottle.Store(false)
		}
		time.Sleep(500 * time.Millisecond)
	}
	env.setFault(nil)
	env.allArrived(all)
	t.Logf("lease table requests throttled: %d; sink writes failed: %d", throttled.Load(), env.end.failed())

	recs, _ := env.end.recs()
	dups := 0
	for _, ds := range recs {
		dups += len(ds) - 1
	}
	t.Logf("%d expired items, all delivered; %d duplicate deliveries (leases lost under throttling)", len(all), dups)
	env.logLeaseMetrics(ws)
	env.checkExclusiveReads(workers)
	for _, w := range ws {
		w.stop(t)
	}
	// A reader resumed from a checkpoint whose records were trimmed (its
	// worker's lease was lost before the next save) says so.
	env.checkRanges(manifest.FindTrimmed)
}

// logLeaseMetrics logs each worker's lease counters.
func (env *mwEnv) logLeaseMetrics(ws []*mwWorker) {
	for _, w := range ws {
		mfs, err := w.reg.Gather()
		if err != nil {
			env.t.Fatal(err)
		}
		var parts []string
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				v := m.GetCounter().GetValue()
				if g := m.GetGauge(); g != nil {
					v = g.GetValue()
				}
				parts = append(parts, fmt.Sprintf("%s=%v", strings.TrimPrefix(mf.GetName(), "archiver_"), v))
			}
		}
		env.t.Logf("%s: %s", w.name, strings.Join(parts, " "))
	}
}

// TestLeasesSurviveBlockedSink: a sink that blocks (the consumer's
// Process, and with it every reader, waits on it) for several lease
// durations does not stop lease renewal, which runs on its own timer: every
// held lease keeps being renewed, and a lease changes hands only where
// renewals failed (a loaded machine's slow requests), never because the
// consumer was stuck.
func TestLeasesSurviveBlockedSink(t *testing.T) {
	if testing.Short() {
		t.Skip("takes several lease durations")
	}
	env := newMWEnv(t)
	env.lease = 4 * time.Second
	a, b := env.startWorker("worker-a"), env.startWorker("worker-b")
	ws := []*mwWorker{a, b}
	all := env.writeExpired(200)
	env.allArrived(all)
	eventually.Wait(t, 60*time.Second, "the workers share the shards evenly", func() error {
		shards, err := env.settledShards(ws)
		if err != nil {
			return err
		}
		na, nb := len(shards["worker-a"]), len(shards["worker-b"])
		if na+nb < 16 || na-nb > 1 || nb-na > 1 {
			return fmt.Errorf("a %d, b %d", na, nb)
		}
		return nil
	})
	before := map[string]int64{}
	for sh, r := range env.rows() {
		if !finished(r) {
			before[sh] = attrN(r, "lease_counter")
		}
	}
	shards := env.heldShards()
	held := map[string]int{}
	renewed := map[string]float64{}
	failed := map[string]float64{}
	for _, w := range ws {
		held[w.name] = len(shards[w.name])
		renewed[w.name] = metric(t, w.reg, "archiver_lease_renewals_total")
		failed[w.name] = metric(t, w.reg, "archiver_lease_renew_failures_total")
	}
	block := make(chan struct{})
	env.end.block(block)
	all = append(all, env.writeExpired(200)...)
	time.Sleep(5 * env.lease / 2) // the sink is stuck for 2.5 lease durations
	rows := env.rows()
	for _, w := range ws {
		// Renewal every lease/6 over 2.5 leases: about 15 rounds.
		got := metric(t, w.reg, "archiver_lease_renewals_total") - renewed[w.name]
		if got < float64(3*held[w.name]) {
			t.Errorf("%s renewed %v times while its consumer was blocked; want at least 3 per lease (%d leases)", w.name, got, held[w.name])
		}
		failed[w.name] = metric(t, w.reg, "archiver_lease_renew_failures_total") - failed[w.name]
	}
	moved := 0
	for sh, c := range before {
		if got := attrN(rows[sh], "lease_counter"); got != c {
			moved++
			t.Logf("shard %s changed hands while the sink was blocked (counter %d -> %d, owner now %q)", sh, c, got, attrS(rows[sh], "lease_owner"))
		}
	}
	if moved > 0 && failed["worker-a"]+failed["worker-b"] == 0 {
		t.Errorf("%d leases changed hands while the consumers were blocked, with no failed renewal", moved)
	}
	t.Logf("while blocked: %d of %d leases changed hands; renew failures %v", moved, len(before), failed)
	close(block)
	env.allArrived(all)
	env.logLeaseMetrics(ws)
	env.checkExclusiveReads([]string{"worker-a", "worker-b"})
}

// metric reads a counter or a gauge from a registry.
func metric(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			if g := m.GetGauge(); g != nil {
				return g.GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	t.Fatalf("metric %s not registered", name)
	return 0
}
