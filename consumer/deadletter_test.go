package consumer

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/eventually"
	"github.com/ttl-archiver/archiver/sinks"
	"github.com/ttl-archiver/archiver/sinks/sinktest"
)

// pkIs reports whether the batch holds the event whose key pk is v.
func pkIs(e event.Event, v string) bool { return pkOf(e) == v }

// TestDeadLetterRoutes runs ten batches of three expiries through a good
// sink and a bad one that fails some of them in the way each case says,
// with a dead-letter sink. Whatever the bad sink never takes must be in the
// dead-letter sink, annotated; the good sink gets everything once; the
// checkpoint reaches the end.
func TestDeadLetterRoutes(t *testing.T) {
	tests := []struct {
		name     string
		retryFor time.Duration
		// fail is the bad sink's answer to a batch.
		fail       func(b sinks.Batch) error
		wantDead   []string // pks in the dead-letter sink
		wantReason string
		// badDurable is how many events the bad sink holds (0: all
		// but the dead ones).
		badDurable int
	}{
		{"permanent batch", 0, func(b sinks.Batch) error {
			if pkIs(b.Events[0], "4") {
				return sinks.Permanent(errors.New("no such bucket"))
			}
			return nil
		}, []string{"4", "5", "6"}, event.ReasonPermanent, 0},
		{"rejected events", 0, func(b sinks.Batch) error {
			if pkIs(b.Events[0], "7") {
				return &sinks.RejectedError{Indexes: []int{1}, Err: errors.New("maximum payload exceeded")}
			}
			return nil
		}, []string{"8"}, event.ReasonPermanent, 0},
		{"rejected indexes out of range count as the whole batch", 0, func(b sinks.Batch) error {
			if pkIs(b.Events[0], "7") {
				return &sinks.RejectedError{Indexes: []int{5}, Err: errors.New("confused sink")}
			}
			return nil
		}, []string{"7", "8", "9"}, event.ReasonPermanent, 30}, // the fake takes the index at its word
		{"retry for", 30 * time.Millisecond, func(b sinks.Batch) error {
			if pkIs(b.Events[0], "10") {
				return errors.New("timeout")
			}
			return nil
		}, []string{"10", "11", "12"}, event.ReasonRetryFor, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			good, bad, dlq := sinktest.New("good"), sinktest.New("bad"), sinktest.New("dlq")
			bad.FailWith(tc.fail)
			store := newMemStore()
			c := newUnitConsumer(t, store, func(c *Config) { c.DeadLetter, c.RetryFor = dlq, tc.retryFor },
				Route{Sink: good}, Route{Sink: bad})
			for i := 0; i < 10; i++ {
				if err := c.process(ctx, mkBatch("s", 1+i*3, event.Expired, event.Expired, event.Expired)); err != nil {
					t.Fatal(err)
				}
			}
			if err := c.shardEnded(ctx, testARN, "s"); err != nil {
				t.Fatal(err)
			}
			if cp := store.get(testARN, "s"); !cp.Finished || cp.SequenceNumber != seqOf(30) {
				t.Fatalf("checkpoint %+v, want finished at %s", cp, seqOf(30))
			}
			var dead []string
			for _, e := range dlq.Events() {
				dead = append(dead, pkOf(e))
				d := e.DeadLetter
				if d == nil || d.Sink != "bad" || d.Reason != tc.wantReason || d.Attempts < 1 || d.FirstFailure.IsZero() || d.Error == "" {
					t.Errorf("dead letter of %s: %+v", pkOf(e), d)
				}
			}
			if strings.Join(dead, ",") != strings.Join(tc.wantDead, ",") {
				t.Errorf("dead-letter sink holds %v, want %v", dead, tc.wantDead)
			}
			if n := len(good.Events()); n != 30 {
				t.Errorf("good sink got %d events, want 30", n)
			}
			want := tc.badDurable
			if want == 0 {
				want = 30 - len(tc.wantDead)
			}
			if got := len(durableSet(bad.Events())); got != want {
				t.Errorf("bad sink made %d events durable, want %d", got, want)
			}
			checkLastCopyOrder(t, "bad", bad.Events())
		})
	}
}

