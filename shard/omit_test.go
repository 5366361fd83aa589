package shard

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/internal/eventually"
)

// describeSpy counts the full (unfiltered) DescribeStream responses and
// those that left one shard out.
type describeSpy struct {
	StreamsAPI
	shard string

	mu       sync.Mutex
	all      int // full descriptions
	without  int // ...that did not list shard
	sinceGap int // full descriptions since the first that did not
}

func (d *describeSpy) DescribeStream(ctx context.Context, in *dynamodbstreams.DescribeStreamInput, f ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error) {
	out, err := d.StreamsAPI.DescribeStream(ctx, in, f...)
	if err != nil || in.ShardFilter != nil || in.ExclusiveStartShardId != nil {
		return out, err
	}
	listed := slices.ContainsFunc(out.StreamDescription.Shards, func(s types.Shard) bool { return aws.ToString(s.ShardId) == d.shard })
	d.mu.Lock()
	defer d.mu.Unlock()
	d.all++
	if d.without > 0 {
		d.sinceGap++
	}
	if !listed {
		d.without++
	}
	return out, err
}

// counts returns the full descriptions, those without the shard, and those
// since the first without it.
func (d *describeSpy) counts() (all, without, sinceGap int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.all, d.without, d.sinceGap
}

// pausing holds one shard's batches until released, then hands every batch
// to the recorder.
type pausing struct {
	*recorder
	shard   string
	gate    chan struct{} // closed: let the shard's batches through
	held    chan struct{} // closed once a batch of the shard waits
	heldOne sync.Once
}

func (p *pausing) Process(ctx context.Context, b Batch) error {
	if b.ShardID == p.shard {
		p.heldOne.Do(func() { close(p.held) })
		select {
		case <-p.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return p.recorder.Process(ctx, b)
}

// lineage is a one-shard stream rolled over once: the closed parent holds
// the "p" items, its open child the "c" items (written by the test).
type lineage struct {
	e             *testEnv
	table, arn    string
	parent, child string
}

// rollOver closes the stream's only shard; it returns the parent and child.
func rollOver(t *testing.T, e *testEnv, table, arn string) (parent, child string) {
	t.Helper()
	open := openShards(t, e.streams, arn)
	if len(open) != 1 {
		t.Fatalf("%d open shards, want 1", len(open))
	}
	if err := e.eng.ForceRollover(table); err != nil {
		t.Fatalf("rollover: %v", err)
	}
	open2 := openShards(t, e.streams, arn)
	if len(open2) != 1 || !slices.Equal(open2[0].Parents, []string{open[0].ID}) {
		t.Fatalf("after the rollover: open %+v, want one child of %s", open2, open[0].ID)
	}
	return open[0].ID, open2[0].ID
}

// observed is a test logger at Info whose Warn and above entries are also
// kept for inspection.
func observed(t *testing.T) (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.WarnLevel)
	base := zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel))
	return zap.New(zapcore.NewTee(base.Core(), core)), logs
}

// TestOmittedParentReadFirst: a closed parent with unread records is left
// out of one stream description, while its reader is held in Process or
// while its lease is withheld. Its child must wait: every record of both is
// read, the parent's before the child's, and the omission is logged.
func TestOmittedParentReadFirst(t *testing.T) {
	for _, mode := range []string{"parent being read", "parent waiting for its lease"} {
		t.Run(mode, func(t *testing.T) {
			e := newEnv(t, engine.Options{StreamShards: 1})
			table := "omit"
			arn := e.createTable(t, table)
			e.put(t, table, "p", 0, 300)
			parent, child := rollOver(t, e, table, arn)
			e.put(t, table, "c", 0, 300)
			shards := describeAll(t, e.streams, arn)

			rec := newRecorder(t)
			p := &pausing{recorder: rec, shard: parent, gate: make(chan struct{}), held: make(chan struct{})}
			spy := &describeSpy{StreamsAPI: e.streams, shard: parent}
			ws := watch(t, spy)
			log, logs := observed(t)
			o := Options{Streams: ws, StreamARNs: []string{arn}, Processor: rec, Positions: rec,
				DiscoveryInterval: 50 * time.Millisecond, GetRecordsLimit: 25, Logger: log}
			g := &grantAll{rec: rec, held: map[string]context.CancelFunc{}, blocked: map[string]bool{parent: true}}
			if mode == "parent being read" {
				o.Processor = p
			} else {
				o.Assigner = g
			}
			startWalker(t, o)
			eventually.True(t, 30*time.Second, "the walker to know the parent", func() bool {
				if mode == "parent being read" {
					select {
					case <-p.held:
						return true
					default:
						return false
					}
				}
				g.mu.Lock()
				defer g.mu.Unlock()
				return g.assigns > 0
			})
			if err := e.eng.OmitShardFromDescribe(table, parent, 1); err != nil {
				t.Fatal(err)
			}
			eventually.True(t, 30*time.Second, "three descriptions after the one without the parent", func() bool {
				_, without, since := spy.counts()
				return without == 1 && since >= 3
			})
			if n := ws.callsOn(child); n != 0 {
				t.Errorf("child read (%d GetRecords) while its parent was unfinished", n)
			}
			close(p.gate)
			g.allow(parent)
			eventually.True(t, 60*time.Second, "600 records", func() bool { return rec.distinct() >= 600 })
			if got, d := rec.distinct(), rec.duplicates(); got != 600 || d != 0 {
				t.Errorf("read %d distinct items with %d duplicates, want 600 and none", got, d)
			}
			rec.check(t, arn, shards)
			rec.mu.Lock()
			ended, endOK := rec.ended[arn+"|"+parent]
			first, firstOK := rec.first[arn+"|"+child]
			rec.mu.Unlock()
			if !endOK || !firstOK || ended > first {
				t.Errorf("parent ended at event %d (%v), child's first batch at %d (%v): want the parent first", ended, endOK, first, firstOK)
			}
			warned := logs.FilterMessageSnippet("omits a known unfinished shard").FilterField(zap.String("shard", parent)).FilterField(zap.Int("missed", 1))
			if warned.Len() == 0 {
				t.Errorf("no WARN naming the omitted shard %s and its one missed description; logged: %v", parent, logs.All())
			}
		})
	}
}

