package consumer

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ttl-archiver/archiver/engine"
	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/eventually"
	"github.com/ttl-archiver/archiver/sinks/sinktest"
)

// gaugeSum is the sum of a gauge's values over all label sets.
func gaugeSum(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetGauge().GetValue()
			}
		}
	}
	return sum
}

// unparseableKeys are Keys the SDK cannot decode, planted in the stream
// with the engine's record injection (the engine keeps images as given).
var unparseableKeys = []struct{ name, keys string }{
	{"number where a string belongs", `{"pk":{"S":1}}`},
	{"B that is not base64", `{"pk":{"B":"!!!"}}`},
	{"two type members", `{"pk":{"S":"a","N":"1"}}`},
}

// plantUnparseable writes 3 items, a record the SDK cannot parse, and 3
// more items to the table's one shard, and returns the planted record's
// sequence number.
func plantUnparseable(t *testing.T, b *bed, table, keys string) string {
	t.Helper()
	b.put(table, "before", 0, 3, past)
	shards := b.openShards(table)
	if len(shards) != 1 {
		t.Fatalf("%d open shards, want 1", len(shards))
	}
	seq, err := b.eng.InjectRecord(table, shards[0], engine.InjectedRecord{EventName: "INSERT", Keys: json.RawMessage(keys), SizeBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	b.put(table, "after", 0, 3, past)
	return seq
}

// TestUnparseableRecordGoesToDeadLetter: a record the SDK cannot parse,
// read over real HTTP from the engine, goes to the dead-letter sink with
// its raw bytes; the records around it reach the sink, and the checkpoint
// passes them all.
func TestUnparseableRecordGoesToDeadLetter(t *testing.T) {
	for _, tc := range unparseableKeys {
		t.Run(tc.name, func(t *testing.T) {
			b := newBed(t, engine.Options{StreamShards: 1})
			const table = "poison"
			b.createTable(table)
			seq := plantUnparseable(t, b, table, tc.keys)
			store := newMemStore()
			sink, dlq := sinktest.New("s"), sinktest.New("dlq")
			cfg := b.config(t, table, store, Route{Sink: sink, Kinds: event.Kinds})
			cfg.DeadLetter = dlq
			r := start(t, cfg)
			eventually.True(t, 2*time.Minute, "6 items and a dead letter", func() bool { return len(sink.Events()) >= 6 && len(dlq.Events()) >= 1 })
			var got []string
			for _, e := range sink.Events() {
				got = append(got, pkOf(e))
			}
			if strings.Join(got, ",") != "before-0,before-1,before-2,after-0,after-1,after-2" {
				t.Errorf("sink got %v", got)
			}
			dead := dlq.Events()
			if len(dead) != 1 {
				t.Fatalf("%d dead letters, want 1", len(dead))
			}
			d := dead[0]
			if d.Kind != event.Undecodable || d.SequenceNumber != seq || d.EventName != "INSERT" || d.DeadLetter.Reason != event.ReasonUndecodable || d.Region != "us-east-1" ||
				!strings.Contains(string(d.DeadLetter.Record), `"Keys":`+tc.keys) || !strings.Contains(d.DeadLetter.Error, "SDK cannot decode") {
				t.Errorf("dead letter %+v %+v\n%s", d, d.DeadLetter, d.DeadLetter.Record)
			}
			if _, err := event.DecodeLine(event.AppendLine(nil, &d)); err != nil {
				t.Errorf("the dead letter does not read back: %v", err)
			}
			last := sink.Events()[5].SequenceNumber
			eventually.True(t, 2*time.Minute, "the checkpoint past every record", func() bool {
				return store.get(b.streamARN(table), b.openShards(table)[0]).SequenceNumber == last
			})
			r.stop(t)
		})
	}
}

// TestUnparseableRecordWithoutDeadLetterIsStuck: without a dead-letter
// sink the shard stops at the record: what precedes it is delivered and
// checkpointed, nothing after it is, and the shard is reported stuck (the
// gauge, the oldest unacknowledged age, an ERROR log).
func TestUnparseableRecordWithoutDeadLetterIsStuck(t *testing.T) {
	for _, tc := range unparseableKeys {
		t.Run(tc.name, func(t *testing.T) {
			b := newBed(t, engine.Options{StreamShards: 1})
			const table = "poison"
			b.createTable(table)
			plantUnparseable(t, b, table, tc.keys)
			store := newMemStore()
			sink := sinktest.New("s")
			cfg := b.config(t, table, store, Route{Sink: sink, Kinds: event.Kinds})
			core, logs := observer.New(zapcore.ErrorLevel)
			reg := prometheus.NewRegistry()
			cfg.Logger, cfg.Registerer = zap.New(core), reg
			cfg.StuckAfter, cfg.StuckLogInterval = time.Millisecond, time.Millisecond
			cfg.CheckpointInterval = 10 * time.Millisecond
			r := start(t, cfg)
			eventually.True(t, 2*time.Minute, "the shard reported stuck", func() bool {
				return gaugeSum(t, reg, "archiver_shards_stuck") == 1 && logs.FilterMessageSnippet("reader keeps failing").Len() > 0
			})
			if age := gaugeSum(t, reg, "archiver_oldest_unacked_age_seconds"); age <= 0 {
				t.Errorf("archiver_oldest_unacked_age_seconds = %v, want the planted record's age", age)
			}
			shardID := b.openShards(table)[0]
			e := logs.FilterMessageSnippet("reader keeps failing").All()[0].ContextMap()
			if e["table"] != table || e["shard"] != shardID || !strings.Contains(fmt.Sprint(e["error"]), "SDK cannot decode") {
				t.Errorf("stuck log %v", e)
			}
			r.stop(t)
			// Re-reads after each failure may deliver the records before it
			// again (duplicates); nothing after it is ever delivered.
			distinct, last := map[string]bool{}, ""
			for _, e := range sink.Events() {
				if !strings.HasPrefix(pkOf(e), "before-") {
					t.Errorf("the sink got %s, which follows the planted record", pkOf(e))
				}
				distinct[pkOf(e)] = true
				if event.CompareSequence(e.SequenceNumber, last) > 0 {
					last = e.SequenceNumber
				}
			}
			if len(distinct) != 3 {
				t.Errorf("the sink got %v, want the 3 records before the planted one", distinct)
			}
			if cp := store.get(b.streamARN(table), shardID); cp.SequenceNumber != last {
				t.Errorf("checkpoint %+v, want %s: the last record before the planted one", cp, last)
			}
		})
	}
}
