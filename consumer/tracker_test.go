package consumer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ttl-archiver/archiver/checkpoint"
	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/event/eventtest"
	"github.com/ttl-archiver/archiver/internal/eventually"
	"github.com/ttl-archiver/archiver/shard"
	"github.com/ttl-archiver/archiver/sinks"
	"github.com/ttl-archiver/archiver/sinks/sinktest"
)

const testARN = "arn:aws:dynamodb:us-east-1:000000000000:table/tbl/stream/2026-01-01T00:00:00.000"

// nopStreams is never called: unit tests drive the Processor directly.
type nopStreams struct{ shard.StreamsAPI }

// newUnitConsumer builds a consumer whose Processor methods tests call
// directly (no walker running), with its lag reporter running (each
// shard runs its own checkpoint saver).
func newUnitConsumer(t testing.TB, store checkpoint.Store, mod func(*Config), routes ...Route) *Consumer {
	t.Helper()
	cfg := Config{
		Options: shard.Options{Streams: nopStreams{}, StreamARNs: []string{testARN}},
		Store:   store, Routes: routes,
		CheckpointInterval: 5 * time.Millisecond, RetryMinBackoff: time.Millisecond, RetryMaxBackoff: 10 * time.Millisecond,
	}
	if mod != nil {
		mod(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.base = ctx
	done := make(chan struct{})
	go func() { defer close(done); c.reportLag(ctx) }()
	t.Cleanup(func() {
		for _, s := range c.snapshot() {
			c.remove(s)
		}
		cancel()
		<-done
	})
	return c
}

var seqCounter = map[string]int{}

// mkBatch builds a batch of records of the given kinds with consecutive
// sequence numbers starting at first.
func mkBatch(shardID string, first int, kinds ...event.Kind) shard.Batch {
	b := shard.Batch{Table: "tbl", StreamARN: testARN, ShardID: shardID}
	for i, k := range kinds {
		seq := fmt.Sprintf("%021d", first+i)
		r := types.Record{
			EventID: aws.String(shardID + "-" + seq),
			Dynamodb: &types.StreamRecord{
				SequenceNumber: aws.String(seq),
				SizeBytes:      aws.Int64(100),
				Keys:           map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: fmt.Sprint(first + i)}},
			},
		}
		switch k {
		case event.Expired:
			r.EventName = types.OperationTypeRemove
			r.UserIdentity = eventtest.TTLService()
		case event.Deleted:
			r.EventName = types.OperationTypeRemove
		case event.Inserted:
			r.EventName = types.OperationTypeInsert
		case event.Modified:
			r.EventName = types.OperationTypeModify
		}
		b.Records = append(b.Records, r)
		b.Bytes += 100
	}
	return b
}

func seqOf(n int) string { return fmt.Sprintf("%021d", n) }

// recCost is what one mkBatch record routed to one sink counts against
// the in-flight budgets: its 100 bytes and the sink's copy of its event
// (sinkCopies: SizeBytes 100 + 1024 + 24 for its one attribute).
const recCost = 100 + 100 + 1024 + 24

