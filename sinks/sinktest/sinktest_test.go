package sinktest

import (
	"context"
	"errors"
	"testing"

	"github.com/ttl-archiver/archiver/event"
	"github.com/ttl-archiver/archiver/sinks"
)

func batch(seqs ...string) sinks.Batch {
	b := sinks.Batch{ShardID: "s1"}
	for _, s := range seqs {
		b.Events = append(b.Events, event.Event{ShardID: "s1", SequenceNumber: s})
	}
	return b
}

func seqs(evs []event.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.SequenceNumber)
	}
	return out
}

// TestRecorder: what the recorder keeps and acknowledges when it is told
// to fail, hold or gate its writes.
func TestRecorder(t *testing.T) {
	errDown := errors.New("down")
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name      string
		setup     func(r *Recorder)
		ctx       context.Context
		wantWrite error    // Write's return
		wantAck   []error  // acknowledgements seen right after Write
		wantSeqs  []string // Events afterwards
		wantFails int
	}{
		{name: "records", wantAck: []error{nil}, wantSeqs: []string{"1", "2"}},
		{name: "fails", setup: func(r *Recorder) { r.FailWith(func(sinks.Batch) error { return errDown }) },
			wantAck: []error{errDown}, wantFails: 1},
		{name: "holds", setup: func(r *Recorder) { r.Hold() }},
		{name: "closed", setup: func(r *Recorder) { r.Close(context.Background()) }, wantWrite: ErrClosed},
		{name: "gate and a canceled context", setup: func(r *Recorder) { r.Gate(make(chan struct{})) },
			ctx: canceled, wantWrite: context.Canceled},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := New("rec")
			if c.setup != nil {
				c.setup(r)
			}
			ctx := c.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			var acks []error
			err := r.Write(ctx, batch("1", "2"), func(err error) { acks = append(acks, err) })
			if !errors.Is(err, c.wantWrite) {
				t.Fatalf("Write = %v, want %v", err, c.wantWrite)
			}
			if len(acks) != len(c.wantAck) || (len(acks) == 1 && !errors.Is(acks[0], c.wantAck[0])) {
				t.Errorf("acks %v, want %v", acks, c.wantAck)
			}
			if got := seqs(r.Events()); len(got) != len(c.wantSeqs) {
				t.Errorf("events %v, want %v", got, c.wantSeqs)
			}
			if _, fails := r.Writes(); fails != c.wantFails {
				t.Errorf("%d failures, want %d", fails, c.wantFails)
			}
		})
	}
}

// TestRecorderReleaseAndGate: held acknowledgements come on Release in
// write order; a gated write goes on once the gate closes.
func TestRecorderReleaseAndGate(t *testing.T) {
	r := New("rec")
	r.Hold()
	var acks int
	for _, s := range []string{"1", "2"} {
		if err := r.Write(context.Background(), batch(s), func(error) { acks++ }); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-r.Arrived():
	default:
		t.Fatal("Arrived is not closed after a write")
	}
	if acks != 0 || len(r.Batches()) != 0 {
		t.Fatalf("held: %d acks, %d batches", acks, len(r.Batches()))
	}
	r.Release()
	if got := seqs(r.Events()); acks != 2 || len(got) != 2 || got[0] != "1" || got[1] != "2" {
		t.Fatalf("after Release: %d acks, events %v", acks, got)
	}
	gate := make(chan struct{})
	r.Gate(gate)
	done := make(chan error)
	go func() { done <- r.Write(context.Background(), batch("3"), func(error) {}) }()
	close(gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if w, _ := r.Writes(); w != 3 {
		t.Errorf("%d writes, want 3", w)
	}
}