// TestMissingShard: a known, unfinished closed shard (its lease withheld,
// so it is never read) goes missing from the stream's descriptions. While
// its records could still be in the stream its child waits, however many
// descriptions miss it; once it is absent consistently and older than the
// retention, it is gone and the child is read.
func TestMissingShard(t *testing.T) {
	tests := []struct {
		name string
		// seenOpen: the walker last sees the parent open (the rollover
		// comes after the omission starts).
		seenOpen bool
		// retention is Options.StreamRetention (0: the default, 24 h).
		retention time.Duration
		// manual runs the engine and the walker on a manual clock.
		manual bool
		// missing makes the parent missing, once the walker knows it.
		missing func(t *testing.T, l *lineage, clock *engine.ManualClock)
		// gone: the parent is taken for gone, the child read without it;
		// else the child waits until the parent is listed again.
		gone bool
	}{
		{
			name: "omitted, records could remain",
			missing: func(t *testing.T, l *lineage, _ *engine.ManualClock) {
				omit(t, l, 1<<30)
			},
		},
		{
			name: "last seen open, omitted", seenOpen: true,
			missing: func(t *testing.T, l *lineage, _ *engine.ManualClock) {
				omit(t, l, 1<<30)
			},
		},
		{
			name: "omitted past a short retention", retention: 300 * time.Millisecond, gone: true,
			missing: func(t *testing.T, l *lineage, _ *engine.ManualClock) {
				omit(t, l, 1<<30)
			},
		},
		{
			name: "trimmed away by the engine", manual: true, gone: true,
			missing: func(t *testing.T, l *lineage, clock *engine.ManualClock) {
				clock.Advance(25 * time.Hour)
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			eo := engine.Options{StreamShards: 1}
			var clock *engine.ManualClock
			if tc.manual {
				clock = engine.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
				eo.Clock = clock
			}
			e := newEnv(t, eo)
			l := &lineage{e: e, table: "missing"}
			l.arn = e.createTable(t, l.table)
			e.put(t, l.table, "p", 0, 200)
			if !tc.seenOpen {
				l.parent, l.child = rollOver(t, e, l.table, l.arn)
			} else {
				l.parent = openShards(t, e.streams, l.arn)[0].ID
			}
			rec := newRecorder(t)
			spy := &describeSpy{StreamsAPI: e.streams, shard: l.parent}
			ws := watch(t, spy)
			g := &grantAll{rec: rec, held: map[string]context.CancelFunc{}, blocked: map[string]bool{l.parent: true}}
			o := Options{Streams: ws, StreamARNs: []string{l.arn}, Processor: rec, Positions: rec, Assigner: g,
				DiscoveryInterval: 50 * time.Millisecond, StreamRetention: tc.retention}
			if clock != nil {
				o.Now = clock.Now
			}
			startWalker(t, o)
			eventually.True(t, 30*time.Second, "the walker to know the parent", func() bool {
				g.mu.Lock()
				defer g.mu.Unlock()
				return g.assigns > 0
			})
			tc.missing(t, l, clock)
			if tc.seenOpen {
				eventually.True(t, 30*time.Second, "a description without the open parent", func() bool {
					_, without, _ := spy.counts()
					return without > 0
				})
				l.parent, l.child = rollOverKnown(t, e, l.table, l.parent)
			}
			e.put(t, l.table, "c", 0, 200)
			if tc.gone {
				eventually.True(t, 60*time.Second, "the child's 200 records", func() bool { return rec.distinct() >= 200 })
				if n := ws.callsOn(l.parent); n != 0 {
					t.Errorf("the withheld parent was read (%d GetRecords)", n)
				}
				return
			}
			eventually.True(t, 30*time.Second, "ten descriptions after the first without the parent", func() bool {
				_, _, since := spy.counts()
				return since >= 10
			})
			if n := ws.callsOn(l.child); n != 0 {
				t.Fatalf("child read (%d GetRecords) while its parent was missing, not gone", n)
			}
			omit(t, l, 0)
			g.allow(l.parent)
			eventually.True(t, 60*time.Second, "400 records", func() bool { return rec.distinct() >= 400 })
			rec.check(t, l.arn, describeAll(t, e.streams, l.arn))
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if e, f := rec.ended[l.arn+"|"+l.parent], rec.first[l.arn+"|"+l.child]; e > f {
				t.Errorf("child's first batch (event %d) before its parent ended (event %d)", f, e)
			}
		})
	}
}