// TestTrackerRandom is a property test: random batches on several shards,
// two sinks with different kinds, random failures and out-of-order acks.
// Every save is checked against what the sinks made durable at that moment,
// and at the end every wanted event is durable, in per-shard order.
func TestTrackerRandom(t *testing.T) {
	for round := 0; round < 5; round++ {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(round), 7))
			var rngMu sync.Mutex
			chance := func(p float64) bool { rngMu.Lock(); defer rngMu.Unlock(); return rng.Float64() < p }
			a := sinktest.New("a")
			a.AckLate(2 * time.Millisecond)
			b := sinktest.New("b")
			b.AckLate(2 * time.Millisecond)
			b.FailWith(func(sinks.Batch) error {
				if chance(0.2) {
					return errors.New("injected")
				}
				return nil
			})
			store := newMemStore()
			// wanted[sink][shard/seq] is filled before Process hands a batch on.
			var wantMu sync.Mutex
			wantA, wantB := map[string]bool{}, map[string]bool{}
			store.check = func(arn, sh string, cp checkpoint.Checkpoint) error {
				da, db := durableSet(a.Events()), durableSet(b.Events())
				wantMu.Lock()
				defer wantMu.Unlock()
				for k := range wantA {
					if k[:len(sh)+1] == sh+"/" && event.CompareSequence(k[len(sh)+1:], cp.SequenceNumber) <= 0 && !da[k] {
						return fmt.Errorf("checkpoint %s %s passes %s not durable in a", sh, cp.SequenceNumber, k)
					}
				}
				for k := range wantB {
					if k[:len(sh)+1] == sh+"/" && event.CompareSequence(k[len(sh)+1:], cp.SequenceNumber) <= 0 && !db[k] {
						return fmt.Errorf("checkpoint %s %s passes %s not durable in b", sh, cp.SequenceNumber, k)
					}
				}
				return nil
			}
			c := newUnitConsumer(t, store, func(c *Config) { c.MaxInFlightBytes = 30 * recCost },
				Route{Sink: a}, Route{Sink: b, Kinds: []event.Kind{event.Expired, event.Deleted}})
			ctx := context.Background()
			const shards = 4
			last := make([]int, shards)
			var wg sync.WaitGroup
			for s := 0; s < shards; s++ {
				wg.Add(1)
				go func(s int) {
					defer wg.Done()
					id := fmt.Sprintf("shard-%d", s)
					n := 1
					for i := 0; i < 40; i++ {
						var kinds []event.Kind
						rngMu.Lock()
						size := 1 + rng.IntN(15)
						for j := 0; j < size; j++ {
							kinds = append(kinds, event.Kinds[rng.IntN(4)])
						}
						rngMu.Unlock()
						wantMu.Lock()
						for j, k := range kinds {
							key := id + "/" + seqOf(n+j)
							if k == event.Expired {
								wantA[key] = true
							}
							if k == event.Expired || k == event.Deleted {
								wantB[key] = true
							}
						}
						wantMu.Unlock()
						if err := c.process(ctx, mkBatch(id, n, kinds...)); err != nil {
							t.Error(err)
							return
						}
						n += len(kinds)
					}
					last[s] = n - 1
					if err := c.shardEnded(ctx, testARN, id); err != nil {
						t.Error(err)
					}
				}(s)
			}
			wg.Wait()
			for _, err := range store.problems() {
				t.Error(err)
			}
			for s := 0; s < shards; s++ {
				id := fmt.Sprintf("shard-%d", s)
				cp := store.get(testARN, id)
				if !cp.Finished || cp.SequenceNumber != seqOf(last[s]) {
					t.Errorf("%s checkpoint %+v, want finished at %d", id, cp, last[s])
				}
			}
			for name, pair := range map[string]struct {
				s    *sinktest.Recorder
				want map[string]bool
			}{"a": {a, wantA}, "b": {b, wantB}} {
				got := durableSet(pair.s.Events())
				for k := range pair.want {
					if !got[k] {
						t.Errorf("sink %s never made %s durable", name, k)
					}
				}
				for k := range got {
					if !pair.want[k] {
						t.Errorf("sink %s got unwanted %s", name, k)
					}
				}
				checkLastCopyOrder(t, name, pair.s.Events())
			}
			// Sink a never fails: exactly once.
			if n, want := len(a.Events()), len(wantA); n != want {
				t.Errorf("sink a got %d events, want exactly %d", n, want)
			}
		})
	}
}

