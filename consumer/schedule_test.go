package consumer

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ttl-archiver/archiver/checkpoint"
	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/internal/eventually"
	"github.com/ttl-archiver/archiver/sinks/sinktest"
)

// TestCheckpointLeadingEdge shows the save schedule: with an hour-long
// interval, the first acknowledged batch is saved at once (a process killed
// soon after starting re-delivers little), a second advance within the
// interval is held back, and stopping the shard saves it.
func TestCheckpointLeadingEdge(t *testing.T) {
	ctx := context.Background()
	a := sinktest.New("a")
	store := newMemStore()
	c := newUnitConsumer(t, store, func(c *Config) { c.CheckpointInterval = time.Hour }, Route{Sink: a})
	if err := c.process(ctx, mkBatch("s", 1, event.Expired, event.Expired)); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 2*time.Minute, "the first batch saved without waiting for the interval", func() bool {
		return store.get(testARN, "s").SequenceNumber == seqOf(2)
	})

	if err := c.process(ctx, mkBatch("s", 3, event.Expired)); err != nil {
		t.Fatal(err)
	}
	s := c.lookup(testARN, "s")
	eventually.True(t, 2*time.Minute, "the second batch acknowledged", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.acked == seqOf(3)
	})
	if cp := store.get(testARN, "s"); cp.SequenceNumber != seqOf(2) {
		t.Fatalf("checkpoint %+v within the interval, want 2 (the advance to 3 waits for the interval's end)", cp)
	}

	if err := c.shardStopped(ctx, testARN, "s"); err != nil {
		t.Fatal(err)
	}
	if cp := store.get(testARN, "s"); cp.SequenceNumber != seqOf(3) || cp.Finished {
		t.Fatalf("checkpoint %+v after stop, want 3", cp)
	}
	store.mu.Lock()
	saves := append([]string(nil), store.saves...)
	store.mu.Unlock()
	want := []string{"s=" + seqOf(2) + "/false", "s=" + seqOf(3) + "/false"}
	if len(saves) != len(want) || saves[0] != want[0] || saves[1] != want[1] {
		t.Fatalf("saves %v, want %v", saves, want)
	}
	if p := store.problems(); len(p) > 0 {
		t.Fatal(p)
	}
}

// TestCheckpointSaveRetried shows that a failed save (not a lost lease) is
// retried without a further advance, and the shard keeps going.
func TestCheckpointSaveRetried(t *testing.T) {
	ctx := context.Background()
	a := sinktest.New("a")
	store := newMemStore()
	failures := 0
	store.failFn = func(string, string, checkpoint.Checkpoint) error {
		if failures < 2 {
			failures++
			return errors.New("injected: store unavailable")
		}
		return nil
	}
	c := newUnitConsumer(t, store, nil, Route{Sink: a})
	if err := c.process(ctx, mkBatch("s", 1, event.Expired)); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 2*time.Minute, "the checkpoint saved after two failed attempts", func() bool {
		return store.get(testARN, "s").SequenceNumber == seqOf(1)
	})
	if err := c.process(ctx, mkBatch("s", 2, event.Expired)); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 2*time.Minute, "the next advance saved", func() bool {
		return store.get(testARN, "s").SequenceNumber == seqOf(2)
	})
	if p := store.problems(); len(p) > 0 {
		t.Fatal(p)
	}
}