// TestDeadLetterAckGatesCheckpoint: records a sink failed for good pass the
// checkpoint only once the dead-letter sink acknowledged them, and a
// failing dead-letter sink is retried until it does.
func TestDeadLetterAckGatesCheckpoint(t *testing.T) {
	ctx := context.Background()
	bad, dlq := sinktest.New("bad"), sinktest.New("dlq")
	bad.FailWith(func(sinks.Batch) error { return sinks.Permanent(errors.New("access denied")) })
	var dlqFails atomic.Int32
	dlq.FailWith(func(sinks.Batch) error {
		if dlqFails.Add(1) <= 3 {
			return errors.New("dead-letter destination down")
		}
		return nil
	})
	dlq.Hold()
	store := newMemStore()
	c := newUnitConsumer(t, store, func(c *Config) { c.DeadLetter = dlq }, Route{Sink: bad})
	if err := c.process(ctx, mkBatch("s", 1, event.Expired, event.Expired)); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 2*time.Minute, "the dead-letter sink is written", func() bool { w, _ := dlq.Writes(); return w > 0 })
	time.Sleep(20 * time.Millisecond) // several checkpoint intervals
	if cp := store.get(testARN, "s"); cp.SequenceNumber != "" {
		t.Fatalf("checkpoint %+v passed records the dead-letter sink has not acknowledged", cp)
	}
	dlq.Release()
	eventually.True(t, 2*time.Minute, "the checkpoint passes the dead letters", func() bool { return store.get(testARN, "s").SequenceNumber == seqOf(2) })
	if n := len(durableSet(dlq.Events())); n != 2 {
		t.Fatalf("dead-letter sink holds %d events, want 2", n)
	}
	if dlqFails.Load() < 4 {
		t.Fatalf("dead-letter sink was written %d times, want its failures retried", dlqFails.Load())
	}
}

// TestUndecodableRecordsGoToDeadLetter: records the consumer cannot decode
// go to the dead-letter sink at once, with the raw record, and the shard
// goes on.
func TestUndecodableRecordsGoToDeadLetter(t *testing.T) {
	ctx := context.Background()
	a, dlq := sinktest.New("a"), sinktest.New("dlq")
	store := newMemStore()
	reg := prometheus.NewRegistry()
	c := newUnitConsumer(t, store, func(c *Config) { c.DeadLetter, c.Registerer = dlq, reg }, Route{Sink: a})
	b := mkBatch("s", 1, event.Expired, event.Expired, event.Expired, event.Expired)
	b.Records[1].Dynamodb.SequenceNumber = nil
	b.Records[3].EventName = "PUT"
	if err := c.process(ctx, b); err != nil {
		t.Fatalf("process: %v (an undecodable record must not stop the shard)", err)
	}
	if err := c.process(ctx, mkBatch("s", 5, event.Expired)); err != nil {
		t.Fatal(err)
	}
	if err := c.shardEnded(ctx, testARN, "s"); err != nil {
		t.Fatal(err)
	}
	if cp := store.get(testARN, "s"); cp.SequenceNumber != seqOf(5) {
		t.Fatalf("checkpoint %+v", cp)
	}
	var got []string
	for _, e := range a.Events() {
		got = append(got, pkOf(e))
	}
	if strings.Join(got, ",") != "1,3,5" {
		t.Errorf("sink got %v, want 1,3,5", got)
	}
	dead := dlq.Events()
	if len(dead) != 2 {
		t.Fatalf("dead-letter sink holds %d events, want 2", len(dead))
	}
	for i, want := range []struct{ pk, field, seq, record string }{
		{"2", "dynamodb.SequenceNumber", "", `"Keys":{"pk":{"S":"2"}}`},
		{"4", "eventName", seqOf(4), `"eventName":"PUT"`},
	} {
		e := dead[i]
		if e.Kind != event.Undecodable || pkOf(e) != want.pk || e.SequenceNumber != want.seq || e.DeadLetter == nil ||
			e.DeadLetter.Reason != event.ReasonUndecodable || !strings.Contains(e.DeadLetter.Error, want.field) ||
			!strings.Contains(string(e.DeadLetter.Record), want.record) {
			t.Errorf("dead letter %d: %+v %+v", i, e, e.DeadLetter)
		}
		line := event.AppendLine(nil, &e)
		if _, err := event.DecodeLine(line); err != nil {
			t.Errorf("dead letter %d does not read back: %v\n%s", i, err, line)
		}
	}
	if v := metricValue(c.m.deadLettered.WithLabelValues("tbl", "decode", event.ReasonUndecodable)); v != 2 {
		t.Errorf("archiver_dead_lettered_records_total{reason=undecodable} = %v, want 2", v)
	}
}