// checkLastCopyOrder checks that, per shard, the last durable copy of each
// event comes in stream order.
func checkLastCopyOrder(t *testing.T, name string, evs []event.Event) {
	t.Helper()
	lastPos := map[string]int{}
	for i, e := range evs {
		lastPos[e.ShardID+"/"+e.SequenceNumber] = i
	}
	byShard := map[string][]event.Event{}
	for _, e := range evs {
		byShard[e.ShardID] = append(byShard[e.ShardID], e)
	}
	for sh, list := range byShard {
		seqs := map[string]bool{}
		for _, e := range list {
			seqs[e.SequenceNumber] = true
		}
		ordered := make([]string, 0, len(seqs))
		for s := range seqs {
			ordered = append(ordered, s)
		}
		sort.Slice(ordered, func(i, j int) bool { return event.CompareSequence(ordered[i], ordered[j]) < 0 })
		for i := 1; i < len(ordered); i++ {
			if lastPos[sh+"/"+ordered[i-1]] > lastPos[sh+"/"+ordered[i]] {
				t.Errorf("sink %s shard %s: last copy of %s after last copy of %s", name, sh, ordered[i-1], ordered[i])
				return
			}
		}
	}
}

func TestUnwantedRecordsAdvanceAfterEarlierAcks(t *testing.T) {
	ctx := context.Background()
	a := sinktest.New("a")
	a.Hold()
	store := newMemStore()
	c := newUnitConsumer(t, store, nil, Route{Sink: a})
	if err := c.process(ctx, mkBatch("s", 1, event.Expired, event.Inserted)); err != nil {
		t.Fatal(err)
	}
	if err := c.process(ctx, mkBatch("s", 3, event.Inserted, event.Modified, event.Deleted)); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 2*time.Minute, "batch written", func() bool { return a.Held() == 1 })
	// Give the saver many intervals: nothing may be saved past record 1.
	time.Sleep(50 * time.Millisecond)
	if cp := store.get(testARN, "s"); cp.SequenceNumber != "" {
		t.Fatalf("checkpoint %+v saved before the sink acknowledged", cp)
	}
	a.Release()
	eventually.True(t, 2*time.Minute, "checkpoint at 5", func() bool { return store.get(testARN, "s").SequenceNumber == seqOf(5) })
	// Records no sink wants, with nothing before them pending, advance alone.
	if err := c.process(ctx, mkBatch("s", 6, event.Inserted)); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 2*time.Minute, "checkpoint at 6", func() bool { return store.get(testARN, "s").SequenceNumber == seqOf(6) })
}

// processWaitsForRelease checks that Process of b waits while a holds its
// acknowledgements (why says what should hold it back), and returns once
// they are released.
func processWaitsForRelease(t *testing.T, c *Consumer, b shard.Batch, a *sinktest.Recorder, why string) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- c.process(context.Background(), b) }()
	select {
	case err := <-done:
		t.Fatalf("Process of %s returned (%v) while %s", b.ShardID, err, why)
	case <-time.After(50 * time.Millisecond):
	}
	a.Release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestBackpressure(t *testing.T) {
	ctx := context.Background()
	a := sinktest.New("a")
	a.Hold()
	store := newMemStore()
	c := newUnitConsumer(t, store, func(c *Config) { c.MaxInFlightBytes = 2*recCost + recCost/2 }, Route{Sink: a})
	// Two records: fit.
	if err := c.process(ctx, mkBatch("s", 1, event.Expired, event.Expired)); err != nil {
		t.Fatal(err)
	}
	processWaitsForRelease(t, c, mkBatch("s", 3, event.Expired), a, "the shard's budget was full")
	// A batch bigger than the whole budget is admitted alone.
	if err := c.process(ctx, mkBatch("s", 4, event.Expired, event.Expired, event.Expired, event.Expired)); err != nil {
		t.Fatal(err)
	}
	// A blocked Process honours its context.
	eventually.True(t, 2*time.Minute, "all acknowledged", func() bool { return len(a.Events()) == 7 })
	a.Hold()
	if err := c.process(ctx, mkBatch("s", 8, event.Expired, event.Expired, event.Expired)); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := c.process(cctx, mkBatch("s", 11, event.Expired)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("blocked Process error %v, want deadline exceeded", err)
	}
	a.Release()
}

