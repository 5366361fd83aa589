package shard

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/internal/eventually"
)

// covered is the tests' recorder as a Coverage processor: per shard, it
// logs what the walker tells it, in order: "started", "skipped REASON",
// "batch KEY" (the item key of the batch's first record) and "ended". Its
// gate, when set, holds the first batch of a shard until it is closed.
type covered struct {
	*recorder
	cmu      sync.Mutex
	logs     map[string][]string
	shards   map[string]Shard
	gate     chan struct{}
	gateOn   string // the table whose first batch waits for gate
	gateUsed bool
}

func newCovered(t testing.TB) *covered {
	return &covered{recorder: newRecorder(t), logs: map[string][]string{}, shards: map[string]Shard{}}
}

func (c *covered) note(id, what string) {
	c.cmu.Lock()
	defer c.cmu.Unlock()
	c.logs[id] = append(c.logs[id], what)
}

func (c *covered) ShardStarted(table, arn string, s Shard) {
	c.cmu.Lock()
	c.shards[s.ID] = s
	c.cmu.Unlock()
	c.note(s.ID, "started")
}

func (c *covered) Skipped(ctx context.Context, arn, id string, why Skip) error {
	c.note(id, "skipped "+why.String())
	return nil
}

func (c *covered) Process(ctx context.Context, b Batch) error {
	c.cmu.Lock()
	wait := c.gate != nil && !c.gateUsed && b.Table == c.gateOn
	c.gateUsed = c.gateUsed || wait
	gate := c.gate
	c.cmu.Unlock()
	c.note(b.ShardID, "batch "+itemKey(b.Records[0]))
	if wait {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return c.recorder.Process(ctx, b)
}

func (c *covered) ShardEnded(ctx context.Context, arn, id string) error {
	c.note(id, "ended")
	return c.recorder.ShardEnded(ctx, arn, id)
}

// log returns the shard's log with runs of batches folded into their
// first: "batch KEY" for the first of a run.
func (c *covered) log(id string) []string {
	c.cmu.Lock()
	defer c.cmu.Unlock()
	var out []string
	for _, l := range c.logs[id] {
		if strings.HasPrefix(l, "batch ") && len(out) > 0 && strings.HasPrefix(out[len(out)-1], "batch ") {
			continue
		}
		out = append(out, l)
	}
	return out
}

func (c *covered) ended(id string) bool {
	c.cmu.Lock()
	defer c.cmu.Unlock()
	l := c.logs[id]
	return len(l) > 0 && l[len(l)-1] == "ended"
}

func wantLog(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s: the walker told %q, want %q", what, got, want)
	}
}

