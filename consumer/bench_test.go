package consumer

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/sinks"
	"github.com/ttl-archiver/archiver/sinks/sinktest"
)

// BenchmarkProcess measures the consumer's own work per batch: decode,
// classify, split, the entry's admission and its advance (the shard's
// checkpoint saver running beside it, every second), on batches of 100
// records of three kinds. The route takes deletes only, which the batches
// hold none of, so no sink's work is in the figure: every entry is done
// at once and advances in add. "recorder" routes to the recording test
// sink, which records the shard's ranges where the consumer records them.
func BenchmarkProcess(b *testing.B) {
	for _, tc := range []struct {
		name string
		sink func() sinks.Sink
	}{
		{"plain", func() sinks.Sink { return sinktest.New("plain").Plain() }},
		{"recorder", func() sinks.Sink { return sinktest.New("recorder") }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			benchProcess(b, tc.sink())
		})
	}
}

func benchProcess(b *testing.B, sink sinks.Sink) {
	c := newUnitConsumer(b, newMemStore(), func(cfg *Config) { cfg.CheckpointInterval = time.Second },
		Route{Sink: sink, Kinds: []event.Kind{event.Deleted}})
	kinds := make([]event.Kind, 100)
	for i := range kinds {
		kinds[i] = []event.Kind{event.Expired, event.Inserted, event.Modified}[i%3]
	}
	batch := mkBatch("bench", 1, kinds...)
	// One sequence number per batch, rising: the entry's last is what the
	// checkpoint advances to.
	seqs := make([]string, b.N)
	for i := range seqs {
		seqs[i] = fmt.Sprintf("%021d", 1000+i)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range batch.Records {
			batch.Records[j].Dynamodb.SequenceNumber = &seqs[i]
		}
		if err := c.process(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
}