// TestSharedBudget: every shard's in-flight records count against one
// total; a shard waits while the others hold it, even with its own budget
// empty, and goes on when they are acknowledged.
func TestSharedBudget(t *testing.T) {
	ctx := context.Background()
	a := sinktest.New("a")
	a.Hold()
	store := newMemStore()
	c := newUnitConsumer(t, store, func(c *Config) {
		c.MaxInFlightBytes = 10 * recCost
		c.MaxInFlightBytesTotal = 3*recCost + recCost/2
		c.StarvedFlush = -1
	}, Route{Sink: a})
	for _, sh := range []string{"s1", "s2", "s3"} {
		if err := c.process(ctx, mkBatch(sh, 1, event.Expired)); err != nil {
			t.Fatal(err)
		}
	}
	processWaitsForRelease(t, c, mkBatch("s4", 1, event.Expired), a, "the shared budget was full")
	eventually.True(t, 2*time.Minute, "every batch acknowledged", func() bool { return len(a.Events()) == 4 })
	eventually.True(t, 2*time.Minute, "budget released", func() bool { return c.inflight.Used() == 0 })
}

// TestStarvedFlush: a sink that acknowledges only on Flush (as the S3 sink
// holds events until flush-bytes) would stall a shard whose budget is full
// until the sink's own interval; after StarvedFlush of waiting the
// consumer flushes the sinks and reading goes on.
func TestStarvedFlush(t *testing.T) {
	ctx := context.Background()
	a := sinktest.New("a")
	a.HoldUntilFlush()
	store := newMemStore()
	c := newUnitConsumer(t, store, func(c *Config) {
		c.MaxInFlightBytes = 2*recCost + recCost/2
		c.StarvedFlush = 20 * time.Millisecond
	}, Route{Sink: a})
	for seq := 1; seq <= 9; seq += 2 {
		if err := c.process(ctx, mkBatch("s", seq, event.Expired, event.Expired)); err != nil {
			t.Fatal(err)
		}
	}
	// Each batch after the first was admitted only because a flush had the
	// one before acknowledged; the last one waits for the sink's own
	// interval, which release stands for.
	if got := len(a.Events()); got < 8 {
		t.Fatalf("%d events acknowledged before the last batch, want 8", got)
	}
	flushes := a.Flushes()
	if flushes < 4 {
		t.Fatalf("the sink was flushed %d times, want at least 4", flushes)
	}
	a.Release()
	eventually.True(t, 2*time.Minute, "every batch acknowledged", func() bool { return len(a.Events()) == 10 })
}

func TestFailingSinkHoldsCheckpointAndOnlyThatSinkRetries(t *testing.T) {
	ctx := context.Background()
	good := sinktest.New("good")
	bad := sinktest.New("bad")
	var failing = true
	var mu sync.Mutex
	bad.FailWith(func(sinks.Batch) error {
		mu.Lock()
		defer mu.Unlock()
		if failing {
			return errors.New("destination down")
		}
		return nil
	})
	store := newMemStore()
	c := newUnitConsumer(t, store, nil, Route{Sink: good}, Route{Sink: bad})
	for i := 0; i < 10; i++ {
		if err := c.process(ctx, mkBatch("s", 1+i*3, event.Expired, event.Expired, event.Expired)); err != nil {
			t.Fatal(err)
		}
	}
	eventually.True(t, 2*time.Minute, "good sink has everything", func() bool { return len(good.Events()) == 30 })
	eventually.True(t, 2*time.Minute, "several failed attempts", func() bool { _, f := bad.Writes(); return f >= 5 })
	if cp := store.get(testARN, "s"); cp.SequenceNumber != "" {
		t.Fatalf("checkpoint %+v advanced past batches the bad sink failed", cp)
	}
	mu.Lock()
	failing = false
	mu.Unlock()
	if err := c.shardEnded(ctx, testARN, "s"); err != nil {
		t.Fatal(err)
	}
	if cp := store.get(testARN, "s"); !cp.Finished || cp.SequenceNumber != seqOf(30) {
		t.Fatalf("checkpoint %+v", cp)
	}
	if n := len(good.Events()); n != 30 {
		t.Errorf("good sink got %d events, want exactly 30 (no retries to it)", n)
	}
	if got := durableSet(bad.Events()); len(got) != 30 {
		t.Errorf("bad sink made %d distinct events durable, want 30", len(got))
	}
	checkLastCopyOrder(t, "bad", bad.Events())
}

