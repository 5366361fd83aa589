package consumer

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/ttl-archiver/archiver/checkpoint"
	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/eventually"
	"github.com/ttl-archiver/archiver/shard"
	"github.com/ttl-archiver/archiver/sinks"
	"github.com/ttl-archiver/archiver/sinks/sinktest"
)

func openStore(t *testing.T, path string) *checkpoint.FileStore {
	t.Helper()
	s, err := checkpoint.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// backlog is a stream of the given shards holding items expired records of
// table, a file checkpoint store and a fake sink that acknowledges after
// up to delay.
func backlog(t *testing.T, shards int, table string, items int, delay time.Duration) (*bed, *checkpoint.FileStore, *sinktest.Recorder) {
	t.Helper()
	b := newBed(t, engine.Options{StreamShards: shards})
	b.createTable(table)
	store := openStore(t, filepath.Join(t.TempDir(), "cp.json"))
	t.Cleanup(func() { store.Close() })
	sink := sinktest.New(table)
	sink.AckLate(delay)
	b.put(table, "x", 0, items, past)
	b.sweep(items)
	return b, store, sink
}

func newFileSink(t *testing.T, dir string) *sinks.FileSink {
	t.Helper()
	s, err := sinks.NewFileSink(dir, sinks.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// countKeys counts events per key of the given kind.
func countKeys(evs []event.Event, kind event.Kind) map[string]int {
	m := map[string]int{}
	for _, e := range evs {
		if e.Kind == kind {
			m[pkOf(e)]++
		}
	}
	return m
}

// TestScenarioEndToEnd is the main scenario: 10,000 items with
// TTLs already past, a stream of 4 shards rolling over every 500 records
// and a forced split in the middle, archived through the file sink; then a
// restart after a clean stop re-delivers nothing.
func TestScenarioEndToEnd(t *testing.T) {
	b := newBed(t, engine.Options{StreamShards: 4, ShardRolloverRecords: 500})
	const table = "sessions"
	b.createTable(table)
	dir := t.TempDir()
	cpPath := filepath.Join(dir, "checkpoints.json")
	store := openStore(t, cpPath)
	archive := filepath.Join(dir, "archive")
	all := sinktest.New("all-kinds")
	cfg := b.config(t, table, store,
		Route{Sink: newFileSink(t, archive)},
		Route{Sink: all, Kinds: event.Kinds})
	r := start(t, cfg)

	// Users' own items: inserted, modified, deleted by the user; and items
	// whose TTL is in the future.
	b.put(table, "user", 0, 100, time.Now().Add(48*time.Hour).Unix())
	b.put(table, "user", 0, 100, time.Now().Add(72*time.Hour).Unix()) // MODIFY
	for i := 0; i < 100; i++ {
		if _, err := b.db.DeleteItem(context.Background(), deleteInput(table, fmt.Sprintf("user-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	b.put(table, "future", 0, 50, time.Now().Add(time.Hour).Unix())

	b.put(table, "exp", 0, 5000, past)
	b.sweep(5000)
	// A forced split in the middle.
	open := b.openShards(table)
	if len(open) == 0 {
		t.Fatal("no open shard to split")
	}
	if err := b.eng.SplitShard(table, open[0]); err != nil {
		t.Fatal(err)
	}
	b.put(table, "exp", 5000, 10000, past)
	b.sweep(5000)

	eventually.True(t, 2*time.Minute, "10,000 expired items archived", func() bool {
		return len(countKeys(all.Events(), event.Expired)) == 10000
	})
	r.stop(t)
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}

	evs := readArchive(t, archive)
	got := countKeys(evs, event.Expired)
	if len(got) != 10000 || len(evs) != 10000 {
		t.Fatalf("archive has %d events for %d keys, want 10,000 expired keys once each", len(evs), len(got))
	}
	for k, n := range got {
		if n != 1 {
			t.Errorf("key %s archived %d times in one run", k, n)
		}
	}
	for _, e := range evs {
		if e.Kind != event.Expired {
			t.Fatalf("file sink got a %s event; by default only expired ones are archived", e.Kind)
		}
		if e.TTLAttribute != "expires" || e.TTLValue != fmt.Sprint(past) || e.TTLLag <= 0 || e.OldImage["payload"] == nil {
			t.Fatalf("expired event lacks its TTL or image: %+v", e)
		}
	}
	// The all-kinds sink: classification and per-key order.
	kinds := map[event.Kind]int{}
	perKey := map[string][]event.Kind{}
	for _, e := range all.Events() {
		kinds[e.Kind]++
		perKey[pkOf(e)] = append(perKey[pkOf(e)], e.Kind)
	}
	if kinds[event.Deleted] != 100 || kinds[event.Modified] != 100 || kinds[event.Inserted] != 100+50+10000 || kinds[event.Expired] != 10000 {
		t.Errorf("kinds seen: %v", kinds)
	}
	for k, seq := range perKey {
		want := []event.Kind{event.Inserted, event.Expired}
		switch {
		case len(k) > 5 && k[:5] == "user-":
			want = []event.Kind{event.Inserted, event.Modified, event.Deleted}
		case len(k) > 7 && k[:7] == "future-":
			want = []event.Kind{event.Inserted}
		}
		if fmt.Sprint(seq) != fmt.Sprint(want) {
			t.Fatalf("key %s: events %v, want %v in that order", k, seq, want)
		}
	}

	// Restart after a clean stop: nothing is delivered again; new expiries
	// are.
	store2 := openStore(t, cpPath)
	defer store2.Close()
	archive2 := filepath.Join(dir, "archive2")
	cfg2 := b.config(t, table, store2, Route{Sink: newFileSink(t, archive2)})
	r2 := start(t, cfg2)
	b.put(table, "late", 0, 20, past)
	b.sweep(20)
	eventually.True(t, 2*time.Minute, "the 20 new expiries", func() bool { return len(readArchive(t, archive2)) >= 20 })
	r2.stop(t)
	evs2 := readArchive(t, archive2)
	if n := len(countKeys(evs2, event.Expired)); n != 20 || len(evs2) != 20 {
		t.Fatalf("after a clean restart the archive got %d events (%d keys), want only the 20 new ones", len(evs2), n)
	}
}

// crashStore loses every Save once crashed, as if the process died after
// the sinks wrote and before the checkpoint did.
type crashStore struct {
	checkpoint.Store
	crashed atomic.Bool
}

func (c *crashStore) Save(ctx context.Context, arn, id string, cp checkpoint.Checkpoint) error {
	if c.crashed.Load() {
		return errors.New("process killed (simulated)")
	}
	return c.Store.Save(ctx, arn, id, cp)
}

// TestScenarioCrashRestart kills the consumer (simulated) between sink
// writes and checkpoints: the restart re-delivers at most the records after
// the checkpoints and loses none.
func TestScenarioCrashRestart(t *testing.T) {
	b := newBed(t, engine.Options{StreamShards: 4, ShardRolloverRecords: 500})
	const table = "crash"
	b.createTable(table)
	dir := t.TempDir()
	cpPath := filepath.Join(dir, "cp.json")
	file := openStore(t, cpPath)
	store := &crashStore{Store: file}
	first := sinktest.New("first")
	var once sync.Once
	written := 0 // OnWrite's calls do not overlap
	first.OnWrite(func(b sinks.Batch) {
		// Crash once half the items reached the sink.
		if written >= 1500 {
			once.Do(func() { store.crashed.Store(true) })
		}
		written += len(b.Events)
	})
	r := start(t, b.config(t, table, store, Route{Sink: first}))
	b.put(table, "exp", 0, 3000, past)
	b.sweep(3000)
	eventually.True(t, 2*time.Minute, "the crash", func() bool { return store.crashed.Load() })
	r.stop(t)
	file.Close()

	// What the checkpoints say survived the crash.
	file2 := openStore(t, cpPath)
	defer file2.Close()
	cps, err := file2.Load(context.Background(), b.streamARN(table))
	if err != nil {
		t.Fatal(err)
	}
	second := sinktest.New("second")
	r2 := start(t, b.config(t, table, file2, Route{Sink: second}))
	firstKeys := countKeys(first.Events(), event.Expired)
	eventually.True(t, 2*time.Minute, "every item delivered by one run or the other", func() bool {
		got := countKeys(second.Events(), event.Expired)
		for k := range firstKeys {
			got[k]++
		}
		return len(got) == 3000
	})
	r2.stop(t)
	redelivered := 0
	for _, e := range second.Events() {
		if firstKeys[pkOf(e)] == 0 {
			continue
		}
		redelivered++
		cp := cps[e.ShardID]
		if cp.Finished || event.CompareSequence(e.SequenceNumber, cp.SequenceNumber) <= 0 {
			t.Errorf("re-delivered %s (shard %s seq %s) at or before its checkpoint %+v", pkOf(e), e.ShardID, e.SequenceNumber, cp)
		}
	}
	t.Logf("crash after %d items: %d re-delivered (the un-checkpointed tail)", len(firstKeys), redelivered)
}

// TestScenarioFaults: each stream fault the walker must survive, with every
// expired item arriving.
func TestScenarioFaults(t *testing.T) {
	cases := []struct {
		name   string
		during func(b *bed, table string)
	}{
		{"expired iterators", func(b *bed, table string) { b.eng.ExpireIterators() }},
		{"throttling", func(b *bed, table string) { b.eng.ThrottleGetRecords(10) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := newBed(t, engine.Options{StreamShards: 2, ShardRolloverRecords: 300})
			const table = "faults"
			b.createTable(table)
			store := openStore(t, filepath.Join(t.TempDir(), "cp.json"))
			defer store.Close()
			sink := sinktest.New("s")
			r := start(t, b.config(t, table, store, Route{Sink: sink}))
			for round := 0; round < 5; round++ {
				b.put(table, fmt.Sprintf("r%d", round), 0, 200, past)
				c.during(b, table)
				b.sweep(200)
				c.during(b, table)
				time.Sleep(20 * time.Millisecond)
			}
			eventually.True(t, 2*time.Minute, "all 1,000 expired items", func() bool { return len(countKeys(sink.Events(), event.Expired)) == 1000 })
			r.stop(t)
			for k, n := range countKeys(sink.Events(), event.Expired) {
				if n != 1 {
					t.Errorf("%s delivered %d times", k, n)
				}
			}
		})
	}
}

// TestScenarioTrimmedData: records trimmed from the stream while the
// consumer was stopped are a gap it logs and counts; it goes on with what
// is still there.
func TestScenarioTrimmedData(t *testing.T) {
	b := newBed(t, engine.Options{StreamShards: 2})
	const table = "trimmed"
	b.createTable(table)
	cpPath := filepath.Join(t.TempDir(), "cp.json")
	store := openStore(t, cpPath)
	sink := sinktest.New("s")
	r := start(t, b.config(t, table, store, Route{Sink: sink}))
	b.put(table, "a", 0, 100, past)
	b.sweep(100)
	eventually.True(t, 2*time.Minute, "batch a", func() bool { return len(countKeys(sink.Events(), event.Expired)) == 100 })
	r.stop(t)
	store.Close()

	b.put(table, "b", 0, 100, past)
	b.sweep(100)
	time.Sleep(20 * time.Millisecond)
	cut := time.Now()
	time.Sleep(20 * time.Millisecond)
	b.put(table, "c", 0, 100, past)
	b.sweep(100)
	if err := b.eng.TrimStream(table, cut); err != nil {
		t.Fatal(err)
	}

	store = openStore(t, cpPath)
	defer store.Close()
	sink2 := sinktest.New("s2")
	reg := prometheus.NewRegistry()
	cfg := b.config(t, table, store, Route{Sink: sink2})
	cfg.Registerer = reg
	r2 := start(t, cfg)
	eventually.True(t, 2*time.Minute, "batch c", func() bool {
		n := 0
		for k := range countKeys(sink2.Events(), event.Expired) {
			if k[0] == 'c' {
				n++
			}
		}
		return n == 100
	})
	r2.stop(t)
	for k := range countKeys(sink2.Events(), event.Expired) {
		if k[0] == 'a' {
			t.Fatalf("%s re-delivered after the trim", k)
		}
	}
	if v := counterSum(t, reg, "archiver_shard_trimmed_gaps_total"); v < 1 {
		t.Errorf("trimmed gaps counted %v, want at least 1", v)
	}
}

func counterSum(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	return counterWhere(t, reg, name, nil)
}

// counterWhere sums the counters of the family name whose labels include
// every pair of labels.
func counterWhere(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if c := m.GetCounter(); c != nil && hasLabels(m.GetLabel(), labels) {
				sum += c.GetValue()
			}
		}
	}
	return sum
}

// hasLabels reports whether pairs holds every name and value of want.
func hasLabels(pairs []*dto.LabelPair, want map[string]string) bool {
	n := 0
	for _, p := range pairs {
		if v, ok := want[p.GetName()]; ok && v == p.GetValue() {
			n++
		}
	}
	return n == len(want)
}

// TestSinkEventsCounted: archiver_sink_events_total counts the events a
// real sink (the file sink) acknowledged, by kind: 20 items inserted and
// expired are 20 of each, however many batches carried them.
func TestSinkEventsCounted(t *testing.T) {
	b := newBed(t, engine.Options{StreamShards: 1})
	const table = "counted"
	b.createTable(table)
	sink := newFileSink(t, t.TempDir())
	cfg := b.config(t, table, newMemStore(), Route{Sink: sink, Kinds: event.Kinds})
	reg := cfg.Registerer.(*prometheus.Registry)
	r := start(t, cfg)
	b.put(table, "x", 0, 20, past)
	b.sweep(20)
	eventually.True(t, time.Minute, "40 events acknowledged", func() bool {
		return counterSum(t, reg, "archiver_sink_events_total") == 40
	})
	r.stop(t)
	for _, kind := range []event.Kind{event.Inserted, event.Expired} {
		got := counterWhere(t, reg, "archiver_sink_events_total", map[string]string{"sink": sink.Name(), "kind": string(kind)})
		if got != 20 {
			t.Errorf("archiver_sink_events_total{kind=%q} = %v, want 20", kind, got)
		}
	}
	if got := counterSum(t, reg, "archiver_sink_events_total"); got != 40 {
		t.Errorf("archiver_sink_events_total = %v after stop, want 40", got)
	}
	if w := counterSum(t, reg, "archiver_sink_writes_total"); w < 1 || w > 40 {
		t.Errorf("archiver_sink_writes_total = %v, want 1 to 40 batches", w)
	}
}

// TestScenarioSinkOutage: a sink failing for a while holds the checkpoint
// back; everything arrives once it recovers.
func TestScenarioSinkOutage(t *testing.T) {
	b := newBed(t, engine.Options{StreamShards: 2, ShardRolloverRecords: 200})
	const table = "outage"
	b.createTable(table)
	store := openStore(t, filepath.Join(t.TempDir(), "cp.json"))
	defer store.Close()
	sink := sinktest.New("flaky")
	var down atomic.Bool
	down.Store(true)
	sink.FailWith(func(sinks.Batch) error {
		if down.Load() {
			return errors.New("destination unavailable")
		}
		return nil
	})
	cfg := b.config(t, table, store, Route{Sink: sink})
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	r := start(t, cfg)
	b.put(table, "x", 0, 500, past)
	b.sweep(500)
	eventually.True(t, 2*time.Minute, "failures", func() bool { return counterSum(t, reg, "archiver_sink_failures_total") >= 5 })
	cps, err := store.Load(context.Background(), b.streamARN(table))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(sink.Events()); n != 0 {
		t.Fatalf("a failing sink made %d events durable", n)
	}
	down.Store(false)
	eventually.True(t, 2*time.Minute, "all 500 after recovery", func() bool { return len(countKeys(sink.Events(), event.Expired)) == 500 })
	r.stop(t)
	if !sink.Closed() {
		t.Error("Run returned without closing its sink")
	}
	// No checkpoint taken during the outage passed an expired record.
	for _, e := range sink.Events() {
		if cp := cps[e.ShardID]; cp.Finished || event.CompareSequence(e.SequenceNumber, cp.SequenceNumber) <= 0 {
			t.Fatalf("shard %s was checkpointed at %+v during the outage, past expired record %s", e.ShardID, cp, e.SequenceNumber)
		}
	}
}

// TestScenario200Shards runs the consumer over 200 shards under -race.
func TestScenario200Shards(t *testing.T) {
	// Written before the consumer starts: 200 readers polling while the
	// engine takes writes slow the writes down a lot under -race.
	const table = "wide"
	b, store, sink := backlog(t, 200, table, 4000, time.Millisecond)
	cfg := b.config(t, table, store, Route{Sink: sink})
	cfg.IdleBackoff = 250 * time.Millisecond
	cfg.DiscoveryInterval = time.Second
	r := start(t, cfg)
	eventually.True(t, 2*time.Minute, "4,000 expired items", func() bool { return len(countKeys(sink.Events(), event.Expired)) == 4000 })
	r.stop(t)
	shards := map[string]bool{}
	for _, e := range sink.Events() {
		shards[e.ShardID] = true
	}
	if len(shards) < 100 {
		t.Errorf("events came from %d shards, want them spread over most of the 200", len(shards))
	}
}

// TestScenarioSharedBudgetManyShards: with many shards behind and a slow
// sink, the records in flight over all shards never exceed the shared
// budget, and every expired item still arrives.
func TestScenarioSharedBudgetManyShards(t *testing.T) {
	b, store, sink := backlog(t, 32, "behind", 6000, 2*time.Millisecond)
	cfg := b.config(t, "behind", store, Route{Sink: sink})
	const total = 256 << 10
	cfg.MaxInFlightBytesTotal = total
	cfg.GetRecordsLimit = 25 // every batch well under the total (records and the sink's copies)
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	peak := 0
	deadline := time.Now().Add(2 * time.Minute)
	for len(countKeys(sink.Events(), event.Expired)) < 6000 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 6000 expired items after 2 min", len(countKeys(sink.Events(), event.Expired)))
		}
		peak = max(peak, int(c.inflight.Used()))
		time.Sleep(200 * time.Microsecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if peak > total {
		t.Fatalf("records in flight peaked at %d bytes (estimated), budget %d", peak, total)
	}
	if peak < total/4 {
		t.Errorf("records in flight peaked at %d bytes: the budget (%d) was never near full, so the test proves nothing", peak, total)
	}
	t.Logf("in flight peaked at %d of %d bytes", peak, total)
}

// withdrawingAssigner grants every ready shard, but withdraws each shard's
// first assignment once the sink got a batch of it, as a lease hand-off
// does mid-stream; later assignments last.
type withdrawingAssigner struct {
	mu        sync.Mutex
	granted   map[string]int
	cancels   map[string]context.CancelFunc
	withdrawn int
}

func (a *withdrawingAssigner) Assign(ctx context.Context, arn string, ready []shard.Shard) ([]shard.Assignment, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []shard.Assignment
	for _, s := range ready {
		a.granted[s.ID]++
		actx := context.WithoutCancel(ctx)
		if a.granted[s.ID] == 1 {
			actx, a.cancels[s.ID] = context.WithCancel(actx)
		}
		out = append(out, shard.Assignment{ShardID: s.ID, Ctx: actx})
	}
	return out, nil
}

// withdraw ends the shard's first assignment, once.
func (a *withdrawingAssigner) withdraw(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if c := a.cancels[id]; c != nil {
		a.withdrawn++
		c()
		a.cancels[id] = nil
	}
}

func (a *withdrawingAssigner) Release(ctx context.Context, arn, id string, finished bool) error {
	return nil
}

// TestScenarioHandOff: shards withdrawn mid-stream (a graceful lease
// hand-off) are checkpointed by ShardStopped before their release, so the
// next reader of each resumes exactly where the last one stopped.
func TestScenarioHandOff(t *testing.T) {
	b := newBed(t, engine.Options{StreamShards: 4})
	const table = "handoff"
	b.createTable(table)
	b.put(table, "h", 0, 3000, past)
	b.sweep(3000)
	store := openStore(t, filepath.Join(t.TempDir(), "cp.json"))
	defer store.Close()
	sink := sinktest.New("s")
	sink.AckLate(2 * time.Millisecond)
	as := &withdrawingAssigner{granted: map[string]int{}, cancels: map[string]context.CancelFunc{}}
	sink.OnWrite(func(b sinks.Batch) { as.withdraw(b.ShardID) })
	cfg := b.config(t, table, store, Route{Sink: sink})
	cfg.Assigner = as
	cfg.GetRecordsLimit = 100 // many batches per shard: the withdrawal comes mid-shard
	r := start(t, cfg)
	eventually.True(t, 2*time.Minute, "all 3,000 expired items", func() bool { return len(countKeys(sink.Events(), event.Expired)) == 3000 })
	r.stop(t)
	as.mu.Lock()
	withdrawn := as.withdrawn
	as.mu.Unlock()
	if withdrawn < 4 {
		t.Fatalf("%d assignments withdrawn, want one per shard (4)", withdrawn)
	}
	dups := 0
	for _, n := range countKeys(sink.Events(), event.Expired) {
		dups += n - 1
	}
	if dups != 0 {
		t.Errorf("%d items delivered twice across graceful hand-offs, want none", dups)
	}
}