// TestTrimmedStartFoundByAsking: a shard first read from TRIM_HORIZON is
// asked for an iterator AT its StartingSequenceNumber once its first
// records are read (or it ends): the engine refuses it when records at its
// start were trimmed (TrimStream before the walker starts), and the
// Coverage processor hears Skipped(trimmed) before the shard's first batch
// or its end; a shard nothing was trimmed of gets no notice. The extra
// calls are counted by result.
func TestTrimmedStartFoundByAsking(t *testing.T) {
	e := newEnv(t, engine.Options{StreamShards: 1, ShardRolloverRecords: 20})
	arns := map[string]string{}
	for _, table := range []string{"whole", "part", "gone"} {
		arns[table] = e.createTable(t, table)
	}
	e.put(t, "whole", "w", 0, 10) // an open shard, nothing trimmed
	e.put(t, "part", "old", 0, 10)
	e.put(t, "gone", "old", 0, 20) // the shard closes at its 20th record
	for _, table := range []string{"part", "gone"} {
		if err := e.eng.TrimStream(table, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	e.put(t, "part", "new", 0, 5)
	shardOf := func(table string) []Shard { return describeAll(t, e.streams, arns[table]) }
	gone := shardOf("gone")
	if len(gone) != 2 || gone[0].Closed() == gone[1].Closed() {
		t.Fatalf("gone's shards: %+v, want a closed one and its open child", gone)
	}
	closed := gone[0]
	if !closed.Closed() {
		closed = gone[1]
	}

	c := newCovered(t)
	reg := prometheus.NewRegistry()
	startWalker(t, Options{Streams: e.streams, StreamARNs: []string{arns["whole"], arns["part"], arns["gone"]},
		Processor: c, Positions: c, Registerer: reg})
	eventually.True(t, 60*time.Second, "15 records and the trimmed shard's end", func() bool {
		return c.distinct() >= 15 && c.ended(closed.ID)
	})
	wantLog(t, "whole", c.log(shardOf("whole")[0].ID), "started", "batch w00000/INSERT")
	wantLog(t, "part", c.log(shardOf("part")[0].ID), "started", "skipped trimmed", "batch new00000/INSERT")
	wantLog(t, "gone's closed shard", c.log(closed.ID), "started", "skipped trimmed", "ended")
	c.cmu.Lock()
	if got := c.shards[closed.ID]; got.StartingSequence != closed.StartingSequence {
		t.Errorf("ShardStarted told %+v, want the shard as described (%+v)", got, closed)
	}
	c.cmu.Unlock()
	for result, want := range map[string]float64{"trimmed": 2, "whole": 1, "failed": 0} {
		if got := metricWith(t, reg, "archiver_shard_trim_probes_total", "result", result); got != want {
			t.Errorf("archiver_shard_trim_probes_total{result=%q} = %v, want %v", result, got, want)
		}
	}
}

// TestTrimmedWhileReading: records trimmed after a reader's position, and
// a stored position already trimmed, are each told as Skipped(trimmed)
// right before the first batch after them; a reader resumed from a stored
// position asks nothing.
func TestTrimmedWhileReading(t *testing.T) {
	e := newEnv(t, engine.Options{StreamShards: 1})
	arn := e.createTable(t, "mid")
	e.put(t, "mid", "a", 0, 10)
	c := newCovered(t)
	c.gate, c.gateOn = make(chan struct{}), "mid"
	reg := prometheus.NewRegistry()
	o := Options{Streams: e.streams, StreamARNs: []string{arn}, Processor: c, Positions: c, Registerer: reg}
	stop := startWalker(t, o)
	id := describeAll(t, e.streams, arn)[0].ID
	eventually.True(t, 30*time.Second, "the first batch waits at the gate", func() bool { return len(c.log(id)) >= 2 })
	// The reader's next position is after a0..a9: what comes next is
	// trimmed before it reads it.
	e.put(t, "mid", "lost", 0, 10)
	if err := e.eng.TrimStream("mid", time.Now()); err != nil {
		t.Fatal(err)
	}
	e.put(t, "mid", "b", 0, 10)
	close(c.gate)
	eventually.True(t, 30*time.Second, "20 records", func() bool { return c.distinct() >= 20 })
	wantLog(t, "trimmed under a reader", c.log(id), "started", "batch a00000/INSERT", "skipped trimmed", "batch b00000/INSERT")
	stop()

	// The stored position (b9) is trimmed before the next walker starts.
	e.put(t, "mid", "lost2", 0, 10)
	if err := e.eng.TrimStream("mid", time.Now()); err != nil {
		t.Fatal(err)
	}
	e.put(t, "mid", "c", 0, 10)
	c.cmu.Lock()
	c.logs = map[string][]string{}
	c.cmu.Unlock()
	startWalker(t, o)
	eventually.True(t, 30*time.Second, "30 records", func() bool { return c.distinct() >= 30 })
	wantLog(t, "stored position trimmed", c.log(id), "started", "skipped trimmed", "batch c00000/INSERT")
	if n := metricSum(t, reg, "archiver_shard_trim_probes_total"); n != 1 {
		t.Errorf("%v trim probes, want 1 (the first reader's start only)", n)
	}
}

// TestLatestStartSkips: a reader started at LATEST tells Skipped(latest)
// before its first batch, and asks nothing.
func TestLatestStartSkips(t *testing.T) {
	e := newEnv(t, engine.Options{StreamShards: 1})
	arn := e.createTable(t, "late")
	e.put(t, "late", "old", 0, 10)
	c := newCovered(t)
	ws := watch(t, e.streams)
	reg := prometheus.NewRegistry()
	startWalker(t, Options{Streams: ws, StreamARNs: []string{arn}, Start: Latest, Processor: c, Positions: c, Registerer: reg})
	id := describeAll(t, e.streams, arn)[0].ID
	eventually.True(t, 30*time.Second, "a reader on the shard", func() bool { return ws.callsOn(id) > 0 })
	e.put(t, "late", "new", 0, 10)
	eventually.True(t, 30*time.Second, "10 records", func() bool { return c.distinct() >= 10 })
	wantLog(t, "LATEST start", c.log(id), "started", "skipped latest", "batch new00000/INSERT")
	if n := metricSum(t, reg, "archiver_shard_trim_probes_total"); n != 0 {
		t.Errorf("%v trim probes of a LATEST start, want 0", n)
	}
}

// metricWith returns a counter's value for the label set with label=value
// (the sum over the rest).
func metricWith(t testing.TB, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}