func TestRefusedWriteIsRetried(t *testing.T) {
	ctx := context.Background()
	a := sinktest.New("a")
	var n int
	var mu sync.Mutex
	a.RefuseWith(func(sinks.Batch) error {
		mu.Lock()
		defer mu.Unlock()
		n++
		if n <= 3 {
			return errors.New("at capacity")
		}
		return nil
	})
	store := newMemStore()
	c := newUnitConsumer(t, store, nil, Route{Sink: a})
	if err := c.process(ctx, mkBatch("s", 1, event.Expired)); err != nil {
		t.Fatal(err)
	}
	if err := c.shardEnded(ctx, testARN, "s"); err != nil {
		t.Fatal(err)
	}
	if got := a.Events(); len(got) != 1 {
		t.Fatalf("got %d events", len(got))
	}
}

func TestLeaseLostStopsShard(t *testing.T) {
	ctx := context.Background()
	a := sinktest.New("a")
	store := newMemStore()
	store.failFn = func(string, string, checkpoint.Checkpoint) error {
		return fmt.Errorf("conditional check failed: %w", checkpoint.ErrLeaseLost)
	}
	c := newUnitConsumer(t, store, nil, Route{Sink: a})
	if err := c.process(ctx, mkBatch("s", 1, event.Expired)); err != nil {
		t.Fatal(err)
	}
	var err error
	eventually.True(t, 2*time.Minute, "Process to fail", func() bool {
		err = c.process(ctx, mkBatch("s", 2, event.Expired))
		return err != nil
	})
	if !errors.Is(err, checkpoint.ErrLeaseLost) {
		t.Fatalf("Process error %v, want ErrLeaseLost", err)
	}
	if err := c.shardStopped(ctx, testARN, "s"); !errors.Is(err, checkpoint.ErrLeaseLost) {
		t.Fatalf("ShardStopped error %v, want ErrLeaseLost", err)
	}
	// A new reader of the shard starts fresh.
	store.mu.Lock()
	store.failFn = nil
	store.mu.Unlock()
	if err := c.process(ctx, mkBatch("s", 3, event.Expired)); err != nil {
		t.Fatal(err)
	}
}

func TestShardStoppedSavesAckedPrefix(t *testing.T) {
	ctx := context.Background()
	a := sinktest.New("a")
	store := newMemStore()
	c := newUnitConsumer(t, store, func(c *Config) { c.CheckpointInterval = time.Hour }, Route{Sink: a})
	if err := c.process(ctx, mkBatch("s", 1, event.Expired, event.Expired)); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 2*time.Minute, "first ack", func() bool { return len(a.Events()) == 2 })
	a.Hold()
	if err := c.process(ctx, mkBatch("s", 3, event.Expired)); err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	if err := c.shardStopped(sctx, testARN, "s"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ShardStopped = %v, want a deadline error", err)
	}
	if cp := store.get(testARN, "s"); cp.SequenceNumber != seqOf(2) || cp.Finished {
		t.Fatalf("checkpoint %+v, want 2 (the acknowledged prefix)", cp)
	}
	a.Release()
}