// TestStuckShardIsNeverSilent: without a dead-letter sink a failing batch
// is retried without end, and the consumer says so: the oldest unacked
// age, the stuck-shard gauge and an ERROR log naming the shard, the sink,
// the first event ID and the time left before the trim; and, once records
// are within the trim warning, a log and gauge of their own.
func TestStuckShardIsNeverSilent(t *testing.T) {
	ctx := context.Background()
	bad := sinktest.New("s3://bucket/x")
	var mu sync.Mutex
	failing := true
	bad.FailWith(func(sinks.Batch) error {
		mu.Lock()
		defer mu.Unlock()
		if failing {
			return sinks.Permanent(errors.New("NoSuchBucket"))
		}
		return nil
	})
	core, logs := observer.New(zapcore.ErrorLevel)
	store := newMemStore()
	c := newUnitConsumer(t, store, func(c *Config) {
		c.Logger = zap.New(core)
		c.StuckAfter, c.StuckLogInterval = 20*time.Millisecond, 20*time.Millisecond
		c.StreamRetention, c.TrimWarning = time.Hour, time.Hour // every unacked record is "near the trim"
	}, Route{Sink: bad})
	b := mkBatch("s", 1, event.Expired, event.Expired)
	created := time.Now().Add(-10 * time.Minute)
	for i := range b.Records {
		b.Records[i].Dynamodb.ApproximateCreationDateTime = &created
	}
	if err := c.process(ctx, b); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 2*time.Minute, "stuck and near-trim logs", func() bool {
		return logs.FilterMessageSnippet("shard stuck").Len() >= 2 && logs.FilterMessageSnippet("near the stream's trim").Len() >= 1
	})
	e := logs.FilterMessageSnippet("shard stuck").All()[0].ContextMap()
	if e["shard"] != "s" || e["sink"] != "s3://bucket/x" || e["first_event_id"] != "s-"+seqOf(1) {
		t.Errorf("stuck log fields: %v", e)
	}
	if left, ok := e["time_left_before_trim"].(time.Duration); !ok || left > 51*time.Minute || left < 40*time.Minute {
		t.Errorf("time_left_before_trim = %v, want about 50m", e["time_left_before_trim"])
	}
	if v := metricValue(c.m.shardsStuck.WithLabelValues("tbl")); v != 1 {
		t.Errorf("archiver_shards_stuck = %v, want 1", v)
	}
	if v := metricValue(c.m.nearTrim.WithLabelValues("tbl")); v != 1 {
		t.Errorf("archiver_records_near_trim = %v, want 1", v)
	}
	if v := metricValue(c.m.oldestUnacked.WithLabelValues("tbl", "s")); v < 600 {
		t.Errorf("archiver_oldest_unacked_age_seconds = %v, want at least 600", v)
	}
	if cp := store.get(testARN, "s"); cp.SequenceNumber != "" {
		t.Fatalf("checkpoint %+v passed a failing batch", cp)
	}
	mu.Lock()
	failing = false
	mu.Unlock()
	eventually.True(t, 2*time.Minute, "recovery", func() bool { return store.get(testARN, "s").SequenceNumber == seqOf(2) })
	eventually.True(t, 2*time.Minute, "gauges cleared", func() bool {
		return metricValue(c.m.shardsStuck.WithLabelValues("tbl")) == 0 && metricValue(c.m.nearTrim.WithLabelValues("tbl")) == 0
	})
}

// metricValue reads a gauge's or counter's current value.
func metricValue(m prometheus.Metric) float64 {
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		return -1
	}
	if g := d.GetGauge(); g != nil {
		return g.GetValue()
	}
	return d.GetCounter().GetValue()
}