// omit leaves the lineage's parent out of the next n descriptions (0: none).
func omit(t *testing.T, l *lineage, n int) {
	t.Helper()
	if err := l.e.eng.OmitShardFromDescribe(l.table, l.parent, n); err != nil {
		t.Fatalf("omit %s: %v", l.parent, err)
	}
}

// rollOverKnown closes the open shard id (whose descriptions may omit it)
// and returns it with its child, read from the engine's own view.
func rollOverKnown(t *testing.T, e *testEnv, table, id string) (parent, child string) {
	t.Helper()
	if err := e.eng.ForceRollover(table); err != nil {
		t.Fatalf("rollover: %v", err)
	}
	for _, s := range openShards(t, e.streams, mustARN(t, e, table)) {
		if slices.Equal(s.Parents, []string{id}) {
			return id, s.ID
		}
	}
	t.Fatalf("no child of %s after the rollover", id)
	return "", ""
}

func mustARN(t *testing.T, e *testEnv, table string) string {
	t.Helper()
	arn, err := e.eng.StreamARN(table)
	if err != nil {
		t.Fatalf("stream of %s: %v", table, err)
	}
	return arn
}

// TestRestartWithUnlistedParent: a restart finds a stored position in the
// middle of a closed parent, and the walker's first description leaves
// that parent out. The parent's child has no position: it must wait until
// the parent is listed again and read to its end, so nothing of the
// parent's tail is lost (the child's checkpoint would mark it finished).
func TestRestartWithUnlistedParent(t *testing.T) {
	e := newEnv(t, engine.Options{StreamShards: 1})
	table := "unlisted"
	arn := e.createTable(t, table)
	e.put(t, table, "p", 0, 300)
	parent, child := rollOver(t, e, table, arn)
	e.put(t, table, "c", 0, 300)
	shards := describeAll(t, e.streams, arn)

	rec := newRecorder(t)
	rec.setPositions(arn, map[string]Position{parent: {SequenceNumber: nthSequence(t, e, arn, parent, 100)}})
	if err := e.eng.OmitShardFromDescribe(table, parent, 1); err != nil {
		t.Fatal(err)
	}
	spy := &describeSpy{StreamsAPI: e.streams, shard: parent}
	ws := watch(t, spy)
	stop := startWalker(t, Options{Streams: ws, StreamARNs: []string{arn}, Processor: rec, Positions: rec,
		DiscoveryInterval: 50 * time.Millisecond})
	eventually.True(t, 60*time.Second, "the parent's last 200 records and the child's 300", func() bool { return rec.distinct() >= 500 })
	stop()
	if _, without, _ := spy.counts(); without != 1 {
		t.Errorf("%d of the walker's descriptions left the parent out, want 1", without)
	}
	if got, d := rec.distinct(), rec.duplicates(); got != 500 || d != 0 {
		t.Errorf("read %d distinct items with %d duplicates, want 500 and none", got, d)
	}
	rec.check(t, arn, shards)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if e, f := rec.ended[arn+"|"+parent], rec.first[arn+"|"+child]; e > f {
		t.Errorf("child's first batch (event %d) before its parent ended (event %d)", f, e)
	}
}

// nthSequence returns the sequence number of the shard's n-th record.
func nthSequence(t *testing.T, e *testEnv, arn, shardID string, n int32) string {
	t.Helper()
	ctx := context.Background()
	it, err := e.streams.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(arn), ShardId: aws.String(shardID),
		ShardIteratorType: types.ShardIteratorTypeTrimHorizon})
	if err != nil {
		t.Fatalf("GetShardIterator: %v", err)
	}
	out, err := e.streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it.ShardIterator, Limit: aws.Int32(n)})
	if err != nil || len(out.Records) != int(n) {
		t.Fatalf("GetRecords: %d records, %v; want %d", len(out.Records), err, n)
	}
	return aws.ToString(out.Records[n-1].Dynamodb.SequenceNumber)
}