func TestShardEndedWithoutRecords(t *testing.T) {
	store := newMemStore()
	store.cps[testARN] = map[string]checkpoint.Checkpoint{"s": {SequenceNumber: "77"}}
	c := newUnitConsumer(t, store, nil, Route{Sink: sinktest.New("a")})
	if _, err := (positions{c}).Positions(context.Background(), testARN); err != nil {
		t.Fatal(err)
	}
	if err := c.shardEnded(context.Background(), testARN, "s"); err != nil {
		t.Fatal(err)
	}
	if cp := store.get(testARN, "s"); !cp.Finished || cp.SequenceNumber != "77" {
		t.Fatalf("checkpoint %+v, want finished at 77", cp)
	}
}

func TestNewValidates(t *testing.T) {
	good := Config{Options: shard.Options{Streams: nopStreams{}, StreamARNs: []string{testARN}}, Store: newMemStore(), Routes: []Route{{Sink: sinktest.New("a")}}}
	cases := []struct {
		name string
		mod  func(*Config)
	}{
		{"no streams", func(c *Config) { c.Streams = nil }},
		{"no store", func(c *Config) { c.Store = nil }},
		{"no routes", func(c *Config) { c.Routes = nil }},
		{"nil sink", func(c *Config) { c.Routes = []Route{{}} }},
		{"bad kind", func(c *Config) { c.Routes = []Route{{Sink: sinktest.New("a"), Kinds: []event.Kind{"purged"}}} }},
		{"negative", func(c *Config) { c.MaxInFlightBytes = -1 }},
		{"nothing to read", func(c *Config) { c.StreamARNs = nil }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := good
			tc.mod(&c)
			if _, err := New(c); err == nil {
				t.Fatal("New accepted a bad config")
			}
		})
	}
	if _, err := New(good); err != nil {
		t.Fatal(err)
	}
}

func TestMetrics(t *testing.T) {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	a := sinktest.New("a")
	n := 0
	a.FailWith(func(sinks.Batch) error {
		n++
		if n == 1 {
			return errors.New("once")
		}
		return nil
	})
	store := newMemStore()
	c := newUnitConsumer(t, store, func(c *Config) { c.Registerer = reg }, Route{Sink: a})
	if err := c.process(ctx, mkBatch("s", 1, event.Expired, event.Expired, event.Deleted, event.Inserted)); err != nil {
		t.Fatal(err)
	}
	if err := c.shardEnded(ctx, testARN, "s"); err != nil {
		t.Fatal(err)
	}
	if got := counterSum(t, reg, "archiver_checkpoint_saves_total"); got < 1 {
		t.Errorf("archiver_checkpoint_saves_total = %v, want at least 1", got)
	}
	for name, want := range map[string]float64{
		"archiver_events_total":        4,
		"archiver_sink_writes_total":   1,
		"archiver_sink_events_total":   2, // the expired ones, once each though written twice
		"archiver_sink_failures_total": 1,
	} {
		if got := counterSum(t, reg, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	// A second consumer on the same registry shares the collectors.
	newUnitConsumer(t, newMemStore(), func(c *Config) { c.Registerer = reg }, Route{Sink: sinktest.New("b")})
}

func TestMalformedRecordFailsTheBatch(t *testing.T) {
	ctx := context.Background()
	a := sinktest.New("a")
	store := newMemStore()
	c := newUnitConsumer(t, store, nil, Route{Sink: a})
	b := mkBatch("s", 1, event.Expired, event.Expired, event.Expired)
	b.Records[1].Dynamodb.SequenceNumber = nil
	err := c.process(ctx, b)
	var re *event.RecordError
	if !errors.As(err, &re) || re.Field != "dynamodb.SequenceNumber" || re.Index != 1 {
		t.Fatalf("process error %v, want a event.RecordError on record 1's dynamodb.SequenceNumber", err)
	}
	if err := c.shardStopped(ctx, testARN, "s"); err != nil {
		t.Fatal(err)
	}
	if n := len(a.Events()); n != 0 {
		t.Errorf("%d events of a malformed batch reached the sink", n)
	}
	if cp := store.get(testARN, "s"); cp.SequenceNumber != "" {
		t.Errorf("checkpoint %+v advanced over a malformed batch", cp)
	}
}
